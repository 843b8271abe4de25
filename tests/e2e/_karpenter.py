"""Karpenter itself beside the guard: the operator of hack/karpenter-kwok.sh (Karpenter's KWOK provider plus the
AWS provider's own cloud-provider metrics controller) run against the e2e API server with the NodeOverlay feature
gate on, its instance types made from the guard's default catalog."""

from __future__ import annotations

import copy
import dataclasses
import http.client
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from simulation.semantics import catalog as cat
from simulation.semantics import requirements as reqs
from tests import tools

from . import _cluster
from ._cluster import LOOPBACK, REPO_ROOT, ControlPlane, ControlPlaneError
from ._guard import nodepool

NODE_CLASS = "default"
NODE_CLASS_REF = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": NODE_CLASS}
READY_TIMEOUT = 60.0
# Karpenter's overlay controller reconciles on every NodeOverlay, NodePool and node-class change; its
# rate limiter backs a failed status patch off for seconds at most.
RECONCILE_TIMEOUT = 30.0
AVAILABLE = "karpenter_cloudprovider_instance_type_offering_available"
PRICE = "karpenter_cloudprovider_instance_type_offering_price_estimate"
# The condition Karpenter writes for each status the guard predicts (upstream's updateOverlayStatuses).
CONDITION = {"Applied": ("True", "ValidationSucceeded"), "Conflict": ("False", "Conflict"),
             "Invalid": ("False", "RuntimeValidation")}

# (instance type, zone, capacity type)
Cell = tuple[str, str, str]


def offered(catalog: cat.Catalog) -> cat.Catalog:
    """`catalog` with only the offerings KWOK can be given: KWOK marks every offering of its file available, so
    the unavailable ones (types the data has no price for) are left out, and the types left with none."""
    types = []
    for t in catalog.types:
        offerings = tuple(o for o in t.offerings if o.available and o.price is not None)
        if offerings:
            types.append(dataclasses.replace(t, offerings=offerings))
    return dataclasses.replace(catalog, types=tuple(types), regional=False, zones=(),
                               source=f"{catalog.source}, available offerings only")


def kwok_instance_types(catalog: cat.Catalog) -> list[dict[str, Any]]:
    """The catalog in the instance-types file format of sigs.k8s.io/karpenter/kwok (kwok/cloudprovider)."""
    def requirement(key: str, value: str) -> dict[str, Any]:
        return {"key": key, "operator": "In", "values": [value]}

    return [{"name": t.name,
             "architecture": t.labels.get("kubernetes.io/arch", "amd64"),
             "operatingSystems": [t.labels.get("kubernetes.io/os", "linux")],
             "resources": dict(t.capacity),
             "offerings": [{"Price": o.price, "Available": o.available,
                            "Requirements": [requirement(reqs.CAPACITY_TYPE, o.capacity_type),
                                             requirement(reqs.ZONE, o.zone)]}
                           for o in t.offerings]}
            for t in catalog.types]


def file_prices(instance_types: list[dict[str, Any]]) -> dict[Cell, float]:
    """The cells of a KWOK instance-types file and their prices, read back from the file itself."""
    out: dict[Cell, float] = {}
    for t in instance_types:
        for o in t["offerings"]:
            values = {r["key"]: r["values"][0] for r in o["Requirements"]}
            out[(t["name"], values[reqs.ZONE], values[reqs.CAPACITY_TYPE])] = float(o["Price"])
    return out


def kwok_pool(name: str, labels: Mapping[str, str] | None = None, *, test: str = "") -> dict[str, Any]:
    """The suite's realistic NodePool, for this cluster's provider: the KWOKNodeClass, and none of the AWS
    provider's requirement keys (KWOK's instance types do not define them)."""
    pool = nodepool(name, labels, test=test)
    template = pool["spec"]["template"]["spec"]
    template["nodeClassRef"] = copy.deepcopy(NODE_CLASS_REF)
    template["requirements"] = [r for r in template["requirements"] if not r["key"].startswith("karpenter.k8s.aws/")]
    return pool


def offerings_of(exposition: str) -> dict[str, dict[Cell, float]]:
    """The samples of the two offering gauges, by metric name and cell, read raw (prometheus_client's parser, not
    the metrics reader under test, which drops and merges what these tests look at)."""
    out: dict[str, dict[Cell, float]] = {AVAILABLE: {}, PRICE: {}}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            if sample.name in out:
                labels = sample.labels
                out[sample.name][(labels["instance_type"], labels["zone"], labels["capacity_type"])] = sample.value
    return out


