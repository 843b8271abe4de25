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
  overlay at p >= q nothing when it covers all `claimed[p]` of that overlay's cells (for a product
  of NodePools and slots: when it covers the NodePools and the slots of that overlay's claim).
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from simulation import once
from simulation.semantics import cellset

Ints = npt.NDArray[np.int64]
Words = npt.NDArray[np.uint64]
Bools = npt.NDArray[np.bool_]
Objects = npt.NDArray[np.object_]
NO_INTS: Ints = np.zeros(0, dtype=np.int64)
NO_INTS.flags.writeable = False  # a constant: handed out, never written


def words(bits: int, count: int) -> Words:
    """A non-negative int below 2**(64 * count) as `count` little-endian 64-bit words."""
    return np.frombuffer(bits.to_bytes(count * 8, "little"), dtype="<u8").astype(np.uint64)


def ones(bits: int, width: int) -> Ints:
    """The indices of the set bits of an int below 2**width, ascending."""
    raw = np.frombuffer(bits.to_bytes(-(-width // 8), "little"), dtype=np.uint8)
    # nonzero() of the unpacked bytes read as booleans: numpy's fast path, ten times flatnonzero's on bytes.
    return np.unpackbits(raw, bitorder="little").view(np.bool_).nonzero()[0].astype(np.int64, copy=False)


def bits_of(indices: Ints, width: int) -> int:
    """The int with these bits set, below 2**width (the inverse of `ones`)."""
    marked = np.zeros(-(-width // 8) * 8, dtype=np.bool_)
    marked[indices] = True
    return int.from_bytes(np.packbits(marked, bitorder="little").tobytes(), "little")


def flat(cells: cellset.Cells) -> Ints:
    """The flat indices of the cells (in no particular order)."""
    block = cells.block
    parts = []
    for pools, bits in cells.parts:
        slots = ones(bits, block)
        where = ones(pools, pools.bit_length())
        parts.append((where[:, None] * block + slots[None, :]).ravel())
    return np.concatenate(parts) if parts else NO_INTS


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


def _block_words(blocks: Sequence[int]) -> tuple[Ints, Ints, Words]:
    """The non-zero 64-bit words of many blocks at once: for each, its block's index, its place in the
    block and its bits, ordered by block then place. One pass of int.to_bytes per block over the span
    its bits occupy, then whole-array work (a block per call to numpy costs more than its bits)."""
    buffer = bytearray()
    # Per block: where its words start in the buffer less the place of its first word, and how many.
    shifts: list[int] = []
    spans: list[int] = []
    for bits in blocks:
        low = ((bits & -bits).bit_length() - 1) // 64 if bits else 0
        high = -(-bits.bit_length() // 64)
        shifts.append(low - len(buffer) // 8)
        spans.append(high - low)
        buffer += (bits >> (64 * low)).to_bytes((high - low) * 8, "little")
    values = np.frombuffer(bytes(buffer), dtype="<u8").astype(np.uint64)
    counts = np.array(spans, dtype=np.int64)
    block = np.repeat(np.arange(len(blocks), dtype=np.int64), counts)
    at = np.arange(len(values), dtype=np.int64) + np.repeat(np.array(shifts, dtype=np.int64), counts)
    keep = values != 0
    return block[keep], at[keep], values[keep]


# A set whose blocks have at most this many non-zero words is looked up through the rows' word index;
# a broader one scans the rows of the position range.
SPARSE = 16
# Which overlays a set leaves nothing is read cell by cell for a set of fewer cells than this many times
# the words of the claims' folds, else claim by claim (Owners.emptied).
GATHER = 1
# A meeting of at most this many words is read in Python: one numpy call costs about what a few dozen
# steps of a loop do.
SMALL = 32


def objects(values: Sequence[object]) -> Objects:
    """The values as a read-only array of references (np.array would make a row of any sequence among them)."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    frozen(out)
    return out


def frozen(*arrays: npt.NDArray[Any]) -> None:
    """Mark arrays of a prepared snapshot read-only: shared by every request, written by none."""
    for array in arrays:
        array.flags.writeable = False


@dataclasses.dataclass(frozen=True, eq=False)
class Rows:
    """The cells of the entries that set one field, one row per (NodePools, block) part."""

    positions: Ints
    # Per row: its NodePools as words; the span of its non-zero block words in `at`/`values`/`row`.
    pools: Words
    starts: Ints
    # Per non-zero block word: which word of the block, its bits, and its row.
    at: Ints
    values: Words
    row: Ints
    pool_words: int
    # The non-zero block words ordered by word (then row), and where each word's run begins: the rows
    # that have bits in a given word, without a scan.
    by_word: Ints
    word_starts: Ints
    # `positions` as Python ints, for bisect: numpy's searchsorted costs more than the search on a few thousand.
    ordered: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        frozen(self.positions, self.pools, self.starts, self.at, self.values, self.row, self.by_word, self.word_starts)

    @classmethod
    def build(cls, entries: Iterable[tuple[int, cellset.Cells]], pool_count: int) -> Rows:
        """`entries`: (position, cells) in ascending position."""
        pool_words = max(1, -(-pool_count // 64))
        positions: list[int] = []
        pools: list[int] = []
        blocks: list[int] = []
        block_words = 0
        for position, cells in entries:
            block_words = -(-cells.block // 64)
            for p, bits in cells.parts:
                positions.append(position)
                pools.append(p)
                blocks.append(bits)
        row, at, values = _block_words(blocks)
        by_word = np.argsort(at, kind="stable").astype(np.int64)
        pool_bytes = b"".join(p.to_bytes(pool_words * 8, "little") for p in pools)
        return cls(np.array(positions, dtype=np.int64),
                   np.frombuffer(pool_bytes, dtype="<u8").astype(np.uint64).reshape(len(positions), pool_words),
                   np.searchsorted(row, np.arange(len(positions) + 1)).astype(np.int64), at, values, row,
                   pool_words, by_word, np.searchsorted(at[by_word], np.arange(block_words + 1)).astype(np.int64),
                   tuple(positions))

    def hits(self, cells: cellset.Cells, lo: int = 0, hi: int | None = None) -> Ints:
        """The positions in [lo, hi) whose cells meet `cells`, ascending, each once."""
        return self.meeting(cells, lo, hi).entries()

    def first_common(self, cells: cellset.Cells, lo: int, hi: int, allowed: Bools) -> tuple[int, int] | None:
        """The first cell (flat index) that `cells` shares with an entry in positions [lo, hi) that
        `allowed` (per position) admits, and the last such entry that has it; None if none shares one."""
        return self.meeting(cells, lo, hi).first(allowed, hi)

    def meeting(self, cells: cellset.Cells, lo: int = 0, hi: int | None = None) -> Meeting:
        """Where the entries in positions [lo, hi) share cells with `cells`: one pass over their rows
        that several questions read (Meeting)."""
        first, last = self._rows(lo, hi)
        found = []
        for p, bits in cells.parts if first < last else ():
            mine = words(bits, len(self.word_starts) - 1)
            at, values, rows = self._words(mine, first, last)
            common = values & mine[at]
            hit = common != 0
            at, common, rows = at[hit], common[hit], rows[hit]
            if p & self.every_pool == self.every_pool:
                # The part has every row's NodePools (a set with no NodePool requirement): each row keeps its
                # own, none drops out, so no NodePool words to mask and test.
                found.append((self.positions[rows], self.pools[rows], at, common))
                continue
            pooled = self.pools[rows]
            keep = _meet(pooled, p)
            found.append((self.positions[rows[keep]], pooled[keep], at[keep], common[keep]))
        if not found:
            return Meeting(cells.block, NO_INTS, np.zeros((0, self.pool_words), dtype=np.uint64), NO_INTS,
                           np.zeros(0, dtype=np.uint64))
        if len(found) == 1:
            return Meeting(cells.block, *found[0])
        return Meeting(cells.block, *(np.concatenate(column) for column in zip(*found, strict=True)))

    @once.Once
    def every_pool(self) -> int:
        """The NodePools of all the rows together."""
        return int.from_bytes(np.bitwise_or.reduce(self.pools, axis=0).astype("<u8").tobytes(), "little")

    def _words(self, mine: Words, first: int, last: int) -> tuple[Ints, Words, Ints]:
        """The non-zero words (place, bits, row) of the rows in [first, last), at least those where
        `mine` has bits: through the word index when `mine` has few non-zero words, else all of them."""
        nonzero = np.flatnonzero(mine).tolist()
        if len(nonzero) > SPARSE:
            a, b = int(self.starts[first]), int(self.starts[last])
            return self.at[a:b], self.values[a:b], self.row[a:b]
        starts = self.word_starts
        if len(nonzero) == 1:
            some = self.by_word[starts[nonzero[0]]:starts[nonzero[0] + 1]]
        else:
            some = np.concatenate([self.by_word[starts[w]:starts[w + 1]] for w in nonzero] or [NO_INTS])
        rows = self.row[some]
        if first > 0 or last < len(self.positions):
            inside = (rows >= first) & (rows < last)
            some, rows = some[inside], rows[inside]
        return self.at[some], self.values[some], rows

    def _rows(self, lo: int, hi: int | None) -> tuple[int, int]:
        """The rows of the entries in positions [lo, hi)."""
        return (bisect.bisect_left(self.ordered, lo),
                len(self.ordered) if hi is None else bisect.bisect_left(self.ordered, hi))


@dataclasses.dataclass(frozen=True, eq=False)
class Meeting:
    """The block words where rows share cells with a set: per word, its entry's position, the row's
    NodePools that the set has there (the set's parts have disjoint NodePools), the word's place in
    the block and the shared bits."""

    block: int
    positions: Ints
    pooled: Words
    at: Ints
    common: Words

    def entries(self) -> Ints:
        """The positions of the entries that share a cell, ascending, each once."""
        if len(self.positions) <= SMALL:
            return np.array(sorted(set(self.positions.tolist())), dtype=np.int64)
        # The positions are ascending runs, one per block word or part met (Rows.meeting): timsort merges
        # them in a pass or two, where the default quicksort costs as much as on random input.
        return _distinct(np.sort(self.positions, kind="stable"))

    def first(self, allowed: Bools, below: int) -> tuple[int, int] | None:
        """The first cell (flat index, pool-major) shared with an entry before position `below` that
        `allowed` (per position) admits, and the last such entry that has it; None if there is none."""
        if len(self.positions) <= SMALL:
            return self._first_few(allowed, below)
        keep = (self.positions < below) & allowed[self.positions]
        if not keep.any():
            return None
        pooled, at, common = self.pooled, self.at, self.common
        # The lowest of the words' lowest NodePools is the lowest bit of their union, and so is the lowest
        # shared slot of the words at the first place in that NodePool: two ORs, no lowest bit per word. The
        # reductions read the kept words in place (where=), not copies of them.
        union = np.bitwise_or.reduce(pooled, axis=0, where=keep[:, None]).tolist()
        word = next(w for w, bits in enumerate(union) if bits)
        bit = cellset.low_bit(union[word])
        here = keep & ((pooled[:, word] >> np.uint64(bit)) & np.uint64(1) != 0)
        first = int(at.min(where=here, initial=_NO_PLACE))
        here &= at == first
        low = cellset.low_bit(int(np.bitwise_or.reduce(common, where=here)))
        has = here & ((common >> np.uint64(low)) & np.uint64(1) != 0)
        return (word * 64 + bit) * self.block + first * 64 + low, int(self.positions.max(where=has, initial=-1))

    def _first_few(self, allowed: Bools, below: int) -> tuple[int, int] | None:
        """`first` over a few words, in Python, with each word's NodePools and bits as ints."""
        pooled = (self.pooled[:, 0].tolist() if self.pooled.shape[1] == 1
                  else [sum(w << (64 * i) for i, w in enumerate(pools)) for pools in self.pooled.tolist()])
        kept = [(position, pools, at, common)
                for position, admitted, pools, at, common in zip(
                    self.positions.tolist(), allowed[self.positions].tolist(), pooled, self.at.tolist(),
                    self.common.tolist(), strict=True)
                if position < below and admitted]
        if not kept:
            return None
        pool, slot = min(((pools & -pools).bit_length() - 1, at * 64 + (common & -common).bit_length() - 1)
                         for _, pools, at, common in kept)
        last = max(position for position, pools, at, common in kept
                   if pools >> pool & 1 and at == slot // 64 and common >> slot % 64 & 1)
        return pool * self.block + slot, last


_WORD = (1 << 64) - 1


def _meet(pooled: Words, pools: int) -> Bools:
    """Keeps in each row's NodePool words those of `pools`; whether any is left, per row. Column by column:
    numpy broadcasting over a row of two or three words costs several times a pass per column."""
    pooled[:, 0] &= np.uint64(pools & _WORD)
    keep: Bools = pooled[:, 0] != 0
    for w in range(1, pooled.shape[1]):
        pooled[:, w] &= np.uint64(pools >> (64 * w) & _WORD)
        keep |= pooled[:, w] != 0
    return keep


# Above any place of a word in a block: the start of a minimum over places.
_NO_PLACE = np.iinfo(np.int64).max


def _starts(ascending: Ints) -> Ints:
    """Where each run of equal values begins in an ascending array (np.unique sorts, or hashes, anew)."""
    return np.flatnonzero(np.concatenate(([True], ascending[1:] != ascending[:-1])))


def _distinct(ascending: Ints) -> Ints:
    return ascending[_starts(ascending)] if len(ascending) > 1 else ascending


@dataclasses.dataclass(frozen=True, eq=False)
class Owners:
    """Who holds each cell of one field in the baseline: the first applied overlay (by position) that
    sets it there, or -1; and per position how many cells that overlay holds, with its claim's
    NodePools and the union of its blocks (its fold), so that whether a claim lies inside a product
    of NodePools and slots is a few array operations over the claims, not a step per cell."""

    owner: npt.NDArray[np.int32]
    claimed: Ints
    # Per position: how many cells the positions before it hold (len(claimed) + 1 of them).
    held_before: Ints
    # Per position: its claim's NodePools as words; its fold's non-zero words (position, place, bits).
    pools: Words
    fold_position: Ints
    fold_at: Ints
    fold_values: Words

    def __post_init__(self) -> None:
        frozen(self.owner, self.claimed, self.held_before, self.pools, self.fold_position, self.fold_at,
               self.fold_values)

    @classmethod
    def build(cls, claims: Sequence[tuple[int, cellset.Cells]], entries: int, pools: int, block: int) -> Owners:
        """`claims`: (position, the cells where its value is in effect): disjoint, as Karpenter's
        first-writer-wins store makes them."""
        owner = np.full(pools * block, -1, dtype=np.int32)
        parts = [(position, p, bits) for position, cells in claims for p, bits in cells.parts]
        part, at, values = _block_words([bits for _, _, bits in parts])
        set_bits = np.unpackbits(values.astype("<u8").view(np.uint8), bitorder="little").view(np.bool_).nonzero()[0]
        part, slot = part[set_bits // 64], at[set_bits // 64] * 64 + set_bits % 64
        position = np.array([position for position, _, _ in parts], dtype=np.int64)
        # Most claims lie in one NodePool: those in one step, the others a step per part.
        lone = np.array([p & (p - 1) == 0 for _, p, _ in parts], dtype=bool)
        pool = np.array([p.bit_length() - 1 for _, p, _ in parts], dtype=np.int64)
        single = lone[part]
        owner[pool[part[single]] * block + slot[single]] = position[part[single]]
        starts = np.searchsorted(part, np.arange(len(parts) + 1))
        for k in np.flatnonzero(~lone).tolist():
            where = ones(parts[k][1], pools)[:, None] * block + slot[starts[k]:starts[k + 1]][None, :]
            owner[where.ravel()] = parts[k][0]
        held = owner[owner >= 0]
        claimed = np.bincount(held, minlength=entries).astype(np.int64)
        pool_words = max(1, -(-pools // 64))
        union = [0] * entries
        for i, cells in claims:
            union[i] = cells.pools()
        folding = [(i, cells.fold()) for i, cells in claims if cells]
        fold, fold_at, fold_values = _block_words([bits for _, bits in folding])
        return cls(owner, claimed, np.concatenate(([0], np.cumsum(claimed))).astype(np.int64),
                   np.frombuffer(b"".join(p.to_bytes(pool_words * 8, "little") for p in union),
                                 dtype="<u8").astype(np.uint64).reshape(entries, pool_words),
                   np.array([i for i, _ in folding], dtype=np.int64)[fold], fold_at, fold_values)

    def emptied(self, cells: cellset.Cells, at: int) -> Ints:
        """The positions >= `at` holding cells, all of which are among these."""
        # Cell by cell costs as many cells as the set has, claim by claim as many words as the claims have.
        if len(cells.parts) != 1 or cells.bit_count() < GATHER * len(self.fold_values):
            return self._emptied_at(flat(cells), at)
        # A product: a claim lies inside it iff its NodePools and its fold do. Only positions >= `at` are read.
        (pools, bits), = cells.parts
        first = int(np.searchsorted(self.fold_position, at)) if at else 0
        position, place, values = self.fold_position[first:], self.fold_at[first:], self.fold_values[first:]
        outside = (values & ~words(bits, -(-cells.block // 64))[place]) != 0
        inside = self.claimed[at:] > 0
        for w in range(self.pools.shape[1]):
            inside &= (self.pools[at:, w] & np.uint64(~(pools >> (64 * w)) & _WORD)) == 0
        inside[position[outside] - at] = False
        return np.flatnonzero(inside) + at

    def _emptied_at(self, indices: Ints, at: int) -> Ints:
        held = self.owner[indices]
        held = held[held >= at]
        if not len(held):
            return NO_INTS
        counts = np.bincount(held, minlength=len(self.claimed))
        return np.flatnonzero((counts == self.claimed) & (counts > 0)).astype(np.int64)
