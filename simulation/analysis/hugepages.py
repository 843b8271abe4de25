"""Hugepages that take an instance type's memory: `hugepages-exhaust-memory`, `hugepages-most-memory` and
`hugepages-below-nodepool-memory`.

Karpenter takes every hugepages resource of a type's effective capacity off its allocatable memory
(`semantics/allocatable.py`). An overlay is judged on the cells where one of its hugepages values is
in effect, with the whole effective capacity there: the hugepages other overlays hold on those cells,
and the type's own, count too. Both paths ask this module with the overlay's claims and its
neighbours, so the full run and one admission give the same findings.

A NodePool carries no pod requests; the one size it states is a memory floor in its requirements
(`karpenter.k8s.aws/instance-memory Gt/Gte`, MiB, the type's memory as its label gives it): it is there for
pods that need that much (kubernetes-sigs/karpenter#3297). Where the hugepages in effect take a type the
NodePool launches below that floor (its memory label less the hugepages), the type no longer has what the
NodePool selected it for, and pods sized to it no longer fit on it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from decimal import Decimal

from simulation import findings
from simulation.analysis import hints
from simulation.semantics import allocatable, cells, cellset, merge, model, quantity
from simulation.semantics import catalog as cat
from simulation.semantics import requirements as reqs

EXHAUST = "hugepages-exhaust-memory"
MOST = "hugepages-most-memory"
FLOOR = "hugepages-below-nodepool-memory"
# The AWS provider's label of a type's memory in MiB: the one a NodePool states a memory floor with.
MEMORY_LABEL = "karpenter.k8s.aws/instance-memory"
_MIB = Decimal(2**20)

# The overlays' hugepages values in effect on a set of cells: resource -> (quantity, overlay).
_Held = Mapping[str, tuple[str, str]]


def is_field(field: merge.Field) -> bool:
    return field.kind is merge.Kind.CAPACITY and allocatable.is_hugepages(field.name)


def fields(e: merge.Entry) -> list[merge.Field]:
    """The overlay's hugepages fields."""
    return [f for f in e.fields() if is_field(f)]


def check(grid: cells.Grid, e: merge.Entry, claims: Mapping[merge.Field, cellset.Cells],
          neighbours: Iterable[merge.Entry], status: Mapping[str, merge.State]) -> list[findings.Finding]:
    """`claims`: where each of `e`'s hugepages values is in effect; `neighbours`: every overlay whose cells
    may meet `e`'s (more do no harm), read with `status`."""
    found: dict[str, _Hit] = {}
    floors: dict[int, Decimal | None] = {}
    for bit, t, mem, held in _cells(grid, e, claims, neighbours, status):
        code = EXHAUST if mem.exhausted else MOST if mem.mostly_taken else None
        if not mem.exhausted and _below_floor(grid, bit, t, mem, floors):
            _add(found, FLOOR, bit, t, mem, held)
        if code is not None:
            _add(found, code, bit, t, mem, held)
    return [_finding(grid, e, code, hit) for code, hit in sorted(found.items())]


def _add(found: dict[str, _Hit], code: str, bit: int, t: int, mem: allocatable.Memory, held: _Held) -> None:
    """Counts type `t` for `code`, the lowest cell being the witness."""
    hit = found.get(code)
    if hit is None:
        found[code] = _Hit(bit, mem, held, {t})
        return
    hit.types.add(t)
    if bit < hit.bit:
        hit.bit, hit.memory, hit.held = bit, mem, held


def _below_floor(grid: cells.Grid, bit: int, t: int, mem: allocatable.Memory,
                 floors: dict[int, Decimal | None]) -> bool:
    """The cell's NodePool launches the type and states a memory floor, and the type's memory (its label) less the
    hugepages in effect falls below it: the type no longer has what the NodePool selected it for."""
    pool = bit // grid.block
    if pool not in floors:
        floors[pool] = floor(grid.pools[pool])
    least = floors[pool]
    if least is None or not grid.launches(bit):
        return False
    mib = reqs.atoi(grid.types[t].labels.get(MEMORY_LABEL, ""))
    return mib is not None and mib * _MIB - mem.hugepages < least


def floor(pool: model.NodePool) -> Decimal | None:
    """The least memory (bytes) the NodePool's requirements ask of a type (`instance-memory` Gt/Gte, MiB)."""
    mib = [n + (r.operator == reqs.GT) for r in pool.requirements
           if r.key == MEMORY_LABEL and r.operator in (reqs.GT, reqs.GTE) and len(r.values) == 1
           and (n := reqs.atoi(r.values[0])) is not None]
    return max(mib) * _MIB if mib else None


def least(grid: cells.Grid, e: merge.Entry, claims: Mapping[merge.Field, cellset.Cells],
          neighbours: Iterable[merge.Entry],
          status: Mapping[str, merge.State]) -> tuple[findings.Witness, allocatable.Memory] | None:
    """Of the cells where `e`'s hugepages are in effect, the one left the least allocatable memory (the
    first such cell) and its figures; None where they are in effect nowhere."""
    lowest = min(((mem.allocatable, bit, mem) for bit, _, mem, _ in _cells(grid, e, claims, neighbours, status)),
                 default=None, key=lambda m: m[:2])
    return None if lowest is None else (grid.witness_at(lowest[1], with_offering=False), lowest[2])


