"""List+watch of NodeOverlays and NodePools with the `kubernetes` client.

The client is blocking, so each kind runs in its own daemon thread and hands results to the
event loop with call_soon_threadsafe; the cache itself is only ever touched on the loop. The
loop body (`run_informer`) takes the list and watch calls as arguments, so relist-on-410 and
backoff are tested with fakes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

from simulation.semantics import model
from webhook import store

log = logging.getLogger("overlay-guard.informer")

# kind -> (group, version, plural)
RESOURCES: Mapping[str, tuple[str, str, str]] = {
    model.NODEOVERLAY: ("karpenter.sh", "v1alpha1", "nodeoverlays"),
    model.NODEPOOL: ("karpenter.sh", "v1", "nodepools"),
}
WATCH_SECONDS = 240
GONE = 410
NOT_FOUND = 404
# A confirming read happens while an admission waits (the API server gives up after 5 s).
READ_TIMEOUT = 2.0


class Sink(Protocol):
    """Where an informer delivers; implementations must be safe to call from its thread."""

    def replace(self, kind: str, items: list[Mapping[str, Any]]) -> None: ...

    def event(self, kind: str, event: Mapping[str, Any]) -> store.Outcome | None: ...

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


def status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status", None)
    return status if isinstance(status, int) else None


def run_informer(kind: str, lister: Lister, watcher: Watcher, sink: Sink, stop: threading.Event,
                 backoff: Backoff | None = None, sleep: Callable[[float], bool] | None = None) -> None:
    """List, then watch from the list's resource version until told to stop.

    A watch that ends normally (server-side timeout) resumes from the last resource version;
    410 Gone relists at once; any other failure marks the kind unsynced (so /readyz fails
    while the cache may be stale) and relists after a backoff."""
    backoff = backoff or Backoff()
    wait = sleep or stop.wait
    rv: str | None = None
    need_list = True
    while not stop.is_set():
        try:
            if need_list:
                items, rv = lister(kind)
                sink.replace(kind, items)
                need_list = False
                backoff.reset()
                log.info("listed", extra={"fields": {"kind": kind, "objects": len(items),
                                                     "resourceVersion": rv}})
            for event in watcher(kind, rv):
                if stop.is_set():
                    return
                outcome = sink.event(kind, event)
                if outcome is None:
                    continue
                if outcome.relist:
                    raise GoneError(outcome.error or "watch expired")
                if outcome.resource_version:
                    rv = outcome.resource_version
            backoff.reset()
        except Exception as exc:
            if stop.is_set():
                return
            need_list = True
            sink.lost(kind)
            if isinstance(exc, GoneError) or status_of(exc) == GONE:
                log.info("watch expired; relisting", extra={"fields": {"kind": kind}})
                continue
            delay = backoff.next()
            log.warning("list/watch failed; retrying", extra={"fields": {
                "kind": kind, "error": f"{type(exc).__name__}: {exc}"[:500], "retryIn": round(delay, 2)}})
            if wait(delay):
                return


class GoneError(Exception):
    """The watch reported 410 Gone as an event instead of an HTTP status."""


class LoopSink:
    """Forwards informer callbacks to the cache on the event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, target: Any) -> None:
        self._loop = loop
        self._target = target

    def replace(self, kind: str, items: list[Mapping[str, Any]]) -> None:
        self._loop.call_soon_threadsafe(self._target.replace_kind, kind, items)

    def event(self, kind: str, event: Mapping[str, Any]) -> store.Outcome | None:
        # The pure handler runs here too (cheap) to learn the resource version and 410s
        # without a round trip through the loop; the loop applies it to the real store.
        self._loop.call_soon_threadsafe(self._target.apply_event, kind, event)
        return store.handle({}, kind, event)

    def lost(self, kind: str) -> None:
        self._loop.call_soon_threadsafe(self._target.mark_unsynced, kind)


class KubeSource:
    """Both informers against a real API server (in-cluster or a kubeconfig)."""

    def __init__(self, kubeconfig: Path | None) -> None:
        # Imported here: the client is slow to import and `--state` never needs it.
        import kubernetes

        # The client's annotations are partial; treat it as untyped at this one boundary.
        k8s: Any = kubernetes
        config, client, watch = k8s.config, k8s.client, k8s.watch
        if kubeconfig is not None:
            config.load_kube_config(config_file=str(kubeconfig))
        else:
            try:
                config.load_incluster_config()
            except config.ConfigException:
                config.load_kube_config()
        self._api: Any = client.CustomObjectsApi()
        self._watch_cls: Any = watch.Watch
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def _list(self, kind: str) -> tuple[list[Mapping[str, Any]], str | None]:
        group, version, plural = RESOURCES[kind]
        body: Any = self._api.list_cluster_custom_object(group, version, plural, _request_timeout=30)
        meta = body.get("metadata") or {}
        return list(body.get("items") or []), meta.get("resourceVersion")

    def read(self, kind: str, name: str) -> Mapping[str, Any] | None:
        """One object by name, None when the API server does not have it (confirming a denial)."""
        group, version, plural = RESOURCES[kind]
        try:
            obj: Any = self._api.get_cluster_custom_object(group, version, plural, name,
                                                           _request_timeout=READ_TIMEOUT)
        except Exception as exc:
            if status_of(exc) == NOT_FOUND:
                return None
            raise
        return store.with_kind(obj, kind) if isinstance(obj, Mapping) else None

    def _watch(self, kind: str, rv: str | None) -> Iterator[Mapping[str, Any]]:
        group, version, plural = RESOURCES[kind]
        w = self._watch_cls()
        kwargs: dict[str, Any] = {"timeout_seconds": WATCH_SECONDS, "allow_watch_bookmarks": True,
                                  "_request_timeout": WATCH_SECONDS + 30}
        if rv:
            kwargs["resource_version"] = rv
        try:
            yield from w.stream(self._api.list_cluster_custom_object, group, version, plural, **kwargs)
        finally:
            w.stop()

    def start(self, loop: asyncio.AbstractEventLoop, cache: Any) -> None:
        cache.expect(RESOURCES)
        sink = LoopSink(loop, cache)
        for kind in RESOURCES:
            t = threading.Thread(target=run_informer, args=(kind, self._list, self._watch, sink, self._stop),
                                 name=f"informer-{kind}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        # The threads may sit in a blocking read for up to WATCH_SECONDS; they are daemons,
        # so the process exits without joining them.
        self._stop.set()
