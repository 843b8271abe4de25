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
from simulation.semantics import cells, cellset, merge


@dataclasses.dataclass(frozen=True)
class Result:
    findings: tuple[findings.Finding, ...]
    status: Mapping[str, merge.State]
    verdicts: Mapping[str, merge.Verdict]
    claims: tuple[merge.Claim, ...]
    # Overlays whose status this evaluation recomputed (the rest keep the baseline's).
    touched: tuple[str, ...]


# Bits of a NodePool block per index bucket: a neighbour scan visits the buckets of the target's
# NodePools and instance-type ranges only.
CHUNK = 512


@dataclasses.dataclass(frozen=True)
class Index:
    """The prepared entries bucketed by NodePool and by range of instance types, so that a neighbour
    scan only visits overlays that share a NodePool and a type range with the target."""

    buckets: Mapping[tuple[int, int], tuple[merge.Entry, ...]]

    @classmethod
    def build(cls, entries: Sequence[merge.Entry], pools: int) -> Index:
        del pools  # the entries' own signatures say which NodePools they touch
        buckets: dict[tuple[int, int], list[merge.Entry]] = {}
        for e in entries:
            for key in _keys(e):
                buckets.setdefault(key, []).append(e)
        return cls({k: tuple(v) for k, v in buckets.items()})

    def near(self, target: merge.Entry, skip: set[str], extra: Sequence[merge.Entry]) -> list[merge.Entry]:
        """Entries whose coarse signature overlaps the target's: the prepared ones not named
        in `skip` (they changed), plus the `extra` (changed) ones."""
        found: dict[str, merge.Entry] = {}
        for key in _keys(target):
            for n in self.buckets.get(key, ()):
                if n.name not in found and n.may_overlap(target) and n.name not in skip:
                    found[n.name] = n
        for n in extra:
            if n.may_overlap(target):
                found[n.name] = n
        found.pop(target.name, None)
        return list(found.values())


