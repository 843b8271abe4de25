"""A plain reference implementation of Karpenter's NodeOverlay loop, for property tests.

Written from kubernetes-sigs/karpenter, not from the engine, as the slow obvious loop: statement by statement
pkg/controllers/nodeoverlay/controller.go (OrderByWeight, RuntimeValidate, validate-then-store per overlay) and
store.go (a dict-based store with lowestWeight bookkeeping); pkg/scheduling/requirement(s).go for matching
(Compatible, Intersects, HasIntersection, integer bounds); pkg/cloudprovider/types.go's AdjustedPrice (clamped at
0) and computeAllocatable for the memory hugepages leave; the NodeOverlay CRD's schema and CEL rules with
pkg/apis/v1alpha1/nodeoverlay_validation.go for what is Invalid. It shares nothing with the engine but the plain
data types (catalog entries, the parsed NodeOverlay and NodePool fields) and the quantity parser, so a mistake
the engine makes in a rule cannot hide behind a shared helper.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any

from simulation.semantics import catalog as cat
from simulation.semantics import model, quantity

HUGEPAGES = "hugepages-"
NODEPOOL_KEY = "karpenter.sh/nodepool"
ZONE_KEY = "topology.kubernetes.io/zone"
CAPACITY_TYPE_KEY = "karpenter.sh/capacity-type"
# pkg/apis/v1/labels.go
WELL_KNOWN = frozenset({NODEPOOL_KEY, ZONE_KEY, "topology.kubernetes.io/region", "node.kubernetes.io/instance-type",
                        "kubernetes.io/arch", "kubernetes.io/os", CAPACITY_TYPE_KEY,
                        "node.kubernetes.io/windows-build"})
NORMALIZED = {"failure-domain.beta.kubernetes.io/zone": ZONE_KEY, "beta.kubernetes.io/arch": "kubernetes.io/arch",
              "beta.kubernetes.io/os": "kubernetes.io/os",
              "beta.kubernetes.io/instance-type": "node.kubernetes.io/instance-type",
              "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region"}
WELL_KNOWN_VALUES = {CAPACITY_TYPE_KEY: {"on-demand", "spot", "reserved"}}
WELL_KNOWN_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage", "pods"})
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte")
INT_MAX = 2**63 - 1


# --- requirements (pkg/scheduling) ------------------------------------------------------------------------------

def atoi(text: str) -> int | None:
    """strconv.Atoi on a 64-bit platform."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    n = int(text)
    return n if -INT_MAX - 1 <= n <= INT_MAX else None


@dataclasses.dataclass
class Req:
    """scheduling.Requirement: a value set or its complement, with inclusive integer bounds."""

    key: str
    complement: bool
    values: set[str]
    gte: int | None = None
    lte: int | None = None

    def operator(self) -> str:
        if self.complement:
            return "NotIn" if self.values else "Exists"
        return "In" if self.values else "DoesNotExist"

    def has_intersection(self, other: Req) -> bool:
        gte, lte = _bound(max, self.gte, other.gte), _bound(min, self.lte, other.lte)
        if gte is not None and lte is not None and gte > lte:
            return False
        if self.complement and other.complement:
            return True
        if self.complement:
            return any(v not in self.values and within(v, gte, lte) for v in other.values)
        if other.complement:
            return any(v not in other.values and within(v, gte, lte) for v in self.values)
        return any(v in other.values and within(v, gte, lte) for v in self.values)

    def intersection(self, other: Req) -> Req:
        gte, lte = _bound(max, self.gte, other.gte), _bound(min, self.lte, other.lte)
        if gte is not None and lte is not None and gte > lte:
            return Req(self.key, False, set())
        if self.complement and other.complement:
            values = self.values | other.values
        elif self.complement:
            values = other.values - self.values
        elif other.complement:
            values = self.values - other.values
        else:
            values = self.values & other.values
        values = {v for v in values if within(v, gte, lte)}
        complement = self.complement and other.complement
        return Req(self.key, complement, values, gte if complement else None, lte if complement else None)


