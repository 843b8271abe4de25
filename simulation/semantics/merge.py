"""The merge engine: Karpenter's overlay loop on cell bitsets (the guard's stricter test is in `clash`).

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
import enum
import itertools
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from simulation import once
from simulation.semantics import cells, cellset, model

EMPTY = cellset.Cells()


class State(enum.StrEnum):
    """An overlay's status condition in Karpenter; the values are what the API and the output show."""

    APPLIED = "Applied"
    CONFLICT = "Conflict"
    INVALID = "Invalid"


# The names the analyses and tests compare against.
APPLIED, CONFLICT, INVALID = State.APPLIED, State.CONFLICT, State.INVALID


class Kind(enum.StrEnum):
    """What a field of an overlay sets; the values are the names the output uses."""

    PRICE = "price"
    CAPACITY = "capacity"
    TEMPLATES = "resourceSliceTemplates"


@dataclasses.dataclass(frozen=True, order=True, slots=True)
class Field:
    """One value an overlay sets on the cells it matches, kept apart as Karpenter's store keeps its
    updates (a price per offering, a quantity per capacity resource, the templates of one DRA driver).
    Ordered as its text: `price`, `capacity/<resource>`, `resourceSliceTemplates/<driver>`."""

    kind: Kind
    # The capacity resource or the driver; empty for the price.
    name: str = ""

    def __str__(self) -> str:
        return self.kind.value if self.kind is Kind.PRICE else f"{self.kind.value}/{self.name}"

    @property
    def per_offering(self) -> bool:
        """Set per offering (the price), not per (NodePool, instance type): which of an entry's cells it covers."""
        return self.kind is Kind.PRICE

    def path(self, overlay: model.Overlay) -> tuple[str | int, ...]:
        """Where `overlay` sets it, as segments of a findings.json_path."""
        if self.kind is Kind.PRICE:
            return overlay.price_path
        if self.kind is Kind.CAPACITY:
            return ("spec", "capacity", self.name)
        index = next((t.index for t in overlay.templates if t.driver == self.name), 0)
        return ("spec", "dynamicResources", "resourceSliceTemplates", index, "spec", "driver")


PRICE = Field(Kind.PRICE)
# Any field set per (NodePool, instance type): the level Karpenter's capacity test reads.
_PER_TYPE = Field(Kind.CAPACITY)


def declared(overlay: model.Overlay) -> tuple[Field, ...]:
    """The fields an overlay sets wherever it applies: price (one field with priceAdjustment), each capacity
    resource, each driver of its templates."""
    return ((PRICE,) if overlay.price_update is not None else ()) \
        + tuple(capacity_field(resource) for resource, _ in overlay.capacity) \
        + tuple(driver_field(driver) for driver in overlay.drivers())


def capacity_field(resource: str) -> Field:
    return Field(Kind.CAPACITY, resource)


def driver_field(driver: str) -> Field:
    return Field(Kind.TEMPLATES, driver)


class Signature(tuple[object, ...]):
    """A tuple of plain values (ints, strings, bools, cell sets) whose hash is computed once: hashing cell sets of
    thousands of bits costs ~1 us a time, and a loop over a thousand alike overlays asks a dict for each.
    Equality stays the tuple's, in C."""

    _hash: int

    def __new__(cls, value: Iterable[object]) -> Signature:
        self = super().__new__(cls, value)
        self._hash = tuple.__hash__(self)
        return self

    def __hash__(self) -> int:
        return self._hash


