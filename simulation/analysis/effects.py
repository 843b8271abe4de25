"""What the simulation does to instance types: effective prices, capacities and templates."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import Any

from simulation import findings
from simulation.analysis import hugepages
from simulation.analysis import report as rp
from simulation.semantics import allocatable as alloc
from simulation.semantics import cells, cellset, merge, quantity
from simulation.semantics import requirements as reqs


def adjusted(base: float | None, change: str) -> float | None:
    """Karpenter's AdjustedPrice: absolute, additive or percentage, clamped at 0 (`clamps_below`). A percentage
    or additive change of an unknown base price stays unknown."""
    if not change.startswith(("+", "-")):
        return float(change)
    if base is None:
        return None
    bound = clamps_below(change)
    if bound is not None and base < bound:
        return 0.0
    return base * (1 + float(change[:-1]) / 100) if change.endswith("%") else base + float(change)


def clamps_below(change: str) -> float | None:
    """AdjustedPrice's clamp, the one statement of it: a change takes a base price below 0, and Karpenter clamps
    it to 0, when the base is below the bound returned. None: no base is (an absolute price; a percentage, which
    the CRD keeps at -100% or above; an increase)."""
    if not change.startswith("-") or change.endswith("%"):
        return None
    try:
        return float(change[1:])
    except ValueError:
        return None


def unadjusted(price: float, change: str) -> float | None:
    """The base price that `adjusted` turned into `price` under `change`, where exactly one base can have: None
    for an absolute price (every base gives it), a percentage of -100% or below and an additive change whose
    result was clamped at 0 (many bases give 0), or a base that would be negative (no price gives it)."""
    if not change.startswith(("+", "-")):
        return None
    if change.endswith("%"):
        factor = 1 + float(change[:-1]) / 100
        return price / factor if factor > 0 else None
    if price == 0 and float(change) < 0:
        return None
    base = price - float(change)
    return base if base >= 0 else None


@dataclasses.dataclass(frozen=True)
class CellEffect:
    """What the overlays make of one NodePool and instance type: capacity, prices, templates."""

    pool: str
    instance_type: str
    # The catalog's resources (net of the kubelet and system overhead) with the overlays' applied.
    capacity: Mapping[str, str]
    capacity_overlays: Mapping[str, str]
    offerings: tuple[Mapping[str, Any], ...]
    templates: Mapping[str, str]
    # What Karpenter schedules against: the capacity with hugepages taken off the memory.
    allocatable: Mapping[str, str]
    # Whether the NodePool can launch some offering of the type: Karpenter's overlay store holds the
    # cell either way (SPEC §3 "Cells"), so it is marked, never dropped.
    launchable: bool = True

    @property
    def memory(self) -> alloc.Memory | None:
        """The hugepages step on this cell's memory; None when it holds no hugepages."""
        return alloc.memory(self.capacity)

    def to_json(self) -> dict[str, Any]:
        return {"launchable": self.launchable, "capacity": dict(self.capacity),
                "allocatable": dict(self.allocatable),
                "capacityOverlays": dict(self.capacity_overlays),
                "offerings": [dict(o) for o in self.offerings],
                "resourceSliceTemplates": dict(self.templates)}


def effects(report: rp.Report, pools: Collection[str] = (), types: Collection[str] = ()) -> list[CellEffect]:
    """Per (NodePool, instance type): the effect of the applied overlays. Without filters only
    the cells some overlay touches are listed."""
    grid = report.grid
    if pools or types:
        return at(report, grid.type_cells(_filter_cells(grid, pools, types)))
    winners = _winners(report, None)
    return [_cell(report, bit, winners) for bit in grid.type_cells(grid.from_bits(winners)).bits()]


def at(report: rp.Report, wanted: cellset.Cells) -> list[CellEffect]:
    """The effects on these (NodePool, instance type) cells (`Grid.type_cells` form), touched or not."""
    grid = report.grid
    # A type's first slot times the mask of one type's slots is all of its slots: the bits are `slots` apart.
    span = wanted.map_blocks(lambda first: first * ((1 << grid.slots) - 1))
    winners = _winners(report, span)
    return [_cell(report, bit, winners) for bit in wanted.bits()]


def _winners(report: rp.Report, span: cellset.Cells | None) -> dict[int, dict[merge.Field, str]]:
    """bit -> field -> the overlay whose value is in effect there, within `span` (None: everywhere)."""
    winners: dict[int, dict[merge.Field, str]] = {}
    for claim in report.outcome.claims:
        claimed = claim.cells if span is None else claim.cells & span
        for bit in claimed.bits():
            winners.setdefault(bit, {})[claim.field] = claim.overlay
    return winners


