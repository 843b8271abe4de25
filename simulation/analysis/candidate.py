"""What a candidate's own findings read about the overlays around it: its same-weight clashes, the cells where
its value is in effect (its claim), and whether a field of it is shadowed. `Scan` hands the unchanged overlays
(the index's crowd) and the other candidates (listed), with the applied ones among them, to the one home of each
rule: clash.clashes_with, checks.higher and checks.claim, checks.shadowed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from simulation import findings, once
from simulation.analysis import arrays, checks, kinds
from simulation.analysis import index as ix
from simulation.semantics import cells, cellset, clash, merge


@dataclasses.dataclass(frozen=True)
class Scan:
    """Answers about one candidate from the overlays around it, the unchanged ones as the index's crowd and the
    other candidates listed: its clashes, its claim and its shadowing."""

    index: ix.Index
    # The unchanged overlays, as a crowd.
    prepared: ix.Unchanged
    c: merge.Entry
    skip: set[str]
    candidates: Sequence[merge.Entry]
    status: Mapping[str, merge.State]
    # The unchanged overlays applied with the change (shadows.View.applied).
    applied: int

    @once.Once
    def around(self) -> tuple[checks.Around, checks.Around]:
        """The overlays around it with the applied ones, as its claim and shadow test read them."""
        return (self.prepared, self.applied), checks.listed((n for n in self.candidates if n.name != self.c.name),
                                                            self.status)

    @property
    def others(self) -> merge.Crowd:
        """The other candidates."""
        return self.around[1][0]

    def clashes(self) -> tuple[list[clash.Clash], int]:
        """The full run's same-weight clashes that involve the candidate: as the later overlay, and as
        the earlier one of each later overlay (of those on unchanged overlays, see `reported`)."""
        c, prepared, others = self.c, self.prepared, self.others
        if not prepared.of_weight(c.weight) and not others.of_weight(c.weight):
            # Alone at its weight (a clean candidate, mostly): the guard's test pairs it with none.
            return [], 0
        out = clash.clashes_with(c, [prepared, others])
        unbuilt = 0
        for field, bits in c.fields().items():
            found, more = reported(self.index, prepared, c, field,
                                   self.index.positions(clash.partners(prepared, c.weight, field, bits,
                                                                       prepared.after(c.rank))),
                                   others.entries(clash.partners(others, c.weight, field, bits, others.after(c.rank))),
                                   self.skip, self.candidates)
            out += found
            unbuilt += more
        return out, unbuilt

    def claim(self, field: merge.Field) -> cellset.Cells:
        found = self._claims.get(field)
        if found is None:
            found = self._claims[field] = checks.claim(self.c, field, checks.higher(self.c, field, self.around))
        return found

    @once.Once
    def _claims(self) -> dict[merge.Field, cellset.Cells]:
        # An applied candidate's claim is asked for its effect and again for its shadow test: worked out once.
        return {}

    def shadowed(self, grid: cells.Grid, field: merge.Field) -> findings.Finding | None:
        """checks.shadowed of the candidate's field; asked of an applied candidate only, whose claim its effect
        has worked out already."""
        return checks.shadowed(grid, self.c, field, self.around, self.status, self.claim(field), settled=self.index)


def reported(index: ix.Index, prepared: ix.Unchanged, c: merge.Entry, field: merge.Field,
             positions: Sequence[int] | arrays.Ints,
             changed: Sequence[merge.Entry], skip: set[str],
             candidates: Sequence[merge.Entry]) -> tuple[list[clash.Clash], int]:
    """The clashes naming `c` as the earlier overlay of later ones (same weight, meeting it on `field`): the
    unchanged at these `positions`, and the `changed`. The unchanged are judged per kind (equal cells),
    so that a thousand identical overlays cost one neighbour scan; a report keeps the first
    clash.LIMIT clashes on them in its order (incremental._split), so of each kind only those are
    built: returns the clashes built and how many more there are."""
    out: list[clash.Clash] = []
    unbuilt = 0
    # A few positions are grouped by the plain ranks: their array is numpy's (imported for it alone in a one-shot
    # check whose candidate meets a few overlays of its weight).
    ranks = index.report_rank if len(positions) <= kinds.FEW else index.report_ranks
    for first, total in index.by_kind.firsts(positions, ranks, clash.LIMIT):
        # A kind's laters all clash with `c`, or none does.
        found = _reported(index, prepared, c, field, [index.order[p] for p in first], skip, candidates)
        out += found
        unbuilt += total - len(first) if found else 0
    for n in changed:
        out += _reported(index, prepared, c, field, [n], skip, candidates)
    return out, unbuilt


def _reported(index: ix.Index, prepared: ix.Unchanged, earlier: merge.Entry, field: merge.Field,
              laters: Sequence[merge.Entry],
              skip: set[str], candidates: Sequence[merge.Entry]) -> list[clash.Clash]:
    """The clashes `clash.same_weight` reports between each of `laters` (after `earlier` in its weight,
    equal cells for `field`) and `earlier`: those where `earlier` is among the later one's first
    clash.LIMIT partners. The partners (clash.partners: the overlays of the weight that set `field` on a cell of
    the laters') are a mask of the unchanged ones, beside the changed `candidates`."""
    g = laters[0]
    bits = g.fields()[field]
    common = bits & earlier.fields()[field]
    if not common:
        return []
    weight = earlier.overlay.weight
    meets = clash.partners(prepared, weight, field, bits)
    changed = merge.Listed([*(m for m in candidates if m.name != g.name), *([g] if g.name in skip else [])])
    extra = [m.rank for m in changed.entries(clash.partners(changed, weight, field, bits))]

    def above(rank: tuple[int, str]) -> int:
        return (meets & index.before(rank)).bit_count() + sum(r > rank for r in extra)

    first_few = above(earlier.rank)
    if first_few >= clash.LIMIT:
        return []
    out = []
    for later in laters:
        total = above(later.rank)
        more = total - clash.LIMIT if first_few == clash.LIMIT - 1 and total > clash.LIMIT else 0
        out.append(clash.Clash(later.name, earlier.name, field, common, more))
    return out