def _bound(pick: Any, a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else pick(a, b)


def within(value: str, gte: int | None, lte: int | None) -> bool:
    if gte is None and lte is None:
        return True
    n = atoi(value)
    return n is not None and (gte is None or n >= gte) and (lte is None or n <= lte)


def new_req(key: str, operator: str, values: Sequence[str] = ()) -> Req:
    """NewRequirement."""
    key = NORMALIZED.get(key, key)
    if operator == "In":
        return Req(key, False, set(values))
    if operator == "DoesNotExist":
        return Req(key, False, set())
    if operator == "NotIn":
        return Req(key, True, set(values))
    n = (atoi(values[0]) if values else None) or 0  # "prevalidated": a parse error reads as 0
    if operator == "Gt":
        return Req(key, False, set()) if n == INT_MAX else Req(key, True, set(), gte=n + 1)
    if operator == "Lt":
        return Req(key, True, set(), lte=n - 1)
    if operator == "Gte":
        return Req(key, True, set(), gte=n)
    if operator == "Lte":
        return Req(key, True, set(), lte=n)
    return Req(key, True, set())


Reqs = dict[str, Req]


def add(into: Reqs, items: Iterable[Req]) -> Reqs:
    """Requirements.Add: requirements on one key intersect."""
    for r in items:
        into[r.key] = r if r.key not in into else r.intersection(into[r.key])
    return into


def labels_reqs(labels: Mapping[str, str]) -> Reqs:
    return add({}, (new_req(k, "In", [v]) for k, v in labels.items()))


def intersects(existing: Reqs, incoming: Reqs) -> bool:
    for key in existing.keys() & incoming.keys():
        a, b = existing[key], incoming[key]
        if not a.has_intersection(b) and not (b.operator() in ("NotIn", "DoesNotExist")
                                              and a.operator() in ("NotIn", "DoesNotExist")):
            return False
    return True


def compatible(existing: Reqs, incoming: Reqs, allow_undefined: frozenset[str] = frozenset()) -> bool:
    for key, r in incoming.items():
        if key not in allow_undefined and key not in existing and r.operator() not in ("NotIn", "DoesNotExist"):
            return False
    return intersects(existing, incoming)


def overlay_reqs(o: model.Overlay) -> Reqs:
    return add({}, (new_req(r.key, r.operator, r.values) for r in o.requirements))


def type_requirements(pool: model.NodePool, it: cat.InstanceType) -> Reqs:
    """getOverlaidOfferings' instance-type requirements: the NodePool's name and template labels, then the
    type's own (its labels, and the zones and capacity types of its offerings, as the provider builds them)."""
    r = add({}, [new_req(NODEPOOL_KEY, "In", [pool.name])])
    add(r, labels_reqs(pool.labels).values())
    add(r, labels_reqs(it.labels).values())
    add(r, [new_req(ZONE_KEY, "In", sorted({o.zone for o in it.offerings})),
            new_req(CAPACITY_TYPE_KEY, "In", sorted({o.capacity_type for o in it.offerings}))])
    return r


def overlaid_offerings(pool: model.NodePool, it: cat.InstanceType, reqs: Reqs) -> list[cat.Offering]:
    if not compatible(type_requirements(pool, it), reqs):
        return []
    return [o for o in it.offerings
            if compatible(reqs, labels_reqs({ZONE_KEY: o.zone, CAPACITY_TYPE_KEY: o.capacity_type}), WELL_KNOWN)]


def launches(pool: model.NodePool, it: cat.InstanceType, o: cat.Offering) -> bool:
    """Whether the NodePool can launch the offering: its template requirements and labels (NodeClaimTemplate)
    against the type's and offering's labels, where a key the type does not define passes."""
    want = add({}, (new_req(r.key, r.operator, r.values) for r in pool.requirements))
    add(want, (new_req(k, "In", [v]) for k, v in pool.labels.items()))
    want.pop(NODEPOOL_KEY, None)
    have = labels_reqs({**it.labels, ZONE_KEY: o.zone, CAPACITY_TYPE_KEY: o.capacity_type})
    return intersects(have, want)


# --- price (pkg/cloudprovider/types.go AdjustedPrice) -----------------------------------------------------------

def unclamped(base: float | None, change: str) -> float | None:
    """The price before AdjustedPrice's clamp at 0; an adjustment of an unknown base stays unknown."""
    if not change.startswith(("+", "-")):
        return float(change)
    if base is None:
        return None
    if change.endswith("%"):
        return base * (1 + float(change[:-1]) / 100)
    return base + float(change)


def adjusted(base: float | None, change: str) -> float | None:
    raw = unclamped(base, change)
    return raw if raw is None or raw >= 0 else 0.0


# --- validity (the CRD's schema and CEL rules, then RuntimeValidate) --------------------------------------------

_KEY = re.compile(r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?([A-Za-z0-9][-A-Za-z0-9_.]*)?"
                  r"[A-Za-z0-9]")
_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_PRICE = re.compile(r"\d+(\.\d+)?")
_ADJUSTMENT = re.compile(r"([+-](\d*\.?\d+))|(\+\d*\.?\d+%)|(-\d{1,2}(\.\d+)?%)|(-100%)")
_QUANTITY = re.compile(r"[+-]?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?(([0-9]+(\.[0-9]*)?)"
                       r"|(\.[0-9]+))))?")


def valid(doc: Mapping[str, Any]) -> bool:
    """Whether Karpenter takes the NodeOverlay into its loop at all (the API server admits it and
    RuntimeValidate passes); the engine must call every other one Invalid."""
    spec = doc.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("requirements"), list):
        return False
    weight = spec.get("weight")
    if weight is not None and (not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= 10000):
        return False
    price, adjustment = spec.get("price"), spec.get("priceAdjustment")
    if price is not None and adjustment is not None:
        return False
    if price is not None and not (isinstance(price, str) and _PRICE.fullmatch(price)):
        return False
    if adjustment is not None and not (isinstance(adjustment, str) and _ADJUSTMENT.fullmatch(adjustment)):
        return False
    capacity = spec.get("capacity", {})
    if not isinstance(capacity, dict) or any(r in WELL_KNOWN_RESOURCES for r in capacity):
        return False
    if not all(isinstance(q, (int, str)) and _QUANTITY.fullmatch(str(q)) for q in capacity.values()):
        return False
    return len(spec["requirements"]) <= 100 and all(_valid_requirement(r) for r in spec["requirements"])


