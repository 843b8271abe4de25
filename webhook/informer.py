"""List+watch of NodeOverlays and NodePools with the `kubernetes` client.

The client is blocking, so each kind runs in its own daemon thread and hands results to the
event loop with call_soon_threadsafe; the cache itself is only ever touched on the loop. The
loop body (`run_informer`) takes the list and watch calls as arguments, so relist-on-410 and
backoff are tested with fakes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import random
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

from sources import kube
from webhook import store

log = logging.getLogger("overlay-guard.informer")

WATCH_SECONDS = 240
# A confirming read happens while an admission waits (the API server gives up after 5 s).
READ_TIMEOUT = 2.0


class Sink(Protocol):
    """Where an informer delivers; implementations must be safe to call from its thread."""

    def replace(self, kind: str, items: list[Mapping[str, Any]], version: str | None) -> None: ...

    def event(self, kind: str, event: Mapping[str, Any]) -> store.Transition | None: ...

    def lost(self, kind: str) -> None: ...


Lister = Callable[[str], tuple[list[Mapping[str, Any]], str | None]]
Watcher = Callable[[str, str | None], Iterator[Mapping[str, Any]]]


@dataclasses.dataclass
class Backoff:
    """Exponential backoff with full jitter, so replicas do not relist in lockstep."""

    base: float = 0.5
    cap: float = 30.0
    attempt: int = 0
    rng: random.Random = dataclasses.field(default_factory=random.Random)

    def next(self) -> float:
        ceiling = min(self.cap, self.base * 2 ** self.attempt)
        self.attempt += 1
        return self.rng.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        self.attempt = 0


def run_informer(kind: str, lister: Lister, watcher: Watcher, sink: Sink, stop: threading.Event,
                 backoff: Backoff | None = None, sleep: Callable[[float], bool] | None = None) -> None:
    """List, then watch from the list's resource version until told to stop.

    A watch that ends normally (server-side timeout) resumes from the last resource version;
    410 Gone relists at once; any other failure marks the kind unsynced (so /readyz fails
    while the cache may be stale) and relists after a backoff."""
    backoff = backoff or Backoff()
    wait = sleep or stop.wait
    rv: str | None = None
    while not stop.is_set():
        try:
            if rv is None:
                rv = _list(kind, lister, sink)
                backoff.reset()
            rv = _watch(kind, watcher, sink, stop, rv)
            backoff.reset()
        except Exception as exc:
            if stop.is_set():
                return
            rv = None
            sink.lost(kind)
            if isinstance(exc, kube.Gone):
                log.info("watch expired; relisting", extra={"fields": {"kind": kind}})
                continue
            delay = backoff.next()
            log.warning("list/watch failed; retrying", extra={"fields": {
                "kind": kind, "error": f"{type(exc).__name__}: {exc}"[:500], "retryIn": round(delay, 2)}})
            if wait(delay):
                return


def _list(kind: str, lister: Lister, sink: Sink) -> str:
    """Replaces the kind's objects; the resource version to watch from ("" when the list had none)."""
    items, rv = lister(kind)
    sink.replace(kind, items, rv)
    log.info("listed", extra={"fields": {"kind": kind, "objects": len(items), "resourceVersion": rv}})
    return rv or ""


def _watch(kind: str, watcher: Watcher, sink: Sink, stop: threading.Event, rv: str) -> str:
    """Delivers events until the watch ends; the last resource version seen."""
    for event in watcher(kind, rv or None):
        if stop.is_set():
            break
        outcome = sink.event(kind, event)
        if outcome is None:
            continue
        if outcome.relist:
            raise kube.Gone(outcome.error or "watch expired", 410)
        if outcome.resource_version:
            rv = outcome.resource_version
    return rv


class LoopSink:
    """Forwards informer callbacks to the cache on the event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, target: Any) -> None:
        self._loop = loop
        self._target = target

    def replace(self, kind: str, items: list[Mapping[str, Any]], version: str | None) -> None:
        self._loop.call_soon_threadsafe(self._target.replace_kind, kind, items, version)

    def event(self, kind: str, event: Mapping[str, Any]) -> store.Transition | None:
        # The pure handler runs here too (cheap) to learn the resource version and 410s
        # without a round trip through the loop; the loop applies it to the real store.
        self._loop.call_soon_threadsafe(self._target.apply_event, kind, event)
        return store.handle({}, kind, event)

    def lost(self, kind: str) -> None:
        self._loop.call_soon_threadsafe(self._target.mark_unsynced, kind)


class KubeSource:
    """Both informers against a real API server (a kubeconfig, or in-cluster)."""

    def __init__(self, kubeconfig: Path | None) -> None:
        self._client = kube.Client.connect(None if kubeconfig is None else str(kubeconfig))
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def list(self, kind: str) -> tuple[list[Mapping[str, Any]], str | None]:
        """Every object of a kind and the list's resourceVersion (blocking)."""
        listing = self._client.list(kind)
        return list(listing.items), listing.resource_version

    def read(self, kind: str, name: str) -> Mapping[str, Any] | None:
        """One object by name, None when the API server does not have it (confirming a denial)."""
        return self._client.get(kind, name, timeout=READ_TIMEOUT)

    def _watch(self, kind: str, rv: str | None) -> Iterator[Mapping[str, Any]]:
        return self._client.watch(kind, rv, WATCH_SECONDS)

    @property
    def client(self) -> kube.Client:
        return self._client

    def spawn(self, name: str, target: Callable[[threading.Event], None]) -> None:
        """Run `target(stop)` in a daemon thread that is told to stop with the informers."""
        t = threading.Thread(target=target, args=(self._stop,), name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def start(self, loop: asyncio.AbstractEventLoop, cache: Any) -> None:
        cache.expect(kube.RESOURCES)
        sink = LoopSink(loop, cache)
        for kind in kube.RESOURCES:
            self.spawn(f"informer-{kind}", functools.partial(run_informer, kind, self.list, self._watch, sink))

    def stop(self) -> None:
        # The threads may sit in a blocking read for up to WATCH_SECONDS; they are daemons,
        # so the process exits without joining them.
        self._stop.set()
