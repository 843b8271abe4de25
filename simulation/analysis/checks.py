"""Findings that need the whole picture: conflicts, dead overlays, ties and clamped prices."""

from __future__ import annotations

import bisect
import dataclasses
import difflib
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from typing import Protocol

from simulation import findings, once
from simulation.analysis import arrays, effects, hints, overlaps, traps, unknowable
from simulation.semantics import catalog as cat
from simulation.semantics import cells, cellset, clash, merge, model, quantity, spelling
from simulation.semantics import requirements as reqs

_BUILTIN_KEYS = frozenset({reqs.NODEPOOL, reqs.ZONE, reqs.CAPACITY_TYPE})
_SHADOWED = findings.CODES["shadowed"]
_NAME = operator.attrgetter("name")
_RANK = operator.attrgetter("rank")


def conflicts(grid: cells.Grid, entries: Mapping[str, merge.Entry], status: Mapping[str, merge.State],
              verdicts: Mapping[str, merge.Dropped], clashes: Iterable[clash.Clash],
              taken: hints.Taken | None = None) -> list[findings.Finding]:
    """`taken`: the weights index over `entries`, when the caller keeps one."""
    out = []
    # One report's clashes mostly name one candidate against each of its partners: what they share is
    # worked out once (the candidate's requirement keys and free weights for the hints, a field's text, an
    # overlay's entry and whether Karpenter drops it, what Karpenter does with a dropped one).
    seen = hints.Seen()
    texts: dict[merge.Field, str] = {}
    named: dict[str, tuple[merge.Entry, bool]] = {}
    said: dict[str, str] = {}
    severity = findings.CODES["same-weight-conflict"]
    for k in clashes:
        later_entry, later_dropped = named.get(k.later) or _named(named, k.later, entries, status)
        earlier_entry, earlier_dropped = named.get(k.earlier) or _named(named, k.earlier, entries, status)
        later, earlier = later_entry.overlay, earlier_entry.overlay
        field = k.field
        text = texts.get(field)
        if text is None:
            text = texts[field] = str(field)
        witness = clash.witness(grid, k.cells, field)
        where = witness.describe() if witness is not None else "a common cell"
        # Karpenter drops at most one of the two: the later, else the earlier.
        if later_dropped or earlier_dropped:
            dropped = later.name if later_dropped else earlier.name
            karpenter = said.get(dropped)
            if karpenter is None:
                verdict = verdicts[dropped]
                karpenter = said[dropped] = (f"Karpenter marks {dropped} Conflict and ignores it whole "
                                             f"(it met {verdict.other} on {verdict.field})")
            detail = {"karpenter": "Conflict", "dropped": dropped}
        else:
            dropped = None
            karpenter = (f"Karpenter does not detect this and silently applies {earlier.name}'s value "
                         f"there (the earlier in its order)")
            detail = {"karpenter": "silent", "applied": earlier.name}
        message = (f"NodeOverlay {later.name} and {earlier.name} both set {text} "
                   f"at weight {later.weight} on {where}; {karpenter}")
        if k.more:
            message += f"; and {k.more} more earlier overlays of this weight set it on common cells"
            detail["more"] = str(k.more)
        taken = taken or hints.Taken(entries.values())
        # Today's value on the shared cells is the one Karpenter keeps: the earlier's, unless it dropped it.
        if dropped == earlier.name:
            hint = hints.conflict(later_entry, earlier_entry, taken, seen)
        else:
            hint = hints.conflict(earlier_entry, later_entry, taken, seen)
        detail.update(hint.detail)
        detail["weight"] = str(later.weight)
        detail["field"] = text
        # findings.make's finding, built positionally (one related ref; the code's severity).
        out.append(findings.Finding("same-weight-conflict", later.ref, field.path(later), message, (earlier.ref,),
                                    witness, severity, later.source, tuple(sorted(detail.items())), hint.text))
    return out