def _keys(e: merge.Entry) -> list[tuple[int, int]]:
    chunks = [k for k in range(-(-e.fold.bit_length() // CHUNK)) if e.fold >> (k * CHUNK) & ((1 << CHUNK) - 1)]
    return [(p, k) for p in _ones(e.pools) for k in chunks]


def _ones(bits: int) -> list[int]:
    out = []
    while bits:
        low = bits & -bits
        out.append(low.bit_length() - 1)
        bits ^= low
    return out


def _component(index: Index, seeds: Sequence[merge.Entry], skip: set[str],
               fresh: Sequence[merge.Entry]) -> list[merge.Entry]:
    """Entries reachable from the seeds through Karpenter-relevant overlaps at equal weight."""
    reached: dict[str, merge.Entry] = {}
    frontier = list(seeds)
    # Overlays alike in weight, fields and cells reach the same overlays: one scan serves them all.
    scanned: set[tuple[object, ...]] = set()
    while frontier:
        node = frontier.pop()
        o = node.overlay
        alike = (o.weight, o.price_update is not None, o.capacity_set, node.cells, node.type_cells)
        if alike in scanned:
            continue
        scanned.add(alike)
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

    # Applied now but not in the baseline (the candidates, and overlays a candidate's change revived):
    # the only ones that can take cells from an unchanged overlay.
    gained = [*(c for c in candidates if status.get(c.name) == merge.APPLIED),
              *(m for m in component if m.name not in skip and local.status.get(m.name) == merge.APPLIED
                and baseline.status.get(m.name) != merge.APPLIED)]
    out: list[findings.Finding] = []
    claims: list[merge.Claim] = []
    done_shadow: set[tuple[str, merge.Field]] = set()
    for c in candidates:
        neighbours = index.near(c, skip, candidates)
        own, others = _split(_clashes(index, c, neighbours, skip, candidates), entries, skip)
        out += checks.conflicts(grid, entries, status, verdicts, own)
        out += _first_few(checks.conflicts(grid, entries, status, verdicts, others[:merge.CLASH_LIMIT]), len(others))
        if status.get(c.name) == merge.APPLIED:
            for field in c.fields():
                mine = checks.claim(c, field, checks.higher(c, field, neighbours, status))
                claims.append(merge.Claim(c.name, field, mine))
                if field == merge.PRICE and (clamp := checks.clamped(grid, c, mine)) is not None:
                    out.append(clamp)
        # Only an applied overlay can be shadowed: the status test first spares a neighbour scan.
        for target in [c, *(n for n in neighbours if n.rank < c.rank and status.get(n.name) == merge.APPLIED)]:
            fields = [f for f in target.fields() if (target.name, f) not in done_shadow]
            done_shadow.update((target.name, f) for f in fields)
            if target is not c and target.name not in skip:
                fields = [f for f in fields if not _still_claims(target, f, baseline, gained)]
            if not fields:
                continue
            around = neighbours if target is c else index.near(target, skip, candidates)
            for field in fields:
                found = checks.shadowed(grid, target, field, around, status)
                if found is not None:
                    out.append(found)
        used = keys.get(c.name, frozenset())
        sharing = [n for n, k in keys.items() if n != c.name and k & used] if used else []
        if sharing:
            out += dra.check_scope([(entries[n].overlay.ref, raw(n), entries[n].overlay.source)
                                    for n in sorted([c.name, *sharing]) if n in entries])
    return Result(tuple(out), status, verdicts, tuple(claims), tuple(local.status))


def _clashes(index: Index, c: merge.Entry, neighbours: Sequence[merge.Entry], skip: set[str],
             candidates: Sequence[merge.Entry]) -> list[merge.Clash]:
    """The full run's same-weight clashes that involve `c`: as the later overlay, and as the earlier
    one of each later overlay (judged per group of laters with equal cells, so that a thousand
    identical overlays cost one neighbour scan)."""
    same = [n for n in neighbours if n.overlay.weight == c.overlay.weight]
    out = merge.clashes_with(c, same)
    for field, bits in c.fields().items():
        groups: dict[cellset.Cells, list[merge.Entry]] = {}
        for n in same:
            theirs = n.fields().get(field)
            if theirs is not None and n.rank < c.rank and theirs.intersects(bits):
                groups.setdefault(theirs, []).append(n)
        for laters in groups.values():
            pool = [*index.near(laters[0], skip, candidates), laters[0]]
            out += merge.reported(c, field, laters, pool)
    return out


def _still_claims(target: merge.Entry, field: merge.Field, baseline: merge.Outcome,
                  gained: Sequence[merge.Entry]) -> bool:
    """Whether an unchanged overlay that stays applied surely still has cells where its `field` is in
    effect: what it claimed in the baseline, less what the `gained` overlays above it set (an
    overlay removed, replaced or now dropped can only give it more). False means: look closer."""
    if baseline.status.get(target.name) != merge.APPLIED:
        return False
    before = baseline.claimed.get((target.name, field))
    if not before:
        return False
    for g in gained:
        if g.rank > target.rank:
            before = before - g.fields().get(field, merge.EMPTY)
    return bool(before)


def _split(clashes: Sequence[merge.Clash], entries: Mapping[str, merge.Entry],
           changed: set[str]) -> tuple[list[merge.Clash], list[merge.Clash]]:
    """The clashes reported on a changed overlay, and those reported on unchanged overlays (naming one
    candidate as the earlier overlay), in the order a report lists their findings. Of the latter a report keeps the
    first merge.CLASH_LIMIT (evaluate._bounded), so only those need a finding built."""
    mine = [k for k in clashes if k.later in changed]
    others = [k for k in clashes if k.later not in changed]

    def order(k: merge.Clash) -> tuple[Any, ...]:
        later = entries[k.later].overlay
        return (later.source if later.source is not None else -1, later.ref,
                findings.json_path(*k.field.path(later)))

    return mine, sorted(others, key=order)


def _first_few(found: list[findings.Finding], total: int) -> list[findings.Finding]:
    """`found` (the first of `total` findings on other overlays that name one candidate), the last saying
    how many more, worded as evaluate._bounded words it."""
    if total <= len(found) or not found:
        return found
    last = found[-1]
    more = total - len(found)
    found[-1] = dataclasses.replace(
        last, message=f"{last.message}; and {more} more such findings on other objects",
        detail=tuple(sorted((*last.detail, ("moreObjects", str(more))))))
    return found
