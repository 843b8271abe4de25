"""Issue 7: the guard against Karpenter's own CRDs (v1.15.0 from the Go module proxy), realistic NodePools,
and `dynamicResources` only where the opt-in DRA CRD is installed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from . import _crds
from ._guard import Guard, apply, exists, overlay, unique

pytestmark = pytest.mark.e2e

GPU = {"resourceSliceTemplates": [{"metadata": {"name": "gpu-slice"}, "spec": {
    "driver": "gpu.nvidia.com",
    "devices": [{"name": "gpu-0", "attributes": {"productName": {"string": "H100"}},
                 "capacity": {"memory": {"value": "80Gi"}}}]}}]}


def _stored(guard: Guard, kind: str, name: str) -> dict[str, Any]:
    return dict(json.loads(guard.plane.kubectl("get", kind, name, "-o", "json").stdout))


def test_scenarios_run_on_karpenters_own_crds(guard: Guard, crds: _crds.Crds) -> None:
    served = crds.served_schema()
    assert "dynamicResources" not in served
    assert {"requirements", "weight", "price", "priceAdjustment", "capacity"} <= set(served)
    for name in _crds.NAMES:
        crd = json.loads(guard.plane.kubectl("get", name, "-o", "json").stdout)
        # The files of the sigs.k8s.io/karpenter module, not the project's.
        assert crd["metadata"]["annotations"]["controller-gen.kubebuilder.io/version"]
        assert "overlay-guard" not in json.dumps(crd)


def test_realistic_nodepool_is_stored_whole_and_seen_by_the_webhook(guard: Guard, label: str) -> None:
    pool = guard.new_pool(label, {"e2e.overlay-guard.io/team": "ml"})

    stored = _stored(guard, "nodepool", pool)["spec"]
    template = stored["template"]["spec"]
    assert template["nodeClassRef"] == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    gt = {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["4"]}
    assert gt in template["requirements"]
    assert template["taints"][0]["effect"] == "NoSchedule"
    assert stored["limits"] == {"cpu": "1000", "memory": "4000Gi"}
    assert stored["disruption"]["consolidationPolicy"] == "WhenEmptyOrUnderutilized"
    # Matched cells: the webhook read the pool from the API server (new_pool waits for that).
    name = unique("e2e-on-realistic")
    done = apply(guard.plane, overlay(name, pool, test=label, capacity={"example.com/fpga": "1"}))
    assert done.returncode == 0, done.stderr
    assert int(_stored(guard, "nodeoverlay", name)["metadata"]["annotations"]["overlay-guard.io/cells-matched"]) > 0


def test_dra_crd_opt_in_serves_dynamic_resources(guard: Guard, label: str, dra_crd: None) -> None:
    name = unique("e2e-dra-ok")

    done = apply(guard.plane, overlay(name, unique("e2e-dra-pool"), family="p5", test=label, dynamicResources=GPU))

    assert done.returncode == 0, done.stderr
    assert _stored(guard, "nodeoverlay", name)["spec"]["dynamicResources"] == GPU


def _errors(guard: Guard) -> tuple[float, int]:
    hook = guard.webhook
    return (hook.metric("overlay_guard_admission_requests_total", verdict="error"),
            len(hook.events("admission request failed")))


def _admissions_of(guard: Guard, name: str) -> list[dict[str, Any]]:
    return [e for e in guard.webhook.events("admission") if e.get("name") == name]


def test_dynamic_resources_against_karpenters_crd_is_refused_by_the_api_server(guard: Guard, label: str) -> None:
    name = unique("e2e-dra-on-karpenter")
    errors_before = _errors(guard)

    done = apply(guard.plane, overlay(name, unique("e2e-dra-pool"), family="p5", test=label, dynamicResources=GPU))

    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith("Error from server (BadRequest)"), done.stderr
    assert 'strict decoding error: unknown field "spec.dynamicResources"' in done.stderr
    assert not exists(guard.plane, "nodeoverlay", name)
    # Refused while decoding, before admission: the webhook never saw it, and answered no 5xx meanwhile.
    assert _admissions_of(guard, name) == []
    assert _errors(guard) == errors_before


def test_dynamic_resources_with_lax_validation_is_pruned_and_admitted(guard: Guard, label: str) -> None:
    """`kubectl apply --validate=warn` (or a client without strict field validation): the API server drops
    the field with a warning and the webhook judges what is stored, answering 200."""
    name = unique("e2e-dra-pruned")
    errors_before = _errors(guard)

    done = apply(guard.plane, overlay(name, unique("e2e-dra-pool"), family="p5", test=label, dynamicResources=GPU),
                 args=("--validate=warn",))

    assert done.returncode == 0, done.stderr
    assert 'unknown field "spec.dynamicResources"' in done.stderr
    assert "dynamicResources" not in _stored(guard, "nodeoverlay", name)["spec"]
    answered = _admissions_of(guard, name)
    assert {e["endpoint"] for e in answered} == {"validate", "mutate"}, answered
    assert {e["verdict"] for e in answered} <= {"allowed", "warned", "patched"}, answered
    assert _errors(guard) == errors_before
