"""Readable text for `simulate` and `explain` (their JSON forms are the core's own shapes)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from simulation.analysis import report as rp
from simulation.analysis.effects import CellEffect
from simulation.semantics import allocatable, quantity


def table(rows: Sequence[Sequence[str]], indent: str = "") -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))] if rows else []
    return [indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in rows]


def price(value: Any, estimated: bool = False) -> str:
    if value is None:
        return "-"
    text = f"{float(value):.10g}"
    return f"~{text}" if estimated else text


def memory_note(mem: allocatable.Memory) -> str:
    """How Karpenter got from the capacity's memory to the allocatable one."""
    pages = quantity.canonical(mem.hugepages, quantity.BINARY_SI)
    return f"hugepages {pages}" + (", clamped at 0" if mem.exhausted else "")


def simulation_json(status: Mapping[str, rp.Status], cells: Sequence[CellEffect]) -> dict[str, Any]:
    pools: dict[str, dict[str, Any]] = {}
    for cell in cells:
        pools.setdefault(cell.pool, {})[cell.instance_type] = cell.to_json()
    return {"overlays": {name: {"status": s.state, "reason": s.reason} for name, s in sorted(status.items())},
            "nodepools": pools}


HELD = "held by Karpenter's overlay store, never launched by this NodePool"
NAMES_SHOWN = 5


def write_summary(status: Mapping[str, rp.Status], cells: Sequence[CellEffect], out: TextIO) -> None:
    """simulate without a filter: per overlay and per NodePool what changes, in a few lines whatever the catalog
    (the whole table of a broad overlay is tens of thousands of lines)."""
    types: dict[str, set[str]] = {}
    offerings: dict[str, int] = {}
    for cell in cells:
        for o in cell.offerings:
            if o.get("priceOverlay"):
                offerings[str(o["priceOverlay"])] = offerings.get(str(o["priceOverlay"]), 0) + 1
                types.setdefault(str(o["priceOverlay"]), set()).add(cell.instance_type)
        for name in (*cell.capacity_overlays.values(), *cell.templates.values()):
            types.setdefault(name, set()).add(cell.instance_type)
    if status:
        rows = [["OVERLAY", "STATUS", "TYPES", "PRICES", "REASON"],
                *([n, s.state, str(len(types.get(n, ()))), str(offerings.get(n, 0)), s.reason]
                  for n, s in sorted(status.items()))]
        out.writelines(line + "\n" for line in table(rows))
    else:
        out.write("no NodeOverlays in the input\n")
    by_pool: dict[str, list[CellEffect]] = {}
    for cell in cells:
        by_pool.setdefault(cell.pool, []).append(cell)
    # Each NodePool's figures are what it can launch; the cells Karpenter's store holds there all the same are
    # one count apart (SPEC §3 "Cells").
    rows = [["NODEPOOL", "TYPES CHANGED", "PRICES SET", "CAPACITY SET", "NEVER LAUNCHED"]]
    for pool, changed in sorted(by_pool.items()):
        mine = [c for c in changed if c.launchable]
        priced = sum(1 for c in mine for o in c.offerings if o.get("priceOverlay") and o.get("launchable", True))
        rows.append([pool, str(len(mine)), str(priced), str(sum(1 for c in mine if c.capacity_overlays)),
                     str(len(changed) - len(mine))])
    if len(rows) == 1:
        out.write("\nno instance type is changed by an overlay\n")
        return
    out.write("\n")
    out.writelines(line + "\n" for line in table(rows))
    out.write("\nTYPES: instance types an overlay sets a value on; PRICES: offerings it prices; a NodePool's figures "
              "count what it launches, NEVER LAUNCHED the types changed in Karpenter's store it never launches. "
              "Per instance type: --full, or --nodepool/--instance-type; --format json has every figure\n")


