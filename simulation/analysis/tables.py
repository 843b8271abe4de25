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
        first, last = self._rows(lo, hi)
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
        return _distinct(self.positions[first:last][met])


    def first_common(self, cells: cellset.Cells, lo: int, hi: int, allowed: Bools) -> tuple[int, int] | None:
        """The first cell (flat index) that `cells` shares with an entry in positions [lo, hi) that
        `allowed` (per position) admits, and the last such entry that has it; None if none shares one."""
        first, last = self._rows(lo, hi)
        if first >= last:
            return None
        a, b = int(self.starts[first]), int(self.starts[last])
        at, values, row = self.at[a:b], self.values[a:b], self.row[a:b] - first
        pools, admitted = self.pools[first:last], allowed[self.positions[first:last]]
        best = -1
        for p, bits in cells.parts:
            pooled = pools & words(p, self.pool_words)
            common = values & words(bits, -(-cells.block // 64))[at]
            where = np.flatnonzero((admitted & pooled.any(axis=1))[row] & (common != 0))
            if not len(where):
                continue
            # A row's words are ascending: its first common word holds its first common slot.
            start = _starts(row[where])
            rows = row[where[start]]
            slot = at[where[start]] * 64 + _low(common[where[start]])
            word = (pooled[rows] != 0).argmax(axis=1)
            pool = word * 64 + _low(pooled[rows, word])
            found = int((pool * cells.block + slot).min())
            best = found if best < 0 else min(best, found)
        if best < 0:
            return None
        where_pool, where_slot = divmod(best, cells.block)
        has = (at == where_slot // 64) & ((values >> np.uint64(where_slot % 64)) & np.uint64(1) != 0)
        in_block = np.zeros(last - first, dtype=bool)
        in_block[row[has]] = True
        in_pool = (pools[:, where_pool // 64] >> np.uint64(where_pool % 64)) & np.uint64(1) != 0
        return best, int(self.positions[first:last][admitted & in_block & in_pool].max())

    def _rows(self, lo: int, hi: int | None) -> tuple[int, int]:
        """The rows of the entries in positions [lo, hi)."""
        return (int(np.searchsorted(self.positions, lo, "left")),
                len(self.positions) if hi is None else int(np.searchsorted(self.positions, hi, "left")))


def _starts(ascending: Ints) -> Ints:
    """Where each run of equal values begins in an ascending array (np.unique sorts, or hashes, anew)."""
    return np.flatnonzero(np.concatenate(([True], ascending[1:] != ascending[:-1])))


def _distinct(ascending: Ints) -> Ints:
    return ascending[_starts(ascending)] if len(ascending) > 1 else ascending


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
