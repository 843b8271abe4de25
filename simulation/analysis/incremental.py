"""Answering for a few candidates without re-running the whole cluster.

Karpenter's decision for an overlay depends only on earlier overlays of the same weight that
share price offerings or capacity cells with it. So when a few overlays change, only the
connected component of those changes (in that "shares cells" graph, within their weight
groups) can change status; everything else keeps the status of the prepared baseline. The
findings about a candidate need only its neighbours: overlays whose cells overlap its own.
`tests/test_incremental_property.py` checks this path against the full run.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

from simulation import findings
from simulation.analysis import arrays, candidate, checks, dra, hugepages, kinds, shadows
from simulation.analysis import index as ix
from simulation.semantics import cells, cellset, clash, merge


@dataclasses.dataclass(frozen=True)
class Delta:
    findings: tuple[findings.Finding, ...]
    status: Mapping[str, merge.State]
    verdicts: Mapping[str, merge.Dropped]
    claims: tuple[merge.Claim, ...]
    # Overlays whose status this evaluation recomputed (the rest keep the baseline's): a view of the settled
    # statuses' names, not a copy of a crowd's thousands.
    touched: AbstractSet[str]


# The prepared snapshot's index (evaluate.Prepared holds one).
Index = ix.Index
_V = TypeVar("_V")


def _component(index: Index, prepared: ix.Unchanged, seeds: Sequence[merge.Entry],
               fresh: Sequence[merge.Entry]) -> merge.Runs:
    """Entries reachable from the seeds through Karpenter-relevant overlaps at equal weight, and every one of
    `fresh`, in Karpenter's order."""
    reached = 0
    changed: dict[str, merge.Entry] = {}
    frontier = list(seeds)
    listed = merge.Listed(fresh)
    # Overlays alike in weight and in what Karpenter's test reads reach the same overlays: one scan serves
    # them all, and a kind of prepared overlays (alike ones) is reached whole.
    scanned: set[tuple[int, merge.Signature]] = set()
    while frontier:
        node = frontier.pop()
        alike = (node.overlay.weight, node.tested)
        if alike in scanned:
            continue
        scanned.add(alike)
        for first, members in index.by_kind.within(merge.related(prepared, node, ~reached)):
            reached |= members
            frontier.append(index.order[first])
        for m in listed.entries(merge.related(listed, node)):
            if m.name not in changed and m.name != node.name:
                changed[m.name] = m
                frontier.append(m)
    # Every fresh overlay belongs, reached or not: Karpenter's loop decides it too.
    return _runs(index, reached, merge.ordered([*changed.values(), *(c for c in fresh if c.name not in changed)]))


def _runs(index: Index, reached: int, fresh: list[merge.Entry]) -> merge.Runs:
    """The prepared entries in `reached` and the `fresh` ones (in Karpenter's order), in Karpenter's order, cut
    into runs: the prepared where their kind changes, each fresh one alone."""
    positions, entries, names, cuts = prepared_runs(index, reached)
    # Each fresh one goes where its rank places it among the prepared (none has a prepared one's rank: that
    # one is its old version, in `skip`), so the places ascend with the fresh ones' order.
    places = [bisect.bisect_left(positions, index.place(c.rank)) for c in fresh]
    # Last first: an insertion then never moves the places the ones before it take.
    for c, place in zip(reversed(fresh), reversed(places), strict=True):
        entries.insert(place, c)
        names.insert(place, c.name)
    # A cut before the x-th prepared one moves by the fresh ones placed before it; the fresh ones are cut
    # around, each at its place moved by the fresh ones before it.
    moved = {x + bisect.bisect_left(places, x) for x in cuts}
    for j, place in enumerate(places):
        moved.update((place + j, place + j + 1))
    moved.add(len(entries))
    moved.discard(0)
    return merge.Runs(entries, names, sorted(moved))


def prepared_runs(index: Index, reached: int) -> tuple[Sequence[int] | arrays.Ints, list[merge.Entry], list[str],
                                                       list[int]]:
    """The positions in `reached`, ascending; their entries and names; where their kind changes (the index
    of each one whose kind differs from the one before it). A crowd's thousands are taken from the index's
    arrays whole; a few, one by one (numpy's fixed cost is most of a small component's)."""
    if reached.bit_count() <= kinds.FEW:
        few = index.positions(reached)
        of = index.by_kind.of
        return (few, [index.order[p] for p in few], [index.names[p] for p in few],
                [i for i in range(1, len(few)) if of[few[i]] != of[few[i - 1]]])
    at = arrays.ones(reached, len(index.order))
    kind = index.by_kind.of_array[at]
    return (at, index.entry_array[at].tolist(), index.name_array[at].tolist(),
            arrays.changes(kind))


