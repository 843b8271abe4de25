"""Schema-layer figures: what one NodeOverlay's API-server check costs (OpenAPI schema, metadata and the
CRD's CEL rules through the CEL library), against a same-run baseline of the same check with the rules
taken out of the CRD, for a broad plain overlay and for DRA overlays up to the CRD's limits; and what
compiling a CRD costs, which the front ends pay once per CRD."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from simulation import findings
from simulation.validation import crds, schema

REF = findings.ObjectRef("NodeOverlay", "bench")


def plain_overlay(requirements: int = 20, salt: int = 0) -> dict[str, Any]:
    operators = [("In", ["a", "b", "c"]), ("NotIn", ["x"]), ("Gt", ["4"]), ("Exists", []), ("Lte", ["64"])]
    reqs = [{"key": f"example.com/k{i}-{salt}", "operator": op, **({"values": values} if values else {})}
            for i, (op, values) in zip(range(requirements), operators * requirements, strict=False)]
    reqs[0] = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]}
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
            "metadata": {"name": "broad", "labels": {"team": "ml"}},
            "spec": {"requirements": reqs, "weight": 10, "priceAdjustment": "-10%",
                     "capacity": {f"example.com/fuse-{salt}": "1", "smarter-devices/kvm": "2",
                                  "hugepages-2Mi": "1Gi"}}}


def dra_overlay(templates: int, devices: int, attributes: int, salt: int = 0) -> dict[str, Any]:
    """Templates of devices with `attributes` attributes each (one a bindingKey), and one binding."""
    def device(t: int, d: int) -> dict[str, Any]:
        attrs: dict[str, Any] = {"resource.k8s.io/pcieRoot": {"bindingKey": f"root-{d}"}}
        attrs.update({f"example.com/attr{a}x{salt}": {"int": a} for a in range(attributes - 1)})
        return {"name": f"dev-{d}", "attributes": attrs, "capacity": {"memory": {"value": "80Gi"}}}

    obj = plain_overlay(4, salt)
    obj["metadata"]["name"] = "dra"
    obj["spec"]["dynamicResources"] = {
        "resourceSliceTemplates": [
            {"metadata": {"name": f"slice-{t}"},
             "spec": {"driver": f"driver{t}.example.com", "devices": [device(t, d) for d in range(devices)]}}
            for t in range(templates)],
        "attributeBindings": [{"attributes": ["resource.k8s.io/pcieRoot"], "deviceSelectors": [
            {"resourceSliceTemplate": "slice-0", "device": "dev-0"},
            {"resourceSliceTemplate": f"slice-{templates - 1}", "device": "dev-1"}]}]}
    return obj


def _without_rules(node: Any) -> Any:
    if isinstance(node, Mapping):
        return {k: _without_rules(v) for k, v in node.items() if k != "x-kubernetes-validations"}
    if isinstance(node, list):
        return [_without_rules(v) for v in node]
    return node


def _medians_ms(calls: Sequence[Callable[[int], Any]], repeat: int) -> list[float]:
    """Median time of each call, the calls interleaved so that a busy machine slows them alike."""
    for call in calls:
        call(0)  # warm-up: first-use caches
    times: list[list[float]] = [[] for _ in calls]
    for i in range(1, repeat + 1):
        for call, spent in zip(calls, times, strict=True):
            started = time.perf_counter()
            call(i)
            spent.append(time.perf_counter() - started)
    return [round(statistics.median(t) * 1000, 3) for t in times]


def _checker(objects: Sequence[dict[str, Any]], crd: crds.Crd) -> Callable[[int], Any]:
    return lambda i: schema.check(objects[i], REF, None, crd)


def _workloads() -> Iterator[tuple[str, Callable[[int], dict[str, Any]], int]]:
    # Each run checks an overlay with names and keys no earlier run used, so no verdict is remembered.
    yield "plain overlay, 20 requirements", lambda salt: plain_overlay(20, salt), 200
    yield "DRA overlay, 2 templates x 8 devices x 8 attributes", lambda salt: dra_overlay(2, 8, 8, salt), 50
    # The CRD's limits: 128 devices per template, 32 attributes and capacities per device.
    yield "DRA overlay, 1 template x 128 devices x 31 attributes", lambda salt: dra_overlay(1, 128, 31, salt), 5


def run() -> dict[str, Any]:
    crd = crds.dra()
    raw = crds.raw_dra()
    [compile_ms] = _medians_ms([lambda _: crds.load(raw, "bench")], 5)
    baseline = crds.load(_without_rules(raw), "bench without rules")
    out: dict[str, Any] = {"compile_crd_ms": compile_ms, "rules": len(crd.rules()), "overlays": {}}
    for name, build, repeat in _workloads():
        assert schema.check(build(0), REF, None, crd) == [], name  # valid: every rule runs to its end
        objects = [build(i) for i in range(repeat + 1)]
        with_rules, without = _medians_ms([_checker(objects, crd), _checker(objects, baseline)], repeat)
        out["overlays"][name] = {"median_ms": with_rules, "without_rules_ms": without,
                                 "ratio": round(with_rules / without, 2) if without else None}
    return out
