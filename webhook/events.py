"""What the audit tells the cluster: Kubernetes Events (`events.k8s.io/v1`) on NodeOverlays and
the NodePools their problems touch, deduplicated and bounded.

Planning is pure (`Ledger.plan`): an audit's findings become notes keyed by (object, reason,
finding identity); a key already announced is not announced again, a key that disappears
ends in one resolving `OverlayApplied` event on its overlay, and at most `limit` events are
written per audit (the rest wait for the next one). The event's name is a hash of its key, so
a second leader (after a handover or a restart) that plans the same note gets 409 from the API
server instead of a duplicate; a problem that comes back after it was fixed patches its event's
series instead.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from simulation import findings
from simulation.semantics import model

log = logging.getLogger("overlay-guard.events")

CONFLICT, NO_MATCH, SHADOWED, INVALID, APPLIED = (
    "OverlayConflict", "OverlayNoMatch", "OverlayShadowed", "OverlayInvalid", "OverlayApplied")
# The guard's prediction and Karpenter disagree (webhook/prediction.py).
MISMATCH = "OverlayPredictionMismatch"
# A NodePool-scoped price overlay: Karpenter's offering price metric swings between NodePools (a Normal event).
PRICE_METRIC = "OverlayPriceMetricSwings"
REASONS = {"same-weight-conflict": CONFLICT, "no-match": NO_MATCH, "shadowed": SHADOWED,
           "price-metric-flips": PRICE_METRIC}
CONTROLLER = "overlay-guard.io/audit"
# Cluster-scoped objects' events live here (where kubectl looks for them).
NAMESPACE = "default"
NOTE_LIMIT = 1024  # the API server's limit on an event's note
DEFAULT_LIMIT = 100
# Announcement counts kept for problems no longer present (beyond it, the oldest are forgotten and
# such a problem coming back is not counted in its event's series).
MEMORY = 10_000
API_VERSIONS = {model.NODEOVERLAY: model.OVERLAY_API, model.NODEPOOL: model.NODEPOOL_API}

Key = tuple[findings.ObjectRef, str, str]  # (regarding object, reason, finding identity)


@dataclasses.dataclass(frozen=True)
class Note:
    regarding: findings.ObjectRef
    reason: str
    identity: str
    message: str
    warning: bool = True
    related: findings.ObjectRef | None = None

    @property
    def key(self) -> Key:
        return (self.regarding, self.reason, self.identity)

    @property
    def name(self) -> str:
        digest = hashlib.sha256("\x00".join(map(str, self.key)).encode()).hexdigest()[:20]
        return f"overlay-guard.{digest}"


def reason_of(f: findings.Finding) -> str | None:
    if f.code in REASONS:
        return REASONS[f.code]
    # A label the catalog lacks that the overlay needs: it matches nothing here (one finding says both).
    if f.code == "unknown-label" and dict(f.detail).get("unmatched") == "true":
        return NO_MATCH
    if f.severity == findings.Severity.ERROR and f.obj.kind == model.NODEOVERLAY:
        return INVALID
    return None


def identity_of(f: findings.Finding) -> str:
    """What makes two findings the same problem across audits, whatever their wording or witness."""
    return "|".join([f.code, f.field, *map(str, f.related)])


def one_line(f: findings.Finding) -> str:
    text = f.message if f.witness is None or f.witness.describe() in f.message else \
        f"{f.message} (witness: {f.witness.describe()})"
    return " ".join(text.split())[:NOTE_LIMIT]


def notes(found: Iterable[findings.Finding]) -> list[Note]:
    """Each event-worthy finding on its overlay, and on the NodePool of its witness."""
    out: dict[Key, Note] = {}
    for f in found:
        reason = reason_of(f)
        if reason is None or f.obj.kind != model.NODEOVERLAY:
            continue
        ident, line = identity_of(f), one_line(f)
        warning = f.severity >= findings.Severity.WARNING
        for note in (Note(f.obj, reason, ident, line, warning),
                     *((Note(findings.ObjectRef(model.NODEPOOL, f.witness.nodepool), reason,
                                  f"{f.obj}|{ident}", f"{f.obj}: {line}"[:NOTE_LIMIT], warning, related=f.obj),)
                       if f.witness is not None and f.witness.nodepool else ())):
            out.setdefault(note.key, note)
    return list(out.values())


def resolving(overlay: findings.ObjectRef, fixed: Sequence[Key]) -> Note:
    reasons = sorted({k[1] for k in fixed})
    return Note(overlay, APPLIED, "resolved:" + ",".join(sorted(k[2] for k in fixed)),
                f"no longer reported: {', '.join(reasons)}", warning=False)


@dataclasses.dataclass(frozen=True)
class Plan:
    emit: tuple[Note, ...]
    # Notes whose problem came back after it was fixed: their existing event's series count.
    recurring: Mapping[Key, int]
    deferred: int


class Ledger:
    """What this process has announced. Survives audits, not restarts (event names cover those)."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self.active: dict[Key, Note] = {}
        # Overlay -> problem keys announced on it, for one resolving event when all are gone.
        self._open: dict[findings.ObjectRef, set[Key]] = {}
        # How often each note has been announced: an event that exists already gets a series.
        self._counts: dict[Key, int] = {}

    def plan(self, current: Sequence[Note], exists: Iterable[findings.ObjectRef]) -> Plan:
        """Events to write for this audit's notes; `exists`: objects still in the cluster (a
        deleted overlay gets no resolving event)."""
        present = {n.key: n for n in current}
        alive = set(exists)
        fresh = [n for k, n in present.items() if k not in self.active]
        resolutions: list[Note] = []
        for overlay, keys in sorted(self._open.items()):
            if overlay in alive and keys and not any(k in present for k in keys):
                resolutions.append(resolving(overlay, sorted(keys)))
        ordered = sorted(resolutions + fresh, key=lambda n: (n.reason == APPLIED, n.regarding, n.reason, n.identity))
        emit = tuple(ordered[:self.limit])
        return Plan(emit, {n.key: self._counts[n.key] + 1 for n in emit if n.key in self._counts},
                    len(ordered) - len(emit))

    def commit(self, current: Sequence[Note], written: Iterable[Note], exists: Iterable[findings.ObjectRef]) -> None:
        """Record what was written: notes not written stay unannounced for the next audit."""
        present = {n.key for n in current}
        alive = set(exists)
        for note in written:
            self._counts[note.key] = self._counts.get(note.key, 0) + 1
            if note.reason == APPLIED:
                for k in self._open.pop(note.regarding, set()):
                    self.active.pop(k, None)
            else:
                self.active[note.key] = note
                if note.regarding.kind == model.NODEOVERLAY:
                    self._open.setdefault(note.regarding, set()).add(note.key)
        # NodePool notes and deleted overlays' notes end quietly: the overlay's resolving event
        # covers the first, nobody reads events about an object that is gone.
        for key in [k for k in self.active if k not in present and
                    (k[0].kind != model.NODEOVERLAY or k[0] not in alive)]:
            self.active.pop(key)
        for overlay in [o for o in self._open if o not in alive]:
            self._open.pop(overlay)
        excess = len(self._counts) - MEMORY - len(self.active)
        if excess > 0:
            for key in [k for k in self._counts if k not in self.active][:excess]:
                del self._counts[key]


