"""Which existing overlays one new candidate's findings read (`check --existing`: one overlay asked against many).

Karpenter's order is a sweep (weight descending, then name descending), and everything the guard says of an
overlay reads only the overlays ahead of it and those of its weight. So of the existing overlays that share cells
with the candidate (`evaluate._reach`), a report on the candidate needs:

- ahead of it, enough applied ones to cover its cells (its claim is then empty, whoever else is ahead) and the first
  `clash.LIMIT` applied ones by name that meet it (the names its `shadowed` finding lists); where they do not cover
  it, every one that meets it;
- behind it, only those whose `shadowed` finding may name it: one is excused where `clash.LIMIT` applied overlays
  ahead of it, named before the candidate, meet it on that field (the finding names the first `clash.LIMIT` by
  name, so never the candidate); for the others, every overlay ahead of them that meets them;
- where it meets an overlay of its own weight (a same-weight conflict): its weight whole (the clashes, the counts
  of the rest and Karpenter's verdicts on both sides read only overlays of it), and for each conflict's fix hint
  the weights around the two overlays: `hints.Taken.free` walks from the weight each way to the first that no valid
  overlay meeting the one moved holds, so one valid such overlay per weight passed answers as all of them do (those
  `hints.Taken.holders` names).

Statuses are Karpenter's (merge._Store), told from the whole set where that is cheap: an overlay is known applied
where it is valid, not of the candidate's weight (the candidate may drop it) and no overlay of its weight ahead of
it shares a (NodePool, type) with it; known dropped where it sets a price on an offering where an overlay of its
weight ahead of it, known applied, stored one. One known dropped is left out (no winner, no claim's taker, no
`shadowed` finding of its own), or where kept, kept with what drops it; one whose status neither tells brings its
whole weight along, so that the snapshot's merge says what the whole one does. The rest are read and modelled but
neither validated nor judged. Where the candidate sets hugepages (whose findings read the overlays around it), or
where the search grows past its budget or a hint's walk keeps more than `SHARE` of them (the reach reads them all
for less), this cannot be told here: None. `tests/test_needed.py` holds the findings of a snapshot of these to
those of a whole one.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Mapping, Sequence

from simulation.analysis import hints, hugepages
from simulation.semantics import cellset, clash, merge

# Steps (overlays looked at) past this many per existing overlay: the search costs more than validating them all.
BUDGET = 16
# A hint's walk that has kept more than this share of the existing overlays gives way to the reach, which reads them
# all for less (a conflict on a price ladder, whose hints walk every weight).
SHARE = 0.5


def needed(entries: Mapping[str, merge.Entry], candidate: merge.Entry,
           valid: Callable[[str], bool]) -> set[str] | None:
    """The names of `entries` (the existing overlays, modelled as if valid) that `candidate`'s findings depend on,
    or None; `valid(name)`: whether that existing overlay is valid (asked of as few as the answer needs)."""
    mine = candidate.fields()
    if not mine or any(hugepages.is_field(f) for e in (candidate, *entries.values()) for f in e.fields()):
        return None
    return _Search(entries, candidate, valid).run()


class _Search:
    def __init__(self, entries: Mapping[str, merge.Entry], candidate: merge.Entry,
                 valid: Callable[[str], bool]) -> None:
        self.candidate, self.valid = candidate, valid
        self.order = merge.ordered(entries.values())
        self.place = {e.name: i for i, e in enumerate(self.order)}
        self.groups: dict[int, list[merge.Entry]] = collections.defaultdict(list)
        for e in self.order:
            self.groups[e.weight].append(e)
        self.kept: set[str] = set()
        # Weights kept whole: the statuses of their overlays are the whole set's.
        self.weights: set[int] = set()
        # Per weight and overlay of it: whether no overlay of its weight ahead of it can make Karpenter drop it.
        self.alone: dict[int, dict[str, bool]] = {}
        # Per overlay asked: the overlay known applied that drops it, if any (_dropper).
        self.droppers: dict[str, merge.Entry | None] = {}
        # Kept overlays known applied, in the order kept: the excuses of those behind them.
        self.applied: list[merge.Entry] = []
        self.steps = BUDGET * len(self.order)
        # The hints' weights over `groups` (_walk), made for a same-weight conflict only.
        self.taken: hints.Taken | None = None

    def run(self) -> set[str] | None:
        c = self.candidate
        if any(clash.meets(e, c) for e in self.groups.get(c.weight, ())) and not self._conflicts():
            return None
        at = next((i for i, e in enumerate(self.order) if e.rank < c.rank), len(self.order))
        ahead, behind = self.order[:at], self.order[at:]
        if not self._cover(ahead):
            return None
        # An overlay without a cell meets none, but a possible conflict may name it (analysis/unknowable.py).
        self.kept |= {e.name for e in self.order if not e.type_cells}
        for e in behind:
            common = [f for f, bits in e.fields().items() if f in c.fields() and bits.intersects(c.fields()[f])]
            if common and not self._dropped(e) and not all(self._excused(e, f) for f in common) \
                    and not self._whole(e):
                return None
            if self.steps < 0:
                return None
        return self.kept

    def _cover(self, ahead: Sequence[merge.Entry]) -> bool:
        """Keep what the candidate's own findings read of the overlays ahead of it; False: not told here."""
        c = self.candidate
        meeting = [e for e in ahead if clash.meets(e, c)]
        self.steps -= len(ahead)
        if not meeting:
            return True
        left = {f: bits for f, bits in c.fields().items()}
        for e in meeting:
            if not left:
                break
            if self._applied(e):
                self._keep(e)
                left = {f: rest for f, bits in left.items() if (rest := bits - e.fields().get(f, merge.EMPTY))}
        if left:
            # Its claim may hold cells: what it is (a clamped price, say) reads every overlay ahead that meets it.
            return self._whole(c, meeting)
        self._first_by_name(meeting)
        return True

    def _first_by_name(self, meeting: Sequence[merge.Entry]) -> None:
        """Keep the candidate's `shadowed` findings' names, the first clash.LIMIT applied overlays by name of
        those ahead that meet it on each field, and before them each one whose status is the merge's to say."""
        c = self.candidate
        for f, bits in c.fields().items():
            found = 0
            for e in sorted((e for e in meeting if e.fields().get(f, merge.EMPTY).intersects(bits)),
                            key=lambda e: e.name):
                if found == clash.LIMIT:
                    break
                if self._applied(e):
                    self._keep(e)
                    found += 1
                elif not self._dropped(e) and self.valid(e.name):
                    # Whether it is applied is the merge's to say: with its weight whole, the snapshot's merge says
                    # what the whole one does, and the next by name may be needed too.
                    self._group(e)

    def _excused(self, e: merge.Entry, f: merge.Field) -> bool:
        """Whether clash.LIMIT applied overlays ahead of `e`, named before the candidate, set `f` on its cells;
        those found are kept (so that `e`, kept for another's sake, is excused in the smaller snapshot too)."""
        bits, name = e.fields()[f], self.candidate.name
        found = 0
        for w in self.applied:
            self.steps -= 1
            if w.rank > e.rank and w.name < name and w.fields().get(f, merge.EMPTY).intersects(bits):
                found += 1
                if found == clash.LIMIT:
                    return True
        known = {w.name for w in self.applied}
        for w in reversed(self.order[:self.place[e.name]]):
            self.steps -= 1
            if w.name in known or w.name >= name or not w.fields().get(f, merge.EMPTY).intersects(bits):
                continue
            if self._applied(w):
                self._keep(w)
                found += 1
                if found == clash.LIMIT:
                    return True
        return False

    def _whole(self, e: merge.Entry, meeting: Iterable[merge.Entry] | None = None) -> bool:
        """Keep `e` (if existing) and every overlay ahead of it that meets it, each with its weight: its claim and
        its finding's names are then those of the whole set."""
        if e is not self.candidate:
            self._settle(e)
        if meeting is None:
            ahead = self.order[:self.place[e.name]]
            self.steps -= len(ahead)
            meeting = [w for w in ahead if clash.meets(w, e)]
        for w in meeting:
            if not self._dropped(w):
                self._settle(w)
        return self.steps >= 0

    def _conflicts(self) -> bool:
        """Keep what the candidate's same-weight conflicts read: its weight whole (the clashes, the counts of the
        rest and Karpenter's verdicts on both sides read only overlays of that weight) and, for each conflict's
        fix hint, the weights around the two overlays (`hints.Taken.free`: each way, the first weight that no
        valid overlay meeting the one moved holds), one such overlay per weight passed. False: not told here, or
        little left out."""
        c = self.candidate
        self._group(c)
        if len(self.kept) > SHARE * len(self.order):
            # Its weight is most of them (an identical crowd): the reach reads them all for less.
            return False
        most = SHARE * len(self.order)
        if any(self._run(c.weight + step, step, most) > most for step in (1, -1)):
            # A walk may pass more weights than that (a price ladder's): asking which would cost more than it saves.
            return False
        meeting = [e for e in self.groups[c.weight] if clash.meets(e, c) and self.valid(e.name)]
        return all(self._walk(e, c.weight + step, step) for e in (c, *meeting) for step in (1, -1))

    def _run(self, weight: int, step: int, most: float) -> int:
        """How many weights from `weight` on by `step` hold an overlay one after another (as far as a walk from there
        can go), counted up to past `most`."""
        count = 0
        while weight in self.groups and count <= most:
            count += 1
            weight += step
        return count

    def _walk(self, e: merge.Entry, weight: int, step: int) -> bool:
        """Keep the valid overlays meeting `e` that hold the weights `hints.Taken.free` passes from `weight` on by
        `step` (one per weight); False: past the budget or the share."""
        if self.taken is None:
            self.taken = hints.Taken((), stored=self.groups)
        most = SHARE * len(self.order)
        for holder in self.taken.holders(e, weight, step, self.valid):
            if self.steps < 0 or len(self.kept) > most:
                return False
            self.steps -= len(self.groups[holder.weight])
            self._keep(holder)
        return self.steps >= 0 and len(self.kept) <= most

    def _settle(self, e: merge.Entry) -> None:
        """Keep what `e`'s status reads: itself where it is known applied, else its weight whole."""
        if self._applied(e):
            self._keep(e)
        else:
            self._group(e)

    def _group(self, e: merge.Entry) -> None:
        if e.weight not in self.weights:
            self.weights.add(e.weight)
            for w in self.groups[e.weight]:
                self._keep(w)

    def _applied(self, e: merge.Entry) -> bool:
        """Known applied: valid, not of the candidate's weight, and no overlay of its weight ahead of it shares a
        (NodePool, type) with it (Karpenter's conflict test relates no others, merge._Store)."""
        return e.weight != self.candidate.weight and self._alone(e.weight)[e.name] and self.valid(e.name)

    def _alone(self, weight: int) -> dict[str, bool]:
        """Per overlay of `weight`: whether none ahead of it at its weight shares a (NodePool, type) with it."""
        known = self.alone.get(weight)
        if known is None:
            group = self.groups[weight]
            if len(group) == 1:
                known = self.alone[weight] = {group[0].name: True}
                return known
            self.steps -= len(group)
            known = self.alone[weight] = {}
            union = cellset.Dense(group[0].type_cells.block)
            for e in group:
                known[e.name] = not union.intersects(e.type_cells)
                union.add(e.type_cells)
        return known

    def _dropped(self, e: merge.Entry) -> bool:
        return self._dropper(e) is not None

    def _dropper(self, e: merge.Entry) -> merge.Entry | None:
        """What makes `e` known not applied: an overlay known applied ahead of it at its weight whose stored price
        drops it (merge.price_conflicts)."""
        if e.name in self.droppers:
            return self.droppers[e.name]
        found = None
        if e.overlay.price_update is not None and e.weight != self.candidate.weight \
                and not self._alone(e.weight)[e.name]:
            group = self.groups[e.weight]
            self.steps -= len(group)
            found = next((w for w in group if w.rank > e.rank and merge.price_conflicts(e, w) and self._applied(w)),
                         None)
        self.droppers[e.name] = found
        return found

    def _keep(self, e: merge.Entry) -> None:
        if e.name in self.kept:
            return
        self.kept.add(e.name)
        if self._applied(e):
            self.applied.append(e)
        elif e.weight not in self.weights and (dropper := self._dropper(e)) is not None:
            # Kept without what drops it (a hint's walk keeps it for its weight), it would be applied in the
            # snapshot, where the rules that left it out read it as dropped.
            self._keep(dropper)
