"""semantics/allocatable: Karpenter's computeAllocatable hugepages step (pkg/cloudprovider/types.go)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from simulation.semantics import allocatable


@pytest.mark.parametrize(("capacity", "memory"), [
    # cloudprovider suite_test.go: 20Gi less 1Gi kube-reserved (the catalog's net figure), then 5Gi + 10Gi.
    ({"memory": "19Gi", "hugepages-2Mi": "5Gi", "hugepages-1Gi": "10Gi"}, "4Gi"),
    ({"memory": "19Gi", "hugepages-2Mi": "50Gi", "hugepages-1Gi": "10Gi"}, "0"),
    # The Nitro Enclaves docs on m5.xlarge; the format is the memory's, whatever the hugepages' is.
    ({"memory": "14162Mi", "hugepages-2Mi": "4Gi"}, "10066Mi"),
    ({"memory": "14162Mi", "hugepages-2Mi": "4G"}, "10595638Ki"),
    # ResourceList.Memory() of an absent memory is an empty quantity: clamped to 0.
    ({"hugepages-2Mi": "1Mi"}, "0"),
    # Go ranges over the map in random order: with a negative quantity the lowest reachable figure.
    ({"memory": "1Gi", "hugepages-2Mi": "2Gi", "hugepages-1Gi": "-2Gi"}, "1Gi"),
])
def test_memory_less_hugepages(capacity: dict[str, str], memory: str) -> None:
    assert allocatable.allocatable(capacity)["memory"] == memory


def test_without_hugepages_nothing_changes() -> None:
    capacity = {"memory": "-1Gi", "example.com/hugepages-like": "5Gi", "cpu": "2"}
    assert allocatable.memory(capacity) is None
    assert allocatable.allocatable(capacity) == capacity


def test_what_the_findings_read() -> None:
    most = allocatable.memory({"memory": "3Gi", "hugepages-1Gi": "2Gi"})
    half = allocatable.memory({"memory": "4Gi", "hugepages-1Gi": "2Gi"})
    none = allocatable.memory({"memory": "2Gi", "hugepages-1Gi": "2Gi"})
    zero = allocatable.memory({"memory": "0", "hugepages-1Gi": "0"})
    assert most is not None and most.mostly_taken and not most.exhausted
    assert half is not None and not half.mostly_taken and not half.exhausted
    assert none is not None and none.exhausted and not none.mostly_taken
    assert none.hugepages == Decimal(2 * 2**30) and none.capacity == Decimal(2 * 2**30)
    assert zero is not None and not zero.exhausted, "no hugepages taken: nothing to report"
