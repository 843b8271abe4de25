"""The cell index: every (NodePool, instance type, offering) as one bit of a Python int.

Bit layout: pool-major blocks of `block = len(types) * slots` bits; inside a block, type `t`
owns bits `t*slots .. t*slots+slots-1`, one per offering. Sets of cells are plain ints, so
matching an overlay is a handful of AND/OR operations over per-label bitsets instead of
Karpenter's nested loop over every NodePool and instance type.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Mapping, Sequence

from simulation import findings
from simulation.semantics import catalog as cat
from simulation.semantics import model
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


@dataclasses.dataclass(frozen=True)
class Grid:
    pools: tuple[model.NodePool, ...]
    types: tuple[cat.InstanceType, ...]
    slots: int
    block: int
    labels: Mapping[str, LabelIndex]
    # Slots that hold an offering, and the first slot of every type that has one.
    present: int
    first_slots: int
    # Base prices of the block's slots sorted ascending, with prefix unions (price-clamped).
    prices: tuple[float, ...]
    price_prefix: tuple[int, ...]
    # `present` and `first_slots` in every pool.
    all_present: int
    all_first: int

    def replicate(self, block_bits: int) -> int:
        """The same block pattern in every pool (blocks are byte-aligned, so this is a memcpy)."""
        return int.from_bytes(block_bits.to_bytes(self.block // 8, "little") * len(self.pools), "little")

    def concat(self, blocks: Sequence[int]) -> int:
        """One block per pool, in pool order."""
        size = self.block // 8
        return int.from_bytes(b"".join(b.to_bytes(size, "little") for b in blocks), "little")

    def signature(self, cells: int) -> tuple[int, int]:
        """(pools with any cell, the union of the pool blocks): a cheap overlap pre-test."""
        size = self.block // 8
        raw = cells.to_bytes(size * len(self.pools), "little")
        pools = fold = 0
        for p in range(len(self.pools)):
            chunk = int.from_bytes(raw[p * size:(p + 1) * size], "little")
            if chunk:
                pools |= 1 << p
                fold |= chunk
        return pools, fold

    def all_cells(self) -> int:
        return self.all_present

    def type_cells(self, cells: int) -> int:
        """Collapse offering cells to the first slot of their (pool, type)."""
        folded = cells
        for s in range(1, self.slots):
            folded |= cells >> s
        return folded & self.all_first

    def witness(self, cells: int, with_offering: bool = True) -> findings.Witness | None:
        if not cells:
            return None
        return self.witness_at((cells & -cells).bit_length() - 1, with_offering)

    def witness_at(self, bit: int, with_offering: bool = True) -> findings.Witness:
        pool, t, slot = self.locate(bit)
        it = self.types[t]
        offering = None
        if with_offering:
            o = it.offerings[slot]
            offering = findings.Offering(o.zone, o.capacity_type)
        return findings.Witness(self.pools[pool].name, it.name, offering)

    def locate(self, bit: int) -> tuple[int, int, int]:
        pool, rest = divmod(bit, self.block)
        t, slot = divmod(rest, self.slots)
        return pool, t, slot

    def below_price(self, threshold: float) -> int:
        """Cells whose base price is known and strictly below `threshold`."""
        return self.replicate(self.price_prefix[bisect.bisect_left(self.prices, threshold)])

    def match(self, requirements: Mapping[str, reqs.Requirement]) -> int:
        """Cells an overlay selects (Karpenter's getOverlaidOfferings): a key the cell does not
        define only passes for NotIn/DoesNotExist, a defined one must intersect."""
        masks = {k: self._key_bits(k, r, False) for k, r in requirements.items() if k != reqs.NODEPOOL}
        pool_keys = {k for k in masks if any(k in p.labels for p in self.pools)}
        common = self.present
        for key, bits in masks.items():
            if key not in pool_keys:
                common &= bits
        nodepool_req = requirements.get(reqs.NODEPOOL)
        if nodepool_req is None and not pool_keys:
            return self.replicate(common) if common else 0
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
        return self.concat(blocks) if any(blocks) else 0

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


def build(catalog: cat.Catalog, pools: Sequence[model.NodePool]) -> Grid:
    types = catalog.types
    slots = max((len(t.offerings) for t in types), default=1) or 1
    values: dict[str, dict[str, int]] = {}
    present = first = 0
    priced: list[tuple[float, int]] = []
    for t, it in enumerate(types):
        n = len(it.offerings)
        if n == 0:
            continue
        base = t * slots
        type_bits = ((1 << n) - 1) << base
        present |= type_bits
        first |= 1 << base
        for key, value in _normalized(it.labels).items():
            per_key = values.setdefault(key, {})
            per_key[value] = per_key.get(value, 0) | type_bits
        for s, o in enumerate(it.offerings):
            bit = 1 << (base + s)
            for key, value in ((reqs.ZONE, o.zone), (reqs.CAPACITY_TYPE, o.capacity_type)):
                per_key = values.setdefault(key, {})
                per_key[value] = per_key.get(value, 0) | bit
            if o.price is not None:
                priced.append((o.price, bit))
    priced.sort()
    prefix = [0]
    for _, bit in priced:
        prefix.append(prefix[-1] | bit)
    block = -(-len(types) * slots // 64) * 64
    grid = Grid(
        pools=tuple(pools), types=types, slots=slots, block=block,
        labels={k: _label_index(v) for k, v in values.items()},
        present=present, first_slots=first,
        prices=tuple(p for p, _ in priced), price_prefix=tuple(prefix),
        all_present=0, all_first=0,
    )
    return dataclasses.replace(grid, all_present=grid.replicate(present), all_first=grid.replicate(first))


def _normalized(labels: Mapping[str, str]) -> dict[str, str]:
    return {reqs.NORMALIZED_LABELS.get(k, k): v for k, v in labels.items()}


def _label_index(by_value: dict[str, int]) -> LabelIndex:
    numeric = sorted((n, bits) for v, bits in by_value.items() if (n := reqs.atoi(v)) is not None)
    prefix = [0]
    for _, bits in numeric:
        prefix.append(prefix[-1] | bits)
    return LabelIndex(by_value=dict(by_value), defined=_union(by_value.values()),
                      numbers=tuple(n for n, _ in numeric), prefix=tuple(prefix))


def _union(parts: object) -> int:
    out = 0
    for p in parts:  # type: ignore[attr-defined]
        out |= p
    return out


def bits_of(cells: int) -> list[int]:
    """Indices of the set bits, lowest first."""
    out = []
    while cells:
        low = cells & -cells
        out.append(low.bit_length() - 1)
        cells ^= low
    return out
