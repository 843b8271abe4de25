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
import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from simulation import findings
from simulation.analysis import checks, dra, hints
from simulation.semantics import cells, cellset, merge


@dataclasses.dataclass(frozen=True)
class Delta:
    findings: tuple[findings.Finding, ...]
    status: Mapping[str, merge.State]
    verdicts: Mapping[str, merge.Dropped]
    claims: tuple[merge.Claim, ...]
    # Overlays whose status this evaluation recomputed (the rest keep the baseline's).
    touched: tuple[str, ...]


# Bits of a NodePool block per index bucket: a neighbour scan visits the buckets of the target's
# NodePools and instance-type ranges only.
CHUNK = 64
# Entries per stored prefix of the by-name order (Index.named_before).
NAMES = 64


@dataclasses.dataclass(frozen=True)
class Index:
    """The prepared entries, indexed once per snapshot. A set of entries is an int whose bit i is the
    i-th entry in Karpenter's order, so that "shares a NodePool and a type range with the target",
    "sets this field" and "precedes this overlay" are each one mask, and their meet a few big-int ANDs."""

    # (NodePool, range of instance types) -> the entries with cells there
    buckets: Mapping[tuple[int, int], int]
    order: tuple[merge.Entry, ...] = ()
    position: Mapping[str, int] = dataclasses.field(default_factory=dict)
    # The entries' ranks, ascending (the reverse of `order`), to place an overlay among them.
    ranks: tuple[tuple[int, str], ...] = ()
    # field -> the entries that set it
    by_field: Mapping[merge.Field, int] = dataclasses.field(default_factory=dict)
    # (overlay, field) -> (some of the same-weight overlays before it that set the field on a common
    # cell, how many there are in all): what a `shadowed` finding defers to (merge.same_weight)
    tied: Mapping[tuple[str, merge.Field], tuple[tuple[str, ...], int]] = dataclasses.field(default_factory=dict)
    taken: hints.Taken = dataclasses.field(default_factory=lambda: hints.Taken(()))
    # The entries' names sorted, their positions in that order, and masks of prefixes of it.
    sorted_names: tuple[str, ...] = ()
    by_name: tuple[int, ...] = ()
    prefixes: tuple[int, ...] = (0,)
    # weight -> the entries of that weight
    by_weight: Mapping[int, int] = dataclasses.field(default_factory=dict)
    # The entries Karpenter's conflict test can relate to a price overlay, and to a capacity overlay.
    prices: int = 0
    capacities: int = 0
    # Per position: the entry's name, and per field its cells (the neighbour loops' lookups, without
    # hashing a field or calling a property per neighbour).
    names: tuple[str, ...] = ()
    field_cells: Mapping[merge.Field, Mapping[int, cellset.Cells]] = dataclasses.field(default_factory=dict)
    # Per position: the buckets the entry is in.
    keys: tuple[tuple[tuple[int, int], ...], ...] = ()

    @classmethod
    def build(cls, entries: Sequence[merge.Entry], pools: int) -> Index:
        del pools  # the entries' own signatures say which NodePools they touch
        order = tuple(merge.ordered(entries))
        buckets: dict[tuple[int, int], int] = {}
        by_field: dict[merge.Field, int] = {}
        field_cells: dict[merge.Field, dict[int, cellset.Cells]] = {}
        by_weight: dict[int, int] = {}
        prices = capacities = 0
        keys = tuple(tuple(_keys(e)) for e in order)
        for i, e in enumerate(order):
            for key in keys[i]:
                buckets[key] = buckets.get(key, 0) | 1 << i
            for field, bits in e.fields().items():
                by_field[field] = by_field.get(field, 0) | 1 << i
                field_cells.setdefault(field, {})[i] = bits
            by_weight[e.overlay.weight] = by_weight.get(e.overlay.weight, 0) | 1 << i
            prices |= (e.overlay.price_update is not None) << i
            capacities |= e.overlay.capacity_set << i
        tied: dict[tuple[str, merge.Field], tuple[tuple[str, ...], int]] = {}
        for k in merge.same_weight(order):
            names, total = tied.get((k.later, k.field), ((), 0))
            tied[(k.later, k.field)] = ((*names, k.earlier), total + 1 + k.more)
        by_name = sorted(range(len(order)), key=lambda i: order[i].name)
        # Every NAMES-th prefix of the entries by name, as a mask, so that any prefix costs < NAMES ORs.
        prefixes, mask = [0], 0
        for count, i in enumerate(by_name, 1):
            mask |= 1 << i
            if count % NAMES == 0:
                prefixes.append(mask)
        return cls(buckets, order, {e.name: i for i, e in enumerate(order)}, tuple(e.rank for e in reversed(order)),
                   by_field, tied, hints.Taken(order), tuple(order[i].name for i in by_name), tuple(by_name),
                   tuple(prefixes), by_weight, prices, capacities, tuple(e.name for e in order), field_cells,
                   keys)

    def before(self, rank: tuple[int, str]) -> int:
        """The entries Karpenter processes before an overlay of this rank."""
        return (1 << len(self.ranks) - bisect.bisect_right(self.ranks, rank)) - 1

    def relevant(self, c: merge.Entry) -> int:
        """The entries that can bear on a candidate's own findings: those that set one of its fields, at
        its weight (conflicts) or before it (what it wins and loses)."""
        fields = 0
        for field in c.fields():
            fields |= self.by_field.get(field, 0)
        return fields & (self.by_weight.get(c.overlay.weight, 0) | self.before(c.rank))

    def related(self, node: merge.Entry) -> int:
        """The entries Karpenter's conflict test can relate to `node`: its weight, and price or capacity."""
        o = node.overlay
        kinds = (self.prices if o.price_update is not None else 0) | (self.capacities if o.capacity_set else 0)
        return kinds & self.by_weight.get(o.weight, 0)

    def coarse(self, target: merge.Entry) -> int:
        """The entries that share a bucket with the target (a superset of those sharing a cell)."""
        return self.coarse_at(_keys(target))

    def coarse_at(self, keys: Iterable[tuple[int, int]]) -> int:
        out, buckets = 0, self.buckets
        for key in keys:
            out |= buckets.get(key, 0)
        return out

    def named_before(self, name: str) -> int:
        """The entries whose name sorts before `name`."""
        k = bisect.bisect_left(self.sorted_names, name)
        out = self.prefixes[k // NAMES]
        for i in self.by_name[k - k % NAMES:k]:
            out |= 1 << i
        return out

    def mask(self, names: Iterable[str]) -> int:
        out = 0
        for name in names:
            if name in self.position:
                out |= 1 << self.position[name]
        return out

    def positions(self, mask: int) -> list[int]:
        text = bin(mask)[:1:-1]
        out = []
        i = text.find("1")
        while i >= 0:
            out.append(i)
            i = text.find("1", i + 1)
        return out

    def members(self, mask: int) -> list[merge.Entry]:
        order = self.order
        return [order[i] for i in self.positions(mask)]

    def near(self, target: merge.Entry, skip: set[str], extra: Sequence[merge.Entry],
             among: int = -1) -> list[merge.Entry]:
        """Entries whose coarse signature overlaps the target's: the prepared ones not named
        in `skip` (they changed) and in `among` (all by default), plus the `extra` (changed) ones."""
        narrow = among & ~self.mask(skip)
        found = [n for n in self.members(self.coarse(target) & narrow) if n.may_overlap(target)] if narrow else []
        found += [n for n in extra if n.may_overlap(target)]
        return [n for n in found if n.name != target.name]


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
        for m in index.near(node, skip, fresh, index.related(node)):
            if m.name not in reached and m.overlay.weight == node.overlay.weight and m.karpenter_overlap(node):
                reached[m.name] = m
                frontier.append(m)
    return list(reached.values())


def _settle(index: Index, baseline: merge.Merged, old: Sequence[merge.Entry], candidates: Sequence[merge.Entry],
            skip: set[str]) -> tuple[list[merge.Entry], merge.Merged]:
    """The overlays whose status the change can move, and Karpenter's outcome for them."""
    if len(candidates) == 1 and not old:
        dropped = _dropped(index, baseline, candidates[0], skip)
        if dropped is not None:
            return [candidates[0]], dropped
    component = _component(index, [*candidates, *old], skip, candidates)
    members = {m.name for m in component}
    component += [c for c in candidates if c.name not in members]
    return component, merge.karpenter(component)


def _dropped(index: Index, baseline: merge.Merged, c: merge.Entry, skip: set[str]) -> merge.Merged | None:
    """A new overlay's outcome when Karpenter drops it (else None). The overlays of its weight before it keep
    their status, so the applied ones among them that share cells with it decide; dropped, it stores
    nothing, and no other overlay's status moves."""
    mask = index.by_weight.get(c.overlay.weight, 0) & index.before(c.rank) & ~index.mask(skip)
    mask &= index.coarse(c) if mask else 0

    def stored(kind: int, cells: Callable[[merge.Entry], cellset.Cells]) -> list[merge.Entry]:
        return [e for e in index.members(mask & kind)
                if baseline.status.get(e.name) == merge.APPLIED and cells(e).intersects(cells(c))]

    prices = stored(index.prices, lambda e: e.cells) if c.overlay.price_update is not None else []
    capacities = stored(index.capacities, lambda e: e.type_cells) if c.overlay.capacity_set and not prices else []
    if prices:
        # Karpenter tests price first: the lowest offering it meets a stored price on, and the last overlay
        # stored there (as merge.karpenter words it, without building the union of a few hundred).
        bit = min((e.cells & c.cells).lowest() for e in prices)
        verdict = merge.Dropped(merge.PRICE, bit, next(e for e in reversed(prices) if e.cells.has(bit)).name)
    elif capacities:
        outcome = merge.karpenter([*capacities, c])
        if outcome.status[c.name] != merge.CONFLICT:
            return None
        verdict = outcome.verdicts[c.name]
    else:
        return None
    return merge.Merged((c.name,), {c.name: merge.CONFLICT}, {c.name: verdict}, ())


@dataclasses.dataclass(frozen=True)
class _View:
    """The prepared snapshot with the candidates in: what the per-candidate checks read."""

    grid: cells.Grid
    index: Index
    baseline: merge.Merged
    status: Mapping[str, merge.State]
    skip: set[str]
    candidates: Sequence[merge.Entry]
    # Applied now but not in the baseline (the candidates, and overlays a candidate's change revived):
    # the only ones that can take cells from an unchanged overlay.
    gained: Sequence[merge.Entry]
    # Applied in the baseline but not now (replaced, deleted or now dropped): they can only give cells back.
    lost: Sequence[merge.Entry]


def evaluate(grid: cells.Grid, index: Index, entries: Mapping[str, merge.Entry], baseline: merge.Merged,
             changed: Sequence[str], old: Sequence[merge.Entry], candidates: Sequence[merge.Entry],
             raw: Callable[[str], Mapping[str, Any]], keys: Mapping[str, frozenset[str]]) -> Delta:
    """`keys` lists only the overlays that use bindingKeys."""
    skip = set(changed)
    component, local = _settle(index, baseline, old, candidates, skip)
    status = {**baseline.status, **local.status}
    verdicts = {n: v for n, v in baseline.verdicts.items() if n not in local.status}
    verdicts.update(local.verdicts)
    for gone in old:
        if gone.name not in entries:
            status.pop(gone.name, None)
            verdicts.pop(gone.name, None)
    unchanged = [m for m in component if m.name not in skip]
    view = _View(grid, index, baseline, status, skip, candidates,
                 [*(c for c in candidates if status.get(c.name) == merge.APPLIED),
                  *(m for m in unchanged if local.status.get(m.name) == merge.APPLIED
                    and baseline.status.get(m.name) != merge.APPLIED)],
                 [*(o for o in old if baseline.status.get(o.name) == merge.APPLIED),
                  *(m for m in unchanged if baseline.status.get(m.name) == merge.APPLIED
                    and local.status.get(m.name) != merge.APPLIED)])
    taken = index.taken.changed(candidates, skip)
    out: list[findings.Finding] = []
    claims: list[merge.Claim] = []
    for c in candidates:
        neighbours = index.near(c, skip, candidates, index.relevant(c))
        own, others = _split(_clashes(index, c, neighbours, skip, candidates), entries, skip)
        out += checks.conflicts(grid, entries, status, verdicts, own, taken)
        out += _first_few(checks.conflicts(grid, entries, status, verdicts, others[:merge.CLASH_LIMIT], taken),
                          len(others))
        if status.get(c.name) == merge.APPLIED:
            out += _effect(grid, c, neighbours, status, claims)
        out += [f for f in (checks.shadowed(grid, c, field, neighbours, status) for field in c.fields()) if f]
        out += _scope(c, entries, raw, keys)
    out += _shadowed_others(view, single=len(changed) == 1)
    return Delta(tuple(out), status, verdicts, tuple(claims), tuple(local.status))


def _effect(grid: cells.Grid, c: merge.Entry, neighbours: Sequence[merge.Entry], status: Mapping[str, merge.State],
            claims: list[merge.Claim]) -> list[findings.Finding]:
    """Appends an applied candidate's claims; returns its price-clamped finding, if any."""
    out = []
    for field in c.fields():
        mine = checks.claim(c, field, checks.higher(c, field, neighbours, status))
        claims.append(merge.Claim(c.name, field, mine))
        if field == merge.PRICE and (clamp := checks.clamped(grid, c, mine)) is not None:
            out.append(clamp)
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


def _shadowed_others(view: _View, single: bool) -> list[findings.Finding]:
    """`shadowed` findings on unchanged overlays that name a candidate among the winners they list.
    With one changed overlay a report keeps the first merge.CLASH_LIMIT of them (evaluate._bounded),
    so only those are built, and the rest only counted."""
    found = []
    for field, targets in _targets(view).items():
        scope = _Scope.of(view, field)
        found += [(view.index.order[t], field) for t in targets if _shadowed(view, scope, t)
                  and (not single or _names_first(view, scope, t))]
    if not single:
        named = [(t, field, _winners(view, t, field)) for t, field in found]
        return [checks.shadow(view.grid, t, field, names) for t, field, names in named
                if view.skip.intersection(names)]

    def order(target: tuple[merge.Entry, merge.Field]) -> tuple[Any, ...]:
        o = target[0].overlay
        return (o.source if o.source is not None else -1, o.ref, findings.json_path(*target[1].path(o)))

    first = [checks.shadow(view.grid, t, field, _winners(view, t, field))
             for t, field in sorted(found, key=order)[:merge.CLASH_LIMIT]]
    return _first_few(first, len(found))


def _targets(view: _View) -> dict[merge.Field, list[int]]:
    """field -> the unchanged applied overlays (by position) where an applied candidate above them sets
    the field on a common cell: the only shadowed findings that can name a candidate."""
    index, status = view.index, view.status
    out: dict[merge.Field, dict[int, None]] = {}
    unchanged = ~index.mask(view.skip)
    for c in view.candidates:
        if status.get(c.name) != merge.APPLIED:
            continue
        setting = 0
        for field in c.fields():
            setting |= index.by_field.get(field, 0)
        below = setting & unchanged & ~index.before(c.rank)
        # A broad candidate is in thousands of buckets: their union only when something is left.
        below &= index.coarse(c) if below else 0
        for field, bits in c.fields().items():
            found, cells_at, names = out.setdefault(field, {}), index.field_cells.get(field, {}), index.names
            for t in index.positions(below & index.by_field.get(field, 0)):
                if status.get(names[t]) == merge.APPLIED and cells_at[t].intersects(bits):
                    found[t] = None
    return {field: list(found) for field, found in out.items()}


@dataclasses.dataclass(frozen=True)
class _Scope:
    """What the shadow test of one field reads, looked up once per request."""

    field: merge.Field
    cells: Mapping[int, cellset.Cells]
    claimed: Mapping[str, cellset.Cells]
    gained: Sequence[tuple[tuple[int, str], cellset.Cells]]
    lost: Sequence[tuple[tuple[int, str], cellset.Cells]]

    @classmethod
    def of(cls, view: _View, field: merge.Field) -> _Scope:
        def setting(entries: Iterable[merge.Entry]) -> list[tuple[tuple[int, str], cellset.Cells]]:
            return [(e.rank, e.fields()[field]) for e in entries if field in e.fields()]

        return cls(field, view.index.field_cells.get(field, {}), view.baseline.claimed_by_field.get(field, {}),
                   setting(view.gained), setting(view.lost))


def _shadowed(view: _View, scope: _Scope, t: int) -> bool:
    """checks.shadowed's test for an unchanged applied overlay: every cell of its field is set by applied
    overlays before it, none of its own weight."""
    return _covered(view, scope, t) and not _tied(view, view.index.order[t], scope.field, scope.cells[t])


def _covered(view: _View, scope: _Scope, t: int) -> bool:
    """Whether no cell of `t`'s field is left to it. Its baseline claim less what the gained overlays
    above it set is exact unless an overlay lost above it gave cells back: then look at its neighbours."""
    index = view.index
    bits, rank = scope.cells[t], index.ranks[len(index.ranks) - 1 - t]
    # Only an overlay applied in the baseline has a claim.
    rest = scope.claimed.get(index.names[t])
    if rest is None or (scope.lost and any(r > rank and lost.intersects(bits) for r, lost in scope.lost)):
        entry = view.index.order[t]
        around = view.index.near(entry, view.skip, view.candidates)
        return not checks.claim(entry, scope.field, checks.higher(entry, scope.field, around, view.status))
    gained = [taken for r, taken in scope.gained if r > rank]
    if len(gained) == 1:
        return rest.within(gained[0])
    for taken in gained:
        rest = rest - taken
    return not rest


def _tied(view: _View, t: merge.Entry, field: merge.Field, bits: cellset.Cells) -> bool:
    """Whether an overlay of `t`'s weight before it sets the field on a common cell (checks.shadowed
    leaves that to the conflict finding): a candidate, or a prepared one the change keeps."""
    if any(c.overlay.weight == t.overlay.weight and c.rank > t.rank
           and c.fields().get(field, merge.EMPTY).intersects(bits) for c in view.candidates):
        return True
    names, total = view.index.tied.get((t.name, field), ((), 0))
    if total > len(view.skip) or not view.skip.issuperset(names):
        return True
    if total == len(names):
        return False
    return any(n.rank > t.rank and n.overlay.weight == t.overlay.weight
               and n.fields().get(field, merge.EMPTY).intersects(bits)
               for n in view.index.near(t, view.skip, view.candidates))


def _above(view: _View, t: int, field: merge.Field) -> int:
    """Unchanged entries before the one at position `t` that set `field` and may share a cell with it."""
    index = view.index
    return index.coarse_at(index.keys[t]) & ((1 << t) - 1) & index.by_field[field] & ~index.mask(view.skip)


def _winners(view: _View, t: merge.Entry, field: merge.Field) -> list[str]:
    """The first merge.CLASH_LIMIT by name of the applied overlays before `t` that set `field` on its cells."""
    bits = t.fields()[field]
    names = [n.name for n in view.index.members(_above(view, view.index.position[t.name], field))
             if view.status.get(n.name) == merge.APPLIED and n.fields()[field].intersects(bits)]
    names += [c.name for c in view.candidates if c.rank > t.rank and view.status.get(c.name) == merge.APPLIED
              and c.fields().get(field, merge.EMPTY).intersects(bits)]
    return heapq.nsmallest(merge.CLASH_LIMIT, names)


def _names_first(view: _View, scope: _Scope, t: int) -> bool:
    """With one candidate (a winner over `t` by construction): whether it is among the winners a finding
    names, i.e. fewer than merge.CLASH_LIMIT winners precede it by name."""
    (c,) = view.candidates
    index, bits, found = view.index, scope.cells[t], 0
    for n in index.positions(_above(view, t, scope.field) & index.named_before(c.name)):
        if view.status.get(index.names[n]) == merge.APPLIED and scope.cells[n].intersects(bits):
            found += 1
            if found == merge.CLASH_LIMIT:
                return False
    return True


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
            among = index.by_weight.get(c.overlay.weight, 0) & index.by_field.get(field, 0)
            pool = [*index.near(laters[0], skip, candidates, among), laters[0]]
            out += merge.reported(c, field, laters, pool)
    return out


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
