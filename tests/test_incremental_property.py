"""Property test: the webhook's incremental path and the full run report the same findings."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulation import evaluate as ev
from simulation.analysis import incremental, kinds
from simulation.semantics import catalog as cat
from simulation.semantics import merge
from tests import reference_support
from tests.strategies import CT, PAIR, POOLS, _priced, examples, instance_types, overlay_docs, pool_docs


def _key(report: ev.Report) -> list[tuple[Any, ...]]:
    return [(f.code, str(f.severity), f.obj, f.field, f.related, f.message) for f in report.findings]


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=instance_types(), existing=overlay_docs(), pools=pool_docs(), new=overlay_docs(),
       replace=st.booleans())
def test_incremental_equals_full(catalog: cat.Catalog, existing: list[dict[str, Any]],
                                 pools: list[dict[str, Any]], new: list[dict[str, Any]], replace: bool) -> None:
    for i, doc in enumerate(new):
        # Half the time the candidate edits an existing overlay, otherwise it is a new one.
        doc["metadata"]["name"] = f"o{i}" if replace else f"n{i}"
    prepared = ev.prepare([ev.Document(d, i) for i, d in enumerate([*pools, *existing])], catalog)
    # Up to three candidates at once, as the webhook sends held admissions along with a request.
    candidates = [ev.Document(d, 100 + i) for i, d in enumerate(new[:3])]
    with mock.patch.object(merge, "karpenter_in_order", _checked_order):
        fast = ev.evaluate(candidates, prepared)
    slow = ev.evaluate(candidates, prepared, full=True)
    assert _key(fast) == _key(slow)
    for doc in candidates:
        name = doc.obj["metadata"]["name"]
        assert fast.status[name] == slow.status[name]
    _against_reference(fast, slow, existing, [d.obj for d in candidates], pools, catalog)


def _against_reference(fast: ev.Report, slow: ev.Report, existing: list[dict[str, Any]],
                       candidates: list[dict[str, Any]], pools: list[dict[str, Any]], catalog: cat.Catalog) -> None:
    """The incremental report's findings against the plain loop's over the cluster with the candidates in."""
    names = {d["metadata"]["name"] for d in candidates}
    overlays = [*(d for d in existing if d["metadata"]["name"] not in names), *candidates]
    reference_support.assert_involving(fast, reference_support.expected(overlays, pools, catalog), names)


def test_incremental_equals_full_with_components_taken_whole() -> None:
    """The same with every component taken from the index's arrays (incremental.prepared_runs), as a crowd of
    thousands takes it: the drawn sets are small enough to be taken one by one."""
    with mock.patch.object(kinds, "FEW", 0):
        test_incremental_equals_full()


_KARPENTER_IN_ORDER = merge.karpenter_in_order


def _checked_order(runs: merge.Runs) -> merge.Merged:
    """The incremental path places its candidates among the prepared overlays instead of sorting them all,
    and cuts them into runs by the index's kinds: what reaches Karpenter's loop must be in Karpenter's order
    all the same, named, and cut into runs of overlays its test reads alike, ending with the last."""
    entries = list(runs.entries)
    assert [e.name for e in entries] == [e.name for e in merge.ordered(entries)] == list(runs.names)
    ends = list(runs.ends)
    assert ends == sorted(set(ends)) and all(0 < end <= len(entries) for end in ends)
    assert len(entries) in (0, *ends[-1:])
    for start, end in zip([0, *ends], ends, strict=False):
        assert len({e.tested for e in entries[start:end]}) == 1
    return _KARPENTER_IN_ORDER(runs)


@st.composite
def _crowd(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Up to 18 overlays: enough that one candidate meets more than clash.LIMIT of them."""
    docs = [d for batch in draw(st.lists(overlay_docs(), min_size=1, max_size=3)) for d in batch]
    for i, doc in enumerate(docs):
        doc["metadata"]["name"] = f"o{i:02d}"
    return docs


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=instance_types(), existing=_crowd(), pools=pool_docs(), new=overlay_docs(),
       replace=st.booleans(), at=st.integers(0, 17), name=st.sampled_from(["a0", "o05x", "z0"]),
       copy=st.sampled_from([None, 1, 2, 3]))
def _one_candidate(catalog: cat.Catalog, existing: list[dict[str, Any]], pools: list[dict[str, Any]],
                   new: list[dict[str, Any]], replace: bool, at: int, name: str, copy: int | None) -> None:
    doc = new[0]
    if copy is not None:
        # An existing overlay's spec at another weight: it meets (and shadows, or is shadowed by) its twin's
        # neighbours, the case the owner tables answer.
        doc = {**doc, "spec": {**existing[(at + 1) % len(existing)]["spec"], "weight": copy}}
        doc["metadata"] = {"name": ""}
    # An edit of one of the existing overlays (the webhook's UPDATE), or a new one (CREATE) whose name
    # sorts before, among or after theirs (Karpenter's order within a weight, the winners a finding names).
    doc["metadata"]["name"] = existing[at % len(existing)]["metadata"]["name"] if replace else name
    prepared = ev.prepare([ev.Document(d, i) for i, d in enumerate([*pools, *existing])], catalog)
    fast = ev.evaluate([ev.Document(doc, 100)], prepared)
    slow = ev.evaluate([ev.Document(doc, 100)], prepared, full=True)
    assert _key(fast) == _key(slow)
    name = doc["metadata"]["name"]
    assert fast.status[name] == slow.status[name]
    # The candidate's claims (the cells where its values are in effect) too.
    assert [c for c in fast.outcome.claims if c.overlay == name] == [c for c in slow.outcome.claims
                                                                     if c.overlay == name]
    _against_reference(fast, slow, existing, [doc], pools, catalog)


