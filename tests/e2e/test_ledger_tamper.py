"""Issue 39 against the real kube-apiserver: a namespace `edit` user edits, corrupts and deletes the admissions
ledger's Lease. The guard runs as the manifests run it (ServiceAccount overlay-guard with the base's RBAC, in a
namespace of its own). With the base's ValidatingAdmissionPolicy bound, the user's writes are refused and the
guard's own pass; without it, admissions recover within 10 s of each tamper, and no conflicting pair is admitted
while records are being wiped."""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from webhook import ledger as lg

from . import _cluster
from ._cluster import ControlPlane
from ._guard import Guard, Webhook, apply, overlay, unique, wait_for

pytestmark = pytest.mark.e2e

BASE = Path(__file__).resolve().parents[2] / "manifests" / "base"
USER = "e2e-mallory"
# Issue 39: admissions recover within this many seconds of a tamper.
RECOVERY = 10.0
# One instance family a round, so that a round's overlays meet only each other.
RACE_FAMILIES = ("m5", "c5", "r5", "m6i", "c6i", "r6i")


class AsServiceAccount(Webhook):
    """The webhook with its ledger in `namespace` and, given a kubeconfig, a ServiceAccount's token instead of the
    control plane's admin certificate."""

    def __init__(self, plane: ControlPlane, certs: Any, name: str, kubeconfig: Path | None, namespace: str) -> None:
        super().__init__(plane, certs, name, extra_args=("--leader-election-namespace", namespace,
                                                         "--audit-interval", "0"))
        self.kubeconfig = kubeconfig

    def argv(self) -> list[str]:
        argv = super().argv()
        if self.kubeconfig is not None:
            argv[argv.index("--kubeconfig") + 1] = str(self.kubeconfig)
        return argv

    def spawn(self) -> None:
        """Started, without waiting for /readyz."""
        self.proc = _cluster._spawn(self.argv(), self.log_path)


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in YAML(typ="safe", pure=True).load_all(path.read_text()) if d]


def _kubectl_apply(plane: ControlPlane, docs: list[dict[str, Any]]) -> None:
    plane.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))


def _guard_rbac(namespace: str, suffix: str) -> list[dict[str, Any]]:
    """manifests/base/rbac.yaml for a guard in `namespace`: cluster-scoped objects and the events Role renamed so
    that the session's other guards keep theirs; the live catalog's grant left out (no Karpenter here)."""
    out = []
    for doc in _docs(BASE / "rbac.yaml"):
        doc = copy.deepcopy(doc)
        meta = doc["metadata"]
        if meta["name"].endswith("-karpenter-metrics"):
            continue
        if meta.get("namespace") == "overlay-guard":
            meta["namespace"] = namespace
        if doc["kind"].startswith("Cluster") or meta["name"].endswith("-events"):
            meta["name"] = f"{meta['name']}-{suffix}"
        if "roleRef" in doc and (doc["kind"].startswith("Cluster") or meta["name"].endswith(f"-events-{suffix}")):
            doc["roleRef"]["name"] = f"{doc['roleRef']['name']}-{suffix}"
        for subject in doc.get("subjects", ()):
            subject["namespace"] = namespace
        out.append(doc)
    return out


def _lease_policy(namespace: str, suffix: str) -> list[dict[str, Any]]:
    """manifests/base/lease-policy.yaml for a guard in `namespace`."""
    policy, binding = (copy.deepcopy(d) for d in _docs(BASE / "lease-policy.yaml"))
    name = f"{policy['metadata']['name']}-{suffix}"
    policy["metadata"]["name"] = binding["metadata"]["name"] = binding["spec"]["policyName"] = name
    policy["spec"]["matchConstraints"]["namespaceSelector"]["matchLabels"] = {"kubernetes.io/metadata.name": namespace}
    return [policy, binding]


def _token_kubeconfig(plane: ControlPlane, namespace: str, path: Path) -> Path:
    token = plane.kubectl("create", "token", "overlay-guard", "-n", namespace, "--duration", "2h").stdout.strip()
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {"server": plane.server,
                                                 "certificate-authority": str(plane.pki.ca_cert)}}],
        "users": [{"name": "overlay-guard", "user": {"token": token}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "overlay-guard"}}],
        "current-context": "e2e"}))
    return path


