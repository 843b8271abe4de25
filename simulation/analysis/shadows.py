"""`shadowed` findings on unchanged overlays that a change makes name a candidate among their winners.

An unchanged overlay's field becomes (or stays) shadowed when a candidate above it sets the field on
its cells and nothing it still holds is left outside what the candidates take: its baseline claim less
the candidates' cells (`_covered`), or, where an overlay above it gave cells back, checks.claim over what
checks.higher finds above it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from simulation import findings, once
from simulation.analysis import checks, overlaps
from simulation.analysis import index as ix
from simulation.semantics import cells, cellset, clash, merge


@dataclasses.dataclass(frozen=True)
class View:
    """The prepared snapshot with the candidates in: what the per-candidate checks read."""

    grid: cells.Grid
    index: ix.Index
    # The unchanged overlays, as a crowd.
    prepared: ix.Unchanged
    baseline: merge.Merged
    status: Mapping[str, merge.State]
    skip: set[str]
    candidates: Sequence[merge.Entry]
    # Applied now but not in the baseline (the candidates, and overlays a candidate's change revived):
    # the only ones that can take cells from an unchanged overlay.
    gained: Sequence[merge.Entry]
    # Applied in the baseline but not now (replaced, deleted or now dropped): they can only give cells back.
    lost: Sequence[merge.Entry]

    @once.Once
    def applied(self) -> int:
        """The unchanged overlays applied with the change, as a mask: the baseline's applied, plus those the change
        made applied, less those it made dropped (one mask, not a status lookup per neighbour tested)."""
        index = self.index
        unchanged = ~index.mask(self.skip)
        if index.applied_bits is None:
            return unchanged & index.mask(n for n in index.names if self.status.get(n) == merge.APPLIED)
        return unchanged & (index.applied_bits | index.mask(e.name for e in self.gained)) & ~index.mask(
            e.name for e in self.lost)

    @once.Once
    def around(self) -> tuple[checks.Around, ...]:
        """Every overlay with the change, and the applied ones: the unchanged as the index's crowd, the candidates
        listed."""
        return (self.prepared, self.applied), checks.listed(self.candidates, self.status)


def others(view: View, single: bool) -> list[findings.Finding]:
    """`shadowed` findings on unchanged overlays that name a candidate among the winners they list.
    With one changed overlay a report keeps the first clash.LIMIT of them (evaluate._bounded),
    so only those are built, and the rest only counted."""
    index, applied, alone = view.index, view.applied, _alone(view)
    if not single:
        named = [(index.order[t], field, _winners(view, t, field, alone))
                 for field, targets in _tested(view, applied, False, alone).items() for t in index.positions(targets)]
        return [checks.shadow(view.grid, t, field, winners) for t, field, winners in named
                if view.skip.intersection(w.name for w in winners)]
    found = _tested(view, applied, True, alone)
    first = [checks.shadow(view.grid, index.order[t], field, _winners(view, t, field, alone), _site(view, t, field))
             for t, field in _first_in_report(index, found)]
    return findings.first_few(first, sum(targets.bit_count() for targets in found.values()))


def _tested(view: View, applied: int, single: bool, alone: merge.Entry | None) -> dict[merge.Field, int]:
    """Per field, the positions of the shadowed findings naming a candidate (a mask), each tested on its own.
    `alone`: `_alone`'s candidate, if any."""
    found = {}
    # With one candidate (none: a deletion, nothing to test), only the winners named before it can push it out
    # of the ones a finding lists: with none named before it, it is among them wherever it wins.
    before = applied & view.index.named_before(view.candidates[0].name) if single and view.candidates else 0
    for field, targets in (_targets(view, applied) if alone is None else dict.fromkeys(alone.fields(), 0)).items():
        scope = _Scope.of(view, field)
        left, covered = _covered_at_once(view, scope, targets) if alone is None else _emptied(view, alone, field)
        # Covered and paired with no overlay of their weight before them (`tied` lists every unchanged overlay
        # that is): shadowed, with no test of each.
        plain = left & covered & ~scope.tied & ~view.index.ties.get(field, 0)
        shadowed = plain | view.index.of(t for t in view.index.positions(left & ~plain)
                                         if _shadowed(view, scope, t, bool(covered >> t & 1)))
        if single and before:
            shadowed = _names_first(view, scope, shadowed, before)
        found[field] = shadowed
    return found


def _alone(view: View) -> merge.Entry | None:
    """The one candidate, when it is the only overlay the change applied and the change applied none less (almost
    every request): then an unchanged overlay below it is shadowed on a field where it was left nothing of its
    baseline claim, which `_emptied` reads from the claims below it at once."""
    if len(view.gained) != 1 or view.lost:
        return None
    (c,) = view.gained
    return c if any(c.name == d.name for d in view.candidates) else None


