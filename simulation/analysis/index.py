"""The prepared entries, indexed once per snapshot for the incremental path's neighbour questions:
big-int masks over Karpenter's order (which entries share a bucket, set a field, have a weight,
precede an overlay). It holds no rule: the answers come from merge, clash and checks over the
entries it finds, and its size grows with the entries, not with fields x cells."""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence

from simulation import memo, once
from simulation.analysis import arrays, checks, hints, kinds, overlaps
from simulation.semantics import cellset, clash, merge

# Bits of a NodePool block per index bucket: a neighbour scan visits the buckets of the target's
# NodePools and instance-type ranges only.
CHUNK = 64
# An entry's buckets: its NodePools x the CHUNK-slot ranges its fold has bits in (as indices).
Keys = tuple[tuple[int, ...], tuple[int, ...]]
# Up to this many set bits, a mask's positions are cleared one by one (_ones).
FEW = 8
# Up to this many asked, "meeting" tests each entry while the packed cells are not made yet (Unchanged.meeting).
UNPACKED = 256
# The distinct cells whose "meeting" answers a snapshot remembers (two masks each, so memory linear in the entries:
# 2 MB at 100,000): a request asks about its candidates' cells again and again, and the requests after it about the
# same cells (a denied candidate is sent again: retries, dry runs, re-applies); a component of thousands asks about
# each of its kinds once. Past it all are forgotten at once (dict.clear is one step for concurrent requests).
REMEMBERED = 64
# Cells whose slots are more than 1/SPREAD of a block are asked of their NodePools' buckets only (Unchanged.meeting):
# they span dozens of chunks (a capacity-type-wide candidate: 18-64 of 128), whose buckets leave hundreds of rows,
# which cost as much as reading every row (row 5's spot-wide candidates, in a request: 115 -> 80 us).
SPREAD = 64


