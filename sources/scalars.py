"""YAML scalars typed as `kubectl apply` types them, then turned into the JSON value it sends.

kubectl (sigs.k8s.io/yaml) reads YAML with go-yaml v2, whose `resolve` types an untagged plain
scalar by its first character and the standard library's parsers, in this order: a fixed table
(YAML 1.1 booleans `y`/`yes`/`on`..., nulls, `.inf`/`.nan`), then `strconv.ParseInt(s, 0, 64)`
with underscores removed (so `0755` is octal, `0x1F` hex, `+1` and `1_000` integers), then
`ParseUint`, then a float pattern (`1e3`, `.5`, `1.`); anything else, dates and sexagesimal
`1:30` included, stays text. The result is marshalled to JSON: a float with an integral value
is written as an integer (`1e3` arrives as `1000`), and NaN or an infinity cannot be written at
all (kubectl refuses the document). Mapping keys become strings the way sigs.k8s.io/yaml makes
them (`true`, `10`, float keys in Go's shortest `%g` of a float32).
"""

from __future__ import annotations

import base64
import binascii
import decimal
import math
import re
import struct
from typing import Any

_TAG = "tag:yaml.org,2002:"
_INT64 = 2**63
_UINT64 = 2**64

TABLE: dict[str, Any] = {
    **dict.fromkeys(["y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"], True),
    **dict.fromkeys(["n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"], False),
    **dict.fromkeys(["", "~", "null", "Null", "NULL"], None),
    **dict.fromkeys([".nan", ".NaN", ".NAN"], math.nan),
    **dict.fromkeys([".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"], math.inf),
    **dict.fromkeys(["-.inf", "-.Inf", "-.INF"], -math.inf),
}
# What a scalar must start with to be tried as a number (go-yaml's resolveTable hints 'D' and 'S').
_NUMERIC_START = frozenset("+-0123456789")
_MAYBE_NUMBER = _NUMERIC_START | {"."}
# strconv.ParseInt with base 0: a sign, then a 0x/0o/0b prefix, a leading 0 (octal) or decimal.
_GO_INT = re.compile(r"([+-]?)(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)")
_BASES = {"x": 16, "o": 8, "b": 2}
_YAML_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_DOT_FLOAT = re.compile(r"\.[0-9]+([eE][-+]?[0-9]+)?")
# The JSON encoder writes floats from 1e21 up in exponent form, which the API server reads as a float.
_JSON_INTEGRAL = 1e21
# Go's %g with the shortest precision decides the form as if the precision were 6.
_SHORTEST_G_EXPONENT = 6
_RESOLVABLE = frozenset({"str", "bool", "int", "float", "null", "timestamp"})
_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}"
                        r"([Tt ][0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})?)?")


class Unsendable(ValueError):
    """A scalar kubectl cannot turn into JSON, or an explicit tag its text does not fit."""


def _go_int(text: str) -> int | None:
    found = _GO_INT.fullmatch(text)
    if found is None:
        return None
    sign, digits = found.groups()
    value = _digits(digits)
    value = -value if sign == "-" else value
    if -_INT64 <= value < _INT64:
        return value
    # ParseUint takes no sign.
    return value if not sign and value < _UINT64 else None


def _digits(digits: str) -> int:
    if len(digits) > 1 and digits[0] == "0":
        base = _BASES.get(digits[1].lower())
        return int(digits[2:], base) if base is not None else int(digits, 8)
    return int(digits)


def _resolve(text: str) -> tuple[str, Any]:
    """go-yaml v2's (tag, value) for an untagged plain scalar."""
    if text in TABLE:
        value = TABLE[text]
        return ("null" if value is None else "bool" if isinstance(value, bool) else "float"), value
    if not text:
        return "str", text
    first = text[0]
    if first == ".":
        if _DOT_FLOAT.fullmatch(text):
            return "float", float(text)
    elif first in _NUMERIC_START:
        plain = text.replace("_", "")
        as_int = _go_int(plain)
        if as_int is not None:
            return "int", as_int
        if _YAML_FLOAT.fullmatch(plain):
            as_float = float(plain)
            if not math.isinf(as_float):  # ParseFloat reports overflow: the text stays a string
                return "float", as_float
    return "str", text


def _sent(value: Any, text: str) -> Any:
    """The value as the API server receives it in kubectl's JSON."""
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise Unsendable(f"{text!r} is {value} in YAML, which JSON cannot hold: kubectl refuses the document")
        if value.is_integer() and abs(value) < _JSON_INTEGRAL:
            # Go writes the shortest digits that read back as the float, then zeros (not the exact binary value).
            return int(decimal.Decimal(repr(value)))
    return value


def plain(text: str) -> Any:
    """An untagged plain scalar's value."""
    # Most scalars are names and words: neither in the table nor starting like a number.
    if text and text not in TABLE and text[0] not in _MAYBE_NUMBER:
        return text
    return _sent(_resolve(text)[1], text)


def tagged(tag: str, text: str) -> Any:
    """A scalar with an explicit tag (`!!int "3"`); application tags (`!foo`) keep the text, as go-yaml does."""
    if not tag.startswith(_TAG):
        return text
    name = tag[len(_TAG):]
    if name == "binary":
        try:
            return base64.b64decode("".join(text.split()), validate=True).decode("utf-8", "replace")
        except (binascii.Error, ValueError):
            raise Unsendable(f"cannot decode {text!r} as a !!binary (base64)") from None
    if name not in _RESOLVABLE or name == "str":
        return text
    if name == "timestamp":
        if _TIMESTAMP.fullmatch(text):
            return text  # go-yaml keeps a timestamp's text where the target is untyped
        raise Unsendable(f"cannot decode !!str `{text}` as a !!timestamp")
    found, value = _resolve(text)
    if found == "int" and name == "float":
        found, value = "float", float(value)
    if found != name:
        raise Unsendable(f"cannot decode !!{found} `{text}` as a !!{name}")
    return _sent(value, text)


def key(value: Any) -> str:
    """A mapping key as the JSON member name sigs.k8s.io/yaml makes of it."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if not -_INT64 <= value < _INT64:
            raise Unsendable(f"unsupported map key {value}: kubectl refuses the document")
        return str(value)
    if isinstance(value, float):
        return _go_float32_g(value)
    raise Unsendable("a null mapping key: kubectl refuses the document")


def plain_key(text: str) -> str:
    """An untagged plain key: typed as a value is, then named."""
    if text and text not in TABLE and text[0] not in _MAYBE_NUMBER:
        return text
    found, value = _resolve(text)
    if found == "float" and (math.isnan(value) or math.isinf(value)):
        return ".nan" if math.isnan(value) else ("-.inf" if value < 0 else ".inf")
    return text if found == "str" else key(value)


def _go_float32_g(value: float) -> str:
    """strconv.FormatFloat(value, 'g', -1, 32): the fewest digits that give back the same float32,
    in exponent form below 1e-4 or from 1e6 on."""
    (single,) = struct.unpack("f", struct.pack("f", value))
    if math.isinf(single):  # past float32's range: an infinity, which sigs.k8s.io/yaml names as YAML does
        return ".inf" if single > 0 else "-.inf"
    for digits in range(1, 10):
        text = f"{single:.{digits - 1}e}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == single:
            break
    mantissa, exponent = text.split("e")
    exp = int(exponent)
    if exp < -4 or exp >= _SHORTEST_G_EXPONENT:
        return f"{mantissa.rstrip('0').rstrip('.')}e{exp:+03d}"
    decimals = max(digits - 1 - exp, 0)
    return f"{single:.{decimals}f}"

