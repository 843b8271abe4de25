"""The NodeOverlay CRD the webhook judges by, followed in the cluster.

Karpenter's Helm release owns `nodeoverlays.karpenter.sh`, and the DRA-extended CRD replaces it on
opt-in: either changes the schema the API server applies. A webhook with failurePolicy Fail judging
by a stale schema would deny overlays the API server accepts, so without `--crd` (an explicit pin) a
webhook on a cluster lists and watches that one CRD by name. A changed schema is compiled in the
follower's thread, away from requests, and handed to the cache, which builds its next snapshot with
it: the snapshot's Prepared carries its CRD, so a request judges by exactly one of them.

Not installed (or deleted), unreadable at start (RBAC) or not compilable: Karpenter's own CRD (embedded),
with one warning per cause. Unreadable after it was read: the last one read stays (it is still the best
knowledge of what the API server applies), with one warning.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from simulation.validation import crds
from sources import context, files, kube
from webhook import informer, state

log = logging.getLogger("overlay-guard.crd")

WATCH_SECONDS = 240
# RBAC does not change by itself: a refused read is retried this rarely, quietly.
FORBIDDEN_RETRY = 300.0
REFUSED = (401, 403)


@dataclasses.dataclass(frozen=True)
class Version:
    """Where the CRD in use came from (cluster, file, dra, embedded) and, from a cluster, which version of it."""

    source: str
    resource_version: str = ""
    generation: int = 0


# Karpenter's own CRD, embedded: what the webhook judges by before and without the cluster's.
EMBEDDED = Version("embedded")


def pinned(value: str) -> Version:
    """The version of the CRD `--crd` pins: `dra` (the embedded DRA-extended one) or a file."""
    return Version("dra" if value == context.DRA else "file")


def version_of(raw: Mapping[str, Any]) -> Version:
    rv, generation = crds.dig(raw, "metadata", "resourceVersion"), crds.dig(raw, "metadata", "generation")
    return Version("cluster", rv if isinstance(rv, str) else "", generation if isinstance(generation, int) else 0)


def fingerprint(raw: Mapping[str, Any]) -> str:
    """What validation reads of the CRD: the checked version's schema, rules included. A status write (the
    Established condition) or a change to another version leaves it alone, and the compiled CRD is kept."""
    versions = crds.dig(raw, "spec", "versions")
    found = [v.get("schema") for v in versions if isinstance(v, dict) and v.get("name") == crds.VERSION] \
        if isinstance(versions, list) else []
    return json.dumps([crds.dig(raw, "spec", "group"), crds.dig(raw, "spec", "names", "kind"), found],
                      sort_keys=True, default=str)


class Follower:
    """What the API server says about the CRD, turned into compiled CRDs for `deliver` (called from the
    follower's thread with each CRD and its version; the CRD object is the same while its schema is)."""

    def __init__(self, deliver: Callable[[crds.Crd, Version], None]) -> None:
        self._deliver = deliver
        self._mark: str | None = None
        self._crd: crds.Crd | None = None
        self._warned: str | None = None

    def observe(self, raw: Mapping[str, Any] | None) -> None:
        """The CRD as listed or watched; None when the cluster does not have it."""
        if raw is None:
            self._fall_back("absent", "the cluster has no NodeOverlay CRD; judging by Karpenter's own, embedded, "
                                      "until it is installed", {})
            return
        version, mark = version_of(raw), fingerprint(raw)
        if mark != self._mark or self._crd is None:
            try:
                compiled = context.choose_crd(None, raw)
            except files.InputError as err:
                self._fall_back("unusable", "the cluster's NodeOverlay CRD cannot be compiled; judging by "
                                            "Karpenter's own, embedded", {"error": str(err)[:300]})
                return
            log.info("judging by the cluster's NodeOverlay CRD", extra={"fields": {
                "resourceVersion": version.resource_version, "generation": version.generation,
                "dynamicResources": compiled.defines(*crds.DRA_FIELD), "unchecked": compiled.unchecked()}})
            self._mark, self._crd, self._warned = mark, compiled, None
        self._deliver(self._crd, version)

    def refused(self, err: kube.KubeError) -> None:
        """RBAC refused the read: Karpenter's own CRD (embedded), unless one was read before."""
        fields = {"status": err.status, "error": kube.one_line(err), "needs": f"get, list, watch on "
                  f"customresourcedefinitions, resourceNames [{crds.NAME}]"}
        if self._crd is not None:
            self._warn("refused", "cannot read the NodeOverlay CRD any more; judging by the last one read", fields)
            return
        self._fall_back("refused", "cannot read the NodeOverlay CRD; judging by Karpenter's own, embedded", fields)

    def _fall_back(self, cause: str, message: str, fields: dict[str, Any]) -> None:
        self._warn(cause, message, fields)
        self._mark, self._crd = None, None
        self._deliver(crds.karpenter(), EMBEDDED)

    def _warn(self, cause: str, message: str, fields: dict[str, Any]) -> None:
        if self._warned != cause:
            log.warning(message, extra={"fields": {"crd": crds.NAME, **fields}})
        self._warned = cause


class Api(Protocol):
    def list_named(self, resource: kube.Resource, name: str) -> kube.Listing: ...

    def watch_named(self, resource: kube.Resource, name: str, resource_version: str | None,
                    seconds: int) -> Iterator[Mapping[str, Any]]: ...


def run(api: Api, follower: Follower, stop: threading.Event, backoff: informer.Backoff | None = None,
        sleep: Callable[[float], bool] | None = None) -> None:
    """List the CRD, then watch it from the list's resource version until told to stop; 410 Gone lists
    again at once, other failures after a backoff (a refusal: after FORBIDDEN_RETRY)."""
    backoff = backoff or informer.Backoff()
    wait = sleep or stop.wait
    rv: str | None = None
    while not stop.is_set():
        try:
            if rv is None:
                listing = api.list_named(kube.CRDS, crds.NAME)
                follower.observe(listing.items[0] if listing.items else None)
                rv = listing.resource_version or ""
            rv = _watch(api, follower, stop, rv)
            backoff.reset()
        except Exception as exc:
            rv = None
            if stop.is_set() or wait(_delay(kube.error(exc, f"follow the CRD {crds.NAME}"), follower, backoff)):
                return


def _delay(err: kube.KubeError, follower: Follower, backoff: informer.Backoff) -> float:
    if isinstance(err, kube.Gone):
        return 0.0
    if err.status in REFUSED:
        follower.refused(err)
        return FORBIDDEN_RETRY
    delay = backoff.next()
    log.warning("list/watch of the NodeOverlay CRD failed; retrying", extra={"fields": {
        "error": kube.one_line(err), "retryIn": round(delay, 2)}})
    return delay


def _watch(api: Api, follower: Follower, stop: threading.Event, rv: str) -> str:
    """Delivers the CRD's changes until the watch ends; the last resource version seen."""
    for event in api.watch_named(kube.CRDS, crds.NAME, rv or None, WATCH_SECONDS):
        if stop.is_set():
            break
        kind, obj = event.get("type"), event.get("raw_object", event.get("object"))
        if not isinstance(obj, Mapping):
            continue
        if kind == "ERROR":
            code = obj.get("code")
            raise (kube.Gone if code == 410 else kube.KubeError)(
                f"watch of the CRD: {code} {obj.get('message', '')}", code if isinstance(code, int) else None)
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            follower.observe(None if kind == "DELETED" else obj)
        found = crds.dig(obj, "metadata", "resourceVersion")
        rv = found if isinstance(found, str) and found else rv
    return rv


class InUse(Collector):
    """Hands followed CRDs to the cache on the event loop, and tells /metrics which CRD the current
    snapshot judges by (read at scrape time)."""

    def __init__(self, cache: state.Cache) -> None:
        self._cache = cache
        self._versions: weakref.WeakKeyDictionary[crds.Crd, Version] = weakref.WeakKeyDictionary()
        self._last: crds.Crd | None = None

    def record(self, crd: crds.Crd, version: Version) -> None:
        """On the loop: `crd` is what the cluster says now."""
        self.pin(crd, version)
        if crd is not self._last:
            self._last = crd
            self._cache.set_crd(crd)

    def pin(self, crd: crds.Crd, version: Version) -> None:
        """Name a CRD the cache was given otherwise (`--crd`)."""
        self._versions[crd] = version

    def follow(self, source: Any, loop: asyncio.AbstractEventLoop) -> None:
        """Follow the CRD through `source` (informer.KubeSource) in one more thread; readiness waits for
        the first answer (the CRD, its absence or a refusal)."""
        self._cache.expect([state.CRD])

        def deliver(crd: crds.Crd, version: Version) -> None:
            loop.call_soon_threadsafe(self.record, crd, version)

        follower = Follower(deliver)
        source.spawn("crd-follower", lambda stop: run(source.client, follower, stop))

    def collect(self) -> Iterator[Metric]:
        prepared = self._cache.snapshot.prepared
        crd = prepared.crd if prepared is not None else None
        version = self._versions.get(crd, EMBEDDED) if crd is not None else EMBEDDED
        gauge = GaugeMetricFamily(
            "overlay_guard_crd_generation",
            "metadata.generation of the NodeOverlay CRD the current snapshot judges by, with its resourceVersion "
            "and source (cluster: followed; file: --crd FILE; dra: --crd dra; embedded: Karpenter's own; 0 for the "
            "last three).",
            labels=["source", "resource_version"])
        gauge.add_metric([version.source, version.resource_version], version.generation)
        yield gauge

