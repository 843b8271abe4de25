"""The cell index: every (NodePool, instance type, offering) as one cell.

Layout: pool-major blocks of `block = len(types) * slots` bits; inside a block, type `t` owns bits
`t*slots .. t*slots+slots-1`, one per offering. Instance-type and offering labels are indexed as
bitsets over one block; sets of cells are `cellset.Cells` (NodePools x block, factored), so matching
an overlay is a handful of AND/OR operations over per-label bitsets instead of Karpenter's nested
loop over every NodePool and instance type, and its size does not grow with the number of NodePools.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from typing import Any

from simulation import findings, memo, once
from simulation.semantics import catalog as cat
from simulation.semantics import cellset, model, spelling
from simulation.semantics import requirements as reqs

OFFERING_KEYS = frozenset({reqs.ZONE, reqs.CAPACITY_TYPE})


@dataclasses.dataclass(frozen=True)
class LabelIndex:
    """One label key over one block: which offering slots carry which value."""

    by_value: Mapping[str, int]
    defined: int
    # Integer-valued entries sorted by value, with prefix unions, for Gt/Lt/Gte/Lte ranges.
    numbers: tuple[int, ...]
    prefix: tuple[int, ...]

    @once.Once
    def words(self) -> spelling.Words:
        """The values, for the ones near a misspelt value (a no-match hint): made on the first such question."""
        return spelling.Words(self.by_value)

    def matching(self, req: reqs.Requirement) -> int:
        """Slots whose value satisfies `req` (ignoring the undefined case)."""
        if not req.complement:
            return _union(self.by_value.get(v, 0) for v in req.values if req.has(v))
        if req.gte is None and req.lte is None:
            base = self.defined
        else:
            lo = 0 if req.gte is None else bisect.bisect_left(self.numbers, req.gte)
            hi = len(self.numbers) if req.lte is None else bisect.bisect_right(self.numbers, req.lte)
            base = self.prefix[hi] & ~self.prefix[lo] if hi > lo else 0
        return base & ~_union(self.by_value.get(v, 0) for v in req.values)


# Bounds a grid's memo of witnesses by cell (Grid.witness_at): some 700 bytes each with the offering.
WITNESSES = 4096
# A requirement of more values than this has the slots it selects kept by the grid (Grid._selecting_bits).
KEPT_VALUES = 8


@dataclasses.dataclass(frozen=True)
class Grid:
    """Every (NodePool, instance type, offering) cell, with label indexes to select them by requirement."""

    pools: tuple[model.NodePool, ...]
    types: tuple[cat.InstanceType, ...]
    slots: int
    block: int
    labels: Mapping[str, LabelIndex]
    # Slots that hold an offering, and the first slot of every type that has one.
    present: int
    first_slots: int
    # What findings say of the catalog: Catalog.label, its provider and region.
    catalog: str = ""
    provider: str = ""
    region: str | None = None
    # Per requirement list (a tuple of specs, one per distinct list: model._SPECS), the cells it selects and those
    # cells at the (NodePool, type) level (overlays repeat their lists): per grid, so never across NodePools.
    _selected: MutableMapping[int, tuple[Any, tuple[cellset.Cells, cellset.Cells]]] = dataclasses.field(
        default_factory=dict, init=False, compare=False, repr=False)
    # Per (label key, requirement), the slots of a block it selects (_selecting_bits).
    _bits: MutableMapping[tuple[str, reqs.Requirement], int] = dataclasses.field(
        default_factory=dict, init=False, compare=False, repr=False)
    # Per set of cells (by identity, held beside), its witness without and with the offering.
    _witnesses: tuple[dict[int, tuple[Any, findings.Witness | None]], ...] = dataclasses.field(
        default_factory=lambda: ({}, {}), init=False, compare=False, repr=False)
    # The witnesses named so far by (cell, with its offering), at most WITNESSES (witness_at): a request's common
    # cells are new sets, but name the cells the requests before it named.
    _at: MutableMapping[tuple[int, bool], findings.Witness] = dataclasses.field(
        default_factory=dict, init=False, compare=False, repr=False)

    @property
    def pool_mask(self) -> int:
        return (1 << len(self.pools)) - 1

    def everywhere(self, block_bits: int) -> cellset.Cells:
        """The same block in every NodePool."""
        return cellset.Cells.product(self.pool_mask, block_bits, self.block)

    def per_pool(self, blocks: Sequence[int]) -> cellset.Cells:
        """One block per NodePool, in pool order."""
        return cellset.Cells.grouped(((1 << p, b) for p, b in enumerate(blocks)), self.block)

    def at(self, pool: int, block_bits: int) -> cellset.Cells:
        return cellset.Cells.product(1 << pool, block_bits, self.block)

    def from_bits(self, bits: Iterable[int]) -> cellset.Cells:
        """The set of the cells at these flat indices."""
        blocks = [0] * len(self.pools)
        for bit in bits:
            pool, slot = divmod(bit, self.block)
            blocks[pool] |= 1 << slot
        return self.per_pool(blocks)

    def all_cells(self) -> cellset.Cells:
        return self.everywhere(self.present)

    def type_cells(self, cells: cellset.Cells) -> cellset.Cells:
        """Collapse offering cells to the first slot of their (pool, type)."""
        return cells.map_blocks(self._first_of_types)

    def _first_of_types(self, block_bits: int) -> int:
        # Per type, its slots as one small number: adding the low slots' mask to the low slots carries into
        # the top slot exactly when one of them is set, and no further (the sum stays below twice the top
        # slot's bit), so five whole-block operations answer every type at once, not one shift per slot.
        low, top = self._type_slot_masks
        return ((((block_bits & low) + low) | block_bits) & top) >> (self.slots - 1)

    @once.Once
    def types_by_name(self) -> Mapping[str, cat.InstanceType]:
        """The types by name (the first of a name the catalog lists): a finding's witness names its type."""
        out: dict[str, cat.InstanceType] = {}
        for it in self.types:
            out.setdefault(it.name, it)
        return out

    @once.Once
    def _type_slot_masks(self) -> tuple[int, int]:
        """Over the types that have an offering: the mask of all their slots but the last, and of the last."""
        return self.first_slots * ((1 << (self.slots - 1)) - 1), self.first_slots << (self.slots - 1)

    def witness(self, cells: cellset.Cells, with_offering: bool = True) -> findings.Witness | None:
        """A cell of the set to name: the lowest one its NodePool launches (of a type it launches, without
        the offering), else the lowest. Every finding's witness is picked here, so all paths agree. Worked out once
        per set (by identity: overlays of one requirement list share theirs, Grid.selected)."""
        return memo.held(self._witnesses[with_offering], cells, lambda _: self._witness(cells, with_offering))

    def _witness(self, cells: cellset.Cells, with_offering: bool) -> findings.Witness | None:
        if not cells:
            return None
        if self._launches_everything:
            return self.witness_at(cells.lowest(), with_offering)
        launched = self.launched if with_offering else self._launched_types
        return self.witness_at(_lowest_common(cells, launched), with_offering)

    def witness_at(self, bit: int, with_offering: bool = True) -> findings.Witness:
        # Kept: a request names the cells the requests before it named (a conflict's common cells with the same
        # partners, a shadowed overlay's), and each witness is two frozen dataclasses to build.
        return memo.bounded(self._at, (bit, with_offering), lambda: self._witness_at(bit, with_offering), WITNESSES)

    def _witness_at(self, bit: int, with_offering: bool) -> findings.Witness:
        # self.locate, inline: a report builds a witness per conflict.
        pool, rest = divmod(bit, self.block)
        t, slot = divmod(rest, self.slots)
        it = self.types[t]
        if not with_offering:
            return findings.Witness(self.pools[pool].name, it.name)
        o = it.offerings[slot]
        return findings.Witness(self.pools[pool].name, it.name, findings.Offering(o.zone, o.capacity_type))

    def locate(self, bit: int) -> tuple[int, int, int]:
        pool, rest = divmod(bit, self.block)
        t, slot = divmod(rest, self.slots)
        return pool, t, slot

    def below_price(self, threshold: float) -> cellset.Cells:
        """Cells whose base price is known and strictly below `threshold`."""
        prices, prefix = self._price_index
        return self.everywhere(prefix[bisect.bisect_left(prices, threshold)])

    @once.Once
    def _price_index(self) -> tuple[tuple[float, ...], tuple[int, ...]]:
        """Base prices of the block's slots sorted ascending, with prefix unions (price-clamped): made when an
        adjustment is first judged, not for every grid."""
        priced = sorted((o.price, t * self.slots + s) for t, it in enumerate(self.types)
                        for s, o in enumerate(it.offerings) if o.price is not None)
        prefix = [0]
        for _, slot in priced:
            prefix.append(prefix[-1] | 1 << slot)
        return tuple(p for p, _ in priced), tuple(prefix)

    @once.Once
    def spot_pairs(self) -> Mapping[int, int]:
        """Per on-demand offering slot of the block, the spot offering slot of the same type and zone, where both
        are available and both prices were read from data, not estimated (the embedded catalog's spot prices
        are): the offerings whose two prices can be compared (analysis/traps.py)."""
        pairs: dict[int, int] = {}
        for t, it in enumerate(self.types):
            real = {(o.zone, o.capacity_type): t * self.slots + s for s, o in enumerate(it.offerings)
                    if o.price is not None and not o.estimated and o.available}
            pairs.update((slot, spot) for (zone, ct), slot in real.items()
                         if ct == "on-demand" and (spot := real.get((zone, "spot"))) is not None)
        return pairs

    def selected(self, overlay: model.Overlay) -> tuple[cellset.Cells, cellset.Cells]:
        """The cells `overlay` selects (`match` of its requirements) and the same at the (NodePool, type) level
        (`type_cells`), worked out once per distinct requirement list."""
        return memo.held(self._selected, overlay.requirements, lambda _: self._selecting(overlay))

    def _selecting(self, overlay: model.Overlay) -> tuple[cellset.Cells, cellset.Cells]:
        chosen = self.match(overlay.requirement_map())
        return chosen, self.type_cells(chosen)

    def match(self, requirements: Mapping[str, reqs.Requirement]) -> cellset.Cells:
        """Cells an overlay selects (Karpenter's getOverlaidOfferings): a key the cell does not
        define only passes for NotIn/DoesNotExist, a defined one must intersect."""
        masks = {k: self._selecting_bits(k, r) for k, r in requirements.items() if k != reqs.NODEPOOL}
        pool_keys = masks.keys() & self._pool_label_keys
        common = self.present
        for key, bits in masks.items():
            if key not in pool_keys:
                common &= bits
        nodepool_req = requirements.get(reqs.NODEPOOL)
        if not pool_keys:
            chosen = self.pool_mask if nodepool_req is None else self._pools_matching(nodepool_req)
            return cellset.Cells.product(chosen, common, self.block)
        blocks = []
        for pool in self.pools:
            bits = common if nodepool_req is None or nodepool_req.has(pool.name) else 0
            for key in pool_keys:
                if not bits:
                    break
                if key in pool.labels:
                    bits &= self._pool_key_bits(key, requirements[key], pool.labels[key])
                else:
                    bits &= masks[key]
            blocks.append(bits)
        return self.per_pool(blocks)

    def _selecting_bits(self, key: str, req: reqs.Requirement) -> int:
        """_key_bits(key, req, False), kept per (key, requirement) of more than KEPT_VALUES values: the distinct
        requirement lists of a crowd repeat their long requirements (a family's NotIn of ninety values in a thousand
        lists), each union worked out once. A short one costs less to work out than to keep (10,000 overlays on one
        InstanceType each would keep a block apiece)."""
        if len(req.values) <= KEPT_VALUES:
            return self._key_bits(key, req, False)
        return memo.bounded(self._bits, (key, req), lambda: self._key_bits(key, req, False), memo.LIMIT)

    def _pools_matching(self, req: reqs.Requirement) -> int:
        if not req.complement:
            index = self._pool_index
            return _union(1 << index[v] for v in req.values if v in index)
        return _union(1 << p for p, pool in enumerate(self.pools) if req.has(pool.name))

    @once.Once
    def _pool_label_keys(self) -> frozenset[str]:
        return frozenset(k for p in self.pools for k in p.labels)

    @once.Once
    def _pool_index(self) -> Mapping[str, int]:
        return {pool.name: p for p, pool in enumerate(self.pools)}

    @once.Once
    def launch_blocks(self) -> tuple[int, ...]:
        """Per NodePool, in pool order: the offering slots it can launch. Karpenter's overlay store still
        holds the others (its requirements do not narrow the cells, SPEC §3): outputs mark them, and
        witnesses avoid them."""
        return tuple(self.launchable(pool.launch_requirements()) for pool in self.pools)

    @once.Once
    def launched(self) -> cellset.Cells:
        """The cells their NodePool can launch."""
        return self.per_pool(self.launch_blocks)

    def launches(self, bit: int) -> bool:
        pool, slot = divmod(bit, self.block)
        return bool(self.launch_blocks[pool] >> slot & 1)

    @once.Once
    def _launched_types(self) -> cellset.Cells:
        """Every slot of each type its NodePool launches some offering of: a type-level witness may be any."""
        fill = (1 << self.slots) - 1
        return self.per_pool([self._first_of_types(b) * fill & self.present for b in self.launch_blocks])

    @once.Once
    def _launches_everything(self) -> bool:
        return all(b == self.present for b in self.launch_blocks)

    def launchable(self, requirements: Mapping[str, reqs.Requirement]) -> int:
        """One block: the offerings a NodePool with these requirements can launch
        (Requirements.Intersects: a key the instance type does not define passes)."""
        bits = self.present
        for key, req in requirements.items():
            if key != reqs.NODEPOOL:
                bits &= self._key_bits(key, req, True)
        return bits

    def _key_bits(self, key: str, req: reqs.Requirement, undefined_passes: bool) -> int:
        index = self.labels.get(key)
        if index is None:
            return self.present if (undefined_passes or req.accepts_undefined()) else 0
        bits = index.matching(req)
        if undefined_passes or req.accepts_undefined():
            bits |= self.present & ~index.defined
        return bits

    def _pool_key_bits(self, key: str, req: reqs.Requirement, value: str) -> int:
        """A key the pool's template labels define: types that agree (or are silent) carry the
        pool's value; a type that disagrees leaves Karpenter an empty In {} requirement, which
        only NotIn/DoesNotExist accept."""
        index = self.labels.get(key)
        defined = index.defined if index is not None else 0
        agree = index.by_value.get(value, 0) if index is not None else 0
        bits = self.present & (~defined | agree) if req.has(value) else 0
        if req.accepts_undefined():
            bits |= defined & ~agree
        return bits


