"""Which of many cell sets meet a given one, answered for all of them at once: the prepared entries' cells
packed into arrays, so that a broad candidate's thousands of same-weight neighbours cost a few whole-array
steps, not an overlap test each in Python. No rule lives here: it is set algebra (cellset.Cells.intersects
over every entry), and tests/test_overlaps.py holds it to exactly that.

Almost every set is one product (NodePools x a block of offering slots, cellset's docstring says why), so a
set meets a product iff its NodePools meet the product's and its block meets the product's block. Distinct
blocks are far fewer than entries (a block is shared by every NodePool's copy of an overlay): they are
tested once each, and each entry reads its block's answer. The rare sets of several products are tested one
by one.

The blocks are kept sparse, as their non-zero 64-bit words only: a block is as wide as the catalog's offering
slots, but an overlay on one instance type fills one word of it (10,000 InstanceTypes: 40,000 slots, 625 words
a block; packed whole, the distinct blocks were 50 MB per table, quadratic in the catalog).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

from simulation import once
from simulation.analysis import arrays
from simulation.semantics import cellset

# Up to this many positions asked, each is tested on its own: numpy's fixed cost per call is more than their tests
# (at 2,000 overlays on the default catalog, 75-word blocks, the arrays are cheaper from about 130 asked).
FEW = 64
# The non-zero words of the blocks asked are gathered while they are at most this share of every block's; past
# that, every block's are read in one step (gathering costs a few index arrays more than reading).
GATHER = 0.5
# At least one position in this many asked, `meeting` reads every row and applies the mask last: picking the
# positions asked and gathering their rows costs more than the rows not asked (on the row-5 workload, 801 of 2,000
# positions: 126 -> 89 us).
WHOLE = 4

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


@dataclasses.dataclass(frozen=True)
class Packed:
    """Cell sets by position, packed: per position its NodePools' words and the index of its block (-1: empty
    or not one product); the distinct blocks' non-zero words; the positions of sets of several products."""

    pools: npt.NDArray[np.uint64]
    block_of: npt.NDArray[np.int64]
    several: tuple[int, ...]
    # The distinct blocks' non-zero words, ascending by (block, word): block k's are at
    # block_start[k]:block_start[k + 1]. `width` is the widest block's words.
    word_block: npt.NDArray[np.int64]
    word_at: npt.NDArray[np.int64]
    word_values: npt.NDArray[np.uint64]
    block_start: npt.NDArray[np.int64]
    width: int

    @classmethod
    def of(cls, sets: Sequence[cellset.Cells]) -> Packed:
        import numpy as np  # arrays.py says why it is imported here

        # Keyed with the bit length: an int hashes to its value modulo 2**61 - 1, so one type's offerings shifted
        # along a catalog of thousands of types would take 61 hashes in all (cellset.Cells.__hash__).
        found: dict[tuple[int, int], int] = {}
        pools_of, block_of, several = [], [], []
        for i, s in enumerate(sets):
            if len(s.parts) == 1:
                (pools, bits), = s.parts
                pools_of.append(pools)
                block_of.append(found.setdefault((bits.bit_length(), bits), len(found)))
            else:
                pools_of.append(0)
                block_of.append(-1)
                if s.parts:
                    several.append(i)
        pool_words = _words(max((p.bit_length() for p in pools_of), default=0))
        word_block, word_at, word_values = _sparse(found)
        packed = cls(_packed(pools_of, pool_words), np.array(block_of, dtype=np.int64), tuple(several),
                     word_block, word_at, word_values,
                     np.searchsorted(word_block, np.arange(len(found) + 1)).astype(np.int64, copy=False),
                     _words(max((length for length, _ in found), default=0)))
        for array in (packed.pools, packed.block_of, packed.word_block, packed.word_at, packed.word_values,
                      packed.block_start):
            array.flags.writeable = False
        return packed

    def products(self, among: int) -> tuple[arrays.Ints, arrays.Ints, arrays.Ints]:
        """The positions of `among` whose set is one product, and each one's block; the other positions."""
        at = arrays.ones(among, len(self.block_of))
        block = self.block_of[at]
        if len(block) == 0 or block.min() >= 0:
            # Every set a product (almost every table): no split.
            return at, block, at[:0]
        one = block >= 0
        return at[one], block[one], at[~one]

    def per_block(self, block: arrays.Ints, row: npt.NDArray[np.uint64]) -> npt.NDArray[np.bool_]:
        """Per position, whether its block shares a bit with `row`: asked once per distinct block (a crowd's NodePool
        copies share theirs), the distinct ones marked in a row over every block, not sorted out (numpy's unique
        sorts), their non-zero words gathered; or, where those are most of all, every block's non-zero words read."""
        import numpy as np

        count = len(self.block_start) - 1
        present = np.zeros(count, dtype=np.bool_)
        present[block] = True
        distinct = np.flatnonzero(present)
        first, last = self.block_start[distinct], self.block_start[distinct + 1]
        sizes = last - first
        total = int(sizes.sum())
        answer = np.zeros(count, dtype=np.bool_)
        if total <= GATHER * len(self.word_values):
            # Each asked block's run of words, as one index array: its start repeated along the run, plus the
            # position in the run.
            words = np.repeat(first - (np.cumsum(sizes) - sizes), sizes) + np.arange(total)
            answer[self.word_block[words[(self.word_values[words] & row[self.word_at[words]]) != 0]]] = True
        else:
            answer = self.every_block(row)
        return answer[block]

    def every_block(self, row: npt.NDArray[np.uint64]) -> npt.NDArray[np.bool_]:
        """Per block, whether it shares a bit with `row`: every block's non-zero words read in one step (asked of
        every row, every block is asked: none is marked or counted first)."""
        import numpy as np

        answer = np.zeros(len(self.block_start) - 1, dtype=np.bool_)
        answer[self.word_block[(self.word_values & row[self.word_at]) != 0]] = True
        return answer


