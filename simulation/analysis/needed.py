"""Which existing overlays one new candidate's findings read (`check --existing`: one overlay asked against many).

Karpenter's order is a sweep (weight descending, then name descending), and everything the guard says of an
overlay reads only the overlays ahead of it and those of its weight. So of the existing overlays that share cells
with the candidate (`evaluate._reach`), a report on the candidate needs:

- ahead of it, enough applied ones to cover its cells (its claim is then empty, whoever else is ahead) and the first
  `clash.LIMIT` applied ones by name that meet it (the names its `shadowed` finding lists); where they do not cover
  it, every one that meets it;
- behind it, only those whose `shadowed` finding may name it: one is excused where `clash.LIMIT` applied overlays
  ahead of it, named before the candidate, meet it on that field (the finding names the first `clash.LIMIT` by
  name, so never the candidate); for the others, every overlay ahead of them that meets them.

An overlay counts as applied here only where it is valid and alone at its weight (no same-weight conflict can drop
it); an overlay kept for its verdict brings the whole of its weight along, so that its status is the whole set's.
The rest are read and modelled but neither validated nor judged. Where the candidate meets an overlay of its own
weight (a conflict, whose hint reads every weight around it) or sets hugepages (whose findings read the overlays
around it), or where the search grows past its budget, this cannot be told here: None.
`tests/test_needed.py` holds the findings of a snapshot of these to those of a whole one.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Mapping, Sequence

from simulation.analysis import hugepages
from simulation.semantics import clash, merge

# Steps (overlays looked at) past this many per existing overlay: the search costs more than validating them all.
BUDGET = 16


def needed(entries: Mapping[str, merge.Entry], candidate: merge.Entry,
           valid: Callable[[str], bool]) -> set[str] | None:
    """The names of `entries` (the existing overlays, modelled as if valid) that `candidate`'s findings depend on,
    or None; `valid(name)`: whether that existing overlay is valid (asked of as few as the answer needs)."""
    mine = candidate.fields()
    if not mine or any(hugepages.is_field(f) for e in (candidate, *entries.values()) for f in e.fields()):
        return None
    if any(e.weight == candidate.weight and clash.meets(e, candidate) for e in entries.values()):
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
        # Kept overlays known applied, in the order kept: the excuses of those behind them.
        self.applied: list[merge.Entry] = []
        self.steps = BUDGET * len(self.order)

    def run(self) -> set[str] | None:
        c = self.candidate
        at = next((i for i, e in enumerate(self.order) if e.rank < c.rank), len(self.order))
        ahead, behind = self.order[:at], self.order[at:]
        if not self._cover(ahead):
            return None
        # An overlay without a cell meets none, but a possible conflict may name it (analysis/unknowable.py).
        self.kept |= {e.name for e in self.order if not e.type_cells}
        for e in behind:
            common = [f for f, bits in e.fields().items() if f in c.fields() and bits.intersects(c.fields()[f])]
            if common and not all(self._excused(e, f) for f in common) and not self._whole(e):
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
        return self._first_by_name(meeting)

    def _first_by_name(self, meeting: Sequence[merge.Entry]) -> bool:
        """Keep the candidate's `shadowed` findings' names, the first clash.LIMIT applied overlays by name of
        those ahead that meet it on each field; False where whether one is applied is the merge's to say."""
        c = self.candidate
        for f, bits in c.fields().items():
            found = 0
            for e in sorted((e for e in meeting if e.fields().get(f, merge.EMPTY).intersects(bits)),
                            key=lambda e: e.name):
                if found == clash.LIMIT:
                    break
                if self.valid(e.name):
                    if not self._applied(e):
                        return False
                    self._keep(e)
                    found += 1
        return True

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
            self._group(e)
        if meeting is None:
            ahead = self.order[:self.place[e.name]]
            self.steps -= len(ahead)
            meeting = [w for w in ahead if clash.meets(w, e)]
        for w in meeting:
            self._group(w)
        return self.steps >= 0

    def _group(self, e: merge.Entry) -> None:
        if e.name not in self.kept:
            for w in self.groups[e.weight]:
                self._keep(w)

    def _applied(self, e: merge.Entry) -> bool:
        """Known applied: valid, and alone at its weight (the candidate's included)."""
        return len(self.groups[e.weight]) == 1 and e.weight != self.candidate.weight and self.valid(e.name)

    def _keep(self, e: merge.Entry) -> None:
        if e.name in self.kept:
            return
        self.kept.add(e.name)
        if self._applied(e):
            self.applied.append(e)