def _valid_requirement(r: Any) -> bool:
    if not isinstance(r, dict):
        return False
    key, operator, values = r.get("key"), r.get("operator"), r.get("values", [])
    if not (isinstance(key, str) and isinstance(operator, str) and isinstance(values, list)
            and all(isinstance(v, str) for v in values)):
        return False
    if operator not in OPERATORS or not (len(key) <= 316 and _KEY.fullmatch(key)) or key == "kubernetes.io/hostname":
        return False
    if any(len(v) > 63 or not _VALUE.fullmatch(v) for v in values):
        return False
    key = NORMALIZED.get(key, key)
    domain = key.split("/", 1)[0] if "/" in key else ""
    if key not in WELL_KNOWN and (domain == "karpenter.sh" or domain.endswith(".karpenter.sh")):
        return False
    # IsQualifiedName: a name of at most 63 characters under an optional DNS-subdomain prefix
    if len(key.rsplit("/", 1)[-1]) > 63 or len(domain) > 253:
        return False
    if operator in ("In", "NotIn") and not values:
        return False
    if operator in ("Gt", "Lt", "Gte", "Lte") and (len(values) != 1 or (n := atoi(values[0])) is None or n < 0):
        return False
    known = WELL_KNOWN_VALUES.get(key)
    return not (operator == "In" and known is not None and not known & set(values))


# --- the loop (controller.go, store.go) ------------------------------------------------------------------------

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


@dataclasses.dataclass(frozen=True)
class Judged:
    """A run from raw documents: the overlays Karpenter takes into its loop, the NodePools, and the outcome,
    whose statuses include Invalid."""

    overlays: list[model.Overlay]
    pools: list[model.NodePool]
    result: Result


def judge(overlay_docs: Sequence[Mapping[str, Any]], pool_docs: Sequence[Mapping[str, Any]],
          catalog: cat.Catalog) -> Judged:
    """Reconcile: RuntimeValidate (and the API server before it) leaves an overlay out as Invalid; the rest
    go through the loop. Without NodePools the guard judges against an implicit `default` one."""
    overlays = [model.overlay(d) for d in overlay_docs if valid(d)]
    pools = [model.nodepool(d) for d in pool_docs] or [model.IMPLICIT_NODEPOOL]
    result = run(overlays, pools, catalog)
    result.status.update({model.overlay(d).name: "Invalid" for d in overlay_docs if not valid(d)})
    return Judged(overlays, pools, result)


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
    # The one of them every view names (`witness`).
    witness: tuple[str, ...] | None = None


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
    return [dataclasses.replace(x, witness=witness(x.witnesses, pools, catalog)) for x in out]


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
    """The offerings where the overlay's value in effect, worked out before AdjustedPrice's clamp, is below 0."""
    change = o.price_update
    prices: dict[tuple[str, ...], float | None] = {(it.name, of.zone, of.capacity_type): of.price
                                                   for it in catalog.types for of in it.offerings}
    return {c for c in held if change is not None and (raw := unclamped(prices[c[1:]], change)) is not None
            and raw < 0}


def _overlaid(o: model.Overlay, pools: Sequence[model.NodePool],
              catalog: cat.Catalog) -> Iterator[tuple[model.NodePool, cat.InstanceType, list[cat.Offering]]]:
    """Every (pool, type) the overlay applies to, with its matched offerings."""
    r = overlay_reqs(o)
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
                    prices[(pool.name, it.name, of.zone, of.capacity_type)] = adjusted(of.price, pu.update)
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


def witness(cells: frozenset[tuple[str, ...]], pools: Sequence[model.NodePool],
            catalog: cat.Catalog) -> tuple[str, ...] | None:
    """The cell a finding about `cells` names (SPEC: one witness, on a NodePool that can launch it when one does):
    the first, by NodePool name, then the catalog's order of types and offerings, of those its NodePool launches
    (of a type, some offering of it), else the first of all."""
    by_name = {p.name: p for p in pools}
    types = {it.name: (i, it) for i, it in enumerate(catalog.types)}

    def place(c: tuple[str, ...]) -> tuple[Any, ...]:
        i, it = types[c[1]]
        slot = [(o.zone, o.capacity_type) for o in it.offerings].index((c[2], c[3])) if len(c) == 4 else 0
        return (c[0], i, slot)

    def launched(c: tuple[str, ...]) -> bool:
        it = types[c[1]][1]
        return any(launches(by_name[c[0]], it, o) for o in it.offerings if len(c) == 2 or (o.zone, o.capacity_type)
                   == (c[2], c[3]))

    ordered = sorted(cells, key=place)
    return next((c for c in ordered if launched(c)), ordered[0] if ordered else None)