@dataclasses.dataclass(frozen=True)
class Entry:
    """A valid overlay with the cells it selects (offering level and (pool, type) level)."""

    overlay: model.Overlay
    cells: cellset.Cells
    type_cells: cellset.Cells
    # Coarse signature for neighbour scans: which pools, and which types in any pool.
    pools: int = 0
    fold: int = 0

    # Cached: the incremental path reads them of every overlay in a crowd, several times.
    @once.Once
    def name(self) -> str:
        return self.overlay.name

    @once.Once
    def weight(self) -> int:
        return self.overlay.weight

    @once.Once
    def rank(self) -> tuple[int, str]:
        """Karpenter's precedence: a larger rank is processed earlier."""
        return precedence(self.overlay)

    def may_overlap(self, other: Entry) -> bool:
        return bool(self.pools & other.pools and self.fold & other.fold)

    def level(self, field: Field) -> cellset.Cells:
        """The cells at `field`'s level (its offerings for the price, its (NodePool, type) cells otherwise),
        whether it sets the field or not."""
        return self.cells if field.per_offering else self.type_cells

    @once.Once
    def tested(self) -> Signature:
        """What Karpenter's conflict test reads of this overlay, and its weight (which overlays it is tested
        against): equal for overlays it cannot tell apart, so a run of equal ones never spans two weights."""
        o = self.overlay
        return Signature((o.weight, o.price_update is not None, self.cells, o.capacity_set,
                          tuple(r for r, _ in o.capacity), self.type_cells))

    def fields(self) -> Mapping[Field, cellset.Cells]:
        """field -> the cells on which this overlay sets it."""
        return self._fields

    @once.Once
    def _fields(self) -> Mapping[Field, cellset.Cells]:
        # Computed once per entry: neighbour scans ask every neighbour for its fields.
        out: dict[Field, cellset.Cells] = {}
        if not self.cells:
            return out
        for field in declared(self.overlay):
            out[field] = self.level(field)
        return out


class Crowd(Protocol):
    """Overlays as sets, each an int mask over the crowd's own order (Karpenter's), which a rule narrows term by
    term: the prepared index answers each term for thousands in a few whole-array or big-int steps, `Listed`
    a few overlays one test each. The rules over crowds (`related`, clash.partners) are written once for both."""

    def of_weight(self, weight: int) -> int: ...

    def before(self, rank: tuple[int, str]) -> int:
        """Those Karpenter processes before an overlay of this rank."""

    def after(self, rank: tuple[int, str]) -> int:
        """Those Karpenter processes after an overlay of this rank."""

    def setting(self, field: Field) -> int: ...

    def pricing(self) -> int:
        """Those that set a price (or a price adjustment)."""

    def sizing(self) -> int:
        """Those with a `capacity` (even an empty one: it is still stored)."""

    def meeting(self, field: Field, cells: cellset.Cells, among: int) -> int:
        """Those of `among` whose cells at `field`'s level (Entry.level) share one with `cells` (the rules ask
        it last, of what their other terms leave)."""

    def entries(self, members: int, limit: int | None = None) -> list[Entry]:
        """The first `limit` (all by default) of `members`, in Karpenter's order."""


class Listed:
    """A crowd of a few overlays (a request's candidates), each term tested overlay by overlay."""

    def __init__(self, entries: Iterable[Entry]) -> None:
        self._entries = ordered(entries)

    def where(self, test: Callable[[Entry], bool]) -> int:
        """Those that pass `test`."""
        out = 0
        for i, e in enumerate(self._entries):
            if test(e):
                out |= 1 << i
        return out

    def of_weight(self, weight: int) -> int:
        return self.where(lambda e: e.weight == weight)

    def before(self, rank: tuple[int, str]) -> int:
        return self.where(lambda e: e.rank > rank)

    def after(self, rank: tuple[int, str]) -> int:
        return self.where(lambda e: e.rank < rank)

    def setting(self, field: Field) -> int:
        return self.where(lambda e: field in e.fields())

    def pricing(self) -> int:
        return self.where(lambda e: e.overlay.price_update is not None)

    def sizing(self) -> int:
        return self.where(lambda e: e.overlay.capacity_set)

    def meeting(self, field: Field, cells: cellset.Cells, among: int) -> int:
        return among & self.where(lambda e: e.level(field).intersects(cells))

    def entries(self, members: int, limit: int | None = None) -> list[Entry]:
        found = [e for i, e in enumerate(self._entries) if members >> i & 1]
        return found[:limit]


def related(crowd: Crowd, e: Entry, among: int = -1) -> int:
    """The crowd's overlays (of `among`) that Karpenter's conflict test can relate to `e`: of its weight, both set
    a price and share an offering, or both have a capacity and share a (NodePool, instance type)."""
    among &= crowd.of_weight(e.weight)
    out = 0
    if e.overlay.price_update is not None and (pricing := among & crowd.pricing()):
        out |= crowd.meeting(PRICE, e.cells, pricing)
    if e.overlay.capacity_set and (sizing := among & crowd.sizing()):
        out |= crowd.meeting(_PER_TYPE, e.type_cells, sizing)
    return out


