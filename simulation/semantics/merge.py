"""The merge engine: Karpenter's overlay loop and the guard's stricter same-weight test, on cell bitsets.

Karpenter (pkg/controllers/nodeoverlay) walks overlays by weight descending, then name
descending. An overlay that conflicts with what is already stored is dropped whole; otherwise
all its updates are stored, first writer wins. Its conflict test only ever compares against
updates stored at the overlay's own weight, so weight groups are independent; within a group:

- price: conflict iff a matched offering already holds a price update stored at this weight;
- capacity: conflict iff, on a matched (pool, type), the *last* stored capacity overlay of this
  weight sets a resource this one sets (only that last overlay is compared; an empty
  `capacity: {}` still becomes the last one).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping, Sequence

from simulation.semantics import cells, model

APPLIED, CONFLICT, INVALID = "Applied", "Conflict", "Invalid"
PRICE = "price"


def capacity_field(resource: str) -> str:
    return f"capacity/{resource}"


def driver_field(driver: str) -> str:
    return f"resourceSliceTemplates/{driver}"


@dataclasses.dataclass(frozen=True)
class Entry:
    """A valid overlay with the cells it selects (offering level and (pool, type) level)."""

    overlay: model.Overlay
    cells: int
    type_cells: int
    # Coarse signature for neighbour scans: which pools, and which types in any pool.
    pools: int = 0
    fold: int = 0

    @property
    def name(self) -> str:
        return self.overlay.name

    @property
    def rank(self) -> tuple[int, str]:
        """Karpenter's precedence: a larger rank is processed earlier."""
        return (self.overlay.weight, self.overlay.name)

    def may_overlap(self, other: Entry) -> bool:
        return bool(self.pools & other.pools and self.fold & other.fold)

    def karpenter_overlap(self, other: Entry) -> bool:
        """Whether Karpenter's conflict test can relate the two (shared price or capacity cells)."""
        o, p = self.overlay, other.overlay
        return bool((o.price_update is not None and p.price_update is not None and self.cells & other.cells)
                    or (o.capacity_set and p.capacity_set and self.type_cells & other.type_cells))

    def fields(self) -> dict[str, int]:
        """field -> the cells on which this overlay sets it."""
        out: dict[str, int] = {}
        if not self.cells:
            return out
        if self.overlay.price_update is not None:
            out[PRICE] = self.cells
        for resource, _ in self.overlay.capacity:
            out[capacity_field(resource)] = self.type_cells
        for driver in self.overlay.drivers():
            out[driver_field(driver)] = self.type_cells
        return out


def entry(grid: cells.Grid, overlay: model.Overlay) -> Entry:
    selected = grid.match(overlay.requirement_map())
    type_cells = grid.type_cells(selected)
    pools, fold = grid.signature(type_cells)
    return Entry(overlay, selected, type_cells, pools, fold)


def ordered(entries: Iterable[Entry]) -> list[Entry]:
    """Karpenter's order: weight descending, then name descending (OrderByWeight)."""
    return sorted(entries, key=lambda e: (e.overlay.weight, e.name), reverse=True)


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Why Karpenter drops an overlay: the field, a cell, and the stored overlay it met there."""

    field: str
    bit: int
    other: str


@dataclasses.dataclass(frozen=True)
class Claim:
    """Cells on which an applied overlay's value is the one in effect for a field."""

    overlay: str
    field: str
    cells: int


@dataclasses.dataclass(frozen=True)
class Outcome:
    order: tuple[str, ...]
    status: Mapping[str, str]
    verdicts: Mapping[str, Verdict]
    claims: tuple[Claim, ...]


def karpenter(entries: Sequence[Entry]) -> Outcome:
    """Run Karpenter's loop over valid overlays (callers add Invalid ones themselves)."""
    ordered_entries = ordered(entries)
    status: dict[str, str] = {}
    verdicts: dict[str, Verdict] = {}
    claims: list[Claim] = []
    won: dict[str, int] = {}
    for _, group in itertools.groupby(ordered_entries, key=lambda e: e.overlay.weight):
        price_stored: list[Entry] = []
        price_union = 0
        # resource -> (pool, type) cells whose last stored capacity overlay sets that resource
        last_has: dict[str, int] = {}
        last_capacity: list[Entry] = []
        for e in group:
            verdict = _price_conflict(e, price_union, price_stored) or _capacity_conflict(
                e, last_has, last_capacity)
            if verdict is not None:
                status[e.name] = CONFLICT
                verdicts[e.name] = verdict
                continue
            status[e.name] = APPLIED
            if not e.cells:
                continue
            if e.overlay.price_update is not None:
                price_union |= e.cells
                price_stored.append(e)
            if e.overlay.capacity_set:
                mine = {r for r, _ in e.overlay.capacity}
                for r in mine | last_has.keys():
                    current = last_has.get(r, 0)
                    last_has[r] = (current | e.type_cells) if r in mine else (current & ~e.type_cells)
                last_capacity.append(e)
            for field, bits in e.fields().items():
                fresh = bits & ~won.get(field, 0)
                won[field] = won.get(field, 0) | bits
                claims.append(Claim(e.name, field, fresh))
    return Outcome(tuple(e.name for e in ordered_entries), status, verdicts, tuple(claims))


def _price_conflict(e: Entry, union: int, stored: Sequence[Entry]) -> Verdict | None:
    if e.overlay.price_update is None:
        return None
    hit = e.cells & union
    if not hit:
        return None
    bit = (hit & -hit).bit_length() - 1
    other = next(s for s in reversed(stored) if s.cells >> bit & 1)
    return Verdict(PRICE, bit, other.name)


def _capacity_conflict(e: Entry, last_has: Mapping[str, int], stored: Sequence[Entry]) -> Verdict | None:
    if not e.overlay.capacity_set:
        return None
    for resource, _ in e.overlay.capacity:
        hit = e.type_cells & last_has.get(resource, 0)
        if hit:
            bit = (hit & -hit).bit_length() - 1
            other = next(s for s in reversed(stored) if s.type_cells >> bit & 1)
            return Verdict(capacity_field(resource), bit, other.name)
    return None


@dataclasses.dataclass(frozen=True)
class Clash:
    """The guard's finding: two same-weight overlays set one field on a common cell."""

    later: str
    earlier: str
    field: str
    cells: int


def same_weight(entries: Sequence[Entry]) -> list[Clash]:
    """Every pair of equal-weight overlays that set the same field on a common cell."""
    out: list[Clash] = []
    for _, group in itertools.groupby(ordered(entries), key=lambda e: e.overlay.weight):
        seen: dict[str, list[tuple[Entry, int]]] = {}
        unions: dict[str, int] = {}
        for e in group:
            for field, bits in e.fields().items():
                if bits & unions.get(field, 0):
                    out.extend(Clash(e.name, other.name, field, common)
                               for other, other_bits in seen[field]
                               if (common := bits & other_bits))
                unions[field] = unions.get(field, 0) | bits
                seen.setdefault(field, []).append((e, bits))
    return out
