"""The audit's prediction against Karpenter without a cluster: reading the condition Karpenter writes,
the status and price comparisons, the grace period (a fake clock, no sleeps), the event and the gauge.
(Against a real API server: tests/e2e/test_audit.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Mapping
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from simulation import evaluate as ev
from simulation import live
from simulation.analysis import report as rp
from simulation.semantics import catalog as cat
from simulation.semantics import merge, model
from tests.webhook_support import CONFLICTING, P5, FakeEvents, cache_of, nodepool, overlay
from webhook import audit, events, prediction
from webhook.state import Cache


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def condition(status: str, reason: str = "", message: str = "", observed: int | None = 1) -> dict[str, Any]:
    out = {"type": "ValidationSucceeded", "status": status, "reason": reason or "ValidationSucceeded",
           "message": message, "lastTransitionTime": "2026-01-01T00:00:00Z"}
    if observed is not None:
        out["observedGeneration"] = observed
    return out


def with_status(obj: Mapping[str, Any], *conditions: Mapping[str, Any], generation: int = 1) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "generation": generation},
            "status": {"conditions": [{**condition("True"), "type": "Ready", "reason": "Ready"}, *conditions]}}


# -- Karpenter's condition --------------------------------------------------------------------


@pytest.mark.parametrize(("cond", "want"), [
    (condition("True"), merge.APPLIED),
    (condition("False", "Conflict", "conflict with another overlay"), merge.CONFLICT),
    (condition("False", "RuntimeValidation", "bad"), merge.INVALID),
    # A reason this Karpenter does not give: shown as it is, so it disagrees with every prediction.
    (condition("False", "SomethingNew"), "SomethingNew"),
    (condition("True", observed=None), merge.APPLIED),  # no observedGeneration: taken as current
])
def test_the_condition_as_a_status(cond: Mapping[str, Any], want: str) -> None:
    said = prediction.karpenter_says(with_status(overlay("a"), cond))
    assert said is not None and said.state == want


@pytest.mark.parametrize("obj", [
    overlay("a"),  # never reconciled
    with_status(overlay("a")),  # conditions, not this one
    with_status(overlay("a"), condition("Unknown", "AwaitingReconciliation")),
    with_status(overlay("a"), condition("False", "Conflict", observed=1), generation=2),  # an older spec's
    {**overlay("a"), "status": "garbage"},
    {**overlay("a"), "status": {"conditions": "garbage"}},
], ids=["none", "other", "unknown", "older-generation", "bad-status", "bad-conditions"])
def test_not_yet_reconciled(obj: Mapping[str, Any]) -> None:
    assert prediction.karpenter_says(obj) is None


def test_status_mismatches_name_both_sides() -> None:
    predicted = {"a": rp.Status(merge.CONFLICT, "same weight 10 as b on price"), "b": rp.Status(merge.APPLIED),
                 "c": rp.Status(merge.APPLIED)}
    stored = {"a": with_status(overlay("a"), condition("True")),
              "b": with_status(overlay("b"), condition("True")),
              "c": overlay("c"),  # not reconciled: never a mismatch
              "new": with_status(overlay("new"), condition("True"))}  # not predicted yet
    got = prediction.status_mismatches(predicted, stored)
    assert list(got) == ["a"]
    assert got["a"].predicted.state == merge.CONFLICT and got["a"].said.state == merge.APPLIED
    assert got["a"].describe() == "guard predicts Conflict (same weight 10 as b on price), Karpenter says Applied"


# -- prices -------------------------------------------------------------------------------------


def priced(price: float, overlay_name: str | None = None, pool: str = "default") -> prediction.Priced:
    return prediction.Priced(price, pool, overlay_name)


def test_prices_agree_within_float_printing_and_only_cells_both_sides_have_count() -> None:
    key, other, spot = ("m5.large", "on-demand", "us-east-1a"), ("m5.large", "on-demand", "us-east-1b"), \
        ("m5.large", "spot", "us-east-1a")
    predicted = {key: (priced(0.1 * 3),), other: (priced(0.096, "cheap"),), spot: (priced(0.04),)}
    published = {key: 0.3,  # 0.30000000000000004 predicted: the same figure printed
                 other: 0.0961,
                 ("m5.large", "reserved", "us-east-1a"): 0.0,  # the provider's placeholder: not predicted
                 spot: math.nan}
    got = prediction.price_mismatches(predicted, published)
    assert list(got) == [other]
    assert got[other].predicted.overlay == "cheap" and got[other].published == 0.0961 and got[other].others == 0
    assert "cheap" in got[other].describe() and "0.0961" in got[other].describe()


def test_any_nodepools_figure_may_be_the_published_one() -> None:
    key = ("m5.large", "on-demand", "us-east-1a")
    predicted = {key: (priced(0.5, "in-a", "a-pool"), priced(0.096, None, "z-pool"))}
    assert prediction.price_mismatches(predicted, {key: 0.5}) == {}
    assert prediction.price_mismatches(predicted, {key: 0.096}) == {}
    got = prediction.price_mismatches(predicted, {key: 0.2})
    assert got[key].predicted.pool == "a-pool" and got[key].others == 1


async def predicted(*objects: Mapping[str, Any]) -> dict[prediction.PriceKey, tuple[prediction.Priced, ...]]:
    return await predicted_of(await cache_of(*objects))


async def predicted_of(cache: Any) -> dict[prediction.PriceKey, tuple[prediction.Priced, ...]]:
    assert cache.snapshot.prepared is not None
    return prediction.predicted_prices(audit.evaluate(cache.snapshot.prepared, cache.snapshot.basis))


async def test_each_nodepools_figure_is_predicted_once_per_distinct_price() -> None:
    pools = (nodepool("a-pool"), nodepool("z-pool"))
    only = [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["z-pool"]}]
    got = await predicted(*pools, overlay("in-z", price="0.5", family="m5", extra=only))
    m5 = {k: v for k, v in got.items() if k[0].startswith("m5.")}
    assert m5 and all([(f.pool, f.overlay) for f in v] == [("a-pool", None), ("z-pool", "in-z")] and v[1].price == 0.5
                      for v in m5.values())
    others = [v for k, v in got.items() if not k[0].startswith("m5.")]
    assert others and all([(f.pool, f.overlay) for f in v] == [("a-pool", None)] for v in others)


ON_DEMAND = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]


async def test_a_wrong_model_of_the_winner_is_a_mismatch_on_an_independent_base() -> None:
    """The guard believes `low` (a -10% adjustment) is in effect on m5 on-demand; Karpenter applied another change
    (+10%). On the embedded table's base (independent of what Karpenter publishes) the predicted figure is not the
    published one: the wrong model surfaces."""
    cache = await cache_of(nodepool("general"), overlay("low", weight=10, family="m5", adjustment="-10%",
                                                        extra=ON_DEMAND))
    got = await predicted_of(cache)
    cell = ("m5.large", "on-demand", "us-east-1a")
    figure, = got[cell]
    assert (figure.overlay, figure.verifiable) == ("low", True) and math.isclose(figure.price, 0.096 * 0.9)
    mismatches = prediction.price_mismatches(got, {cell: 0.096 * 1.1})
    assert list(mismatches) == [cell] and mismatches[cell].predicted.overlay == "low"


async def test_a_base_recovered_from_the_published_figure_is_unverifiable_not_agreement() -> None:
    """Row 6 of issue 39: in a live catalog the base is Karpenter's figure with the believed overlay undone, so the
    prediction gives the published figure back whatever overlay Karpenter really applied. Such a cell is counted
    unverifiable, never compared (and so never "agreement"); an absolute price does not rest on the base and stays
    compared."""
    cells = [live.Cell("m5.large", "on-demand", "us-east-1a", True, 0.096 * 1.1),
             live.Cell("m5.large", "spot", "us-east-1a", True, 0.04),
             live.Cell("c5.large", "on-demand", "us-east-1a", True, 0.5)]
    believed = [nodepool("general"), overlay("low", weight=10, family="m5", adjustment="-10%", extra=ON_DEMAND),
                overlay("fixed", weight=10, family="c5", price="0.5", extra=ON_DEMAND)]
    built = live.build(cells, cat.default())
    catalog = live.recover(built.catalog, cells, [ev.Document(o, i) for i, o in enumerate(believed)]).catalog
    cache = Cache(debounce=0)
    cache.set_catalog(catalog)
    cache.load(believed)
    await cache.rebuild()
    got = await predicted_of(cache)
    published = {(c.instance_type, c.capacity_type, c.zone): c.price or 0.0 for c in cells}
    # The believed -10% undone then redone: the published figure, although Karpenter applied +10%.
    m5 = ("m5.large", "on-demand", "us-east-1a")
    assert math.isclose(got[m5][0].price, published[m5]) and not got[m5][0].verifiable
    assert list(prediction.comparable(got, published)) == [("c5.large", "on-demand", "us-east-1a")]
    assert prediction.unverifiable(got, published) == 2
    assert prediction.price_mismatches(got, published) == {}


# -- the grace period ---------------------------------------------------------------------------


def test_grace_reports_what_lasts_and_forgets_what_resolves() -> None:
    grace: prediction.Grace[str, str] = prediction.Grace(10.0)
    assert grace.observe({"a": "x"}, 100.0) == {}
    assert grace.next_due(100.0) == 110.0
    assert grace.observe({"a": "x", "b": "y"}, 109.9) == {}
    assert grace.observe({"a": "x2", "b": "y"}, 110.0) == {"a": "x2"}  # timed per key, the latest value
    assert grace.next_due(110.0) == pytest.approx(119.9)
    assert grace.observe({"b": "y"}, 120.0) == {"b": "y"}
    assert grace.observe({"a": "x"}, 121.0) == {}  # came back: a new grace period
    assert grace.observe({"a": "x"}, 131.0) == {"a": "x"}
    assert grace.next_due(131.0) is None


def test_grace_memory_is_bounded() -> None:
    grace: prediction.Grace[int, int] = prediction.Grace(1.0, memory=3)
    grace.observe({i: i for i in range(10)}, 0.0)
    assert grace.observe({i: i for i in range(10)}, 5.0) == {0: 0, 1: 1, 2: 2}
    assert grace.observe({i: i for i in range(1, 10)}, 6.0) == {1: 1, 2: 2}  # 0 resolved: room for one more
    assert grace.observe({i: i for i in range(1, 10)}, 7.0) == {1: 1, 2: 2, 3: 3}


def test_zero_grace_reports_at_once() -> None:
    grace: prediction.Grace[str, str] = prediction.Grace(0.0)
    assert grace.observe({"a": "x"}, 5.0) == {"a": "x"}


# -- in the audit ---------------------------------------------------------------------------------


COMPARED = "overlay_guard_prediction_compared"


def mismatch_events(api: FakeEvents) -> list[Mapping[str, Any]]:
    return [b for b in api.created.values() if b["reason"] == events.MISMATCH]


def gauge(registry: CollectorRegistry, kind: str, name: str = "overlay_guard_prediction_mismatches") -> float | None:
    for line in generate_latest(registry).decode().splitlines():
        if line.startswith(f'{name}{{kind="{kind}"}} '):
            return float(line.split()[-1])
    return None


def set_status(cache: Any, obj: Mapping[str, Any], *conditions: Mapping[str, Any], generation: int = 1) -> None:
    cache.apply_event(model.NODEOVERLAY, {"type": "MODIFIED", "raw_object": with_status(obj, *conditions,
                                                                                        generation=generation)})


async def test_a_lasting_status_disagreement_is_an_event_and_a_gauge_until_it_resolves() -> None:
    pool, a, b = CONFLICTING
    cache = await cache_of(pool, with_status(a, condition("True")), with_status(b, condition("True")))
    clock = Clock()
    api = FakeEvents()
    auditor = audit.Auditor(cache, api, instance="me", clock=clock, grace=120.0)
    registry = CollectorRegistry()
    registry.register(audit.AuditCollector(auditor))
    result = await auditor.audit(cache.snapshot)
    loser = next(n for n, s in result.status.items() if s == "Conflict")
    assert gauge(registry, "status") == 0.0 and not mismatch_events(api)  # within the grace period
    assert gauge(registry, "status", COMPARED) == 2.0 and gauge(registry, "price", COMPARED) == 0.0
    assert auditor.recheck_at == clock.now + 120.0

    clock.now += 119.0
    await auditor.audit(cache.snapshot)
    assert gauge(registry, "status") == 0.0 and not mismatch_events(api)
    clock.now += 1.0
    await auditor.audit(cache.snapshot)
    assert gauge(registry, "status") == 1.0 and gauge(registry, "price") == 0.0
    [event] = mismatch_events(api)
    assert event["regarding"]["name"] == loser and event["type"] == "Warning"
    assert event["note"].startswith("guard predicts Conflict") and event["note"].endswith("Karpenter says Applied")
    await auditor.audit(cache.snapshot)
    assert len(mismatch_events(api)) == 1  # deduplicated

    # Karpenter catches up (a status write: the snapshot does not change).
    generation = cache.snapshot.generation
    set_status(cache, {"a": a, "b": b}[loser], condition("False", "Conflict", "conflict with another overlay"))
    await auditor.audit(cache.snapshot)
    assert cache.snapshot.generation == generation
    assert gauge(registry, "status") == 0.0


async def test_a_condition_for_an_older_spec_or_a_spec_not_judged_yet_is_no_mismatch() -> None:
    pool, a, b = CONFLICTING
    cache = await cache_of(pool, with_status(a, condition("True")), with_status(b, condition("True")))
    clock = Clock()
    auditor = audit.Auditor(cache, FakeEvents(), instance="me", clock=clock, grace=0.0)
    result = await auditor.audit(cache.snapshot)
    assert len(auditor.mismatches.status) == 1
    loser = {"a": a, "b": b}[next(n for n, s in result.status.items() if s == "Conflict")]
    # The user edits the loser: generation 2, Karpenter's condition still says generation 1.
    set_status(cache, loser, condition("True", observed=1), generation=2)
    await auditor.audit(cache.snapshot)
    assert not auditor.mismatches.status


async def test_prices_are_compared_when_a_source_is_given() -> None:
    cache = await cache_of(nodepool("gpu"), overlay("cheap", price="0.5", family="p5", extra=P5))
    clock = Clock()
    published: dict[prediction.PriceKey, float] = {}
    calls: list[int] = []

    async def source() -> Mapping[prediction.PriceKey, float] | None:
        calls.append(1)
        if len(calls) == 3:
            raise ConnectionError("metrics unreachable")
        return published

    api = FakeEvents()
    auditor = audit.Auditor(cache, api, instance="me", clock=clock, grace=60.0, prices=source)
    registry = CollectorRegistry()
    registry.register(audit.AuditCollector(auditor))
    result = await auditor.audit(cache.snapshot)
    assert result.prices is not None
    assert gauge(registry, "price", COMPARED) == 0.0  # nothing published yet
    cell = next(k for k, v in sorted(result.prices.items()) if v[0].overlay == "cheap")
    published.update({k: v[0].price for k, v in result.prices.items()})
    published[cell] = 0.7  # Karpenter applied something else there
    published[("no-such.type", "on-demand", "us-east-1a")] = 0.1  # not predicted: not compared
    # The embedded table's spot figures are estimates (the on-demand price): a prediction on one checks nothing.
    verifiable = sum(1 for v in result.prices.values() if all(f.verifiable for f in v))
    assert 0 < verifiable < len(result.prices)
    clock.now += 61.0
    await auditor.audit(cache.snapshot)  # first seen: within the grace
    assert gauge(registry, "price") == 0.0 and gauge(registry, "price", COMPARED) == verifiable
    assert gauge(registry, "price_unverifiable", COMPARED) == len(result.prices) - verifiable
    await auditor.audit(cache.snapshot)  # the source fails: the last comparison stands
    assert gauge(registry, "price") == 0.0 and len(calls) == 3
    assert gauge(registry, "price", COMPARED) == verifiable
    clock.now += 60.0
    await auditor.audit(cache.snapshot)
    assert gauge(registry, "price") == 1.0
    assert auditor.recheck_at == clock.now + 60.0  # no watch event tells when a price is fixed: look again
    [event] = mismatch_events(api)
    assert event["regarding"] == {"apiVersion": model.OVERLAY_API, "kind": model.NODEOVERLAY, "name": "cheap"}
    assert "0.5" in event["note"] and "0.7" in event["note"]
    published[cell] = 0.5
    await auditor.audit(cache.snapshot)
    assert gauge(registry, "price") == 0.0


async def test_with_no_grace_a_lasting_price_disagreement_is_looked_at_again_no_sooner_than_the_backlog_retry(
) -> None:
    cache = await cache_of(nodepool("gpu"), overlay("cheap", price="0.5", family="p5", extra=P5))
    clock = Clock()
    published: dict[prediction.PriceKey, float] = {}

    async def source() -> Mapping[prediction.PriceKey, float]:
        return published

    auditor = audit.Auditor(cache, FakeEvents(), instance="me", clock=clock, grace=0.0, prices=source)
    result = await auditor.audit(cache.snapshot)
    assert result.prices
    published.update(dict.fromkeys(result.prices, 9.0))
    await auditor.audit(cache.snapshot)
    assert auditor.mismatches.price and auditor.recheck_at == clock.now + audit.BACKLOG_RETRY


async def test_without_a_source_prices_are_neither_predicted_nor_compared() -> None:
    cache = await cache_of(*CONFLICTING)
    result = await audit.Auditor(cache, FakeEvents(), instance="me").audit(cache.snapshot)
    assert result.prices is None


async def test_the_loop_compares_status_writes_and_looks_again_when_the_grace_runs_out() -> None:
    pool, a, b = CONFLICTING
    waiting = condition("Unknown", "AwaitingReconciliation")
    cache = await cache_of(pool, with_status(a, waiting), with_status(b, waiting))
    clock = Clock()
    api = FakeEvents()
    auditor = audit.Auditor(cache, api, instance="me", debounce=0.0, poll=0.001, clock=clock, grace=30.0)

    async def audits(n: int) -> None:
        for _ in range(2000):
            if auditor.audits >= n:
                return
            await asyncio.sleep(0.001)
        raise AssertionError(f"{auditor.audits} audits, not {n}")

    task = asyncio.create_task(auditor.run())
    try:
        await audits(1)
        assert auditor.recheck_at is None  # nothing reconciled yet
        set_status(cache, a, condition("True"))
        set_status(cache, b, condition("True"))
        await audits(2)  # a status write, no snapshot change
        assert auditor.recheck_at == clock.now + 30.0 and not auditor.mismatches.status
        count = auditor.audits
        clock.now += 30.0
        await audits(count + 1)  # the grace ran out, nothing else changed
        assert len(auditor.mismatches.status) == 1 and mismatch_events(api)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
