"""simulation.quantity's canonical strings and its bounds, each form verified against Go's
ParseQuantity(s).String() (k8s.io/apimachinery/pkg/api/resource/quantity.go)."""

from __future__ import annotations

import time
from collections.abc import Callable
from decimal import Decimal
from functools import partial

import pytest

from simulation.semantics.quantity import (
    BINARY_SI,
    DECIMAL_EXPONENT,
    DECIMAL_SI,
    MAX_EXPONENT,
    MAX_LENGTH,
    QuantityError,
    canonical,
    format_of,
    go_string,
    normalize,
    parse,
)

# --------------------------------------------------------------------------------------------
# (3) Canonical forms (each verified against Go's ParseQuantity(s).String())
# --------------------------------------------------------------------------------------------

CANONICAL = [
    ("1000m", "1"), ("1024Mi", "1Gi"), ("0.5Gi", "512Mi"), ("1500m", "1500m"), ("1e3", "1e3"),
    ("100M", "100M"), ("1.5", "1500m"), ("2000", "2k"), ("1.5Gi", "1536Mi"), ("1000M", "1G"),
    ("1Ki", "1Ki"), ("1024Ki", "1Mi"), ("1023Ki", "1023Ki"), ("1025Ki", "1025Ki"), ("4096Pi", "4Ei"),
    (".001Ki", "1024m"), (".000001Ki", "1024u"), (".000000001Ki", "1024n"), (".000000000001Ki", "2n"),
    ("0.5Ki", "512"), ("1.5Ki", "1536"), ("1.0Ki", "1Ki"), ("1023.9999999999Ki", "1048575999999898n"),
    ("8Ei", "9223372036854775807"), ("9223372036854775807Ki", "9223372036854775807"),
    ("0", "0"), ("-0", "0"), ("0Ki", "0"), ("0.000", "0"), ("0e9", "0"),
    ("1000", "1k"), ("1024", "1024"), ("1000000", "1M"), ("1000k", "1M"), ("1.000k", "1k"),
    ("0.1m", "100u"), ("0.1n", "1n"), ("3.001n", "4n"), ("0.00000012345", "124n"), (".5", "500m"),
    ("1080m", "1080m"), ("1.08", "1080m"), ("0.001", "1m"), ("0.0005k", "500m"), ("12E", "12E"),
    ("1.01E", "1010P"), ("10.035M", "10035k"), ("6.987654321G", "6987654321"),
    ("1E-3", "1e-3"), ("1e9", "1e9"), ("1.2e3", "1200"), ("1.3E+6", "1300e3"), ("0.5e0", "500e-3"),
    ("1e0", "1"), ("1E3", "1e3"), ("1e+3", "1e3"), ("1e19", "10e18"), ("1e-10", "1e-9"),
    ("1e1000", "10e999"), ("-1e-1000", "-1e-9"), ("1.5e19", "15e18"),
    ("9223372036854775808", "9223372036854775808"), ("12345678901234567890123", "12345678901234567890123"),
    # Go prints decimal exponents above 18 without any suffix (the failed lookup in
    # CanonicalizeBytes, quantity.go, is ignored): 1000E and 10**21 both print as "1".
    ("1000E", "1"), ("1000000000000000000000", "1"), ("1000000E", "1"),
]


@pytest.mark.parametrize(("text", "expected"), CANONICAL)
def test_canonical_form(text: str, expected: str) -> None:
    assert canonical(parse(text), format_of(text)) == expected
    assert normalize(text) == expected
    negated = "-" + text.lstrip("+-")
    assert normalize(negated) == ("0" if expected == "0" else "-" + expected.lstrip("-"))


# Go's fast path keeps the input spelling when it looks canonical (quantity.go, ParseQuantity:
# `s: str`), so MustParse(s).String() echoes these; normalize() deliberately does not.
ECHOED = [
    ("+1", "1"), ("01", "1"), ("-01", "-1"), ("1E3", "1e3"), ("1e+3", "1e3"), ("1e0", "1"),
    ("1.234k", "1234"), ("+1.5e19", "15e18"), ("1.G", "1G"), ("1.", "1"), ("+1Ki", "1Ki"),
    ("01Ki", "1Ki"), ("1200", "1200"), ("1n", "1n"),
]


@pytest.mark.parametrize(("text", "canonical_form"), ECHOED)
def test_go_string_echoes_canonical_looking_input(text: str, canonical_form: str) -> None:
    assert go_string(text) == text
    assert normalize(text) == canonical_form


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1024Ki", "1Mi"), ("8Ki", "8Ki"), ("1Ei", "1Ei"), ("+1Ei", "1Ei"), ("1000", "1k"),
     ("-0", "0"), ("0.5", "500m"), ("1.5k", "1500"), ("1.5Gi", "1536Mi")],
)
def test_go_string_canonicalizes_everything_else(text: str, expected: str) -> None:
    assert go_string(text) == expected