def test_one_candidate_equals_full() -> None:
    """One new or edited overlay, the webhook's usual request, agrees with the full run."""
    _one_candidate()


@pytest.mark.parametrize(("spec", "other"), [({"price": "0.5"}, {"price": "0.5"}),
                                             ({"capacity": {"r1": "1"}}, {"capacity": {"r2": "1"}})])
def test_a_new_overlay_first_at_its_weight_drops_a_later_one_it_meets(spec: dict[str, Any],
                                                                      other: dict[str, Any]) -> None:
    """A new overlay Karpenter reads before the others of its weight, applied, stores what a later one then
    conflicts with (`m`), and nothing another one conflicts with (`k`): the later ones' statuses move with it."""
    existing = [_priced("m", 2, (CT, "In", ["spot"]), **spec), _priced("k", 2, (CT, "In", ["on-demand"]), **other)]
    prepared = ev.prepare([ev.Document(d, i) for i, d in enumerate([*POOLS, *existing])], PAIR)
    assert prepared.outcome.status["m"] == merge.APPLIED
    candidate = [ev.Document(_priced("z", 2, (CT, "In", ["spot"]), **spec), 100)]
    fast = ev.evaluate(candidate, prepared)
    slow = ev.evaluate(candidate, prepared, full=True)
    assert _key(fast) == _key(slow)
    states = {n: s.state for n, s in slow.status.items()}
    assert states == {"z": merge.APPLIED, "m": merge.CONFLICT, "k": merge.APPLIED}
    # The incremental report's statuses are those it settled (at least the ones that moved).
    assert {"z", "m"} <= fast.status.keys()
    assert {n: s.state for n, s in fast.status.items()} == {n: states[n] for n in fast.status}


def test_candidates_alone_at_their_weight_clash_with_each_other() -> None:
    """Two candidates at a weight no prepared overlay holds, on a common offering: each one's clashes are read from
    the other candidate (the prepared crowd has none of that weight)."""
    existing = [_priced("m", 2, (CT, "In", ["spot"]), price="0.5")]
    prepared = ev.prepare([ev.Document(d, i) for i, d in enumerate([*POOLS, *existing])], PAIR)
    candidates = [ev.Document(_priced(n, 5, (CT, "In", ["spot"]), price="0.5"), 100 + i) for i, n in enumerate("yz")]
    fast = ev.evaluate(candidates, prepared)
    slow = ev.evaluate(candidates, prepared, full=True)
    assert _key(fast) == _key(slow)
    assert [(f.obj.name, [r.name for r in f.related]) for f in fast.findings
            if f.code == "same-weight-conflict"] == [("y", ["z"])]


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=instance_types(), first=overlay_docs(), second=overlay_docs(), pools=pool_docs(),
       more_pools=pool_docs())
def test_prepare_reusing_a_previous_snapshot_equals_a_fresh_one(
        catalog: cat.Catalog, first: list[dict[str, Any]], second: list[dict[str, Any]],
        pools: list[dict[str, Any]], more_pools: list[dict[str, Any]]) -> None:
    before = ev.prepare([ev.Document(d, i) for i, d in enumerate([*pools, *first])], catalog)
    # The watch delivers a new state: some overlays edited, some gone, NodePools maybe changed.
    state = [ev.Document(d, i) for i, d in enumerate([*more_pools, *second])]
    reused = ev.prepare(state, catalog, previous=before)
    fresh = ev.prepare(state, catalog)
    assert [f.to_json() for f in reused.baseline] == [f.to_json() for f in fresh.baseline]
    assert dict(reused.outcome.status) == dict(fresh.outcome.status)
    assert reused.entries.keys() == fresh.entries.keys()
    assert all(reused.entries[n].cells == fresh.entries[n].cells for n in fresh.entries)


@pytest.mark.parametrize("gone", [(), ("b",)])
def test_statuses_layer_the_settled_over_the_baseline(gone: tuple[str, ...]) -> None:
    """The settled statuses and verdicts decide for the overlays they name (one settled as applied has no
    verdict), the baseline's for the rest; a deleted overlay has neither."""
    price = merge.Dropped(merge.PRICE, 0, "x")
    baseline = merge.Merged((), {"a": merge.CONFLICT, "b": merge.CONFLICT, "c": merge.CONFLICT, "x": merge.APPLIED},
                            {"a": price, "b": price, "c": price}, ())
    local = merge.Merged((), {"a": merge.APPLIED, "c": merge.CONFLICT}, {"c": merge.Dropped(merge.PRICE, 1, "a")}, ())
    status, verdicts = incremental._statuses(baseline, local, gone)
    kept = {"b": merge.CONFLICT} if not gone else {}
    assert dict(status) == {"a": merge.APPLIED, "c": merge.CONFLICT, "x": merge.APPLIED, **kept}
    assert dict(verdicts) == {"c": merge.Dropped(merge.PRICE, 1, "a"), **({"b": price} if not gone else {})}
    assert "a" not in verdicts and verdicts.get("a") is None and ("b" in verdicts) == (not gone)
