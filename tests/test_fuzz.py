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


def test_structured_inputs_replay() -> None:
    data = bytes(range(256)) * 4
    first = targets.mutated_documents(provider.Bytes(data))
    assert targets.mutated_documents(provider.Bytes(data)) == first
    assert targets.review(provider.Bytes(data)) == targets.review(provider.Bytes(data))


# Inputs the fuzzers found, each once a traceback or a wrong answer (see README "Fuzzing").
REGRESSIONS: list[tuple[str, bytes]] = [
    ("loader", b"kind: [NodeOverlay]\nmetadata: {name: a}\n"),
    ("loader", b"apiVersion: v1\nkind: {a: 1}\nitems: []\n"),
    # Canonical forms past the exponent bound (see test_canonical_form_past_the_exponent_bound).
    ("quantity", b"\0" + b"1" + b"0" * 38 + b"E" + b"0" * 70 + b"1000"),
    ("quantity", b"\0" + b"551" + b"0" * 11 + b"E" + b"0" * 16 + b"1000"),
]


def test_canonical_form_past_the_exponent_bound() -> None:
    """What the quantity target found: an accepted quantity whose canonical spelling the parser
    refuses, because trailing zeros move into the exponent past MAX_EXPONENT."""
    text = "551" + "0" * 11 + "e1000"
    assert quantity.parse(text) == Decimal(551) * Decimal(10) ** 1011
    assert quantity.normalize(text) == "551e1011"
    with pytest.raises(quantity.QuantityError):
        quantity.parse("551e1011")


@pytest.mark.parametrize(("target", "data"), REGRESSIONS)
def test_regression(target: str, data: bytes) -> None:
    targets.TARGETS[target](data)