def share_tested(entries: Iterable[Entry]) -> dict[Signature, Signature]:
    """Gives alike entries one `tested` object (the cached value made canonical: equal, so nothing reads
    differently), so that Karpenter's loop finds a run of alike overlays' verdict by identity instead of
    comparing thousands of bits per overlay. Returns the canonical objects."""
    shared: dict[Signature, Signature] = {}
    for e in entries:
        e.__dict__["tested"] = shared.setdefault(e.tested, e.tested)
    return shared


def adopt_tested(entries: Iterable[Entry], shared: Mapping[Signature, Signature]) -> None:
    """Gives entries made after share_tested (a request's candidates) the canonical `tested` of their
    alike prepared ones, where there are any: Karpenter's loop then finds a copy's verdict among its crowd's
    by identity, not by comparing thousands of bits."""
    for e in entries:
        e.__dict__["tested"] = shared.get(e.tested, e.tested)


def entry(grid: cells.Grid, overlay: model.Overlay) -> Entry:
    selected, type_cells = grid.selected(overlay)
    return Entry(overlay, selected, type_cells, type_cells.pools(), type_cells.fold())


def precedence(overlay: model.Overlay) -> tuple[int, str]:
    """Karpenter's order (OrderByWeight) as a key: the larger is processed earlier, by weight, then by name
    (the name later in byte order first). Every ordering of overlays reads it, through `Entry.rank` or here."""
    return (overlay.weight, overlay.name)


# Read in C: the full run sorts, names and cuts into runs every overlay of a cluster.
_RANK = operator.attrgetter("rank")
_NAME = operator.attrgetter("name")
_TESTED = operator.attrgetter("tested")


def ordered(entries: Iterable[Entry]) -> list[Entry]:
    """Karpenter's order: weight descending, then name descending (OrderByWeight)."""
    return sorted(entries, key=_RANK, reverse=True)


@dataclasses.dataclass(frozen=True)
class Dropped:
    """Why Karpenter drops an overlay: the field, a cell, and the stored overlay it met there."""

    field: Field
    bit: int
    other: str


@dataclasses.dataclass(frozen=True)
class Claim:
    """Cells on which an applied overlay's value is the one in effect for a field."""

    overlay: str
    field: Field
    cells: cellset.Cells


@dataclasses.dataclass(frozen=True)
class Merged:
    """Karpenter's loop over the overlays: each one's state, why any was dropped, and the cells each claimed."""

    # Karpenter's order of the overlays: the full run's (karpenter_in_order leaves it empty).
    order: tuple[str, ...]
    status: Mapping[str, State]
    verdicts: Mapping[str, Dropped]
    claims: tuple[Claim, ...]

    @once.Once
    def applied(self) -> frozenset[str]:
        """The overlays Karpenter applies (karpenter() records them as its loop goes: a few of thousands)."""
        return frozenset(n for n, s in self.status.items() if s == APPLIED)

    @once.Once
    def claimed(self) -> Mapping[tuple[str, Field], cellset.Cells]:
        """(overlay, field) -> the cells on which its value is in effect."""
        return {(c.overlay, c.field): c.cells for c in self.claims}

    @once.Once
    def claimed_by_field(self) -> Mapping[Field, Mapping[str, cellset.Cells]]:
        """field -> overlay -> the cells on which its value is in effect."""
        out: dict[Field, dict[str, cellset.Cells]] = {}
        for c in self.claims:
            out.setdefault(c.field, {})[c.overlay] = c.cells
        return out


@dataclasses.dataclass(frozen=True)
class Runs:
    """Overlays in Karpenter's order (`ordered`), their names, and where each run of them ends: a run's
    members are alike to Karpenter's test (equal `tested`). Any cut into runs will do; the longer the
    runs, the fewer overlays the loop visits one by one."""

    entries: Sequence[Entry]
    names: Sequence[str]
    ends: Sequence[int]

    @classmethod
    def of(cls, ordered_entries: Sequence[Entry]) -> Runs:
        """Cut where `tested` changes (share_tested made a crowd's one object, found by identity)."""
        lengths = (sum(1 for _ in run) for _, run in itertools.groupby(ordered_entries, key=_TESTED))
        return cls(ordered_entries, tuple(map(_NAME, ordered_entries)), tuple(itertools.accumulate(lengths)))


def karpenter(entries: Sequence[Entry]) -> Merged:
    """Run Karpenter's loop over valid overlays (callers add Invalid ones themselves)."""
    runs = Runs.of(ordered(entries))
    return _loop(runs, tuple(runs.names))