def _named(named: dict[str, tuple[merge.Entry, bool]], name: str, entries: Mapping[str, merge.Entry],
           status: Mapping[str, merge.State]) -> tuple[merge.Entry, bool]:
    """An overlay's entry and whether Karpenter drops it, kept in `named`."""
    found = named[name] = (entries[name], status.get(name) == merge.CONFLICT)
    return found


# A crowd, and the mask of its overlays applied with the change: what `higher` and `shadowed` read of the overlays
# around one.
Around = tuple[merge.Crowd, int]


def higher(e: merge.Entry, field: merge.Field, around: Iterable[Around]) -> list[merge.Entry]:
    """Applied overlays that precede `e` and set `field` on some of its cells."""
    bits = e.fields().get(field, merge.EMPTY)
    return [w for crowd, among in _preceding(e, field, around)
            for w in crowd.entries(crowd.meeting(field, bits, among))]


class Settled(Protocol):
    """What `first_higher` reads of a settled snapshot (index.Index)."""

    def above(self, e: merge.Entry, field: merge.Field, applied: int) -> list[merge.Entry] | None:
        """The field's `Above` answer for `e` over the snapshot's entries; None where `applied` (a crowd's applied
        entries) is not the snapshot's ahead of `e` on the field."""


def first_higher(e: merge.Entry, field: merge.Field, around: Sequence[Around],
                 settled: Settled | None = None, rest: Sequence[merge.Entry] | None = None) -> list[merge.Entry]:
    """The first clash.LIMIT by name of `higher`: the overlays a `shadowed` finding names. `settled`: the snapshot,
    whose `Above` answers for `around`'s first crowd (the snapshot's entries) wherever its applied ones ahead of `e`
    on the field are the snapshot's (a whole run; a request that moved no status and edited no applied overlay ahead
    of `e`); the other crowds (a request's few candidates), and every crowd elsewhere, are asked of `higher`.
    `rest`: `higher` over the other crowds, where the caller knows it (a lone candidate over every overlay it asks)."""
    if settled is not None and around:
        (_, applied), *others = around
        first = settled.above(e, field, applied)
        if first is not None:
            gained = rest if rest is not None else higher(e, field, others) if others else ()
            return named_first([*first, *gained]) if gained else first
    return named_first(higher(e, field, around))


def named_first(found: Iterable[merge.Entry]) -> list[merge.Entry]:
    """The first clash.LIMIT by name (the first few of a union are among the first few of each part). Sorted in C:
    a Python heap costs more for any likely count."""
    return sorted(found, key=_NAME)[:clash.LIMIT]


