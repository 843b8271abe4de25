"""simulation.quantity against the kubernetes client's parse_quantity and against Go's semantics.

The Python client is a convenient oracle for *values*, but it is not Go: it leans on ``Decimal()``
and so accepts whitespace, underscores, NaN, non-ASCII digits and stacked suffixes, and it rejects
the digit-less zeros Go tolerates.  Wherever the two disagree the tests follow Go
(k8s.io/apimachinery/pkg/api/resource/quantity.go) and say so next to the case.  The expected
canonical strings below were checked against ParseQuantity/String() built from that package.
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes.utils import parse_quantity as _untyped_client_parse_quantity

from simulation.semantics.quantity import (
    BINARY_SI,
    DECIMAL_EXPONENT,
    DECIMAL_SI,
    MAX_EXPONENT,
    QuantityError,
    as_stored,
    format_of,
    go_string,
    normalize,
    parse,
)
from tests.strategies import examples

INT64_MAX = (1 << 63) - 1
client_parse_quantity: Callable[[Any], Decimal] = _untyped_client_parse_quantity


def oracle(text: Any) -> Decimal | None:
    """The client's value for ``text``, or None if it rejects it.

    The client multiplies in the ambient 28-digit context, so a long mantissa with a suffix comes
    back rounded; a wide context makes its answer exact, which is the behaviour we compare with.
    """
    with decimal.localcontext() as ctx:
        ctx.prec = 5000
        try:
            result = client_parse_quantity(text)
        except (ValueError, ArithmeticError):
            return None
    return result


def try_parse(text: Any) -> Decimal | None:
    try:
        return parse(text)
    except QuantityError:
        return None


# --------------------------------------------------------------------------------------------
# (1) Tables checked against the client oracle
# --------------------------------------------------------------------------------------------

VALID = [
    # plain numbers and every number shape in the grammar
    "0", "00", "-0", "+0", "0.0", "1", "+1", "-1", "01", "007", "1.", "-1.", ".5", "+.5", "-.5",
    "1.5", "0.001", "123.456", "9223372036854775807", "9223372036854775808", "-9223372036854775809",
    "12345678901234567890123456789012345678901234567890",
    # decimal SI suffixes
    "5n", "4u", "3m", "1k", "50k", "7M", "6G", "5T", "40T", "300T", "2P", "1E", "12E", "1.01E",
    "0.1m", "0.1n", "3.001n", "1.G", "100.035k", "10.035M", "7.123456M", "6.987654321G", "-2.5P",
    "1000m", "1500m", "1000E",
    # binary SI suffixes
    "1Ki", "8Ki", "7Mi", "6Gi", "5Ti", "4Pi", "3Ei", "9Ei", "-8Ei", "0.5Gi", "1.5Gi", "0.1Ki",
    ".001Ki", ".000000000001Ki", "100.035Ki", "0.025Ti", "1.Ki", "9223372036854775807Ki",
    "1023.9999999999Ki", "-1.5Mi", "0Ki", "0Ei",
    # decimal exponents
    "1e3", "1E3", "1e+3", "1E-3", "1e0", "1e-0", "1e03", "0.5e-2", "1.2e3", "1.3E+6", "1.40e9",
    "1.53E12", "1.7E18", "1.1E-9", "1.e3", ".5e1", "-1e21", "1e-10", "1e1000", "1e-1000", "0e9",
]

# Rejected by Go and by the client alike.
INVALID = [
    "", "1.2.3", "1.1.M", "1+1.0M", "1-", "--1", "+-1", "1..", "..1",
    # unknown or malformed suffixes
    "1KiB", "1ki", "1mi", "0.1mi", "0.1am", "1i", ".5i", "-3.01i", "1ei", "1EE", "1e", "1E+",
    "1e-", "-3.01e-", "1e+-3", "1e1.5", "1e3.", "1k5", "1Ki3", "1.5.e3", "aoeu", "Non-Numeric",
    "0x10", "0b1", "1/2", "1,5", "x", "1x",
    # digit-less mantissas that leave Go's int64 fast path: inf.Dec then wants a digit
    # (ParseQuantity in quantity.go falls through to amount.SetString)
    "Pi", "Ei", ".Ei", "-Ei", "e-10", "E-12", "-.E-12",
]

# Go's ParseQuantity (quantity.go) strips sign and leading zeros before looking for digits and
# its int64 fast path never insists on one, so these are zero there; the client rejects them.
GO_ONLY_ZEROS = ["-", "+", ".", "-.", "+.", "Ki", "Mi", "Gi", "Ti", ".Ki", "-Ki", "k", "m", "n",
                 "E", "e3", "E3", "-e3", "e-9", "e+0"]

# The client accepts these because it hands the number to Decimal() or peels off one suffix
# letter at a time; Go's scanner (parseQuantityString in quantity.go) and suffix table
# (suffix.go) reject every one of them.
CLIENT_ONLY = [
    " 1", "1 ", "\t1", "1\n", " 1Ki", "1_000", "1_0Ki", "NaN", "nan", "sNaN", "Infinity", "inf",
    "-inf", "\u0661", "\uff11", "\u0663Ki", "1K", "1e3k", "1E3M", "1.5e3Gi", "1e3Ki", "1E3E",
]


@pytest.mark.parametrize("text", VALID)
def test_valid_strings_match_the_client_exactly(text: str) -> None:
    expected = oracle(text)
    assert expected is not None, f"oracle unexpectedly rejects {text!r}"
    got = parse(text)
    assert isinstance(got, Decimal)
    assert got == expected
    negated = "-" + text.lstrip("+-")
    assert parse(negated) == oracle(negated) == expected.copy_abs().copy_negate()


@pytest.mark.parametrize("text", INVALID)
def test_invalid_strings_are_rejected_by_both(text: str) -> None:
    assert oracle(text) is None
    with pytest.raises(QuantityError, match="invalid quantity"):
        parse(text)


@pytest.mark.parametrize("text", GO_ONLY_ZEROS)
def test_go_accepts_digitless_mantissas_as_zero(text: str) -> None:
    assert parse(text) == 0
    assert normalize(text) == go_string(text) == "0"
    with pytest.raises(QuantityError, match="no digits"):
        parse(text, strict=True)


@pytest.mark.parametrize("text", CLIENT_ONLY)
def test_go_rejects_what_only_the_client_accepts(text: str) -> None:
    with pytest.raises(QuantityError):
        parse(text)


def test_error_message_names_the_string() -> None:
    with pytest.raises(QuantityError) as info:
        parse("12Kb")
    assert "'12Kb'" in str(info.value)
    assert "\n" not in str(info.value)
    assert isinstance(info.value, ValueError)


def test_long_mantissas_stay_exact() -> None:
    # Past 28 significant digits the client rounds under the default context; we never do.
    mantissa = 123456789012345678901234567891
    assert parse(f"{mantissa}Ki") == mantissa * 1024
    assert parse(f"{mantissa}.5Ei") == (2 * mantissa + 1) * 2**59
    assert parse(f"{mantissa}n") == Decimal(f"{mantissa}E-9")


@pytest.mark.parametrize("value", [0, 1, -1, 1024, 10**30, -(10**40)])
def test_integers_are_read_as_their_value(value: int) -> None:
    assert parse(value) == value == oracle(value)
    assert format_of(value) == DECIMAL_SI


@pytest.mark.parametrize("bad", [True, False, 1.5, None, Decimal(1), b"1", ["1"]])
def test_non_string_non_int_is_rejected(bad: Any) -> None:
    with pytest.raises(QuantityError):
        parse(bad)


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        ("1", DECIMAL_SI), ("0", DECIMAL_SI), ("1k", DECIMAL_SI), ("5n", DECIMAL_SI),
        ("1Ki", BINARY_SI), ("0Ki", BINARY_SI), (".5Ki", BINARY_SI), ("-1.5Gi", BINARY_SI),
        ("1e3", DECIMAL_EXPONENT), ("1E-3", DECIMAL_EXPONENT), ("e3", DECIMAL_EXPONENT),
        # ParseQuantity demotes binary amounts strictly between 0 and 1 (quantity_test.go)
        ("0.000000000001Ki", DECIMAL_SI), ("-0.0001Ki", DECIMAL_SI),
    ],
)
def test_format_of(text: str, fmt: str) -> None:
    assert format_of(text) == fmt


# Values as Go stores them after parsing: TestQuantityParse in quantity_test.go.
@pytest.mark.parametrize(
    ("text", "stored", "fmt"),
    [
        ("3.001n", "4e-9", DECIMAL_SI),
        ("1.1E-9", "2e-9", DECIMAL_EXPONENT),
        ("0.0000000005", "1e-9", DECIMAL_SI),
        ("0.5e-9", "1e-9", DECIMAL_EXPONENT),
        ("0.00000012345", "124e-9", DECIMAL_SI),
        ("9Ei", str(INT64_MAX), BINARY_SI),
        ("9223372036854775807Ki", str(INT64_MAX), BINARY_SI),
        ("12E", "12e18", DECIMAL_SI),
        ("100.035Ki", "102435.84", BINARY_SI),
        ("0.000000000001Ki", "2e-9", DECIMAL_SI),
        ("1.G", "1e9", DECIMAL_SI),
    ],
)
def test_stored_value_matches_go(text: str, stored: str, fmt: str) -> None:
    for sign in (1, -1):
        spelled = text if sign == 1 else "-" + text
        assert format_of(spelled) == fmt
        assert as_stored(parse(spelled), format_of(spelled)) == sign * Decimal(stored)


# --------------------------------------------------------------------------------------------
# (2) Properties
# --------------------------------------------------------------------------------------------

SIGNS = st.sampled_from(["", "+", "-"])
DIGITS = st.text(alphabet="0123456789", min_size=1, max_size=24)
MAYBE_DIGITS = st.text(alphabet="0123456789", max_size=12)
NUMBERS = st.one_of(
    DIGITS,
    st.builds("{}.{}".format, DIGITS, MAYBE_DIGITS),
    st.builds(".{}".format, DIGITS),
)
SUFFIXES = st.one_of(
    st.sampled_from(["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]),
    st.builds(
        "{}{}{}{}".format,
        st.sampled_from("eE"),
        SIGNS,
        st.sampled_from(["", "0", "00"]),
        st.integers(0, 40).map(str),
    ),
)
GRAMMAR_VALID = st.builds("{}{}{}".format, SIGNS, NUMBERS, SUFFIXES)
JUNK = st.one_of(
    st.text(
        alphabet=st.sampled_from([*"0123456789.+-eEinumkKMGTPix _\t", "\u0661", "\uff11", "\uff2b"]),
        max_size=12,
    ),
    st.text(max_size=12),
)

# An independent transcription of what Go's scanner and suffix table accept.
GO_SHAPE = re.compile(
    r"[+-]?(?P<mantissa>[0-9]*(?:\.[0-9]*)?)(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE](?P<exp>[+-]?[0-9]+))?",
    re.ASCII,
)


def mantissa_has_digit(text: str) -> bool:
    match = GO_SHAPE.fullmatch(text)
    return match is not None and any(ch in "0123456789" for ch in match["mantissa"])


DECIMAL_POWERS = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def lowest_digit_power(match: re.Match[str]) -> int | None:
    """The power of ten of the last non-zero digit of a decimal quantity; None for zero or a binary suffix."""
    suffix = match["suffix"] or ""
    if suffix.endswith("i"):
        return None
    mantissa = Decimal(match["mantissa"]).as_tuple()
    written = "".join(map(str, mantissa.digits))
    if not written.strip("0"):
        return None
    assert isinstance(mantissa.exponent, int)
    power = int(match["exp"]) if match["exp"] is not None else DECIMAL_POWERS[suffix]
    return mantissa.exponent + len(written) - len(written.rstrip("0")) + power


def go_accepts(text: str) -> bool:
    """Whether the parser must accept `text`: what Go's ParseQuantity accepts, less the two bounds the
    parser adds on purpose (Go accepts past them and, beyond 2**31, wraps the exponent). An exponent
    suffix's magnitude is at most MAX_EXPONENT (1512), and so is the power of ten of a decimal value's
    last non-zero digit, however it is spelled: `1e1512`, `0.1e1512` and `15e1512` pass (the last is
    above 10**1512, but its last non-zero digit is not), `10e1512` and `1000e1510` do not."""
    match = GO_SHAPE.fullmatch(text)
    if not text or match is None:
        return False
    exponent = int(match["exp"]) if match["exp"] else None
    if exponent is not None and abs(exponent) > MAX_EXPONENT:
        return False
    if mantissa_has_digit(text):
        lowest = lowest_digit_power(match)
        return lowest is None or lowest <= MAX_EXPONENT
    # No digit at all: only Go's int64 fast path copes (ParseQuantity in quantity.go).
    return match["suffix"] not in ("Pi", "Ei") and (exponent is None or exponent >= -9)


@pytest.mark.parametrize(("text", "accepted"), [
    (f"1e{MAX_EXPONENT}", True),
    (f"0.1e{MAX_EXPONENT}", True),
    (f"1.5e{MAX_EXPONENT}", True),
    (f"100e{MAX_EXPONENT - 2}", True),
    (f"-1e-{MAX_EXPONENT}", True),
    (f"0e{MAX_EXPONENT}", True),
    ("1" + "0" * 20 + f"e{MAX_EXPONENT - 20}", True),
    (f"10e{MAX_EXPONENT}", False),
    (f"15e{MAX_EXPONENT}", True),
    (f"-1000e{MAX_EXPONENT - 2}", False),
    ("1" + "0" * 21 + f"e{MAX_EXPONENT - 20}", False),
    (f"1e{MAX_EXPONENT + 1}", False),
    (f"1e-{MAX_EXPONENT + 1}", False),
    (f"0e{MAX_EXPONENT + 1}", False),
])
def test_bounds_of_go_accepts_are_the_parsers(text: str, accepted: bool) -> None:
    assert go_accepts(text) == accepted
    assert (try_parse(text) is not None) == accepted


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(GRAMMAR_VALID)
def test_grammar_strings_match_the_client(text: str) -> None:
    assert go_accepts(text)
    got = parse(text)
    assert got == oracle(text)
    fmt = format_of(text)
    stored = as_stored(got, fmt)
    # Re-parsing the canonical string gives back the stored value, except where Go's String()
    # drops an unknown decimal suffix (exponents above 18; see CanonicalizeBytes in quantity.go).
    if not (fmt == DECIMAL_SI and abs(stored) >= Decimal("1e21")):
        assert as_stored(parse(normalize(text)), format_of(normalize(text))) == stored
    assert normalize(normalize(text)) == normalize(text)
    assert go_string(go_string(text)) == go_string(text)
    # Go only echoes input that its exact int64 path stored unrounded; otherwise it canonicalizes.
    if go_string(text) == text:
        assert got == stored
    else:
        assert go_string(text) == normalize(text)


@settings(max_examples=examples(600), deadline=None)
@given(JUNK)
def test_junk_is_parsed_like_go_and_the_client(text: str) -> None:
    mine = try_parse(text)
    assert (mine is not None) == go_accepts(text)
    if mine is None:
        return
    theirs = oracle(text)
    if mantissa_has_digit(text):
        assert theirs == mine  # inside Go's grammar the client must agree on the value
    else:
        assert mine == 0  # Go-only digit-less zero (see GO_ONLY_ZEROS)


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(min_value=-(10**60), max_value=10**60))
def test_integer_property(value: int) -> None:
    assert parse(value) == value == parse(str(value))
    assert normalize(value) == normalize(str(value))
