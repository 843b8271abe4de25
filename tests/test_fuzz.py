"""The fuzz targets run briefly on every `make test` (the long runs are `make fuzz`), the engine
reports what a target raises, and every crash the fuzzers found stays fixed."""

from __future__ import annotations

import pathlib
from decimal import Decimal

import pytest

from fuzz import __main__ as driver
from fuzz import engine, provider, targets
from simulation.semantics import quantity

BRIEF_SECONDS = 4


@pytest.mark.parametrize("target", driver.TARGETS)
def test_target_runs_briefly_without_a_crash(tmp_path: pathlib.Path, target: str) -> None:
    result = driver.run(target, BRIEF_SECONDS, tmp_path)
    assert result.ok, result.log.read_text(errors="replace")[-3000:]
    assert result.inputs > 0 and 0 < result.peak_rss_mb < driver.RSS_LIMIT_MB


def test_a_failing_target_is_reported_with_its_input(tmp_path: pathlib.Path) -> None:
    def target(data: bytes) -> None:
        if len(data) > 3:
            raise ValueError("boom")

    assert engine._fallback(target, ["-max_total_time=20", f"-artifact_prefix={tmp_path}/"]) == 1
    [crash] = list(tmp_path.glob("crash-*"))
    with pytest.raises(ValueError):
        target(crash.read_bytes())


def test_targets_detect_what_they_guard_against(monkeypatch: pytest.MonkeyPatch) -> None:
    """A target that cannot fail is no test: break the code under test and watch it fail."""
    from sources import objects as loader

    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("injected")

    monkeypatch.setattr(loader.Loader, "load_text", broken)
    with pytest.raises(targets.Defect, match="internal error"):
        targets.loader(b"kind: NodeOverlay\n")


def test_the_loader_target_holds_the_reader_to_what_kubectl_can_send(monkeypatch: pytest.MonkeyPatch) -> None:
    from sources import scalars

    targets.loader(b"a: .5\nb: 1e3\n")
    monkeypatch.setattr(scalars, "_sent", lambda value, text: value)  # NaN and infinities let through
    with pytest.raises(targets.Defect, match="not JSON kubectl could send"):
        targets.loader(b"a: .nan\n")


def test_structured_inputs_replay() -> None:
    data = bytes(range(256)) * 4
    first = targets.mutated_documents(provider.Bytes(data))
    assert targets.mutated_documents(provider.Bytes(data)) == first
    assert targets.review(provider.Bytes(data)) == targets.review(provider.Bytes(data))


# Inputs the fuzzers found, each once a traceback or a wrong answer (see docs/development.md, "Fuzzing").
REGRESSIONS: list[tuple[str, bytes]] = [
    ("loader", b"kind: [NodeOverlay]\nmetadata: {name: a}\n"),
    ("loader", b"apiVersion: v1\nkind: {a: 1}\nitems: []\n"),
    # Canonical forms whose exponent, holding the trailing zeros, passed the old bound of 1000 on
    # a written exponent (see test_canonical_form_reads_back_as_in_go).
    ("quantity", b"\0" + b"1" + b"0" * 38 + b"E" + b"0" * 70 + b"1000"),
    ("quantity", b"\0" + b"551" + b"0" * 11 + b"E" + b"0" * 16 + b"1000"),
    # go-yaml reads `-_1` as -1 (underscores dropped); rapidyaml's JSON kept the string.
    ("fastyaml", b"-_1"),
    # A block sequence entry after a quoted scalar on its line: libyaml refuses it, rapidyaml read a second item.
    ("fastyaml", b'#\n    - ""  - ""'),
]

# What resource.ParseQuantity(s).String() gives in k8s.io/apimachinery v0.34.4 (the version of
# the e2e control plane), run in Go: both spellings accepted, both printed "551e1011"; the
# exponent is read with strconv.ParseInt(..., 10, 64) and truncated to int32 (suffix.go), so Go
# has no bound below 2**31.
GO_STRINGS = [
    ("55100000000000e1000", "551e1011"),
    ("551e1011", "551e1011"),
    ("5510e1010", "551e1011"),
    ("1e1001", "100e999"),
    ("1e1512", "1e1512"),
    ("1e-1001", "1e-9"),
    ("1.5e-1512", "1e-9"),
]


@pytest.mark.parametrize(("text", "go"), GO_STRINGS)
def test_canonical_form_reads_back_as_in_go(text: str, go: str) -> None:
    """What the quantity target found: `55100000000000e1000` was accepted but its canonical
    spelling `551e1011` refused. The bound is now on the value as well as the spelling, so an
    accepted quantity's canonical spelling is accepted too, with Go's value and Go's string."""
    assert quantity.go_string(text) == go
    assert quantity.normalize(go) == go
    assert quantity.as_stored(quantity.parse(go), quantity.format_of(go)) == quantity.as_stored(
        quantity.parse(text), quantity.format_of(text))


def test_values_past_the_bound_are_refused_in_every_spelling() -> None:
    # Go accepts these too: the departure left is the same for every spelling of a value.
    for text in (f"1e{quantity.MAX_EXPONENT + 1}", f"10e{quantity.MAX_EXPONENT}", "1" + "0" * 20 + "e1500"):
        with pytest.raises(quantity.QuantityError):
            quantity.parse(text)
    assert quantity.parse(f"1e{quantity.MAX_EXPONENT}") == Decimal(10) ** quantity.MAX_EXPONENT


@pytest.mark.parametrize(("target", "data"), REGRESSIONS)
def test_regression(target: str, data: bytes) -> None:
    targets.TARGETS[target](data)


def test_admission_harness_keeps_no_responses() -> None:
    """Found by the admission target's RSS climbing 4 KB an input: aiohttp's test client keeps
    every response it returns until it closes; the harness must not go through it."""
    for i in range(20):
        targets.admission(bytes([i]) * 64)
    assert not targets._webhook().client._responses