@dataclasses.dataclass(frozen=True)
class Overlaps:
    """Cell sets by position, and the same packed (`arrays`) where they are more than FEW: a table of a few (a
    one-shot check's snapshot of the handful of overlays a candidate needs) tests each set and never imports numpy,
    which costs more than all its questions (some 0.1 s)."""

    sets: Sequence[cellset.Cells]

    @classmethod
    def build(cls, sets: Sequence[cellset.Cells]) -> Overlaps:
        table = cls(sets)
        if len(sets) > FEW:
            table.arrays  # noqa: B018 -- packed now: a server's snapshot is warmed whole before it answers
        return table

    @once.Once
    def arrays(self) -> Packed:
        return Packed.of(self.sets)

    def meeting(self, cells: cellset.Cells, among: int) -> int:
        """The positions of `among` (a mask) whose set shares a cell with `cells`, as a mask: work in proportion
        to `among`, which the callers narrow first."""
        if not cells or not among:
            return 0
        asked = among.bit_count()
        if asked <= FEW:
            return self._each_meeting(among, cells) if len(cells.parts) == 1 else self._each(among, cells.intersects)
        import numpy as np

        t = self.arrays
        if asked * WHOLE >= len(self.sets) and len(t.block_start) > 1:
            # Most rows asked (a broad candidate's same-weight neighbours): every row read, the mask applied last,
            # with no positions picked and gathered first. A row of several products or none (block -1) reads the
            # last block's answer, but its NodePool words are zero: it meets nothing here.
            count = len(self.sets)
            hit = np.zeros(count, dtype=np.bool_)
            for pools, bits in cells.parts:
                hit |= _nonzero(t.pools & _row(pools, t.pools.shape[1])) & t.every_block(
                    _row(bits, t.width))[t.block_of]
            out = arrays.of_flags(hit & arrays.flags(among, count)[:count])
        else:
            at, block, _ = t.products(among)
            hit = np.zeros(len(at), dtype=np.bool_)
            for pools, bits in cells.parts:
                hit |= _nonzero(t.pools[at] & _row(pools, t.pools.shape[1])) & t.per_block(
                    block, _row(bits, t.width))
            out = arrays.mask(at[hit], len(self.sets))
        for i in t.several:
            if among >> i & 1 and self.sets[i].intersects(cells):
                out |= 1 << i
        return out

    def within(self, cells: cellset.Cells, among: int) -> int:
        """The positions of `among` whose set has no cell outside `cells`, as a mask."""
        if len(cells.parts) != 1:
            # Inside a union of several products is not a per-product question: asked of each.
            return self._each(among, lambda s: s.within(cells))
        if among.bit_count() <= FEW:
            return self._each_within(among, cells)
        t = self.arrays
        (pools, bits), = cells.parts
        at, block, rest = t.products(among)
        outside = (_nonzero(t.pools[at] & ~_row(pools, t.pools.shape[1]))
                   | t.per_block(block, ~_row(bits, t.width)))
        out = arrays.mask(at[~outside], len(self.sets))
        for i in rest.tolist():
            if self.sets[i].within(cells):
                out |= 1 << i
        return out

    def inside(self, cells: cellset.Cells, start: int) -> int:
        """The positions from `start` on whose set is not empty and has no cell outside `cells`, as a mask: the
        rows from `start` read in one step, with no mask of positions to unpack first (a broad candidate's
        question about the claims of every overlay below it)."""
        if len(cells.parts) != 1 or len(self.sets) <= FEW:
            return self.within(cells, self.filled >> start << start)
        t = self.arrays
        (pools, bits), = cells.parts
        block, out = t.block_of[start:], 0
        if len(t.block_start) > 1:
            # Whole rows from `start`, no positions picked first: a row of several products or none (block -1)
            # reads the last block's answer, which `block >= 0` then drops.
            # From at least a WHOLE-th of the rows (a broad candidate high in the order), every block's words are
            # read at once, as `meeting` does: marking and gathering the blocks asked costs more than the rest.
            outside = (t.every_block(~_row(bits, t.width))[block] if (len(block) * WHOLE >= len(self.sets))
                       else t.per_block(block, ~_row(bits, t.width)))
            inside = (block >= 0) & ~_nonzero(t.pools[start:] & ~_row(pools, t.pools.shape[1])) & ~outside
            out = arrays.of_flags(inside) << start
        for i in t.several:
            if i >= start and self.sets[i].within(cells):
                out |= 1 << i
        return out

    @property
    def filled(self) -> int:
        """The positions whose set is not empty, as a mask."""
        if len(self.sets) <= FEW:
            return sum(1 << i for i, s in enumerate(self.sets) if s)
        import numpy as np

        t = self.arrays
        out = arrays.mask(np.flatnonzero(t.block_of >= 0), len(self.sets))
        for i in t.several:
            out |= 1 << i
        return out

    def _each_within(self, among: int, product: cellset.Cells) -> int:
        """`_each` with Cells.within of one product, a product's test in line: a narrow candidate's few dozen claims
        (shadows._emptied) cost a call and a loop over parts each otherwise."""
        (pools, bits), = product.parts
        outside_pools, outside_bits = ~pools, ~bits
        out = 0
        while among:
            low = among & -among
            s = self.sets[low.bit_length() - 1]
            if len(s.parts) == 1:
                (p, b), = s.parts
                if not (p & outside_pools or b & outside_bits):
                    out |= low
            elif s.within(product):
                out |= low
            among ^= low
        return out

    def _each_meeting(self, among: int, product: cellset.Cells) -> int:
        """`_each` with Cells.intersects of one product, its test in line: a narrow candidate's few dozen
        same-weight neighbours cost a call per set otherwise."""
        (pools, bits), = product.parts
        out = 0
        while among:
            low = among & -among
            for p, b in self.sets[low.bit_length() - 1].parts:
                if p & pools and b & bits:
                    out |= low
                    break
            among ^= low
        return out

    def _each(self, among: int, test: Callable[[cellset.Cells], bool]) -> int:
        out = 0
        while among:
            low = among & -among
            if test(self.sets[low.bit_length() - 1]):
                out |= low
            among ^= low
        return out


