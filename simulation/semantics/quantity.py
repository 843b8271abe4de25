"""Exact Kubernetes resource quantities (``resource.Quantity``) without the kubernetes client.

The behaviour mirrors ``k8s.io/apimachinery/pkg/api/resource`` (quantity.go, suffix.go, amount.go):
``parse`` accepts exactly the strings ``ParseQuantity`` accepts and returns the value *as written*;
``canonical`` reproduces ``Quantity.String()``, including the rounding that ``ParseQuantity``
applies before anything is printed, and ``go_string`` also reproduces Go's echo of some inputs.

Deliberate departures from Go, all in the name of bounded work on hostile input: strings longer
than ``MAX_LENGTH``, decimal exponents beyond ``MAX_EXPONENT``, and values whose last non-zero
digit lies above ``10**MAX_EXPONENT`` are rejected, where Go would accept them (and, past 2**31,
silently wrap the exponent: Go's ``ParseQuantity("1e2147483648")`` was still running after 20 s).
The last rule keeps every accepted quantity's canonical spelling accepted, though that spelling
moves trailing zeros into the exponent (Go prints ``55100000000000e1000`` as ``551e1011`` and
accepts both).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Final, Literal

__all__ = [
    "BINARY_SI",
    "DECIMAL_EXPONENT",
    "DECIMAL_SI",
    "MAX_EXPONENT",
    "MAX_LENGTH",
    "Format",
    "QuantityError",
    "as_stored",
    "canonical",
    "format_of",
    "go_string",
    "normalize",
    "parse",
]

Format = Literal["BinarySI", "DecimalSI", "DecimalExponent"]
BINARY_SI: Final = "BinarySI"
DECIMAL_SI: Final = "DecimalSI"
DECIMAL_EXPONENT: Final = "DecimalExponent"
_FORMATS: Final[frozenset[str]] = frozenset({BINARY_SI, DECIMAL_SI, DECIMAL_EXPONENT})

MAX_LENGTH: Final = 512
# Wide enough that no value is refused which a spelling with an exponent of at most 1000 and
# MAX_LENGTH characters can write (the bound before values were bounded as well as spellings).
MAX_EXPONENT: Final = 1000 + MAX_LENGTH

_DIGITS: Final = frozenset("0123456789")
# Go's scanner only checks the *shape* of the suffix; interpretation happens afterwards.
_SUFFIX_SHAPE: Final = re.compile(r"[eEinumkKMGTP]*[+-]?[0-9]*", re.ASCII)
_EXPONENT_SUFFIX: Final = re.compile(r"[eE]([+-]?)([0-9]+)", re.ASCII)
_DECIMAL_SUFFIXES: Final[dict[str, int]] = {
    "n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18,
}
_DECIMAL_SYMBOLS: Final[dict[int, str]] = {exp: sym for sym, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIXES: Final[dict[str, int]] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_BINARY_SYMBOLS: Final[dict[int, str]] = {exp // 10: sym for sym, exp in _BINARY_SUFFIXES.items()}

_NANO_EXP: Final = -9
_INT64_MAX: Final = (1 << 63) - 1
# Go's fast path keeps values of at most this many decimal digits in an int64 (maxInt64Factors).
_FAST_PATH_DIGITS: Final = 18
# Headroom for canonical(): a parsed value carries at most MAX_LENGTH digits times 2**60.
_MAX_VALUE_DIGITS: Final = MAX_LENGTH + 20
_MAX_VALUE_EXP: Final = MAX_EXPONENT + MAX_LENGTH


class QuantityError(ValueError):
    """A string (or value) that is not a Kubernetes quantity."""


@dataclass(frozen=True, slots=True)
class _Scanned:
    """One quantity string split the way Go's parseQuantityString splits it."""

    text: str
    negative: bool
    integer: str  # leading zeros removed, possibly empty
    fraction: str
    base: int  # 10 or 2
    exponent: int  # power of ``base`` named by the suffix
    suffix_format: Format
    has_digit: bool

    @property
    def value(self) -> Decimal:
        mantissa = int(self.integer + self.fraction or "0")
        if mantissa == 0:
            return Decimal(0)  # never "-0": Go has no negative zero
        if self.base == 2:
            mantissa <<= self.exponent
            exp10 = -len(self.fraction)
        else:
            exp10 = self.exponent - len(self.fraction)
        return Decimal(f"{'-' if self.negative else ''}{mantissa}E{exp10}")

    def _fast_path_int(self) -> int | None:
        """The unsigned int64 Go's ParseQuantity fast path would read, or None if it takes the slow path."""
        numerator = self.integer or "0"  # Go substitutes "0" for an empty numerator
        if self.base == 2:
            if self.fraction:
                return None
            precision = 15 - len(numerator) - self.exponent * 3 // 10 - 1
            scale = 0
        else:
            precision = _FAST_PATH_DIGITS - len(numerator) - len(self.fraction)
            scale = self.exponent - len(self.fraction)
        if precision < 0 or scale < _NANO_EXP:
            return None
        magnitude = int(numerator + self.fraction)
        if self.base == 2 and magnitude << self.exponent > _INT64_MAX:
            return None
        return magnitude

    def accepted_without_digits(self) -> bool:
        # Only Go's int64 fast path tolerates a mantissa with no digit ("Ki", "-", "."); the slow
        # path hands the text to inf.Dec, which insists on at least one digit.
        return self._fast_path_int() is not None

    def keeps_input_spelling(self) -> bool:
        """Whether Go's ParseQuantity caches the input verbatim as the String() result."""
        if self.text == "0":
            return True
        magnitude = self._fast_path_int()
        if magnitude is None:
            return False
        if self.base == 2:
            return magnitude & 0x07 != 0
        shifted = (self.integer or "0") + self.fraction
        scale = self.exponent - len(self.fraction)
        return scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"


