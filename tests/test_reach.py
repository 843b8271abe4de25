"""A snapshot prepared for given candidates (a one-shot `check --existing`) holds only the existing overlays they
reach (evaluate._reach); the candidates' findings are those of a snapshot of every existing overlay."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks import shapes
from simulation import evaluate as ev
from simulation.analysis import overlaps
from simulation.semantics import catalog as cat
from tests.strategies import examples, instance_types, overlay_docs, pool_docs


def _key(report: ev.Report) -> list[tuple[Any, ...]]:
    return [(f.code, str(f.severity), f.obj, f.field, f.related, f.message, f.witness, f.hint, f.detail)
            for f in report.findings]


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=instance_types(), existing=overlay_docs(), pools=pool_docs(), new=overlay_docs(),
       replace=st.booleans(), share=st.sampled_from([ev.REACH_SHARE, 1.0]))
def test_a_snapshot_for_its_candidates_judges_them_as_a_whole_one(
        catalog: cat.Catalog, existing: list[dict[str, Any]], pools: list[dict[str, Any]], new: list[dict[str, Any]],
        replace: bool, share: float) -> None:
    for i, doc in enumerate(new):
        doc["metadata"]["name"] = f"o{i}" if replace else f"n{i}"
    docs = [ev.Document(d, i) for i, d in enumerate([*pools, *existing])]
    candidates = [ev.Document(d, 100 + i) for i, d in enumerate(new[:3])]
    # At share 1.0 the reach is taken however much of the set it is: the drawn sets are small.
    with mock.patch.object(ev, "REACH_SHARE", share):
        reached = ev.prepare(docs, catalog, candidates=candidates)
        grid = ev.cells.build(catalog, ev._pools(docs))
        reach = ev._reach(ev._first_overlays(docs), grid, candidates)[1]
    # One new candidate's snapshot may hold fewer (analysis/needed.py), never more.
    assert reach is None or set(reached.overlays) <= reach
    whole = ev.prepare(docs, catalog)
    assert _key(ev.evaluate(candidates, reached)) == _key(ev.evaluate(candidates, whole))


def _catalog() -> cat.Catalog:
    offerings = (cat.Offering("z-a", "spot", 1.0), cat.Offering("z-a", "on-demand", 2.0))
    types = [cat.InstanceType(f"{f}.large", {"family": f}, {"cpu": "2"}, offerings) for f in ("m5", "c5", "r5")]
    unpriced = (cat.Offering("z-a", "on-demand", None),)
    return cat.Catalog((*types, cat.InstanceType("p9.large", {"family": "p9"}, {"cpu": "2"}, unpriced)), "generated")


def _overlay(name: str, family: str, weight: int = 10, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
            "spec": {"requirements": [{"key": "family", "operator": "In", "values": [family]}], "weight": weight,
                     "priceAdjustment": "-10%", **spec}}


# m1 and m2 on m5; mc on m5 and c5 (so c1 and d1 on c5 are reached through it); r1 alone on r5; u1 needs a label
# the catalog lacks; d1 has DRA templates (invalid under Karpenter's CRD); more on r5, so that a reach of m5's and
# c5's is below REACH_SHARE.
EXISTING = [_overlay("m1", "m5"), _overlay("m2", "m5", 20), _overlay("c1", "c5"), _overlay("r1", "r5"),
            {**_overlay("mc", "m5"), "spec": {"requirements": [
                {"key": "family", "operator": "In", "values": ["m5", "c5"]}], "priceAdjustment": "-5%"}},
            {**_overlay("u1", "m5"), "spec": {"requirements": [
                {"key": "example.com/team", "operator": "In", "values": ["a"]}], "priceAdjustment": "-5%"}},
            _overlay("d1", "c5", dynamicResources={}), *(_overlay(f"r{i}", "r5", i) for i in range(2, 9))]

CASES: dict[str, tuple[dict[str, Any], set[str] | None]] = {
    "a new overlay on m5 reaches m5's, c5's through mc, and those without a cell": (
        _overlay("n", "m5"), {"m1", "m2", "mc", "c1", "d1", "u1"}),
    "an edit reaches from its old version too": (_overlay("c1", "x9"), {"m1", "m2", "mc", "c1", "d1", "u1"}),
    "an overlay on no type reaches those without a cell": (_overlay("n", "x9"), {"u1"}),
    "a label the catalog lacks: any same-weight overlay may conflict": (
        {**_overlay("n", "m5"), "spec": {"requirements": [{"key": "example.com/team", "operator": "In",
                                                             "values": ["b"]}], "priceAdjustment": "-1%"}}, None),
    "a preview type's price is read by name": (
        {**_overlay("n", "p9"), "spec": {"requirements": [{"key": "node.kubernetes.io/instance-type",
                                                             "operator": "In", "values": ["p9.large"]}],
                                         "price": "1.5"}}, None),
    "bindingKeys bind across cells": (_overlay("n", "m5", dynamicResources={}), None),
    "an edit of an overlay with DRA templates": (_overlay("d1", "m5"), None),
    "a NodePool changes the cells": ({"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                                      "metadata": {"name": "extra"}, "spec": {}}, None),
}


@pytest.mark.parametrize("name", CASES)
def test_the_reach_of_a_candidate(name: str) -> None:
    candidate, expected = CASES[name]
    catalog = _catalog()
    docs = [ev.Document(o, i) for i, o in enumerate(EXISTING)]
    grid = ev.cells.build(catalog, ev._pools(docs))
    _, reached = ev._reach(ev._first_overlays(docs), grid, [ev.Document(candidate, 100)])
    assert reached == expected
    prepared = ev.prepare(docs, catalog, candidates=[ev.Document(candidate, 100)])
    assert set(prepared.overlays) == (expected if expected is not None else {o["metadata"]["name"] for o in EXISTING})
    whole = ev.prepare(docs, catalog)
    assert _key(ev.evaluate([ev.Document(candidate, 100)], prepared)) == \
        _key(ev.evaluate([ev.Document(candidate, 100)], whole))


def test_a_reach_past_the_share_is_all() -> None:
    docs = [ev.Document(o, i) for i, o in enumerate(EXISTING)]
    grid = ev.cells.build(_catalog(), ev._pools(docs))
    with mock.patch.object(ev, "REACH_SHARE", 0.2):
        assert ev._reach(ev._first_overlays(docs), grid, [ev.Document(_overlay("n", "m5"), 100)])[1] is None


# The shape families (benchmarks/shapes.py) past overlaps.FEW: the whole snapshot's tables are packed, the few
# overlays a candidate needs are answered set by set.
SHAPED = 2 * overlaps.FEW


@pytest.mark.parametrize("weight", [None, 1, SHAPED // 2], ids=["generated", "lowest", "middle"])
@pytest.mark.parametrize("family", sorted(shapes.FAMILIES))
def test_one_candidate_of_each_shape_family_is_judged_as_against_every_existing_overlay(
        family: str, weight: int | None) -> None:
    made = shapes.candidate(family, SHAPED, 0)
    if weight is not None:
        made = {**made, "spec": {**made["spec"], "weight": weight}}
    docs = [ev.Document(d, i) for i, d in enumerate(shapes.FAMILIES[family](SHAPED))]
    candidates = [ev.Document(made, 10_000)]
    reached = ev.prepare(docs, cat.default(), candidates=candidates)
    whole = ev.prepare(docs, cat.default())
    assert _key(ev.evaluate(candidates, reached)) == _key(ev.evaluate(candidates, whole))


def test_a_shaped_candidate_needs_few_of_the_existing_overlays() -> None:
    # What the test above holds to the whole snapshot's answer: a reach that leaves most out, findings that name
    # the overlays kept.
    candidates = [ev.Document(shapes.candidate("ladder", SHAPED, 0), 10_000)]
    docs = [ev.Document(d, i) for i, d in enumerate(shapes.FAMILIES["ladder"](SHAPED))]
    reached = ev.prepare(docs, cat.default(), candidates=candidates)
    found = ev.evaluate(candidates, reached).findings
    named = {f.obj.name for f in found} | {r.name for f in found for r in f.related}
    assert len(reached.overlays) < overlaps.FEW
    assert named - {"zz-candidate-000"} and named - {"zz-candidate-000"} <= set(reached.overlays)
