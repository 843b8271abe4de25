"""`shadowed` findings a change puts on many unchanged overlays: a report keeps the first
clash.LIMIT of them in its order, built only that far, and counts the rest. Property tests against the
full run and against plain reference computations."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulation import evaluate as ev
from simulation import findings
from simulation.analysis import checks, overlaps, shadows, traps
from simulation.analysis import index as ix
from simulation.semantics import catalog as cat
from simulation.semantics import clash, merge
from tests import reference_support
from tests.strategies import examples, instance_types, pool_docs, requirement

_FIELDS = [merge.PRICE, merge.capacity_field("r1"), merge.capacity_field("r2")]
# Often none: an overlay over every cell shadows (or is shadowed by) every other that sets its field.
_FEW_REQUIREMENTS = st.one_of(st.just([]), st.lists(requirement(), max_size=1))


@st.composite
def below(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Many overlays under a candidate of weight 50, mostly of distinct weights (applied, not in conflict
    with each other): most set a field the candidate sets, on some of its cells, so that a candidate
    often shadows more of them than a report names."""
    docs = []
    for i in range(draw(st.integers(4, 24))):
        # One in ten at the candidate's weight or above it.
        weight = draw(st.integers(1, 40)) if draw(st.integers(0, 9)) else draw(st.sampled_from([50, 60]))
        spec: dict[str, Any] = {"requirements": draw(_FEW_REQUIREMENTS), "weight": weight}
        if draw(st.booleans()):
            spec["priceAdjustment"] = draw(st.sampled_from(["-1%", "+2"]))
        capacity = draw(st.sampled_from([None, {"r1": "1"}, {"r2": "2"}, {"r1": "3", "r2": "1"}]))
        if capacity is not None:
            spec["capacity"] = capacity
        docs.append({"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
                     "metadata": {"name": f"o{draw(st.integers(0, 99)):02d}x{i}"}, "spec": spec})
    return docs


@st.composite
def broad(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"requirements": draw(_FEW_REQUIREMENTS), "weight": 50}
    if draw(st.booleans()):
        spec["priceAdjustment"] = "-5%"
    if draw(st.booleans()) or "priceAdjustment" not in spec:
        spec["capacity"] = draw(st.sampled_from([{"r1": "9"}, {"r1": "9", "r2": "9"}]))
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
            "metadata": {"name": draw(st.sampled_from(["a-new", "o50x0", "zz-new"]))}, "spec": spec}


@pytest.mark.parametrize("few", [overlaps.FEW, 0], ids=["cutoffs", "arrays"])
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=instance_types(), existing=below(), pools=pool_docs(), doc=broad(),
       order=st.randoms(use_true_random=False))
