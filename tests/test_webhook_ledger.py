"""The ledger of admissions in flight (webhook/ledger.py): its pure rules, the admission chain its
deadlines come from (webhook/chain.py), and, as a property, several replicas' caches over one
compare-and-swap ledger with interleavings drawn by hypothesis: no two conflicting candidates are
both admitted, and no record outlives its object or its deadline."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulation.semantics import catalog as cat
from tests.core_support import small_catalog
from tests.strategies import examples
from tests.webhook_support import nodepool, overlay
from webhook import chain, judging, store
from webhook import ledger as lg
from webhook.leader import Conflict
from webhook.ledgerstore import MemoryLedger
from webhook.state import Cache

NO = "NodeOverlay"


def stored(obj: Mapping[str, Any], uid: str, rv: int) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "uid": uid, "resourceVersion": str(rv)}}


# -- pure rules -----------------------------------------------------------------------------------
def test_a_ledger_survives_its_lease() -> None:
    a = lg.record(stored(overlay("a", weight=10, price="1"), "ua", 5), deadline=100.0)
    ledger = lg.Ledger((a,), horizon=4, version="17")
    lease = lg.encode(ledger, "ns")
    assert lease["metadata"]["resourceVersion"] == "17" and lease["metadata"]["namespace"] == "ns"
    assert lg.decode(lease) == ledger
    assert lg.decode(None) == lg.Ledger()
    # Unreadable records (anyone who may write the Lease could put them there) are skipped.
    lease["metadata"]["annotations"][lg.ANNOTATION] = '{"records": [{"n": "x"}, 3], "horizon": "no"}'
    assert lg.decode(lease) == lg.Ledger(version="17", unread=("unreadable", "unreadable", "horizon"))


def test_records_leave_when_the_watch_has_them_or_are_read_past_their_deadline() -> None:
    a_obj = stored(overlay("a", weight=10, price="1"), "ua", 7)
    a, b = lg.record(a_obj, 100.0), lg.record(stored(overlay("b", weight=10, price="2"), "ub", 0), 100.0)
    ledger = lg.Ledger((a, b))
    # Another version of a in the cache (an older event) settles nothing; its own version does.
    older = store.build([stored(overlay("a", weight=10, price="9"), "ua", 6)])
    assert lg.sweep(ledger, older, {}, now=99.0) == lg.Sweep({}, ())
    assert lg.sweep(ledger, store.build([a_obj]), {}, now=99.0).settled == {"a": 7}
    # Another incarnation of the same name and spec does not settle it either.
    assert lg.sweep(ledger, store.build([stored(overlay("a", weight=10, price="1"), "u-old", 3)]), {},
                    now=99.0).settled == {}
    # A deletion the watch delivered settles it.
    assert lg.sweep(ledger, {}, {"ub": 9}, now=99.0).settled == {"b": 9}
    assert lg.sweep(ledger, {}, {}, now=100.0).overdue == (a, b)
    # Past the deadline the API server says: absent or another incarnation leaves at 0, its own at its version.
    assert lg.verdict(a, None) == 0
    assert lg.verdict(a, stored(overlay("a", weight=10, price="1"), "u-other", 12)) == 0
    assert lg.verdict(a, a_obj) == 7
    assert lg.verdict(a, stored(overlay("a", weight=10, price="3"), "ua", 8)) == 8
    assert lg.without(ledger, {"a": 7}) == lg.Ledger((b,), horizon=7)


def test_a_record_takes_the_place_of_its_own_name_never_of_another_incarnation() -> None:
    a1 = lg.record(stored(overlay("a", weight=10, price="1"), "ua", 0), 100.0)
    a2 = lg.record(stored(overlay("a", weight=10, price="2"), "ua", 0), 101.0)
    other = lg.record(stored(overlay("a", weight=10, price="3"), "u-new", 0), 101.0)
    ledger = lg.Ledger((a1,))
    assert lg.rival(ledger, a2) is None and lg.admit(ledger, a2, {}) == lg.Ledger((a2,))
    assert lg.rival(ledger, other) == a1
    assert lg.rival(ledger, other, leaving=["a"]) is None
    # Full: too many admissions in flight.
    many = lg.Ledger(tuple(lg.record(overlay(f"o{i}", price="1"), 1.0) for i in range(3)))
    assert lg.admit(many, a1, {}, cap=3) is None and lg.admit(many, a1, {"o0": 0}, cap=3) is not None


def test_the_admission_chain_comes_from_the_other_validating_webhooks() -> None:
    def config(name: str, *hooks: dict[str, Any]) -> dict[str, Any]:
        return {"metadata": {"name": name}, "webhooks": list(hooks)}

    def hook(name: str, timeout: int | None, groups: list[str], resources: list[str],
             operations: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {"name": name, "rules": [
            {"apiGroups": groups, "apiVersions": ["*"], "operations": operations, "resources": resources}]}
        if timeout is not None:
            out["timeoutSeconds"] = timeout
        return out

    found = chain.read([
        config("overlay-guard", hook(chain.VALIDATOR, 7, ["karpenter.sh"], ["nodeoverlays"], ["CREATE", "UPDATE"]),
               hook("nodepools.validate.overlay-guard.io", 5, ["karpenter.sh"], ["nodepools"], ["CREATE"])),
        config("kyverno", hook("validate.kyverno.svc", None, ["*"], ["*/*"], ["*"])),
        config("policy", hook("busy.example.com", 12, ["karpenter.sh"], ["nodeoverlays"], ["UPDATE"]),
               hook("deletes.example.com", 30, ["karpenter.sh"], ["nodeoverlays"], ["DELETE"]),
               hook("pods.example.com", 30, [""], ["pods"], ["CREATE"]))])
    assert found.own == 7 and found.budget == 6
    assert found.others == (("kyverno/validate.kyverno.svc", 10.0), ("policy/busy.example.com", 12.0))
    assert found.after == 12 + chain.PERSIST
    # Alone: a record never stored holds for a few seconds at most; 5 s to answer leaves 4 s to decide.
    alone = chain.read([])
    assert alone.after == chain.PERSIST <= 3 and alone.budget == 4
    assert chain.Chain(own=1).budget == 0.5
    assert chain.UNKNOWN.after == chain.MAX_TIMEOUT + chain.PERSIST


async def test_the_memory_ledger_swaps_only_from_the_version_it_was_read_at() -> None:
    mem = MemoryLedger()
    first = await mem.put(lg.Ledger(), 1.0)
    assert first.version == "1"
    with pytest.raises(Conflict):
        await mem.put(lg.Ledger(), 1.0)
    assert (await mem.put(first, 1.0)).version == "2"


# -- the property -----------------------------------------------------------------------------------
class Interleaved:
    """The shared ledger, each call yielding to the other replicas a drawn number of times before and
    after it reaches the store (a request's way to the API server and back)."""

    def __init__(self, shared: MemoryLedger, pause: Callable[[], int]) -> None:
        self.shared = shared
        self.pause = pause
        self.where = "interleaved"

    async def _yield(self) -> None:
        for _ in range(self.pause()):
            await asyncio.sleep(0)

    async def get(self, timeout: float) -> lg.Ledger:
        await self._yield()
        out = await self.shared.get(timeout)
        await self._yield()
        return out

    async def put(self, ledger: lg.Ledger, timeout: float) -> lg.Ledger:
        await self._yield()
        out = await self.shared.put(ledger, timeout)
        await self._yield()
        return out


# Candidates conflict when they set a price on the same family at the same weight.
CANDIDATE = st.tuples(st.sampled_from([10, 20]), st.sampled_from(["m", "a"]))


def conflicting(a: tuple[int, str], b: tuple[int, str]) -> bool:
    return a == b


def check_admitted(candidates: list[tuple[int, str]], admitted: list[int]) -> None:
    """No two admitted conflict, and every candidate that conflicts with nothing admitted was admitted
    itself (no spurious denial)."""
    for i in admitted:
        for j in admitted:
            assert i == j or not conflicting(candidates[i], candidates[j]), (candidates, admitted)
    for i in set(range(len(candidates))) - set(admitted):
        assert any(conflicting(candidates[i], candidates[j]) for j in admitted), (i, candidates)


@pytest.fixture(scope="module")
def catalog() -> cat.Catalog:
    return small_catalog()


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), candidates=st.lists(CANDIDATE, min_size=2, max_size=6),
       replicas=st.integers(2, 3))
