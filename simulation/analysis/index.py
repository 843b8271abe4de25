"""The prepared entries, indexed once per snapshot for the incremental path's neighbour questions:
big-int masks over Karpenter's order (which entries share a bucket, set a field, have a weight,
precede an overlay) and, per field, the numpy tables of `tables` (whose cells meet a set, who holds
each cell in the baseline)."""

from __future__ import annotations

import bisect
import dataclasses
import struct
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from simulation.analysis import hints, kinds, tables
from simulation.semantics import cellset, clash, merge

# Bits of a NodePool block per index bucket: a neighbour scan visits the buckets of the target's
# NodePools and instance-type ranges only.
CHUNK = 64
# An entry's buckets: its NodePools x the CHUNK-slot ranges its fold has bits in (as indices).
Keys = tuple[tuple[int, ...], tuple[int, ...]]
# Entries per stored prefix of the by-name order (Index.named_before).
NAMES = 64
# Up to this many set bits, a mask's positions are cleared one by one (_ones).
FEW = 8
# Entries per stored prefix of a report's order (Index.first_in_report).
REPORT = 8
_WORD = (1 << 64) - 1
# A product spanning more distinct claim words than this is left to tables.Owners.emptied, whose cost does
# not grow with how varied the claims are (Claims.within).
GROUPS = 256


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
    # (overlay, field) -> (some of the same-weight overlays before it that set the field on a common
    # cell, how many there are in all): what a `shadowed` finding defers to (clash.same_weight)
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
    keys: tuple[Keys, ...] = ()
    # field -> the cells of the entries that set it, as rows
    rows: Mapping[merge.Field, tables.Rows] = dataclasses.field(default_factory=dict)
    # field -> the positions `tied` holds any overlay for
    ties: Mapping[merge.Field, int] = dataclasses.field(default_factory=dict)
    # The (pool, type) cells of the entries that set capacity at all, as rows (an empty `capacity: {}` sets
    # no field, yet Karpenter's capacity test compares it).
    capacity_rows: tables.Rows | None = None
    # Per position: the entry's place in a report's order (source, then name); the same as an array.
    report_rank: tuple[int, ...] = ()
    report_ranks: tables.Ints = dataclasses.field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # From Karpenter's outcome over the entries (`settled`): per field who holds each cell, the rows of
    # the applied entries that hold none; per position whether the entry is applied.
    owners: Mapping[merge.Field, tables.Owners] = dataclasses.field(default_factory=dict)
    idle: Mapping[merge.Field, tables.Rows] = dataclasses.field(default_factory=dict)
    applied: tables.Bools | None = None
    # The same as a mask (`settled`; None before): narrows a scan of thousands to the few applied.
    applied_bits: int | None = None
    pool_count: int = 0
    # The entries by kind (alike overlays: a crowd of copies is one kind).
    by_kind: kinds.Kinds = dataclasses.field(default_factory=kinds.Kinds)
    # The other factor of the buckets (see by_pool).
    by_chunk: Mapping[int, int] = dataclasses.field(default_factory=dict)
    # Every REPORT-th prefix of the entries in a report's order, as a mask, ending with all of them.
    report_prefixes: tuple[int, ...] = (0,)
    # From Karpenter's outcome (`settled`): per field, the claims as masks.
    claims: Mapping[merge.Field, Claims] = dataclasses.field(default_factory=dict)
    # `order` and `names` as arrays: a request takes a crowd's thousands of them in one step, not one each.
    entry_array: tables.Objects = dataclasses.field(default_factory=lambda: tables.objects(()))
    name_array: tables.Objects = dataclasses.field(default_factory=lambda: tables.objects(()))

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
        tied: dict[tuple[str, merge.Field], tuple[tuple[str, ...], int]] = {}
        for k in clash.same_weight(order):
            names, total = tied.get((k.later, k.field), ((), 0))
            tied[(k.later, k.field)] = ((*names, k.earlier), total + 1 + k.more)
        by_name = sorted(range(len(order)), key=lambda i: order[i].name)
        # Every NAMES-th prefix of the entries by name, as a mask, so that any prefix costs < NAMES ORs.
        prefixes, mask = [0], 0
        for count, i in enumerate(by_name, 1):
            mask |= 1 << i
            if count % NAMES == 0:
                prefixes.append(mask)
        rows = {field: tables.Rows.build(sorted(at.items()), pools) for field, at in field_cells.items()}
        capacity_rows = tables.Rows.build(((i, e.type_cells) for i, e in enumerate(order) if e.overlay.capacity_set),
                                          pools)
        position = {e.name: i for i, e in enumerate(order)}
        ties: dict[merge.Field, int] = {}
        for name, field in tied:
            ties[field] = ties.get(field, 0) | 1 << position[name]
        report_rank = [0] * len(order)
        in_report = sorted(range(len(order)), key=lambda i: _report_key(order[i]))
        for place, i in enumerate(in_report):
            report_rank[i] = place
        ranks = np.array(report_rank, dtype=np.int64)
        tables.frozen(ranks)
        return cls({pool: _mask(at, len(order)) for pool, at in by_pool.items()}, order, position,
                   tuple(e.rank for e in reversed(order)),
                   by_field, tied, hints.Taken(order), tuple(order[i].name for i in by_name), tuple(by_name),
                   tuple(prefixes), by_weight, prices, capacities, tuple(e.name for e in order), field_cells,
                   keys, rows, ties, capacity_rows, tuple(report_rank), pool_count=pools,
                   report_ranks=ranks,
                   by_kind=kinds.Kinds.build(order),
                   by_chunk={chunk: _mask(at, len(order)) for chunk, at in by_chunk.items()},
                   report_prefixes=_prefixes(in_report, REPORT),
                   entry_array=tables.objects(order), name_array=tables.objects([e.name for e in order]))

    def settled(self, baseline: merge.Merged) -> Index:
        """This index with the tables that depend on Karpenter's outcome over its entries."""
        applied = np.array([baseline.status.get(n) == merge.APPLIED for n in self.names], dtype=bool)
        tables.frozen(applied)
        block = self.order[0].cells.block if self.order else 0
        owners, idle, masks = {}, {}, {}
        for field, claims in baseline.claimed_by_field.items():
            held = sorted((self.position[n], c) for n, c in claims.items() if n in self.position)
            owners[field] = tables.Owners.build(held, len(self.order), self.pool_count, block)
            idle[field] = tables.Rows.build(((i, self.field_cells[field][i]) for i, c in held if not c),
                                            self.pool_count)
            masks[field] = Claims.build(held, len(self.order), self.pool_count, block)
        return dataclasses.replace(self, owners=owners, idle=idle, applied=applied, claims=masks,
                                   applied_bits=self.of_array(np.flatnonzero(applied)))

    def place(self, rank: tuple[int, str]) -> int:
        """The position an overlay of this rank takes: the number of entries before it."""
        return len(self.ranks) - bisect.bisect_right(self.ranks, rank)

    def weight_span(self, weight: int) -> tuple[int, int]:
        """The positions [lo, hi) of the entries of this weight."""
        ranks = self.ranks
        return (len(ranks) - bisect.bisect_left(ranks, (weight + 1, "")),
                len(ranks) - bisect.bisect_left(ranks, (weight, "")))

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

    def coarse_at(self, keys: Keys) -> int:
        pools, chunks = keys
        in_pools = in_chunks = 0
        for p in pools:
            in_pools |= self.by_pool.get(p, 0)
        if in_pools:
            for k in chunks:
                in_chunks |= self.by_chunk.get(k, 0)
        return in_pools & in_chunks

    def named_before(self, name: str) -> int:
        """The entries whose name sorts before `name`."""
        k = bisect.bisect_left(self.sorted_names, name)
        out = self.prefixes[k // NAMES]
        for i in self.by_name[k - k % NAMES:k]:
            out |= 1 << i
        return out

    def first_in_report(self, mask: int, count: int) -> list[int]:
        """The positions of the first `count` entries of `mask` in a report's order, in that order."""
        prefixes, rank = self.report_prefixes, self.report_rank
        if mask.bit_count() > count:
            # The shortest stored prefix holding `count` of them: fewer than REPORT more are sorted.
            lo, hi = 0, len(prefixes) - 1
            while lo < hi:
                mid = (lo + hi) // 2
                if (mask & prefixes[mid]).bit_count() >= count:
                    hi = mid
                else:
                    lo = mid + 1
            mask &= prefixes[lo]
        return sorted(self.positions(mask), key=rank.__getitem__)[:count]

    def of(self, positions: Iterable[int]) -> int:
        """The mask of these positions."""
        return _mask(positions, len(self.order))

    def of_array(self, positions: tables.Ints) -> int:
        """The mask of these positions, as an array (a table's answer, often hundreds: set in one step)."""
        return tables.bits_of(positions, len(self.order)) if len(positions) > FEW else self.of(positions.tolist())

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

    def near(self, target: merge.Entry, skip: set[str], extra: Sequence[merge.Entry],
             among: int = -1) -> list[merge.Entry]:
        """Entries whose coarse signature overlaps the target's: the prepared ones not named
        in `skip` (they changed) and in `among` (all by default), plus the `extra` (changed) ones."""
        narrow = among & ~self.mask(skip)
        found = [n for n in self.members(self.coarse(target) & narrow) if n.may_overlap(target)] if narrow else []
        found += [n for n in extra if n.may_overlap(target)]
        return [n for n in found if n.name != target.name]


@dataclasses.dataclass(frozen=True)
class Claims:
    """The baseline's claims on one field (the cells where each applied overlay's value is in effect) as
    masks over positions, for one question: whose whole claim lies inside a product of NodePools and slots.
    A claim does iff its NodePools and its fold do; the folds' 64-slot words are grouped by place and
    value, so the answer costs an operation per distinct claim word within the product's span and a few
    prefix masks for the places and NodePools outside it (a family-wide product spans a few words; the
    claims hold thousands, which tables.Owners.emptied reads).

    Per place: its distinct fold words, each with its positions; per place k, the positions with a fold
    word before k (`before[k]`) and at or after it (`after[k]`); per NodePool and around it, likewise;
    how many groups lie before each place."""

    words: tuple[tuple[tuple[int, int], ...], ...]
    before: tuple[int, ...]
    after: tuple[int, ...]
    pools: tuple[int, ...]
    pools_before: tuple[int, ...]
    pools_after: tuple[int, ...]
    groups_before: tuple[int, ...]

    @classmethod
    def build(cls, claims: Sequence[tuple[int, cellset.Cells]], count: int, pools: int, block: int) -> Claims:
        """`claims`: (position, its claim), positions below `count`."""
        groups: list[dict[int, list[int]]] = [{} for _ in range(-(-block // 64))]
        by_pool: list[list[int]] = [[] for _ in range(pools)]
        for i, cells in claims:
            if not cells:
                continue
            fold = cells.fold()
            low = cellset.low_bit(fold) // 64
            span = -(-fold.bit_length() // 64) - low
            for k, word in enumerate(struct.unpack(f"<{span}Q", (fold >> 64 * low).to_bytes(span * 8, "little")), low):
                if word:
                    groups[k].setdefault(word, []).append(i)
            for p in _ones(cells.pools()):
                by_pool[p].append(i)
        touch = [_mask((i for at in g.values() for i in at), count) for g in groups]
        pool_masks = [_mask(at, count) for at in by_pool]
        sizes = [0, *(len(g) for g in groups)]
        for k in range(1, len(sizes)):
            sizes[k] += sizes[k - 1]
        return cls(tuple(tuple((word, _mask(at, count)) for word, at in g.items()) for g in groups),
                   *_around(touch), tuple(pool_masks), *_around(pool_masks), tuple(sizes))

    def within(self, pools: int, bits: int, at: int) -> int | None:
        """The positions >= `at` holding cells, all of which lie in the product of `pools` and `bits`;
        None when the product spans more than GROUPS distinct claim words."""
        if not pools or not bits:
            return 0
        lo, hi = cellset.low_bit(bits) // 64, -(-bits.bit_length() // 64)
        if self.groups_before[hi] - self.groups_before[lo] > GROUPS:
            return None
        # Outside: a fold word at a place outside the span, or with a slot outside `bits` within it.
        out = self.before[lo] | self.after[hi]
        mine = struct.unpack(f"<{hi - lo}Q", (bits >> 64 * lo).to_bytes((hi - lo) * 8, "little"))
        for k in range(lo, hi):
            outside = ~mine[k - lo] & _WORD
            for word, positions in self.words[k]:
                if word & outside:
                    out |= positions
        first, last = cellset.low_bit(pools), pools.bit_length()
        out |= self.pools_before[first] | self.pools_after[last]
        for p in _ones(((1 << last) - (1 << first)) & ~pools):
            out |= self.pools[p]
        # A position with no fold word outside the span and one within it (it holds cells) lies inside.
        return self.after[lo] & self.before[hi] & ~out & ~((1 << at) - 1)


def _around(masks: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Per k in 0..len(masks): the union of the masks before k, and of those at or after k."""
    before, after = [0], [0]
    for m in masks:
        before.append(before[-1] | m)
    for m in reversed(masks):
        after.append(after[-1] | m)
    return tuple(before), tuple(reversed(after))


def _report_key(e: merge.Entry) -> tuple[object, ...]:
    """Where a report lists an entry's findings (findings.ordered): by source, then by object. Fields
    of one overlay come next, so this orders findings on different overlays exactly."""
    o = e.overlay
    return (o.source if o.source is not None else -1, o.ref)


def _keys(e: merge.Entry) -> Keys:
    # The fold's non-zero CHUNK-bit words in one pass over its bytes, not a shift per chunk.
    chunks = np.flatnonzero(tables.words(e.fold, -(-e.fold.bit_length() // CHUNK))).tolist()
    return tuple(_ones(e.pools)), tuple(chunks)


def _prefixes(positions: Sequence[int], step: int) -> tuple[int, ...]:
    """Masks of every `step`-th prefix of these positions, from the empty one to all of them."""
    out, buffer = [0], bytearray(-(-len(positions) // 8))
    for count, i in enumerate(positions, 1):
        buffer[i >> 3] |= 1 << (i & 7)
        if count % step == 0 or count == len(positions):
            out.append(int.from_bytes(buffer, "little"))
    return tuple(out)


def _mask(positions: Iterable[int], count: int) -> int:
    """The int with these bits set, below 2**count (a byte buffer: `|= 1 << i` copies the int per bit)."""
    buffer = bytearray(-(-count // 8))
    for i in positions:
        buffer[i >> 3] |= 1 << (i & 7)
    return int.from_bytes(buffer, "little")


def _ones(bits: int) -> list[int]:
    """The set bits, ascending. A few (a target's neighbours, mostly): cleared one by one, each a pass
    over the int; more: unpacked by numpy, one pass for all (thousands in a crowd of alike overlays)."""
    if bits.bit_count() <= FEW:
        out = []
        while bits:
            low = bits & -bits
            out.append(low.bit_length() - 1)
            bits ^= low
        return out
    found: list[int] = tables.ones(bits, bits.bit_length()).tolist()
    return found
