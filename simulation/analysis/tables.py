"""Per-field tables of a prepared snapshot, so that one candidate's neighbour questions cost a few
numpy operations over arrays instead of a Python loop per neighbour (numpy: the well-kept library
for whole-array work; see docs/design.md).

- `Rows`: the cells of every entry that sets a field, one row per part of its `cellset.Cells` (a
  product of NodePools and a block), sorted by the entry's position in Karpenter's order. "Which
  entries in positions [lo, hi) have a cell in common with this set" is a few ANDs over the rows in
  that range. Blocks are stored sparse (only their non-zero 64-bit words): an overlay scoped to an
  instance family occupies a handful of words of a block of thousands of slots.
- `Owners`: for every cell (flat index `pool * block + slot`), the position of the applied overlay
  whose value is in effect there in the baseline, or -1, with how many cells each position holds.
  A new overlay at position q takes exactly the cells whose owner is -1 or >= q, and leaves an
  overlay at p >= q nothing when it covers all `claimed[p]` of that overlay's cells.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from simulation.semantics import cellset

Ints = npt.NDArray[np.int64]
Words = npt.NDArray[np.uint64]
Bools = npt.NDArray[np.bool_]
_EMPTY: Ints = np.zeros(0, dtype=np.int64)


def words(bits: int, count: int) -> Words:
    """A non-negative int below 2**(64 * count) as `count` little-endian 64-bit words."""
    return np.frombuffer(bits.to_bytes(count * 8, "little"), dtype="<u8").astype(np.uint64)


def ones(bits: int, width: int) -> Ints:
    """The indices of the set bits of an int below 2**width, ascending."""
    raw = np.frombuffer(bits.to_bytes(-(-width // 8), "little"), dtype=np.uint8)
    return np.flatnonzero(np.unpackbits(raw, bitorder="little")).astype(np.int64)


def flat(cells: cellset.Cells) -> Ints:
    """The flat indices of the cells (in no particular order)."""
    block = cells.block
    parts = []
    for pools, bits in cells.parts:
        slots = ones(bits, block)
        where = ones(pools, pools.bit_length())
        parts.append((where[:, None] * block + slots[None, :]).ravel())
    return np.concatenate(parts) if parts else _EMPTY


def cells_at(indices: Ints, block: int) -> cellset.Cells:
    """The set of the cells at these flat indices (the inverse of `flat`)."""
    if not len(indices):
        return cellset.Cells((), block)
    pools, inverse = np.unique(indices // block, return_inverse=True)
    dense = np.zeros((len(pools), block), dtype=np.uint8)
    dense[inverse, indices % block] = 1
    packed = np.packbits(dense, axis=1, bitorder="little")
    return cellset.Cells.grouped(((1 << int(p), int.from_bytes(row.tobytes(), "little"))
                                  for p, row in zip(pools.tolist(), packed, strict=True)), block)


@dataclasses.dataclass(frozen=True, eq=False)
class Rows:
    """The cells of the entries that set one field, one row per (NodePools, block) part."""

    positions: Ints
    # Per row: its NodePools as words; the span of its non-zero block words in `at`/`values`/`owner`.
    pools: Words
    starts: Ints
    # Per non-zero block word: which word of the block, its bits, and its row.
    at: Ints
    values: Words
    row: Ints
    pool_words: int

    @classmethod
    def build(cls, entries: Iterable[tuple[int, cellset.Cells]], pool_count: int) -> Rows:
        """`entries`: (position, cells) in ascending position."""
        pool_words = max(1, -(-pool_count // 64))
        positions: list[int] = []
        pools: list[Words] = []
        starts = [0]
        at: list[Ints] = []
        values: list[Words] = []
        for position, cells in entries:
            for p, bits in cells.parts:
                block = words(bits, -(-cells.block // 64))
                nonzero = np.flatnonzero(block)
                positions.append(position)
                pools.append(words(p, pool_words))
                at.append(nonzero)
                values.append(block[nonzero])
                starts.append(starts[-1] + len(nonzero))
        count = [b - a for a, b in itertools.pairwise(starts)]
        return cls(np.array(positions, dtype=np.int64),
                   np.array(pools, dtype=np.uint64).reshape(len(positions), pool_words),
                   np.array(starts, dtype=np.int64),
                   np.concatenate(at).astype(np.int64) if at else _EMPTY,
                   np.concatenate(values).astype(np.uint64) if values else np.zeros(0, dtype=np.uint64),
                   np.repeat(np.arange(len(positions), dtype=np.int64), count), pool_words)

    def hits(self, cells: cellset.Cells, lo: int = 0, hi: int | None = None) -> Ints:
        """The positions in [lo, hi) whose cells meet `cells`, ascending, each once."""
        first = int(np.searchsorted(self.positions, lo, "left"))
        last = len(self.positions) if hi is None else int(np.searchsorted(self.positions, hi, "left"))
        if first >= last or not cells:
            return _EMPTY
        a, b = int(self.starts[first]), int(self.starts[last])
        at, values, row = self.at[a:b], self.values[a:b], self.row[a:b] - first
        pools = self.pools[first:last]
        met = np.zeros(last - first, dtype=bool)
        for p, bits in cells.parts:
            mine = words(bits, -(-cells.block // 64))
            in_block = np.zeros(last - first, dtype=bool)
            in_block[row[(values & mine[at]) != 0]] = True
            met |= in_block & (pools & words(p, self.pool_words)).any(axis=1)
        return np.unique(self.positions[first:last][met])


    def lowest(self, cells: cellset.Cells, positions: Ints) -> int:
        """The first cell (flat index) that `cells` shares with any of the entries at `positions`
        (ascending; each must meet `cells`)."""
        first, last, chosen = self._span(positions)
        a, b = int(self.starts[first]), int(self.starts[last])
        at, values, row = self.at[a:b], self.values[a:b], self.row[a:b] - first
        pools = self.pools[first:last]
        best = -1
        for p, bits in cells.parts:
            pooled = pools & words(p, self.pool_words)
            common = values & words(bits, -(-cells.block // 64))[at]
            met = chosen & pooled.any(axis=1)
            where = np.flatnonzero(met[row] & (common != 0))
            if not len(where):
                continue
            # Per row the first common word comes first among its words (they are ascending).
            rows, start = np.unique(row[where], return_index=True)
            slot = at[where[start]] * 64 + _low(common[where[start]])
            word = (pooled[rows] != 0).argmax(axis=1)
            pool = word * 64 + _low(pooled[rows, word])
            found = int((pool * cells.block + slot).min())
            best = found if best < 0 else min(best, found)
        return best

    def holder(self, bit: int, block: int, positions: Ints) -> int:
        """The last of the entries at `positions` (ascending) that has the cell at flat index `bit`."""
        first, last, chosen = self._span(positions)
        pool, slot = divmod(bit, block)
        a, b = int(self.starts[first]), int(self.starts[last])
        has = (self.at[a:b] == slot // 64) & ((self.values[a:b] >> np.uint64(slot % 64)) & np.uint64(1) != 0)
        in_block = np.zeros(last - first, dtype=bool)
        in_block[self.row[a:b][has] - first] = True
        in_pool = (self.pools[first:last, pool // 64] >> np.uint64(pool % 64)) & np.uint64(1) != 0
        return int(self.positions[first:last][chosen & in_block & in_pool].max())

    def _span(self, positions: Ints) -> tuple[int, int, Bools]:
        """The rows from the first to the last of these positions, and which of them are theirs."""
        first = int(np.searchsorted(self.positions, positions[0], "left"))
        last = int(np.searchsorted(self.positions, positions[-1], "right"))
        return first, last, np.isin(self.positions[first:last], positions)


def _low(x: Words) -> Ints:
    """The index of the lowest set bit of each (non-zero) word."""
    lowest = x & (~x + np.uint64(1))
    return np.log2(lowest.astype(np.float64)).astype(np.int64)


@dataclasses.dataclass(frozen=True, eq=False)
class Owners:
    """Who holds each cell of one field in the baseline: the first applied overlay (by position) that
    sets it there, or -1; and per position how many cells that overlay holds."""

    owner: npt.NDArray[np.int32]
    claimed: Ints

    @classmethod
    def build(cls, claims: Sequence[tuple[int, cellset.Cells]], entries: int, pools: int, block: int) -> Owners:
        """`claims`: (position, the cells where its value is in effect): disjoint, as Karpenter's
        first-writer-wins store makes them."""
        owner = np.full(pools * block, -1, dtype=np.int32)
        claimed = np.zeros(entries, dtype=np.int64)
        for position, cells in claims:
            if cells:
                where = flat(cells)
                owner[where] = position
                claimed[position] = len(where)
        return cls(owner, claimed)

    def emptied(self, indices: Ints, at: int) -> Ints:
        """The positions >= `at` holding cells, all of which are among these."""
        held = self.owner[indices]
        held = held[held >= at]
        if not len(held):
            return _EMPTY
        counts = np.bincount(held, minlength=len(self.claimed))
        return np.flatnonzero((counts == self.claimed) & (counts > 0)).astype(np.int64)