def test_a_candidate_over_many_overlays_equals_full(few: int, catalog: cat.Catalog, existing: list[dict[str, Any]],
                                                    pools: list[dict[str, Any]], doc: dict[str, Any],
                                                    order: Any) -> None:
    """`few`: overlaps.FEW, at 0 so that the overlays a candidate empties are read from every claim below it at once
    (shadows._emptied's broad side; its narrow side tests each), as a broad candidate over thousands has them."""
    # Sources in no relation to names or Karpenter's order: a report orders by source first.
    docs = [*pools, *existing]
    order.shuffle(docs)
    prepared = ev.prepare([ev.Document(d, i) for i, d in enumerate(docs)], catalog)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(overlaps, "FEW", few)
        fast = ev.evaluate([ev.Document(copy.deepcopy(doc), 100)], prepared)
    slow = ev.evaluate([ev.Document(copy.deepcopy(doc), 100)], prepared, full=True)
    assert [f.to_json() for f in fast.findings] == [f.to_json() for f in slow.findings]


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=instance_types(), existing=below(), pools=pool_docs(), doc=broad())
def test_requests_on_one_snapshot_answer_as_each_on_its_own(catalog: cat.Catalog, existing: list[dict[str, Any]],
                                                           pools: list[dict[str, Any]], doc: dict[str, Any]) -> None:
    """A snapshot keeps what requests asked of it (the winners over an unchanged overlay, its finding's site): the
    candidate under each name on one snapshot, in turn and the first again, is reported as on a snapshot of its own
    (the overlays it shadows name the one judged, never one judged before)."""
    docs = [ev.Document(d, i) for i, d in enumerate([*pools, *existing])]
    shared = ev.prepare(docs, catalog)
    for name in ["a-new", "zz-new", "o50x0", "a-new"]:
        asked = [ev.Document({**doc, "metadata": {"name": name}}, 100)]
        alone = ev.evaluate(asked, ev.prepare(docs, catalog))
        assert [f.to_json() for f in ev.evaluate(asked, shared).findings] == [f.to_json() for f in alone.findings]


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=instance_types(), existing=below(), data=st.data())
def test_first_in_report_is_the_reports_order(catalog: cat.Catalog, existing: list[dict[str, Any]],
                                              data: st.DataObject) -> None:
    docs = data.draw(st.permutations(existing))
    prepared = ev.prepare([ev.Document(d, i) for i, d in enumerate(docs)], catalog)
    index = ix.Index.build(list(prepared.entries.values()), 1)
    positions = st.lists(st.integers(0, len(index.order) - 1), unique=True) if index.order else st.just([])
    found = {field: data.draw(positions) for field in data.draw(st.lists(st.sampled_from(_FIELDS), unique=True))}

    def key(pair: tuple[int, merge.Field]) -> tuple[Any, ...]:
        o = index.order[pair[0]].overlay
        return o.source, o.name, findings.json_path(*pair[1].path(o))

    expected = sorted(((t, field) for field, ts in found.items() for t in ts), key=key)[:clash.LIMIT]
    assert shadows._first_in_report(index, {field: index.of(ts) for field, ts in found.items() if ts}) == expected
    # Any count of a mask's first positions, across the stored prefixes of a report's order.
    every = sorted({t for ts in found.values() for t in ts}, key=index.report_rank.__getitem__)
    for count in range(len(every) + 2):
        assert index.first_in_report(index.of(every), count) == every[:count]


# Wide masks with a few bits and with many, and narrow ones (a NodePool mask: index._SMALL bits or about).
@given(st.sets(st.integers(0, 3000), max_size=3 * ix.FEW) | st.sets(st.integers(0, 130)))
def test_positions_of_a_mask(ones: set[int]) -> None:
    index = ix.Index.build([], 1)
    assert index.positions(sum(1 << i for i in ones)) == sorted(ones)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=instance_types(), existing=below(), data=st.data())
def test_shadow_is_the_finding_findings_make_builds(catalog: cat.Catalog, existing: list[dict[str, Any]],
                                                    data: st.DataObject) -> None:
    # checks.shadow builds its finding positionally unless two winners share a name (candidates so named).
    prepared = ev.prepare([ev.Document(d, i) for i, d in enumerate(existing)], catalog)
    entries = sorted(prepared.entries.values(), key=lambda e: e.name)
    e = data.draw(st.sampled_from(entries))
    field = data.draw(st.sampled_from(sorted(e.fields(), key=str))) if e.fields() else merge.PRICE
    winners = data.draw(st.lists(st.sampled_from(entries), max_size=7).map(lambda ws: sorted(ws, key=lambda w: w.name)))
    found = checks.shadow(prepared.grid, e, field, winners)
    # The site a snapshot keeps (shadows._site) gives the finding built without it.
    assert checks.shadow(prepared.grid, e, field, winners, checks.site(prepared.grid, e, field)) == found
    witness = prepared.grid.witness(e.fields().get(field, merge.EMPTY), with_offering=field == merge.PRICE)
    names = [w.name for w in winners]
    message = (f"NodeOverlay {e.name}: {field} has no effect; every cell it selects is already set by "
               f"higher-precedence {', '.join(names[:3])}{' …' if len(names) > 3 else ''} "
               f"(e.g. {witness.describe() if witness else '-'})")
    # A price field says that price overlays never stack (traps.stacked), with a hint.
    stack = traps.stacked(e.overlay, max(winners[:clash.LIMIT], key=lambda w: w.rank).overlay,
                          traps.base_price(prepared.grid, witness)) \
        if field == merge.PRICE and winners and witness is not None else None
    said, hint = stack if stack is not None else ("", "")
    assert found == findings.make("shadowed", e.overlay.ref, field.path(e.overlay), message + said,
                                  related=[w.overlay.ref for w in winners[:clash.LIMIT]], witness=witness,
                                  source=e.overlay.source, hint=hint)


