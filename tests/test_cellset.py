"""Factored cell sets against the flat bitsets they stand for: every operation, on random sets."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st

from simulation.semantics import cellset

POOLS = 6
BLOCK = 16


def _flat(cells: cellset.Cells) -> int:
    out = 0
    for pools, bits in cells.parts:
        for pool in range(POOLS):
            if pools >> pool & 1:
                out |= bits << (pool * BLOCK)
    return out


@st.composite
def cell_sets(draw: st.DrawFn) -> cellset.Cells:
    # Any function NodePool -> block, drawn per pool (few distinct blocks, so that parts group).
    palette = draw(st.lists(st.integers(0, 2**BLOCK - 1), min_size=1, max_size=3))
    blocks = [draw(st.sampled_from(palette)) for _ in range(POOLS)]
    return cellset.Cells.grouped(((1 << p, b) for p, b in enumerate(blocks)), BLOCK)


@given(cell_sets(), cell_sets())
def test_operations_match_flat_bitsets(a: cellset.Cells, b: cellset.Cells) -> None:
    fa, fb = _flat(a), _flat(b)
    assert _flat(a & b) == fa & fb
    assert _flat(a | b) == fa | fb
    assert _flat(a - b) == fa & ~fb
    assert a.intersects(b) == bool(fa & fb)
    assert bool(a) == bool(fa)
    assert a.bit_count() == fa.bit_count()
    assert list(a.bits()) == [i for i in range(POOLS * BLOCK) if fa >> i & 1]
    if fa:
        assert a.lowest() == (fa & -fa).bit_length() - 1
    assert all(a.has(i) == bool(fa >> i & 1) for i in range(POOLS * BLOCK))


@given(cell_sets(), cell_sets())
def test_equal_sets_have_equal_parts(a: cellset.Cells, b: cellset.Cells) -> None:
    # Canonical form: the same set built two ways compares (and hashes) equal.
    assert ((a | b) - b) | (a & b) == a
    assert hash((a & b) | (a - b)) == hash(a)
    assert ((_flat(a) == _flat(b)) == (a == b))


@given(cell_sets(), st.integers(0, 2**BLOCK - 1))
def test_map_blocks_is_the_grouped_change(a: cellset.Cells, mask: int) -> None:
    """map_blocks' path for one part (a product) against grouping the changed parts, emptied blocks too."""
    changes: list[Callable[[int], int]] = [lambda b: b & mask, lambda b: b >> 1, lambda b: b]
    for change in changes:
        expected = cellset.Cells.grouped(((p, change(b)) for p, b in a.parts), BLOCK)
        assert a.map_blocks(change) == expected
        assert _flat(a.map_blocks(change)) == _flat(expected)


# Near's shapes: blocks of several windows, so that sets are filed under fine places, per NodePool, or both.
_WIDE_BLOCK = 8 * 256


@st.composite
def spread_sets(draw: st.DrawFn) -> cellset.Cells:
    """Unions of up to three products, each a run of slots (a few instance types' offerings, or most of them)."""
    out = cellset.Cells((), _WIDE_BLOCK)
    for _ in range(draw(st.integers(1, 3))):
        pools = draw(st.integers(1, 2**POOLS - 1))
        start = draw(st.integers(0, _WIDE_BLOCK - 1))
        length = draw(st.sampled_from([1, 3, 40, 300, _WIDE_BLOCK]))
        out |= cellset.Cells.product(pools, ((1 << length) - 1) << start & (1 << _WIDE_BLOCK) - 1, _WIDE_BLOCK)
    return out


@given(st.lists(spread_sets(), max_size=12), spread_sets())
def test_near_lists_every_set_that_meets(filed: list[cellset.Cells], asked: cellset.Cells) -> None:
    near = cellset.Near()
    for number, cells in enumerate(filed):
        near.add(number, cells)
    found = near.around(asked)
    meeting = [n for n, cells in enumerate(filed) if cells.intersects(asked)]
    if found is not None:
        assert found == sorted(set(found))
        assert set(meeting) <= set(found)


def test_near_leaves_out_sets_filed_elsewhere() -> None:
    near = cellset.Near()
    one_pool = [cellset.Cells.product(1 << p, 0b111 << 600, _WIDE_BLOCK) for p in range(POOLS)]
    for number, cells in enumerate(one_pool):
        near.add(number, cells)
    near.add(POOLS, cellset.Cells.product(1, 0b111, _WIDE_BLOCK))
    assert near.around(cellset.Cells.product(0b10, 1 << 601, _WIDE_BLOCK)) == [1]
    # A set spread over every NodePool and slot asks of every set filed: reading them all is cheaper.
    assert near.around(cellset.Cells.product(2**POOLS - 1, (1 << _WIDE_BLOCK) - 1, _WIDE_BLOCK)) is None


def test_one_pattern_shifted_along_hashes_apart() -> None:
    """An instance type's offerings, type after type along a catalog of thousands: ints alone would hash them to 61
    values (modulo 2**61 - 1), and a dict keyed by them would probe through the rest."""
    shifted = [cellset.Cells.product(1, 0b1111 << 4 * i, 4 * 2000) for i in range(2000)]
    assert len({hash(c) for c in shifted}) == len(shifted)
