"""Which label keys an instance type of a provider can carry (simulation/semantics/wellknown.py): the one place that
decides when an undefined label key is certain, and so an error the webhook denies on."""

from __future__ import annotations

import pytest

from simulation.semantics import wellknown


@pytest.mark.parametrize(("key", "provider", "complete", "undefinable"), [
    # The provider's own domain: only its well-known labels, whatever the catalog holds.
    ("karpenter.k8s.aws/instance-familly", "AWS", False, True),
    ("karpenter.k8s.aws/instance-family", "AWS", True, False),
    # Well-known, though the embedded data lacks it: unknowable, never certain.
    ("karpenter.k8s.aws/instance-tenancy", "AWS", True, False),
    ("karpenter.k8s.aws/capacity-reservation-id", "AWS", True, False),
    ("karpenter.k8s.aws/ec2nodeclass", "AWS", True, False),
    # Another cloud's domain under this catalog, or a provider whose labels are not held: not judged.
    ("karpenter.k8s.aws/instance-familly", "Azure", True, False),
    ("karpenter.azure.com/sku-familly", "Azure", True, False),
    ("karpenter.k8s.aws/instance-familly", "", True, False),
    # Kubernetes', Karpenter's and the clouds' other domains, subdomains included: a provider may set them.
    ("node.kubernetes.io/windows-build", "AWS", True, False),
    ("kubernetes.io/os", "AWS", True, False),
    ("example.k8s.io/x", "AWS", True, False),
    ("karpenter.sh/capacity-type", "AWS", True, False),
    ("topology.k8s.aws/zone-id", "AWS", True, False),
    ("eks.amazonaws.com/nodegroup", "AWS", True, False),
    # A custom key: certain only where the catalog holds every type of its provider.
    ("tier", "AWS", True, True),
    ("example.com/team", "AWS", True, True),
    ("tier", "AWS", False, False),
    ("tier", "", True, False),
])
def test_undefinable(key: str, provider: str, complete: bool, undefinable: bool) -> None:
    assert wellknown.undefinable(key, provider, complete) is undefinable
