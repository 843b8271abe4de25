"""Property tests: crowds of alike overlays (the same spec under many names, one weight) give the same
answers as overlays told apart one by one. Karpenter's loop tests one of a run of alike overlays and
gives the rest its verdict while nothing is stored (merge.karpenter's `known`); a candidate among them takes
the incremental path, whose neighbour scans serve alike overlays once."""

from __future__ import annotations

import copy
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from simulation import evaluate as ev
from simulation.analysis import incremental, kinds
from simulation.semantics import catalog as cat
from simulation.semantics import merge
from tests.strategies import examples, instance_types, overlay_docs, pool_docs


@st.composite
def crowd(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A few specs, each under several names; the names interleave the copies in Karpenter's order."""
    specs = [d["spec"] for d in draw(overlay_docs())]
    copies = [spec for spec in specs for _ in range(draw(st.integers(1, 8)))]
    slots = draw(st.permutations(range(len(copies))))
    return [{"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": f"c{slot:02d}"},
             "spec": copy.deepcopy(spec)} for slot, spec in zip(slots, copies, strict=True)]


def _one_by_one(self: merge.Entry) -> merge.Signature:
    # Every overlay its own kind: Karpenter's loop tests each one.
    return merge.Signature((self.name,))


def _doc(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
            "spec": {"requirements": [], **spec}}


def _both(doc: dict[str, Any], prepared: ev.Prepared) -> tuple[ev.Report, ev.Report]:
    """The candidate through the incremental path and through the full run; their findings must agree."""
    fast = ev.evaluate([ev.Document(doc, 100)], prepared)
    slow = ev.evaluate([ev.Document(doc, 100)], prepared, full=True)
    assert [f.to_json() for f in fast.findings] == [f.to_json() for f in slow.findings]
    return fast, slow


ONE_TYPE = cat.Catalog((cat.InstanceType("it0", {"family": "a"}, {"cpu": "2"}, (cat.Offering("z-a", "spot", 1.0),)),),
                       "one type")


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=instance_types(), overlays=crowd(), pools=pool_docs())
# c3 meets c4 on r1; then c2's `capacity: {}` becomes the last capacity overlay, so c3's twin c1 applies.
@example(catalog=ONE_TYPE, pools=[], overlays=[_doc("c4", {"capacity": {"r1": "1"}}),
                                               _doc("c3", {"capacity": {"r1": "1"}}), _doc("c2", {"capacity": {}}),
                                               _doc("c1", {"capacity": {"r1": "1"}})])
def test_alike_overlays_get_the_verdicts_of_testing_each(catalog: cat.Catalog, overlays: list[dict[str, Any]],
                                                        pools: list[dict[str, Any]]) -> None:
    prepared = ev.prepare([ev.Document(d, i) for i, d in enumerate([*pools, *overlays])], catalog)
    entries = list(prepared.entries.values())
    grouped = merge.karpenter(entries)
    with mock.patch.object(merge.Entry, "tested", property(_one_by_one)):
        each = merge.karpenter(entries)
    assert dict(grouped.status) == dict(each.status)
    assert dict(grouped.verdicts) == dict(each.verdicts)
    assert grouped.claims == each.claims
    # What the loop records of the applied, and what the status says.
    assert grouped.applied == {n for n, s in each.status.items() if s == merge.APPLIED}


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=instance_types(), existing=crowd(), pools=pool_docs(), pick=st.integers(0, 63),
       name=st.sampled_from(["a0", "c03x", "z0", None]))
def test_one_candidate_in_a_crowd_equals_full(catalog: cat.Catalog, existing: list[dict[str, Any]],
                                             pools: list[dict[str, Any]], pick: int, name: str | None) -> None:
    """One more copy of a crowd's spec (named first, among, or last in Karpenter's order), or an edit of a
    copy (None): the same findings, and every status the fast path reports, as the full run."""
    twin = existing[pick % len(existing)]
    doc = {**twin, "metadata": {"name": twin["metadata"]["name"] if name is None else name}}
    prepared = ev.prepare([ev.Document(d, i) for i, d in enumerate([*pools, *existing])], catalog)
    fast, slow = _both(doc, prepared)
    assert {n: slow.status[n] for n in fast.status} == dict(fast.status)
    mine = doc["metadata"]["name"]
    assert [c for c in fast.outcome.claims if c.overlay == mine] == [c for c in slow.outcome.claims
                                                                     if c.overlay == mine]