def _emptied(view: View, c: merge.Entry, field: merge.Field) -> tuple[int, int]:
    """`_covered_at_once`'s answer for the one candidate `c` (see `_alone`), without asking which overlays below it
    meet it first: those below whose baseline claim on the field lies within its cells, and those below that held
    none there and meet it (a claim within its cells meets them), as (targets, covered): every target covered."""
    index, bits = view.index, c.fields()[field]
    below = view.applied & index.after(c.rank)
    held, claims = index.claims(field)
    # A claim within its cells shares a bucket with them: a narrow candidate (an instance family's few slot ranges)
    # has few such claims, each tested; a broad one's bucket union would cost more than reading every claim below.
    keys = ix.narrow_keys(bits, _NARROW)
    if keys is not None and (near := below & held & index.coarse_at(keys)).bit_count() <= overlaps.FEW:
        covered = claims.within(bits, near)
    else:
        covered = below & index.inside(field, bits)
    covered |= view.prepared.meeting(field, bits, below & index.by_field.get(field, 0) & ~held)
    return covered, covered


# The most CHUNK-slot ranges a candidate's cells span for `_emptied` to ask the buckets first.
_NARROW = 8


def _covered_at_once(view: View, scope: _Scope, targets: int) -> tuple[int, int]:
    """`_covered`'s answer for many targets in one step where it is their baseline claim against one gained
    overlay (none lost; a broad candidate is tested against thousands): the targets less those it finds a cell
    left to, and those it finds covered (the rest are left to `_covered`), as masks."""
    if len(scope.gained) != 1 or scope.lost:
        return targets, 0
    index = view.index
    ((rank, taken),) = scope.gained
    held, claims = index.claims(scope.field)
    asked = targets & index.after(rank) & held
    covered = claims.within(taken, asked)
    return targets & ~(asked & ~covered), covered


def _first_in_report(index: ix.Index, found: Mapping[merge.Field, int]) -> list[tuple[int, merge.Field]]:
    """The first clash.LIMIT of the findings (per field, a mask of their positions) in a report's
    order, as (position, field)."""
    union = 0
    for targets in found.values():
        union |= targets
    # Each position found gives a finding or more: the first few positions give the first findings.
    first = index.first_in_report(union, clash.LIMIT)
    if len(found) == 1:
        return [(t, field) for field in found for t in first]
    rank = index.report_rank

    def order(target: tuple[int, merge.Field]) -> tuple[Any, ...]:
        # The finding's sort key (findings.Finding.order_key): its object is this NodeOverlay, which the
        # report rank places (by source, then name); the field's path orders the fields of one overlay.
        t, field = target
        return rank[t], findings.json_path(*field.path(index.order[t].overlay))

    pairs = [(t, field) for t in first for field, targets in found.items() if targets >> t & 1]
    return sorted(pairs, key=order)[:clash.LIMIT]


def _targets(view: View, applied: int) -> dict[merge.Field, int]:
    """field -> the unchanged applied overlays (a mask of positions, `applied`: theirs) where an applied candidate
    above them sets the field on a common cell: the only shadowed findings that can name a candidate."""
    index, status, prepared = view.index, view.status, view.prepared
    out: dict[merge.Field, int] = {}
    for c in view.candidates:
        if status.get(c.name) != merge.APPLIED:
            continue
        below = applied & ~index.before(c.rank)
        for field, bits in c.fields().items():
            out[field] = out.get(field, 0) | prepared.meeting(field, bits, below & index.by_field.get(field, 0))
    return out


@dataclasses.dataclass(frozen=True)
class _Scope:
    """What the shadow test of one field reads, looked up once per request."""

    field: merge.Field
    cells: Mapping[int, cellset.Cells]
    claimed: Mapping[str, cellset.Cells]
    gained: Sequence[tuple[tuple[int, str], cellset.Cells]]
    lost: Sequence[tuple[tuple[int, str], cellset.Cells]]
    # The unchanged overlays a candidate before them pairs with on the field (clash.partners): tied to it.
    tied: int

    @classmethod
    def of(cls, view: View, field: merge.Field) -> _Scope:
        def setting(entries: Iterable[merge.Entry]) -> list[tuple[tuple[int, str], cellset.Cells]]:
            return [(e.rank, e.fields()[field]) for e in entries if field in e.fields()]

        prepared, tied = view.prepared, 0
        for c in view.candidates:
            if field in c.fields():
                tied |= clash.partners(prepared, c.weight, field, c.fields()[field], prepared.after(c.rank))
        return cls(field, view.index.field_cells.get(field, {}), view.baseline.claimed_by_field.get(field, {}),
                   setting(view.gained), setting(view.lost), tied)


