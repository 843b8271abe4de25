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

from simulation.semantics import cellset, merge

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


def same_weight(entries: Sequence[merge.Entry], limit: int = LIMIT) -> list[Clash]:
    """Pairs of equal-weight overlays that set the same field on a common cell: for each overlay and
    field, its first `limit` partners earlier in Karpenter's order, and how many more. Earlier overlays
    with identical cells for the field are tested once, so identical overlays cost O(overlays)."""
    out: list[Clash] = []
    for _, group in itertools.groupby(merge.ordered(entries), key=lambda e: e.overlay.weight):
        seen: dict[merge.Field, dict[cellset.Cells, list[merge.Entry]]] = {}
        unions: dict[merge.Field, cellset.Dense] = {}
        for e in group:
            for field, bits in e.fields().items():
                union = unions.setdefault(field, cellset.Dense(e.cells.block))
                if union.intersects(bits):
                    out += _first(e, field, bits, seen[field].items(), limit)
                union.add(bits)
                seen.setdefault(field, {}).setdefault(bits, []).append(e)
    return out


def clashes_with(target: merge.Entry, others: Sequence[merge.Entry], limit: int = LIMIT) -> list[Clash]:
    """What `same_weight` over `others` and `target` reports with `target` as the later overlay; `others`
    must hold every overlay that shares a cell with it."""
    weight = target.overlay.weight
    earlier = [o for o in others if o.overlay.weight == weight and o.rank > target.rank]
    out: list[Clash] = []
    for field, bits in target.fields().items():
        # One target meets each overlay once: grouping them by equal cells (same_weight's saving over pairs) and
        # sorting them would cost more than testing each; _first takes the first few by rank itself.
        out += _first(target, field, bits, ((b, [o]) for o in earlier if (b := o.fields().get(field)) is not None),
                      limit)
    return out


def _first(e: merge.Entry, field: merge.Field, bits: cellset.Cells,
           groups: Iterable[tuple[cellset.Cells, list[merge.Entry]]], limit: int) -> list[Clash]:
    """`e`'s clashes on `field` with the first `limit` overlapping earlier overlays (by rank), the
    last one counting the rest."""
    hits = [(other_bits, others) for other_bits, others in groups if bits.intersects(other_bits)]
    total = sum(len(others) for _, others in hits)
    first = heapq.nlargest(limit, ((o.rank, o.name, other_bits) for other_bits, others in hits
                                   for o in others[:limit]), key=_RANK)
    # The common cells of the listed partners only: a broad overlay meets hundreds.
    found = [Clash(e.name, name, field, bits & other_bits) for _, name, other_bits in first]
    if total > limit:
        found[-1] = dataclasses.replace(found[-1], more=total - limit)
    return found


# Read in C: a broad overlay's hits are hundreds.
_RANK = operator.itemgetter(0)
