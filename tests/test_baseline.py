"""The existing objects' own findings (`Prepared.judged`) are made only when a request needs them: an edit (the
ratchet), a NodePool change, a request run whole. A new overlay judged against many existing ones (`check
--existing`, one admission) never needs them, and its findings are those of a snapshot that made them first."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from simulation import evaluate as ev
from simulation import once
from simulation.semantics import catalog as cat


def _catalog() -> cat.Catalog:
    offerings = (cat.Offering("z-a", "spot", 1.0), cat.Offering("z-a", "on-demand", 2.0))
    return cat.Catalog(tuple(cat.InstanceType(f"{f}.large", {"family": f}, {"cpu": "2"}, offerings)
                             for f in ("m5", "c5")), "generated")


def _overlay(name: str, price: str, weight: int = 10, family: str = "m5") -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
            "spec": {"requirements": [{"key": "family", "operator": "In", "values": [family]}], "price": price,
                     "weight": weight}}


def _pool(name: str) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": {}}


# a and b clash at one weight (Karpenter drops a); c is shadowed by b; d is invalid.
EXISTING = [_overlay("a", "0.5", 10), _overlay("b", "0.6", 10), _overlay("c", "0.7", 5),
            _overlay("d", "cheap", 10, "c5")]


def _prepared() -> ev.Prepared:
    return ev.prepare([ev.Document(o, i, False) for i, o in enumerate(EXISTING)], _catalog())


def _facts(report: ev.Report) -> list[tuple[str, str, str, tuple[str, ...]]]:
    return [(f.code, str(f.severity), f.obj.name, tuple(r.name for r in f.related)) for f in report.findings]


# (candidates, whether the baseline is needed, the findings: code, severity, object, related)
CASES: dict[str, tuple[list[dict[str, Any]], bool, list[tuple[str, str, str, tuple[str, ...]]]]] = {
    "a new overlay clashing with two": (
        [_overlay("n", "0.4", 10)], False,
        [("same-weight-conflict", "error", "a", ("n",)), ("same-weight-conflict", "error", "b", ("n",)),
         ("shadowed", "warning", "c", ("n",))]),
    "a new overlay on cells of its own": ([_overlay("n", "0.4", 10, "c5")], False, []),
    "a new overlay under the crowd": ([_overlay("n", "0.4", 1)], False, [("shadowed", "warning", "n", ("b", "c"))]),
    "an edit keeping its clash (ratcheted)": (
        [_overlay("b", "0.65", 10)], True,
        [("same-weight-conflict", "warning", "a", ("b",)), ("shadowed", "warning", "c", ("b",))]),
    "an edit still invalid (ratcheted)": ([_overlay("d", "cheaper", 10, "c5")], True,
                                          [("schema", "warning", "d", ())]),
    "a NodePool change": ([_pool("extra")], True, []),
}


@pytest.mark.parametrize("name", CASES)
def test_the_baseline_is_made_only_where_a_request_needs_it(name: str) -> None:
    candidates, needed, expected = CASES[name]
    docs = [ev.Document(o, 100 + i) for i, o in enumerate(candidates)]
    lazy, made = _prepared(), ev.warmed(_prepared())

    report = ev.evaluate(docs, lazy)

    assert once.made(lazy.judged, "found") is needed
    assert _facts(report) == _facts(ev.evaluate(docs, made)) == expected


def test_the_baseline_is_the_existing_objects_run_whole() -> None:
    prepared = _prepared()
    whole = ev.evaluate([ev.Document(o, i) for i, o in enumerate(EXISTING)], ev.prepare([], _catalog()))
    assert _facts(whole) and prepared.baseline == whole.findings
    assert prepared.ratchet == {f.identity() for f in whole.findings if str(f.severity) == "error"}


def test_a_servers_snapshot_makes_it_before_any_request() -> None:
    prepared = _prepared()
    assert not once.made(prepared.judged, "found")
    assert once.made(ev.warmed(prepared).judged, "ratchet")


def test_a_servers_snapshot_imports_the_request_path() -> None:
    # Importing the incremental analysis was most of a webhook's first admission (a long requirement list's p99).
    code = ("import sys; from simulation import evaluate as ev; from simulation.semantics import catalog as cat; "
            "p = ev.prepare([], cat.default()); before = 'simulation.analysis.incremental' in sys.modules; "
            "ev.warmed(p); print(before, 'simulation.analysis.incremental' in sys.modules)")
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert ran.stdout.split() == ["False", "True"]


def test_a_snapshot_for_one_new_overlay_makes_no_baseline() -> None:
    # A price ladder on m5 and a new top rung: only the rungs its findings read are in the snapshot (the top five,
    # which it shadows and is named by: below them each rung's shadowed finding names five others first), and no
    # baseline is made.
    ladder = [ev.Document(_overlay(f"l{w}", f"0.{w}", w), w) for w in range(1, 9)]
    new = ev.Document(_overlay("z", "0.1", 9), 100)
    narrowed = ev.prepare(ladder, _catalog(), candidates=[new])

    report = ev.evaluate([new], narrowed)

    assert set(narrowed.overlays) == {"l8", "l7", "l6", "l5", "l4"}
    assert not once.made(narrowed.judged, "found")
    higher = ["l5", "l6", "l7", "l8", "z"]
    assert _facts(report) == _facts(ev.evaluate([new], ev.warmed(ev.prepare(ladder, _catalog())))) == [
        ("shadowed", "warning", f"l{w}", tuple(higher[w - 4:])) for w in range(4, 9)]
