"""Which keys of a cloud provider's own label domain its instance types can carry: its well-known labels (the keys
its instance types are given, at the release the oracle pins). That domain is restricted for NodePool labels, so a
requirement key in it that the provider does not define is certainly undefined, now and after any NodePool change,
rather than only unknown to the catalog at hand (analysis/unknowable.py). A key outside it never is: a NodePool
created or labelled later may define it."""

from __future__ import annotations

from collections.abc import Mapping

from simulation.semantics import catalog as cat

# aws/karpenter-provider-aws pkg/apis/v1/labels.go: the keys of its domain its init() adds to Karpenter's
# WellKnownLabels (the same at v1.14.1 and v1.15.0, the release the oracle's Karpenter pairs with), plus the
# NodeClass label (karpenter.k8s.aws/ec2nodeclass) that every node it launches carries. The provider's own domain
# is a restricted one for NodePool template labels, so no NodePool can define any other key in it.
_AWS = frozenset("karpenter.k8s.aws/" + name for name in (
    "capacity-reservation-id", "capacity-reservation-type", "capacity-reservation-interruptible",
    "instance-hypervisor", "instance-encryption-in-transit-supported", "instance-category",
    "instance-capability-flex", "instance-family", "instance-generation", "instance-size", "instance-local-nvme",
    "instance-cpu", "instance-cpu-manufacturer", "instance-cpu-sustained-clock-speed-mhz", "instance-memory",
    "instance-ebs-bandwidth", "instance-network-bandwidth", "instance-gpu-name", "instance-gpu-manufacturer",
    "instance-gpu-count", "instance-gpu-memory", "instance-accelerator-name", "instance-accelerator-manufacturer",
    "instance-accelerator-count", "instance-tenancy", "placement-group-id", "placement-group-partition",
    "ec2nodeclass"))
# provider -> every key of its label domain (catalog.PROVIDER_DOMAINS) that its instance types can carry. A provider
# missing here is never judged: its keys stay unknowable.
PROVIDER_LABELS: Mapping[str, frozenset[str]] = {"AWS": _AWS}


def undefinable(key: str, provider: str) -> bool:
    """Whether no instance type of `provider`, and no NodePool, can carry label `key`: a key in the provider's own
    label domain that is not one of its well-known labels. False wherever that is not certain."""
    owner = cat.PROVIDER_DOMAINS.get(key.partition("/")[0] if "/" in key else "")
    return owner is not None and owner == provider and provider in PROVIDER_LABELS \
        and key not in PROVIDER_LABELS[provider]
