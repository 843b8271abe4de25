"""Benchmark workloads: the full default catalog, `pools` NodePools with distinct template labels and
`count` realistic overlays, mostly at the default weight; the default size is the core issue's
(2,000 overlays, 20 NodePools), `Size` names the others the scaling table covers.

Candidates come in two kinds, each clean or conflicting with what is stored:
- scoped: one NodePool, one instance family, one capacity type (what a per-team overlay looks like);
- broad: no NodePool requirement, family-wide or capacity-type-wide (a spot discount, a generation
  penalty, a GPU capacity across every NodePool), the kind that touches every NodePool's cells.

Deterministic (seeded) so figures are comparable between runs."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from simulation.semantics import catalog as cat

POOLS = 20
OVERLAYS = 2000
# Weights the workload never uses, so that a clean candidate collides with nothing stored.
_CLEAN_WEIGHTS = (7, 13, 29, 31, 37)


@dataclasses.dataclass(frozen=True)
class Size:
    overlays: int = OVERLAYS
    pools: int = POOLS
    # Each capacity overlay adds its own extended resource (device-plugin and accelerator-slicing overlays do):
    # a distinct capacity field per capacity overlay, a fifth of them.
    distinct: bool = False

    @property
    def label(self) -> str:
        fields = f" / {self.overlays // 5} distinct capacity fields" if self.distinct else ""
        return f"{self.overlays} overlays / {self.pools} NodePools{fields}"

    @property
    def argument(self) -> str:
        """How `python -m benchmarks.core_bench` names it: OVERLAYS,POOLS[,distinct]."""
        return f"{self.overlays},{self.pools}" + (",distinct" if self.distinct else "")

    @classmethod
    def parse(cls, text: str) -> Size:
        overlays, pools, *rest = text.split(",")
        return cls(int(overlays), int(pools), rest == ["distinct"])


DEFAULT = Size()
SCALING = (Size(500, 5), Size(2000, 20), Size(10_000, 100), Size(20_000, 200),
           Size(2000, 20, distinct=True), Size(10_000, 100, distinct=True))


def _pool(i: int) -> str:
    return f"pool-{i:03d}"


def nodepools(count: int = POOLS) -> list[dict[str, Any]]:
    return [{
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": _pool(i)},
        "spec": {"template": {"metadata": {"labels": {"team": f"team-{i:03d}", "tier": ("web", "batch")[i % 2]}},
                              "spec": {"requirements": [{"key": "kubernetes.io/arch", "operator": "In",
                                                         "values": ["amd64", "arm64"]}]}}},
    } for i in range(count)]


def _families(catalog: cat.Catalog | None) -> list[str]:
    types = (catalog or cat.default()).types
    return sorted({t.labels["karpenter.k8s.aws/instance-family"] for t in types})


def overlays(count: int = OVERLAYS, seed: int = 7, catalog: cat.Catalog | None = None,
             pools: int = POOLS, distinct: bool = False) -> list[dict[str, Any]]:
    """Overlays keyed on family, category, cpu/memory ranges, capacity type, zone and NodePool,
    spread so that most do not collide (as a real, working configuration would). `distinct`: each
    capacity overlay sets a resource of its own."""
    rng = random.Random(seed)
    types = (catalog or cat.default()).types
    families = _families(catalog)
    categories = sorted({t.labels["karpenter.k8s.aws/instance-category"] for t in types})
    zones = ["us-east-1a", "us-east-1b", "us-east-1c"]
    out = []
    for i in range(count):
        pool = _pool(i % pools)
        family = families[(i // pools) % len(families)]
        reqs: list[dict[str, Any]] = [
            {"key": "karpenter.sh/nodepool", "operator": "In", "values": [pool]},
            {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": [family]},
        ]
        shape = rng.random()
        if shape < 0.3:
            reqs.append({"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt",
                         "values": [str(rng.choice([1, 2, 4, 8, 16]))]})
        elif shape < 0.5:
            reqs.append({"key": "karpenter.k8s.aws/instance-memory", "operator": "Lt",
                         "values": [str(rng.choice([8192, 16384, 65536]))]})
        elif shape < 0.6:
            reqs.append({"key": "karpenter.k8s.aws/instance-category", "operator": "In",
                         "values": [rng.choice(categories)]})
        if rng.random() < 0.4:
            reqs.append({"key": "karpenter.sh/capacity-type", "operator": "In",
                         "values": [rng.choice(["spot", "on-demand"])]})
        if rng.random() < 0.2:
            reqs.append({"key": "topology.kubernetes.io/zone", "operator": "In", "values": [rng.choice(zones)]})
        spec: dict[str, Any] = {"requirements": reqs}
        if rng.random() < 0.1:
            spec["weight"] = rng.choice([10, 50, 100])
        kind = rng.random()
        if kind < 0.6:
            spec["priceAdjustment"] = f"-{rng.randint(1, 40)}%"
        elif kind < 0.8:
            spec["price"] = f"{rng.uniform(0.01, 5):.4f}"
        else:
            resource = f"example.com/device-{i:05d}" if distinct else "example.com/widget"
            spec["capacity"] = {resource: str(rng.randint(1, 8))}
        out.append({"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
                    "metadata": {"name": f"overlay-{i:05d}"}, "spec": spec})
    return out


def documents(size: Size = DEFAULT, catalog: cat.Catalog | None = None) -> list[dict[str, Any]]:
    return [*nodepools(size.pools), *overlays(size.overlays, catalog=catalog, pools=size.pools, distinct=size.distinct)]


def _overlay(name: str, reqs: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
            "metadata": {"name": name}, "spec": {"requirements": reqs, **spec}}


def candidate(index: int = 0, pools: int = POOLS) -> dict[str, Any]:
    """A new overlay scoped to one NodePool, in the style of the workload."""
    return _overlay(f"candidate-{index:05d}", [
        {"key": "karpenter.sh/nodepool", "operator": "In", "values": [_pool(index % pools)]},
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m7i"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}], priceAdjustment="-5%")


def broad(index: int = 0, conflicting: bool = False, catalog: cat.Catalog | None = None) -> dict[str, Any]:
    """A new overlay with no NodePool requirement: family-wide (even index) or capacity-type-wide
    (odd). A conflicting one sets price at the default weight, which the stored overlays of that
    family use too; a clean one uses a weight nothing stored has."""
    families = _families(catalog)
    if index % 2 == 0:
        reqs = [{"key": "karpenter.k8s.aws/instance-family", "operator": "In",
                 "values": [families[(index // 2) % len(families)]]}]
    else:
        reqs = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
                {"key": "karpenter.k8s.aws/instance-generation", "operator": "Lt", "values": [str(3 + index % 5)]}]
    spec: dict[str, Any] = {"priceAdjustment": f"-{1 + index % 30}%"}
    if not conflicting:
        spec["weight"] = _CLEAN_WEIGHTS[index % len(_CLEAN_WEIGHTS)] + 100 * (index % 50)
    return _overlay(f"broad-{'c' if conflicting else 'k'}-{index:05d}", reqs, **spec)


def identical(count: int) -> list[dict[str, Any]]:
    """`count` overlays setting the same price on the same cells at the same weight: every pair collides."""
    return [_overlay(f"same-{i:05d}", [{"key": "karpenter.k8s.aws/instance-family", "operator": "In",
                                         "values": ["m5"]}], priceAdjustment="-10%")
            for i in range(count)]