@dataclasses.dataclass(frozen=True)
class Index:
    """The prepared entries, indexed once per snapshot. A set of entries is an int whose bit i is the
    i-th entry in Karpenter's order, so that "shares a NodePool and a type range with the target",
    "sets this field" and "precedes this overlay" are each one mask, and their meet a few big-int ANDs."""

    # The buckets, factored: NodePool -> the entries with cells there; range of instance types (CHUNK slots)
    # -> the entries whose fold has bits there. An entry's buckets are a product of the two (_keys), so the
    # entries sharing a bucket with a target are those meeting one of its NodePools and one of its ranges:
    # |NodePools| + |ranges| ORs, not their product (10,000 for a broad candidate at 100 NodePools).
    by_pool: Mapping[int, int]
    order: tuple[merge.Entry, ...] = ()
    position: Mapping[str, int] = dataclasses.field(default_factory=dict)
    # The entries' ranks, ascending (the reverse of `order`), to place an overlay among them.
    ranks: tuple[tuple[int, str], ...] = ()
    # field -> the entries that set it
    by_field: Mapping[merge.Field, int] = dataclasses.field(default_factory=dict)
    taken: hints.Taken = dataclasses.field(default_factory=lambda: hints.Taken(()))
    # The entries' names sorted, and their positions in that order.
    sorted_names: tuple[str, ...] = ()
    by_name: tuple[int, ...] = ()
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
    keys: tuple[Keys, ...] = ()
    # Per position: the entry's place in a report's order (source, then name).
    report_rank: tuple[int, ...] = ()
    # The entries Karpenter applies in the baseline (`settled`; None before): narrows a scan of thousands to
    # the few applied.
    applied_bits: int | None = None
    pool_count: int = 0
    # The entries by kind (alike overlays: a crowd of copies is one kind).
    by_kind: kinds.Kinds = dataclasses.field(default_factory=kinds.Kinds)
    # The other factor of the buckets (see by_pool).
    by_chunk: Mapping[int, int] = dataclasses.field(default_factory=dict)
    # The baseline's claims (`settled`), and per field the entries holding one and those claims packed, made on
    # a field's first question: a cache of values derived from the snapshot alone, so any request may fill it.
    claimed: Mapping[merge.Field, Mapping[str, cellset.Cells]] = dataclasses.field(default_factory=dict)
    claim_tables: dict[merge.Field, tuple[int, overlaps.Overlaps]] = dataclasses.field(default_factory=dict)
    # Per field, the baseline's applied entries setting it as checks.Above, made on the field's first question (the
    # whole run's shadowed findings, a request's): as `claim_tables`, derived from the snapshot alone.
    aboves: dict[merge.Field, checks.Above] = dataclasses.field(default_factory=dict)
    # (position, field) -> an entry's answer of `aboves` (Index.above).
    winners: dict[tuple[int, merge.Field], list[merge.Entry]] = dataclasses.field(default_factory=dict)
    # (position, field) -> what a `shadowed` finding on that entry's field says whoever wins over it (checks.Site,
    # filled by shadows.others): its witness, that cell's text and price, picked once per snapshot.
    sites: dict[tuple[int, merge.Field], checks.Site] = dataclasses.field(default_factory=dict)
    # (the level asked, cells) -> (the entries asked about so far, those of them meeting the cells), as masks: the
    # answers of every request's crowd (Unchanged.meeting), derived from the snapshot alone, at most REMEMBERED.
    met: dict[tuple[bool, cellset.Cells], tuple[int, int]] = dataclasses.field(default_factory=dict)
    # (field, cells) -> `inside`'s answer, at most REMEMBERED (as `claim_tables`, derived from the baseline).
    insides: dict[tuple[merge.Field, cellset.Cells], int] = dataclasses.field(default_factory=dict)

    # `report_rank`, `order` and `names` as arrays: a request takes a crowd's thousands of them in one step, not
    # one each. Made on first need (numpy's import alone costs a one-file check more than its whole merge).
    @once.Once
    def report_ranks(self) -> arrays.Ints:
        return arrays.ints(self.report_rank)

    # The positions in a report's order (`report_rank`'s inverse).
    @once.Once
    def in_report(self) -> arrays.Ints:
        return arrays.ranks(self.report_rank)

    # Per position, its place by name: one int per entry, where masks of prefixes of the by-name order would grow
    # with the square of the entries.
    @once.Once
    def name_ranks(self) -> arrays.Ints:
        return arrays.ranks(self.by_name)

    # The entries' same-weight clashes: a whole run reports them, and a snapshot's `tied` and its baseline's
    # findings (evaluate._judged) read the one list.
    @once.Once
    def clashes(self) -> tuple[clash.Clash, ...]:
        return tuple(clash.same_weight(self.order))

    # Made on a request's first need: a whole run (a `check`) never asks.
    @once.Once
    def tied(self) -> Mapping[tuple[str, merge.Field], tuple[tuple[str, ...], int]]:
        """(overlay, field) -> (some of the same-weight overlays before it that set the field on a common cell, how
        many there are in all): what a `shadowed` finding defers to (clash.same_weight)."""
        out: dict[tuple[str, merge.Field], tuple[tuple[str, ...], int]] = {}
        for k in self.clashes:
            names, total = out.get((k.later, k.field), ((), 0))
            out[(k.later, k.field)] = ((*names, k.earlier), total + 1 + k.more)
        return out

    @once.Once
    def ties(self) -> Mapping[merge.Field, int]:
        """field -> the positions `tied` holds any overlay for."""
        out: dict[merge.Field, int] = {}
        for name, field in self.tied:
            out[field] = out.get(field, 0) | 1 << self.position[name]
        return out

    @once.Once
    def entry_array(self) -> arrays.Objects:
        return arrays.objects(self.order)

    @once.Once
    def name_array(self) -> arrays.Objects:
        return arrays.objects(self.names)

    # Every entry's cells per level, packed for the exact overlap questions of a crowd (overlaps.py).
    @once.Once
    def offering_overlaps(self) -> overlaps.Overlaps:
        return overlaps.Overlaps.build([e.cells for e in self.order])

    @once.Once
    def type_overlaps(self) -> overlaps.Overlaps:
        return overlaps.Overlaps.build([e.type_cells for e in self.order])

    def crowd(self, skip: set[str], remember: bool = False) -> Unchanged:
        """The entries less the changed ones, as a merge.Crowd; `remember`: its answers to `meeting` kept with the
        snapshot's (`met`), for the rules of one request and the requests after it to share (Unchanged)."""
        return Unchanged(self, ((1 << len(self.order)) - 1) & ~self.mask(skip), self.met if remember else None)

    @classmethod
    def build(cls, entries: Sequence[merge.Entry], pools: int) -> Index:
        order = tuple(merge.ordered(entries))
        by_pool: dict[int, list[int]] = {}
        by_chunk: dict[int, list[int]] = {}
        by_field: dict[merge.Field, int] = {}
        field_cells: dict[merge.Field, dict[int, cellset.Cells]] = {}
        by_weight: dict[int, int] = {}
        prices = capacities = 0
        keys = tuple(_keys(e) for e in order)
        for i, e in enumerate(order):
            pools_in, chunks_in = keys[i]
            for pool in pools_in:
                by_pool.setdefault(pool, []).append(i)
            for chunk in chunks_in:
                by_chunk.setdefault(chunk, []).append(i)
            for field, bits in e.fields().items():
                by_field[field] = by_field.get(field, 0) | 1 << i
                field_cells.setdefault(field, {})[i] = bits
            by_weight[e.overlay.weight] = by_weight.get(e.overlay.weight, 0) | 1 << i
            prices |= (e.overlay.price_update is not None) << i
            capacities |= e.overlay.capacity_set << i
        by_name = sorted(range(len(order)), key=lambda i: order[i].name)
        position = {e.name: i for i, e in enumerate(order)}
        report_rank = [0] * len(order)
        in_report = sorted(range(len(order)), key=lambda i: _report_key(order[i]))
        for place, i in enumerate(in_report):
            report_rank[i] = place
        return cls({pool: _mask(at, len(order)) for pool, at in by_pool.items()}, order, position,
                   tuple(e.rank for e in reversed(order)),
                   by_field, hints.Taken(order), tuple(order[i].name for i in by_name), tuple(by_name),
                   by_weight, prices, capacities, tuple(e.name for e in order), field_cells,
                   keys, tuple(report_rank), pool_count=pools,
                   by_kind=kinds.Kinds.build(order),
                   by_chunk={chunk: _mask(at, len(order)) for chunk, at in by_chunk.items()})

    def settled(self, baseline: merge.Merged) -> Index:
        """This index with what Karpenter's outcome over its entries decides: which are applied. What was made of
        the entries alone on first need (the packed cells, the arrays) is kept."""
        settled = dataclasses.replace(self, applied_bits=self.mask(baseline.applied),
                                      claimed=baseline.claimed_by_field, claim_tables={},
                                      aboves={}, winners={}, insides={})
        own = {f.name for f in dataclasses.fields(self)}
        settled.__dict__.update({k: v for k, v in self.__dict__.items() if k not in own})
        return settled

    def warm(self) -> None:
        """Make now what the first request would (the arrays, the packed cells, the price claims): a server swaps
        a snapshot in whole, and its next admission should not pay for it."""
        for owner, name in ((self, "tied"), (self, "ties"), (self, "report_ranks"), (self, "in_report"),
                            (self, "entry_array"), (self, "name_array"), (self, "name_ranks"),
                            (self, "offering_overlaps"), (self, "type_overlaps"), (self.by_kind, "of_array")):
            getattr(owner, name)
        self.claims(merge.PRICE)
        self.taken.warm()

    def claims(self, field: merge.Field) -> tuple[int, overlaps.Overlaps]:
        """The entries holding cells of `field` in the baseline (a mask), and every entry's claim packed (empty where
        none)."""
        table = self.claim_tables.get(field)
        if table is None:
            held = self.claimed.get(field, {})
            if not held:
                # A field no entry claims (a request's new extended resource) is asked nothing of the table: an
                # empty one, not an empty claim per entry packed and kept for every such field a request brings.
                return 0, overlaps.Overlaps.build(())
            table = self.claim_tables[field] = (self.mask(n for n, c in held.items() if c), overlaps.Overlaps.build(
                [held.get(n, merge.EMPTY) for n in self.names]))
        return table

    def above(self, e: merge.Entry, field: merge.Field, applied: int) -> list[merge.Entry] | None:
        """checks.Settled.above: the field's checks.Above over the baseline's applied entries, asked at `e`'s place;
        for an entry of the snapshot, its answer kept (`winners`: a broad candidate's requests name the same few)."""
        baseline = self.applied_bits
        if baseline is None:
            return None
        at = self.position.get(e.name)
        mine = at is not None and self.order[at] is e
        # An entry of the snapshot is at its own position; another (a candidate) at the place its rank takes.
        place = at if at is not None and mine else self.place(e.rank)
        # The crowd's applied entries setting the field differ from the baseline's ahead of this place: the table is
        # not the crowd's (the first difference, its lowest bit, is before the place).
        if applied is not baseline:
            moved = (applied ^ baseline) & self.by_field.get(field, 0)
            if moved and (moved & -moved).bit_length() <= place:
                return None
        key = (place, field)
        if mine and (found := self.winners.get(key)) is not None:
            return found
        table = self.aboves.get(field)
        if table is None:
            # The entries read off the mask's binary digits: numpy (`positions`) is not imported for it, so a one-shot
            # check of a price ladder does not load it.
            flags = _flags(baseline & self.by_field.get(field, 0))
            table = self.aboves[field] = checks.Above(field, itertools.compress(enumerate(self.order), flags))
        found = table.first(place, e.fields().get(field, merge.EMPTY))
        if mine:
            self.winners[key] = found
        return found

    def inside(self, field: merge.Field, cells: cellset.Cells) -> int:
        """The entries whose baseline claim on `field` is not empty and lies within `cells`, as a mask (the claims'
        Overlaps.inside from the first), remembered: a broad candidate's question reads every claim, and the same
        cells come again (a dry run and the apply, a retry, a cluster's few alike broad overlays)."""
        return memo.bounded(self.insides, (field, cells), lambda: self.claims(field)[1].inside(cells, 0), REMEMBERED)

    def place(self, rank: tuple[int, str]) -> int:
        """The position an overlay of this rank takes: the number of entries before it."""
        return len(self.ranks) - bisect.bisect_right(self.ranks, rank)

    def before(self, rank: tuple[int, str]) -> int:
        """The entries Karpenter processes before an overlay of this rank."""
        return (1 << len(self.ranks) - bisect.bisect_right(self.ranks, rank)) - 1

    def after(self, rank: tuple[int, str]) -> int:
        """The entries Karpenter processes after an overlay of this rank."""
        count = len(self.ranks)
        return ((1 << count) - 1) ^ ((1 << count - bisect.bisect_left(self.ranks, rank)) - 1)

    def coarse(self, target: merge.Entry) -> int:
        """The entries that share a bucket with the target (a superset of those sharing a cell)."""
        at = self.position.get(target.name)
        # A prepared entry's buckets are kept; a candidate's are worked out.
        return self.coarse_at(self.keys[at] if at is not None and self.order[at] is target else _keys(target))

    def coarse_at(self, keys: Keys) -> int:
        in_pools = self._in_pools(keys[0])
        return in_pools & self._in_chunks(keys[1]) if in_pools else 0

    def sharing(self, cells: cellset.Cells, among: int) -> int:
        """The entries of `among` in the buckets of `cells` (coarse_at of keys_of), or, when its NodePools' buckets
        alone leave a few, those (a superset, for the caller's exact test): the chunks' buckets are each as long as
        the index and a broad fold has dozens, which a shadow test per overlay of a NodePool-scoped tier would pay,
        and are then not even worked out (a walk over the fold's words per question)."""
        among = self.in_pools(cells, among)
        return among if among.bit_count() <= overlaps.FEW else among & self._in_chunks(_chunks(cells.fold()))

    def in_pools(self, cells: cellset.Cells, among: int) -> int:
        """The entries of `among` in the buckets of the NodePools of `cells`."""
        return among & self._in_pools(_ones(cells.pools()))

    def _in_pools(self, pools: Sequence[int]) -> int:
        out = 0
        for p in pools:
            out |= self.by_pool.get(p, 0)
        return out

    def _in_chunks(self, chunks: Sequence[int]) -> int:
        out = 0
        for k in chunks:
            out |= self.by_chunk.get(k, 0)
        return out

    def named_before(self, name: str) -> int:
        """The entries whose name sorts before `name`."""
        k = bisect.bisect_left(self.sorted_names, name)
        if k <= FEW or len(self.order) <= UNPACKED:
            return _mask(self.by_name[:k], len(self.order))
        return arrays.below(self.name_ranks, k)

    def first_in_report(self, mask: int, count: int) -> list[int]:
        """The positions of the first `count` entries of `mask` in a report's order, in that order."""
        if mask.bit_count() <= FEW:
            return sorted(self.positions(mask), key=self.report_rank.__getitem__)[:count]
        # The report's order read up to the count-th entry of the mask: no ranks of the mask's positions sorted.
        order = self.in_report
        first: list[int] = order[arrays.flags(mask, len(order))[order].nonzero()[0][:count]].tolist()
        return first

    def lowest(self, mask: int, count: int) -> int:
        """The first `count` of `mask` in Karpenter's order (its lowest bits)."""
        if mask.bit_count() <= count:
            return mask
        if count <= FEW:
            out = 0
            for _ in range(count):
                low = mask & -mask
                out |= low
                mask ^= low
            return out
        return arrays.mask(arrays.ones(mask, len(self.order))[:count], len(self.order))

    def of(self, positions: Iterable[int]) -> int:
        """The mask of these positions."""
        return _mask(positions, len(self.order))

    def mask(self, names: Iterable[str]) -> int:
        out = 0
        for name in names:
            if name in self.position:
                out |= 1 << self.position[name]
        return out

    def positions(self, mask: int) -> list[int]:
        return _ones(mask)

    def members(self, mask: int) -> list[merge.Entry]:
        order = self.order
        return [order[i] for i in self.positions(mask)]

    def near(self, target: merge.Entry, skip: set[str], extra: Sequence[merge.Entry]) -> list[merge.Entry]:
        """Entries whose coarse signature overlaps the target's: the prepared ones not named in `skip` (they
        changed), plus the `extra` (changed) ones."""
        name = target.name
        found = [n for n in self.members(self.coarse(target) & ~self.mask(skip))
                 if n.may_overlap(target) and n.name != name]
        return found + [n for n in extra if n.may_overlap(target) and n.name != name]


