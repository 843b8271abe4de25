"""YAML scalars and the JSON value `kubectl apply` sends for each (sigs.k8s.io/yaml: go-yaml v2's YAML 1.1
typing, then Go's JSON encoder). The unit test holds the reader to this table; the e2e test holds the table
to what a real API server stores."""

from __future__ import annotations

# kubectl refuses the document (JSON has no NaN or infinity; the text does not fit the explicit tag).
REFUSED = object()

CASES: list[tuple[str, object]] = [
    # YAML 1.1 booleans and nulls
    ("yes", True), ("Yes", True), ("on", True), ("ON", True), ("y", True), ("true", True),
    ("no", False), ("off", False), ("N", False), ("False", False),
    ("~", None), ("null", None), ("", None),
    # Go's strconv.ParseInt with base 0, underscores removed
    ("0755", 493), ("0x1F", 31), ("0o17", 15), ("0b101", 5), ("+1", 1), ("-0x10", -16), ("1_000", 1000),
    ("12345678901234567890", 12345678901234567890),  # past int64: ParseUint
    # Not an integer (08 is no octal): go-yaml's float pattern, then an integral float is written as an integer
    ("08", 8), ("1e3", 1000), ("1E3", 1000), ("1.", 1), (".5", 0.5), ("1.10", 1.1), ("-1.5e-3", -0.0015),
    ("123456789012345678901234", 1.2345678901234568e23),  # from 1e21 Go writes an exponent: a float
    # Strings: go-yaml v2 keeps dates, sexagesimal and overflowing floats as text
    ("2024-01-01", "2024-01-01"), ("2024-01-01T10:00:00Z", "2024-01-01T10:00:00Z"), ("1:30", "1:30"),
    ("1e400", "1e400"), ("0x", "0x"), ("1.2.3", "1.2.3"), ("'on'", "on"), ('"0755"', "0755"),
    # Explicit tags
    ("!!str 1", "1"), ("!!float 1", 1), ("!!int 0x10", 16), ("!!bool yes", True), ("!custom 5", "5"),
    (".inf", REFUSED), ("-.Inf", REFUSED), (".nan", REFUSED), ("!!int twelve", REFUSED),
]

# Keys are typed as values are, then named: `y` and `on` become "true".
KEY_CASES: list[tuple[str, object]] = [
    ("y", "true"), ("on", "true"), ("off", "false"), ("10", "10"), ("0x1F", "31"), ("1.5", "1.5"),
    ("1e3", "1000"), ("1e7", "1e+07"), ("'on'", "on"), ("~", REFUSED),
]
