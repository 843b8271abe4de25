"""A plain reference implementation of Karpenter's NodeOverlay loop, for property tests.

It mirrors pkg/controllers/nodeoverlay/controller.go and store.go statement by statement
(nested loops over NodePools, instance types and offerings, a dict-based store with
lowestWeight bookkeeping), and pkg/cloudprovider/types.go's computeAllocatable for the
memory hugepages leave; it shares nothing with the fast engine but the requirement
algebra, the data types (quantities included) and Karpenter's price arithmetic (whose
figures the fixture corpus checks against upstream's own test values).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from decimal import Decimal

from simulation.analysis import effects
from simulation.semantics import catalog as cat
from simulation.semantics import model, quantity
from simulation.semantics import requirements as reqs

WELL_KNOWN = reqs.WELL_KNOWN_LABELS
HUGEPAGES = "hugepages-"


@dataclasses.dataclass
class PriceUpdate:
    update: str
    lowest_weight: int
    # the overlay whose value is stored (what the store does not keep, for the findings)
    writer: str = ""


@dataclasses.dataclass
class CapacityUpdate:
    update: dict[str, str]
    lowest_resources: dict[str, str] | None
    lowest_weight: int
    # resource -> the overlay whose value is stored (what the store does not keep, for the findings)
    writers: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class TypeUpdate:
    price: dict[tuple[str, str], PriceUpdate]
    capacity: CapacityUpdate | None


def type_requirements(pool: model.NodePool, it: cat.InstanceType) -> dict[str, reqs.Requirement]:
    r = reqs.build([reqs.Requirement.new(reqs.NODEPOOL, reqs.IN, [pool.name])])
    for source in (reqs.from_labels(pool.labels), it.requirements()):
        for req in source.values():
            r[req.key] = req if req.key not in r else req.intersection(r[req.key])
    return r


def offering_requirements(o: cat.Offering) -> dict[str, reqs.Requirement]:
    return reqs.from_labels({reqs.ZONE: o.zone, reqs.CAPACITY_TYPE: o.capacity_type})


def overlaid_offerings(pool: model.NodePool, it: cat.InstanceType,
                       overlay_reqs: dict[str, reqs.Requirement]) -> list[cat.Offering]:
    if not reqs.compatible(type_requirements(pool, it), overlay_reqs):
        return []
    return [o for o in it.offerings
            if reqs.compatible(overlay_reqs, offering_requirements(o), WELL_KNOWN)]


@dataclasses.dataclass
class Result:
    status: dict[str, str]
    prices: dict[tuple[str, str, str, str], float | None]
    capacity: dict[tuple[str, str], dict[str, str]]
    # (pool, type) -> allocatable memory, where the effective capacity holds hugepages
    memory: dict[tuple[str, str], Decimal] = dataclasses.field(default_factory=dict)
    # (overlay, code): hugepages-exhaust-memory / hugepages-most-memory where its hugepages are stored
    hugepages: set[tuple[str, str]] = dataclasses.field(default_factory=set)
    # field -> cell -> the overlay whose value is in effect there (a price per (pool, type, zone, capacity
    # type), a capacity resource per (pool, type)): what the findings read.
    writers: dict[str, dict[tuple[str, ...], str]] = dataclasses.field(default_factory=dict)


def run(overlays: Sequence[model.Overlay], pools: Sequence[model.NodePool],
        catalog: cat.Catalog) -> Result:
    store: dict[str, dict[str, TypeUpdate]] = {}
    status: dict[str, str] = {}
    ordered = sorted(overlays, key=lambda o: (o.weight, o.name), reverse=True)
    for o in ordered:
        if _conflicts(store, o, pools, catalog):
            status[o.name] = "Conflict"
            continue
        status[o.name] = "Applied"
        for pool, it, offerings in _overlaid(o, pools, catalog):
            _store_price(store, pool.name, it.name, o, offerings)
            _store_capacity(store, pool.name, it.name, o)
    return _result(store, status, pools, catalog)


LIMIT = 5


@dataclasses.dataclass(frozen=True)
class Found:
    """A finding as the plain loop derives it: what the engine's must say, and the cells any witness of it
    may name (a (pool, type, zone, capacity type) for the price, a (pool, type) for a capacity resource)."""

    code: str
    obj: str
    field: str
    related: tuple[str, ...]
    # the "and N more" count (same-weight-conflict: further earlier overlays; 0 when none)
    more: int
    # same-weight-conflict: Karpenter's verdict ("Conflict" or "silent") and the overlay it drops
    karpenter: str
    dropped: str
    witnesses: frozenset[tuple[str, ...]]


def findings(overlays: Sequence[model.Overlay], pools: Sequence[model.NodePool], catalog: cat.Catalog,
             result: Result) -> list[Found]:
    """same-weight-conflict, shadowed and price-clamped over the valid `overlays`, from cells enumerated one
    by one and the store's writers: every pair of equal weight that sets one field on a common cell (per later
    overlay and field, its first LIMIT partners in Karpenter's order, the last counting the rest); every applied
    overlay's field whose cells all hold another's value, unless an overlay of its weight before it sets the
    field on one of them; every negative additive priceAdjustment in effect on an offering priced below it."""
    ordered = sorted(overlays, key=lambda o: (o.weight, o.name), reverse=True)
    cells = {o.name: _fields(o, pools, catalog) for o in ordered}
    out: list[Found] = []
    for i, later in enumerate(ordered):
        for field, mine in cells[later.name].items():
            partners = [(e.name, mine & cells[e.name][field]) for e in ordered[:i]
                        if e.weight == later.weight and mine & cells[e.name].get(field, set())]
            for k, (earlier, common) in enumerate(partners[:LIMIT]):
                more = len(partners) - LIMIT if k == LIMIT - 1 else 0
                gone = [n for n in (later.name, earlier) if result.status[n] == "Conflict"]
                out.append(Found("same-weight-conflict", later.name, field, (earlier,), max(more, 0),
                                 "Conflict" if gone else "silent", gone[0] if gone else "", frozenset(common)))
    for i, o in enumerate(ordered):
        if result.status[o.name] != "Applied":
            continue
        for field, mine in cells[o.name].items():
            held = {c for c in mine if result.writers.get(field, {}).get(c) == o.name}
            if held:
                if field == "price" and (clamped := _clamped(o, held, catalog)):
                    out.append(Found("price-clamped", o.name, field, (), 0, "", "", frozenset(clamped)))
                continue
            before = [e for e in ordered[:i] if mine & cells[e.name].get(field, set())]
            if any(e.weight == o.weight for e in before):
                continue
            winners = sorted(e.name for e in before if result.status[e.name] == "Applied")
            out.append(Found("shadowed", o.name, field, tuple(winners[:LIMIT]), 0, "", "", frozenset(mine)))
    return out


def _fields(o: model.Overlay, pools: Sequence[model.NodePool],
            catalog: cat.Catalog) -> dict[str, set[tuple[str, ...]]]:
    """field -> the cells the overlay sets it on (DRA templates left out: this loop does not model them)."""
    out: dict[str, set[tuple[str, ...]]] = {}
    for pool, it, offerings in _overlaid(o, pools, catalog):
        if o.price_update is not None:
            out.setdefault("price", set()).update((pool.name, it.name, of.zone, of.capacity_type) for of in offerings)
        for resource, _ in o.capacity:
            out.setdefault(f"capacity/{resource}", set()).add((pool.name, it.name))
    return out


def _clamped(o: model.Overlay, held: set[tuple[str, ...]], catalog: cat.Catalog) -> set[tuple[str, ...]]:
    """The offerings where the overlay's additive cut takes the price below 0 (Karpenter clamps it)."""
    adj = o.price_adjustment
    if o.price is not None or adj is None or not adj.startswith("-") or adj.endswith("%"):
        return set()
    prices: dict[tuple[str, ...], float | None] = {(it.name, of.zone, of.capacity_type): of.price
                                                   for it in catalog.types for of in it.offerings}
    return {c for c in held if (price := prices[c[1:]]) is not None and price < float(adj[1:])}