def _error(text: object, why: str) -> QuantityError:
    # Never repr a hostile input whole: a huge int cannot even be converted to a string.
    if isinstance(text, int) and not isinstance(text, bool) and text.bit_length() > 256:
        shown = f"<{text.bit_length()}-bit integer>"
    elif isinstance(text, str) and len(text) > 60:
        shown = repr(text[:60]) + "..."
    else:
        shown = repr(text)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return QuantityError(f"invalid quantity {shown}: {why}")


def _as_text(text: str | int) -> str:
    # bool is an int subclass, but a YAML `true` is certainly not a quantity.
    if isinstance(text, bool) or not isinstance(text, str | int):
        raise _error(text, f"expected a string or an integer, not {type(text).__name__}")
    if isinstance(text, int):
        # Checked before str(): converting a gigantic int is itself quadratic work.
        if text.bit_length() > MAX_LENGTH * 3:
            raise _error(text, f"longer than {MAX_LENGTH} characters")
        return str(text)
    return text


def _scan(raw: str | int) -> _Scanned:
    text = _as_text(raw)
    if not text:
        raise _error(text, "empty string")
    if len(text) > MAX_LENGTH:
        raise _error(text, f"longer than {MAX_LENGTH} characters")
    end = len(text)
    pos = 0
    negative = False
    if text[0] in "+-":
        negative = text[0] == "-"
        pos = 1
    start = pos
    while pos < end and text[pos] == "0":
        pos += 1
    has_digit = pos > start
    start, pos = pos, _digits_end(text, pos)
    integer = text[start:pos]
    fraction = ""
    if pos < end and text[pos] == ".":
        start, pos = pos + 1, _digits_end(text, pos + 1)
        fraction = text[start:pos]
    has_digit = has_digit or bool(integer or fraction)
    suffix = text[pos:]
    if not _SUFFIX_SHAPE.fullmatch(suffix):
        raise _error(text, "expected <sign><digits>.<digits><suffix>")
    base, exponent, fmt = _interpret(text, suffix)
    significant = (integer + fraction).rstrip("0")
    lowest = exponent - len(fraction) + len(integer + fraction) - len(significant)
    if base == 10 and significant and lowest > MAX_EXPONENT:
        raise _error(text, f"last non-zero digit above 10**{MAX_EXPONENT}")
    scanned = _Scanned(text, negative, integer, fraction, base, exponent, fmt, has_digit)
    if not has_digit and not scanned.accepted_without_digits():
        raise _error(text, "no digits before the suffix")
    return scanned


def _digits_end(text: str, pos: int) -> int:
    """Where the run of decimal digits starting at `pos` ends."""
    while pos < len(text) and text[pos] in _DIGITS:
        pos += 1
    return pos


def _interpret(text: str, suffix: str) -> tuple[int, int, Format]:
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], BINARY_SI
    match = _EXPONENT_SUFFIX.fullmatch(suffix)
    if match is None:
        raise _error(text, f"unknown suffix {suffix!r}")
    sign, digits = match[1], match[2].lstrip("0") or "0"
    # Compare lengths first so a thousand-digit exponent never reaches int().
    if len(digits) > len(str(MAX_EXPONENT)) or int(digits) > MAX_EXPONENT:
        raise _error(text, f"exponent magnitude exceeds {MAX_EXPONENT}")
    return 10, -int(digits) if sign == "-" else int(digits), DECIMAL_EXPONENT


def _recorded_format(scanned: _Scanned) -> Format:
    # ParseQuantity demotes a binary quantity whose (rounded) magnitude is strictly between 0 and 1.
    if scanned.suffix_format == BINARY_SI:
        magnitude = abs(_round_up_to_nano(scanned.value))
        if 0 < magnitude < 1:
            return DECIMAL_SI
    return scanned.suffix_format


def parse(text: str | int, *, strict: bool = False) -> Decimal:
    """The exact value of a quantity string, as written (no rounding to 1n, no int64 cap).

    Accepts exactly what Go's ``resource.ParseQuantity`` accepts, which includes digit-less
    spellings of zero such as ``"."``, ``"-"``, ``"Ki"`` or ``"e3"``; ``strict=True`` rejects
    those.  An ``int`` (not ``bool``) is read as its decimal spelling.
    """
    scanned = _scan(text)
    if strict and not scanned.has_digit:
        raise _error(text, "no digits")
    return scanned.value