def _settle(index: Index, prepared: ix.Unchanged, baseline: merge.Merged, old: Sequence[merge.Entry],
            candidates: Sequence[merge.Entry]) -> merge.Merged:
    """Karpenter's outcome for the overlays whose status the change can move (`prepared`: the unchanged ones): its
    one loop over the change's connected component."""
    if len(candidates) == 1 and not old:
        # A new overlay: the overlays before it keep their status, so the applied ones of its weight that share
        # cells with it decide it; dropped, it stores nothing and no other status moves.
        c = candidates[0]
        stored = merge.related(prepared, c, prepared.before(c.rank) & (index.applied_bits or 0))
        verdict = merge.tested_against(prepared.each(stored), c)
        if verdict is not None:
            return merge.Merged((c.name,), {c.name: merge.CONFLICT}, {c.name: verdict}, ())
        if not merge.related(prepared, c, prepared.after(c.rank)):
            # Applied, and no overlay after it reads what it stores: its component is itself (a clean candidate,
            # mostly at a weight of its own), and no run of Karpenter's loop is built for it.
            return merge.Merged((c.name,), {c.name: merge.APPLIED}, {}, ())
    if len(candidates) == 1 and len(old) == 1 and kinds.alike(old[0], candidates[0]):
        # Karpenter's loop reads the same sequence as before the edit: every status and verdict stays.
        name = candidates[0].name
        verdict = baseline.verdicts.get(name)
        return merge.Merged((name,), {name: baseline.status[name]}, {name: verdict} if verdict is not None else {},
                            ())
    component = _component(index, prepared, [*candidates, *old], candidates)
    merge.adopt_tested(candidates, index.by_kind.signatures)
    return merge.karpenter_in_order(component)


def evaluate(grid: cells.Grid, index: Index, entries: Mapping[str, merge.Entry], baseline: merge.Merged,
             changed: Sequence[str], old: Sequence[merge.Entry], candidates: Sequence[merge.Entry],
             raw: Callable[[str], Mapping[str, Any]], keys: Mapping[str, frozenset[str]]) -> Delta:
    """`keys` lists only the overlays that use bindingKeys."""
    skip = set(changed)
    # One crowd of the unchanged overlays for every rule the request asks: it answers each overlap question once.
    prepared = index.crowd(skip, remember=True)
    local = _settle(index, prepared, baseline, old, candidates)
    status, verdicts = _statuses(baseline, local, [o.name for o in old if o.name not in entries])
    # The unchanged overlays the change made applied, or no longer applied, in the component's order (the
    # prepared ones' is the index's). By set operations in C that walk the fewer of the settled ones (a crowd
    # it displaces is thousands, its applied ones a few) and the baseline's applied (thousands in most
    # clusters): a frozenset's intersection walks its argument, a keys view's walks the other side.
    settled = local.status.keys()
    kept = (baseline.applied.intersection(settled) if len(settled) <= len(baseline.applied)
            else settled & baseline.applied)
    flipped = local.applied ^ kept
    moved = [index.order[p] for p in sorted(index.position[n] for n in flipped - skip)]
    view = shadows.View(grid, index, prepared, baseline, status, skip, candidates,
                        [*(c for c in candidates if status.get(c.name) == merge.APPLIED),
                         *(m for m in moved if local.status.get(m.name) == merge.APPLIED)],
                        [*(o for o in old if baseline.status.get(o.name) == merge.APPLIED),
                         *(m for m in moved if local.status.get(m.name) != merge.APPLIED)])
    taken = index.taken.changed(candidates, skip, prepared)
    out: list[findings.Finding] = []
    claims: list[merge.Claim] = []
    for c in candidates:
        reach = candidate.Scan(index, prepared, c, skip, candidates, status, view.applied)
        own, others, total = _split(*reach.clashes(), entries, skip, index)
        out += checks.conflicts(grid, entries, status, verdicts, own, taken)
        out += findings.first_few(checks.conflicts(grid, entries, status, verdicts, others, taken), total)
        if status.get(c.name) == merge.APPLIED:
            # Only an applied candidate has an effect, or a field a higher overlay can shadow.
            out += _effect(grid, c, reach, claims, functools.partial(index.near, c, skip, candidates), status)
            out += [f for f in (reach.shadowed(grid, field) for field in c.fields()) if f]
        out += _scope(c, entries, raw, keys)
    out += shadows.others(view, single=len(changed) == 1)
    return Delta(tuple(out), status, verdicts, tuple(claims), local.status.keys())