def _overlaid(o: model.Overlay, pools: Sequence[model.NodePool],
              catalog: cat.Catalog) -> Iterator[tuple[model.NodePool, cat.InstanceType, list[cat.Offering]]]:
    """Every (pool, type) the overlay applies to, with its matched offerings."""
    r = o.requirement_map()
    for pool in pools:
        for it in catalog.types:
            offerings = overlaid_offerings(pool, it, r)
            if offerings:
                yield pool, it, offerings


def _conflicts(store: dict[str, dict[str, TypeUpdate]], o: model.Overlay, pools: Sequence[model.NodePool],
               catalog: cat.Catalog) -> bool:
    return any(_price_conflict(store, pool.name, it.name, offerings, o)
               or _capacity_conflict(store, pool.name, it.name, o)
               for pool, it, offerings in _overlaid(o, pools, catalog))


def _result(store: dict[str, dict[str, TypeUpdate]], status: dict[str, str], pools: Sequence[model.NodePool],
            catalog: cat.Catalog) -> Result:
    prices: dict[tuple[str, str, str, str], float | None] = {}
    capacity: dict[tuple[str, str], dict[str, str]] = {}
    memory: dict[tuple[str, str], Decimal] = {}
    pages: set[tuple[str, str]] = set()
    for pool in pools:
        for it in catalog.types:
            upd = store.get(pool.name, {}).get(it.name)
            stored = upd.capacity if upd is not None and upd.capacity is not None else CapacityUpdate({}, None, 0)
            figures = _hugepages_step({**it.capacity, **stored.update})
            if figures is not None and it.offerings:
                memory[(pool.name, it.name)] = figures[0]
                for resource, writer in stored.writers.items():
                    if resource.startswith(HUGEPAGES) and (code := _code(*figures)) is not None:
                        pages.add((writer, code))
            if upd is None:
                continue
            for of in it.offerings:
                pu = upd.price.get((of.zone, of.capacity_type))
                if pu is not None:
                    prices[(pool.name, it.name, of.zone, of.capacity_type)] = effects.adjusted(of.price, pu.update)
            if upd.capacity is not None and upd.capacity.update:
                capacity[(pool.name, it.name)] = dict(upd.capacity.update)
    return Result(status, prices, capacity, memory, pages, _writers(store))