def _unasked() -> tuple[int, int]:
    """Index.met's answer before a first question about some cells: no entry asked, none met."""
    return 0, 0


@dataclasses.dataclass(frozen=True)
class Unchanged:
    """The index's entries in `members` (those a request did not change), as a merge.Crowd: each term a mask, the
    overlap asked of the entries sharing a bucket with the cells, in arrays. One request makes one and hands it to
    every rule it asks (incremental.evaluate), so that `meeting` answers a question once: Karpenter's conflict
    test, the guard's clash test and the shadow checks ask it of the same candidate's cells."""

    index: Index
    members: int
    # Index.met, or None: nothing remembered (a whole run asks about every overlay's cells once). An answer is about
    # the index's entries, whatever the members: a crowd reads only its members' part of it.
    known: dict[tuple[bool, cellset.Cells], tuple[int, int]] | None = dataclasses.field(
        default=None, compare=False, repr=False)

    def of_weight(self, weight: int) -> int:
        return self.index.by_weight.get(weight, 0) & self.members

    def before(self, rank: tuple[int, str]) -> int:
        return self.index.before(rank) & self.members

    def after(self, rank: tuple[int, str]) -> int:
        return self.index.after(rank) & self.members

    def setting(self, field: merge.Field) -> int:
        return self.index.by_field.get(field, 0) & self.members

    def pricing(self) -> int:
        return self.index.prices & self.members

    def sizing(self) -> int:
        return self.index.capacities & self.members

    def meeting(self, field: merge.Field, cells: cellset.Cells, among: int) -> int:
        among &= self.members
        known = self.known
        if known is None:
            return self._meeting(field, cells, among)
        # Only the entries not asked about before with these cells at this level are tested.
        key = (field.per_offering, cells)
        asked, hit = memo.bounded(known, key, _unasked, REMEMBERED)
        if fresh := among & ~asked:
            hit |= self._meeting(field, cells, fresh)
            known[key] = (asked | fresh, hit)
        return hit & among

    def _meeting(self, field: merge.Field, cells: cellset.Cells, among: int) -> int:
        index = self.index
        # The buckets' union only when more are asked than the exact test takes one by one; then that test.
        if among.bit_count() > overlaps.FEW:
            among = (index.sharing(cells, among) if cells.fold().bit_count() * SPREAD <= cells.block
                     else index.in_pools(cells, among))
        packed = "offering_overlaps" if field.per_offering else "type_overlaps"
        asked = among.bit_count()
        if asked <= UNPACKED and not once.made(index, packed):
            # A one-shot run's first questions: packing every entry's cells would cost more than them. Once packed,
            # the table answers even a few (it tests them one by one, reading the packed sets: no Entry.level each).
            out, order = 0, index.order
            while among:
                low = among & -among
                if order[low.bit_length() - 1].level(field).intersects(cells):
                    out |= low
                among ^= low
            return out
        table: overlaps.Overlaps = getattr(index, packed)
        return table.meeting(cells, among)

    def each(self, members: int) -> Iterator[merge.Entry]:
        """The entries of `members` in Karpenter's order, made as they are read: the first few one by one, the rest
        in one step, so that a reader stopping early (the conflict test stops at the first price it meets) does not
        pay for a broad candidate's hundreds."""
        order = self.index.order
        for _ in range(FEW):
            if not members:
                return
            low = members & -members
            yield order[low.bit_length() - 1]
            members ^= low
        yield from self.index.members(members)

    def entries(self, members: int, limit: int | None = None) -> list[merge.Entry]:
        if limit is None:
            return self.index.members(members)
        order = self.index.order
        out: list[merge.Entry] = []
        while members and len(out) < limit:
            low = members & -members
            out.append(order[low.bit_length() - 1])
            members ^= low
        return out