def test_replicas_over_one_ledger_never_admit_two_conflicting_overlays(
        catalog: cat.Catalog, monkeypatch: pytest.MonkeyPatch, data: st.DataObject,
        candidates: list[tuple[int, str]], replicas: int) -> None:
    # Every evaluation on the loop: a thread's timing is not the interleaving hypothesis drew.
    monkeypatch.setattr(judging, "INLINE_SECONDS", math.inf)
    asyncio.run(_run(catalog, data, candidates, replicas))


async def _run(catalog: cat.Catalog, data: st.DataObject, candidates: list[tuple[int, str]], replicas: int) -> None:
    wall = [1000.0]
    shared = MemoryLedger()
    api: dict[tuple[str, str], Mapping[str, Any]] = {}

    async def read(kind: str, name: str) -> Mapping[str, Any] | None:
        return api.get((kind, name))

    # Every choice is drawn before the replicas run: how many pauses a run takes depends on the event loop's
    # scheduling, and a draw made from inside it would change the shape of the example from run to run.
    pauses = data.draw(st.lists(st.integers(0, 4), min_size=1, max_size=64), label="pauses")
    turn = [0]

    def pause() -> int:
        turn[0] += 1
        return pauses[turn[0] % len(pauses)]

    caches = []
    for _ in range(replicas):
        cache = Cache(debounce=0.01, ledger=Interleaved(shared, pause), after=5.0, wall=lambda: wall[0])
        cache.set_catalog(catalog)
        cache.load([nodepool("p")])
        cache.reader = read
        await cache.start()
        assert await cache.wait_ready(10)
        caches.append(cache)
    try:
        objects = [stored(overlay(f"o{i}", weight=w, family=f, price=f"{i + 1}"), f"u{i}", 0)
                   for i, (w, f) in enumerate(candidates)]
        judged_by = [data.draw(st.integers(0, replicas - 1), label="replica") for _ in objects]
        stores = data.draw(st.lists(st.booleans(), min_size=len(objects), max_size=len(objects)), label="stored")
        # A watch delivers events in resourceVersion order: each replica's watch has delivered the first so many
        # stored objects. (Drawn per object and replica, a replica could hold a later version without an earlier
        # object, which no watch does: its cache then reads a record taken out at that earlier version as missing
        # and writes it back, rightly by what it holds, and whether it had read that record before depended on
        # how many steps of the event loop each ledger call took.)
        deliveries = data.draw(st.lists(st.integers(0, len(objects)), min_size=replicas, max_size=replicas),
                               label="delivered")
        decisions = await asyncio.gather(*(
            caches[r].decide(o, "CREATE", None, dry_run=False, admits=lambda rep: not rep.errors())
            for r, o in zip(judged_by, objects, strict=True)))
        admitted = [i for i, d in enumerate(decisions) if d.allowed]
        check_admitted(candidates, admitted)
        assert {r.name for r in shared.stored.records} == {f"o{i}" for i in admitted}

        # Some admitted objects are stored (another webhook may refuse the rest), and the watch of some
        # replicas delivers them, in order.
        persisted = [i for i in admitted if stores[i]]
        for k, i in enumerate(persisted):
            obj = stored(objects[i], f"u{i}", 10 + k)
            api[(NO, f"o{i}")] = obj
            for cache in [c for c, upto in zip(caches, deliveries, strict=True) if k < upto]:
                cache.apply_event(NO, {"type": "ADDED", "object": obj, "raw_object": obj})
        for cache in caches:
            await cache.rebuild()
            await cache.sweep()
        # Before the deadline a record leaves only once a watch has its object.
        delivered = {k[1] for c in caches for k in c.snapshot.basis if k[0] == NO}
        assert {r.name for r in shared.stored.records} == {f"o{i}" for i in admitted} - delivered
        # Past it, none outlives its object: stored ones leave at their version, the others at once.
        wall[0] += 5.0
        for cache in caches:
            await cache.sweep()
        assert shared.stored.records == ()
        assert shared.stored.horizon == (max(10 + n for n in range(len(persisted))) if persisted else 0)
    finally:
        for cache in caches:
            await cache.close()