class Above:
    """One field's applied overlays of a settled snapshot, in Karpenter's order, as `first_higher` reads them:
    grouped by equal cells, each group's first clash.LIMIT by name as it stood at every place (a list changes only
    where an overlay enters it: kept as the places it changed at and its lists), the groups filed by place
    (cellset.Near). The winners over an overlay are the first by name of the groups begun before its place that
    meet its cells, each as it stood there: a few set tests and bisections where few groups are near (a grid's
    shadowed overlays are most of it; a price ladder of N rungs is N questions of one group each). Near many (a long
    requirement list's cells meet every group), the overlays before its place are read in name order (`_ByName`)
    and it stops at the clash.LIMIT-th whose group meets: about clash.LIMIT set tests, not one per group. Made whole
    and then only read: the snapshot keeps one per field asked (Index.above), for the whole run and requests
    alike."""

    def __init__(self, field: merge.Field, placed: Iterable[tuple[int, merge.Entry]]) -> None:
        """`placed`: the applied overlays setting `field`, as (place in Karpenter's order, entry), ascending."""
        number: dict[cellset.Cells, int] = {}
        self.cells: list[cellset.Cells] = []
        # Per group: the place it began at (ascending with the groups), the places its list changed at, the lists.
        self.begun: list[int] = []
        self.changed: list[list[int]] = []
        self.firsts: list[list[tuple[merge.Entry, ...]]] = []
        # Per overlay: its place, the overlay and its group (`_ByName` reads them).
        self.placed: list[tuple[int, merge.Entry, int]] = []
        self.near = cellset.Near()
        for place, e in placed:
            bits = e.fields()[field]
            group = number.get(bits)
            if group is None:
                group = number[bits] = len(self.cells)
                self.cells.append(bits)
                self.begun.append(place)
                self.changed.append([])
                self.firsts.append([])
                self.near.add(group, bits)
                first: tuple[merge.Entry, ...] = ()
            else:
                first = self.firsts[group][-1]
            self.placed.append((place, e, group))
            if len(first) < clash.LIMIT or e.name < first[-1].name:
                kept = list(first)
                bisect.insort(kept, e, key=_NAME)
                self.changed[group].append(place)
                self.firsts[group].append(tuple(kept[:clash.LIMIT]))
        self.near.settle()

    @once.Once
    def packed(self) -> overlaps.Overlaps:
        """The groups' cells packed, for an overlay near many groups few of which meet it."""
        return overlaps.Overlaps.build(self.cells)

    @once.Once
    def by_name(self) -> _ByName:
        """Made on the first question near more than `_GROUPS` groups: most fields never have one."""
        return _ByName(self.placed)

    def first(self, place: int, bits: cellset.Cells) -> list[merge.Entry]:
        """The first clash.LIMIT by name of the overlays before `place` whose cells meet `bits`."""
        begun = bisect.bisect_left(self.begun, place)
        near: Sequence[int] | None = self.near.around(bits)
        near = range(begun) if near is None else near[:bisect.bisect_left(near, begun)]
        cells = self.cells
        if len(near) <= _GROUPS:
            met: Iterable[int] = [group for group in near if cells[group].intersects(bits)]
        else:
            found = self.by_name.first(place, lambda group: cells[group].intersects(bits))
            if found is not None:
                return found
            # Groups tested one by one and few met: the rest are asked of the packed cells at once.
            met = arrays.ones(self.packed.meeting(bits, (1 << begun) - 1), begun).tolist()
        firsts, changed = self.firsts, self.changed
        lists = [firsts[group][bisect.bisect_left(changed[group], place) - 1] for group in met]
        # One group met (a ladder's rung, a tier): its list is in name order already.
        return list(lists[0]) if len(lists) == 1 else named_first(w for first in lists for w in first)


class _ByName:
    """`Above`'s overlays in name order, with a tree of the least place under each span of that order: the next
    overlay by name before a place is found in a walk down from the first span holding one (log steps), not by
    passing every overlay after it in Karpenter's order (a long requirement list's ladder has its names against its
    places, so each rung would pass the thousands above it by name)."""

    def __init__(self, placed: Sequence[tuple[int, merge.Entry, int]]) -> None:
        ordered = sorted(placed, key=lambda item: item[1].name)
        self.entries = [e for _, e, _ in ordered]
        self.groups = [group for _, _, group in ordered]
        size = 1
        while size < len(ordered):
            size *= 2
        self.size = size
        # Leaves at size.., padded with a place no question asks below; node i holds the least of 2i and 2i+1.
        least = [len(placed)] * (2 * size)
        least[size:size + len(ordered)] = [place for place, _, _ in ordered]
        for i in range(size - 1, 0, -1):
            least[i] = min(least[2 * i], least[2 * i + 1])
        self.least = least

    def next(self, start: int, place: int) -> int:
        """The first position in name order at or after `start` of an overlay before `place` (len(entries): none)."""
        least, size = self.least, self.size
        if start >= len(self.entries):
            return len(self.entries)
        i = start + size
        while least[i] >= place:
            # Up past the spans this one ends, then the next span to the right.
            while i & 1:
                i >>= 1
            if not i:
                return len(self.entries)
            i += 1
        while i < size:
            i = 2 * i if least[2 * i] < place else 2 * i + 1
        return i - size

    def first(self, place: int, meets: Callable[[int], bool]) -> list[merge.Entry] | None:
        """The first clash.LIMIT by name of the overlays before `place` whose group `meets`; None once more than
        `_WALK` groups are tested without finding them (few groups meet: the caller asks them all at once)."""
        found: list[merge.Entry] = []
        met: dict[int, bool] = {}
        at = self.next(0, place)
        while at < len(self.entries) and len(found) < clash.LIMIT:
            group = self.groups[at]
            ok = met.get(group)
            if ok is None:
                if len(met) >= _WALK:
                    return None
                ok = met[group] = meets(group)
            if ok:
                found.append(self.entries[at])
            at = self.next(at + 1, place)
        return found


