"""/mutate: `overlay-guard.io/` annotations summarising the simulated effect, as a JSON Patch.

The patch only touches keys under the prefix and only where the value differs, so applying
the webhook to its own output yields an empty patch (safe with reinvocationPolicy IfNeeded).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from simulation.analysis import effects
from simulation.semantics import quantity

PREFIX = "overlay-guard.io/"
STATUS = PREFIX + "status"
CELLS = PREFIX + "cells-matched"
OFFERINGS = PREFIX + "offerings-matched"
IN_EFFECT = PREFIX + "fields-in-effect"
SHADOWED = PREFIX + "shadowed-fields"
EXAMPLE = PREFIX + "example-cell"
MEMORY = PREFIX + "least-allocatable-memory"


def summary(effect: effects.OverlayEffect) -> dict[str, str]:
    """The core's account of the overlay's effect, as annotations."""
    out = {STATUS: effect.status, CELLS: str(effect.type_cells), OFFERINGS: str(effect.offerings),
           IN_EFFECT: ",".join(effect.in_effect), SHADOWED: ",".join(effect.shadowed)}
    if effect.example is not None:
        out[EXAMPLE] = effect.example
    if effect.memory is not None:
        witness, mem = effect.memory
        pages = quantity.canonical(mem.hugepages, quantity.BINARY_SI)
        out[MEMORY] = (f"{mem.text} allocatable of {quantity.canonical(mem.capacity, quantity.BINARY_SI)} capacity "
                       f"less {pages} hugepages on {witness.describe()}")
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
