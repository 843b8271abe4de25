"""/mutate: `overlay-guard.io/` annotations summarising the simulated effect, as a JSON Patch.

The patch only touches keys under the prefix and only where the value differs, so applying
the webhook to its own output yields an empty patch (safe with reinvocationPolicy IfNeeded).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simulation import evaluate as ev
from simulation.semantics import merge

PREFIX = "overlay-guard.io/"
STATUS = PREFIX + "status"
CELLS = PREFIX + "cells-matched"
OFFERINGS = PREFIX + "offerings-matched"
IN_EFFECT = PREFIX + "fields-in-effect"
SHADOWED = PREFIX + "shadowed-fields"
EXAMPLE = PREFIX + "example-cell"


def summary(report: ev.Report, name: str) -> dict[str, str]:
    """Status as Karpenter will see it, how many (NodePool, instance type) cells and offerings
    the overlay matches, which of its fields win somewhere and which win nowhere."""
    status = report.status.get(name, (merge.INVALID, ""))[0]
    entry = report.entries.get(name)
    out = {STATUS: status, CELLS: "0", OFFERINGS: "0", IN_EFFECT: "", SHADOWED: ""}
    if entry is None:
        return out
    out[CELLS] = str(entry.type_cells.bit_count())
    out[OFFERINGS] = str(entry.cells.bit_count())
    witness = report.grid.witness(entry.cells, with_offering=False)
    if witness is not None:
        out[EXAMPLE] = witness.describe()
    if status == merge.APPLIED:
        fields = set(entry.fields())
        winning = {c.field for c in report.outcome.claims if c.overlay == name and c.cells}
        out[IN_EFFECT] = ",".join(sorted(fields & winning))
        out[SHADOWED] = ",".join(sorted(fields - winning))
    return out


def escape(token: str) -> str:
    """JSON Pointer (RFC 6901): `~` then `/`, in that order."""
    return token.replace("~", "~0").replace("/", "~1")


def operations(obj: Mapping[str, Any], wanted: Mapping[str, str]) -> list[dict[str, Any]]:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return [{"op": "add", "path": "/metadata", "value": {"annotations": dict(wanted)}}]
    current = meta.get("annotations")
    if not isinstance(current, Mapping):
        return [{"op": "add", "path": "/metadata/annotations", "value": dict(wanted)}]
    ops: list[dict[str, Any]] = []
    for key in sorted(current):
        if isinstance(key, str) and key.startswith(PREFIX) and key not in wanted:
            ops.append({"op": "remove", "path": "/metadata/annotations/" + escape(key)})
    for key, value in sorted(wanted.items()):
        if current.get(key) != value:
            # "add" on an existing member replaces it (RFC 6902 4.1).
            ops.append({"op": "add", "path": "/metadata/annotations/" + escape(key), "value": value})
    return ops
