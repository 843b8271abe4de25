"""overlay-guard deployed onto the e2e control plane.

Karpenter's own CRDs are installed with kubectl (tests/e2e/_crds.py), the certificates come from
`python -m certs`, the webhook runs
as `python -m webhook` processes on loopback, and it is registered by URL with the configurations
of manifests/ as `kubectl kustomize` renders them (clientConfig.service swapped for a url, nothing
else changed).
"""

from __future__ import annotations

import contextlib
import copy
import http.client
import json
import re
import ssl
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ruamel.yaml import YAML

from . import _cluster
from ._cluster import LOOPBACK, REPO_ROOT, ControlPlane, ControlPlaneError

CONFIG_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
CONFIG_NAME = "overlay-guard"
ANNOTATIONS = "overlay-guard.io/"
# Every test labels what it creates with this key so its teardown can delete exactly that.
TEST_LABEL = "e2e.overlay-guard.io/test"
WEBHOOK_READY_TIMEOUT = 60.0
# A webhook follows a CRD change through its watch, then compiles the CRD and rebuilds its snapshot.
CRD_FOLLOW_TIMEOUT = 60.0
# The API server picks webhook configurations up through its own informer; seconds at most.
EFFECTIVE_TIMEOUT = 30.0
# Matches no NodePool any test creates, so the probe never conflicts with anything.
_PROBE_POOL = "e2e-probe-matches-nothing"


def unique(prefix: str) -> str:
    # One cluster serves the whole session; names must never collide between tests.
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


# --- objects ---------------------------------------------------------------------------------------

# What operators put in a NodePool beside what the guard reads, in the shape Karpenter's CRD requires.
_POOL_TEMPLATE_SPEC: dict[str, Any] = {
    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
    "requirements": [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "spot"]},
        {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["4"]},
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r", "p"],
         "minValues": 2}],
    "taints": [{"key": "e2e.overlay-guard.io/dedicated", "value": "batch", "effect": "NoSchedule"}],
    "expireAfter": "720h"}
_POOL_SPEC: dict[str, Any] = {
    "limits": {"cpu": "1000", "memory": "4000Gi"},
    "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "5m",
                   "budgets": [{"nodes": "10%"}]}}


def realistic(pool: dict[str, Any]) -> dict[str, Any]:
    """`pool` with a node class reference, requirements with Gt, limits, disruption and a taint added
    (its own labels, weight and requirements kept). The guard reads only name, weight and template
    labels; NodePool requirements do not narrow the cells (docs/design.md §4.1)."""
    spec = pool.setdefault("spec", {})
    template = spec.setdefault("template", {}).setdefault("spec", {})
    for key, value in _POOL_TEMPLATE_SPEC.items():
        if key == "requirements":
            template["requirements"] = [*template.get("requirements", []), *copy.deepcopy(value)]
        else:
            template.setdefault(key, copy.deepcopy(value))
    for key, value in _POOL_SPEC.items():
        spec.setdefault(key, copy.deepcopy(value))
    return pool


def nodepool(name: str, labels: Mapping[str, str] | None = None, *, test: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if test:
        meta["labels"] = {TEST_LABEL: test}
    template: dict[str, Any] = {"spec": {"requirements": [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}]}}
    if labels:
        template["metadata"] = {"labels": dict(labels)}
    return realistic({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": meta,
                      "spec": {"template": template}})


def overlay(name: str, pool: str | None, *, weight: int | None = 10, family: str = "m5",
            requirements: Sequence[Mapping[str, Any]] = (), test: str = "", **spec: Any) -> dict[str, Any]:
    """A NodeOverlay scoped to one NodePool (so tests sharing the cluster never meet) and one
    instance family; `spec` adds fields such as price, priceAdjustment or capacity."""
    reqs: list[Mapping[str, Any]] = []
    if pool is not None:
        reqs.append({"key": "karpenter.sh/nodepool", "operator": "In", "values": [pool]})
    reqs.append({"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": [family]})
    reqs.extend(requirements)
    body: dict[str, Any] = {"requirements": reqs, **spec}
    if weight is not None:
        body["weight"] = weight
    meta: dict[str, Any] = {"name": name}
    if test:
        meta["labels"] = {TEST_LABEL: test}
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": meta, "spec": body}


def as_input(*objects: Mapping[str, Any]) -> str:
    # JSON is YAML, and a List lets one kubectl call carry several objects.
    if len(objects) == 1:
        return json.dumps(objects[0])
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})


