"""What a change does: the reports of the one core on the two sides of a change (base and head), compared.

Nothing here evaluates: both sides come from `evaluate`, and the figures are `effects` of each side, the
numbers `simulate` prints. Only the cells where an effect can differ are read: with the same cell layout on
both sides, those where an overlay's claim (the cells its value is in effect on) differs; otherwise every
cell an overlay touches on either side. A type whose catalog entry changed is read in every NodePool.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from simulation import findings
from simulation.analysis import effects
from simulation.analysis import report as rp
from simulation.semantics import cells, cellset, merge

ADDED, REMOVED, CHANGED, RENAMED, UNCHANGED = "added", "removed", "changed", "renamed", "unchanged"
CAPACITY, ALLOCATABLE = "capacity", "allocatable"


@dataclasses.dataclass(frozen=True)
class OverlayChange:
    """One overlay edited, or whose status Karpenter would change. `before`/`after`: its status on each side,
    None where it does not exist. A renamed overlay (removed and added with the same spec) names its old name."""

    name: str
    change: str
    before: rp.Status | None
    after: rp.Status | None
    renamed_from: str | None = None

    @property
    def stops_applying(self) -> bool:
        """Applied before, Conflict or Invalid after: what a reviewer must see first."""
        return (self.before is not None and self.before.state == merge.APPLIED
                and self.after is not None and self.after.state != merge.APPLIED)

    @property
    def moved(self) -> bool:
        return self.before is not None and self.after is not None and self.before.state != self.after.state


@dataclasses.dataclass(frozen=True)
class PriceChange:
    """One offering's effective price on both sides, and which overlay sets it. A price is None where the
    offering has none (unavailable, or unknown); `present_*` says whether the offering exists on that side."""

    pool: str
    instance_type: str
    zone: str
    capacity_type: str
    before: float | None
    after: float | None
    before_overlay: str | None
    after_overlay: str | None
    present_before: bool = True
    present_after: bool = True
    estimated: bool = False
    # Whether the NodePool launches the offering (on either side): Karpenter's store holds the rest all the same.
    launchable: bool = True

    @property
    def offering(self) -> tuple[str, str, str]:
        """The offering whatever the NodePool: a headline counts it once."""
        return (self.instance_type, self.zone, self.capacity_type)

    @property
    def percent(self) -> float | None:
        if self.before is None or self.after is None or self.before == 0:
            return None
        return (self.after - self.before) / self.before * 100

    @property
    def magnitude(self) -> float:
        """For ordering, largest first: a price that appears or disappears outranks any change."""
        pct = self.percent
        return abs(pct) if pct is not None else float("inf")


@dataclasses.dataclass(frozen=True)
class ResourceChange:
    """One resource of a (NodePool, instance type): its capacity, or the allocatable figure Karpenter
    schedules against where hugepages make it differ from the capacity. None: the resource is absent."""

    pool: str
    instance_type: str
    resource: str
    figure: str
    before: str | None
    after: str | None
    before_overlay: str | None = None
    after_overlay: str | None = None
    launchable: bool = True


@dataclasses.dataclass(frozen=True)
class TemplateChange:
    pool: str
    instance_type: str
    driver: str
    before_overlay: str | None
    after_overlay: str | None
    launchable: bool = True


@dataclasses.dataclass(frozen=True)
class Held:
    """What changes only where no NodePool launches it (Karpenter's store holds those cells all the same):
    counted once, apart from the rows, per kind of row."""

    prices: int = 0
    resources: int = 0
    templates: int = 0

    def __bool__(self) -> bool:
        return bool(self.prices or self.resources or self.templates)


@dataclasses.dataclass(frozen=True)
class Effect:
    """A changed overlay's effect on what NodePools launch: the offerings whose price it sets on the head side
    (with the median change), those it set on the base side and no longer sets, and the capacity and template
    rows it sets or stops setting."""

    offerings: int
    median: float | None
    released: int
    resources: int
    templates: int


@dataclasses.dataclass(frozen=True)
class PoolSummary:
    """Per NodePool: how many offerings change price, the median and the extremes of the change in %."""

    pool: str
    offerings: int
    median: float | None
    lowest: float | None
    highest: float | None
    resources: int = 0


@dataclasses.dataclass(frozen=True)
class Diff:
    overlays: tuple[OverlayChange, ...]
    # Overlays on both sides with the same spec and the same status.
    unchanged: int
    # Largest change first.
    prices: tuple[PriceChange, ...]
    resources: tuple[ResourceChange, ...]
    templates: tuple[TemplateChange, ...]
    pools: tuple[PoolSummary, ...]
    introduced: tuple[findings.Finding, ...]
    resolved: tuple[findings.Finding, ...]
    nodepools_added: tuple[str, ...] = ()
    nodepools_removed: tuple[str, ...] = ()
    nodepools_changed: tuple[str, ...] = ()
    held: Held = Held()

    @property
    def empty(self) -> bool:
        return not (self.overlays or self.prices or self.resources or self.templates or self.introduced
                    or self.resolved or self.nodepools_added or self.nodepools_removed or self.nodepools_changed
                    or self.held)

    def offerings(self) -> int:
        """Offerings whose price changes in some NodePool that launches them, each counted once."""
        return len({p.offering for p in self.prices})

    def effect(self, name: str) -> Effect:
        """The rows `name` sets or stops setting (a changed overlay's effect, as a review reads it)."""
        sets = [p for p in self.prices if p.after_overlay == name]
        pcts = [pct for p in sets if (pct := p.percent) is not None]
        released = {p.offering for p in self.prices if p.before_overlay == name and p.after_overlay != name}
        return Effect(len({p.offering for p in sets}), statistics.median(pcts) if pcts else None, len(released),
                      sum(1 for r in self.resources if name in (r.before_overlay, r.after_overlay)),
                      sum(1 for t in self.templates if name in (t.before_overlay, t.after_overlay)))

    def increases(self, threshold: float) -> list[PriceChange]:
        """Offerings whose effective price rises by more than `threshold` percent."""
        return [p for p in self.prices if (pct := p.percent) is not None and pct > threshold]


def compare(before: rp.Report, after: rp.Report) -> Diff:
    overlays, unchanged = _overlays(before, after)
    old, new = _effects(before, after)
    prices: list[PriceChange] = []
    resources: list[ResourceChange] = []
    templates: list[TemplateChange] = []
    for key in sorted(old.keys() | new.keys()):
        a, b = old.get(key), new.get(key)
        prices += _prices(key, a, b)
        resources += _resources(key, a, b)
        templates += _templates(key, a, b)
    prices.sort(key=lambda p: (-p.magnitude, p.pool, p.instance_type, p.zone, p.capacity_type))
    # Rows only where a NodePool launches the cell; the store's other changes are counted once.
    held = Held(sum(1 for p in prices if not p.launchable), sum(1 for r in resources if not r.launchable),
                sum(1 for t in templates if not t.launchable))
    prices = [p for p in prices if p.launchable]
    resources = [r for r in resources if r.launchable]
    templates = [t for t in templates if t.launchable]
    was = {_identity(f): f for f in before.findings}
    now = {_identity(f): f for f in after.findings}
    pools_before, pools_after = _pools(before), _pools(after)
    return Diff(tuple(overlays), unchanged, tuple(prices), tuple(resources), tuple(templates),
                _summaries(prices, resources),
                tuple(f for k, f in now.items() if k not in was), tuple(f for k, f in was.items() if k not in now),
                tuple(sorted(pools_after.keys() - pools_before.keys())),
                tuple(sorted(pools_before.keys() - pools_after.keys())),
                tuple(sorted(n for n in pools_before.keys() & pools_after.keys() if pools_before[n] != pools_after[n])),
                held)


def _identity(f: findings.Finding) -> tuple[Any, ...]:
    return (*f.identity(), f.severity)


def _pools(report: rp.Report) -> dict[str, tuple[Any, ...]]:
    """The NodePools a side declares (not the implicit one), as what the core reads of them."""
    return {p.name: (p.weight, dict(p.labels), p.requirements) for p in report.grid.pools if not p.implicit}


def _spec(report: rp.Report, name: str) -> Any:
    return report.overlays[name].raw.get("spec")


def _overlays(before: rp.Report, after: rp.Report) -> tuple[list[OverlayChange], int]:
    old, new = set(before.overlays), set(after.overlays)
    out: list[OverlayChange] = []
    unchanged = 0
    for name in sorted(old & new):
        a, b = before.status_of(name), after.status_of(name)
        edited = _spec(before, name) != _spec(after, name)
        if edited or a.state != b.state:
            out.append(OverlayChange(name, CHANGED if edited else UNCHANGED, a, b))
        else:
            unchanged += 1
    removed = sorted(old - new)
    renamed: dict[str, str] = {}
    for name in sorted(new - old):
        spec = _spec(after, name)
        twin = next((r for r in removed if r not in renamed.values() and _spec(before, r) == spec), None)
        if twin is not None:
            renamed[name] = twin
    for name in sorted(new - old):
        out.append(OverlayChange(name, RENAMED if name in renamed else ADDED,
                                 before.status_of(renamed[name]) if name in renamed else None,
                                 after.status_of(name), renamed.get(name)))
    gone = set(renamed.values())
    out += [OverlayChange(n, REMOVED, before.status_of(n), None) for n in removed if n not in gone]
    order = {ADDED: 2, REMOVED: 3, RENAMED: 4, CHANGED: 5, UNCHANGED: 6}
    out.sort(key=lambda c: (0 if c.stops_applying else 1 if c.moved else order[c.change], c.name))
    return out, unchanged


# --- cells ----------------------------------------------------------------------------------------------

Key = tuple[str, str]


def _effects(before: rp.Report, after: rp.Report) -> tuple[dict[Key, effects.CellEffect],
                                                            dict[Key, effects.CellEffect]]:
    """The effects on each side of the (NodePool, instance type) cells where they can differ."""
    changed_types = _changed_types(before.grid, after.grid)
    if _same_layout(before.grid, after.grid):
        wanted = _claims_that_differ(before, after) | _types_everywhere(before.grid, changed_types)
        wanted = before.grid.type_cells(wanted)
        return _keyed(effects.at(before, wanted)), _keyed(effects.at(after, wanted))
    keys = _touched(before) | _touched(after)
    for grid in (before.grid, after.grid):
        keys |= {(p.name, t) for p in grid.pools for t in changed_types}
    return _keyed(effects.at(before, _cells_of(before.grid, keys))), \
        _keyed(effects.at(after, _cells_of(after.grid, keys)))


def _keyed(found: Iterable[effects.CellEffect]) -> dict[Key, effects.CellEffect]:
    return {(c.pool, c.instance_type): c for c in found}


def _same_layout(a: cells.Grid, b: cells.Grid) -> bool:
    """The same flat index names the same (NodePool, instance type, offering) on both sides."""
    return (a.block == b.block and a.slots == b.slots and [p.name for p in a.pools] == [p.name for p in b.pools]
            and (a.types is b.types or [(t.name, [(o.zone, o.capacity_type) for o in t.offerings]) for t in a.types]
                 == [(t.name, [(o.zone, o.capacity_type) for o in t.offerings]) for t in b.types]))


def _changed_types(a: cells.Grid, b: cells.Grid) -> set[str]:
    if a.types is b.types:
        return set()
    old, new = {t.name: t for t in a.types}, {t.name: t for t in b.types}
    return {n for n in old.keys() | new.keys() if old.get(n) != new.get(n)}


def _types_everywhere(grid: cells.Grid, names: set[str]) -> cellset.Cells:
    if not names:
        return cellset.Cells((), grid.block)
    slots = 0
    for t, it in enumerate(grid.types):
        if it.name in names:
            slots |= ((1 << grid.slots) - 1) << (t * grid.slots)
    return grid.everywhere(slots & grid.present)


def _claims_that_differ(before: rp.Report, after: rp.Report) -> cellset.Cells:
    """Cells whose winner or its value may differ: per (overlay, field), the symmetric difference of its claims
    where its spec is the same on both sides, else all of them."""
    old, new = before.outcome.claimed, after.outcome.claimed
    parts: list[cellset.Cells] = []
    for key in old.keys() | new.keys():
        a, b = old.get(key, merge.EMPTY), new.get(key, merge.EMPTY)
        name = key[0]
        same = name in before.overlays and name in after.overlays and _spec(before, name) == _spec(after, name)
        if not same:
            parts += [a, b]
        elif a != b:
            parts += [a - b, b - a]
    return _union(parts, before.grid.block)


def _union(parts: Sequence[cellset.Cells], block: int) -> cellset.Cells:
    """Pairwise, so that no set grows one part at a time over thousands of unions."""
    layer = [p for p in parts if p]
    if not layer:
        return cellset.Cells((), block)
    while len(layer) > 1:
        layer = [layer[i] | layer[i + 1] if i + 1 < len(layer) else layer[i] for i in range(0, len(layer), 2)]
    return layer[0]


def _touched(report: rp.Report) -> set[Key]:
    grid = report.grid
    bits = grid.type_cells(_union([c.cells for c in report.outcome.claims], grid.block)).bits()
    out = set()
    for bit in bits:
        pool, t, _ = grid.locate(bit)
        out.add((grid.pools[pool].name, grid.types[t].name))
    return out


def _cells_of(grid: cells.Grid, keys: Iterable[Key]) -> cellset.Cells:
    pools = {p.name: i for i, p in enumerate(grid.pools)}
    types = {t.name: i for i, t in enumerate(grid.types)}
    blocks = [0] * len(grid.pools)
    for pool, name in keys:
        if pool in pools and name in types:
            blocks[pools[pool]] |= 1 << (types[name] * grid.slots)
    return grid.per_pool(blocks)


# --- rows -----------------------------------------------------------------------------------------------

def _prices(key: Key, a: effects.CellEffect | None, b: effects.CellEffect | None) -> list[PriceChange]:
    old = {(o["zone"], o["capacityType"]): o for o in (a.offerings if a is not None else ())}
    new = {(o["zone"], o["capacityType"]): o for o in (b.offerings if b is not None else ())}
    out = []
    for where in sorted(old.keys() | new.keys()):
        x, y = old.get(where), new.get(where)
        px, py = _price(x), _price(y)
        ox, oy = (x or {}).get("priceOverlay"), (y or {}).get("priceOverlay")
        # A cell on one side only (a NodePool or type added or removed): the offerings an overlay prices.
        one_sided = a is None or b is None
        if one_sided and ox is None and oy is None:
            continue
        if (x is None) != (y is None) or px != py or ox != oy:
            out.append(PriceChange(key[0], key[1], where[0], where[1], px, py, ox, oy, x is not None, y is not None,
                                   bool((x or {}).get("estimated")) or bool((y or {}).get("estimated")),
                                   _launched(a, x) or _launched(b, y)))
    return out


def _launched(cell: effects.CellEffect | None, offering: Mapping[str, Any] | None = None) -> bool:
    """Whether the cell's NodePool launches it (the offering, when one is given)."""
    if cell is None or not cell.launchable:
        return False
    return offering is None or bool(offering.get("launchable", True))


def _price(offering: Mapping[str, Any] | None) -> float | None:
    if offering is None or not offering.get("available", True) or offering.get("price") is None:
        return None
    return float(offering["price"])


def _resources(key: Key, a: effects.CellEffect | None, b: effects.CellEffect | None) -> list[ResourceChange]:
    cap_a, cap_b = (dict(a.capacity) if a else {}), (dict(b.capacity) if b else {})
    by_a, by_b = (dict(a.capacity_overlays) if a else {}), (dict(b.capacity_overlays) if b else {})
    al_a, al_b = (dict(a.allocatable) if a else {}), (dict(b.allocatable) if b else {})
    out = []
    one_sided = a is None or b is None
    launchable = _launched(a) or _launched(b)
    for res in sorted(cap_a.keys() | cap_b.keys()):
        if one_sided and res not in by_a and res not in by_b:
            continue
        if cap_a.get(res) != cap_b.get(res) or by_a.get(res) != by_b.get(res):
            out.append(ResourceChange(key[0], key[1], res, CAPACITY, cap_a.get(res), cap_b.get(res),
                                      by_a.get(res), by_b.get(res), launchable))
        # Allocatable apart from capacity only where hugepages make them differ on a side.
        hugepaged = al_a.get(res) != cap_a.get(res) or al_b.get(res) != cap_b.get(res)
        if hugepaged and al_a.get(res) != al_b.get(res):
            out.append(ResourceChange(key[0], key[1], res, ALLOCATABLE, al_a.get(res), al_b.get(res),
                                      launchable=launchable))
    return out


def _templates(key: Key, a: effects.CellEffect | None, b: effects.CellEffect | None) -> list[TemplateChange]:
    ta, tb = (dict(a.templates) if a else {}), (dict(b.templates) if b else {})
    launchable = _launched(a) or _launched(b)
    return [TemplateChange(key[0], key[1], d, ta.get(d), tb.get(d), launchable) for d in sorted(ta.keys() | tb.keys())
            if ta.get(d) != tb.get(d)]


def _summaries(prices: Sequence[PriceChange], resources: Sequence[ResourceChange]) -> tuple[PoolSummary, ...]:
    per_pool: dict[str, list[PriceChange]] = {}
    for p in prices:
        per_pool.setdefault(p.pool, []).append(p)
    counts: dict[str, int] = {}
    for r in resources:
        counts[r.pool] = counts.get(r.pool, 0) + 1
    out = []
    for pool in sorted(per_pool.keys() | counts.keys()):
        rows = per_pool.get(pool, [])
        pcts = [pct for p in rows if (pct := p.percent) is not None]
        out.append(PoolSummary(pool, len(rows), statistics.median(pcts) if pcts else None,
                               min(pcts) if pcts else None, max(pcts) if pcts else None, counts.get(pool, 0)))
    return tuple(out)
