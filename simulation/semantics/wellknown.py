"""Which label keys an instance type can carry at all: a cloud provider's well-known labels (the keys its instance
types are given, at the release the oracle pins), and the domains that belong to Kubernetes, Karpenter or a cloud.
A requirement key that no NodePool defines is certainly undefined, rather than only unknown to the catalog at
hand (analysis/unknowable.py), only where this module says the provider cannot define it."""

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
# Domains (and their subdomains) whose labels a cloud provider or Karpenter may set on an instance type, whatever
# the catalog shows: Kubernetes' well-known labels, Karpenter's, and the clouds' other domains (topology.k8s.aws).
_PLATFORM_DOMAINS = ("kubernetes.io", "k8s.io", "karpenter.sh", "k8s.aws", "amazonaws.com", "aws", "azure.com",
                     "microsoft.com", "k8s.gcp", "google.com", "gke.io", "k8s.oracle", "oraclecloud.com")


def _domain(key: str) -> str:
    return key.partition("/")[0] if "/" in key else ""


def _within(domain: str, parent: str) -> bool:
    return domain == parent or domain.endswith("." + parent)


def undefinable(key: str, provider: str, complete: bool) -> bool:
    """Whether no instance type of `provider` can carry label `key`: a key in the provider's own label domain that
    is not one of its well-known labels, or (`complete`: the catalog holds every instance type of its provider) a
    key outside every Kubernetes, Karpenter and cloud domain. False wherever that is not certain."""
    domain = _domain(key)
    owner = cat.PROVIDER_DOMAINS.get(domain)
    if owner is not None:
        return owner == provider and provider in PROVIDER_LABELS and key not in PROVIDER_LABELS[provider]
    if any(_within(domain, parent) for parent in (*cat.PROVIDER_DOMAINS, *_PLATFORM_DOMAINS)):
        return False
    return complete and provider in PROVIDER_LABELS
