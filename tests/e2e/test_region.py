"""Issue 27 rows 1-2 in a cluster: the webhook takes its region from the cluster's Nodes, so two weight-10 price
overlays for a zone of that region conflict there (in us-east-1's catalog they would both match nothing)."""

from __future__ import annotations

import json

import pytest

from ._guard import Guard, apply, exists, overlay, unique

pytestmark = pytest.mark.e2e

ZONE, REGION = "topology.kubernetes.io/zone", "topology.kubernetes.io/region"


def _node(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {REGION: "eu-west-1", ZONE: "eu-west-1b"}}}


def test_the_region_of_the_clusters_nodes(guard: Guard, label: str) -> None:
    node = unique("e2e-eu-node")
    guard.plane.kubectl("create", "-f", "-", input=json.dumps(_node(node)))
    try:
        hook = guard.spawn(unique("region"), extra_args=("--audit-interval", "0"))
        try:
            loaded = hook.events("catalog loaded")
            assert loaded and loaded[-1]["region"] == "eu-west-1", hook.tail()
            assert "eu-west-1b" in loaded[-1]["zones"]
            with guard.routed_to(hook):
                pool = guard.new_pool(label)
                eu = [{"key": ZONE, "operator": "In", "values": ["eu-west-1b"]}]
                first, second = unique("e2e-eu-first"), unique("e2e-eu-second")
                assert apply(guard.plane, overlay(first, pool, test=label, requirements=eu,
                                                  priceAdjustment="-10%")).returncode == 0
                denied = apply(guard.plane, overlay(second, pool, test=label, requirements=eu, price="0.05"))
                assert denied.returncode != 0 and "same-weight-conflict" in denied.stderr, denied.stderr
                assert "eu-west-1b" in denied.stderr
                assert not exists(guard.plane, "nodeoverlay", second)
        finally:
            hook.stop()
    finally:
        guard.plane.kubectl("delete", "node", node, "--ignore-not-found")
