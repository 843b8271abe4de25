"""The ledger of admissions in flight, as pure data: what a replica writes into a
`coordination.k8s.io/v1` Lease before it answers "allowed", and the rules for when a record leaves.

Every replica judges a candidate against its cache plus every record, and adds its own record
with compare-and-swap on the Lease's resourceVersion; a 409 means another admission landed in
between, so it reads again and judges again. Two conflicting admissions are thereby ordered by
etcd: the later one saw the earlier one's record and is denied, whichever replicas judged them.

A record leaves only by compare-and-swap, when a replica's watch has delivered its object (the
same uid and spec, or its deletion) or, past its deadline, the API server says the object is not
that record's. Another replica's watch may not have delivered it yet, so the ledger keeps the
highest resourceVersion at which a record left (`horizon`); a replica judges only from a snapshot
that has caught up with it (webhook/state.py). No I/O and no clock: callers pass `now` (wall-clock
seconds: deadlines are compared across replicas).

The Lease is input: anyone allowed to write it (docs/webhook.md#who-can-write-the-ledger) may have put
anything there. `decode` keeps what reads and notes what does not; `check` holds the rest against
bounds the guard knows and returns the ledger repaired, with what it repaired, for the caller to
write back by compare-and-swap.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from simulation.semantics import model
from webhook import store

NAME = "overlay-guard-admissions"
ANNOTATION = "overlay-guard.io/admissions"
# The API server refuses more than 256 KiB of annotations on one object; stay well under.
MAX_BYTES = 200_000
MAX_RECORDS = store.MAX_PENDING


@dataclasses.dataclass(frozen=True)
class Record:
    """One admission in flight: the object as the simulation reads it, its uid (set by the API
    server before validating webhooks run; empty in a review that lacks it), a digest of that
    reading, and the wall-clock time by which the rest of the admission chain has answered."""

    name: str
    uid: str
    digest: str
    deadline: float
    obj: Mapping[str, Any]

    @property
    def key(self) -> store.Key:
        return (model.NODEOVERLAY, self.name)


@dataclasses.dataclass(frozen=True)
class Ledger:
    records: tuple[Record, ...] = ()
    # The highest NodeOverlay resourceVersion a record left at.
    horizon: int = 0
    # The Lease's resourceVersion; None while the Lease does not exist.
    version: str | None = None
    # What did not read (PROBLEMS' keys), for `check` to report.
    unread: tuple[str, ...] = ()

    def named(self, name: str) -> Record | None:
        return next((r for r in self.records if r.name == name), None)


def digest(semantic: str) -> str:
    return hashlib.sha256(semantic.encode()).hexdigest()[:32]


def record(obj: Mapping[str, Any], deadline: float) -> Record:
    view = store.stored(obj)
    return Record(model.name_of(obj) or "", store.uid_of(obj) or "", digest(view.semantic), round(deadline, 3),
                  json.loads(view.semantic))


def holds(ledger: Ledger) -> store.Holds:
    """The records as the objects they would store: what a candidate is judged against besides the cache."""
    return {r.key: store.stored(r.obj) for r in ledger.records}


def resource_version(obj: Mapping[str, Any] | None) -> int:
    """An object's resourceVersion as a number (0 when it has none that reads as one): etcd's revision,
    which the API server itself compares this way within one resource."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    value = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    return int(value) if isinstance(value, str) and value.isdigit() else 0


