"""`kubectl overlay …` through the real kubectl's plugin mechanism, against a real kube-apiserver
holding Karpenter's CRDs: check, simulate and explain read the cluster of the current context."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from collections.abc import Iterator

import pytest

from . import _crds
from ._cluster import ControlPlane
from ._guard import apply, delete_labelled, nodepool, overlay, unique

pytestmark = pytest.mark.e2e

VENV_BIN = pathlib.Path(sys.executable).parent


@pytest.fixture
def objects(control_plane: ControlPlane, crds: _crds.Crds) -> Iterator[tuple[str, str]]:
    """A NodePool with two overlays of different weights on it (no conflict, so any guard admits
    them): (test label, pool name)."""
    label, pool = unique("plugin"), unique("plugin-pool")
    high, low = f"{label}-high", f"{label}-low"
    done = apply(control_plane, nodepool(pool, test=label),
                 overlay(high, pool, weight=20, price="0.05", test=label),
                 overlay(low, pool, weight=10, priceAdjustment="-10%", test=label))
    assert done.returncode == 0, done.stderr
    try:
        yield label, pool
    finally:
        delete_labelled(control_plane, label)


def kubectl_overlay(plane: ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    # As a user runs it: kubectl finds `kubectl-overlay` on PATH; KUBECONFIG names the cluster.
    env = {**os.environ, "KUBECONFIG": str(plane.kubeconfig),
           "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([plane.kubectl_path, "overlay", *args], capture_output=True, text=True, env=env,
                          timeout=180)


def test_simulate_and_explain_read_the_cluster(control_plane: ControlPlane, objects: tuple[str, str]) -> None:
    label, pool = objects
    done = kubectl_overlay(control_plane, "simulate", "--nodepool", pool, "--instance-type", "m5.large",
                           "--format", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["overlays"][f"{label}-high"]["status"] == "Applied"
    offerings = data["nodepools"][pool]["m5.large"]["offerings"]
    assert offerings and {o["priceOverlay"] for o in offerings} == {f"{label}-high"}
    assert {o["price"] for o in offerings} == {0.05}
    done = kubectl_overlay(control_plane, "explain", "--instance-type", "m5.large", "--nodepool", pool)
    assert done.returncode == 0, done.stderr
    assert f"{label}-high" in done.stdout and f"{label}-low" in done.stdout


def test_check_a_change_against_the_cluster(control_plane: ControlPlane, objects: tuple[str, str],
                                            tmp_path: pathlib.Path) -> None:
    label, pool = objects
    change = tmp_path / "change.yaml"
    change.write_text(json.dumps(overlay(f"{label}-new", pool, weight=20, priceAdjustment="-5%")))
    done = kubectl_overlay(control_plane, "check", str(change), "--format", "json")
    assert done.returncode == 1, done.stderr
    conflicts = [f for f in json.loads(done.stdout)["findings"] if f["code"] == "same-weight-conflict"]
    assert conflicts, done.stdout
    names = {conflicts[0]["object"]["name"], *(r["name"] for r in conflicts[0]["related"])}
    assert names == {f"{label}-new", f"{label}-high"}
    # The same change at a free weight is clean.
    change.write_text(json.dumps(overlay(f"{label}-new", pool, weight=30, priceAdjustment="-5%")))
    done = kubectl_overlay(control_plane, "check", str(change), "--context", "e2e")
    assert done.returncode == 0, done.stdout + done.stderr