def format_of(text: str | int) -> Format:
    """The ``Format`` that Go's ``ParseQuantity`` records for ``text``."""
    return _recorded_format(_scan(text))


def normalize(text: str | int) -> str:
    """The canonical spelling of ``text``: ``canonical(parse(text), format_of(text))``.

    Equal quantities normalize to equal strings.  Go's ``String()`` agrees except where it echoes
    the input verbatim (see ``go_string``).
    """
    scanned = _scan(text)
    return canonical(scanned.value, _recorded_format(scanned))


def go_string(text: str | int) -> str:
    """Exactly ``resource.MustParse(text).String()``, including Go's echo of "canonical-looking" input.

    Go's int64 fast path keeps the original text when it passes a loose canonicality check, so
    "+1", "01", "1E3" or "1.234k" come back unchanged instead of as "1", "1", "1e3", "1234".
    """
    scanned = _scan(text)
    if scanned.keeps_input_spelling():
        return scanned.text
    return canonical(scanned.value, _recorded_format(scanned))


def _check_format(fmt: str) -> Format:
    if fmt == BINARY_SI:
        return BINARY_SI
    if fmt == DECIMAL_SI:
        return DECIMAL_SI
    if fmt == DECIMAL_EXPONENT:
        return DECIMAL_EXPONENT
    raise QuantityError(f"unknown quantity format {fmt!r}; expected one of {sorted(_FORMATS)}")


def _split(value: Decimal) -> tuple[int, int]:
    """``value`` as ``(unscaled, exp10)`` integers, refusing values that would be costly to expand."""
    if not isinstance(value, Decimal) or not value.is_finite():
        raise _error(value, "expected a finite decimal.Decimal")
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)  # finite, so never 'n', 'N' or 'F'
    if len(digits) > _MAX_VALUE_DIGITS or abs(exponent) > _MAX_VALUE_EXP:
        raise _error(value, "magnitude or precision out of supported range")
    unscaled = int("".join(map(str, digits)) or "0")
    return (-unscaled if sign else unscaled), exponent


def _round_up_to_nano(value: Decimal) -> Decimal:
    unscaled, exponent = _split(value)
    if exponent >= _NANO_EXP:
        return value
    # Go rounds *away from zero* so that a tiny non-zero request never becomes zero.
    quotient, remainder = divmod(abs(unscaled), 10 ** (_NANO_EXP - exponent))
    quotient += remainder != 0
    return Decimal(f"{'-' if unscaled < 0 else ''}{quotient}E{_NANO_EXP}")


def as_stored(value: Decimal, fmt: str) -> Decimal:
    """The value Go's ``Quantity`` holds for ``value``: rounded up to 1n, binary ones capped to int64."""
    checked = _check_format(fmt)
    rounded = _round_up_to_nano(value)
    if checked == BINARY_SI and abs(rounded) > _INT64_MAX:
        return Decimal(_INT64_MAX).copy_sign(rounded)
    return rounded


def _strip_factors(magnitude: int, factor: int) -> tuple[int, int]:
    times = 0
    while magnitude >= factor and magnitude % factor == 0:
        magnitude //= factor
        times += 1
    return magnitude, times


def canonical(value: Decimal, fmt: str) -> str:
    """Go's ``Quantity.String()`` for a quantity of this value and format.

    ``value`` is first brought to what ``ParseQuantity`` would store (see ``as_stored``).  The
    output is the pure canonical form; ``go_string`` additionally mimics Go's echo of the input.
    """
    checked = _check_format(fmt)
    stored = as_stored(value, checked)
    if stored == 0:
        return "0"
    unscaled, exponent = _split(stored)
    sign = "-" if unscaled < 0 else ""
    magnitude = abs(unscaled)

    if checked == BINARY_SI:
        # Small or fractional binary amounts are printed in decimal rather than rounded.
        whole, fraction = (magnitude * 10**exponent, 0) if exponent >= 0 else divmod(magnitude, 10**-exponent)
        if whole < 1024 or fraction:
            checked = DECIMAL_SI
        else:
            mantissa, power = _strip_factors(whole, 1024)
            # Unknown binary powers (only 1024**0 can occur after the cap) print with no suffix.
            return f"{sign}{mantissa}{_BINARY_SYMBOLS.get(power, '')}"

    mantissa, zeros = _strip_factors(magnitude, 10)
    exponent += zeros
    shift = exponent % 3  # Python's floor modulo moves the exponent *down* to a multiple of 3
    mantissa *= 10**shift
    exponent -= shift
    if checked == DECIMAL_EXPONENT:
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    # Go ignores the failed suffix lookup for exponents above 18, dropping the suffix entirely.
    return f"{sign}{mantissa}{_DECIMAL_SYMBOLS.get(exponent, '')}"
