"""The cache's watch-event handling, its records in the ledger and informer loop, as pure code: no cluster,
no HTTP. (Against a real API server: tests/e2e.)"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import pytest

from simulation.semantics import catalog as cat
from sources import kube
from tests.webhook_support import default_catalog, nodepool, overlay
from webhook import informer, patch, store
from webhook.state import Cache

NO, NP = "NodeOverlay", "NodePool"


def with_rv(obj: Mapping[str, Any], rv: str, **meta: Any) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": rv, **meta}}


def event(etype: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": etype, "object": obj, "raw_object": obj}


@contextlib.asynccontextmanager
async def _ready(catalog: cat.Catalog, objects: list[Mapping[str, Any]]) -> AsyncIterator[Cache]:
    """A started cache holding `objects`, synced; closed on leaving."""
    cache = Cache(debounce=0.01)
    cache.set_catalog(catalog)
    cache.load(objects)
    await cache.start()
    try:
        assert await cache.wait_ready(5)
        yield cache
    finally:
        await cache.close()


def test_added_modified_deleted() -> None:
    a = overlay("a", weight=10, price="1")
    out = store.handle({}, NO, event("ADDED", with_rv(a, "5")))
    assert out.changed and out.resource_version == "5" and (NO, "a") in out.store
    b = overlay("a", weight=10, price="2")
    out = store.handle(out.store, NO, event("MODIFIED", with_rv(b, "6")))
    assert out.changed and out.store[(NO, "a")].obj["spec"]["price"] == "2"
    out = store.handle(out.store, NO, event("DELETED", with_rv(b, "7")))
    assert out.changed and out.store == {} and out.resource_version == "7"


def test_status_and_metadata_churn_is_not_a_change() -> None:
    """Karpenter writes status conditions on every overlay: no snapshot rebuild for those."""
    a = with_rv(overlay("a", price="1"), "5")
    first = store.handle({}, NO, event("ADDED", a))
    churned = {
        **with_rv(a, "9", generation=3, managedFields=[{"manager": "karpenter"}]),
        "status": {"conditions": [{"type": "ValidationSucceeded", "status": "True"}]},
    }
    out = store.handle(first.store, NO, event("MODIFIED", churned))
    assert not out.changed and out.resource_version == "9"
    assert out.store[(NO, "a")].obj["status"]  # the newest object is still kept


def test_bookmark_moves_resource_version_only() -> None:
    before = store.build([overlay("a", price="1")])
    out = store.handle(
        before, NO, {"type": "BOOKMARK", "object": {"kind": NO, "metadata": {"resourceVersion": "77"}}}
    )
    assert out.store == before and not out.changed and out.resource_version == "77"


def test_gone_asks_for_relist() -> None:
    gone = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"}
    out = store.handle({}, NO, {"type": "ERROR", "object": gone, "raw_object": gone})
    assert out.relist and "410" in (out.error or "")


def test_event_without_kind_gets_the_watched_kind() -> None:
    obj = {"metadata": {"name": "p", "resourceVersion": "3"}, "spec": {}}
    out = store.handle({}, NP, event("ADDED", obj))
    assert (
        out.store[(NP, "p")].obj["kind"] == NP and out.store[(NP, "p")].obj["apiVersion"] == "karpenter.sh/v1"
    )


def test_malformed_events_are_ignored() -> None:
    for bad in (
        {"type": "ADDED"},
        {"type": "ADDED", "object": "x"},
        {"type": "WHAT", "object": overlay("a")},
        {"type": "ADDED", "object": {"kind": NO, "metadata": {}}},
    ):
        out = store.handle({}, NO, bad)
        assert out.store == {} and not out.changed


def test_replace_kind_keeps_other_kinds_and_reports_change() -> None:
    s = store.build([overlay("a", price="1"), nodepool("p")])
    out, changed = store.replace_kind(s, NO, [overlay("b", price="1")])
    assert set(out) == {(NO, "b"), (NP, "p")} and changed
    again, changed = store.replace_kind(out, NO, [with_rv(overlay("b", price="1"), "12")])
    assert not changed and set(again) == set(out)


def test_plan_extras_and_rebase() -> None:
    basis = store.build([overlay("a", price="1"), overlay("b", price="1")])
    pending = store.build([overlay("c", price="1"), overlay("b", price="1")])  # b: already in basis
    p = store.plan(basis, pending, (NO, "d"), "CREATE", None)
    assert [x["metadata"]["name"] for x in p.extras] == ["c"] and not p.rebase
    # The candidate replaces its own pending version instead of meeting it.
    p = store.plan(basis, pending, (NO, "c"), "CREATE", None)
    assert p.extras == () and not p.rebase
    # UPDATE whose oldObject is what the cache holds: the fast path.
    p = store.plan(basis, pending, (NO, "a"), "UPDATE", with_rv(overlay("a", price="1"), "4"))
    assert not p.rebase
    # oldObject differs (stale cache): judge against oldObject.
    p = store.plan(basis, pending, (NO, "a"), "UPDATE", overlay("a", price="9"))
    assert p.rebase and p.previous is not None and p.previous.obj["spec"]["price"] == "9"
    # CREATE of a name the cache still has (a delete the watch has not delivered yet).
    p = store.plan(basis, pending, (NO, "a"), "CREATE", None)
    assert p.rebase and p.previous is None
    assert (NO, "a") not in store.rebased(basis, (NO, "a"), None)


# -- the informer loop with fake list/watch calls -------------------------------------------
class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.versions: list[str | None] = []

    def replace(self, kind: str, items: list[Mapping[str, Any]], version: str | None) -> None:
        self.calls.append(("replace", [i["metadata"]["name"] for i in items]))
        self.versions.append(version)

    def event(self, kind: str, ev: Mapping[str, Any]) -> store.Transition | None:
        self.calls.append(("event", ev["type"]))
        return store.handle({}, kind, ev)

    def lost(self, kind: str) -> None:
        self.calls.append(("lost", kind))


def test_informer_relists_on_gone_and_resumes_from_last_version() -> None:
    stop = threading.Event()
    sink = Recorder()
    watched_from: list[str | None] = []
    lists = iter([([overlay("a")], "10"), ([overlay("a"), overlay("b")], "20")])

    def lister(kind: str) -> tuple[list[Mapping[str, Any]], str | None]:
        items, rv = next(lists)
        return list(items), rv

    def watcher(kind: str, rv: str | None) -> Iterator[Mapping[str, Any]]:
        watched_from.append(rv)
        if len(watched_from) == 1:
            yield event("MODIFIED", with_rv(overlay("a", price="1"), "11"))
            return  # server-side timeout: resume from 11, no relist
        if len(watched_from) == 2:
            raise kube.Gone("too old resource version", 410)
        stop.set()
        yield event("ADDED", with_rv(overlay("c"), "21"))

    informer.run_informer(NO, lister, watcher, sink, stop, sleep=lambda s: False)
    assert watched_from == ["10", "11", "20"]
    assert sink.calls == [("replace", ["a"]), ("event", "MODIFIED"), ("lost", NO), ("replace", ["a", "b"])]
    assert sink.versions == ["10", "20"]  # the cache's snapshots catch up with the ledger's horizon by them


def test_informer_backs_off_on_errors() -> None:
    stop = threading.Event()
    sink = Recorder()
    delays: list[float] = []
    attempts = iter([ConnectionError("refused"), kube.KubeError("cannot list: 500", 500), None])

    def lister(kind: str) -> tuple[list[Mapping[str, Any]], str | None]:
        failure = next(attempts)
        if failure is not None:
            raise failure
        return [], "1"

    def watcher(kind: str, rv: str | None) -> Iterator[Mapping[str, Any]]:
        stop.set()
        return iter(())

    def sleep(seconds: float) -> bool:
        delays.append(seconds)
        return False

    informer.run_informer(
        NO, lister, watcher, sink, stop, backoff=informer.Backoff(base=1, cap=8), sleep=sleep
    )
    assert len(delays) == 2 and 0.5 <= delays[0] <= 1 and 1 <= delays[1] <= 2
    assert sink.calls == [("lost", NO), ("lost", NO), ("replace", [])]


def test_backoff_is_capped() -> None:
    b = informer.Backoff(base=1, cap=5)
    assert max(b.next() for _ in range(20)) <= 5
    b.reset()
    assert b.next() <= 1


# -- the cache on an event loop, without HTTP -----------------------------------------------
@pytest.fixture(scope="module")
def small_catalog() -> cat.Catalog:
    types = [
        {
            "apiVersion": "karpenter.sh/v1alpha1",
            "kind": "InstanceType",
            "metadata": {"name": n, "labels": {"karpenter.k8s.aws/instance-family": n.split(".")[0]}},
            "spec": {
                "offerings": [
                    {
                        "karpenter.sh/capacity-type": "on-demand",
                        "topology.kubernetes.io/zone": "us-east-1a",
                        "karpenter.sh/price": "1",
                    }
                ],
                "resources": {"cpu": "2", "memory": "4Gi", "pods": "29"},
            },
        }
        for n in ("p5.48xlarge", "m7i.large")
    ]
    return cat.from_documents(types)


async def test_cache_ready_only_after_every_kind_synced(small_catalog: cat.Catalog) -> None:
    cache = Cache(debounce=0.01)
    cache.expect(store.KINDS)
    cache.set_catalog(small_catalog)
    await cache.start()
    try:
        cache.replace_kind(NO, [overlay("a", price="1")])
        assert not await cache.wait_ready(0.3)
        cache.replace_kind(NP, [nodepool("p")])
        assert await cache.wait_ready(5)
        cache.mark_unsynced(NO)  # a lost watch: unready while relisting
        assert not cache.ready
        cache.replace_kind(NO, [overlay("a", price="1")])
        assert await cache.wait_ready(5)
    finally:
        await cache.close()


async def test_bursts_coalesce_into_few_rebuilds(small_catalog: cat.Catalog) -> None:
    cache = Cache(debounce=0.2)
    cache.set_catalog(small_catalog)
    cache.load([nodepool("p")])
    await cache.start()
    try:
        assert await cache.wait_ready(5)
        first = cache.snapshot.generation
        for i in range(50):
            cache.apply_event(NO, event("ADDED", with_rv(overlay(f"o{i}", price="1"), str(100 + i))))
        for _ in range(200):  # a busy machine may take a while to rebuild
            if len([k for k in cache.snapshot.basis if k[0] == NO]) == 50:
                break
            await asyncio.sleep(0.05)
        snap = cache.snapshot
        assert len([k for k in snap.basis if k[0] == NO]) == 50
        assert snap.generation - first <= 2
        # Status-only churn rebuilds nothing: no change is recorded, and the snapshot takes the new
        # resourceVersion at once, with no rebuild to wait for.
        generation = snap.generation
        churn = cache.apply_event(
            NO, event("MODIFIED", {**with_rv(overlay("o1", price="1"), "999"), "status": {"x": 1}})
        )
        assert not churn.changed
        assert (cache.snapshot.generation, cache.snapshot.version) == (generation, 999)
    finally:
        await cache.close()


async def test_a_record_leaves_when_the_watch_has_it_or_past_its_deadline(small_catalog: cat.Catalog) -> None:
    wall = [1000.0]
    cache = Cache(debounce=0.01, after=3.0, wall=lambda: wall[0])
    cache.set_catalog(small_catalog)
    cache.load([nodepool("p")])
    await cache.start()
    try:
        assert await cache.wait_ready(5)
        a = with_rv(overlay("a", weight=10, price="1"), "50", uid="ua")
        d = await cache.decide(a, "CREATE", None, dry_run=False, admits=lambda r: True)
        assert d.held and cache.pending_count() == 1
        assert cache.ledger_writes["written"] == 1
        cache.apply_event(NO, event("ADDED", a))
        for _ in range(100):
            await asyncio.sleep(0.02)
            if (NO, "a") in cache.snapshot.basis:
                break
        await cache.sweep()
        assert cache.pending_count() == 0 and cache.view.horizon == 50
        b = overlay("b", weight=10, price="2")
        await cache.decide(b, "CREATE", None, dry_run=False, admits=lambda r: True)
        # Before its deadline a record stays, stored or not; past it, the API server (here: none) decides.
        await cache.sweep()
        assert cache.pending_count() == 1
        wall[0] += 3.1
        await cache.sweep()
        assert cache.pending_count() == 0
        d = await cache.decide(overlay("c"), "CREATE", None, dry_run=True, admits=lambda r: True)
        assert not d.held and cache.pending_count() == 0
    finally:
        await cache.close()


async def test_a_nodepool_change_sees_an_overlay_admitted_a_moment_ago() -> None:
    """The NodePool's assessment counts held overlays: applied right after an overlay, before the
    watch delivers it, the NodePool still gets the warning that it makes the two conflict."""
    team = {"key": "team", "operator": "In", "values": ["x"]}
    async with _ready(default_catalog(), [nodepool("p"), overlay("t1", weight=3, price="1", extra=[team])]) as cache:
        pool = nodepool("q", {"team": "x"})
        assert not [f for f in (await cache.assess(pool)).findings if f.code == "same-weight-conflict"]
        held = overlay("t2", weight=3, price="2", extra=[team])
        assert (await cache.decide(held, "CREATE", None, dry_run=False, admits=lambda r: True)).held
        found = [f for f in (await cache.assess(pool)).findings if f.code == "same-weight-conflict"]
        assert found and {r.name for f in found for r in (f.obj, *f.related)} >= {"t1", "t2"}


@pytest.mark.parametrize("busy", [True, False], ids=["cpu", "waiting"])
async def test_quick_evaluations_run_on_the_loop_and_slow_ones_in_a_thread(
        small_catalog: cat.Catalog, monkeypatch: pytest.MonkeyPatch, busy: bool) -> None:
    """A thread hand-off costs more CPU than the rest of the webhook's own work per request, so
    evaluations run on the loop until they turn slow, and return there once quick again. Slow means
    wall time: time spent waiting (for a core on a loaded machine) moves them to a thread too, where the loop
    goes on serving the other connections (judging.py)."""
    from webhook import admission, judging

    monkeypatch.setattr(judging, "INLINE_SECONDS", 0.05)
    judge = admission.judge
    delay = [0.0]
    threads: list[int] = []

    def timed(*args: Any) -> Any:
        threads.append(threading.get_ident())
        if delay[0] and busy:
            ends = time.thread_time() + delay[0]
            while time.thread_time() < ends:
                pass
        elif delay[0]:
            threading.Event().wait(delay[0])
        return judge(*args)

    monkeypatch.setattr(admission, "judge", timed)
    async with _ready(small_catalog, [nodepool("p")]) as cache:

        async def decide(name: str) -> bool:
            d = await cache.decide(overlay(name, price="1"), "CREATE", None, dry_run=True,
                                   admits=lambda r: True)
            return threads[-1] == threading.get_ident() and d.allowed

        for i in range(5):  # the first evaluations compile and index what later ones reuse
            await decide(f"w{i}")
        assert await decide("a")
        delay[0] = 0.25  # the estimate moves past INLINE_SECONDS at once
        assert await decide("b")  # decided on the loop before it was known to be slow
        assert not await decide("c")
        delay[0] = 0.0
        on_loop = [await decide(f"d{i}") for i in range(12)]
        assert not on_loop[0] and on_loop[-1]


@pytest.mark.parametrize("on_loop", [True, False], ids=["loop", "thread"])
async def test_only_an_evaluation_in_a_thread_is_given_a_deadline_timer(
        small_catalog: cat.Catalog, monkeypatch: pytest.MonkeyPatch, on_loop: bool) -> None:
    """Nothing suspends an evaluation on the loop, so a deadline could not end it early: it gets no timer (one made
    and cancelled per admission); one in a thread is awaited, and its deadline ends the wait."""
    from webhook import judging

    monkeypatch.setattr(judging, "INLINE_SECONDS", 60.0 if on_loop else 0.0)
    timeout = asyncio.timeout
    timers: list[float | None] = []

    def counted(delay: float | None) -> asyncio.Timeout:
        timers.append(delay)
        return timeout(delay)

    async with _ready(small_catalog, [nodepool("p")]) as cache:
        monkeypatch.setattr(asyncio, "timeout", counted)
        d = await cache.decide(overlay("a", price="1"), "CREATE", None, dry_run=True, admits=lambda r: True)
    assert d.allowed
    assert len(timers) == (0 if on_loop else 1)


def test_only_a_candidate_of_usual_size_is_judged_on_the_loop() -> None:
    """Whoever reaches the port can send a huge overlay: its evaluation must not stall the loop."""
    from webhook import judging

    assert judging.usual(overlay("a", price="1"))
    values = [f"v{i}" for i in range(judging.INLINE_ITEMS + 1)]
    many = overlay("b", price="1")
    many["spec"]["requirements"] = [{"key": "team", "operator": "NotIn", "values": values}]
    assert not judging.usual(many)
    long = overlay("c", price="1")
    long["metadata"]["annotations"] = {"note": "x" * 64 * (judging.INLINE_ITEMS + 1)}
    assert not judging.usual(long)
    deep = overlay("d", price="1")
    deep["spec"]["capacity"] = {f"example.com/r{i}": "1" for i in range(judging.INLINE_ITEMS)}
    assert not judging.usual(deep)


async def test_validate_renders_the_object_for_a_kept_report_only(
        small_catalog: cat.Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    """The key of a /mutate report kept for /validate is the object as JSON: a /validate renders it only while a
    report is kept (a webhook without /mutate never does), and still takes the report /mutate kept."""
    from webhook import state

    judged_form = state._judged_form
    rendered: list[str | None] = []

    def counted(obj: Mapping[str, Any] | None) -> str | None:
        rendered.append(None if obj is None else obj["metadata"]["name"])
        return judged_form(obj)

    monkeypatch.setattr(state, "_judged_form", counted)
    async with _ready(small_catalog, [nodepool("p"), overlay("stored", price="1")]) as cache:
        for name in ("a", "b"):
            await cache.decide(overlay(name, weight=10, price="2"), "CREATE", None, dry_run=True,
                               admits=lambda r: True)
        assert rendered == []
        mutated = await cache.simulate(overlay("c", weight=10, price="2"), "CREATE", None)
        decided = await cache.decide(overlay("c", weight=10, price="2"), "CREATE", None, dry_run=True,
                                     admits=lambda r: True)
        assert decided.report is mutated and rendered == ["c", None, "c", None]
        await cache.decide(overlay("d", weight=10, price="2"), "CREATE", None, dry_run=True, admits=lambda r: True)
        assert rendered == ["c", None, "c", None]


async def test_validate_takes_the_report_mutate_made_of_the_same_object(
        small_catalog: cat.Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    """An apply goes to /mutate, then to /validate with what the API server added (uid, creationTimestamp): one
    judgement. Anything that could change the answer (the object, the snapshot, the ledger) judges again, and a
    report serves one /validate only."""
    from webhook import admission

    judge = admission.judge
    judged: list[str] = []

    def counted(prepared: Any, candidate: Mapping[str, Any], *rest: Any) -> Any:
        judged.append(candidate["metadata"]["name"])
        return judge(prepared, candidate, *rest)

    monkeypatch.setattr(admission, "judge", counted)
    async with _ready(small_catalog, [nodepool("p"), overlay("stored", price="1")]) as cache:

        async def apply(obj: Mapping[str, Any], *, dry_run: bool = True) -> int:
            """Judgements one /mutate + /validate pair costs, and whether /validate's report is /mutate's."""
            before = len(judged)
            mutated = await cache.simulate(obj, "CREATE", None)
            # What the API server sends /validate: /mutate's annotations applied, its own metadata set.
            annotations = {**obj["metadata"].get("annotations", {}), patch.STATUS: "applied", patch.CELLS: "6"}
            stored = with_rv(obj, "", uid="u-" + obj["metadata"]["name"], creationTimestamp="2026-12-06T00:00:00Z",
                             annotations=annotations)
            decided = await cache.decide(stored, "CREATE", None, dry_run=dry_run, admits=lambda r: True)
            assert [f.code for f in decided.report.findings] == [f.code for f in mutated.findings]
            return len(judged) - before

        a = overlay("a", weight=10, price="2")
        assert await apply(a) == 1
        # The same object again: the first /validate took the report, so /mutate judges anew and keeps it.
        assert await apply(a) == 1
        before = len(judged)
        await cache.decide(a, "CREATE", None, dry_run=True, admits=lambda r: True)
        assert len(judged) == before + 1  # a /validate with no /mutate before it
        # /mutate's object differs from /validate's (a spec change): judged twice.
        before = len(judged)
        await cache.simulate(a, "CREATE", None)
        await cache.decide(overlay("a", weight=11, price="2"), "CREATE", None, dry_run=True, admits=lambda r: True)
        assert len(judged) == before + 2
        # The ledger changes between the two (another admission recorded): judged twice.
        before = len(judged)
        await cache.simulate(a, "CREATE", None)
        await cache.decide(overlay("held", weight=3, price="1"), "CREATE", None, dry_run=False,
                           admits=lambda r: True)
        await cache.decide(a, "CREATE", None, dry_run=True, admits=lambda r: True)
        assert len(judged) == before + 3
        # The snapshot is rebuilt between the two: judged twice.
        before = len(judged)
        await cache.simulate(a, "CREATE", None)
        generation = cache.snapshot.generation
        cache.apply_event(NO, event("ADDED", with_rv(overlay("new", price="1"), "200")))
        await cache.rebuild()
        assert cache.snapshot.generation > generation
        await cache.decide(a, "CREATE", None, dry_run=True, admits=lambda r: True)
        assert len(judged) == before + 2