def karpenter_in_order(runs: Runs) -> Merged:
    """karpenter() over overlays already in its order and cut into runs: a request's few candidates placed
    among thousands of prepared ones need no sort of them all. The outcome's `order` is left empty: a
    request reads the prepared one's."""
    return _loop(runs, ())


def _loop(runs: Runs, order: tuple[str, ...]) -> Merged:
    status: dict[str, State] = {}
    verdicts: dict[str, Dropped] = {}
    claims: list[Claim] = []
    # Per field, the cells set so far: the first setter's own cells until a second one needs their union (a
    # request's component is mostly one overlay alone, which then builds no union).
    won: dict[Field, cellset.Dense | cellset.Cells] = {}
    applied: list[str] = []
    weight: int | None = None
    store = _Store()
    # Verdicts found since the store last changed, by what the tests read of an overlay: of a thousand
    # alike overlays one is tested, the rest get its verdict.
    known: dict[Signature, Dropped | None] = {}
    entries, names, start = runs.entries, runs.names, 0
    for end in runs.ends:
        for i in range(start, end):
            e = entries[i]
            if e.weight != weight:
                # Karpenter tests an overlay only against what its own weight stored.
                weight, store, known = e.weight, _Store(), {}
            verdict = known.get(e.tested, _UNTESTED)
            if verdict is _UNTESTED:
                verdict = known[e.tested] = store.conflict(e)
            if verdict is not None:
                # The store stays as it is, so the rest of the run is dropped for the same reason: set in
                # bulk, in C, for a crowd's thousands.
                dropped = dict.fromkeys(names[i:end], CONFLICT)
                status.update(dropped)
                verdicts.update(dict.fromkeys(dropped, verdict))
                break
            status[e.name] = APPLIED
            applied.append(e.name)
            if not e.cells:
                continue
            known.clear()
            if i + 1 < len(entries):
                # Only a later overlay reads the store.
                store.add(e)
            _claim(e, won, claims)
        start = end
    merged = Merged(order, status, verdicts, tuple(claims))
    merged.__dict__["applied"] = frozenset(applied)
    return merged


def _claim(e: Entry, won: dict[Field, cellset.Dense | cellset.Cells], claims: list[Claim]) -> None:
    """Appends an applied overlay's claims: per field it sets, its cells that no overlay before it set (`won`: per
    field, those cells, updated here)."""
    for field, bits in e.fields().items():
        taken = won.get(field)
        if taken is None:
            # Nothing set the field before: all of its cells are its claim.
            claims.append(Claim(e.name, field, bits))
            won[field] = bits
            continue
        if isinstance(taken, cellset.Cells):
            union = won[field] = _dense(e)
            union.add(taken)
            taken = union
        claims.append(Claim(e.name, field, taken.missing(bits)))
        taken.add(bits)


def tested_against(stored: Iterable[Entry], e: Entry) -> Dropped | None:
    """Karpenter's conflict test of `e` against what `stored` (applied overlays of its weight before it, in
    Karpenter's order) stored. The test reads only `e`'s own cells, and an overlay writes only its own: those
    that share a cell with `e` suffice. The price is tested first and its verdict names the first price met, so
    the stored are read up to that one (a broad overlay meets thousands)."""
    store: _Store | None = None
    for s in stored:
        if price_conflicts(e, s):
            # The first stored price it meets: the one _price_conflict would name once `s` is stored. Mostly the
            # first one read, so no store (its unions and filing) is built for it.
            return _price_dropped(e, s)
        if store is None:
            store = _Store()
        store.add(s)
    return store.conflict(e) if store is not None else None


def price_conflicts(e: Entry, s: Entry) -> bool:
    """Karpenter's price conflict of `e` with one overlay `s` stored before it at its weight: both set a price and
    share an offering. Any one such `s` drops `e`, whatever else is stored (the capacity test reads the last one
    stored, so it has no such one-overlay form)."""
    return e.overlay.price_update is not None and s.overlay.price_update is not None and s.cells.intersects(e.cells)


# A `known` miss (a verdict may be None: applied).
_UNTESTED = Dropped(PRICE, -1, "")


def _dense(e: Entry) -> cellset.Dense:
    return cellset.Dense(e.cells.block)