def apply(plane: ControlPlane, *objects: Mapping[str, Any], args: Sequence[str] = (),
          check: bool = False) -> subprocess.CompletedProcess[str]:
    """`kubectl apply -f -` as a user types it; the caller asserts on the outcome."""
    return plane.kubectl("apply", "-f", "-", *args, input=as_input(*objects), check=check)


def annotations_of(plane: ControlPlane, name: str) -> dict[str, str]:
    got = json.loads(plane.kubectl("get", "nodeoverlay", name, "-o", "json").stdout)
    return dict(got["metadata"].get("annotations") or {})


def exists(plane: ControlPlane, kind: str, name: str) -> bool:
    done = plane.kubectl("get", kind, name, "-o", "name", check=False)
    if done.returncode != 0 and "NotFound" not in done.stderr:
        raise _cluster.KubectlError(done.returncode, ["kubectl", "get", kind, name], done.stdout, done.stderr)
    return done.returncode == 0


def delete_labelled(plane: ControlPlane, test: str) -> None:
    plane.kubectl("delete", "nodeoverlays,nodepools", "-l", f"{TEST_LABEL}={test}", "--ignore-not-found",
                  "--wait=false")


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = probe()
        if got:
            return got
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


def events_about(guard: Guard, names: set[str]) -> list[dict[str, Any]]:
    """The guard's events on these objects as `kubectl get events` lists them."""
    got = json.loads(guard.plane.kubectl("get", "events", "-n", "default", "-o", "json").stdout)
    return [e for e in got["items"] if e["involvedObject"].get("name") in names
            and e.get("reportingComponent") == "overlay-guard.io/audit"]


# --- certificates and configurations -----------------------------------------------------------------

@dataclass(frozen=True)
class Certs:
    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def cert(self) -> Path:
        return self.directory / "tls.crt"

    @property
    def key(self) -> Path:
        return self.directory / "tls.key"


