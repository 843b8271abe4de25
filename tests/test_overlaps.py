"""The packed answers of overlaps.Overlaps against the cell-set algebra they stand for: which of many sets meet,
or lie within, a given one, over random sets (several NodePool and block words, products and unions, empty
sets, and a subset of the positions asked)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from simulation import once
from simulation.analysis import overlaps
from simulation.semantics import cellset

# More than one 64-bit word of NodePools and of block, so that the packing's word boundaries are crossed.
POOLS = 70
BLOCK = 130


@st.composite
def cell_sets(draw: st.DrawFn) -> cellset.Cells:
    """A product most of the time, as an overlay's cells are; else any NodePool -> block function."""
    bits = st.integers(0, 2**BLOCK - 1) | st.sampled_from([0, 1, 1 << (BLOCK - 1), (1 << 64) | 3])
    if draw(st.booleans()):
        pools = draw(st.integers(0, 2**POOLS - 1) | st.sampled_from([1, 1 << (POOLS - 1)]))
        return cellset.Cells.product(pools, draw(bits), BLOCK)
    palette = draw(st.lists(bits, min_size=1, max_size=3))
    chosen = draw(st.lists(st.integers(0, POOLS - 1), max_size=6))
    return cellset.Cells.grouped(((1 << p, draw(st.sampled_from(palette))) for p in chosen), BLOCK)


def _both_ways(ask: Callable[[], int]) -> set[int]:
    """The answer with the arrays and with a test of each (overlaps.FEW decides which, by how many are asked), the
    arrays gathering the asked blocks' words and reading every block's (overlaps.GATHER decides which), the rows
    asked or every row (overlaps.WHOLE decides which)."""
    answers = set()
    for few, gather, whole in ((-1, 0, 0), (-1, 1 << 20, 0), (-1, 0, 1 << 20), (-1, 1 << 20, 1 << 20), (1 << 20, 1, 4)):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(overlaps, "FEW", few)
            patch.setattr(overlaps, "GATHER", gather)
            patch.setattr(overlaps, "WHOLE", whole)
            answers.add(ask())
    return answers


# Each packed question, and the cell-set test it answers for every position at once.
QUESTIONS = [("meeting", cellset.Cells.intersects), ("within", cellset.Cells.within)]


@pytest.mark.parametrize(("question", "each"), QUESTIONS, ids=[q for q, _ in QUESTIONS])
@given(sets=st.lists(cell_sets(), max_size=12), query=cell_sets(), among=st.integers(min_value=0))
def test_packed_answer_is_the_test_of_each(question: str, each: Callable[[cellset.Cells, cellset.Cells], bool],
                                           sets: list[cellset.Cells], query: cellset.Cells, among: int) -> None:
    among &= (1 << len(sets)) - 1
    expected = sum(1 << i for i, s in enumerate(sets) if among >> i & 1 and each(s, query))
    ask = getattr(overlaps.Overlaps.build(sets), question)
    assert _both_ways(lambda: ask(query, among)) == {expected}


@given(sets=st.lists(cell_sets(), max_size=12), query=cell_sets(), start=st.integers(0, 13))
# A set of several products before `start`, within the query: not asked.
@example(sets=[cellset.Cells.grouped([(1, 1), (2, 2)], BLOCK)], query=cellset.Cells.product(3, 3, BLOCK), start=1)
# No set of one product (no block row): the empty and several-product rows alone.
@example(sets=[cellset.Cells.grouped([], BLOCK), cellset.Cells.grouped([(1, 1), (2, 2)], BLOCK)],
         query=cellset.Cells.product(3, 3, BLOCK), start=0)
def test_inside_is_within_from_start(sets: list[cellset.Cells], query: cellset.Cells, start: int) -> None:
    # The claims below a candidate that it empties: the non-empty sets from `start` on, within its cells.
    expected = sum(1 << i for i, s in enumerate(sets) if i >= start and s and s.within(query))
    packed = overlaps.Overlaps.build(sets)
    assert _both_ways(lambda: packed.inside(query, start)) == {expected}


def test_copies_share_one_block_row() -> None:
    # The point of the table: one NodePool's copy of an overlay per NodePool is one block, tested once.
    sets = [cellset.Cells.product(1 << p, 0b1010, BLOCK) for p in range(POOLS)]
    packed = overlaps.Overlaps.build(sets)
    assert len(packed.arrays.block_start) == 2
    assert _both_ways(lambda: packed.meeting(cellset.Cells.product(0b101, 0b10, BLOCK), (1 << POOLS) - 1)) == {0b101}


def test_memory_follows_the_non_zero_words() -> None:
    # One instance type's offerings per overlay, type after type along a catalog of 2,000 (8,000 slots, 125 words):
    # packed whole, the blocks would be 2,000 x 125 words; kept sparse, one word each.
    types = 2_000
    sets = [cellset.Cells.product(1, 0b1111 << 4 * i, 4 * types) for i in range(types)]
    packed = overlaps.Overlaps.build(sets)
    arrays = packed.arrays
    assert len(arrays.word_values) == types
    held = sum(a.nbytes for a in (arrays.pools, arrays.block_of, arrays.word_block, arrays.word_at,
                                  arrays.word_values, arrays.block_start))
    assert held <= 64 * types
    query = cellset.Cells.product(1, 0b1 << 4 * 1_500 | 0b1000 << 4 * 7, 4 * types)
    assert _both_ways(lambda: packed.meeting(query, (1 << types) - 1)) == {1 << 1_500 | 1 << 7}


@given(sets=st.lists(cell_sets(), max_size=overlaps.FEW), query=cell_sets(), start=st.integers(0, 13))
def test_a_few_sets_are_answered_unpacked(sets: list[cellset.Cells], query: cellset.Cells, start: int) -> None:
    # A one-shot check's snapshot of the few overlays a candidate needs: numpy's import costs more than its questions.
    table = overlaps.Overlaps.build(sets)
    every = (1 << len(sets)) - 1
    assert table.meeting(query, every) == sum(1 << i for i, s in enumerate(sets) if s.intersects(query))
    assert table.within(query, every) == sum(1 << i for i, s in enumerate(sets) if s.within(query))
    assert table.inside(query, start) == sum(1 << i for i, s in enumerate(sets) if i >= start and s and s.within(query))
    assert not once.made(table, "arrays")