class Setup:
    def __init__(self, guard: Guard, namespace: str, hook: AsServiceAccount, policy: list[dict[str, Any]],
                 suffix: str) -> None:
        self.guard, self.namespace, self.hook, self.policy, self.suffix = guard, namespace, hook, policy, suffix

    @property
    def plane(self) -> ControlPlane:
        return self.guard.plane

    def as_user(self, *args: str) -> Any:
        return self.plane.kubectl("--as", USER, "-n", self.namespace, *args, check=False)

    def lease(self) -> dict[str, Any] | None:
        done = self.plane.kubectl("get", "lease", lg.NAME, "-n", self.namespace, "-o", "json", check=False)
        return json.loads(done.stdout) if done.returncode == 0 else None

    def lease_text(self) -> str:
        lease = self.lease() or {}
        annotations = (lease.get("metadata") or {}).get("annotations") or {}
        return str(annotations.get(lg.ANNOTATION, '{"horizon":0,"records":[]}'))

    def write(self, body: str) -> Any:
        """The user's edit of the ledger's annotation."""
        return self.as_user("annotate", "lease", lg.NAME, f"{lg.ANNOTATION}={body}", "--overwrite")


@pytest.fixture(scope="module")
def setup(guard: Guard, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    plane = guard.plane
    suffix = unique("ledger")
    namespace = f"e2e-{suffix}"
    plane.kubectl("create", "namespace", namespace)
    _kubectl_apply(plane, _guard_rbac(namespace, suffix))
    # A namespace `edit` user; where `edit` does not reach Leases, a Role grants the writes the issue speaks of.
    plane.kubectl("create", "rolebinding", "mallory-edit", "--clusterrole=edit", f"--user={USER}", "-n", namespace)
    can = plane.kubectl("auth", "can-i", "update", "leases", "-n", namespace, "--as", USER, check=False)
    if can.stdout.strip() != "yes":
        plane.kubectl("create", "role", "lease-writer", "--verb=get,update,patch,delete,create", "--resource=leases",
                      "-n", namespace)
        plane.kubectl("create", "rolebinding", "mallory-leases", "--role=lease-writer", f"--user={USER}",
                      "-n", namespace)
    kubeconfig = _token_kubeconfig(plane, namespace, tmp_path_factory.mktemp("sa") / "kubeconfig.json")
    hook = AsServiceAccount(plane, guard.certs, "ledger-sa", kubeconfig, namespace)
    guard.extra.append(hook)
    hook.start()
    policy = _lease_policy(namespace, suffix)
    try:
        with guard.routed_to(hook):
            yield Setup(guard, namespace, hook, policy, suffix)
    finally:
        hook.stop()
        plane.kubectl("delete", "-f", "-", "--ignore-not-found", check=False,
                      input=json.dumps({"apiVersion": "v1", "kind": "List", "items": policy}))
        plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def _within(what: str, attempt: Callable[[], bool], limit: float = RECOVERY) -> float:
    """Seconds until `attempt` succeeds (tried again at once while it fails), failing past `limit`."""
    started = time.monotonic()
    while not attempt():
        if time.monotonic() - started > limit:
            raise AssertionError(f"{what}: not within {limit:g}s")
    return time.monotonic() - started


def _admitted(setup: Setup, obj: dict[str, Any]) -> Callable[[], bool]:
    return lambda: apply(setup.plane, obj).returncode == 0


def test_with_the_policy_only_the_guard_writes_the_ledger(setup: Setup, label: str) -> None:
    _kubectl_apply(setup.plane, setup.policy)
    pool = setup.guard.new_pool(label)
    assert apply(setup.plane, overlay(unique("e2e-vap-first"), pool, test=label, price="0.5")).returncode == 0
    assert setup.lease() is not None
    # The policy takes effect once the API server's informer has it: wait for the first refusal.
    _within("the policy refusing the user", lambda: setup.write('{"horizon":1,"records":[]}').returncode != 0,
            limit=30.0)
    done = setup.write('{"horizon":1000000000000,"records":[]}')
    assert done.returncode != 0 and "only the ServiceAccount overlay-guard" in done.stderr, done.stderr
    assert setup.as_user("delete", "lease", lg.NAME).returncode != 0
    # The guard's own writes still pass: the next admission records itself.
    assert apply(setup.plane, overlay(unique("e2e-vap-second"), pool, family="c5", test=label,
                                      price="0.5")).returncode == 0
    setup.plane.kubectl("delete", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                               "items": setup.policy}))
    _within("the policy gone", lambda: setup.write(setup.lease_text()).returncode == 0, limit=30.0)



