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
    return Result(status, prices, capacity, memory, pages)


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
        upd.price[key] = PriceUpdate(price, o.weight)


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