def issue_certs(directory: Path) -> Certs:
    """The project's own generator: a CA and a serving certificate whose SANs include 127.0.0.1."""
    done = subprocess.run(
        [sys.executable, "-m", "certs", "--out", str(directory), "--base", str(REPO_ROOT / "manifests")],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise ControlPlaneError(f"python -m certs failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return Certs(directory)


def webhook_configurations(plane: ControlPlane, certs: Certs, base_url: str) -> list[dict[str, Any]]:
    """The deployable configurations (manifests/ plus the caBundle python -m certs injects), with
    each webhook's service reference replaced by a URL on `base_url` and the service's path."""
    rendered = plane.kubectl("kustomize", str(certs.directory)).stdout
    docs = [d for d in YAML(typ="safe", pure=True).load_all(rendered)
            if isinstance(d, dict) and d.get("kind") in CONFIG_KINDS]
    if sorted(d["kind"] for d in docs) != sorted(CONFIG_KINDS):
        raise ControlPlaneError(
            f"kubectl kustomize {certs.directory} rendered {len(docs)} webhook configurations")
    for doc in docs:
        for hook in doc["webhooks"]:
            client = hook["clientConfig"]
            if "caBundle" not in client:
                raise ControlPlaneError(f"{doc['kind']} webhook {hook['name']} has no caBundle")
            service = client.pop("service")
            client["url"] = base_url + service.get("path", "/")
    return docs


# --- webhook processes --------------------------------------------------------------------------------

class Served:
    """A process serving HTTPS on a loopback port with the guard's certificate (its port stays fixed across
    stop/start), logging to the plane's log directory."""

    def __init__(self, plane: ControlPlane, certs: Certs, name: str) -> None:
        self.plane = plane
        self.certs = certs
        self.name = name
        self.port = _cluster.free_port()
        self.log_path = plane.log_dir / f"webhook-{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._tls = ssl.create_default_context(cafile=str(certs.ca))

    @property
    def url(self) -> str:
        return f"https://{LOOPBACK}:{self.port}"

    def stop(self) -> None:
        _cluster._stop(self.proc)


class Webhook(Served):
    """One overlay-webhook process on loopback."""

    def __init__(self, plane: ControlPlane, certs: Certs, name: str, *, mode: str = "enforce",
                 launcher: Sequence[str] = ("-m", "webhook"), extra_args: Sequence[str] = ()) -> None:
        super().__init__(plane, certs, name)
        self.mode = mode
        self.launcher = tuple(launcher)
        self.extra_args = tuple(extra_args)
        self.metrics_port = _cluster.free_port()
        while self.metrics_port == self.port:  # the kernel may hand a just-released port out again
            self.metrics_port = _cluster.free_port()

    def argv(self) -> list[str]:
        return [sys.executable, *self.launcher, "--kubeconfig", str(self.plane.kubeconfig),
                "--host", LOOPBACK, "--port", str(self.port), "--metrics-port", str(self.metrics_port),
                "--tls-cert-file", str(self.certs.cert), "--tls-private-key-file", str(self.certs.key),
                "--mode", self.mode, *self.extra_args]

    def start(self) -> None:
        self.proc = _cluster._spawn(self.argv(), self.log_path)
        self.wait_ready()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def readyz(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/readyz", timeout=2, context=self._tls) as resp:
                return bool(resp.status == 200)
        except (OSError, http.client.HTTPException):
            return False

    def wait_ready(self, timeout: float = WEBHOOK_READY_TIMEOUT) -> None:
        assert self.proc is not None
        _cluster._wait_until(self.readyz, self.proc, f"webhook {self.name}", self.log_path, timeout)

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{self.metrics_port}/metrics", timeout=5) as resp:
            return str(resp.read().decode())

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of `name` whose labels include `labels`."""
        total = 0.0
        for line in self.metrics().splitlines():
            m = re.match(r"^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)$", line)
            if not m or m.group(1) != name:
                continue
            found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
            if all(found.get(k) == v for k, v in labels.items()):
                total += float(m.group(3))
        return total

    def admissions(self) -> float:
        return self.metric("overlay_guard_admission_requests_total")

    def wait_crd(self, timeout: float = CRD_FOLLOW_TIMEOUT) -> None:
        """Until a webhook that follows the cluster's NodeOverlay CRD judges by its current generation (one
        given --crd, or a build from before the CRD was followed, such as an older image, returns at once)."""
        deadline = time.monotonic() + timeout
        wanted = -1
        while time.monotonic() < deadline:
            gauge = [line for line in self.metrics().splitlines() if line.startswith("overlay_guard_crd_generation{")]
            if not any('source="cluster"' in line for line in gauge):
                return
            crd = self.plane.kubectl("get", "crd", "nodeoverlays.karpenter.sh", "-o", "json", check=False)
            wanted = int(json.loads(crd.stdout)["metadata"]["generation"]) if crd.returncode == 0 else 0
            if self.metric("overlay_guard_crd_generation", source="cluster") == wanted:
                return
            time.sleep(0.2)
        raise ControlPlaneError(f"webhook {self.name} never judged by generation {wanted} of the NodeOverlay CRD")

    def events(self, msg: str | None = None) -> list[dict[str, Any]]:
        """The JSON log lines (all processes that wrote this log), optionally one message only."""
        out = []
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return []
        for line in text.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and (msg is None or event.get("msg") == msg):
                out.append(event)
        return out

    def tail(self, lines: int = 30) -> str:
        return _cluster.log_tail(self.log_path, lines)


class Endpoint(Protocol):
    """What the API server can be routed to: one webhook, or a proxy in front of several."""

    name: str

    @property
    def url(self) -> str: ...

    def admissions(self) -> float: ...


E = TypeVar("E", bound=Endpoint)


class Guard:
    """The main webhook, its registration, and any extra webhooks a scenario starts."""

    def __init__(self, plane: ControlPlane, certs: Certs) -> None:
        self.plane = plane
        self.certs = certs
        self.webhook = Webhook(plane, certs, "main")
        self.extra: list[Webhook] = []
        self._configs: dict[str, Path] = {}

    def spawn(self, name: str, **kwargs: Any) -> Webhook:
        hook = Webhook(self.plane, self.certs, name, **kwargs)
        self.extra.append(hook)
        hook.start()
        return hook

    def logs(self) -> list[Path]:
        return [h.log_path for h in (self.webhook, *self.extra)]

    def _config_file(self, hook: Endpoint) -> Path:
        path = self._configs.get(hook.url)
        if path is None:
            docs = webhook_configurations(self.plane, self.certs, hook.url)
            path = self.plane.workdir / f"webhook-configurations-{hook.name}.json"
            path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}, indent=1))
            self._configs[hook.url] = path
        return path

    def route_to(self, hook: Endpoint) -> None:
        """Register `hook` by URL and return once the API server calls it."""
        self.plane.kubectl("apply", "-f", str(self._config_file(hook)))
        self.wait_effective(hook)

    def unregister(self) -> None:
        names = (f"{kind.lower()}/{CONFIG_NAME}" for kind in CONFIG_KINDS)
        self.plane.kubectl("delete", *names, "--ignore-not-found")
        self.wait_effective(None)

    @contextlib.contextmanager
    def routed_to(self, hook: E) -> Iterator[E]:
        self.route_to(hook)
        try:
            yield hook
        finally:
            self.route_to(self.webhook)

    @contextlib.contextmanager
    def unregistered(self) -> Iterator[None]:
        self.unregister()
        try:
            yield
        finally:
            self.route_to(self.webhook)

    def probe(self, pool: str = _PROBE_POOL) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
        """A dry-run apply of a harmless overlay; returns kubectl's result and the annotations the
        mutating webhook (if any was called) put on it."""
        obj = overlay("e2e-probe", pool, weight=None, capacity={"example.com/probe": "1"})
        done = apply(self.plane, obj, args=("--dry-run=server", "-o", "json"))
        notes: dict[str, str] = {}
        if done.returncode == 0:
            notes = dict(json.loads(done.stdout)["metadata"].get("annotations") or {})
        return done, notes

    def wait_effective(self, hook: Endpoint | None) -> None:
        """Until a probe is answered by `hook` (or, for None, by no webhook at all)."""
        deadline = time.monotonic() + EFFECTIVE_TIMEOUT
        last = ""
        while time.monotonic() < deadline:
            before = hook.admissions() if hook is not None else 0.0
            done, notes = self.probe()
            called = any(k.startswith(ANNOTATIONS) for k in notes)
            if hook is None and done.returncode == 0 and not called:
                return
            if hook is not None and called and hook.admissions() > before:
                return
            last = done.stderr or json.dumps(notes)
            time.sleep(0.2)
        target = "no webhook" if hook is None else f"webhook {hook.name} ({hook.url})"
        raise ControlPlaneError(f"registration never took effect for {target}; last probe: {last}")

    def wait_pool_visible(self, pool: str, timeout: float = 30.0, times: int = 6) -> None:
        """Until the routed webhook's snapshot knows NodePool `pool` (an overlay scoped to it
        matches cells): a verdict taken earlier would see an empty pool and no conflict. `times`
        probes in a row, so that behind a round-robin proxy every replica has it."""
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            done, notes = self.probe(pool)
            seen = seen + 1 if done.returncode == 0 and notes.get(ANNOTATIONS + "cells-matched", "0") != "0" else 0
            if seen >= times:
                return
            if not seen:
                time.sleep(0.2)
        raise AssertionError(f"the webhook never saw NodePool {pool}")

    def new_pool(self, test: str, labels: Mapping[str, str] | None = None) -> str:
        """A fresh NodePool the routed webhook already knows about."""
        name = unique("e2e-pool")
        done = apply(self.plane, nodepool(name, labels, test=test))
        if done.returncode != 0:
            raise AssertionError(f"NodePool {name} refused:\n{done.stderr}")
        self.wait_pool_visible(name)
        return name

    def stop_all(self) -> None:
        for hook in (*self.extra, self.webhook):
            hook.stop()


def forge(hook: Webhook, obj: dict[str, Any], context: ssl.SSLContext | None = None) -> dict[str, Any]:
    """An AdmissionReview (CREATE, not a dry run) POSTed straight to the webhook's port, as any
    pod that can reach it could."""
    gvk = {"group": "karpenter.sh", "version": "v1alpha1", "kind": "NodeOverlay"}
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "kind": gvk, "resource": {**gvk, "resource": "nodeoverlays"},
        "name": obj["metadata"]["name"], "operation": "CREATE", "object": obj, "dryRun": False,
        "userInfo": {"username": "system:serviceaccount:default:attacker"}}}
    req = urllib.request.Request(hook.url + "/validate", data=json.dumps(review).encode(),
                                 headers={"Content-Type": "application/json"})
    ctx = context or ssl.create_default_context(cafile=str(hook.certs.ca))
    with urllib.request.urlopen(req, timeout=10, context=ctx) as resp:
        return dict(json.load(resp)["response"])