def price_winners(report: rp.Report) -> dict[tuple[int, int], dict[int, str]]:
    """(instance type index, offering slot) -> NodePool index -> the overlay whose price is in effect there. An
    offering no price overlay touches is absent: its price is the base in every NodePool."""
    grid = report.grid
    out: dict[tuple[int, int], dict[int, str]] = {}
    for claim in report.outcome.claims:
        if claim.field == merge.PRICE:
            for bit in claim.cells.bits():
                pool, t, slot = grid.locate(bit)
                out.setdefault((t, slot), {})[pool] = claim.overlay
    return out


def price_of(report: rp.Report, base: float | None, winner: str | None) -> float | None:
    """An offering's price with the price change of `winner` (None: no overlay's) in effect."""
    change = report.entries[winner].overlay.price_update if winner is not None else None
    return adjusted(base, change) if change is not None else base


def _filter_cells(grid: cells.Grid, pools: Collection[str], types: Collection[str]) -> cellset.Cells:
    pool_req = reqs.Requirement.new(reqs.NODEPOOL, reqs.IN, pools) if pools else None
    type_req = reqs.Requirement.new(reqs.INSTANCE_TYPE, reqs.IN, types) if types else None
    chosen = {k: r for k, r in ((reqs.NODEPOOL, pool_req), (reqs.INSTANCE_TYPE, type_req)) if r is not None}
    return grid.match(chosen) if chosen else grid.all_cells()


def _cell(report: rp.Report, first_bit: int, winners: Mapping[int, Mapping[merge.Field, str]]) -> CellEffect:
    grid = report.grid
    pool_index, t, _ = grid.locate(first_bit)
    it = grid.types[t]
    type_winners = winners.get(first_bit, {})
    capacity = dict(it.capacity)
    cap_overlays: dict[str, str] = {}
    templates: dict[str, str] = {}
    for field, name in sorted(type_winners.items()):
        if field.kind is merge.Kind.CAPACITY:
            raw = dict(report.entries[name].overlay.capacity)[field.name]
            # As Karpenter holds it: the overlay's parsed quantity, which prints as Go's String() does (its echo
            # of input that looks canonical, "1.500" or "+3", included).
            capacity[field.name] = quantity.go_string(raw)
            cap_overlays[field.name] = name
        elif field.kind is merge.Kind.TEMPLATES:
            templates[field.name] = name
    offerings = []
    for slot, o in enumerate(it.offerings):
        winner = winners.get(first_bit + slot, {}).get(merge.PRICE)
        offerings.append({"zone": o.zone, "capacityType": o.capacity_type, "basePrice": o.price,
                          "price": price_of(report, o.price, winner), "priceOverlay": winner, "estimated": o.estimated,
                          "available": o.available, "launchable": grid.launches(first_bit + slot)})
    return CellEffect(grid.pools[pool_index].name, it.name, dict(sorted(capacity.items())),
                      cap_overlays, tuple(offerings), templates, alloc.allocatable(capacity),
                      any(o["launchable"] for o in offerings))


@dataclasses.dataclass(frozen=True)
class OverlayEffect:
    """One overlay's effect as a whole: its status as Karpenter will see it, how many (NodePool,
    instance type) cells and offerings it matches, an example cell, and which of its fields are
    in effect somewhere (the rest are shadowed everywhere). Invalid: it matches nothing."""

    status: merge.State
    type_cells: int = 0
    offerings: int = 0
    example: str | None = None
    in_effect: tuple[str, ...] = ()
    shadowed: tuple[str, ...] = ()
    # Where its hugepages are in effect: the cell left the least allocatable memory, and its figures.
    memory: tuple[findings.Witness, alloc.Memory] | None = None


def overlay_effect(report: rp.Report, name: str) -> OverlayEffect:
    status = report.status_of(name).state
    entry = report.entries.get(name)
    if entry is None:
        return OverlayEffect(status)
    witness = report.grid.witness(entry.cells, with_offering=False)
    example = witness.describe() if witness is not None else None
    in_effect: set[str] = set()
    fields: set[str] = set()
    if status == merge.APPLIED:
        # A Conflict overlay applies nowhere, so none of its fields is said to be either.
        fields = {str(f) for f in entry.fields()}
        in_effect = {str(c.field) for c in report.outcome.claims if c.overlay == name and c.cells}
    memory = None
    if status == merge.APPLIED and hugepages.fields(entry):
        claimed = report.outcome.claimed
        claims = {f: claimed.get((name, f), merge.EMPTY) for f in hugepages.fields(entry)}
        # The report's own entries: an admission's report holds the claims of its candidates only.
        neighbours = [n for n in report.entries.values() if hugepages.fields(n)]
        memory = hugepages.least(report.grid, entry, claims, neighbours, report.outcome.status)
    return OverlayEffect(status, entry.type_cells.bit_count(), entry.cells.bit_count(), example,
                         tuple(sorted(fields & in_effect)), tuple(sorted(fields - in_effect)), memory)