def _cells(grid: cells.Grid, e: merge.Entry, claims: Mapping[merge.Field, cellset.Cells],
           neighbours: Iterable[merge.Entry],
           status: Mapping[str, merge.State]) -> Iterator[tuple[int, int, allocatable.Memory, _Held]]:
    """Per instance type and the hugepages held on it: the first cell, the type, its memory, what is held."""
    region = merge.EMPTY
    for bits in claims.values():
        region |= bits
    if not region:
        return
    for part, held in _groups(e, claims, region, neighbours, status):
        for pools, block in part.parts:
            for slot in cellset.ones(block):
                t = slot // grid.slots
                yield cellset.low_bit(pools) * part.block + slot, t, _memory(grid.types[t], held), held


def _memory(it: cat.InstanceType, held: _Held) -> allocatable.Memory:
    """The hugepages step on the type's memory with `held` over its own hugepages (some are always held)."""
    capacity = {r: q for r, q in it.capacity.items() if allocatable.is_hugepages(r) or r == allocatable.MEMORY}
    capacity.update((r, q) for r, (q, _) in held.items())
    mem = allocatable.memory(capacity)
    assert mem is not None  # a held value is a hugepages resource
    return mem


@dataclasses.dataclass
class _Hit:
    """The first cell (the witness) of one code, its figures and what was held there; every type hit."""

    bit: int
    memory: allocatable.Memory
    held: _Held
    types: set[int]


def _groups(e: merge.Entry, claims: Mapping[merge.Field, cellset.Cells], region: cellset.Cells,
            neighbours: Iterable[merge.Entry], status: Mapping[str, merge.State]) -> list[tuple[cellset.Cells, _Held]]:
    """`region` cut into parts on which the same overlays hold the same hugepages values."""
    mine = dict(e.overlay.capacity)
    others = merge.ordered(n for n in neighbours if n.name != e.name and status.get(n.name) == merge.APPLIED
                           and fields(n) and n.type_cells.intersects(region))
    pieces: dict[str, list[tuple[cellset.Cells, tuple[str, str]]]] = {}
    for field in sorted({f for n in [e, *others] for f in fields(n)}):
        covered = claims.get(field, merge.EMPTY)
        held = [(covered, (quantity.go_string(mine[field.name]), e.name))] if covered else []
        for n in others:
            cells_n = (n.fields().get(field, merge.EMPTY) & region) - covered
            if cells_n:
                held.append((cells_n, (quantity.go_string(dict(n.overlay.capacity)[field.name]), n.name)))
                covered |= cells_n
        pieces[field.name] = held
    groups: list[tuple[cellset.Cells, _Held]] = [(region, {})]
    for resource, held in pieces.items():
        split: list[tuple[cellset.Cells, _Held]] = []
        for part, values in groups:
            rest = part
            for bits, value in held:
                inside = rest & bits
                if inside:
                    split.append((inside, {**values, resource: value}))
                    rest -= bits
            if rest:
                split.append((rest, values))
        groups = split
    return groups


def _finding(grid: cells.Grid, e: merge.Entry, code: str, hit: _Hit) -> findings.Finding:
    overlay = e.overlay
    witness = grid.witness_at(hit.bit, with_offering=False)
    own = {r: allocatable.value(q) for r, (q, by) in hit.held.items() if by == e.name}
    # The resource to lower: the overlay's largest hugepages value on the witness.
    resource = max(sorted(own), key=lambda r: own[r])
    mem = hit.memory
    capacity = quantity.canonical(mem.capacity, quantity.BINARY_SI)
    pages = quantity.canonical(mem.hugepages, quantity.BINARY_SI)
    more = len(hit.types) - 1
    others = f" (and {more} more instance types)" if more else ""
    detail = {"capacity": capacity, "hugepages": pages, "allocatable": mem.text, "types": str(len(hit.types))}
    if code == FLOOR:
        pool = next(p for p in grid.pools if p.name == witness.nodepool)
        least = floor(pool)
        assert least is not None  # a floor finding's NodePool states one
        mib = quantity.canonical(least, quantity.BINARY_SI)
        message = (f"NodeOverlay {overlay.name}: hugepages ({pages}) take instance type {witness.instance_type}'s "
                   f"memory below the {mib} NodePool {witness.nodepool} requires of its types ({MEMORY_LABEL}), "
                   f"leaving {mem.text} allocatable: pods sized to that NodePool's types no longer fit there{others}")
        return findings.make(code, overlay.ref, ("spec", "capacity", resource), message, witness=witness,
                             source=overlay.source, detail={**detail, "floor": mib, "nodepool": witness.nodepool},
                             hint=(f"Lower {resource}, keep the overlay off {witness.instance_type} and types of its "
                                   f"size, or raise NodePool {witness.nodepool}'s {MEMORY_LABEL} floor above what "
                                   "the hugepages take (kubernetes-sigs/karpenter#3297)."))
    if code == EXHAUST:
        message = (f"NodeOverlay {overlay.name}: hugepages ({pages}) leave instance type {witness.instance_type} no "
                   f"allocatable memory in NodePool {witness.nodepool} (memory {capacity}; Karpenter clamps it to 0)"
                   f"{others}")
    else:
        message = (f"NodeOverlay {overlay.name}: hugepages ({pages}) take more than half of instance type "
                   f"{witness.instance_type}'s memory ({capacity}) in NodePool {witness.nodepool}, leaving "
                   f"{mem.text} allocatable{others}")
    return findings.make(code, overlay.ref, ("spec", "capacity", resource), message, witness=witness,
                         source=overlay.source, detail=detail,
                         hint=hints.hugepages(resource, witness.instance_type, capacity, pages))