def _report_key(e: merge.Entry) -> tuple[object, ...]:
    """Where a report lists an entry's findings (findings.ordered): by source, then by object. Fields
    of one overlay come next, so this orders findings on different overlays exactly."""
    o = e.overlay
    return (o.source if o.source is not None else -1, o.ref)


def keys_of(cells: cellset.Cells) -> Keys:
    """The buckets of these cells: an entry shares one with them wherever its cells meet them."""
    return tuple(_ones(cells.pools())), _chunks(cells.fold())


def narrow_keys(cells: cellset.Cells, most: int) -> Keys | None:
    """`keys_of` for cells whose fold spans at most `most` CHUNK-slot ranges; None for wider ones, whose ranges are
    not all listed."""
    fold = cells.fold()
    chunks = arrays.nonzero_words(fold, -(-fold.bit_length() // CHUNK), most + 1)
    return (tuple(_ones(cells.pools())), tuple(chunks)) if len(chunks) <= most else None


def _keys(e: merge.Entry) -> Keys:
    return tuple(_ones(e.pools)), _chunks(e.fold)


def _chunks(fold: int) -> tuple[int, ...]:
    # The fold's non-zero CHUNK-bit words in one pass over its bytes, not a shift per chunk.
    return tuple(arrays.nonzero_words(fold, -(-fold.bit_length() // CHUNK)))


def _mask(positions: Iterable[int], count: int) -> int:
    """The int with these bits set, below 2**count (a byte buffer: `|= 1 << i` copies the int per bit)."""
    buffer = bytearray(-(-count // 8))
    for i in positions:
        buffer[i >> 3] |= 1 << (i & 7)
    return int.from_bytes(buffer, "little")


# `_ones` of an int this wide or narrower reads its binary digits; '0' and '1' as false and true.
_SMALL = 128
_DIGITS = bytes.maketrans(b"01", b"\x00\x01")


def _flags(bits: int) -> bytes:
    """A non-negative int's bits, lowest first, one byte each (0 or 1), read off its binary digits in C: for
    `itertools.compress`, without numpy."""
    return bin(bits)[:1:-1].encode().translate(_DIGITS)


def _ones(bits: int) -> list[int]:
    """The set bits, ascending. A few (a target's neighbours, mostly): cleared one by one, each a pass
    over the int; more: unpacked by numpy, one pass for all (thousands in a crowd of alike overlays)."""
    if bits.bit_length() <= _SMALL:
        # A NodePool mask (dozens of bits): its binary digits read in C, not a pass over the int per bit.
        flags = _flags(bits)
        return list(itertools.compress(range(len(flags)), flags))
    if bits.bit_count() <= FEW:
        out = []
        while bits:
            low = bits & -bits
            out.append(low.bit_length() - 1)
            bits ^= low
        return out
    found: list[int] = arrays.ones(bits, bits.bit_length()).tolist()
    return found
