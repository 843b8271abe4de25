"""Plain builders for the unit tests of the core (no tests here): small objects in the shapes the core
reads, and a readable view of a cell set."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from simulation.semantics import catalog as cat
from simulation.semantics import cells, cellset, merge, model

ARCH = "kubernetes.io/arch"
CPU = "karpenter.k8s.aws/instance-cpu"
FAMILY = "karpenter.k8s.aws/instance-family"

Requirement = tuple[str, str, Sequence[str]]
# (NodePool, instance type, zone, capacity type)
Cell = tuple[str, str, str, str]


def instance_type(name: str, labels: Mapping[str, str], offerings: Iterable[tuple[str, str, str]]) -> dict[str, Any]:
    """An InstanceType document; offerings are (zone, capacity type, price)."""
    return {
        "apiVersion": model.OVERLAY_API,
        "kind": model.INSTANCETYPE,
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "resources": {"cpu": "2", "memory": "4Gi"},
            "offerings": [{"topology.kubernetes.io/zone": z, "karpenter.sh/capacity-type": ct, "karpenter.sh/price": p}
                          for z, ct, p in offerings],
        },
    }


def small_catalog() -> cat.Catalog:
    """Three types: two amd64 'm' types with integer CPU counts and one arm64 type whose CPU label is not
    an integer; zones z-a/z-b, both capacity types."""
    return cat.from_documents([
        instance_type("m.small", {ARCH: "amd64", CPU: "2", FAMILY: "m"},
                      [("z-a", "on-demand", "1.0"), ("z-b", "spot", "0.4")]),
        instance_type("m.large", {ARCH: "amd64", CPU: "8", FAMILY: "m", "example.com/gpu": "true"},
                      [("z-a", "on-demand", "4.0"), ("z-a", "spot", "1.5")]),
        instance_type("a.odd", {ARCH: "arm64", CPU: "many", FAMILY: "a"}, [("z-b", "on-demand", "2.0")]),
    ])


def overlay(name: str, *requirements: Requirement, weight: int | None = None, **spec: Any) -> model.Overlay:
    """A NodeOverlay as the core models it; `spec` holds the update fields (price, capacity, ...)."""
    body: dict[str, Any] = {"requirements": [{"key": k, "operator": op, "values": list(v)}
                                             for k, op, v in requirements], **spec}
    if weight is not None:
        body["weight"] = weight
    return model.overlay({"apiVersion": model.OVERLAY_API, "kind": model.NODEOVERLAY,
                          "metadata": {"name": name}, "spec": body})


def nodepool(name: str, labels: Mapping[str, str] | None = None, *requirements: Requirement,
             weight: int = 0) -> model.NodePool:
    return model.NodePool(name, weight, dict(labels or {}),
                          tuple(model.ReqSpec(k, op, tuple(v)) for k, op, v in requirements))


def grid(catalog: cat.Catalog, *pools: model.NodePool) -> cells.Grid:
    return cells.build(catalog, pools or (model.IMPLICIT_NODEPOOL,))


def selected(g: cells.Grid, chosen: cellset.Cells) -> set[Cell]:
    """The cells of a set, spelled out."""
    out = set()
    for bit in chosen.bits():
        pool, t, slot = g.locate(bit)
        offering = g.types[t].offerings[slot]
        out.add((g.pools[pool].name, g.types[t].name, offering.zone, offering.capacity_type))
    return out


def entries(g: cells.Grid, *overlays: model.Overlay) -> list[merge.Entry]:
    return [merge.entry(g, o) for o in overlays]