def _writers(store: dict[str, dict[str, TypeUpdate]]) -> dict[str, dict[tuple[str, ...], str]]:
    out: dict[str, dict[tuple[str, ...], str]] = {}
    for pool, types in store.items():
        for it, upd in types.items():
            for (zone, capacity_type), pu in upd.price.items():
                out.setdefault("price", {})[(pool, it, zone, capacity_type)] = pu.writer
            for resource, writer in (upd.capacity.writers if upd.capacity is not None else {}).items():
                out.setdefault(f"capacity/{resource}", {})[(pool, it)] = writer
    return out


def _hugepages_step(capacity: dict[str, str]) -> tuple[Decimal, Decimal, Decimal] | None:
    """computeAllocatable's loop, as written there: each hugepages quantity off the memory, negative set to 0.
    (allocatable memory, memory before, hugepages), or None when there is no hugepages resource."""
    before = quantity.parse(capacity.get("memory", "0"))
    memory, total, seen = before, Decimal(0), False
    for name, q in capacity.items():
        if name.startswith(HUGEPAGES):
            seen = True
            memory -= quantity.parse(q)
            total += quantity.parse(q)
            if memory < 0:
                memory = Decimal(0)
    return (memory, before, total) if seen else None


def _code(memory: Decimal, before: Decimal, total: Decimal) -> str | None:
    if total > 0 and memory == 0:
        return "hugepages-exhaust-memory"
    if memory > 0 and 2 * total > before:
        return "hugepages-most-memory"
    return None


def _entry(store: dict[str, dict[str, TypeUpdate]], pool: str, it: str) -> TypeUpdate:
    return store.setdefault(pool, {}).setdefault(it, TypeUpdate({}, CapacityUpdate({}, None, 0)))


def _price_conflict(store: dict[str, dict[str, TypeUpdate]], pool: str, it: str,
                    offerings: list[cat.Offering], o: model.Overlay) -> bool:
    if o.price_update is None:
        return False
    upd = store.get(pool, {}).get(it)
    if upd is None:
        return False
    return any((p := upd.price.get((of.zone, of.capacity_type))) is not None and p.lowest_weight == o.weight
               for of in offerings)


def _capacity_conflict(store: dict[str, dict[str, TypeUpdate]], pool: str, it: str,
                       o: model.Overlay) -> bool:
    if not o.capacity_set:
        return False
    upd = store.get(pool, {}).get(it)
    if upd is None or upd.capacity is None or upd.capacity.lowest_weight != o.weight:
        return False
    lowest = upd.capacity.lowest_resources or {}
    return any(r in lowest for r, _ in o.capacity)


def _store_price(store: dict[str, dict[str, TypeUpdate]], pool: str, it: str, o: model.Overlay,
                 offerings: list[cat.Offering]) -> None:
    price = o.price_update
    if price is None:
        return
    upd = _entry(store, pool, it)
    for of in offerings:
        key = (of.zone, of.capacity_type)
        if key in upd.price:
            upd.price[key].lowest_weight = o.weight
            continue
        upd.price[key] = PriceUpdate(price, o.weight, o.name)


def _store_capacity(store: dict[str, dict[str, TypeUpdate]], pool: str, it: str, o: model.Overlay) -> None:
    if not o.capacity_set:
        return
    upd = _entry(store, pool, it)
    assert upd.capacity is not None
    for resource, q in o.capacity:
        if resource not in upd.capacity.update:
            upd.capacity.update[resource] = q
            upd.capacity.writers[resource] = o.name
    upd.capacity.lowest_resources = dict(o.capacity)
    upd.capacity.lowest_weight = o.weight