def write_simulation(status: Mapping[str, rp.Status], cells: Sequence[CellEffect], out: TextIO,
                     named: bool = False) -> None:
    """`named`: the user named the instance types, so those a NodePool never launches are shown whole
    (marked); otherwise each NodePool's are one line after its own."""
    if status:
        rows = [["OVERLAY", "STATUS", "REASON"], *([n, s.state, s.reason] for n, s in sorted(status.items()))]
        out.writelines(line + "\n" for line in table(rows))
    else:
        out.write("no NodeOverlays in the input\n")
    if not cells:
        out.write("\nno instance type is changed by an overlay\n")
        return
    estimated = False
    for pool, group in itertools.groupby(cells, key=lambda c: c.pool):
        held: list[str] = []
        for cell in group:
            if cell.launchable or named:
                estimated |= _write_cell(cell, out)
            else:
                held.append(cell.instance_type)
        if held:
            names = ", ".join(held[:NAMES_SHOWN]) + (f" and {len(held) - NAMES_SHOWN} more"
                                                       if len(held) > NAMES_SHOWN else "")
            out.write(f"\nNodePool {pool}: {len(held)} more instance type{'s' if len(held) > 1 else ''} "
                      f"{HELD}: {names}; --instance-type NAME shows one\n")
    if estimated:
        out.write("\n~ marks an estimated base price (not published upstream)\n")


def _write_cell(cell: CellEffect, out: TextIO) -> bool:
    """One (NodePool, instance type); whether it printed an estimated price. Of a type the NodePool
    launches, the offerings it never launches are one line under the table."""
    mark = "" if cell.launchable else f" ({HELD})"
    out.write(f"\nNodePool {cell.pool}, instance type {cell.instance_type}{mark}\n")
    by = cell.capacity_overlays
    resources = [f"{res}={qty}" + (f" ({by[res]})" if res in by else "")
                 for res, qty in cell.capacity.items()]
    out.write(f"  capacity: {', '.join(resources) or '-'}\n")
    mem = cell.memory
    if mem is not None:
        out.write(f"  allocatable: memory={mem.text} (memory less {memory_note(mem)})\n")
    if cell.templates:
        drivers = ", ".join(f"{d} ({o})" for d, o in sorted(cell.templates.items()))
        out.write(f"  resourceSliceTemplates: {drivers}\n")
    estimated = False
    rows = [["ZONE", "CAPACITY TYPE", "BASE PRICE", "PRICE", "PRICE OVERLAY"]]
    held = []
    for o in cell.offerings:
        if cell.launchable and not o.get("launchable", True):
            held.append(f"{o['zone']}/{o['capacityType']}")
            continue
        est = bool(o.get("estimated"))
        estimated |= est
        available = o.get("available", True)
        rows.append([str(o["zone"]), str(o["capacityType"]), price(o["basePrice"], est),
                     price(o["price"], est) if available else "unavailable",
                     str(o["priceOverlay"] or "-")])
    out.writelines(line + "\n" for line in table(rows, "  "))
    if held:
        out.write(f"  {len(held)} more offering{'s' if len(held) > 1 else ''} {HELD}: {', '.join(held)}\n")
    return estimated


def write_explanation(data: Mapping[str, Any], out: TextIO) -> None:
    pools = ", ".join(data.get("nodepools", [])) or "-"
    out.write(f"instance type {data['instanceType']} in NodePool(s) {pools}\n")
    out.write(f"launched by: {', '.join(data.get('launchedBy', [])) or '-'}\n")
    never = data.get("neverLaunchedBy", [])
    if never:
        out.write(f"never launched by: {', '.join(never)} (Karpenter's overlay store holds it there all the same)\n")
    memory: Mapping[str, Mapping[str, str]] = data.get("memory", {})
    for pool, figures in memory.items():
        out.write(f"NodePool {pool}: memory capacity {figures['capacity']}, allocatable {figures['allocatable']} "
                  f"(less hugepages {figures['hugepages']})\n")
    fields: Mapping[str, Sequence[Mapping[str, Any]]] = data.get("fields", {})
    if not fields:
        out.write("no overlay matches or nearly matches it\n")
        return
    out.write("MATCHED: the cells (NodePool, offering or instance type) the overlay matches; WON: those where its "
              "value is in effect\n")
    for field, entries in fields.items():
        out.write(f"\n{field}:\n")
        rows = [["OUTCOME", "OVERLAY", "WEIGHT", "STATUS", "MATCHED", "WON", "LAUNCHED", "WHY"]]
        rows += [[str(e.get("outcome", "")), str(e.get("overlay", "")), str(e.get("weight", "")),
                  str(e.get("status", "")), str(e.get("matched", "")), str(e.get("won", "")),
                  str(e.get("launched", "")), str(e.get("why", ""))] for e in entries]
        out.writelines(line + "\n" for line in table(rows, "  "))