# -- the Lease ------------------------------------------------------------------------------------
def decode(lease: Mapping[str, Any] | None) -> Ledger:
    """The ledger a Lease holds (None: the Lease does not exist yet). Records that do not read are
    skipped: anyone allowed to write the Lease could have put them there."""
    if lease is None:
        return Ledger()
    meta = lease.get("metadata") or {}
    version = meta.get("resourceVersion")
    text = (meta.get("annotations") or {}).get(ANNOTATION)
    unread: list[str] = []
    try:
        body = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {}
        unread.append("unreadable")
    elif isinstance(text, str) and len(text) > MAX_BYTES:
        unread.append("size")
    records = []
    rows = body.get("records") or ()
    for row in rows if isinstance(rows, list) else ():
        try:
            records.append(Record(str(row["n"]), str(row["u"]), str(row["d"]), float(row["t"]), dict(row["o"])))
        except (KeyError, TypeError, ValueError):
            unread.append("unreadable")
    horizon = body.get("horizon", 0)
    if not isinstance(horizon, int) or isinstance(horizon, bool) or horizon < 0:
        horizon = 0
        unread.append("horizon")
    return Ledger(tuple(records), horizon, version if isinstance(version, str) else None, tuple(unread))


def text(ledger: Ledger) -> str:
    rows = [{"n": r.name, "u": r.uid, "d": r.digest, "t": r.deadline, "o": r.obj} for r in ledger.records]
    return json.dumps({"horizon": ledger.horizon, "records": rows}, separators=(",", ":"), sort_keys=True)


def encode(ledger: Ledger, namespace: str, name: str = NAME) -> dict[str, Any]:
    """The Lease to create (no version) or to replace with compare-and-swap (its version)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "annotations": {ANNOTATION: text(ledger)},
                            "labels": {"app.kubernetes.io/name": "overlay-guard"}}
    if ledger.version is not None:
        meta["resourceVersion"] = ledger.version
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": {}}


# -- what cannot be true ---------------------------------------------------------------------------
# What `check` repairs, as the `problem` label of overlay_guard_ledger_repairs_total.
PROBLEMS = {
    "unreadable": "a record or the annotation does not read",
    "horizon": "the horizon is not a resourceVersion the API server has issued",
    "deadline": "a deadline is not a finite time within the longest admission chain",
    "record": "a record's digest or name does not match its object",
    "count": "more records than the ledger holds",
    "size": "more characters than the ledger holds",
    "missing": "a record this replica wrote or read was gone before its watch delivered the object (taken "
               "out, or another replica's watch ahead of this one's)",
}


@dataclasses.dataclass(frozen=True)
class Bounds:
    """What the guard knows: `now`; `lifetime`, the longest a record may count from now (the longest admission
    chain, plus clock skew); `revision`, a resourceVersion the API server had issued when last asked (None: not
    asked); `known`, the records this replica wrote or read whose objects its watch has not delivered yet and whose
deadlines have not passed."""

    now: float
    lifetime: float
    revision: int | None = None
    known: tuple[Record, ...] = ()
    cap: int = MAX_RECORDS


def consistent(r: Record) -> bool:
    """Whether a record is what `record` writes: its digest that of its object, its name the object's."""
    try:
        view = store.stored(r.obj)
    except (TypeError, ValueError):
        return False
    return model.name_of(r.obj) == r.name and digest(view.semantic) == r.digest


def check(ledger: Ledger, bounds: Bounds) -> tuple[Ledger, tuple[str, ...]]:
    """The ledger with what cannot be true repaired, and the PROBLEMS found (none: `ledger` itself).

    A deadline past the bound is brought down to it, never dropped: the record may be true, and past the
    bound it is read from the API server like any other. A record that does not match its object cannot
    be told from a true one in another shape, so it goes (as a record someone deleted would). Known
    records that are gone come back. Over the count or size, the oldest unknown records go first."""
    problems = list(dict.fromkeys(ledger.unread))
    latest = round(bounds.now + bounds.lifetime, 3)
    records = []
    for r in ledger.records:
        if not consistent(r):
            problems.append("record")
            continue
        if not (math.isfinite(r.deadline) and r.deadline <= latest):
            problems.append("deadline")
            r = dataclasses.replace(r, deadline=latest)
        records.append(r)
    names = {r.name for r in records}
    lost = [r for r in bounds.known if r.name not in names and r.deadline > bounds.now]
    if lost:
        problems.append("missing")
    horizon = ledger.horizon
    if bounds.revision is not None and horizon > bounds.revision:
        problems.append("horizon")
        horizon = bounds.revision
    ours = {r.name for r in bounds.known}
    others = [r for r in (*records, *lost) if r.name not in ours]
    kept = [r for r in (*records, *lost) if r.name in ours]
    if len(kept) + len(others) > bounds.cap:
        problems.append("count")
        others = others[len(others) - max(0, bounds.cap - len(kept)):]
    out = dataclasses.replace(ledger, records=(*kept, *others), horizon=horizon, unread=())
    while len(text(out)) > MAX_BYTES and others:
        problems.append("size")
        others = others[1:]
        out = dataclasses.replace(out, records=(*kept, *others))
    found = tuple(dict.fromkeys(problems))
    return (out if found else ledger), found


