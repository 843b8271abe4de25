"""One new candidate against many existing overlays reads only those its findings depend on (analysis/needed.py):
the overlays ahead of it that cover its cells and that its `shadowed` finding names, the overlays behind it whose
`shadowed` finding may name it, and what their verdicts read. Its findings are those of a snapshot of every one."""

from __future__ import annotations

from typing import Any
from unittest import mock

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


# Mostly broad (no requirement, or one), so that many meet and cover one another.
BROAD = st.sampled_from([0, 0, 1, 2]).flatmap(lambda size: st.lists(requirement(), max_size=size))
# Weights of their own, mostly.
SPREAD = st.integers(1, 60)
# Weights with gaps, a few overlays each: same-weight crowds, and hints' walks that pass some weights and stop.
CROWDED = st.sampled_from([1, 2, 3, 5, 6, 9])
# One or two of _catalog()'s families: overlays that meet some of the others and not the rest.
FAMILIES = st.lists(st.sampled_from(["m5", "c5", "r5"]), min_size=1, max_size=2, unique=True).map(
    lambda families: [{"key": "family", "operator": "In", "values": families}])


@st.composite
def ladders(draw: Any, weights: st.SearchStrategy[int] = SPREAD,
            requirements: st.SearchStrategy[list[dict[str, Any]]] = BROAD) -> list[dict[str, Any]]:
    """More overlays than a `shadowed` finding names (clash.LIMIT), mostly at weights of their own (or crowded at
    a few `weights`), over a few labels: a candidate among them has winners ahead and overlays behind that it may
    or may not be named by."""
    docs = []
    for i in range(draw(st.integers(clash.LIMIT + 1, 3 * clash.LIMIT + 4))):
        spec: dict[str, Any] = {"requirements": draw(requirements), "weight": draw(weights)}
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