# Above.first tests at most this many groups near an overlay one by one; near more, it walks them by name, testing
# at most _WALK before asking the rest of the packed cells at once.
_GROUPS = 256
_WALK = 256


def _preceding(e: merge.Entry, field: merge.Field, around: Iterable[Around]) -> list[Around]:
    """Per crowd, its applied overlays that precede `e` and set `field` (a mask): `higher` is those of them that
    meet `e`'s cells."""
    out = []
    for crowd, applied in around:
        among = applied & crowd.before(e.rank) & crowd.setting(field)
        if among:
            out.append((crowd, among))
    return out


def listed(neighbours: Iterable[merge.Entry], status: Mapping[str, merge.State]) -> Around:
    """Overlays in a list, as a crowd with its applied ones."""
    crowd = merge.Listed(neighbours)
    return crowd, crowd.where(lambda n: status.get(n.name) == merge.APPLIED)


def claim(e: merge.Entry, field: merge.Field, winners: Iterable[merge.Entry]) -> cellset.Cells:
    """The cells on which `e`'s value for `field` is the one in effect."""
    left = e.fields().get(field, merge.EMPTY)
    for w in winners:
        if not left:
            break
        left -= w.fields()[field]
    return left


def shadowed(grid: cells.Grid, e: merge.Entry, field: merge.Field, around: Sequence[Around],
             status: Mapping[str, merge.State], claimed: cellset.Cells | None = None,
             settled: Settled | None = None) -> findings.Finding | None:
    """An applied overlay's field whose every cell a higher-precedence overlay already sets.
    A same-weight overlap is reported as a conflict instead. `claimed`: its claim on the field, where the caller
    has it (Karpenter's loop records every claim as it goes); `settled`: the snapshot whose entries `around`'s first
    crowd holds (first_higher reads its `Above`)."""
    bits = e.fields().get(field, merge.EMPTY)
    if status.get(e.name) != merge.APPLIED or not bits:
        return None
    if claimed is None:
        claimed = claim(e, field, higher(e, field, around))
    if claimed:
        return None
    if any(clash.partners(crowd, e.weight, field, bits, crowd.before(e.rank)) for crowd, _ in around):
        return None
    return shadow(grid, e, field, first_higher(e, field, around, settled))


@dataclasses.dataclass(frozen=True)
class Site:
    """What a `shadowed` finding on one overlay's field says whichever overlays win over it: the cell it names,
    that cell's text and catalog price (for a price), the field's path and the message's opening words. A snapshot
    keeps one per unchanged overlay and field it has reported (shadows.others), so that a request builds only what
    names its candidate."""

    witness: findings.Witness | None
    where: str
    base: float | None
    path: tuple[str | int, ...]
    # The message's words before the winners' names.
    lead: str


def site(grid: cells.Grid, e: merge.Entry, field: merge.Field) -> Site:
    """The `Site` of `e`'s `field`."""
    price = field.kind is merge.Kind.PRICE
    witness = grid.witness(e.fields().get(field, merge.EMPTY), with_offering=price)
    return Site(witness, witness.describe() if witness else "-",
                traps.base_price(grid, witness) if price and witness is not None else None, field.path(e.overlay),
                f"NodeOverlay {e.name}: {field} has no effect; every cell it selects is already set by "
                "higher-precedence ")


