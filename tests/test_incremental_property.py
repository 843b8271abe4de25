"""Property test: the webhook's incremental path and the full run report the same findings."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulation import evaluate as ev
from simulation.semantics import catalog as cat
from tests.strategies import instance_types, overlay_docs, pool_docs


def _key(report: ev.Report) -> list[tuple[Any, ...]]:
    return [(f.code, str(f.severity), f.obj, f.field, f.related, f.message) for f in report.findings]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
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
    fast = ev.evaluate(candidates, prepared)
    slow = ev.evaluate(candidates, prepared, full=True)
    assert _key(fast) == _key(slow)
    for doc in candidates:
        name = doc.obj["metadata"]["name"]
        assert fast.status[name] == slow.status[name]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
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
