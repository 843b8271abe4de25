"""A denial rests only on objects that exist or are being admitted: records of the ledger count until
the watch has their object or, past their deadline, the API server says it does not; cached objects
the API server no longer has do not count (here a fake reader and the in-memory ledger;
tests/e2e/test_security.py and tests/e2e/test_replicas.py do it against a real kube-apiserver)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp

from tests.webhook_support import Server, nodepool, overlay, review, serving
from webhook import state, store

NO = "NodeOverlay"


class FakeApi:
    """What the API server has; `arrives` stores an object after a delay (an in-flight CREATE)."""

    def __init__(self, objects: Sequence[Mapping[str, Any]] = ()) -> None:
        self.objects: dict[tuple[str, str], Mapping[str, Any]] = {}
        for obj in objects:
            self.put(obj)
        self.reads: list[tuple[str, str]] = []
        self.broken = False

    def put(self, obj: Mapping[str, Any]) -> None:
        key = store.key_of(obj)
        assert key is not None
        self.objects[key] = obj

    async def read(self, kind: str, name: str) -> Mapping[str, Any] | None:
        self.reads.append((kind, name))
        if self.broken:
            raise ConnectionError("the API server is unreachable")
        return self.objects.get((kind, name))

    def arrives(self, obj: Mapping[str, Any], after: float) -> None:
        asyncio.get_running_loop().call_later(after, self.put, obj)


async def answer(srv: Server, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
    began = time.monotonic()
    async with aiohttp.ClientSession() as session:
        status, out = await srv.post(session, "/validate", body)
    assert status == 200, out
    return out["response"], time.monotonic() - began


async def post(srv: Server, body: dict[str, Any]) -> tuple[bool, float]:
    out, seconds = await answer(srv, body)
    return out["allowed"], seconds


def stored(obj: Mapping[str, Any], uid: str, rv: str) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "uid": uid, "resourceVersion": rv}}


def conflicting(name: str, price: str) -> dict[str, Any]:
    return overlay(name, weight=50, price=price)


async def cached(srv: Server, name: str, timeout: float = 10) -> None:
    """Returns once the cache's snapshot holds NodeOverlay `name` (its rebuild is debounced)."""
    deadline = time.monotonic() + timeout
    while (NO, name) not in srv.cache.snapshot.basis:
        assert time.monotonic() < deadline, f"NodeOverlay {name} not in the snapshot after {timeout}s"
        await asyncio.sleep(0.01)


async def test_a_forged_record_holds_until_its_deadline_and_no_longer(tmp_path: Path) -> None:
    wall = [time.time()]
    async with serving(tmp_path, [nodepool("p")], after=1.0, wall=lambda: wall[0]) as srv:
        api = FakeApi([nodepool("p")])
        srv.cache.reader = api.read
        # Posted straight to the port: admitted and recorded, but the API server never stores it.
        assert (await post(srv, review(conflicting("forged", "9"))))[0] is True
        assert srv.cache.pending_count() == 1
        out, _ = await answer(srv, review(conflicting("real", "1")))
        # Until its deadline the record counts, and the denial says it rests on an admission in flight.
        assert out["allowed"] is False and out["auditAnnotations"]["verdict"] == "denied_in_flight"
        assert "forged" in out["status"]["message"] and "being admitted right now" in out["status"]["message"]
        wall[0] += 1.5  # past its deadline
        assert (await post(srv, review(conflicting("real", "1"))))[0] is True
        assert (NO, "forged") in api.reads
        assert {r.name for r in srv.cache.view.records} == {"real"}


async def test_a_create_stored_later_than_a_second_still_wins_the_race(tmp_path: Path) -> None:
    """Another validating webhook answers after 3 s: the first overlay is stored 3 s after it was
    admitted; a conflicting one 1.5 s after it is denied (the deadline covers the whole chain)."""
    wall = [time.time()]
    async with serving(tmp_path, [nodepool("p")], after=4.0, wall=lambda: wall[0]) as srv:
        api = FakeApi([nodepool("p")])
        srv.cache.reader = api.read
        first = stored(conflicting("first", "9"), "u1", "7")
        assert (await post(srv, review(first)))[0] is True
        wall[0] += 1.5
        out, _ = await answer(srv, review(conflicting("second", "1")))
        assert out["allowed"] is False and out["auditAnnotations"]["verdict"] == "denied_in_flight"
        wall[0] += 1.5  # 3 s after its admission the API server stores it, and the watch brings it
        api.put(first)
        srv.cache.apply_event(NO, {"type": "ADDED", "object": first, "raw_object": first})
        await cached(srv, "first")
        wall[0] += 1.1  # past its deadline: an ordinary denial
        out, _ = await answer(srv, review(conflicting("third", "1")))
        assert out["allowed"] is False and out["auditAnnotations"]["verdict"] == "denied"
        await srv.cache.sweep()
        assert srv.cache.pending_count() == 0 and srv.cache.view.horizon == 7


async def test_a_cached_object_the_api_server_no_longer_has_does_not_deny(tmp_path: Path) -> None:
    deleted = conflicting("deleted", "9")
    async with serving(tmp_path, [nodepool("p"), deleted]) as srv:
        api = FakeApi([nodepool("p")])  # the watch has not delivered the DELETE yet
        srv.cache.reader = api.read
        assert (await post(srv, review(conflicting("replacement", "1"))))[0] is True
        assert srv.cache.stale_objects == 1
        # While it does exist, the denial stands.
        api.put(deleted)
        assert (await post(srv, review(conflicting("another", "1"), dry_run=True)))[0] is False


