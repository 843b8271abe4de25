"""One new candidate against many existing overlays reads only those its findings depend on (analysis/needed.py):
the overlays ahead of it that cover its cells and that its `shadowed` finding names, the overlays behind it whose
`shadowed` finding may name it, and what their verdicts read. Its findings are those of a snapshot of every one."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulation import evaluate as ev
from simulation.analysis import needed
from simulation.semantics import catalog as cat
from simulation.semantics import clash
from tests.strategies import BREAKAGES, examples, instance_types, requirement


def _key(report: ev.Report) -> list[tuple[Any, ...]]:
    return [(f.code, str(f.severity), f.obj, f.field, f.related, f.message, f.witness, f.hint, f.detail)
            for f in report.findings]


def _judged_alike(docs: list[ev.Document], catalog: cat.Catalog, candidate: ev.Document) -> set[str]:
    """The candidate's findings from a snapshot for it and from a whole one (asserted equal), and the existing
    overlays the first holds."""
    reached = ev.prepare(docs, catalog, candidates=[candidate])
    assert _key(ev.evaluate([candidate], reached)) == _key(ev.evaluate([candidate], ev.prepare(docs, catalog)))
    return set(reached.overlays)


@st.composite
def ladders(draw: Any) -> list[dict[str, Any]]:
    """More overlays than a `shadowed` finding names (clash.LIMIT), mostly at weights of their own, over a few
    labels: a candidate among them has winners ahead and overlays behind that it may or may not be named by."""
    docs = []
    for i in range(draw(st.integers(clash.LIMIT + 1, 3 * clash.LIMIT + 4))):
        # Mostly broad (no requirement, or one), so that many meet and cover one another.
        spec: dict[str, Any] = {"requirements": draw(st.lists(requirement(), max_size=draw(st.sampled_from(
            [0, 0, 1, 2])))), "weight": draw(st.integers(1, 60))}
        field = draw(st.sampled_from(["price", "pct", "pct", "r1", "both"]))
        if field in ("price", "both"):
            spec["price"] = draw(st.sampled_from(["0.5", "7"]))
        if field == "pct":
            spec["priceAdjustment"] = draw(st.sampled_from(["+10%", "-25%"]))
        if field in ("r1", "both"):
            spec["capacity"] = {"r1": draw(st.sampled_from(["1", "2"]))}
        if draw(st.integers(0, 5)) == 0:
            path, value = draw(st.sampled_from(BREAKAGES))
            if path == "requirement":
                spec["requirements"] = [*spec["requirements"], value]
            else:
                spec[path] = value
        # Names on both sides of the candidate's ("m..."): only those before it can excuse an overlay behind it.
        docs.append({"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
                     "metadata": {"name": f"{draw(st.sampled_from('az'))}{i:02d}"}, "spec": spec})
    return docs


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=instance_types(), existing=ladders(), new=ladders(),
       weight=st.one_of(st.sampled_from([0, 61]), st.integers(1, 60)))
def test_one_candidate_is_judged_as_against_every_existing_overlay(
        catalog: cat.Catalog, existing: list[dict[str, Any]], new: list[dict[str, Any]], weight: int) -> None:
    # At most one requirement: a broad candidate, which many meet.
    spec = {**new[0]["spec"], "weight": weight, "requirements": new[0]["spec"]["requirements"][:1]}
    candidate = {**new[0], "metadata": {"name": "m"}, "spec": spec}
    docs = [ev.Document(d, i) for i, d in enumerate(existing)]
    _judged_alike(docs, catalog, ev.Document(candidate, 100))


def _catalog() -> cat.Catalog:
    offerings = (cat.Offering("z-a", "spot", 1.0), cat.Offering("z-a", "on-demand", 2.0))
    return cat.Catalog(tuple(cat.InstanceType(f"{f}.large", {"family": f}, {"cpu": "2"}, offerings)
                             for f in ("m5", "c5", "r5")), "generated")


def _rung(name: str, weight: int, *families: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
            "spec": {"requirements": [{"key": "family", "operator": "In", "values": list(families)}],
                     "weight": weight, **(spec or {"priceAdjustment": "-1%"})}}


# A price ladder on m5 and c5: l10 at weight 10 down to l01 at weight 1.
LADDER = [_rung(f"l{w:02d}", w, "m5", "c5") for w in range(1, 11)]
LADDER_NAMES = {d["metadata"]["name"] for d in LADDER}

CASES: dict[str, tuple[list[dict[str, Any]], dict[str, Any], set[str] | None]] = {
    # Behind the top rung, each overlay has clash.LIMIT winners named before "z" once five rungs are down.
    "a new top rung reads the rungs its finding may name": (
        LADDER, _rung("z", 11, "m5", "c5"), {"l10", "l09", "l08", "l07", "l06"}),
    # Named before every rung, it is named by each shadowed one: all are read.
    "a top rung named first is named by every rung": (LADDER, _rung("a", 11, "m5", "c5"), LADDER_NAMES),
    # At the bottom, l10 covers its cells, and the first five by name are named.
    "a new bottom rung reads a cover and the first five by name": (
        LADDER[1:], _rung("z", 1, "m5"), {"l10", "l02", "l03", "l04", "l05", "l06"}),
    "a bottom rung whose cells are not covered reads every overlay ahead": (
        LADDER[1:], _rung("z", 1, "m5", "r5"), LADDER_NAMES - {"l01"}),
    "an invalid winner is passed over for the next by name": (
        [{**d, "spec": {**d["spec"], "priceAdjustment": "cheap"}} if d["metadata"]["name"] == "l03" else d
         for d in LADDER[1:]], _rung("z", 1, "m5"), {"l10", "l02", "l04", "l05", "l06", "l07"}),
    # The x rungs (c5 only) meet l10 but not the candidate; named after it, they do not excuse l10, which it
    # shadows on m5 and names.
    "winners named after the candidate excuse nothing": (
        [*(_rung(f"x{w}", 15 + w, "c5") for w in range(1, 6)), LADDER[-1]], _rung("m", 11, "m5"),
        {"x1", "x2", "x3", "x4", "x5", "l10"}),
    # y8 drops w8 (one weight, on c5): the candidate's cells are not covered, so it is not shadowed.
    "a verdict's overlay brings its weight along": (
        [_rung("y8", 8, "c5"), _rung("w8", 8, "m5", "c5")], _rung("m", 6, "m5"), {"y8", "w8"}),
    # y8 drops w8: the candidate's claim (what is clamped where) is r5 and what w8 does not take.
    "a claim left uncovered reads every overlay ahead, each with its weight": (
        [_rung("y8", 8, "m5", price="0.5"), _rung("w8", 8, "m5", "c5", price="0.7")],
        _rung("m", 1, "m5", "r5", priceAdjustment="-100"), {"y8", "w8"}),
    "an overlay of its weight that it meets: a conflict, whose hint reads every weight": (
        LADDER, _rung("z", 5, "m5"), None),
    "hugepages read the overlays around them": (LADDER, _rung("z", 11, "m5", capacity={"hugepages-2Mi": "1Gi"}),
                                                None),
    "a winner at a shared weight: whether it is applied is the merge's to say": (
        [*LADDER[1:], _rung("k", 2, "c5")], _rung("z", 1, "m5"), None),
}


@pytest.mark.parametrize("name", CASES)
def test_what_one_candidate_reads(name: str) -> None:
    existing, candidate, expected = CASES[name]
    docs = [ev.Document(d, i) for i, d in enumerate(existing)]
    new = ev.Document(candidate, 100)
    grid = ev.cells.build(_catalog(), ev._pools(docs))
    made = {n: ev.merge.entry(grid, ev.model.overlay(d.obj, d.source)) for n, d in ev._first_overlays(docs).items()}
    invalid = {n for n, d in ev._first_overlays(docs).items() if ev.check_overlay(d).invalid}
    entry = ev.merge.entry(grid, ev.model.overlay(candidate, 100))
    assert needed.needed(made, entry, lambda n: n not in invalid) == expected
    kept = _judged_alike(docs, _catalog(), new)
    assert kept == (expected if expected is not None else {d["metadata"]["name"] for d in existing})


def test_the_search_past_its_budget_is_all(monkeypatch: pytest.MonkeyPatch) -> None:
    docs = [ev.Document(d, i) for i, d in enumerate(LADDER)]
    grid = ev.cells.build(_catalog(), ev._pools(docs))
    made = {n: ev.merge.entry(grid, ev.model.overlay(d.obj, d.source)) for n, d in ev._first_overlays(docs).items()}
    entry = ev.merge.entry(grid, ev.model.overlay(_rung("z", 11, "m5", "c5"), 100))
    assert needed.needed(made, entry, lambda n: True) is not None
    monkeypatch.setattr(needed, "BUDGET", 0)
    assert needed.needed(made, entry, lambda n: True) is None