class _Store:
    """What Karpenter's loop has stored at one weight so far, as its conflict tests read it."""

    def __init__(self) -> None:
        self.price_stored = _Stored(_CELLS)
        self.price_union: cellset.Dense | None = None
        # resource -> (pool, type) cells whose last stored capacity overlay sets that resource, as of the first
        # `synced[resource]` capacity overlays stored. None of the later ones sets it (each one that does brings
        # it up to date), so bringing it up to date only removes their cells: done when it is read or added to,
        # never for every resource on every store, which would cost distinct resources x capacity overlays.
        self.last_has: dict[str, cellset.Dense] = {}
        self.synced: dict[str, int] = {}
        self.last_capacity = _Stored(_TYPE_CELLS)

    def conflict(self, e: Entry) -> Dropped | None:
        """Karpenter's conflict test."""
        return (_price_conflict(e, self.price_union, self.price_stored)
                or _capacity_conflict(e, self.has, self.last_capacity))

    def has(self, resource: str) -> cellset.Dense | None:
        """The cells whose last stored capacity overlay sets `resource` (None: none ever did)."""
        has = self.last_has.get(resource)
        if has is not None:
            for s in self.last_capacity.entries[self.synced[resource]:]:
                has.remove(s.type_cells)
            self.synced[resource] = len(self.last_capacity.entries)
        return has

    def add(self, e: Entry) -> None:
        if e.overlay.price_update is not None:
            self.price_union = self.price_union or _dense(e)
            self.price_union.add(e.cells)
            self.price_stored.append(e)
        if e.overlay.capacity_set:
            for r, _ in e.overlay.capacity:
                current = self.has(r)
                if current is None:
                    current = self.last_has[r] = _dense(e)
                current.add(e.type_cells)
            self.last_capacity.append(e)
            for r, _ in e.overlay.capacity:
                self.synced[r] = len(self.last_capacity.entries)


_CELLS: Callable[[Entry], cellset.Cells] = operator.attrgetter("cells")
_TYPE_CELLS: Callable[[Entry], cellset.Cells] = operator.attrgetter("type_cells")


class _Stored:
    """Stored overlays in Karpenter's order, their cells (as `of` reads them) filed by where they are
    (cellset.Near): the first one meeting a set of cells, or the last one holding a cell, is looked for among the
    overlays near it, not among all stored at the weight (most overlays of a cluster with many NodePools)."""

    def __init__(self, of: Callable[[Entry], cellset.Cells]) -> None:
        self.entries: list[Entry] = []
        self._of = of
        self._near = cellset.Near()

    def append(self, e: Entry) -> None:
        self._near.add(len(self.entries), self._of(e))
        self.entries.append(e)

    def first_meeting(self, cells: cellset.Cells) -> Entry:
        """The first stored overlay that shares a cell with `cells` (one must)."""
        of, entries = self._of, self.entries
        near = self._near.around(cells)
        return next(s for s in (entries if near is None else map(entries.__getitem__, near))
                    if of(s).intersects(cells))

    def last_having(self, bit: int, block: int) -> Entry:
        """The last stored overlay holding the cell `bit` (one must)."""
        of, entries = self._of, self.entries
        pool, slot = divmod(bit, block)
        near = self._near.around(cellset.Cells.product(1 << pool, 1 << slot, block))
        return next(s for s in reversed(entries if near is None else [entries[n] for n in near]) if of(s).has(bit))


def _price_conflict(e: Entry, union: cellset.Dense | None, stored: _Stored) -> Dropped | None:
    if e.overlay.price_update is None or union is None:
        return None
    if not union.intersects(e.cells):
        return None
    return _price_dropped(e, stored.first_meeting(e.cells))


def _price_dropped(e: Entry, other: Entry) -> Dropped:
    """`e` dropped for `other`, the first stored price it meets, at their first common offering (Karpenter's
    verdict names none)."""
    return Dropped(PRICE, (other.cells & e.cells).lowest(), other.name)


def _capacity_conflict(e: Entry, last_has: Callable[[str], cellset.Dense | None], stored: _Stored) -> Dropped | None:
    if not e.overlay.capacity_set:
        return None
    for resource, _ in e.overlay.capacity:
        has = last_has(resource)
        hit = has.common(e.type_cells) if has is not None else EMPTY
        if hit:
            bit = hit.lowest()
            other = stored.last_having(bit, e.type_cells.block)
            return Dropped(capacity_field(resource), bit, other.name)
    return None