def _nonzero(rows: npt.NDArray[np.uint64]) -> npt.NDArray[np.bool_]:
    """Per row of words, whether any is set."""
    return cast("npt.NDArray[np.bool_]", rows.any(axis=1))


def _words(bits: int) -> int:
    return max(1, -(-bits // 64))


def _row(value: int, words: int) -> npt.NDArray[np.uint64]:
    """`value`'s low `words` 64-bit words (bits above them meet nothing in the table)."""
    import numpy as np

    value &= (1 << 64 * words) - 1
    return np.frombuffer(value.to_bytes(words * 8, "little"), dtype=np.uint64)


def _packed(values: list[int], words: int) -> npt.NDArray[np.uint64]:
    import numpy as np

    raw = b"".join(v.to_bytes(words * 8, "little") for v in values)
    # Read-only over the bytes, as the table keeps it: a copy would cost as much again.
    return np.frombuffer(raw, dtype=np.uint64).reshape(len(values), words)


def _sparse(blocks: dict[tuple[int, int], int]) -> tuple[arrays.Ints, arrays.Ints, npt.NDArray[np.uint64]]:
    """The non-zero 64-bit words of the blocks (by index; keyed by bit length and value) as (block, word, value),
    ascending: each block packed only as wide as itself, so the work and memory are those of the ints."""
    import numpy as np

    sizes = [_words(length) for length, _ in blocks]
    raw = b"".join(bits.to_bytes(size * 8, "little") for (_, bits), size in zip(blocks, sizes, strict=True))
    flat = np.frombuffer(raw, dtype=np.uint64)
    starts = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=starts[1:])
    at = np.flatnonzero(flat)
    block = np.searchsorted(starts, at, side="right") - 1
    return block, at - starts[block], flat[at]
