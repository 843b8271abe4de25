"""Plain helpers of the API-server-layer tests (no tests here): an overlay that uses every field the
DRA-extended CRD defines correctly, edits at dotted paths, and the schema check under that CRD with its
findings as (code, field)."""

from __future__ import annotations

from typing import Any

from simulation import findings
from simulation.validation import crds, schema

REF = findings.ObjectRef("NodeOverlay", "test")
TPL = "spec.dynamicResources.resourceSliceTemplates"
DEV = f"{TPL}[0].spec.devices[0]"
BIND = "spec.dynamicResources.attributeBindings"
PCIE = "resource.k8s.io/pcieRoot"
REQS, ADJ = "spec.requirements", "spec.priceAdjustment"
K0, O0, V0 = f"{REQS}[0].key", f"{REQS}[0].operator", f"{REQS}[0].values"
LONG = "d" * 60 + ".com"  # a DNS subdomain longer than a qualified name's 63-character domain


def valid() -> dict[str, Any]:
    """An overlay that uses every field the DRA-extended CRD defines, correctly."""
    return {
        "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
        "metadata": {"name": "test", "labels": {"team": "ml"}, "annotations": {"note": "x"}},
        "spec": {
            "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
                             {"key": "example.com/gen", "operator": "Gt", "values": ["3"]},
                             {"key": "foo", "operator": "NotIn", "values": ["a"]},
                             {"key": "bar", "operator": "DoesNotExist"}],
            "weight": 10, "priceAdjustment": "-10%", "capacity": {"example.com/fuse": "1", "hugepages": 4},
            "dynamicResources": {
                "resourceSliceTemplates": [
                    {"metadata": {"name": "gpu"}, "spec": {
                        "driver": "gpu.example.com",
                        "nodeSelector": {"nodeSelectorTerms": [{
                            "matchLabelKeys": ["topology.kubernetes.io/zone"],
                            "matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}],
                            "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}]},
                        "devices": [
                            {"name": "gpu-0",
                             "attributes": {PCIE: {"bindingKey": "r1"},
                                            "productName": {"string": "H100"}, "cores": {"int": 5},
                                            "ok": {"bool": True}, "driverVersion": {"version": "1.2.3-rc.1"}},
                             "capacity": {"memory": {"value": "80Gi"}}},
                            {"name": "gpu-1"}]}},
                    {"metadata": {"name": "nic"}, "spec": {"driver": "rdma.example.com", "devices": [
                        {"name": "nic-0", "attributes": {PCIE: {"bindingKey": "r1"}}}]}}],
                "attributeBindings": [{"attributes": [PCIE], "deviceSelectors": [
                    {"resourceSliceTemplate": "gpu", "device": "gpu-0"},
                    {"resourceSliceTemplate": "nic", "device": "nic-0"}]}]}}}


def edit(obj: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    """Set (or, with the DELETE marker, remove) the field at a dotted path with [i] indexes; returns obj."""
    parts = [int(p) if p.isdigit() else p for p in dotted.replace("]", "").replace("[", ".").split(".")]
    node: Any = obj
    for part in parts[:-1]:
        node = node[part]
    if value is DELETE:
        del node[parts[-1]]
    else:
        node[parts[-1]] = value
    return obj


DELETE = object()


def run(obj: Any) -> list[findings.Finding]:
    return schema.check(obj, REF, 7, crds.dra())


def codes(found: list[findings.Finding]) -> set[tuple[str, str]]:
    return {(f.code, f.field) for f in found}


def with_edits(*edits: tuple[str, Any]) -> dict[str, Any]:
    obj = valid()
    for dotted, value in edits:
        edit(obj, dotted, value)
    return obj