def _statuses(baseline: merge.Merged, local: merge.Merged,
              gone: Sequence[str]) -> tuple[Mapping[str, merge.State], Mapping[str, merge.Dropped]]:
    """Every overlay's status and verdict with the change: the baseline's, overridden by the settled
    ones, without the `gone` (deleted). Layered, not copied: there are 10,000 of each, and a crowd's
    thousands settle when a copy displaces its winner."""
    settled = local.status.keys()
    verdicts = _Over(local.verdicts, baseline.verdicts, settled | set(gone) if gone else settled)
    if not gone:
        return _Over(local.status, baseline.status, settled), verdicts
    status = {n: s for n, s in baseline.status.items() if n not in gone}
    status.update(local.status)
    return status, verdicts


class _Over(Mapping[str, _V]):
    """`top` over `base`: a key `top` decides (`decided`) is top's alone, absent when top lacks it (an
    overlay settled as applied has no verdict); any other is base's. Read with one dict test for the
    decision and one lookup, as the shadow checks ask it for every winner they test."""

    def __init__(self, top: Mapping[str, _V], base: Mapping[str, _V], decided: AbstractSet[str]) -> None:
        self._top, self._base, self._decided = top, base, decided

    def __getitem__(self, key: str) -> _V:
        return self._top[key] if key in self._decided else self._base[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._top.get(key, default) if key in self._decided else self._base.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._top if key in self._decided else key in self._base

    def __iter__(self) -> Iterator[str]:
        return (k for k in {**self._base, **self._top} if k in self._top or k not in self._decided)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _effect(grid: cells.Grid, c: merge.Entry, reach: candidate.Scan,
            claims: list[merge.Claim], near: Callable[[], list[merge.Entry]],
            status: Mapping[str, merge.State]) -> list[findings.Finding]:
    """Appends an applied candidate's claims; returns its price-clamped and hugepages findings, if any.
    `near`: its neighbours, asked for only when it holds hugepages somewhere."""
    out = []
    pages: dict[merge.Field, cellset.Cells] = {}
    for field in c.fields():
        mine = reach.claim(field)
        claims.append(merge.Claim(c.name, field, mine))
        if field == merge.PRICE and (clamp := checks.clamped(grid, c, mine)) is not None:
            out.append(clamp)
        elif mine and hugepages.is_field(field):
            pages[field] = mine
    if pages:
        out += hugepages.check(grid, c, pages, near(), status)
    return out


def _scope(c: merge.Entry, entries: Mapping[str, merge.Entry], raw: Callable[[str], Mapping[str, Any]],
           keys: Mapping[str, frozenset[str]]) -> list[findings.Finding]:
    """bindingKeys the candidate shares with other overlays."""
    used = keys.get(c.name, frozenset())
    sharing = [n for n, k in keys.items() if n != c.name and k & used] if used else []
    if not sharing:
        return []
    return dra.check_scope([(entries[n].overlay.ref, raw(n), entries[n].overlay.source)
                            for n in sorted([c.name, *sharing]) if n in entries])


def _split(clashes: Sequence[clash.Clash], unbuilt: int, entries: Mapping[str, merge.Entry], changed: set[str],
           index: Index) -> tuple[list[clash.Clash], list[clash.Clash], int]:
    """The clashes reported on a changed overlay; the first clash.LIMIT of those reported on unchanged
    overlays (naming one candidate as the earlier overlay) in the order a report lists their findings (a
    report keeps only those, evaluate._bounded, so only those need a finding built); and how many of the
    latter there are (`unbuilt` of them were only counted)."""
    mine = [k for k in clashes if k.later in changed]
    others = [k for k in clashes if k.later not in changed]
    if len(others) > clash.LIMIT:
        # Unchanged overlays are the prepared ones: the index knows their place in a report. Only those up
        # to the clash.LIMIT-th place are ordered by the full key (an overlay's fields share its place).
        rank, position = index.report_rank, index.position
        cut = sorted(rank[position[k.later]] for k in others)[clash.LIMIT - 1]
        first = [k for k in others if rank[position[k.later]] <= cut]
    else:
        first = others

    def order(k: clash.Clash) -> tuple[Any, ...]:
        later = entries[k.later].overlay
        return (later.source if later.source is not None else -1, later.ref,
                findings.json_path(*k.field.path(later)))

    return mine, sorted(first, key=order)[:clash.LIMIT], len(others) + unbuilt


