"""`explain`: for one instance type, who set each field, who lost, and why."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simulation.analysis import effects
from simulation.analysis import report as rp
from simulation.semantics import cellset, merge, model, quantity
from simulation.semantics import requirements as reqs


class UnknownName(ValueError):
    """An instance type or NodePool that is not in the simulation."""


def _fields(overlay: model.Overlay) -> list[merge.Field]:
    out = [merge.PRICE] if overlay.price_update is not None else []
    out += [merge.capacity_field(r) for r, _ in overlay.capacity]
    out += [merge.driver_field(d) for d in overlay.drivers()]
    return out


def explain(report: rp.Report, instance_type: str, nodepool: str | None = None) -> dict[str, Any]:
    grid = report.grid
    names = [t.name for t in grid.types]
    if instance_type not in names:
        raise UnknownName(f"instance type {instance_type!r} is not in the catalog")
    pools = [p.name for p in grid.pools]
    if nodepool is not None and nodepool not in pools:
        raise UnknownName(f"NodePool {nodepool!r} is not in the input")
    chosen = [nodepool] if nodepool is not None else pools
    t = names.index(instance_type)
    n = len(grid.types[t].offerings)
    chosen_pools = sum(1 << p for p, name in enumerate(pools) if name in chosen)
    mask = cellset.Cells.product(chosen_pools, ((1 << n) - 1) << (t * grid.slots), grid.block)
    type_mask = grid.type_cells(mask)
    launched = grid.launched & mask
    by_pool = launched.pools()
    # The launched cells in each field's unit: (NodePool, instance type), or offerings for price.
    launches = (grid.type_cells(launched), launched)
    claims = report.outcome.claimed
    rows: dict[str, list[dict[str, Any]]] = {}
    overlays = sorted(report.overlays.values(), key=lambda c: merge.precedence(c.overlay), reverse=True)
    for checked in overlays:
        o = checked.overlay
        known = report.status_of(o.name)
        status, reason = known.state, known.reason
        entry = report.entries.get(o.name)
        matched = entry.cells & mask if entry is not None else merge.EMPTY
        for field in _fields(o):
            # Matched and won: an overlay matches cells it may not hold (a higher one set the field first).
            # Price is per offering, the rest per (NodePool, instance type): both columns count in the field's unit.
            counted = matched if field == merge.PRICE else grid.type_cells(matched)
            base = {"overlay": o.name, "weight": o.weight, "status": status,
                    "matched": counted.bit_count(), "won": 0,
                    "launched": (counted & launches[field == merge.PRICE]).bit_count()}
            if entry is None:
                row = {**base, "outcome": "invalid", "why": reason}
            elif not matched:
                why = _near_miss(report, o, mask)
                if why is None:
                    continue
                row = {**base, "outcome": "near-miss", "why": why}
            elif status == merge.CONFLICT:
                row = {**base, "outcome": "dropped", "why": f"Karpenter marks it Conflict: {reason}"}
            else:
                row = _won_or_lost(base, o, field, claims, entry.fields().get(field, merge.EMPTY)
                                   & (mask if field == merge.PRICE else type_mask))
            rows.setdefault(str(field), []).append(row)
    # Karpenter's overlay store holds the type in every NodePool (SPEC §3 "Cells"); which of them can
    # launch it is said beside, and each row counts its cells a NodePool launches.
    return {"instanceType": instance_type, "nodepools": chosen,
            "launchedBy": [name for p, name in enumerate(pools) if by_pool >> p & 1],
            "neverLaunchedBy": [name for p, name in enumerate(pools) if chosen_pools >> p & 1 and not by_pool >> p & 1],
            "fields": rows, "memory": _memory(report, chosen, instance_type)}


def _memory(report: rp.Report, pools: list[str], instance_type: str) -> dict[str, dict[str, str]]:
    """Per NodePool where hugepages are in effect: the capacity's memory, the hugepages, and the allocatable
    memory Karpenter schedules against."""
    out = {}
    for cell in effects.effects(report, pools, [instance_type]):
        mem = cell.memory
        if mem is not None:
            out[cell.pool] = {"capacity": cell.capacity.get("memory", "0"),
                              "hugepages": quantity.canonical(mem.hugepages, quantity.BINARY_SI),
                              "allocatable": mem.text}
    return out


def _won_or_lost(base: dict[str, Any], o: model.Overlay, field: merge.Field,
                 claims: Mapping[tuple[str, merge.Field], cellset.Cells], cells: cellset.Cells) -> dict[str, Any]:
    """`cells`: where the overlay sets the field on this type; its winners are the overlays whose value is in
    effect on one of them."""
    mine = claims.get((o.name, field), merge.EMPTY) & cells
    if mine:
        return {**base, "outcome": "won", "won": mine.bit_count(),
                "why": f"first in Karpenter's order (weight {o.weight}, then name descending) to set it"}
    winners = sorted({name for (name, f), bits in claims.items()
                      if f == field and name != o.name and bits.intersects(cells)})
    return {**base, "outcome": "lost",
            "why": f"already set by higher-precedence {', '.join(winners) or 'another overlay'}"}


def _near_miss(report: rp.Report, overlay: model.Overlay, mask: cellset.Cells) -> str | None:
    """The one requirement that keeps the overlay off this type, if only one does."""
    specs = overlay.requirements
    failing = []
    for i, r in enumerate(specs):
        alone = reqs.from_specs([(r.key, r.operator, r.values)])
        if not report.grid.match(alone).intersects(mask):
            failing.append((i, r))
    if len(failing) != 1:
        return None
    i, r = failing[0]
    rest = reqs.from_specs((s.key, s.operator, s.values) for j, s in enumerate(specs) if j != i)
    if not report.grid.match(rest).intersects(mask):
        return None
    return f"requirement {i} ({r.key} {r.operator} [{', '.join(r.values)}]) excludes it"
