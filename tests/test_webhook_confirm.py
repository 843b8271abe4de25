"""A denial rests only on objects that exist: before denying, the webhook reads the objects the
denial rests on from the API server (here a fake reader; tests/e2e/test_security.py does it
against a real kube-apiserver)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp

from tests.webhook_support import Server, nodepool, overlay, review, serving
from webhook import store

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


async def post(srv: Server, body: dict[str, Any]) -> tuple[bool, float]:
    began = time.monotonic()
    async with aiohttp.ClientSession() as session:
        status, out = await srv.post(session, "/validate", body)
    assert status == 200, out
    return out["response"]["allowed"], time.monotonic() - began


def conflicting(name: str, price: str) -> dict[str, Any]:
    return overlay(name, weight=50, price=price)


async def test_a_forged_hold_is_dropped_and_the_real_write_admitted(tmp_path: Path) -> None:
    async with serving(tmp_path, [nodepool("p")]) as srv:
        api = FakeApi([nodepool("p")])
        srv.cache.reader, srv.cache.confirm_window = api.read, 0.5
        # Posted straight to the port: admitted and held, but the API server never stores it.
        assert (await post(srv, review(conflicting("forged", "9"))))[0] is True
        assert srv.cache.pending_count() == 1
        allowed, seconds = await post(srv, review(conflicting("real", "1")))
        assert allowed is True and seconds < 3, seconds
        assert (NO, "forged") in api.reads
        # The forged hold is gone; the real one is held instead.
        assert set(srv.cache.snapshot.pending) == {(NO, "real")}
        assert (srv.cache.dropped_holds, srv.cache.stale_objects) == (1, 0)


async def test_a_real_create_in_flight_still_wins_the_race(tmp_path: Path) -> None:
    async with serving(tmp_path, [nodepool("p")]) as srv:
        api = FakeApi([nodepool("p")])
        srv.cache.reader, srv.cache.confirm_window = api.read, 1.0
        first = conflicting("first", "9")
        assert (await post(srv, review(first)))[0] is True
        api.arrives({**first, "metadata": {"name": "first", "uid": "u1", "resourceVersion": "7"}}, 0.2)
        allowed, _ = await post(srv, review(conflicting("second", "1")))
        assert allowed is False
        assert (NO, "first") in srv.cache.snapshot.pending


async def test_a_cached_object_the_api_server_no_longer_has_does_not_deny(tmp_path: Path) -> None:
    deleted = conflicting("deleted", "9")
    async with serving(tmp_path, [nodepool("p"), deleted]) as srv:
        api = FakeApi([nodepool("p")])  # the watch has not delivered the DELETE yet
        srv.cache.reader = api.read
        allowed, seconds = await post(srv, review(conflicting("replacement", "1")))
        assert allowed is True and seconds < 2, seconds
        assert (srv.cache.dropped_holds, srv.cache.stale_objects) == (0, 1)
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

        async def after_the_watch_delivers(keys: list[Any], subject: Any) -> Any:
            srv.cache.apply_event(NO, {"type": "DELETED", "object": deleted, "raw_object": deleted})
            await srv.cache.rebuild()
            return await confirm(keys, subject)

        srv.cache._confirm = after_the_watch_delivers  # type: ignore[method-assign]
        allowed, _ = await post(srv, review(conflicting("replacement", "1")))
        assert allowed is True and api.reads == [(NO, "deleted")]


async def test_the_denial_stands_when_nothing_can_be_confirmed(tmp_path: Path) -> None:
    async with serving(tmp_path, [nodepool("p"), conflicting("stored", "9")]) as srv:
        api = FakeApi()
        api.broken = True
        srv.cache.reader = api.read
        assert (await post(srv, review(conflicting("new", "1"))))[0] is False
        assert api.reads == [(NO, "stored")]
    # --state: no reader, nothing to confirm against.
    async with serving(tmp_path / "offline", [nodepool("p"), conflicting("stored", "9")]) as srv:
        assert srv.cache.reader is None
        assert (await post(srv, review(conflicting("new", "1"))))[0] is False


async def test_a_watch_delete_clears_the_hold(tmp_path: Path) -> None:
    async with serving(tmp_path, [nodepool("p")]) as srv:
        gone = conflicting("gone", "9")
        assert (await post(srv, review(gone)))[0] is True
        srv.cache.apply_event(NO, {"type": "DELETED", "object": gone, "raw_object": gone})
        assert srv.cache.pending_count() == 0
        # No reader needed: the hold is gone.
        assert (await post(srv, review(conflicting("after", "1"))))[0] is True


async def test_every_hold_is_confirmed_at_once(tmp_path: Path) -> None:
    """More invented holds than the confirmation rounds would reach ten at a time, each on its own
    offering (so they do not conflict with each other) and all conflicting with one real write."""
    types = [f"m5.{size}" for size in ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge")]
    offerings = [(t, z, ct) for t in types for z in ("us-east-1a", "us-east-1b", "us-east-1c")
                 for ct in ("on-demand", "spot")][:35]
    async with serving(tmp_path, [nodepool("p")]) as srv:
        for i, (t, zone, ct) in enumerate(offerings):
            forged = overlay(f"forged-{i}", weight=50, family="m5", price="9", extra=[
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [t]},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [ct]}])
            assert (await post(srv, review(forged)))[0] is True, i
        assert srv.cache.pending_count() == len(offerings)
        api = FakeApi([nodepool("p")])
        srv.cache.reader, srv.cache.confirm_window = api.read, 0.5
        allowed, seconds = await post(srv, review(overlay("real", weight=50, family="m5", price="1")))
        assert allowed is True and seconds < 5, seconds
        assert set(srv.cache.snapshot.pending) == {(NO, "real")}


async def test_a_confirmation_does_not_hold_up_other_decisions(tmp_path: Path) -> None:
    async with serving(tmp_path, [nodepool("p")]) as srv:
        api = FakeApi([nodepool("p")])
        srv.cache.reader, srv.cache.confirm_window = api.read, 2.0
        assert (await post(srv, review(conflicting("forged", "9"))))[0] is True
        confirming = asyncio.create_task(post(srv, review(conflicting("real", "1"))))
        await asyncio.sleep(0.3)
        assert not confirming.done()
        allowed, seconds = await post(srv, review(overlay("unrelated", weight=7, family="c5", price="1")))
        assert allowed is True and seconds < 1.0, seconds
        assert not confirming.done()
        allowed, seconds = await confirming
        assert allowed is True and seconds >= 2.0
        assert set(srv.cache.snapshot.pending) == {(NO, "real"), (NO, "unrelated")}