def build(catalog: cat.Catalog, pools: Sequence[model.NodePool], like: Grid | None = None) -> Grid:
    """`like`: a grid of the same catalog, whose index of the instance types (all but the NodePools) is kept."""
    if like is not None and like.types is catalog.types:
        return dataclasses.replace(like, pools=tuple(pools))
    types = catalog.types
    slots = max((len(t.offerings) for t in types), default=1) or 1
    present = first = 0
    for t, it in enumerate(types):
        if it.offerings:
            present |= ((1 << len(it.offerings)) - 1) << t * slots
            first |= 1 << t * slots
    return Grid(
        pools=tuple(pools), types=types, slots=slots, block=-(-len(types) * slots // 64) * 64,
        labels=_Labels(types, slots), present=present, first_slots=first,
        catalog=catalog.label, provider=catalog.provider, region=catalog.region,
    )


class _Labels(once.Each[str, LabelIndex]):
    """The label index of the types over one block, a key's on the first question about it: an input asks
    about a few of the catalog's dozens of keys, and indexing them all (a big-int OR per type and label)
    was most of a one-file check's merge. The keys themselves are known up front (checks.known_keys), in order."""

    def __init__(self, types: Sequence[cat.InstanceType], slots: int) -> None:
        self._types, self._slots = types, slots
        offered = [it for it in types if it.offerings]
        keys = {reqs.NORMALIZED_LABELS.get(k, k) for it in offered for k in it.labels}
        super().__init__(dict.fromkeys(sorted(keys | OFFERING_KEYS if offered else keys)), self._index)

    def _index(self, key: str) -> LabelIndex:
        return _label_index(self._values(key))

    def _values(self, key: str) -> dict[str, int]:
        """value -> its slots: a type's label covers its offerings' slots (the label under an older name
        counts as the key, the later one in the type's labels winning, as reqs.from_labels reads them), an
        offering's zone and capacity type its own slot."""
        names = {key, *reqs.NORMALIZED_LABELS}
        names = {n for n in names if reqs.NORMALIZED_LABELS.get(n, n) == key}
        by_value: dict[str, int] = {}
        offering = key in OFFERING_KEYS
        slot_values: dict[str, list[int]] = {}
        for t, it in enumerate(self._types):
            n = len(it.offerings)
            if n == 0:
                continue
            base = t * self._slots
            found = [v for k, v in it.labels.items() if k in names] if len(names) > 1 else \
                [it.labels[key]] if key in it.labels else []
            if found:
                by_value[found[-1]] = by_value.get(found[-1], 0) | ((1 << n) - 1) << base
            if offering:
                for s, o in enumerate(it.offerings):
                    slot_values.setdefault(o.zone if key == reqs.ZONE else o.capacity_type, []).append(base + s)
        for value, at in slot_values.items():
            by_value[value] = by_value.get(value, 0) | _mask(at)
        return by_value


def _mask(positions: Sequence[int]) -> int:
    """The int with these bits set (a byte buffer: `|= 1 << i` copies the whole int per bit)."""
    buffer = bytearray(positions[-1] // 8 + 1 if positions else 0)
    for i in positions:
        buffer[i >> 3] |= 1 << (i & 7)
    return int.from_bytes(buffer, "little")


def _label_index(by_value: dict[str, int]) -> LabelIndex:
    numeric = sorted((n, bits) for v, bits in by_value.items() if (n := reqs.atoi(v)) is not None)
    prefix = [0]
    for _, bits in numeric:
        prefix.append(prefix[-1] | bits)
    return LabelIndex(by_value=dict(by_value), defined=_union(by_value.values()),
                      numbers=tuple(n for n, _ in numeric), prefix=tuple(prefix))


def _lowest_common(cells: cellset.Cells, preferred: cellset.Cells) -> int:
    """The lowest cell of `cells` in `preferred`, else the lowest of `cells` (non-empty); no set is built."""
    best = -1
    for p, b in cells.parts:
        for q, c in preferred.parts:
            if p & q and b & c:
                bit = cellset.low_bit(p & q) * cells.block + cellset.low_bit(b & c)
                if best < 0 or bit < best:
                    best = bit
    return cells.lowest() if best < 0 else best


def _union(parts: object) -> int:
    out = 0
    for p in parts:  # type: ignore[attr-defined]
        out |= p
    return out