# Direct values: TestQuantityString in quantity_test.go.
@pytest.mark.parametrize(
    ("value", "fmt", "expected"),
    [
        (1024**3, BINARY_SI, "1Gi"), (300 * 1024**2, BINARY_SI, "300Mi"), (6 * 1024, BINARY_SI, "6Ki"),
        (1001 * 1024**3, BINARY_SI, "1001Gi"), (1024**4, BINARY_SI, "1Ti"), (5, BINARY_SI, "5"),
        ("0.5", BINARY_SI, "500m"), ("1e9", DECIMAL_SI, "1G"), ("1e-3", DECIMAL_SI, "1m"),
        ("0.08", DECIMAL_SI, "80m"), ("1.08", DECIMAL_SI, "1080m"), ("1.0800", DECIMAL_SI, "1080m"),
        ("300e6", DECIMAL_SI, "300M"), ("1234567e6", DECIMAL_SI, "1234567M"),
        ("1234.567", BINARY_SI, "1234567m"), (1025, BINARY_SI, "1025"), (0, BINARY_SI, "0"),
        ("1e9", DECIMAL_EXPONENT, "1e9"), ("1e-3", DECIMAL_EXPONENT, "1e-3"),
        ("0.08", DECIMAL_EXPONENT, "80e-3"), ("300e6", DECIMAL_EXPONENT, "300e6"),
        ("3e3", DECIMAL_EXPONENT, "3e3"), ("0", DECIMAL_EXPONENT, "0"), ("1080e-9", DECIMAL_SI, "1080n"),
        ("10800e-10", DECIMAL_SI, "1080n"), ("1080e-6", DECIMAL_SI, "1080u"),
        ("1.5e-10", DECIMAL_SI, "1n"), ("-0", DECIMAL_SI, "0"),
    ],
)
def test_canonical_of_values(value: int | str, fmt: str, expected: str) -> None:
    assert canonical(Decimal(value), fmt) == expected
    if expected != "0":
        assert canonical(-Decimal(value), fmt) == "-" + expected


@pytest.mark.parametrize("fmt", ["binarySI", "", "decimal", "Decimal"])
def test_canonical_rejects_unknown_formats(fmt: str) -> None:
    with pytest.raises(QuantityError, match="format"):
        canonical(Decimal(1), fmt)


@pytest.mark.parametrize("value", [Decimal("NaN"), Decimal("Inf"), Decimal("-Inf"), Decimal("sNaN")])
def test_canonical_rejects_non_finite(value: Decimal) -> None:
    with pytest.raises(QuantityError):
        canonical(value, DECIMAL_SI)


# --------------------------------------------------------------------------------------------
# (4) Hostile input is refused quickly
# --------------------------------------------------------------------------------------------

# Generous: what this guards against (a 10**9-digit expansion, a quadratic scan) takes minutes, not seconds.
# How fast a parse is belongs to `make bench`, not to a test on a shared machine.
BUDGET_SECONDS = 5.0


def refused_quickly(call: Callable[[], object]) -> None:
    start = time.perf_counter()
    with pytest.raises(QuantityError):
        call()
    assert time.perf_counter() - start < BUDGET_SECONDS


@pytest.mark.parametrize(
    "text",
    [
        "1" * 10**6,
        "9" * (MAX_LENGTH + 1),
        "1e" + "9" * 400,
        "1e" + "0" * 400 + f"{MAX_EXPONENT + 1}",
        "1e99999999999999999999",
        "1E-99999999999999999999",
        f"1e{MAX_EXPONENT + 1}",
        f"1e-{MAX_EXPONENT + 1}",
        # Go accepts this one and wraps int32(4294967296) to 0 (suffix.go); we refuse instead.
        "1e4294967296",
        "0e2147483648",
        "1" * 300 + "." + "1" * 300 + "Ei",
    ],
)
def test_hostile_strings_are_refused_quickly(text: str) -> None:
    for call in (parse, normalize, go_string, format_of):
        refused_quickly(partial(call, text))


def test_hostile_integers_are_refused_quickly() -> None:
    huge = 10**100_000
    refused_quickly(lambda: parse(huge))
    refused_quickly(lambda: normalize(-huge))


@pytest.mark.parametrize(
    "value",
    [Decimal("1e999999999"), Decimal("1e-999999999"), Decimal("9" * 100_000), Decimal((0, (1,) * 5000, -3))],
)
def test_hostile_decimals_are_refused_quickly(value: Decimal) -> None:
    for fmt in (BINARY_SI, DECIMAL_SI, DECIMAL_EXPONENT):
        refused_quickly(partial(canonical, value, fmt))


@pytest.mark.parametrize(
    "text",
    [
        "9" * MAX_LENGTH,
        "9" * (MAX_LENGTH - 2) + "Ei",
        "0." + "0" * (MAX_LENGTH - 3) + "1",
        "." + "9" * (MAX_LENGTH - 3) + "Ei",
        f"1e{MAX_EXPONENT}",
        f"-1e-{MAX_EXPONENT}",
        "9" * (MAX_LENGTH - 6) + f"e{MAX_EXPONENT}",
        "0" * MAX_LENGTH,
    ],
)
def test_largest_accepted_inputs_are_cheap(text: str) -> None:
    start = time.perf_counter()
    value = parse(text)
    for fmt in (BINARY_SI, DECIMAL_SI, DECIMAL_EXPONENT):
        canonical(value, fmt)
    normalize(text)
    go_string(text)
    assert time.perf_counter() - start < BUDGET_SECONDS