def fits(candidate: Record) -> bool:
    """Whether a record alone fits the ledger (a candidate that does not can never be admitted)."""
    return len(text(Ledger((candidate,)))) <= MAX_BYTES


# -- when records leave -----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Sweep:
    """`settled`: records whose object the watch delivered (or whose deletion it delivered), with
    the resourceVersion it did so at; `overdue`: records past their deadline that the watch has
    not settled, to be read from the API server."""

    settled: Mapping[str, int]
    overdue: tuple[Record, ...]


def sweep(ledger: Ledger, basis: store.Store, deleted: Mapping[str, int], now: float) -> Sweep:
    """`deleted`: uids the watch delivered the deletion of, with the event's resourceVersion."""
    settled: dict[str, int] = {}
    overdue = []
    for r in ledger.records:
        cached = basis.get(r.key)
        if cached is not None and digest(cached.semantic) == r.digest and (
                not r.uid or store.uid_of(cached.obj) in (r.uid, None)):
            settled[r.name] = resource_version(cached.obj)
        elif r.uid and r.uid in deleted:
            settled[r.name] = deleted[r.uid]
        elif r.deadline <= now:
            overdue.append(r)
    return Sweep(settled, tuple(overdue))


def verdict(r: Record, live: Mapping[str, Any] | None) -> int | None:
    """What a read past the deadline says of an overdue record: the resourceVersion to leave at (0
    when the API server has no object of this incarnation: never stored, or stored and deleted), or
    None when that cannot be told (a version that does not read as a number) and the watch must settle it.
    Whatever the live object is, the admission chain is over: it is the truth from then on, and every
    replica catches up with it before judging again."""
    if live is None or (r.uid and store.uid_of(live) not in (r.uid, None)):
        return 0
    return resource_version(live) or None


def without(ledger: Ledger, leaving: Mapping[str, int]) -> Ledger:
    if not leaving:
        return ledger
    return dataclasses.replace(ledger, records=tuple(r for r in ledger.records if r.name not in leaving),
                               horizon=max(ledger.horizon, *leaving.values()))


def rival(ledger: Ledger, candidate: Record, leaving: Iterable[str] = ()) -> Record | None:
    """A record of the same name for another incarnation (two creates of one name in flight, or a
    review made up with another uid) that is not leaving: the candidate may not take its place."""
    mine = ledger.named(candidate.name)
    if mine is None or mine.name in set(leaving) or not mine.uid or not candidate.uid or mine.uid == candidate.uid:
        return None
    return mine


def admit(ledger: Ledger, candidate: Record, leaving: Mapping[str, int], cap: int = MAX_RECORDS) -> Ledger | None:
    """The ledger with `candidate` in place of any record of its name and `leaving` gone; None when
    that would pass `cap` records or the Lease's size (too many admissions in flight)."""
    kept = without(ledger, leaving)
    out = dataclasses.replace(kept, records=(*(r for r in kept.records if r.name != candidate.name), candidate))
    if len(out.records) > cap or len(text(out)) > MAX_BYTES:
        return None
    return out