def shadow(grid: cells.Grid, e: merge.Entry, field: merge.Field,
           winners: Sequence[merge.Entry], at: Site | None = None) -> findings.Finding:
    """The `shadowed` finding on `e`'s `field`; `winners`: those over it by name (the finding names only
    the first clash.LIMIT, so those suffice); `at`: its `site`, where the caller keeps it."""
    overlay = e.overlay
    if at is None:
        at = site(grid, e, field)
    witness = at.witness
    names = [w.name for w in winners[:clash.LIMIT]]
    message = f"{at.lead}{', '.join(names[:3])}{' …' if len(names) > 3 else ''} (e.g. {at.where})"
    # The overlays' own refs (built once each), not new ones per finding.
    related = tuple(w.overlay.ref for w in winners[:clash.LIMIT])
    hint = ""
    if field.kind is merge.Kind.PRICE and winners and witness is not None and \
            (stack := traps.stacked(overlay, max(winners[:clash.LIMIT], key=_RANK).overlay, at.base)) is not None:
        # Price overlays meant to stack (issue 41 row 3): the message and hint say how to charge both.
        said, hint = stack
        message += said
    if len(set(names)) < len(names):
        # Two winners of one name (candidates so named): findings.make keeps one.
        return findings.make("shadowed", overlay.ref, at.path, message, related=related,
                             witness=witness, source=overlay.source, hint=hint)
    # findings.make's finding, built positionally: distinct refs, in name order already (a report builds
    # clash.LIMIT of these per candidate).
    return findings.Finding("shadowed", overlay.ref, at.path, message, related, witness, _SHADOWED,
                            overlay.source, (), hint)


def clamped(grid: cells.Grid, e: merge.Entry, price_claim: cellset.Cells) -> findings.Finding | None:
    """A negative additive adjustment that takes some offering in effect below 0."""
    overlay = e.overlay
    adj = overlay.price_update
    amount = effects.clamps_below(adj) if adj is not None else None
    if amount is None:
        return None
    hit = price_claim & grid.below_price(amount)
    if not hit:
        return None
    witness = grid.witness(hit)
    message = (f"NodeOverlay {overlay.name}: priceAdjustment {adj} drives the price below 0 and Karpenter "
               f"clamps it to 0 (e.g. {witness.describe() if witness else '-'})")
    return findings.make("price-clamped", overlay.ref, ("spec", "priceAdjustment"), message,
                         witness=witness, source=overlay.source)


def fractional_resources(overlay: model.Overlay) -> list[findings.Finding]:
    """Extended resources (a domain-qualified name outside kubernetes.io) given a fraction."""
    out = []
    for name, value in overlay.capacity:
        if "/" not in name or name.split("/", 1)[0].endswith("kubernetes.io"):
            continue
        try:
            amount = quantity.parse(value)
        except quantity.QuantityError:
            continue  # the schema layer reports it
        if amount != amount.to_integral_value():
            out.append(findings.make(
                "fractional-extended-resource", overlay.ref, ("spec", "capacity", name),
                f"NodeOverlay {overlay.name}: capacity {name} is {value}, a fraction: Kubernetes counts extended "
                "resources in whole units, so no pod can request it and Karpenter's simulation counts capacity no "
                "node will advertise", source=overlay.source))
    return out


# Below this many instance types a price on all of them can be meant (a catalog of a few types, a test).
EVERY_TYPE_MINIMUM = 10


def price_on_every_type(grid: cells.Grid, e: merge.Entry) -> findings.Finding | None:
    """An absolute price on some offering of every instance type of a catalog of many."""
    if e.overlay.price is None or len(grid.types) < EVERY_TYPE_MINIMUM:
        return None
    fold, reach = e.cells.fold(), 0
    for slot in range(grid.slots):
        reach |= fold >> slot
    if reach & grid.first_slots != grid.first_slots:
        return None
    return findings.make(
        "price-on-every-type", e.overlay.ref, ("spec", "price"),
        f"NodeOverlay {e.overlay.name}: price {e.overlay.price} applies to every instance type of the "
        f"{grid.catalog or 'catalog'}: they all cost the same to Karpenter, which then no longer prefers cheaper "
        "types", source=e.overlay.source)


def known_keys(grid: cells.Grid) -> set[str]:
    # One pass over every NodePool's labels and requirement keys (a key a NodePool only constrains is
    # still one the operator knows about): evaluate asks this once per request.
    named = {k for pool in grid.pools for k in pool.labels}
    named.update(r.key for pool in grid.pools for r in pool.requirements)
    normalized = reqs.NORMALIZED_LABELS
    return set(grid.labels) | _BUILTIN_KEYS | {normalized.get(k, k) for k in named}