class Karpenter:
    """One karpenter-kwok process on the control plane; its ports stay fixed across restarts."""

    def __init__(self, plane: ControlPlane, binary: Path, types_file: Path) -> None:
        self.plane = plane
        self.binary = binary
        self.types_file = types_file
        self.metrics_port = _cluster.free_port()
        self.health_port = _cluster.free_port()
        while self.health_port == self.metrics_port:
            self.health_port = _cluster.free_port()
        self.log_path = plane.log_dir / "karpenter.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def metrics_url(self) -> str:
        return f"http://{LOOPBACK}:{self.metrics_port}/metrics"

    def env(self) -> dict[str, str]:
        return {"KUBECONFIG": str(self.plane.kubeconfig), "FEATURE_GATES": "NodeOverlay=true",
                "INSTANCE_TYPES_FILE_PATH": str(self.types_file), "DISABLE_LEADER_ELECTION": "true",
                "METRICS_PORT": str(self.metrics_port), "HEALTH_PROBE_PORT": str(self.health_port),
                "SYSTEM_NAMESPACE": "kube-system", "LOG_LEVEL": "info",
                # The AWS provider's packages register its options too, and those require a cluster name.
                "CLUSTER_NAME": "e2e"}

    def start(self) -> None:
        self.proc = _cluster._spawn([str(self.binary)], self.log_path, self.env())
        _cluster._wait_until(self._ready, self.proc, "karpenter-kwok", self.log_path, READY_TIMEOUT)

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{LOOPBACK}:{self.health_port}/readyz", timeout=2) as resp:
                return bool(resp.status == 200)
        except (OSError, http.client.HTTPException):
            return False

    def stop(self) -> None:
        _cluster._stop(self.proc)

    def restart(self) -> None:
        self.stop()
        self.start()

    def exposition(self) -> str:
        with urllib.request.urlopen(self.metrics_url, timeout=10) as resp:
            return str(resp.read().decode())

    def offerings(self) -> dict[str, dict[Cell, float]]:
        return offerings_of(self.exposition())

    def tail(self, lines: int = 30) -> str:
        return _cluster.log_tail(self.log_path, lines)


def conditions(plane: ControlPlane) -> dict[str, tuple[str, str] | None]:
    """Each NodeOverlay's ValidationSucceeded (status, reason) as Karpenter wrote it for the overlay's current
    generation; None where it has not yet."""
    got = json.loads(plane.kubectl("get", "nodeoverlays", "-o", "json").stdout)
    out: dict[str, tuple[str, str] | None] = {}
    for item in got["items"]:
        found = [c for c in (item.get("status") or {}).get("conditions") or []
                 if c.get("type") == "ValidationSucceeded"
                 and c.get("observedGeneration") == item["metadata"]["generation"]]
        out[item["metadata"]["name"]] = (found[0]["status"], found[0]["reason"]) if found else None
    return out


def predicted(plane: ControlPlane, catalog_file: Path) -> dict[str, str]:
    """Each NodeOverlay's status as the guard predicts it: `overlay-lint simulate --cluster --format json` on the
    cluster's objects and the catalog Karpenter was given."""
    done = subprocess.run(
        [sys.executable, "-m", "lint", "simulate", "--cluster", "--kubeconfig", str(plane.kubeconfig),
         "--catalog", str(catalog_file), "--format", "json"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, env=_cluster._child_env())
    if done.returncode != 0:
        raise ControlPlaneError(f"overlay-lint simulate exited {done.returncode}:\n{done.stderr}")
    return {name: str(o["status"]) for name, o in json.loads(done.stdout)["overlays"].items()}


def agree(plane: ControlPlane, karpenter: Karpenter, catalog_file: Path, names: set[str],
          timeout: float = RECONCILE_TIMEOUT) -> dict[str, str]:
    """Until Karpenter's condition on each of `names` is the one the guard predicts; returns the prediction.
    The prediction is taken once, on the objects as they stand, and the condition polled within `timeout`."""
    status = {n: s for n, s in predicted(plane, catalog_file).items() if n in names}
    assert set(status) == names, f"the guard predicted {sorted(status)}, not {sorted(names)}"
    want = {n: CONDITION[s] for n, s in status.items()}
    deadline = time.monotonic() + timeout
    got: dict[str, tuple[str, str] | None] = {}
    while time.monotonic() < deadline:
        got = {n: c for n, c in conditions(plane).items() if n in names}
        if got == want:
            return status
        time.sleep(0.5)
    raise AssertionError(f"Karpenter's ValidationSucceeded differs from the guard's prediction after {timeout:g} s:\n"
                         f"guard:     {want}\nkarpenter: {got}\nkarpenter log tail:\n{karpenter.tail()}")


def install_node_class(plane: ControlPlane) -> None:
    """The KWOKNodeClass CRD (which Karpenter's controllers watch) and the node class the NodePools name."""
    crd = tools.karpenter_kwok().parent / "crds" / "karpenter.kwok.sh_kwoknodeclasses.yaml"
    plane.kubectl("apply", "--server-side", "-f", str(crd))
    plane.kubectl("wait", "--for=condition=Established", "crd/kwoknodeclasses.karpenter.kwok.sh", "--timeout=60s")
    node_class = {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass",
                  "metadata": {"name": NODE_CLASS}, "spec": {}}
    plane.kubectl("apply", "-f", "-", input=json.dumps(node_class))