def _phantom(pool: str, label: str, deadline: float) -> str:
    """A ledger holding one record of an overlay nobody is admitting, with `deadline`."""
    obj = overlay(unique("e2e-phantom"), pool, test=label, price="0.7")
    obj["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
    record = lg.record(obj, 0.0)
    body = json.loads(lg.text(lg.Ledger((record,))))
    body["records"][0]["t"] = deadline
    return json.dumps(body)


@pytest.mark.parametrize("tamper", ["horizon", "deadline-nan", "deadline-1e300", "deleted"])
def test_without_the_policy_admissions_recover_within_10s(setup: Setup, label: str, tamper: str,
                                                         record_property: Callable[[str, object], None]) -> None:
    pool = setup.guard.new_pool(label)
    assert apply(setup.plane, overlay(unique("e2e-before"), pool, family="r5", test=label, price="0.4")).returncode == 0
    candidate = overlay(unique("e2e-after"), pool, test=label, price="0.5")
    if tamper == "horizon":
        current = json.loads(setup.lease_text())
        done = setup.write(json.dumps({**current, "horizon": 10**12}))
    elif tamper == "deleted":
        done = setup.as_user("delete", "lease", lg.NAME)
    else:
        # A record that conflicts with the candidate, held "in flight" for ever as written.
        done = setup.write(_phantom(pool, label, float("nan") if tamper == "deadline-nan" else 1e300))
    assert done.returncode == 0, done.stderr
    seconds = _within(f"admitting after {tamper}", _admitted(setup, candidate))
    record_property("recoverySeconds", round(seconds, 2))
    assert seconds < RECOVERY
    assert setup.lease() is not None
    assert setup.hook.metric("overlay_guard_ledger_repairs_total") >= 1


def test_records_wiped_meanwhile_never_let_a_conflicting_pair_through(setup: Setup, label: str) -> None:
    pool = setup.guard.new_pool(label)
    stop = threading.Event()
    wipes = [0]

    def wipe() -> None:
        while not stop.is_set():
            if setup.write('{"horizon":0,"records":[]}').returncode == 0:
                wipes[0] += 1

    wiper = threading.Thread(target=wipe, daemon=True)
    wiper.start()
    admitted = 0
    try:
        for n, family in enumerate(RACE_FAMILIES):
            pair = [overlay(unique(f"e2e-race{n}"), pool, family=family, test=label, price=p) for p in ("0.5", "0.6")]
            with ThreadPoolExecutor(2) as threads:
                results = list(threads.map(lambda o: apply(setup.plane, o).returncode, pair))
            assert results.count(0) <= 1, f"round {n}: both admitted"
            admitted += results.count(0)
    finally:
        stop.set()
        wiper.join()
    assert wipes[0] > 0 and admitted > 0


@pytest.mark.parametrize("who", ["service-account", "admin"])
def test_a_ledger_it_cannot_use_keeps_it_unready_with_one_log_line_until_it_can(setup: Setup, who: str) -> None:
    """Row 9: the ledger's namespace missing. As the ServiceAccount, RBAC grants nothing there yet (a Role needs
    the namespace); as the admin, the namespace itself is what is missing. Fixed, the replica becomes ready."""
    namespace = unique("e2e-no-ledger")
    kubeconfig = setup.hook.kubeconfig if who == "service-account" else None
    hook = AsServiceAccount(setup.plane, setup.guard.certs, f"ledger-{who}", kubeconfig, namespace)
    setup.guard.extra.append(hook)
    hook.spawn()
    try:
        line = wait_for("the ledger's log line", lambda: next(
            (json.loads(x) for x in hook.log_path.read_text().splitlines()
             if "the admissions ledger cannot be used" in x), None), timeout=60.0)
        fields = json.dumps(line)
        assert namespace in fields and lg.NAME in fields
        assert ("get, create, update" if who == "service-account" else "does not exist") in fields
        assert not hook.readyz()
        assert hook.metric("overlay_guard_ledger_usable") == 0
        setup.plane.kubectl("create", "namespace", namespace)
        if who == "service-account":
            role = [d for d in _guard_rbac(namespace, setup.suffix) if d["kind"] in ("Role", "RoleBinding")
                    and d["metadata"]["namespace"] == namespace]
            for subject in (s for d in role for s in d.get("subjects", ())):
                subject["namespace"] = setup.namespace  # the ServiceAccount the token is of
            _kubectl_apply(setup.plane, role)
        hook.wait_ready()
        text = hook.log_path.read_text()
        assert text.count("the admissions ledger cannot be used") == 1
        assert "the admissions ledger can be read and written" in text
    finally:
        hook.stop()
        setup.plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