# How near a word must be to be proposed (difflib's ratio).
_NEAR = 0.8


def _hint(word: str, candidates: Iterable[str], among: spelling.Words | None = None) -> str:
    """`among`: more candidates (a label's values in the catalog, thousands of instance types), asked through
    their table."""
    if among is None:
        found = difflib.get_close_matches(word, sorted(candidates), n=1, cutoff=_NEAR)
        near = found[0] if found else None
    else:
        near = among.closest(word, _NEAR, candidates)
    return f" (did you mean {near!r}?)" if near is not None else ""


def unknown_labels(grid: cells.Grid, overlay: model.Overlay, keys: Set[str],
                   every_nodepool: bool = False) -> list[findings.Finding]:
    """A warning per requirement key that no NodePool and no instance type of the catalog defines; an error where
    that leaves the overlay without a cell and the key is certainly undefined (unknowable.certain: every NodePool
    is known, and the catalog's provider cannot define it), as Karpenter then never applies the overlay."""
    if overlay.label_keys() <= keys:  # most overlays: a set test, not a look at each of their requirements
        return []
    out = []
    for i, r in enumerate(overlay.requirements):
        key = reqs.NORMALIZED_LABELS.get(r.key, r.key)
        if key in keys:
            continue
        # An undefined key leaves the overlay unmatched unless its operator accepts undefined labels: that is
        # the catalog not knowing the key, not the overlay selecting nothing, so no no-match is added.
        unmatched = unknowable.needs_undefined(r, keys)
        elsewhere = _elsewhere(grid, key)
        near = _hint(key, keys)
        detail = {"catalog": grid.catalog, "unmatched": "true" if unmatched else "false"}
        path = ("spec", "requirements", i, "key")
        if unmatched and unknowable.certain(grid, key, every_nodepool):
            pools = sum(not p.implicit for p in grid.pools)
            message = (f"NodeOverlay {overlay.name}: label {r.key!r} is certainly undefined: no NodePool among all "
                       f"{pools} and no instance type of {grid.provider} defines it{near}; the overlay matches "
                       "nothing and Karpenter never applies it")
            fix = (f"correct the key{near}" if near else
                   "correct the key, or define the label in the template of the NodePools it is meant to select")
            out.append(findings.make("unknown-label", overlay.ref, path, message, source=overlay.source,
                                     detail={**detail, "certain": "true"}, hint=fix)
                       .with_severity(findings.Severity.ERROR))
            continue
        message = (f"NodeOverlay {overlay.name}: label {r.key!r} is defined by no NodePool and no instance type "
                   f"of the {grid.catalog or 'catalog'}{elsewhere or near}"
                   + ("; the overlay matches nothing here" if unmatched else ""))
        out.append(findings.make("unknown-label", overlay.ref, path, message, source=overlay.source, detail=detail))
    return out


def _elsewhere(grid: cells.Grid, key: str) -> str:
    """Where a key the catalog lacks does come from: another cloud's provider."""
    provider = cat.provider_of((key,))
    if provider and provider != grid.provider:
        return f"; it is a label of Karpenter's {provider} provider: lint with --catalog of {provider} instance types"
    return ""


def no_match(grid: cells.Grid, overlay: model.Overlay, keys: Set[str]) -> findings.Finding | None:
    """Why the overlay matches no cell; None where an undefined key says it (unknown-label)."""
    reason = "no NodePool and instance type satisfy all of its requirements together"
    path: tuple[str | int, ...] = ("spec", "requirements")
    for i, r in enumerate(overlay.requirements):
        key = reqs.NORMALIZED_LABELS.get(r.key, r.key)
        single = grid.match(reqs.from_specs([(r.key, r.operator, r.values)]))
        if single:
            continue
        if key not in keys:
            return None
        path = ("spec", "requirements", i)
        reason = _selects_nothing(grid, r, key)
        break
    return findings.make("no-match", overlay.ref, path,
                         f"NodeOverlay {overlay.name} matches no NodePool/instance type/offering: {reason}",
                         source=overlay.source)


