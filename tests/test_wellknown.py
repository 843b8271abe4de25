"""Which label keys an instance type of a provider can carry (simulation/semantics/wellknown.py): the one place that
decides when an undefined label key is certain, and so an error the webhook denies on."""

from __future__ import annotations

import pytest

from simulation.semantics import wellknown


@pytest.mark.parametrize(("key", "provider", "undefinable"), [
    # The provider's own domain: only its well-known labels, whatever the catalog holds.
    ("karpenter.k8s.aws/instance-familly", "AWS", True),
    ("karpenter.k8s.aws/instance-family", "AWS", False),
    # Well-known, though the embedded data lacks it: unknowable, never certain.
    ("karpenter.k8s.aws/instance-tenancy", "AWS", False),
    ("karpenter.k8s.aws/capacity-reservation-id", "AWS", False),
    ("karpenter.k8s.aws/ec2nodeclass", "AWS", False),
    # Another cloud's domain under this catalog, or a provider whose labels are not held: not judged.
    ("karpenter.k8s.aws/instance-familly", "Azure", False),
    ("karpenter.azure.com/sku-familly", "Azure", False),
    ("karpenter.k8s.aws/instance-familly", "", False),
    # Outside the provider's own domain a NodePool created or labelled later may define the key: never certain.
    ("node.kubernetes.io/windows-build", "AWS", False),
    ("topology.k8s.aws/zone-id", "AWS", False),
    ("tier", "AWS", False),
    ("example.com/team", "AWS", False),
])
def test_undefinable(key: str, provider: str, undefinable: bool) -> None:
    assert wellknown.undefinable(key, provider) is undefinable
