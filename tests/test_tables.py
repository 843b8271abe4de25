"""The prepared snapshot's numpy tables against plain loops over cellset.Cells: the rows' "whose cells
meet this set" query, the owner table's claims and emptied overlays, and the flat-index conversions."""

from __future__ import annotations

import contextlib
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulation.analysis import tables
from simulation.semantics import cellset
from tests import strategies

# More than 64 NodePools and a block of several words, so that both span more than one 64-bit word.
POOLS = 70
BLOCK = 192


def _bits(width: int) -> st.SearchStrategy[int]:
    return st.sets(st.integers(0, width - 1), max_size=6).map(lambda ones: sum(1 << i for i in ones))


def cell_sets() -> st.SearchStrategy[cellset.Cells]:
    """Sparse in NodePools and slots, as overlays' cells are."""
    return strategies.products(_bits(POOLS), _bits(BLOCK), BLOCK, 3)


@given(cell_sets())
def test_flat_indices_round_trip(cells: cellset.Cells) -> None:
    flat = tables.flat(cells)
    assert sorted(flat.tolist()) == list(cells.bits())
    assert tables.cells_at(flat, BLOCK) == cells


# The rows answer through their word index (sets with few non-zero words) or by a scan (the rest), and read
# a meeting of a few words in Python, of more through numpy: every combination.
BOTH = pytest.mark.parametrize(("sparse", "small"), [(tables.SPARSE, tables.SMALL), (0, tables.SMALL),
                                                     (tables.SPARSE, -1), (0, -1)])


def _paths(sparse: int, small: int) -> contextlib.AbstractContextManager[Any]:
    return mock.patch.multiple(tables, SPARSE=sparse, SMALL=small)


# Also sets over every NodePool (no NodePool requirement), which the rows meet without testing NodePools.
probes = st.one_of(cell_sets(), cell_sets().map(lambda c: cellset.Cells.product((1 << POOLS) - 1, c.fold(), BLOCK)))


@BOTH
@given(st.lists(cell_sets(), max_size=12), probes, st.integers(0, 12), st.integers(0, 12))
def test_rows_hits_equal_a_loop(sparse: int, small: int, entries: list[cellset.Cells], probe: cellset.Cells,
                                lo: int, hi: int) -> None:
    rows = tables.Rows.build(enumerate(entries), POOLS)
    expected = [i for i, cells in enumerate(entries) if lo <= i < hi and cells.intersects(probe)]
    with _paths(sparse, small):
        assert rows.hits(probe, lo, hi).tolist() == expected
        assert rows.hits(probe, lo).tolist() == [i for i, cells in enumerate(entries)
                                                 if lo <= i and cells.intersects(probe)]


@given(st.lists(cell_sets(), max_size=10), cell_sets(), st.integers(0, 10))
def test_owners_equal_first_writer_wins(entries: list[cellset.Cells], probe: cellset.Cells, at: int) -> None:
    # Karpenter's store: each entry keeps the cells no earlier entry took (its claim).
    claims, taken = [], cellset.Cells((), BLOCK)
    for i, cells in enumerate(entries):
        claims.append((i, cells - taken))
        taken |= cells
    owners = tables.Owners.build(claims, len(entries), POOLS, BLOCK)
    where = tables.flat(probe)
    held = owners.owner[where]
    # A newcomer at position `at` takes the cells no entry before it set.
    before = cellset.Cells((), BLOCK)
    for cells in entries[:at]:
        before |= cells
    assert tables.cells_at(where[(held < 0) | (held >= at)], BLOCK) == probe - before
    # How many cells the entries before `at` hold.
    assert owners.held_before[min(at, len(entries))] == sum(claim.bit_count() for i, claim in claims if i < at)
    # Entries at or after `at` whose whole claim lies in the probe (and that held any): a product of the
    # probe's NodePools and slots is answered from the claims' folds (or cell by cell while it has few
    # cells), any other set cell by cell.
    product = cellset.Cells.product(probe.pools(), probe.fold(), BLOCK)
    for gather in (tables.GATHER, 0):
        with mock.patch.object(tables, "GATHER", gather):
            assert owners.emptied(probe, at).tolist() == [i for i, claim in claims
                                                         if i >= at and claim and claim.within(probe)]
            assert owners.emptied(product, at).tolist() == [i for i, claim in claims
                                                           if i >= at and claim and claim.within(product)]


def test_empty_rows_and_sets() -> None:
    rows = tables.Rows.build([], POOLS)
    assert rows.hits(cellset.Cells.product(1, 1, BLOCK)).tolist() == []
    one = tables.Rows.build([(3, cellset.Cells.product(1 << 65, 1 << 130, BLOCK))], POOLS)
    assert one.hits(cellset.Cells((), BLOCK)).tolist() == []
    assert one.hits(cellset.Cells.product(1 << 65, 1 << 130, BLOCK)).tolist() == [3]
    assert one.hits(cellset.Cells.product(1 << 64, 1 << 130, BLOCK)).tolist() == []
    assert tables.flat(cellset.Cells((), BLOCK)).tolist() == []


@BOTH
@given(st.lists(cell_sets(), min_size=1, max_size=10), probes, st.lists(st.booleans(), min_size=10, max_size=10),
       st.integers(0, 10), st.integers(0, 10))
def test_first_common_cell_and_its_last_holder_equal_a_loop(sparse: int, small: int, entries: list[cellset.Cells],
                                                            probe: cellset.Cells, allowed: list[bool], lo: int,
                                                            hi: int) -> None:
    rows = tables.Rows.build(enumerate(entries), POOLS)
    chosen = [i for i, cells in enumerate(entries) if lo <= i < hi and allowed[i] and cells.intersects(probe)]
    with _paths(sparse, small):
        found = rows.first_common(probe, lo, hi, np.array(allowed, dtype=bool))
    if not chosen:
        assert found is None
        return
    bit = min((entries[i] & probe).lowest() for i in chosen)
    assert found == (bit, max(i for i in chosen if entries[i].has(bit)))