def _shadowed(view: View, scope: _Scope, t: int, covered: bool) -> bool:
    """checks.shadowed's test for an unchanged applied overlay: every cell of its field is set by applied
    overlays before it (`covered`: known to be), none of its own weight."""
    return (covered or _covered(view, scope, t)) and not _tied(view, scope, t)


def _covered(view: View, scope: _Scope, t: int) -> bool:
    """Whether no cell of `t`'s field is left to it. Its baseline claim less what the gained overlays
    above it set is exact unless an overlay lost above it gave cells back: then ask checks.higher."""
    index = view.index
    rank = index.ranks[len(index.ranks) - 1 - t]
    # Only an overlay applied in the baseline has a claim.
    rest = scope.claimed.get(index.names[t])
    if rest is None or (scope.lost and any(r > rank and lost.intersects(scope.cells[t]) for r, lost in scope.lost)):
        entry = view.index.order[t]
        return not checks.claim(entry, scope.field, checks.higher(entry, scope.field, view.around))
    if len(scope.gained) == 1:
        # One candidate (almost every request): no list of those above `t`.
        ((r, taken),) = scope.gained
        return rest.within(taken) if r > rank else not rest
    for r, taken in scope.gained:
        if r > rank:
            rest = rest - taken
    return not rest


def _tied(view: View, scope: _Scope, t: int) -> bool:
    """Whether an overlay of its weight before the one at `t` sets the field on a common cell (checks.shadowed
    leaves that to the conflict finding): a candidate, or a prepared one the change keeps."""
    if scope.tied >> t & 1:
        return True
    entry, field = view.index.order[t], scope.field
    names, total = view.index.tied.get((entry.name, field), ((), 0))
    if total > len(view.skip) or not view.skip.issuperset(names):
        return True
    if total == len(names):
        return False
    prepared = view.prepared
    return bool(clash.partners(prepared, entry.weight, field, scope.cells[t], prepared.before(entry.rank)))


def _winners(view: View, t: int, field: merge.Field, alone: merge.Entry | None) -> list[merge.Entry]:
    """The first clash.LIMIT by name of the applied overlays before the one at position `t` that set `field` on its
    cells. `alone`: `_alone`'s candidate, if any: the one candidate over every overlay `_tested` finds (`_emptied`
    takes them below it and meeting its cells), so no candidate is tested."""
    return checks.first_higher(view.index.order[t], field, view.around, view.index,
                               None if alone is None else [alone])


def _site(view: View, t: int, field: merge.Field) -> checks.Site:
    """checks.site of the unchanged entry at position `t`, kept on the snapshot's index: a broad candidate's
    findings name the same few overlays request after request."""
    index = view.index
    found = index.sites.get((t, field))
    if found is None:
        found = index.sites[(t, field)] = checks.site(view.grid, index.order[t], field)
    return found


def _names_first(view: View, scope: _Scope, targets: int, before: int) -> int:
    """With one candidate (a winner over each target by construction): the targets where it is among the winners a
    finding names, i.e. fewer than clash.LIMIT winners precede it by name (`before`: the unchanged applied overlays
    named before it). Targets with equal cells share their winners but for the order: those `before` that meet the
    cells are found once, and a target keeps the candidate among its first names while fewer than clash.LIMIT of
    them precede it (a price ladder's thousands of rungs are one question)."""
    index, prepared = view.index, view.prepared
    among = before & prepared.setting(scope.field)
    # The first clash.LIMIT of `among` in Karpenter's order are the first winners of every target after them that
    # they all meet: those targets lose the candidate from their names, decided in a few whole-array steps (a top
    # rung over thousands of overlays of distinct cells: as many groups), the rest one group at a time below.
    first = index.lowest(among, clash.LIMIT)
    if first.bit_count() == clash.LIMIT:
        met = targets & ~((1 << first.bit_length()) - 1)
        for p in index.positions(first):
            met = prepared.meeting(scope.field, scope.cells[p], met) if met else 0
        targets &= ~met
    by_cells: dict[cellset.Cells, int] = {}
    for t in index.positions(targets):
        cells = scope.cells[t]
        by_cells[cells] = by_cells.get(cells, 0) | 1 << t
    out = 0
    for cells, group in by_cells.items():
        # Read in Karpenter's order, a few more each time, up to the clash.LIMIT-th winner or the group's last target.
        winners, rest, size = 0, among & (1 << group.bit_length()) - 1, clash.LIMIT
        while rest and winners.bit_count() < clash.LIMIT:
            first = index.lowest(rest, size)
            rest ^= first
            winners |= prepared.meeting(scope.field, cells, first)
            size *= 4
        if winners.bit_count() < clash.LIMIT:
            out |= group
            continue
        for _ in range(clash.LIMIT - 1):
            winners &= winners - 1
        # The clash.LIMIT-th winner in Karpenter's order: a target at or before it has fewer before it.
        out |= group & ((winners & -winners) << 1) - 1
    return out