@pytest.mark.parametrize("name", ["c03x", "c06x", "c07x", "c08x", "z0"])
def test_a_candidate_at_each_place_of_a_crowd(name: str) -> None:
    """Twelve copies and one more among them: it meets from eight down to none of them before it, so
    the clashes naming it on the copies after it stop at clash.LIMIT, or count "and N more"."""
    spec = {"priceAdjustment": "-10%", "capacity": {"r1": "1"}}
    existing = [_doc(f"c{i:02d}", spec) for i in range(12)]
    doc = _doc(name, spec)
    prepared = ev.prepare([ev.Document(d, i) for i, d in enumerate(existing)], ONE_TYPE)
    fast, _ = _both(doc, prepared)
    assert any(f.obj.name != name for f in fast.findings) == (name > "c07")


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=instance_types(), overlays=crowd(), pools=pool_docs(), mask=st.integers(min_value=0))
def test_kinds_split_a_mask_into_alike_overlays(catalog: cat.Catalog, overlays: list[dict[str, Any]],
                                                pools: list[dict[str, Any]], mask: int) -> None:
    index = ev.prepare([ev.Document(d, i) for i, d in enumerate([*pools, *overlays])], catalog).index
    mask &= (1 << len(index.order)) - 1

    def kind(p: int) -> tuple[object, ...]:
        e = index.order[p]
        return (e.overlay.weight, e.tested, tuple(e.fields().items()))

    seen = 0
    for first, members in index.by_kind.within(mask):
        assert members & ~mask == 0 and members & seen == 0 and first == (members & -members).bit_length() - 1
        # Every member alike; no other overlay of the mask alike.
        assert {p for p in index.positions(mask) if kind(p) == kind(first)} == set(index.positions(members))
        seen |= members
    assert seen == mask


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=instance_types(), overlays=crowd(), pools=pool_docs(), mask=st.integers(min_value=0),
       few=st.booleans())
def test_prepared_runs_cut_where_the_kind_changes(catalog: cat.Catalog, overlays: list[dict[str, Any]],
                                                  pools: list[dict[str, Any]], mask: int, few: bool) -> None:
    """What Karpenter's loop gets of the prepared overlays a change reaches, taken one by one (`few`) or from
    the index's arrays: their entries and names in its order, cut where the kind changes."""
    index = ev.prepare([ev.Document(d, i) for i, d in enumerate([*pools, *overlays])], catalog).index
    mask &= (1 << len(index.order)) - 1
    with mock.patch.object(kinds, "FEW", 10**9 if few else -1):
        positions, entries, names, cuts = incremental.prepared_runs(index, mask)
    expected = index.positions(mask)
    assert [int(p) for p in positions] == expected
    assert entries == [index.order[p] for p in expected] and names == [index.order[p].name for p in expected]
    kind = [index.by_kind.of[p] for p in expected]
    assert cuts == [i for i in range(1, len(kind)) if kind[i] != kind[i - 1]]


@settings(max_examples=examples(300), deadline=None)
@given(of=st.lists(st.integers(0, 4), min_size=1, max_size=3 * kinds.FEW), data=st.data(), limit=st.integers(1, 6))
def test_firsts_of_each_kind_by_rank(of: list[int], data: st.DataObject, limit: int) -> None:
    """Kinds.firsts against grouping one position at a time: kinds in the order they first appear, each
    kind's first `limit` positions by rank, and its size."""
    positions = data.draw(st.lists(st.integers(0, len(of) - 1), unique=True))
    rank = np.array(data.draw(st.permutations(range(len(of)))), dtype=np.int64)
    groups: dict[int, list[int]] = {}
    for p in positions:
        groups.setdefault(of[p], []).append(p)
    expected = [(sorted(g, key=lambda p: rank[p])[:limit], len(g)) for g in groups.values()]
    grouped = kinds.Kinds(tuple(of))
    assert grouped.firsts(positions, rank, limit) == expected


def test_firsts_takes_both_ways() -> None:
    """Few positions are grouped one by one, more in numpy: the property test above draws both."""
    many = list(range(kinds.FEW + 1))
    grouped = kinds.Kinds(tuple(p % 3 for p in many))
    rank = np.array(many[::-1], dtype=np.int64)
    with mock.patch.object(np, "lexsort", side_effect=AssertionError("numpy for a few")):
        assert grouped.firsts(many[:kinds.FEW], rank, 2) == [([30, 27], 11), ([31, 28], 11), ([29, 26], 10)]
    assert grouped.firsts(many, rank, 2) == [([30, 27], 11), ([31, 28], 11), ([32, 29], 11)]


def test_clashes_counted_over_kinds_that_report_and_kinds_that_do_not() -> None:
    """The candidate `m` meets six z-b copies before it (so the z-b copy after it does not name it) and no
    z-a copy before it (so all six z-a copies after it name it: five listed, "and 1 more")."""
    two_zones = cat.Catalog((cat.InstanceType("it0", {"family": "a"}, {"cpu": "2"},
                                              (cat.Offering("z-a", "spot", 1.0), cat.Offering("z-b", "spot", 1.0))),),
                            "two zones")

    def zone(name: str, where: str) -> dict[str, Any]:
        return _doc(name, {"price": "1", "requirements": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [where]}]})

    existing = [*(zone(f"z{i}", "z-b") for i in range(1, 7)), zone("a9", "z-b"),
                *(zone(f"a{i}", "z-a") for i in range(1, 7))]
    doc = _doc("m", {"price": "2"})
    prepared = ev.prepare([ev.Document(d, i) for i, d in enumerate(existing)], two_zones)
    fast, _ = _both(doc, prepared)
    others = [f for f in fast.findings if f.obj.name != "m"]
    assert [f.obj.name for f in others] == ["a1", "a2", "a3", "a4", "a5"]
    assert dict(others[-1].detail).get("moreObjects") == "1"
