"""Allocatable resources as Karpenter computes them from an instance type's effective capacity
(pkg/cloudprovider/types.go, `InstanceType.computeAllocatable`, v1.15).

Karpenter subtracts the kubelet/system overhead from the capacity (overlays applied), then takes
every `hugepages-*` quantity of that capacity, base and overlaid alike, off the memory, clamping
at 0 after each one. The catalog's figures are already net of the overhead (docs/design.md §4.5),
so here only the hugepages step remains.
"""

from __future__ import annotations

import dataclasses
import decimal
from collections.abc import Iterable, Mapping
from decimal import Decimal

from simulation.semantics import quantity

HUGEPAGES_PREFIX = "hugepages-"
MEMORY = "memory"
# Exact sums and differences of any two quantities the parser accepts (Go's inf.Dec is unbounded).
_EXACT = decimal.Context(prec=4 * (quantity.MAX_EXPONENT + quantity.MAX_LENGTH))


def is_hugepages(resource: str) -> bool:
    """corev1.ResourceHugePagesPrefix, matched as Karpenter matches it: by prefix alone."""
    return resource.startswith(HUGEPAGES_PREFIX)


def value(text: str | int) -> Decimal:
    """A quantity's value as Go's `Quantity` holds it (rounded up to 1n; binary ones capped)."""
    return quantity.as_stored(quantity.parse(text), quantity.format_of(text))


@dataclasses.dataclass(frozen=True)
class Memory:
    """Memory before and after the hugepages step, as exact values and as Karpenter prints them."""

    capacity: Decimal
    hugepages: Decimal
    allocatable: Decimal
    # Quantity.String() of the allocatable memory: the capacity's format, "0" once clamped.
    text: str

    @property
    def exhausted(self) -> bool:
        return self.hugepages > 0 and self.allocatable <= 0

    @property
    def mostly_taken(self) -> bool:
        """More than half of the memory goes to hugepages, but not all of it."""
        return self.allocatable > 0 and self.hugepages * 2 > self.capacity


def memory(capacity: Mapping[str, str]) -> Memory | None:
    """The hugepages step on `capacity` (resource -> quantity); None when it has no hugepages resource
    (Karpenter leaves the memory as it is)."""
    pages = [value(q) for r, q in capacity.items() if is_hugepages(r)]
    if not pages:
        return None
    text = capacity.get(MEMORY)
    before = value(text) if text is not None else Decimal(0)
    # Go ranges over the map in random order; only a negative quantity (the CRD's pattern allows a
    # sign) makes the order matter. Increases first give the lowest figure any order can reach.
    left = before
    for q in sorted(pages):
        left = max(_EXACT.subtract(left, q), Decimal(0))
    # ResourceList.Memory() of an absent memory is an empty BinarySI quantity.
    fmt = quantity.format_of(text) if text is not None else quantity.BINARY_SI
    return Memory(before, _total(pages), left, quantity.canonical(left, fmt))


def allocatable(capacity: Mapping[str, str]) -> dict[str, str]:
    """Karpenter's Allocatable() of a type with this (net) capacity: the memory less hugepages."""
    out = dict(capacity)
    mem = memory(capacity)
    if mem is not None:
        out[MEMORY] = mem.text
    return dict(sorted(out.items()))



def _total(values: Iterable[Decimal]) -> Decimal:
    out = Decimal(0)
    for v in values:
        out = _EXACT.add(out, v)
    return out
