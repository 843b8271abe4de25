"""Sets of cells, factored: an overlay's cells are almost always a product (NodePools it matches) x
(offerings of the instance types it matches), because each requirement key is defined on one level.
Where a key is defined on two levels (a NodePool template label that is also an instance-type label)
the set is a union of a few products, one per distinct block.

A set is a function NodePool -> block (the bitset of one NodePool's offering slots), stored grouped by
equal block: `parts` pairs a bitset of NodePools with the block they all have. The pool sets are
disjoint and the blocks distinct and non-empty, so equal sets have equal parts. Intersection, union,
difference, emptiness and a witness cost O(parts² x block words), never O(NodePools x block).

A cell's flat index (`pool * block + slot`, the layout of `cells.Grid`) names it in verdicts and witnesses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator


@dataclasses.dataclass(frozen=True)
class Cells:
    """A set of grid cells: per set of NodePools, a bit mask of the slots they hold."""

    parts: tuple[tuple[int, int], ...] = ()
    # Bits per NodePool block; only read to turn a (pool, slot) into a flat index.
    block: int = 0

    @staticmethod
    def grouped(pairs: Iterable[tuple[int, int]], block: int) -> Cells:
        """Canonical form of (pools, block) pairs whose pool sets are disjoint."""
        by_block: dict[int, int] = {}
        for pools, bits in pairs:
            if pools and bits:
                by_block[bits] = by_block.get(bits, 0) | pools
        return Cells(tuple(sorted(((p, b) for b, p in by_block.items()), key=lambda pb: pb[0])), block)

    @staticmethod
    def product(pools: int, bits: int, block: int) -> Cells:
        return Cells(((pools, bits),), block) if pools and bits else Cells((), block)

    def __hash__(self) -> int:
        # An int hashes to its value modulo 2**61 - 1, so one pattern shifted along (an instance type's offerings,
        # type after type in a catalog of thousands) takes 61 hashes in all, and a dict keyed by such sets probes
        # through thousands of equal hashes: the bit lengths tell them apart.
        if len(self.parts) == 1:  # a product (almost every set): no generator
            (p, b), = self.parts
            return hash((p, b, b.bit_length()))
        return hash(tuple((p, b, b.bit_length()) for p, b in self.parts))

    def __bool__(self) -> bool:
        return bool(self.parts)

    def __and__(self, other: Cells) -> Cells:
        if not self.parts or not other.parts:
            return Cells((), self.block or other.block)
        if len(self.parts) == 1 and len(other.parts) == 1:
            (pa, ba), (pb, bb) = self.parts[0], other.parts[0]
            return Cells.product(pa & pb, ba & bb, self.block)
        return Cells.grouped(((pa & pb, ba & bb) for pa, ba in self.parts for pb, bb in other.parts
                              if pa & pb), self.block)

    def __or__(self, other: Cells) -> Cells:
        if not other.parts:
            return self
        if not self.parts:
            return other
        mine, theirs = self.pools(), other.pools()
        pairs = [(pa & ~theirs, ba) for pa, ba in self.parts]
        pairs += [(pb & ~mine, bb) for pb, bb in other.parts]
        pairs += [(pa & pb, ba | bb) for pa, ba in self.parts for pb, bb in other.parts if pa & pb]
        return Cells.grouped(pairs, self.block)

    def __sub__(self, other: Cells) -> Cells:
        if not self.parts or not other.parts:
            return self
        theirs = other.pools()
        pairs = [(pa & ~theirs, ba) for pa, ba in self.parts]
        pairs += [(pa & pb, ba & ~bb) for pa, ba in self.parts for pb, bb in other.parts if pa & pb]
        return Cells.grouped(pairs, self.block)

    def intersects(self, other: Cells) -> bool:
        # Loops, not any(...): the incremental path asks this of thousands of neighbours per candidate.
        for pa, ba in self.parts:
            for pb, bb in other.parts:
                if pa & pb and ba & bb:
                    return True
        return False

    def within(self, other: Cells) -> bool:
        """Whether every cell of this set is in `other` (`not self - other`, without building it)."""
        for pa, ba in self.parts:
            for pb, bb in other.parts:
                if pa & pb and ba & ~bb:
                    return False
                pa &= ~pb
            if pa:
                return False
        return True

    def pools(self) -> int:
        """NodePools with any cell."""
        out = 0
        for p, _ in self.parts:
            out |= p
        return out

    def fold(self) -> int:
        """The union of the blocks: slots set in some NodePool."""
        out = 0
        for _, b in self.parts:
            out |= b
        return out

    def map_blocks(self, change: Callable[[int], int]) -> Cells:
        """The same NodePools, each block passed through `change`."""
        if len(self.parts) == 1:  # a product (almost every set): grouped's dict and sort for one pair
            (p, b), = self.parts
            return Cells.product(p, change(b), self.block)
        return Cells.grouped(((p, change(b)) for p, b in self.parts), self.block)

    def bit_count(self) -> int:
        return sum(p.bit_count() * b.bit_count() for p, b in self.parts)

    def lowest(self) -> int:
        """The flat index of the first cell (pool-major, as the flat layout orders them)."""
        if len(self.parts) == 1:
            # A product (almost every set): no generator.
            (p, b), = self.parts
            return low_bit(p) * self.block + low_bit(b)
        return min(low_bit(p) * self.block + low_bit(b) for p, b in self.parts)

    def has(self, bit: int) -> bool:
        pool, slot = divmod(bit, self.block)
        return any(p >> pool & 1 and b >> slot & 1 for p, b in self.parts)

    def bits(self) -> Iterator[int]:
        """Flat indices of every cell, lowest first (O(cells): for listing, not for testing)."""
        cells = sorted((pool * self.block + slot) for p, b in self.parts for pool in ones(p) for slot in ones(b))
        yield from cells


def low_bit(bits: int) -> int:
    """The index of the lowest set bit of a non-zero int."""
    return (bits & -bits).bit_length() - 1


def ones(bits: int) -> Iterator[int]:
    """The indices of the set bits, lowest first."""
    while bits:
        low = bits & -bits
        yield low.bit_length() - 1
        bits ^= low


class Dense:
    """A growing union of cell sets, one block per NodePool: adding a product touches only its NodePools,
    where a factored union would compare every part with every other. A working buffer of one loop
    (Karpenter's stored updates, the fields set so far), never shared."""

    def __init__(self, block: int) -> None:
        self._blocks: dict[int, int] = {}
        self._block = block

    def add(self, cells: Cells) -> None:
        blocks = self._blocks
        for pools, bits in cells.parts:
            for p in ones(pools):
                blocks[p] = blocks.get(p, 0) | bits

    def remove(self, cells: Cells) -> None:
        blocks = self._blocks
        for pools, bits in cells.parts:
            for p in ones(pools):
                if p in blocks:
                    blocks[p] &= ~bits

    def common(self, cells: Cells) -> Cells:
        """`cells` & this union."""
        blocks = self._blocks
        return Cells.grouped(((1 << p, blocks.get(p, 0) & bits) for pools, bits in cells.parts for p in ones(pools)),
                             self._block)

    def missing(self, cells: Cells) -> Cells:
        """`cells` - this union."""
        blocks = self._blocks
        return Cells.grouped(((1 << p, bits & ~blocks.get(p, 0)) for pools, bits in cells.parts
                              for p in ones(pools)), self._block)

    def intersects(self, cells: Cells) -> bool:
        blocks = self._blocks
        return any(blocks.get(p, 0) & bits for pools, bits in cells.parts for p in ones(pools))


class Near:
    """Numbered cell sets, each filed under the coarse places its cells are in: (NodePool, window of
    2**`_WINDOW_BITS` slots) pairs, or the NodePool alone for a set spread over more than `_NARROW` of them.
    `around(cells)` lists the numbers of every set that may meet `cells` (a superset, for the caller to test
    exactly) without reading the sets filed elsewhere: in a cluster of many NodePools and many alike overlays,
    one overlay's neighbours are a few, not every overlay of its weight."""

    def __init__(self) -> None:
        self._fine: dict[tuple[int, int], list[int]] = {}
        self._wide: dict[int, list[int]] = {}
        self._pooled: dict[int, list[int]] = {}
        self._count = 0
        self._pending: list[tuple[int, Cells]] = []

    def add(self, number: int, cells: Cells) -> None:
        # Filed on the first question: most weights of a cluster without conflicts are never asked about.
        self._pending.append((number, cells))

    def _file(self, number: int, cells: Cells) -> None:
        places = _places(cells)
        if places is None:
            for pool in ones(cells.pools()):
                self._wide.setdefault(pool, []).append(number)
        else:
            for place in places:
                self._fine.setdefault(place, []).append(number)
        for pool in ones(cells.pools()):
            self._pooled.setdefault(pool, []).append(number)
        self._count += 1

    def settle(self) -> None:
        """File the sets added so far now, not on the next question: a `Near` shared by threads is then only read."""
        for number, filed in self._pending:
            self._file(number, filed)
        self._pending.clear()

    def around(self, cells: Cells) -> list[int] | None:
        """The numbers of the sets filed where `cells` is, ascending; None when that is about all of them (a set
        spread over most places): reading every set once is then cheaper."""
        self.settle()
        found: set[int] = set()
        pools = list(ones(cells.pools()))
        places = _places(cells)
        if places is not None:
            for place in places:
                found.update(self._fine.get(place, ()))
            for pool in pools:
                found.update(self._wide.get(pool, ()))
        else:
            pooled = self._pooled
            if sum(len(pooled.get(p, ())) for p in pools) >= self._count:
                return None
            for pool in pools:
                found.update(pooled.get(pool, ()))
        return sorted(found)


# Near's places: windows of 256 slots (a few instance types' offerings), and at most 8 places per set.
_WINDOW_BITS = 8
_NARROW = 8


def _places(cells: Cells) -> list[tuple[int, int]] | None:
    """The (NodePool, window) places of `cells`, each window between a part's lowest and highest slot; None past
    `_NARROW` places."""
    out: list[tuple[int, int]] = []
    for pools, bits in cells.parts:
        windows = range(low_bit(bits) >> _WINDOW_BITS, ((bits.bit_length() - 1) >> _WINDOW_BITS) + 1)
        if len(out) + pools.bit_count() * len(windows) > _NARROW:
            return None
        out += [(pool, w) for pool in ones(pools) for w in windows]
    return out