# Overlays on c5 at weight 1, below where the walks below stop, that no candidate here meets: with them, a hint's
# walk keeps less than needed.SHARE of what the candidate reaches (past it, the reach reads them all for less).
OTHERS = [_rung(f"b{i:02d}", 1, "c5") for i in range(30)]

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
    # y8 drops w8 (one weight, on c5; y8 is valid and first at the weight): w8 is not among its winners.
    "an overlay dropped for a price stored ahead of it is left out": (
        [_rung("y8", 8, "c5"), _rung("w8", 8, "m5", "c5")], _rung("m", 6, "m5"), set()),
    # x8 drops w8, but y8 (a capacity on c5, ahead of both) leaves x8's verdict to the merge: the snapshot's merge
    # must drop w8 too (else it would shadow m).
    "a verdict's overlay brings its weight along": (
        [_rung("y8", 8, "c5", capacity={"r1": "1"}), _rung("x8", 8, "c5"), _rung("w8", 8, "m5", "c5")],
        _rung("m", 6, "m5"), {"y8", "x8", "w8"}),
    "an invalid overlay ahead drops nothing: the verdict is the merge's": (
        [_rung("y8", 8, "c5", priceAdjustment="cheap"), _rung("w8", 8, "m5", "c5")], _rung("m", 6, "m5"),
        {"y8", "w8"}),
    # y8 drops w8: the candidate's claim (what is clamped where) is r5 and what y8 does not take.
    "a claim left uncovered reads every overlay ahead but those known dropped": (
        [_rung("y8", 8, "m5", price="0.5"), _rung("w8", 8, "m5", "c5", price="0.7")],
        _rung("m", 1, "m5", "r5", priceAdjustment="-100"), {"y8"}),
    "a claim left uncovered reads an overlay whose verdict is the merge's with its weight": (
        [_rung("y8", 8, "m5", capacity={"r1": "1"}), _rung("w8", 8, "m5", "c5", price="0.7")],
        _rung("m", 1, "m5", "r5", priceAdjustment="-100"), {"y8", "w8"}),
    # zz5 (ahead of z at its weight) drops it; the hints move zz5 up past c6 and c7 (to 8) and down past c4 (to
    # 3), and z up to 6 and down to 4 (c6 and c4 do not meet it). n05 is of their weight; c2, c9 and r6 are past
    # the weights the walks reach or meet neither.
    "a same-weight conflict reads its weight and the weights its hints pass": (
        [_rung("zz5", 5, "m5", "c5"), _rung("n05", 5, "r5"), *(_rung(f"c{w}", w, "c5") for w in (2, 4, 6, 7, 9)),
         _rung("r6", 6, "r5"), *OTHERS], _rung("z", 5, "m5"), {"zz5", "n05", "c4", "c6", "c7"}),
    "an invalid overlay holds no weight for a hint": (
        [_rung("zz5", 5, "m5", "c5"), _rung("c6", 6, "c5", priceAdjustment="cheap"), _rung("c7", 7, "c5"), *OTHERS],
        _rung("z", 5, "m5"), {"zz5"}),
    # The walks keep a6 for weight 6; y6, which does not meet z, drops it: without y6 the snapshot would apply a6
    # and name it in z's shadowed finding (top covers z).
    "a hint's walk that keeps a dropped overlay keeps what drops it": (
        [_rung("top", 20, "m5"), _rung("y6", 6, "c5"), _rung("a6", 6, "m5", "c5"), _rung("l5", 5, "m5"), *OTHERS],
        _rung("z", 5, "m5"), {"top", "y6", "a6", "l5"}),
    # Past hints._WALK weights, the prepared snapshot's hint reads the weights at once (hints._Runs).
    "a hint's long walk reads every weight it passes": (
        [_rung("zz5", 5, "m5", "c5"), *(_rung(f"c{w}", w, "c5") for w in (*range(6, 30), 31)), *OTHERS],
        _rung("z", 5, "m5"), {"zz5", *(f"c{w}" for w in range(6, 30))}),
    # z is ahead of l05 (by name), stores first and drops it: l05's finding is the conflict's.
    "a candidate that drops an overlay of its weight": ([*LADDER, *OTHERS], _rung("z", 5, "m5"), LADDER_NAMES),
    "a hint's walk past needed.SHARE of the set gives way": (LADDER, _rung("z", 5, "m5"), None),
    # y5 drops w5 (one weight, on c5): w5 has no `shadowed` finding to name z.
    "an overlay behind it dropped for a price stored ahead of it is left out": (
        [_rung("y5", 5, "c5"), _rung("w5", 5, "m5", "c5")], _rung("z", 9, "m5"), set()),
    "hugepages read the overlays around them": (LADDER, _rung("z", 11, "m5", capacity={"hugepages-2Mi": "1Gi"}),
                                                None),
    # x2 drops l02, but y2 (a capacity on c5, ahead of both) leaves x2's verdict to the merge: l02 comes with its
    # weight, and the names go on to l07.
    "a winner at a shared weight brings its weight, and the next by name": (
        [*LADDER[1:], _rung("y2", 2, "c5", capacity={"r1": "1"}), _rung("x2", 2, "c5")], _rung("z", 1, "m5"),
        {"l10", "y2", "x2", "l02", "l03", "l04", "l05", "l06", "l07"}),
    "a winner dropped for a price stored ahead of it is passed over": (
        [*LADDER[1:], _rung("m", 2, "c5")], _rung("z", 1, "m5"), {"l10", "l03", "l04", "l05", "l06", "l07"}),
}


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(existing=ladders(CROWDED, FAMILIES), new=ladders(CROWDED, FAMILIES))
def test_one_candidate_in_same_weight_crowds_is_judged_as_against_every_existing_overlay(
        existing: list[dict[str, Any]], new: list[dict[str, Any]]) -> None:
    # Its same-weight conflicts (their verdicts, counts and fix hints: the free weights around both overlays), and
    # winners whose verdicts their crowds decide. Every hint's walk runs to its end: in sets this small, most walks
    # would pass needed.SHARE of the set and give way to the reach.
    candidate = {**new[0], "metadata": {"name": "m"}}
    docs = [ev.Document(d, i) for i, d in enumerate(existing)]
    with mock.patch.object(needed, "SHARE", 1.0):
        _judged_alike(docs, _catalog(), ev.Document(candidate, 100))


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