def test_first_few_changes_only_the_last_message_and_detail() -> None:
    # findings.first_few and checks.shadow build findings.Finding positionally: a field added to it must be
    # passed there too.
    assert [f.name for f in dataclasses.fields(findings.Finding)] == [
        "code", "obj", "path", "message", "related", "witness", "severity", "source", "detail", "hint"]
    ref, other = findings.ObjectRef("NodeOverlay", "a"), findings.ObjectRef("NodeOverlay", "b")
    last = findings.Finding("shadowed", ref, ("spec", "price"), "m", (other,),
                            findings.Witness("p", "t", findings.Offering("z", "spot")), findings.Severity.WARNING, 3,
                            (("z", "1"),), "h")
    first = dataclasses.replace(last, message="n")
    assert findings.first_few([first, last], 7) == [first, dataclasses.replace(
        last, message="m; and 5 more such findings on other objects", detail=(("moreObjects", "5"), ("z", "1")))]
    assert findings.first_few([first, last], 2) == [first, last]


@pytest.mark.parametrize(("groups", "walk"), [(checks._GROUPS, checks._WALK), (-1, checks._WALK), (-1, 0)],
                         ids=["near", "by-name", "packed"])
@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=instance_types(), existing=below(), pools=pool_docs(), order=st.randoms(use_true_random=False))
def test_a_whole_runs_shadowed_findings_name_the_references_winners(groups: int, walk: int, catalog: cat.Catalog,
                                                                    existing: list[dict[str, Any]],
                                                                    pools: list[dict[str, Any]], order: Any) -> None:
    """The whole run reads each shadowed overlay's winners of the snapshot's checks.Above: the groups near it tested
    one by one, or (`_GROUPS` below nothing) the overlays before it read by name up to the clash.LIMIT-th that meets
    it, or (`_WALK` at nothing too) the groups asked of their packed cells: the findings and the names they list
    are the reference's."""
    docs = [*pools, *existing]
    order.shuffle(docs)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(checks, "_GROUPS", groups)
        patch.setattr(checks, "_WALK", walk)
        report = ev.evaluate([ev.Document(d, i) for i, d in enumerate(docs)], ev.prepare([], catalog))
    reference_support.assert_all(report, reference_support.expected(existing, pools, catalog))


def test_the_winners_named_are_the_first_by_name_of_every_group_met() -> None:
    """A ladder over two cell sets and one overlay over both: its winners are the first clash.LIMIT by name of
    those above it on either set, not the first in Karpenter's order nor those of one set."""
    offerings = (cat.Offering("z-a", "spot", 1.0),)
    catalog = cat.Catalog(tuple(cat.InstanceType(f"it{i}", {"family": f"f{i}"}, {"cpu": "2"}, offerings)
                                for i in range(2)), "two")

    def overlay(name: str, weight: int, *families: str) -> dict[str, Any]:
        spec = {"requirements": [{"key": "family", "operator": "In", "values": list(families)}], "weight": weight,
                "priceAdjustment": "-1%"}
        return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
                "spec": spec}

    # Names against weights: the heaviest are the last by name on f0, the first on f1.
    docs = [overlay(f"a{9 - w}", 10 + w, "f0") for w in range(4)]
    docs += [overlay(f"b{w}", 20 + w, "f1") for w in range(4)]
    docs += [overlay("c-both", 1, "f0", "f1")]
    report = ev.evaluate([ev.Document(d, i) for i, d in enumerate(docs)], ev.prepare([], catalog))
    named = {f.obj.name: [r.name for r in f.related] for f in report.findings if f.code == "shadowed"}
    assert named["c-both"] == ["a6", "a7", "a8", "a9", "b0"]
    assert named["a9"] == ["a6", "a7", "a8"]
    assert named["b0"] == ["b1", "b2", "b3"]
