"""Pure bookkeeping of the cluster-state cache: watch events, and which objects a request has to
be judged against (the cache's plus the admissions in flight). No I/O and no clock, so every rule
here is tested without a cluster or an event loop."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from typing import Any

from simulation import evaluate as ev
from simulation.semantics import model

Key = tuple[str, str]  # (kind, name)
KINDS = (model.NODEOVERLAY, model.NODEPOOL)


@dataclasses.dataclass(frozen=True)
class Stored:
    """An object with the part of it the simulation reads, serialised for cheap comparison:
    Karpenter's status writes and metadata churn must not trigger a rebuild of the snapshot."""

    obj: Mapping[str, Any]
    semantic: str


Store = Mapping[Key, Stored]


def semantic(obj: Mapping[str, Any]) -> str:
    # Only metadata.name matters to the core; status is Karpenter's output, not input.
    view = {k: v for k, v in obj.items() if k not in ("metadata", "status")}
    view["metadata"] = {"name": model.name_of(obj)}
    return json.dumps(view, sort_keys=True, separators=(",", ":"), default=str)


def stored(obj: Mapping[str, Any]) -> Stored:
    return Stored(obj, semantic(obj))


def documents(objects: Store) -> list[ev.Document]:
    """The stored objects as the core's existing documents, in a stable order."""
    return [ev.Document(s.obj, i, candidate=False) for i, (_, s) in enumerate(sorted(objects.items()))]


def key_of(obj: Any, kind: str | None = None) -> Key | None:
    found = model.kind_of(obj) or kind
    name = model.name_of(obj)
    if found not in KINDS or name is None:
        return None
    return (found, name)


def with_kind(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    """Items of a list response may lack apiVersion/kind (built-in lists do); the core keys on them."""
    if model.kind_of(obj) == kind:
        return obj
    api = model.OVERLAY_API if kind == model.NODEOVERLAY else model.NODEPOOL_API
    return {**obj, "apiVersion": obj.get("apiVersion", api), "kind": kind}


def build(objects: Iterable[Mapping[str, Any]]) -> dict[Key, Stored]:
    out: dict[Key, Stored] = {}
    for obj in objects:
        key = key_of(obj)
        if key is not None:
            out.setdefault(key, stored(obj))
    return out


def replace_kind(store: Store, kind: str, items: Iterable[Mapping[str, Any]]) -> tuple[Store, bool]:
    """A fresh list of one kind replaces everything cached of that kind. Returns the new store and
    whether anything the simulation reads changed."""
    fresh = build(with_kind(i, kind) for i in items if isinstance(i, Mapping))
    out = {k: v for k, v in store.items() if k[0] != kind}
    out.update(fresh)
    before = {k: v.semantic for k, v in store.items() if k[0] == kind}
    return out, before != {k: v.semantic for k, v in fresh.items()}


@dataclasses.dataclass(frozen=True)
class Transition:
    """What one watch event does: the new store, whether the simulation input changed, the
    resource version to resume from, and whether the watch must be restarted from a new list."""

    store: Store
    changed: bool
    resource_version: str | None
    relist: bool = False
    error: str | None = None


def _resource_version(obj: Any) -> str | None:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    rv = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    return rv if isinstance(rv, str) and rv else None


def handle(store: Store, kind: str, event: Mapping[str, Any]) -> Transition:
    """Apply one event as the kubernetes client's Watch yields it ({type, object, raw_object})."""
    etype = event.get("type")
    obj = event.get("raw_object", event.get("object"))
    if etype == "ERROR":
        code = obj.get("code") if isinstance(obj, Mapping) else None
        message = str(obj.get("message", "")) if isinstance(obj, Mapping) else "watch error"
        # 410 Gone: the resource version fell out of etcd's window; only a new list recovers.
        return Transition(store, False, None, relist=True, error=f"{code}: {message}")
    if not isinstance(obj, Mapping):
        return Transition(store, False, None, error=f"event {etype!r} without an object")
    rv = _resource_version(obj)
    if etype == "BOOKMARK":
        return Transition(store, False, rv)
    obj = with_kind(obj, kind)
    key = key_of(obj)
    if key is None or etype not in ("ADDED", "MODIFIED", "DELETED"):
        return Transition(store, False, rv)
    out = dict(store)
    previous = out.pop(key, None)
    if etype != "DELETED":
        out[key] = stored(obj)
        changed = previous is None or previous.semantic != out[key].semantic
    else:
        changed = previous is not None
    return Transition(out, changed, rv)


# Objects admitted and not (known to be) stored yet: the ledger's records (webhook/ledger.py).
Holds = Mapping[Key, Stored]
MAX_PENDING = 64


def uid_of(obj: Any) -> str | None:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    uid = meta.get("uid") if isinstance(meta, Mapping) else None
    return uid if isinstance(uid, str) and uid else None


def including(basis: Store, held: Holds) -> Store:
    """The stored objects with the held ones in place: what a NodePool change is judged against,
    since an overlay admitted a moment ago is as real to it as a stored one. `basis` itself when no
    hold adds anything."""
    extra = {k: h for k, h in sorted(held.items()) if k not in basis or basis[k].semantic != h.semantic}
    return {**basis, **extra} if extra else basis


@dataclasses.dataclass(frozen=True)
class Plan:
    """How to judge one candidate against a snapshot.

    `extras`: held overlays the snapshot's Prepared does not contain yet; they join the
    evaluation as fellow candidates and only findings involving the real candidate are kept.
    `rebase`: the snapshot holds a different previous version of the candidate than the
    request says (a stale cache, an UPDATE of an object only recorded so far, a CREATE over a name the
    cache still has), so a Prepared with `previous` in its place must be built first.
    """

    extras: tuple[Mapping[str, Any], ...]
    rebase: bool
    previous: Stored | None


def plan(basis: Store, held: Holds, key: Key, operation: str, old: Mapping[str, Any] | None) -> Plan:
    extras = tuple(h.obj for k, h in sorted(held.items())
                   if k != key and k[0] == model.NODEOVERLAY
                   and (k not in basis or basis[k].semantic != h.semantic)) if held else ()
    current = basis.get(key)
    if operation == "UPDATE" and old is not None:
        previous: Stored | None = stored(old)
    elif operation == "CREATE":
        previous = None
    else:
        previous = current
    same = (current is None and previous is None) or (
        current is not None and previous is not None and current.semantic == previous.semantic)
    return Plan(extras, not same, previous)


def rebased(basis: Store, key: Key, previous: Stored | None) -> Store:
    out = dict(basis)
    out.pop(key, None)
    if previous is not None:
        out[key] = previous
    return out


def counts(store: Store) -> dict[str, int]:
    out = dict.fromkeys(KINDS, 0)
    for kind, _ in store:
        out[kind] = out.get(kind, 0) + 1
    return out