async def test_a_delete_the_watch_delivers_during_the_confirmation_does_not_deny(tmp_path: Path) -> None:
    # The denial came from a snapshot that still had the object; by the time the read answers, the
    # watch has delivered the DELETE and a newer snapshot lacks it (kubectl delete, then apply).
    deleted = conflicting("deleted", "9")
    async with serving(tmp_path, [nodepool("p"), deleted]) as srv:
        api = FakeApi([nodepool("p")])
        srv.cache.reader = api.read
        confirm = srv.cache._confirm

        async def after_the_watch_delivers(keys: list[Any], subject: Any, ends: float) -> Any:
            srv.cache.apply_event(NO, {"type": "DELETED", "object": deleted, "raw_object": deleted})
            await srv.cache.rebuild()
            return await confirm(keys, subject, ends)

        srv.cache._confirm = after_the_watch_delivers  # type: ignore[method-assign]
        allowed, _ = await post(srv, review(conflicting("replacement", "1")))
        assert allowed is True and api.reads == [(NO, "deleted")]


async def test_the_denial_stands_when_nothing_can_be_confirmed(tmp_path: Path) -> None:
    async with serving(tmp_path, [nodepool("p"), conflicting("stored", "9")]) as srv:
        api = FakeApi()
        api.broken = True
        srv.cache.reader = api.read
        out, _ = await answer(srv, review(conflicting("new", "1")))
        assert out["allowed"] is False and out["auditAnnotations"]["verdict"] == "denied"
        assert api.reads == [(NO, "stored")]
    # --state: no reader, nothing to confirm against.
    async with serving(tmp_path / "offline", [nodepool("p"), conflicting("stored", "9")]) as srv:
        assert srv.cache.reader is None
        assert (await post(srv, review(conflicting("new", "1"))))[0] is False


async def test_a_watch_delete_settles_the_record(tmp_path: Path) -> None:
    async with serving(tmp_path, [nodepool("p")]) as srv:
        gone = stored(conflicting("gone", "9"), "u-gone", "5")
        assert (await post(srv, review(gone)))[0] is True
        srv.cache.apply_event(NO, {"type": "ADDED", "object": gone, "raw_object": gone})
        deleted = stored(conflicting("gone", "9"), "u-gone", "6")
        srv.cache.apply_event(NO, {"type": "DELETED", "object": deleted, "raw_object": deleted})
        # Before any sweep: the denial it would cause takes it out (deleted, then replaced).
        assert (await post(srv, review(conflicting("after", "1"))))[0] is True
        assert [r.name for r in srv.cache.view.records] == ["after"] and srv.cache.view.horizon == 6


async def test_many_forged_records_cost_a_bounded_number_of_reads(tmp_path: Path) -> None:
    """More forged records than one request may read, each on its own offering (so they do not
    conflict with each other), all conflicting with one real write: past their deadline, a denial reads
    at most MAX_READS of them, and the sweeps take the rest out."""
    types = [f"m5.{size}" for size in ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge")]
    offerings = [(t, z, ct) for t in types for z in ("us-east-1a", "us-east-1b", "us-east-1c")
                 for ct in ("on-demand", "spot")][:30]
    wall = [time.time()]
    async with serving(tmp_path, [nodepool("p")], after=2.0, wall=lambda: wall[0]) as srv:
        api = FakeApi([nodepool("p")])
        srv.cache.reader = api.read
        for i, (t, zone, ct) in enumerate(offerings):
            forged = overlay(f"forged-{i}", weight=50, family="m5", price="9", extra=[
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [t]},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [ct]}])
            assert (await post(srv, review(forged)))[0] is True, i
        assert srv.cache.pending_count() == len(offerings) and not api.reads
        wall[0] += 2.1  # past every deadline
        allowed, _ = await post(srv, review(overlay("real", weight=50, family="m5", price="1")))
        assert allowed is False and len(api.reads) <= state.MAX_READS
        for _ in range(5):
            await srv.cache.sweep()
        out, _ = await answer(srv, review(overlay("real", weight=50, family="m5", price="1")))
        assert out["allowed"] is True, (out, srv.cache.view.records)
        assert {r.name for r in srv.cache.view.records} == {"real"}


async def test_a_slow_confirmation_does_not_hold_up_other_decisions(tmp_path: Path) -> None:
    async with serving(tmp_path, [nodepool("p"), conflicting("stored", "9")]) as srv:
        api = FakeApi([nodepool("p"), conflicting("stored", "9")])

        reading, release = asyncio.Event(), asyncio.Event()

        async def slow(kind: str, name: str) -> Mapping[str, Any] | None:
            reading.set()
            await release.wait()
            return await api.read(kind, name)

        srv.cache.reader = slow
        confirming = asyncio.create_task(post(srv, review(conflicting("real", "1"))))
        await reading.wait()
        # Answered while the confirmation still waits on its read: the order, not a stopwatch, says it was not held.
        assert (await post(srv, review(overlay("unrelated", weight=7, family="c5", price="1"))))[0] is True
        assert not confirming.done()
        release.set()
        allowed, _ = await confirming
        assert allowed is False


async def test_a_decision_past_its_budget_is_refused_with_503(tmp_path: Path) -> None:
    async with serving(tmp_path, [nodepool("p"), conflicting("stored", "9")]) as srv:
        async def stuck(kind: str, name: str) -> Mapping[str, Any] | None:
            await asyncio.Event().wait()  # a read that never answers
            return None

        srv.cache.reader, srv.cache._budget = stuck, 0.5
        out, seconds = await answer(srv, review(conflicting("new", "1")))
        assert out["allowed"] is False and out["status"]["code"] == 503, out
        assert "did not finish within 0.5s" in out["status"]["message"]
        # Refused on the budget's count, well before the stuck read would have answered.
        assert seconds < 5 and srv.cache.unanswered["budget"] == 1
        assert srv.cache.pending_count() == 0
