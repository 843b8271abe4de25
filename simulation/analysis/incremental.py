"""Answering for a few candidates without re-running the whole cluster.

Karpenter's decision for an overlay depends only on earlier overlays of the same weight that
share price offerings or capacity cells with it. So when a few overlays change, only the
connected component of those changes (in that "shares cells" graph, within their weight
groups) can change status; everything else keeps the status of the prepared baseline. The
findings about a candidate need only its neighbours: overlays whose cells overlap its own.
`tests/test_incremental_property.py` checks this path against the full run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from simulation import findings
from simulation.analysis import checks, dra
from simulation.semantics import cells, merge


@dataclasses.dataclass(frozen=True)
class Result:
    findings: tuple[findings.Finding, ...]
    status: Mapping[str, str]
    verdicts: Mapping[str, merge.Verdict]
    claims: tuple[merge.Claim, ...]
    # Overlays whose status this evaluation recomputed (the rest keep the baseline's).
    touched: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Index:
    """The prepared entries bucketed by NodePool, so that a neighbour scan only visits
    overlays that share a pool with the target."""

    by_pool: tuple[tuple[merge.Entry, ...], ...]

    @classmethod
    def build(cls, entries: Sequence[merge.Entry], pools: int) -> Index:
        buckets: list[list[merge.Entry]] = [[] for _ in range(pools)]
        for e in entries:
            for p in range(pools):
                if e.pools >> p & 1:
                    buckets[p].append(e)
        return cls(tuple(tuple(b) for b in buckets))

    def near(self, target: merge.Entry, skip: set[str], extra: Sequence[merge.Entry]) -> list[merge.Entry]:
        """Entries whose coarse signature overlaps the target's: the prepared ones not named
        in `skip` (they changed), plus the `extra` (changed) ones."""
        found: dict[str, merge.Entry] = {}
        fold, pools = target.fold, target.pools
        for p, bucket in enumerate(self.by_pool):
            if pools >> p & 1:
                for n in bucket:
                    if n.fold & fold and n.name not in skip:
                        found[n.name] = n
        for n in extra:
            if n.may_overlap(target):
                found[n.name] = n
        found.pop(target.name, None)
        return list(found.values())


def _component(index: Index, seeds: Sequence[merge.Entry], skip: set[str],
               fresh: Sequence[merge.Entry]) -> list[merge.Entry]:
    """Entries reachable from the seeds through Karpenter-relevant overlaps at equal weight."""
    reached: dict[str, merge.Entry] = {}
    frontier = list(seeds)
    while frontier:
        node = frontier.pop()
        for m in index.near(node, skip, fresh):
            if m.name not in reached and m.overlay.weight == node.overlay.weight and m.karpenter_overlap(node):
                reached[m.name] = m
                frontier.append(m)
    return list(reached.values())


def evaluate(grid: cells.Grid, index: Index, entries: Mapping[str, merge.Entry], baseline: merge.Outcome,
             changed: Sequence[str], old: Sequence[merge.Entry], candidates: Sequence[merge.Entry],
             raw: Callable[[str], Mapping[str, Any]], keys: Mapping[str, frozenset[str]]) -> Result:
    """`keys` lists only the overlays that use bindingKeys."""
    skip = set(changed)
    component = _component(index, [*candidates, *old], skip, candidates)
    members = {m.name for m in component}
    component += [c for c in candidates if c.name not in members]
    local = merge.karpenter(component)
    status = {**baseline.status, **local.status}
    verdicts = {n: v for n, v in baseline.verdicts.items() if n not in local.status}
    verdicts.update(local.verdicts)
    for gone in old:
        if gone.name not in entries:
            status.pop(gone.name, None)
            verdicts.pop(gone.name, None)

    out: list[findings.Finding] = []
    claims: list[merge.Claim] = []
    done_shadow: set[tuple[str, str]] = set()
    for c in candidates:
        neighbours = index.near(c, skip, candidates)
        same = [n for n in neighbours if n.overlay.weight == c.overlay.weight]
        clashes = [k for k in merge.same_weight([c, *same]) if c.name in (k.later, k.earlier)]
        out += checks.conflicts(grid, entries, status, verdicts, clashes)
        if status.get(c.name) == merge.APPLIED:
            for field in c.fields():
                mine = checks.claim(c, field, checks.higher(c, field, neighbours, status))
                claims.append(merge.Claim(c.name, field, mine))
                if field == merge.PRICE and (clamp := checks.clamped(grid, c, mine)) is not None:
                    out.append(clamp)
        for target in [c, *(n for n in neighbours if n.rank < c.rank)]:
            around = neighbours if target is c else index.near(target, skip, candidates)
            for field in target.fields():
                if (target.name, field) in done_shadow:
                    continue
                done_shadow.add((target.name, field))
                found = checks.shadowed(grid, target, field, around, status)
                if found is not None:
                    out.append(found)
        used = keys.get(c.name, frozenset())
        sharing = [n for n, k in keys.items() if n != c.name and k & used] if used else []
        if sharing:
            out += dra.check_scope([(entries[n].overlay.ref, raw(n), entries[n].overlay.source)
                                    for n in sorted([c.name, *sharing]) if n in entries])
    return Result(tuple(out), status, verdicts, tuple(claims), tuple(local.status))

