"""The ledger's Lease as input (webhook/ledger.py's `check`, webhook/state.py): whatever someone with write
access to the Lease puts there (a horizon never issued, deadlines NaN or 1e300, records taken out, the Lease
deleted, more records or characters than it holds) is repaired by compare-and-swap, counted and logged, and
never turns into a 503 loop or a denial that lasts; a candidate the ledger can never hold is told so; and the
replica reports a Lease it cannot use through /readyz."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from tests.webhook_support import P5, cache_of, default_catalog, nodepool, overlay
from webhook import ledger as lg
from webhook import ledgerstore, state
from webhook.app import Handlers
from webhook.config import Config
from webhook.leader import Conflict
from webhook.ledgerstore import KubeLedger, MemoryLedger
from webhook.metrics import Metrics
from webhook.state import Cache, Unrecordable

NO = "NodeOverlay"
NOW = 1000.0
LIFETIME = 36.0


def stored(obj: Mapping[str, Any], uid: str, rv: int) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "uid": uid, "resourceVersion": str(rv)}}


def rec(name: str, deadline: float = NOW + 5, price: str = "1") -> lg.Record:
    return lg.record(stored(overlay(name, price=price, extra=P5), f"u-{name}", 0), deadline)


# -- the pure check ---------------------------------------------------------------------------------
A, B, C = rec("a"), rec("b"), rec("c")
CLAMPED = NOW + LIFETIME


@pytest.mark.parametrize(("ledger", "bounds", "problems", "expected"), [
    pytest.param(lg.Ledger((A,), horizon=40, version="7"), lg.Bounds(NOW, LIFETIME, revision=50), (),
                 lg.Ledger((A,), horizon=40, version="7"), id="true"),
    pytest.param(lg.Ledger((A,), horizon=10**12), lg.Bounds(NOW, LIFETIME), (),
                 lg.Ledger((A,), horizon=10**12), id="horizon-without-a-revision-cannot-be-told"),
    pytest.param(lg.Ledger((A,), horizon=10**12), lg.Bounds(NOW, LIFETIME, revision=50), ("horizon",),
                 lg.Ledger((A,), horizon=50), id="horizon-never-issued"),
    pytest.param(lg.Ledger((dataclasses.replace(A, deadline=math.nan),)), lg.Bounds(NOW, LIFETIME), ("deadline",),
                 lg.Ledger((dataclasses.replace(A, deadline=CLAMPED),)), id="deadline-nan"),
    pytest.param(lg.Ledger((dataclasses.replace(A, deadline=1e300),)), lg.Bounds(NOW, LIFETIME), ("deadline",),
                 lg.Ledger((dataclasses.replace(A, deadline=CLAMPED),)), id="deadline-1e300"),
    pytest.param(lg.Ledger((dataclasses.replace(A, deadline=-math.inf),)), lg.Bounds(NOW, LIFETIME),
                 ("deadline",), lg.Ledger((dataclasses.replace(A, deadline=CLAMPED),)), id="deadline-minus-inf"),
    pytest.param(lg.Ledger((dataclasses.replace(A, digest="0" * 32), B)), lg.Bounds(NOW, LIFETIME), ("record",),
                 lg.Ledger((B,)), id="digest-not-its-object"),
    pytest.param(lg.Ledger((dataclasses.replace(A, name="b"),)), lg.Bounds(NOW, LIFETIME), ("record",),
                 lg.Ledger(), id="name-not-its-object"),
    pytest.param(lg.Ledger((B,), horizon=3), lg.Bounds(NOW, LIFETIME, known=(A, B)), ("missing",),
                 lg.Ledger((B, A), horizon=3), id="known-record-taken-out"),
    pytest.param(lg.Ledger(), lg.Bounds(NOW, LIFETIME, known=(rec("a", deadline=NOW),)), (), lg.Ledger(),
                 id="known-record-past-its-deadline-stays-out"),
    pytest.param(lg.Ledger((A, B, C)), lg.Bounds(NOW, LIFETIME, known=(A,), cap=2), ("count",),
                 lg.Ledger((A, C)), id="count-keeps-known-then-newest"),
])
def test_what_cannot_be_true_is_repaired(ledger: lg.Ledger, bounds: lg.Bounds, problems: tuple[str, ...],
                                          expected: lg.Ledger) -> None:
    repaired, found = lg.check(ledger, bounds)
    assert found == problems
    assert repaired == expected
    assert set(found) <= set(lg.PROBLEMS)
    # Repaired once, nothing is left to repair.
    assert lg.check(repaired, dataclasses.replace(bounds, known=repaired.records))[1] == ()


def test_more_characters_than_the_ledger_holds_drops_the_oldest_unknown_records() -> None:
    big = [rec(f"o{i}", price=str(i)) for i in range(3)]
    per = len(lg.text(lg.Ledger(tuple(big)))) // 3
    ledger = lg.Ledger(tuple(rec(f"o{i}", price=str(i)) for i in range(lg.MAX_BYTES // per + 5)))
    repaired, found = lg.check(ledger, lg.Bounds(NOW, LIFETIME, cap=10**6))
    assert found == ("size",)
    assert len(lg.text(repaired)) <= lg.MAX_BYTES
    assert repaired.records == ledger.records[len(ledger.records) - len(repaired.records):]


@pytest.mark.parametrize(("annotation", "unread"), [
    ("{not json", ("unreadable",)),
    ('["a list"]', ("unreadable",)),
    ('{"horizon": 1e400, "records": []}', ("horizon",)),
    ('{"horizon": -3, "records": []}', ("horizon",)),
    ('{"horizon": true, "records": [{"n": "x"}]}', ("unreadable", "horizon")),
    ('{"horizon": 5, "records": "many"}', ()),
])
def test_what_does_not_read_is_noted_for_the_check(annotation: str, unread: tuple[str, ...]) -> None:
    lease = lg.encode(lg.Ledger(version="4"), "ns")
    lease["metadata"]["annotations"][lg.ANNOTATION] = annotation
    got = lg.decode(lease)
    assert got.unread == unread
    assert lg.check(got, lg.Bounds(NOW, LIFETIME))[1] == tuple(dict.fromkeys(unread))


def test_an_oversized_annotation_is_noted() -> None:
    lease = lg.encode(lg.Ledger(), "ns")
    padded = {"horizon": 0, "records": [], "pad": "x" * lg.MAX_BYTES}
    lease["metadata"]["annotations"][lg.ANNOTATION] = json.dumps(padded)
    assert lg.decode(lease).unread == ("size",)


# -- the cache over a tampered ledger -------------------------------------------------------------------
class Api:
    """The API server's NodeOverlays, as the cache reads and lists them."""

    def __init__(self, revision: int = 0) -> None:
        self.objects: dict[str, Mapping[str, Any]] = {}
        self.revision = revision
        self.lists = 0

    def put(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        self.revision += 1
        out = stored(obj, f"u-{obj['metadata']['name']}", self.revision)
        self.objects[out["metadata"]["name"]] = out
        return out

    async def read(self, kind: str, name: str) -> Mapping[str, Any] | None:
        return self.objects.get(name)

    async def list(self) -> tuple[list[Mapping[str, Any]], str | None]:
        self.lists += 1
        return list(self.objects.values()), str(self.revision)


def tamper(shared: MemoryLedger, **changes: Any) -> None:
    """Someone else's write: the Lease changes and its version moves on."""
    shared.writes += 1
    shared.stored = dataclasses.replace(shared.stored, **changes, version=str(shared.writes))


def admits(report: Any) -> bool:
    return not report.errors()


async def replica(shared: MemoryLedger, api: Api, wall: list[float]) -> Cache:
    # `wall`: the clock deadlines are compared with, across replicas.
    cache = Cache(debounce=0, ledger=shared, after=3.0, wall=lambda: wall[0])
    cache.set_catalog(default_catalog())
    cache.load([nodepool("gpu")])
    await cache.rebuild()
    cache.reader, cache.lister = api.read, api.list
    return cache


def deliver(caches: list[Cache], obj: Mapping[str, Any]) -> None:
    for cache in caches:
        cache.apply_event(NO, {"type": "ADDED", "object": obj, "raw_object": obj})


@pytest.fixture
def immediate(monkeypatch: pytest.MonkeyPatch) -> None:
    # The list a horizon is held against is made at once: waiting for the watch is not what is tested.
    monkeypatch.setattr(state, "CATCH_UP", 0.0)


@pytest.mark.usefixtures("immediate")
async def test_a_horizon_never_issued_is_repaired_from_a_list_not_a_503_loop() -> None:
    shared, api, wall = MemoryLedger(), Api(revision=50), [NOW]
    cache = await replica(shared, api, wall)
    tamper(shared, horizon=10**12)
    first = await cache.decide(overlay("x", price="1", extra=P5), "CREATE", None, dry_run=False, admits=admits)
    assert first.allowed and first.held
    assert shared.stored.horizon == 50 and [r.name for r in shared.stored.records] == ["x"]
    assert cache.ledger_repairs == {"horizon": 1} and cache.ledger_writes["repaired"] == 1
    # Repaired once: the next admission neither lists nor repairs again.
    second = await cache.decide(overlay("y", price="1", family="m5"), "CREATE", None, dry_run=False, admits=admits)
    assert second.allowed and api.lists == 1 and cache.ledger_repairs == {"horizon": 1}


@pytest.mark.usefixtures("immediate")
async def test_a_decision_past_its_budget_leaves_the_list_it_shares_to_the_others() -> None:
    """Decisions waiting for one list share it (state.py's `_relist`): the deadline of one ends its own wait, not
    the list the others wait for."""
    shared, api, wall = MemoryLedger(), Api(revision=50), [NOW]
    cache = await replica(shared, api, wall)
    asked, answered, listing = asyncio.Event(), asyncio.Event(), api.list

    async def held_list() -> tuple[list[Mapping[str, Any]], str | None]:
        asked.set()
        await answered.wait()
        return await listing()

    api.list = held_list  # type: ignore[method-assign]
    cache.lister = api.list
    tamper(shared, horizon=10**12)
    cache._budget = 1.0
    hurried = asyncio.ensure_future(cache.decide(overlay("x", price="1", extra=P5), "CREATE", None, dry_run=False,
                                                 admits=admits))
    # Its budget runs from its start: the next decision's, set once it waits for the list, is not its own.
    await asyncio.wait({hurried, asyncio.ensure_future(asked.wait())}, return_when=asyncio.FIRST_COMPLETED)
    assert asked.is_set(), hurried
    cache._budget = 30.0
    patient = asyncio.ensure_future(cache.decide(overlay("y", price="1", family="m5"), "CREATE", None,
                                                 dry_run=False, admits=admits))
    with pytest.raises(state.Unanswerable, match="did not finish within"):
        await hurried
    assert not patient.done() and cache.unanswered["budget"] == 1
    answered.set()
    assert (await patient).allowed
    assert api.lists == 1 and shared.stored.horizon == 50 and [r.name for r in shared.stored.records] == ["y"]


@pytest.mark.usefixtures("immediate")
async def test_a_true_horizon_ahead_of_the_watch_is_kept_and_the_list_brings_the_cache_up_to_it() -> None:
    shared, api, wall = MemoryLedger(), Api(), [NOW]
    cache = await replica(shared, api, wall)
    a = api.put(overlay("a", price="1", extra=P5))
    tamper(shared, horizon=lg.resource_version(a))  # what another replica writes when a's record leaves
    await cache.start()  # the snapshot is rebuilt on the list
    try:
        denied = await cache.decide(overlay("b", price="2", extra=P5), "CREATE", None, dry_run=False, admits=admits)
    finally:
        await cache.close()
    assert not denied.allowed and not denied.in_flight  # a, stored, is in the cache now
    assert cache.ledger_repairs == {} and shared.stored.horizon == lg.resource_version(a)
    # A watch event older than the list steps nothing back.
    older = stored(overlay("a", price="9", family="m5"), "u-a", lg.resource_version(a) - 1)
    assert cache.apply_event(NO, {"type": "MODIFIED", "object": older, "raw_object": older}) is None


@pytest.mark.parametrize("deadline", [math.nan, math.inf, 1e300])
async def test_a_deadline_out_of_bounds_lasts_no_longer_than_the_longest_chain(deadline: float) -> None:
    shared, api, wall = MemoryLedger(), Api(), [NOW]
    cache = await replica(shared, api, wall)
    # A record of an overlay never stored, as someone wrote it.
    tamper(shared, records=(dataclasses.replace(rec("a"), deadline=deadline),))
    b = overlay("b", price="2", extra=P5)
    held = await cache.decide(b, "CREATE", None, dry_run=False, admits=admits)
    assert not held.allowed and held.in_flight == ("a",)
    await cache.sweep()  # a denial writes nothing: the sweep, woken by the read, rewrites the Lease
    assert shared.stored.records[0].deadline == round(NOW + cache.lifetime, 3)
    assert cache.ledger_repairs == {"deadline": 1}
    wall[0] += cache.lifetime
    after = await cache.decide(b, "CREATE", None, dry_run=False, admits=admits)
    assert after.allowed and [r.name for r in shared.stored.records] == ["b"]


async def test_records_taken_out_are_written_back_and_conflicting_admissions_still_do_not_both_pass() -> None:
    shared, api, wall = MemoryLedger(), Api(), [NOW]
    one, two = await replica(shared, api, wall), await replica(shared, api, wall)
    a, b = overlay("a", price="1", extra=P5), overlay("b", price="2", extra=P5)
    assert (await one.decide(a, "CREATE", None, dry_run=False, admits=admits)).allowed
    await two.sweep()  # the other replica has read the record too
    tamper(shared, records=())
    # Neither replica forgets what it read: b is denied on both while a is not stored.
    for cache in (one, two):
        denied = await cache.decide(b, "CREATE", None, dry_run=False, admits=admits)
        assert not denied.allowed and denied.in_flight == ("a",)
    await two.sweep()
    assert [r.name for r in shared.stored.records] == ["a"] and two.ledger_repairs == {"missing": 1}
    # Once stored and delivered, the record leaves as usual and the denial rests on the object.
    deliver([one, two], api.put(a))
    for cache in (one, two):
        await cache.rebuild()
        await cache.sweep()
    assert shared.stored.records == ()
    denied = await two.decide(b, "CREATE", None, dry_run=False, admits=admits)
    assert not denied.allowed and not denied.in_flight


async def test_the_writer_puts_its_record_back_for_a_replica_that_never_read_it() -> None:
    shared, api, wall = MemoryLedger(), Api(), [NOW]
    one, two = await replica(shared, api, wall), await replica(shared, api, wall)
    a, b = overlay("a", price="1", extra=P5), overlay("b", price="2", extra=P5)
    assert (await one.decide(a, "CREATE", None, dry_run=False, admits=admits)).allowed
    tamper(shared, records=())
    await one.sweep()
    assert [r.name for r in shared.stored.records] == ["a"] and one.ledger_repairs == {"missing": 1}
    denied = await two.decide(b, "CREATE", None, dry_run=False, admits=admits)
    assert not denied.allowed and denied.in_flight == ("a",)


class Deletable(MemoryLedger):
    """The Lease deleted: reads find none; a replace at the old version fails as KubeLedger's 404 does."""

    def delete(self) -> None:
        self.stored = lg.Ledger()


async def test_a_deleted_lease_is_created_again_with_the_records_still_in_flight() -> None:
    shared, api, wall = Deletable(), Api(), [NOW]
    cache = await replica(shared, api, wall)
    a = overlay("a", price="1", extra=P5)
    assert (await cache.decide(a, "CREATE", None, dry_run=False, admits=admits)).allowed
    shared.delete()
    c = await cache.decide(overlay("c", price="1", family="m5"), "CREATE", None, dry_run=False, admits=admits)
    assert c.allowed and c.held
    assert sorted(r.name for r in shared.stored.records) == ["a", "c"]
    assert cache.ledger_repairs.get("deleted") == 1
    denied = await cache.decide(overlay("b", price="2", extra=P5), "CREATE", None, dry_run=False, admits=admits)
    assert not denied.allowed and denied.in_flight == ("a",)


async def test_the_sweep_rewrites_a_tampered_ledger_without_waiting_for_an_admission() -> None:
    shared, api, wall = MemoryLedger(), Api(), [NOW]
    cache = await replica(shared, api, wall)
    tamper(shared, records=(dataclasses.replace(rec("a"), deadline=math.nan),))
    await cache.sweep()
    assert shared.stored.records[0].deadline == round(NOW + cache.lifetime, 3)
    assert cache.ledger_writes["repaired"] == 1
    written = shared.writes
    await cache.sweep()
    assert shared.writes == written  # nothing left to repair: no write


async def test_a_candidate_too_large_for_the_ledger_is_denied_as_such() -> None:
    cache = await cache_of(nodepool("gpu"))
    values = [f"type-{i:06d}" for i in range(lg.MAX_BYTES // 10)]
    huge = overlay("huge", price="1", extra=[{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                              "values": values}])
    with pytest.raises(Unrecordable):
        await cache.decide(huge, "CREATE", None, dry_run=False, admits=lambda report: True)
    # A dry run writes nothing, so it is judged as usual.
    assert (await cache.decide(huge, "CREATE", None, dry_run=True, admits=lambda report: True)).allowed


# -- can the replica use its Lease at all ------------------------------------------------------------
class ApiError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


class Response:
    def __init__(self, body: Mapping[str, Any]) -> None:
        self.data = json.dumps(body).encode()


class FakeAuth:
    def __init__(self, granted: set[str]) -> None:
        self.granted = granted

    def create_self_subject_access_review(self, body: Mapping[str, Any], **_: Any) -> Response:
        verb = body["spec"]["resourceAttributes"]["verb"]
        return Response({"status": {"allowed": verb in self.granted}})


class FakeLeases:
    def __init__(self, create: int | None) -> None:
        self.create = create
        self.dry_runs: list[str] = []

    def create_namespaced_lease(self, namespace: str, body: Mapping[str, Any], dry_run: str, **_: Any) -> None:
        self.dry_runs.append(dry_run)
        if self.create is not None:
            raise ApiError(self.create)


def kube_ledger(granted: set[str], create: int | None) -> KubeLedger:
    ledger = KubeLedger(None, "guard-ns")
    ledger._auth = FakeAuth(granted)  # the API server's answers
    ledger._api = FakeLeases(create)
    return ledger


@pytest.mark.parametrize(("granted", "create", "named"), [
    ({"get", "create", "update"}, None, None),
    ({"get", "create", "update"}, 409, None),
    ({"get", "create", "update"}, 404, ["namespace", "guard-ns", lg.NAME]),
    ({"get", "create"}, None, ["update", "guard-ns", lg.NAME]),
    (set(), None, ["get, create, update", "guard-ns", lg.NAME]),
])
def test_the_access_check_names_the_namespace_the_lease_and_what_is_missing(
        granted: set[str], create: int | None, named: list[str] | None) -> None:
    ledger = kube_ledger(granted, create)
    problem = ledger.access(1.0)
    if named is None:
        assert problem is None
    else:
        assert problem is not None and all(part in problem for part in named)
    assert ledger._api.dry_runs == (["All"] if granted == set(ledgerstore.VERBS) else [])


async def test_a_lease_that_cannot_be_used_keeps_readyz_false_with_one_log_line(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    cache = await cache_of(nodepool("gpu"))
    ledger = kube_ledger({"get", "create"}, None)
    answers: list[str | None] = []
    checks = 0

    def report(problem: str | None) -> None:
        nonlocal checks
        cache.report_ledger(problem)
        answers.append(problem)
        checks += 1
        assert cache.ready == (problem is None)
        if checks == 2:
            ledger._auth = FakeAuth({"get", "create", "update"})  # RBAC fixed
        if checks == 4:
            raise asyncio.CancelledError

    monkeypatch.setattr(ledgerstore, "RECHECK_FAILING", 0.0)
    monkeypatch.setattr(ledgerstore, "RECHECK_OK", 0.0)
    assert cache.ready
    with pytest.raises(asyncio.CancelledError):
        await ledgerstore.follow_access(ledger, report)
    assert [a is None for a in answers] == [False, False, True, True]
    errors = [r for r in caplog.records if r.name == "overlay-guard.ledger" and r.levelname == "ERROR"]
    assert len(errors) == 1
    assert cache.ready


async def test_kube_ledger_reads_a_deleted_lease_as_a_lost_write() -> None:
    class Gone:
        def replace_namespaced_lease(self, *args: Any, **kwargs: Any) -> None:
            raise ApiError(404)

    ledger = KubeLedger(None, "guard-ns")
    ledger._api = Gone()
    with pytest.raises(Conflict):
        await ledger.put(lg.Ledger(version="12"), 1.0)


@pytest.mark.usefixtures("immediate")
async def test_repairs_and_an_unusable_lease_show_in_metrics_and_readyz() -> None:
    shared, api, wall = MemoryLedger(), Api(revision=50), [NOW]
    cache = await replica(shared, api, wall)
    metrics = Metrics(cache)

    def samples() -> dict[tuple[str, str], float]:
        return {(s.name, s.labels.get("problem", "")): s.value
                for f in text_string_to_metric_families(metrics.render().decode()) for s in f.samples
                if s.name in ("overlay_guard_ledger_repairs_total", "overlay_guard_ledger_usable")}

    assert samples()[("overlay_guard_ledger_repairs_total", "horizon")] == 0
    tamper(shared, horizon=10**12)
    assert (await cache.decide(overlay("x", price="1", extra=P5), "CREATE", None, dry_run=False,
                               admits=admits)).allowed
    assert samples()[("overlay_guard_ledger_repairs_total", "horizon")] == 1
    handlers = Handlers(Config(Path("tls.crt"), Path("tls.key")), cache, metrics)
    assert samples()[("overlay_guard_ledger_usable", "")] == 1
    assert (await handlers.readyz(cast(web.Request, None))).status == 200
    cache.report_ledger("namespace guard-ns does not exist")
    assert samples()[("overlay_guard_ledger_usable", "")] == 0
    answer = await handlers.readyz(cast(web.Request, None))
    assert answer.status == 503
    assert json.loads(cast(bytes, answer.body))["ledger"] == "namespace guard-ns does not exist"
