"""The benchmark workload of the core issue: the full default catalog, 20 NodePools with
distinct template labels and 2,000 realistic overlays, mostly at the default weight.

Deterministic (seeded) so figures are comparable between runs."""

from __future__ import annotations

import random
from typing import Any

from simulation.semantics import catalog as cat

POOLS = 20
OVERLAYS = 2000


def nodepools(count: int = POOLS) -> list[dict[str, Any]]:
    return [{
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": f"pool-{i:02d}"},
        "spec": {"template": {"metadata": {"labels": {"team": f"team-{i:02d}", "tier": ("web", "batch")[i % 2]}},
                              "spec": {"requirements": [{"key": "kubernetes.io/arch", "operator": "In",
                                                         "values": ["amd64", "arm64"]}]}}},
    } for i in range(count)]


def overlays(count: int = OVERLAYS, seed: int = 7, catalog: cat.Catalog | None = None) -> list[dict[str, Any]]:
    """Overlays keyed on family, category, cpu/memory ranges, capacity type, zone and NodePool,
    spread so that most do not collide (as a real, working configuration would)."""
    rng = random.Random(seed)
    types = (catalog or cat.default()).types
    families = sorted({t.labels["karpenter.k8s.aws/instance-family"] for t in types})
    categories = sorted({t.labels["karpenter.k8s.aws/instance-category"] for t in types})
    zones = ["us-east-1a", "us-east-1b", "us-east-1c"]
    out = []
    for i in range(count):
        pool = f"pool-{i % POOLS:02d}"
        family = families[(i // POOLS) % len(families)]
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
            spec["capacity"] = {"example.com/widget": str(rng.randint(1, 8))}
        out.append({"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
                    "metadata": {"name": f"overlay-{i:04d}"}, "spec": spec})
    return out


def candidate(index: int = 0) -> dict[str, Any]:
    """A new overlay in the style of the workload, for per-request timing."""
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
            "metadata": {"name": f"candidate-{index:04d}"},
            "spec": {"requirements": [
                {"key": "karpenter.sh/nodepool", "operator": "In", "values": [f"pool-{index % POOLS:02d}"]},
                {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m7i"]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
                "priceAdjustment": "-5%"}}
