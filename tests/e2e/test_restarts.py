"""Issue 4, scenario 9: the API server goes away under a running webhook, and a watch ends in 410 Gone."""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ._cluster import ControlPlane
from ._guard import Guard, Webhook, apply, overlay, unique

pytestmark = pytest.mark.e2e

VALIDATOR = 'admission webhook "nodeoverlays.validate.overlay-guard.io" denied the request'
KINDS = {"NodeOverlay", "NodePool"}
RECOVERY_TIMEOUT = 90.0
SHORT_WATCH = Path(__file__).resolve().parent / "_short_watch.py"
WATCH_SECONDS = 2


class ReadyzRecorder:
    """Polls /readyz in the background and keeps every distinct state in order."""

    def __init__(self, hook: Webhook, interval: float = 0.05) -> None:
        self.hook = hook
        self.interval = interval
        self.states: list[bool] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            state = self.hook.readyz()
            if not self.states or self.states[-1] != state:
                self.states.append(state)
            self._stop.wait(self.interval)

    def __enter__(self) -> ReadyzRecorder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def _wait(predicate: Callable[[], bool], what: str, timeout: float = RECOVERY_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def _listed_kinds(hook: Webhook, since: int) -> set[str]:
    return {str(e.get("kind")) for e in hook.events("listed")[since:]}


def _verdicts_are_right(guard: Guard, label: str) -> None:
    """A fresh pair of same-weight overlays: the first admitted, the second refused naming it."""
    pool = guard.new_pool(label)
    first, second = unique("e2e-after-first"), unique("e2e-after-second")
    done = apply(guard.plane, overlay(first, pool, test=label, price="0.5"))
    assert done.returncode == 0, done.stderr
    refused = apply(guard.plane, overlay(second, pool, test=label, priceAdjustment="+3%"))
    assert refused.returncode == 1, refused.stdout
    assert VALIDATOR in refused.stderr and first in refused.stderr


def test_9_apiserver_restart_makes_the_webhook_relist(guard: Guard, label: str) -> None:
    hook = guard.webhook
    listed_before = len(hook.events("listed"))

    with ReadyzRecorder(hook) as readyz:
        guard.plane.restart_apiserver()
        _wait(lambda: bool(readyz.states) and readyz.states[-1] and False in readyz.states,
              "/readyz to go false and back to true")

    assert readyz.states[0] is True and False in readyz.states and readyz.states[-1] is True, readyz.states
    assert _listed_kinds(hook, listed_before) == KINDS
    _verdicts_are_right(guard, label)


def _etcd(plane_url: str, method: str, body: dict[str, object]) -> dict[str, object]:
    # etcd's gRPC gateway: JSON over plain HTTP on the client URL, so no etcdctl is needed.
    request = urllib.request.Request(f"{plane_url}/v3/{method}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as resp:
        result: dict[str, object] = json.load(resp)
    return result


def _compact_etcd(plane: ControlPlane) -> int:
    """Advance etcd's revision past everything the webhook has seen, then compact it away."""
    names = [unique("e2e-tick") for _ in range(3)]
    maps = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n, "namespace": "default"}}
            for n in names]
    plane.kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": maps}))
    header = _etcd(plane.etcd_url, "kv/range", {"key": base64.b64encode(b"/").decode()})["header"]
    assert isinstance(header, dict)
    revision = int(header["revision"])
    _etcd(plane.etcd_url, "kv/compaction", {"revision": str(revision), "physical": True})
    plane.kubectl("delete", "configmap", "-n", "default", *names)
    return revision


@pytest.fixture
def without_watch_cache(guard: Guard) -> Iterator[None]:
    # With the watch cache, bookmarks keep every watcher's resource version fresh and a resume is
    # served from the cache; without it, a resume from a compacted revision reaches etcd and ends
    # in 410 Gone, which is the case to prove.
    guard.plane.restart_apiserver(["--watch-cache=false"])
    guard.webhook.wait_ready(RECOVERY_TIMEOUT)
    try:
        yield
    finally:
        guard.plane.restart_apiserver()
        guard.webhook.wait_ready(RECOVERY_TIMEOUT)


def test_9_watch_ending_in_410_gone_makes_the_webhook_relist(
        guard: Guard, label: str, without_watch_cache: None) -> None:
    hook = guard.spawn("short-watch", launcher=(str(SHORT_WATCH), "--watch-seconds", str(WATCH_SECONDS)))
    try:
        listed_before = len(hook.events("listed"))
        gone_before = len(hook.events("watch expired; relisting"))

        with ReadyzRecorder(hook, interval=0.01) as readyz:
            _compact_etcd(guard.plane)
            _wait(lambda: {str(e.get("kind")) for e in hook.events("watch expired; relisting")[gone_before:]}
                  == KINDS, "410 Gone on both watches", timeout=10 * WATCH_SECONDS + 10)
            _wait(lambda: _listed_kinds(hook, listed_before) == KINDS and hook.readyz(), "the relists")

        # The unready window of a 410 relist lasts one list call, often shorter than the poll.
        print(f"/readyz states during the 410 relist: {readyz.states}")
        assert readyz.states[-1] is True
        failures = [e for e in hook.events() if e.get("msg") == "list/watch failed; retrying"]
        assert not failures, failures
        with guard.routed_to(hook):
            _verdicts_are_right(guard, label)
    finally:
        hook.stop()
