"""The cluster-state cache: an immutable snapshot (objects + Prepared) swapped whole, and the
decisions taken on it.

Sources (the list+watch informers or `--state` files) feed `replace_kind`/`apply_event` on
the event loop; a debounced background task rebuilds the Prepared off the loop, so requests
always evaluate against the latest complete snapshot and a burst of watch events costs one
rebuild.

Admissions across replicas are ordered by the ledger (webhook/ledger.py): a candidate is judged
against the snapshot plus every record in it and, when admitted (not a dry run), recorded there by
compare-and-swap before the answer; a 409 reads the ledger again and judges again. No lock: two
decisions on this replica are ordered the same way. A snapshot is used only once it has caught up
with the ledger's horizon. Records leave by compare-and-swap (`sweep`, a background task).

Anyone who can reach the port can send a review, and the watch lags the API server, so a denial is
confirmed before it is given (`decide`): records it rests on are read again from the ledger (and,
past their deadline, from the API server); cached objects it rests on are read from the API server,
and one it no longer has is judged as absent. Every decision finishes within `budget` seconds, with
at most MAX_READS live reads. With `--state` there is no API server: the ledger lives in memory and
denials rest on the files.

The Lease is input (webhook/ledger.py's `check`): every ledger read is checked, and what cannot be true is
repaired by compare-and-swap (the next write, or the sweep at once), counted and logged. A horizon the
snapshot does not reach within CATCH_UP is held against a fresh list of NodeOverlays (the API server's
current resourceVersion), which also brings the cache up to it. A record this replica wrote or read counts
until its watch delivers the object (or its deadline passes): taken out of the Lease before that, it is
written back.

The API server sends every apply to /mutate and then, with the object /mutate left, to /validate: the
same question twice. A /mutate report is kept (`_judged`) for the /validate of the same object on the
same snapshot, ledger view and catalog, which takes it instead of judging again. "The same object" leaves
out what the API server sets between the two calls (uid, creationTimestamp; the core reads none of it).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

from simulation import evaluate as ev
from simulation import findings
from simulation.semantics import catalog as cat
from simulation.semantics import model
from simulation.validation import crds
from webhook import admission, chain, judging, patch, store, verdict
from webhook import ledger as lg
from webhook.leader import Conflict
from webhook.ledgerstore import LedgerStore, MemoryLedger
from webhook.store import Key, Store

log = logging.getLogger("overlay-guard.state")
# How long an UPDATE of an object not in the cache yet waits for a Prepared holding that version.
REBASE_WAIT = 2.0
# Live reads one denial may cause: it must not cost hundreds.
MAX_READS = 12
# Tries to write a record (each after a 409 reads the ledger once more), and the most a try waits first.
MAX_WRITES = 16
CONFLICT_PAUSE = 0.02
# A ledger write is not started with less than this left of the budget.
MIN_WRITE = 0.2
# Seconds between sweeps of the ledger while it has records, and while it has none.
SWEEP_BUSY, SWEEP_IDLE = 0.5, 5.0
# Deletions the watch delivered, remembered by uid for the records they settle.
DELETED_KEPT = 256
# The readiness key of a followed CRD (set_crd).
CRD = "CustomResourceDefinition"
# How long a decision waits for the snapshot to reach the ledger's horizon before it lists NodeOverlays
# to learn whether the horizon is one the API server has issued at all.
CATCH_UP = 1.0
# /mutate reports kept for the /validate that follows (module docstring): more than the requests in flight.
JUDGED_KEPT = 64
# Metadata the API server sets or changes between /mutate and /validate.
SYSTEM_METADATA = frozenset(("uid", "creationTimestamp", "generation", "resourceVersion", "managedFields"))

# Reads one object from the API server: the object, None when it does not exist; raises when
# that cannot be told (the denial then stands).
Reader = Callable[[str, str], Awaitable[Mapping[str, Any] | None]]
# Lists NodeOverlays from the API server: the objects and the list's resourceVersion.
Lister = Callable[[], Awaitable[tuple[list[Mapping[str, Any]], str | None]]]
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Snapshot:
    generation: int
    basis: Store
    prepared: ev.Prepared | None
    built_at: float
    # The NodeOverlay resourceVersion the basis has caught up with (webhook/ledger.py's horizon).
    version: int = 0
    # How many changes to the simulation's input the basis includes.
    changes: int = 0


@dataclasses.dataclass(frozen=True)
class Decision:
    report: ev.Report
    allowed: bool
    held: bool
    # A denial that rests only on these records, whose objects are being admitted and not stored yet.
    in_flight: tuple[str, ...] = ()


class Unanswerable(Exception):
    """No verdict in time, or none that can be recorded: the request is refused with 503 and why."""


class _Attempt:
    """One decision's progress: the ledger it judges by (`fresh`: read for this decision), the live reads
    and ledger writes it has left, the cached objects it has read and those the API server no longer has."""

    def __init__(self, view: lg.Ledger) -> None:
        self.view = view
        self.fresh = False
        self.reads = MAX_READS
        self.writes = MAX_WRITES
        self.checked: set[Key] = set()
        self.gone: frozenset[Key] = frozenset()

    def take(self, n: int = 1) -> bool:
        if n > self.reads:
            return False
        self.reads -= n
        return True


class Unrecordable(Unanswerable):
    """A candidate the ledger can never hold: retrying does not help, so it is denied, not refused with 503."""


class NotReady(Exception):
    """The first list has not synced (or the catalog is still loading)."""


class Cache:
    def __init__(self, *, debounce: float = 0.1, max_pending: int = lg.MAX_RECORDS,
                 ledger: LedgerStore | None = None, admission_chain: chain.Chain | None = None,
                 budget: float | None = None, after: float | None = None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self.debounce = debounce
        self.max_pending = max_pending
        self.ledger: LedgerStore = ledger or MemoryLedger()
        # The admission chain (webhook/chain.py) and the flags that override what it derives.
        self.chain = admission_chain or chain.Chain()
        self._budget, self._after = budget, after
        # The latest ledger this replica read or wrote.
        self.view = lg.Ledger()
        # Set by a live source; None (`--state`) leaves nothing to confirm against.
        self.reader: Reader | None = None
        self.lister: Lister | None = None
        # Why the ledger cannot be used (webhook/ledgerstore.py's access check); /readyz fails while set.
        self.ledger_problem: str | None = None
        # The records this replica wrote or read whose objects its watch has not delivered yet, by name.
        self._known: dict[str, lg.Record] = {}
        # Repairs of the ledger by lg.PROBLEMS key (and "deleted": the Lease was gone).
        self.ledger_repairs: dict[str, int] = {}
        # What the latest read found to repair (with the read's details for the log), until a write repairs it.
        self._repair_due: tuple[str, ...] = ()
        self._repair_detail: dict[str, Any] = {}
        self._wake = asyncio.Event()
        # NodeOverlay watch events at or below this resourceVersion are in the list CATCH_UP made.
        self._listed = 0
        self._relisting: asyncio.Future[int] | None = None
        self.confirmations = 0
        self.stale_objects = 0
        self.ledger_writes = {"written": 0, "conflict": 0, "swept": 0, "repaired": 0}
        self.unanswered = {"budget": 0, "busy": 0, "ledger": 0}
        self._clock = clock
        self._wall = wall
        self._catalog: cat.Catalog | None = None
        # Where the catalog in use came from (embedded, file, karpenter), when it was read (clock) and why the
        # last read of Karpenter's metrics failed, if it did: /readyz detail and a gauge.
        self.catalog_source = "embedded"
        self.catalog_read_at = clock()
        self.catalog_error: str | None = None
        self._published: Mapping[tuple[str, str, str], float] | None = None
        self._crd: crds.Crd | None = None
        self._live: Store = {}
        # Counts every list and watch event, status writes included (the audit compares Karpenter's).
        self.updates = 0
        self._version = 0
        self._changes = 0
        self._deleted: dict[str, int] = {}
        self._synced: dict[str, bool] = {}
        self._snapshot = Snapshot(0, {}, None, 0.0)
        self._dirty = asyncio.Event()
        self._built = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        # Prepared snapshots for stale-cache UPDATEs and re-CREATEs: rare, and each is the size
        # of the whole snapshot, so only the latest is kept.
        self._derived: dict[tuple[int, Key, str | None], ev.Prepared] = {}
        # The checks of admitted candidates, by digest, for the requests that judge their records.
        self._checked: dict[str, ev.Checked] = {}
        self._rebasing: dict[tuple[int, Key, str | None], asyncio.Future[ev.Prepared]] = {}
        self._closing = False
        self._judge = judging.Judge()
        # /mutate's reports by what they judged; each value holds the ledger view and catalog it was judged with.
        self._judged: dict[tuple[Any, ...], tuple[lg.Ledger, cat.Catalog, ev.Report]] = {}
        self.last_sync: float | None = None
        self.rebuild_seconds: list[float] = []
        self.on_rebuild: Callable[[float], None] | None = None

    def follow_chain(self, found: chain.Chain) -> None:
        """The admission chain as read from the cluster (webhook/chain.py)."""
        self.chain = found

    @property
    def budget(self) -> float:
        """Seconds a decision may take (--decision-budget, else below the webhook's timeoutSeconds)."""
        return self._budget if self._budget is not None else self.chain.budget

    @property
    def after(self) -> float:
        """Seconds a record waits past its admission before it may be read as never stored."""
        return self._after if self._after is not None else self.chain.after

    @property
    def lifetime(self) -> float:
        """The furthest ahead a true record's deadline can be: the admission chain (every replica reads the same
        webhook configurations), plus the clock skew between replicas."""
        return self.after + chain.PERSIST

    # -- sources --------------------------------------------------------------------------
    def expect(self, kinds: Iterable[str]) -> None:
        """Declare the kinds a source will list; readiness waits for all of them."""
        for kind in kinds:
            self._synced.setdefault(kind, False)

    def set_catalog(self, catalog: cat.Catalog, crd: crds.Crd | None = None, source: str = "embedded") -> None:
        self._catalog = catalog
        self._crd = crd
        self.catalog_source, self.catalog_read_at = source, self._clock()
        self._mark_dirty()

    def replace_catalog(self, catalog: cat.Catalog, source: str,
                        published: Mapping[tuple[str, str, str], float] | None = None) -> None:
        """A catalog read again (webhook/livecatalog.py), swapped whole: the next snapshot is built on it.
        `published`: the effective prices Karpenter published in the same read, which the audit compares with
        its prediction (webhook/prediction.py)."""
        self._catalog = catalog
        self.catalog_source, self.catalog_read_at, self.catalog_error = source, self._clock(), None
        self._published = published
        self._mark_dirty()

    async def published_prices(self) -> Mapping[tuple[str, str, str], float] | None:
        """Karpenter's effective prices of the last good read; None before one and while reads fail (a stale figure
        would be a mismatch of the guard's making)."""
        return None if self.catalog_error else self._published

    @property
    def catalog(self) -> cat.Catalog | None:
        """The catalog the next snapshot is built on."""
        return self._catalog

    @property
    def crd(self) -> crds.Crd | None:
        """The NodeOverlay CRD the next snapshot judges by (None: Karpenter's own, embedded)."""
        return self._crd

    def catalog_detail(self) -> dict[str, Any]:
        """The catalog in use, as /readyz reports it."""
        return {"source": self.catalog_source, "ageSeconds": round(max(0.0, self._clock() - self.catalog_read_at), 1),
                **({"lastError": self.catalog_error} if self.catalog_error else {})}

    def documents(self) -> list[ev.Document]:
        """The cached objects as the core's documents (what a live catalog's prices are recovered against)."""
        return store.documents(self._live)

    def set_crd(self, crd: crds.Crd) -> None:
        """The NodeOverlay CRD followed in the cluster (webhook/crdwatch.py; readiness waits for the first
        when `expect`ed as CRD): the next snapshot is built with it, its checks all anew."""
        self._crd = crd
        self._checked = {}
        self._synced[CRD] = True
        self._mark_dirty()

    def replace_kind(self, kind: str, items: Iterable[Mapping[str, Any]], version: str | None = None) -> None:
        """A fresh list; `version`: its resourceVersion (everything up to it is in the list)."""
        self._live, changed = store.replace_kind(self._live, kind, items)
        if kind == model.NODEOVERLAY:
            self._version = max(self._version, lg.resource_version({"metadata": {"resourceVersion": version}}))
        first = not self._synced.get(kind, False)
        self._synced[kind] = True
        self.updates += 1
        self.last_sync = self._clock()
        self._changed(changed or first)

    def load(self, objects: Iterable[Mapping[str, Any]]) -> None:
        """Offline state (`--state`): everything arrives at once and counts as synced."""
        objs = list(objects)
        for kind in store.KINDS:
            self.replace_kind(kind, [o for o in objs if model.kind_of(o) == kind])

    def apply_event(self, kind: str, event: Mapping[str, Any]) -> store.Transition | None:
        if kind == model.NODEOVERLAY and self._listed and lg.resource_version(
                event.get("raw_object", event.get("object"))) <= self._listed:
            return None  # the list CATCH_UP made has it already; applied now it would step back
        outcome = store.handle(self._live, kind, event)
        self._live = outcome.store
        self.updates += 1
        if kind == model.NODEOVERLAY and outcome.resource_version is not None:
            version = lg.resource_version({"metadata": {"resourceVersion": outcome.resource_version}})
            self._version = max(self._version, version)
            obj = event.get("raw_object", event.get("object"))
            uid = store.uid_of(obj)
            if event.get("type") == "DELETED" and uid is not None:
                self._deleted[uid] = version
                while len(self._deleted) > DELETED_KEPT:
                    del self._deleted[next(iter(self._deleted))]
        self.last_sync = self._clock()
        self._changed(outcome.changed)
        return outcome

    def _changed(self, changed: bool) -> None:
        """Rebuild for a change; without one (status churn, a bookmark), a snapshot that has every change
        so far takes the new resourceVersion at once: a decision waiting for the horizon goes on."""
        if changed:
            self._changes += 1
            self._mark_dirty()
        elif self._snapshot.changes == self._changes and self._snapshot.version < self._version:
            self._snapshot = dataclasses.replace(self._snapshot, version=self._version)
            self._built.set()

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
        """/readyz: usable, the ledger reachable and writable, and not shutting down (requests in flight are
        still answered)."""
        return not self._closing and self.usable and self.ledger_problem is None

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def live(self) -> Store:
        """The objects as last listed or watched, status included (the snapshot's basis lags status writes)."""
        return self._live

    def live_counts(self) -> dict[str, int]:
        return store.counts(self._live)

    def report_ledger(self, problem: str | None) -> None:
        """Why the ledger's Lease cannot be used (None: it can): /readyz fails while there is a reason."""
        self.ledger_problem = problem

    def pending_count(self) -> int:
        """Records in the ledger as this replica last saw it."""
        return len(self.view.records)

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

    # -- the background tasks -------------------------------------------------------------
    async def start(self) -> None:
        if not self._tasks:
            self._tasks = [asyncio.create_task(self._rebuild_loop(), name="overlay-guard-rebuild"),
                           asyncio.create_task(self._sweep_loop(), name="overlay-guard-sweep")]

    async def close(self) -> None:
        self._closing = True
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

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
        catalog, live, version, changes = self._catalog, self._live, self._version, self._changes
        if catalog is None:
            return
        started = time.perf_counter()
        # The previous snapshot lends its checks and cells for every object that did not change.
        # The cache lists every NodePool of the cluster (docs/cli.md: a certainly undefined label).
        prepared = await asyncio.to_thread(lambda: ev.warmed(ev.prepare(
            store.documents(live), catalog, self._snapshot.prepared, crd=self._crd, every_nodepool=True)))
        seconds = time.perf_counter() - started
        current = self._snapshot
        self._snapshot = Snapshot(current.generation + 1, live, prepared, self._clock(), version, changes)
        self._derived.clear()
        self._built.set()
        if self.on_rebuild is not None:
            self.on_rebuild(seconds)
        log.info("snapshot rebuilt", extra={"fields": {
            "generation": current.generation + 1, "seconds": round(seconds, 4),
            **{k.lower() + "s": v for k, v in store.counts(live).items()}, "records": len(self.view.records)}})

    async def _sweep_loop(self) -> None:
        while True:
            # Woken early by a ledger read that needs a repair.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), SWEEP_BUSY if self.view.records else SWEEP_IDLE)
            self._wake.clear()
            if not self.usable:
                continue
            try:
                await self.sweep()
            except Exception as exc:
                log.warning("sweeping the ledger failed; trying again", extra={"fields": {
                    "ledger": self.ledger.where, "error": f"{type(exc).__name__}: {exc}"[:300]}})

    async def sweep(self) -> None:
        """Take out of the ledger the records whose object the watch has (or whose deletion it has), and
        those past their deadline whose object the API server does not have as recorded."""
        view = self._observe(await self.ledger.get(SWEEP_BUSY * 4))
        if not view.records and not self._repair_due:
            return
        found = lg.sweep(view, self._snapshot.basis, self._deleted, self._wall())
        leaving = dict(found.settled)
        for r in found.overdue[:MAX_READS]:
            try:
                live = await self.reader(*r.key) if self.reader is not None else None
            except Exception:
                continue  # it stays until a read answers
            at = lg.verdict(r, live)
            if at is not None:
                leaving[r.name] = at
        if not leaving and not self._repair_due:
            return
        try:
            await self._put(lg.without(view, leaving), SWEEP_BUSY * 4)
        except Conflict:
            return  # another write landed first; the next sweep reads it
        if leaving:
            self.ledger_writes["swept"] += 1
            log.info("records left the ledger", extra={"fields": {"records": sorted(leaving)}})

    async def _put(self, ledger: lg.Ledger, timeout: float) -> lg.Ledger:
        """Write by compare-and-swap (leader.Conflict when another write landed first); what was stored."""
        repairing, detail = self._repair_due, self._repair_detail
        stored = self._observe(await self.ledger.put(ledger, timeout), written=True)
        if repairing:
            self.ledger_writes["repaired"] += 1
            for problem in repairing:
                self.ledger_repairs[problem] = self.ledger_repairs.get(problem, 0) + 1
            log.warning("the admissions ledger held what cannot be true; rewritten", extra={"fields": {
                "ledger": self.ledger.where, "problems": list(repairing), **detail, "records": len(stored.records),
                "horizon": stored.horizon}})
        return stored

    def _observe(self, view: lg.Ledger, revision: int | None = None, written: bool = False,
                 again: bool = False) -> lg.Ledger:
        """The ledger as read (`written`: as this replica just stored it; `again`: observed before, the snapshot
        having caught up with it since), repaired where it cannot be true; `revision`: a resourceVersion the
        API server issued after `view` was read. A known record gone from it counts as taken out only once
        the snapshot has caught up with its horizon: before, another replica may have settled it at a version
        this replica's watch has not delivered yet."""
        now = self._wall()
        if self._known:
            settled = lg.sweep(lg.Ledger(tuple(self._known.values())), self._snapshot.basis, self._deleted,
                               now).settled
            self._known = {n: r for n, r in self._known.items() if r.deadline > now and n not in settled}
        known = tuple(self._known.values()) if self._snapshot.version >= view.horizon else ()
        repaired, problems = lg.check(view, lg.Bounds(now, self.lifetime, revision, known,
                                                      max(self.max_pending, lg.MAX_RECORDS)))
        self._known.update((r.name, r) for r in repaired.records if r.deadline > now)
        if view.version is None and self.view.version is not None and not again:
            problems = ("deleted", *problems)
        if problems:
            self._repair_due = tuple(dict.fromkeys((*self._repair_due, *problems) if again else problems))
            self._repair_detail = {"leaseVersion": view.version, "readRecords": len(view.records),
                                   "readHorizon": view.horizon}
            self._wake.set()
        elif not again:
            # What this read holds is true (a write, or someone else's repair): nothing is left to rewrite.
            self._repair_due = ()
        self.view = repaired
        return repaired

    # -- decisions ------------------------------------------------------------------------
    def _left(self, ends: float) -> float:
        left = ends - self._clock()
        if left <= 0:
            self.unanswered["budget"] += 1
            raise Unanswerable(f"the decision did not finish within {self.budget:g}s; retry in a few seconds")
        return left

    async def _within(self, work: Awaitable[T], ends: float) -> T:
        """`work` within the budget. The deadline is on the request's own task (asyncio.timeout), not on a task made
        around `work` (asyncio.wait_for): an evaluation on the loop (judging.py) then costs no task made, scheduled
        and awaited per admission. A shared future (`_relisting`, a rebase) is awaited through asyncio.shield, so
        that the deadline of one request cancels its wait, not the work others wait for."""
        try:
            async with asyncio.timeout(self._left(ends)):
                return await work
        except TimeoutError:
            self._left(ends)
            raise

    async def _caught_up(self, view: lg.Ledger, ends: float) -> lg.Ledger:
        """Until the snapshot has every object whose record left the ledger (its horizon). Past CATCH_UP the
        NodeOverlays are listed: a horizon above the list's resourceVersion was never issued (the ledger with
        it repaired is returned), and the list brings the cache up to any true one."""
        listed_after = self._clock() + CATCH_UP if self.lister is not None else math.inf
        if self._snapshot.version >= view.horizon:
            return view
        while self._snapshot.version < view.horizon:
            if self._clock() >= listed_after:
                listed_after = math.inf
                revision = await self._relist(ends)
                view = self._observe(view, revision, again=True)
                continue
            self._built.clear()
            left = self._left(ends)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._built.wait(), min(0.05, left))
        return self._observe(view, again=True)

    async def _relist(self, ends: float) -> int:
        """The NodeOverlays as the API server has them now, into the cache; the list's resourceVersion.
        Decisions waiting together share one list."""
        if self._relisting is None or self._relisting.done():
            self._relisting = asyncio.ensure_future(self._list_overlays())
        return await self._within(asyncio.shield(self._relisting), ends)

    async def _list_overlays(self) -> int:
        assert self.lister is not None
        items, version = await self.lister()
        revision = lg.resource_version({"metadata": {"resourceVersion": version}})
        self.replace_kind(model.NODEOVERLAY, items, version)
        self._listed = max(self._listed, revision)
        return revision

    async def _prepared_for(self, snap: Snapshot, key: Key, plan: store.Plan,
                            ends: float) -> tuple[ev.Prepared, str]:
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
            # An UPDATE of an object only recorded (created moments ago): judging it as a create is
            # exact except that nothing is ratcheted, i.e. stricter. Take that rather than let a slow
            # rebuild run into the API server's timeout.
            done, _ = await asyncio.wait({task}, timeout=min(REBASE_WAIT, self._left(ends) / 2))
            if not done:
                return snap.prepared, ("the stored version is not in the cache yet, so errors it already "
                                       "had are not ratcheted; retry in a few seconds if that matters")
        return await self._within(asyncio.shield(task), ends), ""

    def _keep_derived(self, tag: tuple[int, Key, str | None], task: asyncio.Future[ev.Prepared]) -> None:
        if self._rebasing.get(tag) is task:
            self._rebasing = {}
        if task.cancelled() or task.exception() is not None:
            return
        self._derived = {tag: task.result()}

    def _asked(self, snap: Snapshot, without: frozenset[Key], operation: str, candidate: Mapping[str, Any],
               old: Mapping[str, Any] | None, keep: bool) -> tuple[Any, ...]:
        """The key of a /mutate report kept for the /validate of the same object (module docstring); () while none
        is kept and this is no /mutate: the key renders the object as JSON (about 15 µs for a usual one), which a
        webhook configured without /mutate never needs."""
        if not keep and not self._judged:
            return ()
        return snap.generation, without, operation, _judged_form(candidate), _judged_form(old)

    async def _evaluate(self, candidate: Mapping[str, Any], operation: str, old: Mapping[str, Any] | None,
                        view: lg.Ledger, ends: float, without: frozenset[Key] = frozenset(),
                        small: bool = False, keep: bool = False) -> tuple[ev.Report, store.Plan]:
        """The verdict on the current snapshot plus `view`'s records; `without`: cached objects the API
        server no longer has, judged as absent; `small`: as judging.Judge takes it; `keep`: a /mutate report,
        kept for the /validate of the same object (module docstring), which takes it."""
        snap = self._snapshot
        catalog = self._catalog
        if snap.prepared is None or catalog is None or not self.synced:
            raise NotReady("the cluster state has not been synced yet")
        key = (model.NODEOVERLAY, model.name_of(candidate) or "")
        basis = {k: v for k, v in snap.basis.items() if k not in without} if without else snap.basis
        plan = store.plan(basis, lg.holds(view), key, operation, old)
        asked = self._asked(snap, without, operation, candidate, old, keep)
        kept = self._judged.pop(asked, None) if asked and not keep else None
        if kept is not None and kept[0] is view and kept[1] is catalog:
            return kept[2], plan
        if without:
            prepared, note = await self._within(asyncio.to_thread(
                admission.rebased, basis, key, plan, catalog, snap.prepared, snap.prepared.crd), ends), ""
        elif plan.rebase:
            prepared, note = await self._prepared_for(snap, key, plan, ends)
        else:
            prepared, note = snap.prepared, ""
        checks: dict[str, ev.Checked] = {}
        for extra in plan.extras:
            found = self._checked.get(lg.digest(store.semantic(extra)))
            if found is not None:
                checks[model.name_of(extra) or ""] = found
        if self._judge.inline(candidate, small):
            # Nothing suspends an evaluation on the loop, so no deadline could end it early: the budget left is read
            # first, as _within reads it, and no timer is made and cancelled per admission.
            self._left(ends)
            report = self._judge.here(prepared, candidate, plan.extras, checks)
        else:
            report = await self._within(self._judge.elsewhere(prepared, candidate, plan.extras, checks), ends)
        if keep and not note:
            # A note says the judgement was not the exact one: /validate asks again.
            if len(self._judged) >= JUDGED_KEPT:
                del self._judged[next(iter(self._judged))]
            self._judged[asked] = (view, catalog, report)
        return (dataclasses.replace(report, notes=(*report.notes, note)) if note else report), plan

    async def simulate(self, candidate: Mapping[str, Any], operation: str,
                       old: Mapping[str, Any] | None, small: bool = False) -> ev.Report:
        """The verdict without a record (/mutate and anything else that must not change state)."""
        ends = self._clock() + self.budget
        return (await self._evaluate(candidate, operation, old, self.view, ends, small=small, keep=True))[0]

    async def decide(self, candidate: Mapping[str, Any], operation: str, old: Mapping[str, Any] | None,
                     *, dry_run: bool, admits: Callable[[ev.Report], bool], small: bool = False) -> Decision:
        """Judge against the snapshot plus the ledger; record an admission with compare-and-swap, judging
        again after a 409; confirm a denial first (module docstring). Raises Unanswerable past the budget,
        or when the admission cannot be recorded. `small`: as judging.Judge takes it."""
        ends = self._clock() + self.budget
        subject = findings.ObjectRef(model.NODEOVERLAY, model.name_of(candidate) or "")
        attempt = _Attempt(self.view)
        while True:
            attempt.view = await self._caught_up(attempt.view, ends)
            report, plan = await self._evaluate(candidate, operation, old, attempt.view, ends,
                                                attempt.gone, small)
            if admits(report):
                if dry_run:
                    return Decision(report, True, False)
                if attempt.writes <= 0:
                    self.unanswered["busy"] += 1
                    raise Unanswerable("the admissions ledger changed too often to record this one; retry")
                attempt.writes -= 1
                if await self._record(candidate, attempt.view, report, ends) is not None:
                    return Decision(report, True, True)
                # 409: another admission landed first; judge again with it, after a pause that keeps
                # writers that lost together from colliding again.
                await asyncio.sleep(min(random.uniform(0, CONFLICT_PAUSE) * (MAX_WRITES - attempt.writes),
                                        self._left(ends) / 2))
                attempt.view, attempt.fresh = await self._read_ledger(ends), True
                continue
            extras = {(model.NODEOVERLAY, model.name_of(x) or "") for x in plan.extras}
            grounds = [(r.kind, r.name) for r in verdict.grounds(report, subject)]
            if not await self._reconsider(attempt, grounds, extras, subject, ends):
                records = [k[1] for k in grounds if k in extras]
                return Decision(report, False, False, tuple(records) if len(records) == len(grounds) else ())

    async def _reconsider(self, attempt: _Attempt, grounds: list[Key], extras: set[Key],
                          subject: findings.ObjectRef, ends: float) -> bool:
        """Whether a denial resting on `grounds` must be judged again: a record it rests on may have left
        the ledger (read it again), be past its deadline and never stored (read the object, take the
        record out), or a cached object it rests on be gone (read it, judge without it)."""
        records = [k for k in grounds if k in extras]
        if records and not attempt.fresh and attempt.take():
            attempt.view, attempt.fresh = await self._read_ledger(ends), True
            return True
        settled: dict[str, int] = {}
        overdue: list[lg.Record] = []
        if records:
            # Only the records the denial rests on count: with none (almost every denial), no sweep of the ledger.
            found = lg.sweep(attempt.view, self._snapshot.basis, self._deleted, self._wall())
            # Records whose deletion the watch delivered (deleted, then replaced) count no more.
            settled = {n: at for n, at in found.settled.items() if (model.NODEOVERLAY, n) in records}
            overdue = [r for r in found.overdue if r.key in records][:attempt.reads - 1]
        if (settled or overdue) and attempt.take(len(overdue) + 1):
            after = await self._settle(attempt.view, overdue, settled, ends)
            if after is not None:
                attempt.view = after
                return True
        cached = [k for k in grounds if k not in extras and k not in attempt.checked
                  and k[0] in store.KINDS][:attempt.reads]
        if cached and self.reader is not None and attempt.take(len(cached)):
            attempt.checked.update(cached)
            stale = await self._confirm(cached, subject, ends)
            attempt.gone |= stale
            return bool(stale)
        return False

    async def _read_ledger(self, ends: float) -> lg.Ledger:
        try:
            return self._observe(await self._within(self.ledger.get(self._left(ends)), ends))
        except (Unanswerable, TimeoutError):
            raise
        except Exception as exc:
            self.unanswered["ledger"] += 1
            raise Unanswerable(f"cannot read the admissions ledger ({type(exc).__name__}); retry") from exc

    async def _record(self, candidate: Mapping[str, Any], view: lg.Ledger, report: ev.Report,
                      ends: float) -> lg.Ledger | None:
        """Add the candidate's record to `view` by compare-and-swap, with the records the watch settled
        taken out on the way; None when another write landed first."""
        now = self._wall()
        mine = lg.record(candidate, now + self.after)
        if not lg.fits(mine):
            raise Unrecordable(
                f"NodeOverlay {mine.name} is too large for the admissions ledger: its record takes "
                f"{len(lg.text(lg.Ledger((mine,))))} characters and the ledger holds {lg.MAX_BYTES}, so it can never "
                "be recorded; fewer or shorter requirement values make it smaller")
        found = lg.sweep(view, self._snapshot.basis, self._deleted, now)
        # Without an API server (--state) nothing is stored later: past its deadline a record has no object.
        leaving = {**found.settled, **({r.name: 0 for r in found.overdue} if self.reader is None else {})}
        rival = lg.rival(view, mine, leaving)
        if rival is not None:
            self.unanswered["busy"] += 1
            raise Unanswerable(f"another NodeOverlay {rival.name} (uid {rival.uid}) is being admitted right now; "
                               "retry in a few seconds")
        updated = lg.admit(view, mine, leaving, self.max_pending)
        if updated is None:
            self.unanswered["busy"] += 1
            raise Unanswerable(f"{len(view.records)} NodeOverlay admissions are in flight, more than the ledger "
                               f"holds beside this one ({self.max_pending} records, {lg.MAX_BYTES} characters); "
                               "retry in a few seconds")
        if self._left(ends) < MIN_WRITE:
            self.unanswered["budget"] += 1
            raise Unanswerable(f"the decision did not finish within {self.budget:g}s; retry in a few seconds")
        try:
            stored = await self._within(self._put(updated, self._left(ends)), ends)
        except Conflict:
            self.ledger_writes["conflict"] += 1
            return None
        except (Unanswerable, TimeoutError):
            raise
        except Exception as exc:
            self.unanswered["ledger"] += 1
            raise Unanswerable(f"cannot record the admission in the ledger ({type(exc).__name__}); retry") from exc
        self.ledger_writes["written"] += 1
        if mine.name in report.overlays:
            # Its own checks, for the requests that judge its record as an extra.
            live = {r.digest for r in stored.records}
            self._checked = {d: c for d, c in self._checked.items() if d in live}
            self._checked[mine.digest] = report.overlays[mine.name]
        return stored

    async def _settle(self, view: lg.Ledger, overdue: list[lg.Record], settled: Mapping[str, int],
                      ends: float) -> lg.Ledger | None:
        """Read the overdue records a denial rests on; take out those the API server does not have as
        recorded, and the `settled` ones. The ledger afterwards (read again after a 409), or None when
        every one stays."""
        if self.reader is None:
            lives: list[Mapping[str, Any] | None] = [None] * len(overdue)
        else:
            try:
                lives = list(await self._within(asyncio.gather(*(self.reader(*r.key) for r in overdue)), ends))
            except (Unanswerable, TimeoutError):
                raise
            except Exception:
                return None  # cannot be told: the records stay, and so does the denial
        leaving = {**settled, **{r.name: at for r, live in zip(overdue, lives, strict=True)
                                 if (at := lg.verdict(r, live)) is not None}}
        if not leaving:
            return None
        log.info("a denial rested on records whose object is not stored as recorded; judging again without them",
                 extra={"fields": {"records": sorted(leaving)}})
        try:
            return await self._within(self._put(lg.without(view, leaving), self._left(ends)), ends)
        except Conflict:
            return await self._read_ledger(ends)

    async def _confirm(self, keys: list[Key], subject: findings.ObjectRef, ends: float) -> frozenset[Key]:
        """Read the cached objects a denial rests on; returns those the API server no longer has."""
        assert self.reader is not None
        self.confirmations += 1
        try:
            results = await self._within(asyncio.gather(*(self.reader(*k) for k in keys), return_exceptions=True),
                                         ends)
        except TimeoutError:
            return frozenset()
        stale = frozenset(k for k, r in zip(keys, results, strict=True) if r is None)
        for k, r in zip(keys, results, strict=True):
            if isinstance(r, BaseException):
                log.warning("cannot confirm an object a denial rests on; the denial stands", extra={
                    "fields": {"object": f"{k[0]}/{k[1]}", "error": f"{type(r).__name__}: {r}"[:300]}})
        if stale:
            self.stale_objects += len(stale)
            log.info("a denial rested on objects the API server does not have; judging again without them",
                     extra={"fields": {"candidate": subject.name, "staleInCache": sorted(f"{k[0]}/{k[1]}"
                                                                                         for k in stale)}})
        return stale

    async def assess(self, pool: Mapping[str, Any]) -> ev.Report:
        """What a NodePool change does to the overlays, recorded ones included (a NodePool applied
        right after an overlay must see it); never recorded itself: NodePools are not denied."""
        snap = self._snapshot
        if snap.prepared is None or self._catalog is None:
            raise NotReady("the cluster state has not been synced yet")
        basis = store.including(snap.basis, lg.holds(self.view))
        prepared = snap.prepared
        if basis is not snap.basis:
            prepared = await asyncio.to_thread(ev.prepare, store.documents(basis), self._catalog, prepared,
                                               crd=prepared.crd)
        return await asyncio.to_thread(admission.assess, prepared, pool)


def _judged_form(obj: Mapping[str, Any] | None) -> str | None:
    """What of `obj` a judgement can depend on, as text: all but the metadata the API server sets between
    /mutate and /validate, and the string annotations /mutate itself adds (patch.PREFIX): /validate sees the
    object with them, and valid string annotations give no finding, so without this no apply would match."""
    if obj is None:
        return None
    meta = obj.get("metadata")
    if isinstance(meta, Mapping):
        kept = {k: v for k, v in meta.items() if k not in SYSTEM_METADATA}
        notes = kept.get("annotations")
        if isinstance(notes, Mapping):
            ours = [k for k, v in notes.items() if isinstance(k, str) and k.startswith(patch.PREFIX)
                    and isinstance(v, str)]
            if ours:
                rest = {k: v for k, v in notes.items() if k not in ours}
                if rest:
                    kept["annotations"] = rest
                else:
                    del kept["annotations"]
        obj = {**obj, "metadata": kept}
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