def _selects_nothing(grid: cells.Grid, r: model.ReqSpec, key: str) -> str:
    index = grid.labels.get(key)
    known = _values(grid, key)
    missing = [v for v in r.values if v not in known]
    said = f"requirement {r.key} {r.operator} {_listed(r.values)} selects nothing"
    if r.operator != reqs.IN or not missing:
        return said
    if key == reqs.NODEPOOL:
        pools = [p.name for p in grid.pools if not p.implicit]
        return (f"NodePool {_listed(missing)} is not among the inputs (known: {_listed(pools) if pools else 'none'}; "
                "give the NodePools, or --existing/--cluster)")
    if key in (reqs.ZONE, reqs.REGION) and grid.region:
        placed = {v: cat.zone_region(v, grid.provider) if key == reqs.ZONE else v for v in missing}
        outside = [v for v, where in placed.items()
                   if where is not None and where != grid.region and cat.is_region(where, grid.provider)]
        if outside:
            return (f"{_listed(outside)} is outside region {grid.region}, the region checked "
                    "(--region chooses; see the note)")
    if key == reqs.ZONE:
        # A zone is proposed only in the naming of the cloud the value has, where it has one: never an AWS-shaped
        # zone for an Azure one.
        place = cat.zone_place(missing[0], grid.provider)
        if place is not None:
            known = {z for z in known if (cat.zone_place(z, grid.provider) or ("",))[0] == place[0]}
    elif index is not None:
        return said + _hint(missing[0], known - index.by_value.keys(), index.words)
    return said + _hint(missing[0], known)


def _listed(values: Iterable[str]) -> str:
    return ", ".join(values)


def _values(grid: cells.Grid, key: str) -> set[str]:
    index = grid.labels.get(key)
    out = set(index.by_value) if index else set()
    if key == reqs.NODEPOOL:
        out |= {p.name for p in grid.pools}
    for pool in grid.pools:
        if key in pool.labels:
            out.add(pool.labels[key])
    return out


def weight_ties(grid: cells.Grid, pools: Sequence[model.NodePool]) -> list[findings.Finding]:
    """Equal-weight NodePools that can launch the same offering. Karpenter tries NodePools by weight, then
    by name descending (pkg/utils/nodepool OrderByWeight), so of a tie the name later in the alphabet is
    tried first: chosen by name, not by price or by what the operator meant."""
    at = {pool.name: p for p, pool in enumerate(grid.pools)}
    out = []
    ordered = sorted(pools, key=lambda p: p.name)
    # Per NodePool tried first and common offerings, the witness: NodePools alike but for their labels (one per
    # team) tie pairwise, P² findings over P witnesses.
    witnesses: dict[tuple[int, int], findings.Witness | None] = {}
    for i, then in enumerate(ordered):
        launched = grid.launch_blocks[at[then.name]]
        for first in ordered[i + 1:]:
            if then.weight != first.weight:
                continue
            common = launched & grid.launch_blocks[at[first.name]]
            if not common:
                continue
            key = (at[first.name], common)
            witness = witnesses[key] if key in witnesses else witnesses.setdefault(key, grid.witness(grid.at(*key)))
            what = witness.instance_type if witness is not None else "-"
            message = (f"NodePool {first.name} and {then.name} both have weight {first.weight} and can both launch "
                       f"{what}; Karpenter tries {first.name} first only because its name sorts later, "
                       f"not by price or intent")
            hint = (f"Give {first.name} and {then.name} distinct weights (the higher is tried first), "
                    f"or make their requirements disjoint.")
            detail = {"first": first.name, "then": then.name, "weight": str(first.weight), "tieBreak": "name"}
            out.append(findings.make("nodepool-weight-tie", first.ref, ("spec", "weight"), message,
                                     related=(then.ref,), witness=witness, source=first.source, detail=detail,
                                     hint=hint))
    return out
