"""The cluster-state cache: an immutable snapshot (objects + Prepared) swapped whole.

Sources (the list+watch informers or `--state` files) feed `replace_kind`/`apply_event` on
the event loop; a debounced background task rebuilds the Prepared off the loop, so requests
always evaluate against the latest complete snapshot and a burst of watch events costs one
rebuild. Admission decisions are serialised by one lock around evaluate+hold: an admitted
candidate is held as pending until a rebuilt snapshot contains it (the watch confirmed it), a
watch DELETE ends it, or its TTL passes, so two conflicting creates racing on this replica
cannot both pass.

Anyone who can reach the port can send a review, and the watch lags the API server, so a
denial is confirmed before it is given (`decide`): each object it rests on is read from the API
server, outside the lock. A held object the API server does not have (in the held version) after a short
window is dropped; a cached object the API server no longer has is left out; the candidate is
judged again without them. With `--state` there is no API server: denials stand as computed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from simulation import evaluate as ev
from simulation import findings
from simulation.semantics import catalog as cat
from simulation.semantics import model
from simulation.validation import crds
from webhook import admission, judging, store
from webhook.store import Key, Store

log = logging.getLogger("overlay-guard.state")
# How long an UPDATE of a still-pending object waits for a Prepared holding that version.
REBASE_WAIT = 2.0
# Rounds of judging again without the objects a denial rested on that are missing (each round
# reads at most admission.MAX_CONFIRM cached objects): bounds the reads one request causes.
CONFIRM_ROUNDS = 3
# When, as fractions of the confirmation window, a held object is read again while absent: a
# CREATE the guard admitted is persisted within milliseconds, a forged one never.
RECHECKS = (0.0, 0.1, 0.3, 0.6, 1.0)
# The readiness key of a followed CRD (set_crd).
CRD = "CustomResourceDefinition"

# Reads one object from the API server: the object, None when it does not exist; raises when
# that cannot be told (the denial then stands).
Reader = Callable[[str, str], Awaitable[Mapping[str, Any] | None]]


@dataclasses.dataclass(frozen=True)
class Snapshot:
    generation: int
    basis: Store
    prepared: ev.Prepared | None
    pending: store.Holds
    built_at: float


@dataclasses.dataclass(frozen=True)
class Decision:
    report: ev.Report
    allowed: bool
    held: bool


class NotReady(Exception):
    """The first list has not synced (or the catalog is still loading)."""


class Cache:
    def __init__(self, *, ttl: float = 30.0, debounce: float = 0.1, max_pending: int = store.MAX_PENDING,
                 confirm_window: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.debounce = debounce
        self.max_pending = max_pending
        self.confirm_window = confirm_window
        # Set by a live source; None (`--state`) leaves nothing to confirm against.
        self.reader: Reader | None = None
        self.confirmations = 0
        self.dropped_holds = 0
        self.stale_objects = 0
        self._clock = clock
        self._catalog: cat.Catalog | None = None
        self._crd: crds.Crd | None = None
        self._live: Store = {}
        self._synced: dict[str, bool] = {}
        self._snapshot = Snapshot(0, {}, None, {}, 0.0)
        self._dirty = asyncio.Event()
        self._built = asyncio.Event()
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        # Prepared snapshots for stale-cache UPDATEs and re-CREATEs: rare, and each is the size
        # of the whole snapshot, so only the latest is kept.
        self._derived: dict[tuple[int, Key, str | None], ev.Prepared] = {}
        self._checked: dict[str, ev.Checked] = {}
        self._rebasing: dict[tuple[int, Key, str | None], asyncio.Future[ev.Prepared]] = {}
        self._closing = False
        self._judge = judging.Judge()
        self.last_sync: float | None = None
        self.rebuild_seconds: list[float] = []
        self.on_rebuild: Callable[[float], None] | None = None

    # -- sources --------------------------------------------------------------------------
    def expect(self, kinds: Iterable[str]) -> None:
        """Declare the kinds a source will list; readiness waits for all of them."""
        for kind in kinds:
            self._synced.setdefault(kind, False)

    def set_catalog(self, catalog: cat.Catalog, crd: crds.Crd | None = None) -> None:
        self._catalog = catalog
        self._crd = crd
        self._mark_dirty()

    def set_crd(self, crd: crds.Crd) -> None:
        """The NodeOverlay CRD followed in the cluster (webhook/crdwatch.py; readiness waits for the first
        when `expect`ed as CRD): the next snapshot is built with it, its checks all anew."""
        self._crd = crd
        self._checked = {}
        self._synced[CRD] = True
        self._mark_dirty()

    def replace_kind(self, kind: str, items: Iterable[Mapping[str, Any]]) -> None:
        self._live, changed = store.replace_kind(self._live, kind, items)
        first = not self._synced.get(kind, False)
        self._synced[kind] = True
        self.last_sync = self._clock()
        if changed or first:
            self._mark_dirty()

    def load(self, objects: Iterable[Mapping[str, Any]]) -> None:
        """Offline state (`--state`): everything arrives at once and counts as synced."""
        objs = list(objects)
        for kind in store.KINDS:
            self.replace_kind(kind, [o for o in objs if model.kind_of(o) == kind])

    def apply_event(self, kind: str, event: Mapping[str, Any]) -> store.Transition:
        outcome = store.handle(self._live, kind, event)
        self._live = outcome.store
        obj = event.get("raw_object", event.get("object"))
        key = store.key_of(obj, kind) if event.get("type") == "DELETED" else None
        if key is not None and isinstance(obj, Mapping):
            snap = self._snapshot
            pending = store.release(snap.pending, key, obj)
            if pending is not snap.pending:
                self._snapshot = dataclasses.replace(snap, pending=pending)
        self.last_sync = self._clock()
        if outcome.changed:
            self._mark_dirty()
        return outcome

    def mark_unsynced(self, kind: str) -> None:
        self._synced[kind] = False

    def _mark_dirty(self) -> None:
        self._dirty.set()

    # -- readiness and views --------------------------------------------------------------
    @property
    def synced(self) -> bool:
        return bool(self._synced) and all(self._synced.values())

    @property
    def usable(self) -> bool:
        """Decisions can be made: every kind synced and a snapshot built."""
        return self.synced and self._snapshot.prepared is not None

    @property
    def ready(self) -> bool:
        """/readyz: usable and not shutting down (requests in flight are still answered)."""
        return not self._closing and self.usable

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    def live_counts(self) -> dict[str, int]:
        return store.counts(self._live)

    def pending_count(self) -> int:
        now = self._clock()
        return sum(1 for p in self._snapshot.pending.values() if p.expires > now)

    def stop_serving(self) -> None:
        """SIGTERM: report unready so the endpoints controller stops routing here."""
        self._closing = True

    async def wait_ready(self, timeout: float) -> bool:
        """Wait until decisions can be made (not /readyz: a draining replica still decides)."""
        deadline = self._clock() + timeout
        while not self.usable:
            left = deadline - self._clock()
            if left <= 0:
                return False
            self._built.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._built.wait(), min(left, 0.25))
        return True

    # -- the rebuild task -----------------------------------------------------------------
    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._rebuild_loop(), name="overlay-guard-rebuild")

    async def close(self) -> None:
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _rebuild_loop(self) -> None:
        while True:
            await self._dirty.wait()
            # Coalesce a burst of events (a relist, a kubectl apply -f dir/) into one rebuild.
            await asyncio.sleep(self.debounce)
            self._dirty.clear()
            if self._catalog is None or not self.synced:
                continue
            try:
                await self.rebuild()
            except Exception:
                log.exception("rebuilding the snapshot failed; keeping the previous one")

    async def rebuild(self) -> None:
        catalog, live = self._catalog, self._live
        if catalog is None:
            return
        started = time.perf_counter()
        # The previous snapshot lends its checks and cells for every object that did not change.
        prepared = await asyncio.to_thread(ev.prepare, store.documents(live), catalog, self._snapshot.prepared,
                                            crd=self._crd)
        seconds = time.perf_counter() - started
        current = self._snapshot
        pending = store.settle(current.pending, live, self._clock())
        self._snapshot = Snapshot(current.generation + 1, live, prepared, pending, self._clock())
        self._derived.clear()
        self._built.set()
        if self.on_rebuild is not None:
            self.on_rebuild(seconds)
        log.info("snapshot rebuilt", extra={"fields": {
            "generation": current.generation + 1, "seconds": round(seconds, 4),
            **{k.lower() + "s": v for k, v in store.counts(live).items()}, "pending": len(pending)}})

    # -- decisions ------------------------------------------------------------------------
    async def _prepared_for(self, snap: Snapshot, key: Key, plan: store.Plan) -> tuple[ev.Prepared, str]:
        """The Prepared to judge against when the plan asks for a rebase, and a note when it is not the exact one."""
        assert snap.prepared is not None and self._catalog is not None
        tag = (snap.generation, key, plan.previous.semantic if plan.previous else None)
        found = self._derived.get(tag)
        if found is not None:
            return found, ""
        task = self._rebasing.get(tag)
        if task is None:
            task = asyncio.ensure_future(asyncio.to_thread(
                admission.rebased, snap.basis, key, plan, self._catalog, snap.prepared, snap.prepared.crd))
            self._rebasing = {tag: task}
            task.add_done_callback(lambda t: self._keep_derived(tag, t))
        if key not in snap.basis:
            # An UPDATE of an object only held as pending (created moments ago): judging it as
            # a create is exact except that nothing is ratcheted, i.e. stricter. Take that
            # rather than let a slow rebuild run into the API server's timeout.
            done, _ = await asyncio.wait({task}, timeout=REBASE_WAIT)
            if not done:
                return snap.prepared, ("the stored version is not in the cache yet, so errors it already "
                                       "had are not ratcheted; retry in a few seconds if that matters")
        return await asyncio.shield(task), ""

    def _keep_derived(self, tag: tuple[int, Key, str | None], task: asyncio.Future[ev.Prepared]) -> None:
        if self._rebasing.get(tag) is task:
            self._rebasing = {}
        if task.cancelled() or task.exception() is not None:
            return
        self._derived = {tag: task.result()}

    async def _evaluate(self, candidate: Mapping[str, Any], operation: str, old: Mapping[str, Any] | None,
                        without: frozenset[Key] = frozenset(), small: bool = False) -> ev.Report:
        """The verdict on the current snapshot; `without`: cached objects the API server no
        longer has, judged as absent; `small`: as judging.Judge takes it."""
        snap = self._snapshot
        if snap.prepared is None or self._catalog is None or not self.synced:
            raise NotReady("the cluster state has not been synced yet")
        key = (model.NODEOVERLAY, model.name_of(candidate) or "")
        basis = {k: v for k, v in snap.basis.items() if k not in without} if without else snap.basis
        plan = store.plan(basis, snap.pending, key, operation, old, self._clock())
        if without:
            prepared, note = await asyncio.to_thread(admission.rebased, basis, key, plan, self._catalog,
                                                     snap.prepared, snap.prepared.crd), ""
        elif plan.rebase:
            prepared, note = await self._prepared_for(snap, key, plan)
        else:
            prepared, note = snap.prepared, ""
        held: dict[str, ev.Checked] = {}
        if plan.extras:
            extras = {model.name_of(x) for x in plan.extras}
            held = {n: c for n, c in self._checked.items() if n in extras}
        report = await self._judge(prepared, candidate, plan.extras, held, small)
        return dataclasses.replace(report, notes=(*report.notes, note)) if note else report

    async def _confirm(self, keys: list[Key], subject: findings.ObjectRef) -> set[Key] | None:
        """Read `keys` (outside the decision lock: the reads and the window take up to about a
        second, and other decisions must not wait for them). Drops the holds the API server does
        not have; returns the cached objects it no longer has, or None when nothing was missing."""
        snap = self._snapshot
        self.confirmations += 1
        results = await asyncio.gather(*(self._check(k, snap) for k in keys))
        held = [k for k, r in zip(keys, results, strict=True) if r.drop_hold]
        stale = {k for k, r in zip(keys, results, strict=True) if r.absent}
        if not held and not stale:
            return None
        self.dropped_holds += len(held)
        self.stale_objects += len(stale)
        log.info("a denial rested on objects the API server does not have; judging again without them",
                 extra={"fields": {"candidate": subject.name, "droppedHolds": [k[1] for k in held],
                                   "staleInCache": sorted(f"{k[0]}/{k[1]}" for k in stale)}})
        # Only the holds that were read: one taken meanwhile (a new request) is a different hold.
        current = self._snapshot.pending
        self._snapshot = dataclasses.replace(self._snapshot, pending=store.drop(
            current, [k for k in held if current.get(k) is snap.pending.get(k)]))
        return stale

    async def _check(self, key: Key, snap: Snapshot) -> admission.Read:
        """Read one object a denial rests on; a held version is read again over the confirmation
        window before it counts as never stored. One that cannot be read counts as confirmed."""
        assert self.reader is not None
        held = snap.pending.get(key)
        waited = 0.0
        live: Mapping[str, Any] | None = None
        for at in (RECHECKS if held is not None else (0.0,)):
            await asyncio.sleep(max(0.0, at * self.confirm_window - waited))
            waited = at * self.confirm_window
            try:
                live = await self.reader(*key)
            except Exception as err:
                log.warning("cannot confirm an object a denial rests on; the denial stands", extra={
                    "fields": {"object": f"{key[0]}/{key[1]}", "error": f"{type(err).__name__}: {err}"[:300]}})
                return admission.Read(drop_hold=False, absent=False)
            if admission.settled(held, live):
                break
        return admission.read(key, held, live, snap.basis)

    async def simulate(self, candidate: Mapping[str, Any], operation: str,
                       old: Mapping[str, Any] | None, small: bool = False) -> ev.Report:
        """The verdict without a hold (/mutate and anything else that must not change state)."""
        return await self._evaluate(candidate, operation, old, small=small)

    async def decide(self, candidate: Mapping[str, Any], operation: str, old: Mapping[str, Any] | None,
                     *, uid: str, dry_run: bool, admits: Callable[[ev.Report], bool], small: bool = False) -> Decision:
        """Evaluate and hold under the lock, so two conflicting requests cannot both pass; a
        denial is confirmed between rounds, with the lock released (module docstring). `small`: as
        judging.Judge takes it."""
        subject = findings.ObjectRef(model.NODEOVERLAY, model.name_of(candidate) or "")
        checked: set[Key] = set()
        gone: frozenset[Key] = frozenset()
        rounds = 0
        while True:
            async with self._lock:
                report = await self._evaluate(candidate, operation, old, gone, small)
                allowed = admits(report)
                confirmable = not allowed and self.reader is not None and rounds < CONFIRM_ROUNDS
                keys = (admission.to_confirm(report, subject, self._snapshot.pending, checked, self._clock())
                        if confirmable else [])
                if not keys:
                    held = allowed and not dry_run
                    if held:
                        self._hold(candidate, uid, report)
                    return Decision(report, allowed, held)
            rounds += 1
            checked.update(keys)
            stale = await self._confirm(keys, subject)
            if stale is None:
                # Every object the denial rests on exists: deny. (Judged again it could only
                # come out the same or stricter, e.g. a conflicting object admitted meanwhile.)
                return Decision(report, False, False)
            gone |= stale

    def _hold(self, candidate: Mapping[str, Any], uid: str, report: ev.Report) -> None:
        key = (model.NODEOVERLAY, model.name_of(candidate) or "")
        snap = self._snapshot
        pending = store.hold(snap.pending, key, candidate, uid, self._clock(), self.ttl, self.max_pending)
        self._snapshot = dataclasses.replace(snap, pending=pending)
        # Keep the held object's own checks for the requests that judge it as an extra.
        self._checked = {n: c for n, c in self._checked.items() if (model.NODEOVERLAY, n) in pending}
        if key[1] in report.overlays:
            self._checked[key[1]] = report.overlays[key[1]]

    async def assess(self, pool: Mapping[str, Any]) -> ev.Report:
        """What a NodePool change does to the overlays, held ones included (a NodePool applied
        right after an overlay must see it); never held itself: NodePools are not denied."""
        snap = self._snapshot
        if snap.prepared is None or self._catalog is None:
            raise NotReady("the cluster state has not been synced yet")
        basis = store.including(snap.basis, snap.pending, self._clock())
        prepared = snap.prepared
        if basis is not snap.basis:
            prepared = await asyncio.to_thread(ev.prepare, store.documents(basis), self._catalog, prepared,
                                               crd=prepared.crd)
        return await asyncio.to_thread(admission.assess, prepared, pool)
