"""Issue 4, scenarios 1-5: what a user sees from `kubectl` with overlay-guard registered. Defined once
here, collected by test_admission.py (the webhook as a process) and test_image.py (the OCI image)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from ._guard import Guard, annotations_of, apply, exists, nodepool, overlay, unique

VALIDATOR = 'admission webhook "nodeoverlays.validate.overlay-guard.io" denied the request'


def _admitted(done: Any) -> None:
    assert done.returncode == 0, f"refused:\n{done.stderr}"


def _witness(pool: str, family: str = "m5") -> re.Pattern[str]:
    return re.compile(rf"nodepool {re.escape(pool)}, instance type {family}\.\w+")


def test_1_valid_overlay_is_annotated(guard: Guard, label: str) -> None:
    pool = guard.new_pool(label)
    name = unique("e2e-valid")

    done = apply(guard.plane, overlay(name, pool, test=label, priceAdjustment="-10%"))

    _admitted(done)
    assert f"nodeoverlay.karpenter.sh/{name} created" in done.stdout
    shown = guard.plane.kubectl("get", "nodeoverlay", name, "-o", "yaml").stdout
    assert "overlay-guard.io/status: Applied" in shown
    notes = annotations_of(guard.plane, name)
    assert int(notes["overlay-guard.io/cells-matched"]) > 0
    assert int(notes["overlay-guard.io/offerings-matched"]) >= int(notes["overlay-guard.io/cells-matched"])
    assert notes["overlay-guard.io/fields-in-effect"] == "price"
    assert _witness(pool).search(notes["overlay-guard.io/example-cell"])


@pytest.mark.parametrize("dry_run", [False, True], ids=["apply", "dry-run"])
def test_2_same_weight_conflict_is_refused(guard: Guard, label: str, dry_run: bool) -> None:
    pool = guard.new_pool(label)
    first, second = unique("e2e-first"), unique("e2e-second")
    _admitted(apply(guard.plane, overlay(first, pool, test=label, price="0.5")))

    args = ("--dry-run=server",) if dry_run else ()
    done = apply(guard.plane, overlay(second, pool, test=label, priceAdjustment="-20%"), args=args)

    assert done.returncode == 1, done.stdout
    err = done.stderr
    assert err.startswith("Error from server (Forbidden)"), err
    assert VALIDATOR in err
    assert "same-weight-conflict" in err
    assert first in err and second in err
    assert "price" in err and "weight 10" in err
    assert _witness(pool).search(err), err
    assert not exists(guard.plane, "nodeoverlay", second)


def test_2_admitted_dry_run_leaves_nothing_behind(guard: Guard, label: str) -> None:
    pool = guard.new_pool(label)
    rehearsed, real = unique("e2e-rehearsed"), unique("e2e-real")

    dry = apply(guard.plane, overlay(rehearsed, pool, test=label, price="0.5"), args=("--dry-run=server",))

    _admitted(dry)
    assert "(server dry run)" in dry.stdout
    assert not exists(guard.plane, "nodeoverlay", rehearsed)
    # Had the dry run been held like an admitted create, this same-weight overlay would be refused.
    _admitted(apply(guard.plane, overlay(real, pool, test=label, priceAdjustment="-20%")))


def test_3_update_introducing_a_conflict_is_refused_and_a_new_weight_admitted(
        guard: Guard, label: str) -> None:
    pool = guard.new_pool(label)
    first, second = unique("e2e-m5"), unique("e2e-c5")
    _admitted(apply(guard.plane, overlay(first, pool, test=label, price="0.5")))
    _admitted(apply(guard.plane, overlay(second, pool, family="c5", test=label, price="0.7")))

    conflicting = apply(guard.plane, overlay(second, pool, family="m5", test=label, price="0.7"))

    assert conflicting.returncode == 1
    assert VALIDATOR in conflicting.stderr
    assert first in conflicting.stderr and "weight 10" in conflicting.stderr
    assert _witness(pool).search(conflicting.stderr), conflicting.stderr
    stored = json.loads(guard.plane.kubectl("get", "nodeoverlay", second, "-o", "json").stdout)
    assert stored["spec"]["requirements"][1]["values"] == ["c5"]

    resolved = apply(guard.plane, overlay(second, pool, family="m5", weight=20, test=label, price="0.7"))

    _admitted(resolved)
    assert f"nodeoverlay.karpenter.sh/{second} configured" in resolved.stdout
    stored = json.loads(guard.plane.kubectl("get", "nodeoverlay", second, "-o", "json").stdout)
    assert stored["spec"]["weight"] == 20
    assert stored["metadata"]["annotations"]["overlay-guard.io/fields-in-effect"] == "price"


def _template(name: str, driver: str, devices: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"driver": driver, "devices": devices, **spec}}


_ROOT = "resource.k8s.io/pcieRoot"
_BY_WEBHOOK = VALIDATOR
# Structural template rules live in the CRD (CEL and strict field validation), so the API server
# refuses those before any webhook is called; the reason must still reach the user.
_BY_APISERVER = "is invalid"
_DRA_CASES: dict[str, tuple[dict[str, Any], str, str]] = {
    "binding-key-on-one-device": (
        {"resourceSliceTemplates": [_template("gpu-slice", "gpu.nvidia.com", [
            {"name": "gpu-0", "attributes": {_ROOT: {"bindingKey": "root-0"}}},
            {"name": "gpu-1", "attributes": {_ROOT: {"string": "pci0000:10"}}}])]},
        _BY_WEBHOOK, "[invalid-binding-key]|appears on only one device"),
    "binding-key-not-a-dns-label": (
        {"resourceSliceTemplates": [_template("gpu-slice", "gpu.nvidia.com", [
            {"name": f"gpu-{i}", "attributes": {_ROOT: {"bindingKey": "Root_0"}}} for i in range(2)])]},
        _BY_WEBHOOK, "[invalid-binding-key]|is not a DNS label"),
    "attribute-binding-to-a-missing-template": (
        {"resourceSliceTemplates": [
            _template("gpu-slice", "gpu.nvidia.com", [{"name": "gpu-0"}]),
            _template("rdma-slice", "rdma.nvidia.com", [{"name": "rdma-0"}])],
         "attributeBindings": [{"attributes": [_ROOT], "deviceSelectors": [
             {"resourceSliceTemplate": "gpu-slice", "device": "gpu-0"},
             {"resourceSliceTemplate": "nic-slice", "device": "nic-0"}]}]},
        _BY_WEBHOOK, "[invalid-attribute-binding]|template nic-slice, which this overlay does not define"),
    "attribute-binding-of-different-values": (
        {"resourceSliceTemplates": [
            _template("gpu-slice", "gpu.nvidia.com",
                      [{"name": "gpu-0", "attributes": {_ROOT: {"string": "a"}}}]),
            _template("rdma-slice", "rdma.nvidia.com",
                      [{"name": "rdma-0", "attributes": {_ROOT: {"string": "b"}}}])],
         "attributeBindings": [{"attributes": [_ROOT], "deviceSelectors": [
             {"resourceSliceTemplate": "gpu-slice", "device": "gpu-0"},
             {"resourceSliceTemplate": "rdma-slice", "device": "rdma-0"}]}]},
        _BY_WEBHOOK, "[invalid-attribute-binding]"),
    "template-names-not-unique": (
        {"resourceSliceTemplates": [_template("gpu-slice", "gpu.nvidia.com", [{"name": "gpu-0"}]),
                                    _template("gpu-slice", "rdma.nvidia.com", [{"name": "rdma-0"}])]},
        _BY_APISERVER, "template names must be unique within a NodeOverlay"),
    "template-with-an-excluded-field": (
        {"resourceSliceTemplates": [_template("gpu-slice", "gpu.nvidia.com", [{"name": "gpu-0"}],
                                              nodeName="ip-10-0-0-1.ec2.internal")]},
        _BY_APISERVER, "nodeName is not part of a ResourceSliceTemplate spec|no node name can be known"),
}


# The DRA rules need the opt-in DRA-extended CRD; Karpenter's own refuses dynamicResources outright.
@pytest.mark.usefixtures("dra_crd")
@pytest.mark.parametrize("case", sorted(_DRA_CASES))
def test_4_invalid_dra_is_refused_with_its_reason(guard: Guard, label: str, case: str) -> None:
    dra, layer, reasons = _DRA_CASES[case]
    pool = unique("e2e-dra-pool")
    name = unique("e2e-dra")

    done = apply(guard.plane, overlay(name, pool, family="p5", test=label, dynamicResources=dra))

    assert done.returncode == 1, done.stdout
    assert layer in done.stderr, done.stderr
    for reason in reasons.split("|"):
        assert reason in done.stderr, done.stderr
    assert not exists(guard.plane, "nodeoverlay", name)


def test_5_nodepool_change_creating_a_conflict_is_admitted_with_a_warning(guard: Guard, label: str) -> None:
    team = "e2e.overlay-guard.io/team"
    pool = guard.new_pool(label)
    by_label, by_pool = unique("e2e-by-label"), unique("e2e-by-pool")
    # Keyed on a label no NodePool has yet: matches nothing, so nothing to conflict with.
    _admitted(apply(guard.plane, overlay(by_label, None, test=label, price="1.25",
                                         requirements=[{"key": team, "operator": "In", "values": [pool]}])))
    _admitted(apply(guard.plane, overlay(by_pool, pool, test=label, priceAdjustment="-5%")))

    done = apply(guard.plane, nodepool(pool, {team: pool}, test=label))

    assert done.returncode == 0, done.stderr
    assert f"nodepool.karpenter.sh/{pool} configured" in done.stdout
    warnings = [line for line in done.stderr.splitlines() if line.startswith("Warning: overlay-guard:")]
    conflict = [w for w in warnings if "same-weight-conflict" in w]
    assert conflict, done.stderr
    assert by_label in conflict[0] and by_pool in conflict[0] and f"NodePool {pool}" in conflict[0]
    stored = json.loads(guard.plane.kubectl("get", "nodepool", pool, "-o", "json").stdout)
    assert stored["spec"]["template"]["metadata"]["labels"] == {team: pool}


# The scenarios by name, in the order written: test_admission.py and test_image.py collect them from here.
SCENARIOS = {name: test for name, test in list(globals().items()) if name.startswith("test_")}