class EventApi(Protocol):
    async def create(self, body: Mapping[str, Any]) -> bool:
        """False when an event of that name already exists."""
        ...

    async def patch(self, name: str, body: Mapping[str, Any]) -> None: ...


def body(note: Note, instance: str, uids: Mapping[findings.ObjectRef, str], stamp: str) -> dict[str, Any]:
    def ref(obj: findings.ObjectRef) -> dict[str, Any]:
        out = {"apiVersion": API_VERSIONS.get(obj.kind, ""), "kind": obj.kind, "name": obj.name}
        if obj in uids:
            out["uid"] = uids[obj]
        return out

    out: dict[str, Any] = {
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": note.name, "namespace": NAMESPACE,
                     "labels": {"app.kubernetes.io/managed-by": "overlay-guard"}},
        "eventTime": stamp, "reportingController": CONTROLLER, "reportingInstance": instance[:128],
        "action": "Audit", "reason": note.reason, "type": "Warning" if note.warning else "Normal",
        "note": note.message[:NOTE_LIMIT], "regarding": ref(note.regarding)}
    if note.related is not None:
        out["related"] = ref(note.related)
    return out


async def publish(api: EventApi, plan: Plan, instance: str, uids: Mapping[findings.ObjectRef, str],
                  stamp: str) -> list[Note]:
    """Write the plan; returns the notes that are now announced (an existing event counts)."""
    done: list[Note] = []
    for note in plan.emit:
        try:
            created = await api.create(body(note, instance, uids, stamp))
            if not created and note.key in plan.recurring:
                await api.patch(note.name, {"series": {"count": plan.recurring[note.key], "lastObservedTime": stamp},
                                            "note": note.message[:NOTE_LIMIT]})
        except Exception as exc:
            log.warning("cannot write an event; retrying at the next audit", extra={"fields": {
                "object": str(note.regarding), "reason": note.reason,
                "error": f"{type(exc).__name__}: {exc}"[:300]}})
            continue
        done.append(note)
    return done


class KubeEvents:
    """EventApi over the `kubernetes` client's EventsV1Api (blocking calls in threads)."""

    def __init__(self, api_client: Any, timeout: float = 5.0) -> None:
        import kubernetes

        k8s: Any = kubernetes
        self._api: Any = k8s.client.EventsV1Api(api_client)
        self._timeout = timeout

    async def create(self, body: Mapping[str, Any]) -> bool:
        def call() -> bool:
            try:
                self._api.create_namespaced_event(NAMESPACE, body, _request_timeout=self._timeout,
                                                  _preload_content=False)
            except Exception as exc:
                if getattr(exc, "status", None) == 409:
                    return False
                raise
            return True

        return await asyncio.to_thread(call)

    async def patch(self, name: str, body: Mapping[str, Any]) -> None:
        await asyncio.to_thread(lambda: self._api.patch_namespaced_event(
            name, NAMESPACE, body, _request_timeout=self._timeout, _preload_content=False))
