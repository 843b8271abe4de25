"""What a candidate's own findings read about its neighbours: its same-weight clashes, the cells where
its value is in effect (its claim), and whether a field of it is shadowed. Two ways to the same
answers: `Scan` walks the neighbours found through the index's buckets (any number of changes);
`Tables` asks the prepared tables (one changed overlay, no other status moved), so that a broad
candidate costs array operations, not a Python step per overlay it meets.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from simulation import findings
from simulation.analysis import checks, tables
from simulation.analysis import index as ix
from simulation.semantics import cells, cellset, clash, merge

# From this many (NodePool, 64-slot range) buckets on, the tables answer a candidate faster than a
# neighbour scan; below, their fixed cost in numpy calls is more (one NodePool and one instance family:
# a few buckets, a few neighbours).
BROAD = 9


# From this many overlays sharing a bucket with a candidate and bearing on its findings on, the tables
# answer it faster than a scan however few buckets it spans (a crowd of copies in one instance family).
CROWDED = 64


def broad(c: merge.Entry) -> bool:
    """Whether the candidate spans enough buckets for the tables to answer it faster than a scan."""
    fold = c.fold
    span = (fold.bit_length() - 1) // 64 - ((fold & -fold).bit_length() - 1) // 64 + 1 if fold else 0
    return c.pools.bit_count() * span >= BROAD


def crowded(index: ix.Index, c: merge.Entry) -> bool:
    """Whether enough overlays near the candidate bear on its findings for the tables to answer faster."""
    near = index.coarse(c)
    # Most candidates share buckets with a few overlays: the relevant mask (10,000 bits) only for the rest.
    return near.bit_count() >= CROWDED and (near & index.relevant(c)).bit_count() >= CROWDED


@dataclasses.dataclass(frozen=True)
class Scan:
    """Answers from the neighbours an index scan finds (those sharing a bucket with the candidate)."""

    index: ix.Index
    c: merge.Entry
    neighbours: Sequence[merge.Entry]
    skip: set[str]
    candidates: Sequence[merge.Entry]
    status: Mapping[str, merge.State]

    @classmethod
    def of(cls, index: ix.Index, c: merge.Entry, skip: set[str], candidates: Sequence[merge.Entry],
           status: Mapping[str, merge.State]) -> Scan:
        return cls(index, c, index.near(c, skip, candidates, index.relevant(c)), skip, candidates, status)

    def clashes(self) -> tuple[list[clash.Clash], int]:
        """The full run's same-weight clashes that involve the candidate: as the later overlay, and as
        the earlier one of each later overlay (of those on unchanged overlays, see `reported`)."""
        c = self.c
        same = [n for n in self.neighbours if n.overlay.weight == c.overlay.weight]
        out = clash.clashes_with(c, same)
        unbuilt = 0
        for field, bits in c.fields().items():
            laters = [n for n in same if n.rank < c.rank and n.fields().get(field, merge.EMPTY).intersects(bits)]
            found, more = reported(self.index, c, field, [self.index.position[n.name] for n in laters
                                                          if n.name not in self.skip],
                                   [n for n in laters if n.name in self.skip], self.skip, self.candidates)
            out += found
            unbuilt += more
        return out, unbuilt

    def claim(self, field: merge.Field) -> cellset.Cells:
        return checks.claim(self.c, field, checks.higher(self.c, field, self.neighbours, self.status))

    def shadowed(self, grid: cells.Grid, field: merge.Field) -> findings.Finding | None:
        return checks.shadowed(grid, self.c, field, self.neighbours, self.status)


def reported(index: ix.Index, c: merge.Entry, field: merge.Field, positions: Sequence[int] | tables.Ints,
             changed: Sequence[merge.Entry], skip: set[str],
             candidates: Sequence[merge.Entry]) -> tuple[list[clash.Clash], int]:
    """The clashes naming `c` as the earlier overlay of later ones (same weight, meeting it on `field`): the
    unchanged at these `positions`, and the `changed`. The unchanged are judged per kind (equal cells),
    so that a thousand identical overlays cost one neighbour scan; a report keeps the first
    clash.LIMIT clashes on them in its order (incremental._split), so of each kind only those are
    built: returns the clashes built and how many more there are."""
    out: list[clash.Clash] = []
    unbuilt = 0
    for first, total in index.by_kind.firsts(positions, index.report_ranks, clash.LIMIT):
        # A kind's laters all clash with `c`, or none does.
        found = _reported(index, c, field, [index.order[p] for p in first], skip, candidates)
        out += found
        unbuilt += total - len(first) if found else 0
    for n in changed:
        out += _reported(index, c, field, [n], skip, candidates)
    return out, unbuilt


def _reported(index: ix.Index, earlier: merge.Entry, field: merge.Field, laters: Sequence[merge.Entry],
              skip: set[str], candidates: Sequence[merge.Entry]) -> list[clash.Clash]:
    """The clashes `clash.same_weight` reports between each of `laters` (after `earlier` in its weight,
    equal cells for `field`) and `earlier`: those where `earlier` is among the later one's first
    clash.LIMIT partners. The partners (the overlays of the weight that set `field` on a cell of the
    laters') are counted as a mask of the prepared ones, one overlap test per kind, beside the changed
    `candidates`."""
    g = laters[0]
    bits = g.fields()[field]
    common = bits & earlier.fields()[field]
    if not common:
        return []
    weight = earlier.overlay.weight
    near = index.coarse(g) & index.by_weight.get(weight, 0) & index.by_field.get(field, 0) & ~index.mask(skip)
    meets = 0
    for first, members in index.by_kind.within(near):
        m = index.order[first]
        if m.may_overlap(g) and m.fields()[field].intersects(bits):
            meets |= members
    changed = [m for m in candidates if m.name != g.name and m.may_overlap(g)]
    changed += [g] if g.name in skip else []
    extra = [m.rank for m in changed
             if m.overlay.weight == weight and m.fields().get(field, merge.EMPTY).intersects(bits)]

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


@dataclasses.dataclass(frozen=True)
class Tables:
    """Answers from the prepared tables for the one changed overlay `c`: its price test against the
    baseline (before its outcome is settled), then, when no other overlay's status moved, the rest.
    Positions are those of the prepared order; `gone` is the candidate's old version there (-1 for a
    new overlay), which every answer leaves out."""

    index: ix.Index
    c: merge.Entry
    skip: set[str]
    status: Mapping[str, merge.State]
    at: int
    span: tuple[int, int]
    gone: int
    # Per field, asked for more than once: its claim (the candidate's effect, its shadowed test).
    claims: dict[merge.Field, cellset.Cells] = dataclasses.field(default_factory=dict)
    # field -> where the candidate's weight group meets it (its clashes; whether Karpenter drops it)
    meetings: dict[merge.Field, tables.Meeting] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, index: ix.Index, c: merge.Entry, skip: set[str], status: Mapping[str, merge.State]) -> Tables:
        return cls(index, c, skip, status, index.place(c.rank), index.weight_span(c.overlay.weight),
                   index.position.get(c.name, -1))

    def judged_by(self, status: Mapping[str, merge.State]) -> Tables:
        """These tables read against `status` (the statuses with the change settled), sharing what has been
        worked out so far (dataclasses.replace's copy, without its generic field walk)."""
        return Tables(self.index, self.c, self.skip, status, self.at, self.span, self.gone, self.claims,
                      self.meetings)

    def hits(self, field: merge.Field, lo: int, hi: int) -> list[int]:
        """Positions in [lo, hi) of the unchanged entries that set `field` on a cell of the candidate's."""
        rows = self.index.rows.get(field)
        if rows is None:
            return []
        found = rows.hits(self.c.fields()[field], lo, hi)
        kept: list[int] = found[found != self.gone].tolist()
        return kept

    def meeting(self, field: merge.Field) -> tables.Meeting | None:
        """Where the overlays of the candidate's weight meet it on `field` (None: no overlay of its weight,
        or none that sets the field)."""
        rows = self.index.rows.get(field)
        if rows is None or self.span[0] >= self.span[1]:
            return None
        if field not in self.meetings:
            self.meetings[field] = rows.meeting(self.c.fields()[field], *self.span)
        return self.meetings[field]

    def same(self, field: merge.Field) -> tuple[int, list[int], tables.Ints]:
        """Of the unchanged overlays of its weight that set `field` on a cell of its own (by position): how
        many precede it, the first clash.LIMIT of those, and those after it. Only those are listed:
        a broad candidate meets hundreds before it."""
        meeting = self.meeting(field)
        if meeting is None:
            return 0, [], tables.NO_INTS
        found = meeting.entries()
        if self.gone >= 0:
            found = found[found != self.gone]
        split = int(found.searchsorted(self.at))
        # Those after it stay an array: a crowd's thousands go to Kinds.firsts as they are.
        return split, found[:min(split, clash.LIMIT)].tolist(), found[split:]

    def dropped_price(self) -> merge.Dropped | None:
        """Karpenter's price test for a new overlay: the first offering where an applied overlay of its
        weight before it stored a price, and the last one stored there (merge._price_conflict)."""
        meeting = self.meeting(merge.PRICE) if merge.PRICE in self.c.fields() and self.span[0] < self.at else None
        if meeting is None or self.index.applied is None:
            return None
        allowed = self.index.applied
        changed = [self.index.position[n] for n in self.skip if n in self.index.position]
        if changed:
            allowed = allowed.copy()
            allowed[changed] = False
        found = meeting.first(allowed, self.at)
        return merge.Dropped(merge.PRICE, found[0], self.index.names[found[1]]) if found is not None else None

    def clashes(self) -> tuple[list[clash.Clash], int]:
        c, index = self.c, self.index
        out: list[clash.Clash] = []
        later: dict[merge.Field, tables.Ints] = {}
        for field, bits in c.fields().items():
            earlier, shown, later[field] = self.same(field)
            # clash.clashes_with's answer: the first clash.LIMIT earlier by rank, the last counting the rest.
            more = earlier - len(shown)
            out += [clash.Clash(c.name, index.names[p], field, bits & index.field_cells[field][p],
                                more if i == len(shown) - 1 else 0) for i, p in enumerate(shown)]
        unbuilt = 0
        for field, positions in later.items():
            found, more = reported(index, c, field, positions, [], self.skip, [c])
            out += found
            unbuilt += more
        return out, unbuilt

    def claim(self, field: merge.Field) -> cellset.Cells:
        """The candidate's cells that no applied overlay before it holds."""
        if field not in self.claims:
            self.claims[field] = self._claim(field)
        return self.claims[field]

    def held(self, field: merge.Field) -> cellset.Cells | None:
        """The candidate's cells for `field` (what the owner table asks about); None when no applied
        overlay sets it."""
        return self.c.fields()[field] if field in self.index.owners else None

    def _claim(self, field: merge.Field) -> cellset.Cells:
        bits = self.c.fields()[field]
        owners = self.index.owners.get(field)
        # No applied overlay before it holds a cell of the field (a candidate above every stored weight).
        if owners is None or not owners.held_before[self.at]:
            return bits
        where = tables.flat(bits)
        held = owners.owner[where]
        if 0 <= self.gone < self.at and bool((held == self.gone).any()):
            # Its old version held some of them: who holds them now is the next overlay down, unknown here.
            return Scan(self.index, self.c, self.before(field), self.skip, (), self.status).claim(field)
        free = (held < 0) | (held >= self.at)
        return bits if bool(free.all()) else tables.cells_at(where[free], bits.block)

    def shadowed(self, grid: cells.Grid, field: merge.Field) -> findings.Finding | None:
        if self.status.get(self.c.name) != merge.APPLIED or self.claim(field):
            return None
        neighbours = [self.index.order[p] for p in self.hits(field, 0, self.span[1])]
        return checks.shadowed(grid, self.c, field, neighbours, self.status)

    def before(self, field: merge.Field) -> list[merge.Entry]:
        return [self.index.order[p] for p in self.hits(field, 0, self.at)]
