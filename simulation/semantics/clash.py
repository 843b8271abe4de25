"""The guard's stricter same-weight test: two overlays of one weight that set the same field on a common
cell clash, whatever Karpenter's own test (merge) makes of them. Each overlay's clashes are listed up to a
limit per field, and the rest counted.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import operator
from collections.abc import Iterable, Sequence

from simulation import findings
from simulation.semantics import cells, cellset, merge

# Same-weight clashes reported per overlay and field; the rest are counted, not listed.
LIMIT = 5


@dataclasses.dataclass(frozen=True)
class Clash:
    """The guard's finding: two same-weight overlays set one field on a common cell. `more` counts the
    further overlays `later` clashes with on that field beyond the ones reported."""

    later: str
    earlier: str
    field: merge.Field
    cells: cellset.Cells
    more: int = 0


def witness(grid: cells.Grid, common: cellset.Cells, field: merge.Field) -> findings.Witness | None:
    """The cell a clash names, chosen once for every view: of the pair's common cells for the field, the one
    `Grid.witness` picks (an offering for a price, a (NodePool, type) otherwise). The same-weight-conflict
    finding and the dropped overlay's Conflict status both name it."""
    return grid.witness(common, with_offering=field == merge.PRICE)


def meets(a: merge.Entry, b: merge.Entry) -> bool:
    """The guard's test for one pair at one weight: both set some field on a common cell. `same_weight`,
    `partners` and `clashes_with` ask it of many overlays at once, as masks over a crowd."""
    if not a.may_overlap(b):
        return False
    theirs = b.fields()
    return any(f in theirs and theirs[f].intersects(cells) for f, cells in a.fields().items())


def same_weight(entries: Sequence[merge.Entry], limit: int = LIMIT) -> list[Clash]:
    """Pairs of equal-weight overlays that set the same field on a common cell: for each overlay and
    field, its first `limit` partners earlier in Karpenter's order, and how many more. Earlier overlays
    with identical cells for the field are tested once, so identical overlays cost O(overlays)."""
    out: list[Clash] = []
    for _, group in itertools.groupby(merge.ordered(entries), key=lambda e: e.overlay.weight):
        seen: dict[merge.Field, _Earlier] = {}
        for e in group:
            for field, bits in e.fields().items():
                earlier = seen.get(field)
                if earlier is None:
                    earlier = seen[field] = _Earlier(e.cells.block)
                if earlier.union.intersects(bits):
                    out += _first(e, field, bits, earlier.meeting(bits), limit)
                earlier.add(bits, e)
    return out


class _Earlier:
    """The earlier overlays of one weight setting one field, grouped by equal cells, the groups filed by where their
    cells are (cellset.Near): an overlay is tested against the groups near it, not against every group of the weight
    (a weight holding most overlays of a cluster with many NodePools)."""

    def __init__(self, block: int) -> None:
        self.union = cellset.Dense(block)
        self._numbers: dict[cellset.Cells, int] = {}
        self._groups: list[tuple[cellset.Cells, list[merge.Entry]]] = []
        self._near = cellset.Near()

    def add(self, bits: cellset.Cells, e: merge.Entry) -> None:
        self.union.add(bits)
        number = self._numbers.get(bits)
        if number is None:
            number = self._numbers[bits] = len(self._groups)
            self._groups.append((bits, []))
            self._near.add(number, bits)
        self._groups[number][1].append(e)

    def meeting(self, bits: cellset.Cells) -> list[tuple[cellset.Cells, list[merge.Entry]]]:
        """The groups that may meet `bits`, each once."""
        near = self._near.around(bits)
        return self._groups if near is None else [self._groups[n] for n in near]


def partners(crowd: merge.Crowd, weight: int, field: merge.Field, bits: cellset.Cells, among: int = -1) -> int:
    """The crowd's overlays (of `among`) that the guard's test pairs with an overlay of `weight` setting `field` on
    `bits`: of that weight, setting the field on a common cell."""
    return _setting_on(crowd, field, bits, among & crowd.of_weight(weight))


def met_at_any_weight(crowd: merge.Crowd, e: merge.Entry) -> int:
    """The crowd's overlays that the guard's test would pair with `e` at whatever weight they hold: those setting one
    of its fields on a common cell (`meets` for each; the weights a conflict hint must avoid)."""
    out = 0
    for field, bits in e.fields().items():
        out |= _setting_on(crowd, field, bits, -1)
    return out


def _setting_on(crowd: merge.Crowd, field: merge.Field, bits: cellset.Cells, among: int) -> int:
    among &= crowd.setting(field)
    return crowd.meeting(field, bits, among) if among else 0


def clashes_with(target: merge.Entry, crowds: Sequence[merge.Crowd], limit: int = LIMIT) -> list[Clash]:
    """What `same_weight` over the crowds' overlays and `target` reports with `target` as the later overlay; the
    crowds must hold every overlay that shares a cell with it."""
    out: list[Clash] = []
    for field, bits in target.fields().items():
        first: list[merge.Entry] = []
        total = 0
        for crowd in crowds:
            found = partners(crowd, target.weight, field, bits, crowd.before(target.rank))
            total += found.bit_count()
            first += crowd.entries(found, limit)
        out += _listed(target, field, bits, heapq.nlargest(limit, first, key=_RANK), total)
    return out


def _first(e: merge.Entry, field: merge.Field, bits: cellset.Cells,
           groups: Iterable[tuple[cellset.Cells, list[merge.Entry]]], limit: int) -> list[Clash]:
    """`e`'s clashes on `field` with the first `limit` overlapping earlier overlays (by rank), the
    last one counting the rest."""
    hits = [others for other_bits, others in groups if bits.intersects(other_bits)]
    first = heapq.nlargest(limit, (o for others in hits for o in others[:limit]), key=_RANK)
    return _listed(e, field, bits, first, sum(len(others) for others in hits))


def _listed(e: merge.Entry, field: merge.Field, bits: cellset.Cells, first: Sequence[merge.Entry],
            total: int) -> list[Clash]:
    """`e`'s clashes with `first` (its first partners on `field`, by rank) of `total`, the last counting the rest."""
    # The common cells of the listed partners only: a broad overlay meets hundreds.
    found = [Clash(e.name, o.name, field, bits & o.fields()[field]) for o in first]
    if total > len(found) and found:
        # Built again positionally: dataclasses.replace reads the fields' list and calls by keyword.
        last = found[-1]
        found[-1] = Clash(last.later, last.earlier, field, last.cells, total - len(found))
    return found


# Read in C: a broad overlay's hits are hundreds.
_RANK = operator.attrgetter("rank")
