"""The prepared index's coarse neighbour query: the entries sharing a (NodePool, 64-slot range) bucket with a
target, answered from the buckets' two factors, equal those a bucket-by-bucket union finds."""

from __future__ import annotations

import itertools
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from simulation.analysis import checks, overlaps
from simulation.analysis import index as ix
from simulation.semantics import cellset, merge, model
from tests import strategies

# Wider than one 64-bit word of NodePools and of slots.
POOLS = 70
BLOCK = 192

# A few NodePools of many, so that sets often share a NodePool and not a range, or a range and not a NodePool.
_FEW = st.sets(st.integers(0, 3), min_size=1, max_size=2).map(lambda ps: sum(1 << (p * 23) for p in ps))
_SLOTS = st.sets(st.integers(0, BLOCK - 1), min_size=1, max_size=3).map(lambda ones: sum(1 << i for i in ones))


def cell_sets() -> st.SearchStrategy[cellset.Cells]:
    return strategies.products(_FEW, _SLOTS, BLOCK, 2)


def _entry(name: str, cells: cellset.Cells) -> merge.Entry:
    overlay = model.Overlay(name, 1, (), None, "-1%", (), ())
    return merge.Entry(overlay, cells, cells, cells.pools(), cells.fold())


def _buckets(cells: cellset.Cells) -> set[tuple[int, int]]:
    """(NodePool, range) pairs of a set's NodePools and the ranges its fold has bits in."""
    pools = {p for p in range(POOLS) if cells.pools() >> p & 1}
    chunks = {k for k in range(-(-BLOCK // ix.CHUNK)) if cells.fold() >> (k * ix.CHUNK) & ((1 << ix.CHUNK) - 1)}
    return {(p, k) for p in pools for k in chunks}


@given(st.lists(cell_sets(), max_size=10), cell_sets())
def test_coarse_equals_the_union_of_the_buckets(entries: list[cellset.Cells], probe: cellset.Cells) -> None:
    index = ix.Index.build([_entry(f"e{i:02d}", cells) for i, cells in enumerate(entries)], POOLS)
    target = _entry("target", probe)
    expected = {index.position[e.name] for e in index.order if _buckets(e.cells) & _buckets(probe)}
    assert set(index.positions(index.coarse(target))) == expected
    # An entry's own stored keys answer as its cells do.
    for i, e in enumerate(index.order):
        assert index.coarse_at(index.keys[i]) == index.coarse(e)


# No deadline: the first example past ix.FEW imports numpy (arrays.py imports it on first need).
@settings(deadline=None)
@given(st.integers(1, 300).flatmap(lambda n: st.tuples(st.just(n), st.sets(st.integers(0, n - 1)))))
def test_masks_and_positions_are_inverse(case: tuple[int, set[int]]) -> None:
    # A few positions take the bit-by-bit paths, more (past ix.FEW) numpy's: both sides of each threshold.
    count, chosen = case
    index = ix.Index.build([_entry(f"e{i:03d}", cellset.Cells(((1, 1),), BLOCK)) for i in range(count)], POOLS)
    mask = sum(1 << p for p in chosen)
    assert index.positions(mask) == sorted(chosen)
    assert index.of(chosen) == mask


# No deadline: past overlaps.FEW the packed path imports numpy on first need.
@settings(deadline=None)
@given(st.lists(cell_sets(), min_size=1, max_size=40),
       st.lists(st.tuples(st.integers(0, 39), st.integers(0, 2**40), st.booleans()), max_size=8), st.booleans())
def test_a_remembering_crowd_answers_as_a_fresh_one(entries: list[cellset.Cells],
                                                    questions: list[tuple[int, int, bool]], packed: bool) -> None:
    """A request's crowd remembers what `meeting` found for each (level, cells) and tests only what it was not asked
    before: any sequence of questions (overlapping, nested, repeated, at either level, more distinct cells than it
    keeps) is answered as a crowd that remembers nothing answers each."""
    index = ix.Index.build([_entry(f"e{i:02d}", cells) for i, cells in enumerate(entries)], POOLS)
    if packed:
        index.warm()
    skip = {index.names[0]}
    remembering, fresh = index.crowd(skip, remember=True), index.crowd(skip)
    fields = (merge.PRICE, merge.Field(merge.Kind.CAPACITY, "cpu"))
    # An entry's own cells (they meet it, and often others), asked of everyone and then of parts.
    asked = [(entries[k % len(entries)], among, fields[level]) for k, among, level in questions]
    asked = [*((cells, -1, field) for cells, _, field in asked), *asked]
    asked += [(cellset.Cells(((1, 1 << i),), BLOCK), -1, fields[0]) for i in range(ix.REMEMBERED + 1)]
    asked += asked[:3]
    for cells, among, field in asked:
        assert remembering.meeting(field, cells, among) == fresh.meeting(field, cells, among)
    assert len(remembering.known or {}) <= ix.REMEMBERED


# No deadline: past overlaps.FEW the packed path imports numpy on first need.
@settings(deadline=None)
@given(st.lists(cell_sets(), min_size=1, max_size=40),
       st.lists(st.tuples(st.integers(0, 39), st.integers(0, 2**40), st.booleans(), st.integers(0, 2)), max_size=12),
       st.booleans())
def test_the_requests_after_one_answer_from_what_it_met_as_fresh_crowds(
        entries: list[cellset.Cells], questions: list[tuple[int, int, bool, int]], packed: bool) -> None:
    """The snapshot keeps its requests' `meeting` answers (Index.met) for the requests after: crowds of different
    changes (members), one per request, asking about the same cells in turn answer as crowds that remember
    nothing."""
    index = ix.Index.build([_entry(f"e{i:02d}", cells) for i, cells in enumerate(entries)], POOLS)
    if packed:
        index.warm()
    skips = [set(), {index.names[0]}, {index.names[-1], index.names[len(entries) // 2]}]
    fields = (merge.PRICE, merge.Field(merge.Kind.CAPACITY, "cpu"))
    for k, among, level, which in [*questions, *questions[:4]]:
        cells, field, skip = entries[k % len(entries)], fields[level], skips[which]
        assert index.crowd(skip, remember=True).meeting(field, cells, among) == index.crowd(skip).meeting(
            field, cells, among)
        assert index.crowd(skip, remember=True).meeting(field, cells, -1) == index.crowd(skip).meeting(
            field, cells, -1)
    assert len(index.met) <= ix.REMEMBERED


# No deadline: the packed path imports numpy on first need.
@settings(deadline=None)
@given(st.lists(cell_sets(), min_size=1, max_size=40), st.integers(0, 39), cell_sets(),
       st.just(-1) | st.integers(min_value=0), st.sampled_from([0, 1, 64, 2**20]), st.booleans())
def test_meeting_is_the_plain_test_whichever_buckets_narrow_it(entries: list[cellset.Cells], k: int,
                                                               other: cellset.Cells, among: int, spread: int,
                                                               packed: bool) -> None:
    """`meeting` answers with the entries of `among` whose cells meet the question's, whether its NodePools' and
    chunks' buckets narrow the question first or, for a fold wider than 1/SPREAD of a block, its NodePools' only."""
    index = ix.Index.build([_entry(f"e{i:02d}", cells) for i, cells in enumerate(entries)], POOLS)
    # An entry's own cells (they meet it, and often others) widened by another set.
    cells = entries[k % len(entries)] | other
    if packed:
        index.warm()
    expected = sum(1 << i for i, e in enumerate(index.order) if among >> i & 1 and e.cells.intersects(cells))
    with mock.patch.object(overlaps, "FEW", 0), mock.patch.object(ix, "FEW", 0), \
            mock.patch.object(ix, "SPREAD", spread):
        assert index.crowd(set()).meeting(merge.PRICE, cells, among) == expected


# No deadline: past ix.FEW, numpy is imported on the first example.
@settings(deadline=None)
@given(st.lists(cell_sets(), max_size=24), st.just(-1) | st.integers(min_value=0))
def test_each_reads_the_entries_in_order(entries: list[cellset.Cells], members: int) -> None:
    # Past index.FEW the rest come in one step (-1: all of them): every entry once, in Karpenter's order, either way.
    index = ix.Index.build([_entry(f"e{i:02d}", cells) for i, cells in enumerate(entries)], POOLS)
    members &= (1 << len(entries)) - 1
    crowd = index.crowd(set())
    assert list(crowd.each(members)) == crowd.entries(members) == [index.order[i] for i in index.positions(members)]


@given(cells=cell_sets(), most=st.integers(0, 4))
def test_narrow_keys_are_the_keys_of_cells_over_at_most_that_many_ranges(cells: cellset.Cells, most: int) -> None:
    pools, chunks = ix.keys_of(cells)
    assert ix.narrow_keys(cells, most) == ((pools, chunks) if len(chunks) <= most else None)


def _weighted(name: str, weight: int, cells: cellset.Cells) -> merge.Entry:
    overlay = model.Overlay(name, weight, (), None, "-1%", (), ())
    return merge.Entry(overlay, cells, cells, cells.pools(), cells.fold())


# No deadline: the packed claims import numpy on first need.
@settings(deadline=None)
@given(st.lists(st.tuples(cell_sets(), st.integers(1, 4)), min_size=2, max_size=30),
       st.lists(st.integers(0, 59), min_size=1, max_size=12), cell_sets(), st.integers(1, 3))
def test_a_remembered_inside_is_the_claims_inside_asked_afresh(entries: list[tuple[cellset.Cells, int]],
                                                                asked: list[int], other: cellset.Cells,
                                                                bound: int) -> None:
    """Index.inside keeps what the baseline's claims answered per (field, cells), at most REMEMBERED (all forgotten
    at once past it): asked again, or of a new baseline over the same entries (settled), it answers as the claims'
    table asked afresh."""
    built = [_weighted(f"e{i:02d}", weight, cells) for i, (cells, weight) in enumerate(entries)]
    # An entry's own cells, or widened by another set: claims within them, and claims not.
    questions = [entries[k % len(entries)][0] | (other if k >= len(entries) else cellset.Cells((), BLOCK))
                 for k in asked]
    index = ix.Index.build(built, POOLS).settled(merge.karpenter(built))
    with mock.patch.object(ix, "REMEMBERED", bound):
        for cells in [*questions, *questions]:
            assert index.inside(merge.PRICE, cells) == index.claims(merge.PRICE)[1].inside(cells, 0)
            assert len(index.insides) <= bound
        # Another baseline: the first entry gone from Karpenter's loop, so its claim passes to those below it.
        again = index.settled(merge.karpenter(built[1:]))
        for cells in questions:
            assert again.inside(merge.PRICE, cells) == again.claims(merge.PRICE)[1].inside(cells, 0)


# No deadline: with the cutoffs at nothing, numpy is imported on the first example.
@settings(deadline=None)
@given(st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=40), st.sampled_from("abcdefghi"))
def test_names_are_ordered_alike_one_by_one_and_in_numpy(names: list[str], before: str) -> None:
    # A small snapshot's (a one-shot check's) questions by name are answered one by one, a large one's in numpy
    # (the cutoffs at nothing): the entries named before a name.
    index = ix.Index.build([_entry(f"{n}{i:02d}", cellset.Cells(((1, 1),), BLOCK)) for i, n in enumerate(names)],
                           POOLS)
    below = {p for p, e in enumerate(index.order) if e.name < before}
    for cutoffs in ((ix.FEW, ix.UNPACKED), (0, 0)):
        with mock.patch.object(ix, "FEW", cutoffs[0]), mock.patch.object(ix, "UNPACKED", cutoffs[1]):
            assert set(index.positions(index.named_before(before))) == below


def test_the_next_overlay_by_name_before_a_place_is_the_first_one_passing_them_all_would_find() -> None:
    # checks._ByName walks a tree of least places, not the overlays one by one: the same position as that scan, for
    # every list of up to 6 places of 0-3 (names in list order), every start and every place.
    cells = cellset.Cells(((1, 1),), BLOCK)
    for count in range(7):
        for places in itertools.product(range(4), repeat=count):
            by_name = checks._ByName([(p, _entry(f"o{i}", cells), 0) for i, p in enumerate(places)])
            for start in range(count + 1):
                for place in range(5):
                    expected = next((k for k in range(start, count) if places[k] < place), count)
                    assert by_name.next(start, place) == expected, (places, start, place)
