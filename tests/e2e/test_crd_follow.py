"""The webhook judges by the NodeOverlay CRD the cluster runs (webhook/crdwatch.py): started on Karpenter's
own, it refuses `dynamicResources` as the API server does; after docs/webhook.md's DRA opt-in is applied it
judges the same overlay by the extended schema, without a restart. With the deployment's RBAC it may read
the CRD; without it, it judges by the embedded CRD after one warning."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from . import _crds
from ._cluster import REPO_ROOT
from ._guard import Guard, Webhook, forge, overlay, unique

# Where the webhook keeps its Leases outside a pod (webhook.audit.pod_namespace), as the session fixture creates it.
LEDGER_NAMESPACE = "overlay-guard"

pytestmark = pytest.mark.e2e

GPU = {"resourceSliceTemplates": [{"metadata": {"name": "gpu-slice"}, "spec": {
    "driver": "gpu.nvidia.com",
    "devices": [{"name": "gpu-0", "attributes": {"productName": {"string": "H100"}}}]}}]}


def _codes(response: dict[str, Any]) -> set[tuple[str, str]]:
    rows = json.loads(response.get("auditAnnotations", {}).get("findings", "[]"))
    return {(row["code"], row["field"]) for row in rows}


def _generation(hook: Webhook) -> float:
    return hook.metric("overlay_guard_crd_generation", source="cluster")


def test_the_webhook_follows_the_crd_the_cluster_runs(guard: Guard, crds: _crds.Crds, label: str) -> None:
    # Its own process, never routed to: the reviews go straight to its port, so the API server's own
    # refusal of dynamicResources under Karpenter's CRD does not hide the webhook's verdict.
    hook = guard.spawn(unique("crd-follow"))
    try:
        hook.wait_crd()
        pid = hook.proc.pid if hook.proc is not None else None
        candidate = overlay(unique("e2e-crd-follow"), unique("e2e-dra-pool"), family="p5", test=label,
                            dynamicResources=GPU)
        on_karpenter = forge(hook, candidate)
        karpenter_generation = _generation(hook)

        crds.use(_crds.DRA)
        hook.wait_crd()
        on_dra = forge(hook, candidate)

        assert on_karpenter["allowed"] is False, on_karpenter
        assert ("schema", "spec.dynamicResources") in _codes(on_karpenter), on_karpenter
        assert on_dra["allowed"] is True, on_dra
        assert not any(code == "schema" for code, _ in _codes(on_dra)), on_dra
        assert _generation(hook) > karpenter_generation
        assert hook.running and hook.proc is not None and hook.proc.pid == pid
        swaps = [e for e in hook.events("judging by the cluster's NodeOverlay CRD")]
        assert [e["dynamicResources"] for e in swaps] == [False, True], swaps
    finally:
        # Karpenter's CRD back for the other tests, with the session's webhook following it.
        crds.use(_crds.KARPENTER)
        guard.webhook.wait_crd()
        hook.stop()


def _service_account_kubeconfig(guard: Guard, name: str, rules: list[dict[str, Any]], directory: Path) -> Path:
    """A kubeconfig for a fresh ServiceAccount bound to a ClusterRole with `rules` (what a pod of the
    deployment gets), so the API server's RBAC decides what the webhook may read."""
    plane = guard.plane
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
               "subjects": [{"kind": "ServiceAccount", "name": "guard", "namespace": name}]}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
            "rules": rules}
    plane.kubectl("create", "namespace", name)
    plane.kubectl("create", "serviceaccount", "guard", "-n", name)
    # The deployment's Role in the guard's namespace too: without its Leases the ledger is unusable and the
    # webhook never ready.
    lease_role = {**_deployed(guard, "Role", "overlay-guard"),
                  "metadata": {"name": name, "namespace": LEDGER_NAMESPACE}}
    lease_binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                     "metadata": {"name": name, "namespace": LEDGER_NAMESPACE},
                     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                     "subjects": binding["subjects"]}
    plane.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                        "items": [role, binding, lease_role, lease_binding]}))
    token = plane.kubectl("create", "token", "guard", "-n", name, "--duration=1h").stdout.strip()
    config = json.loads(plane.kubeconfig.read_text())
    config["users"] = [{"name": name, "user": {"token": token}}]
    config["contexts"][0]["context"]["user"] = name
    path = directory / f"{name}.kubeconfig"
    path.write_text(json.dumps(config))
    return path


def _deployed(guard: Guard, kind: str, name: str) -> dict[str, Any]:
    docs = YAML(typ="safe", pure=True).load_all(guard.plane.kubectl("kustomize", str(REPO_ROOT / "manifests")).stdout)
    return next(d for d in docs if isinstance(d, dict) and d.get("kind") == kind
                and d.get("metadata", {}).get("name") == name)


def _deployed_rules(guard: Guard) -> list[dict[str, Any]]:
    return list(_deployed(guard, "ClusterRole", "overlay-guard")["rules"])


@pytest.mark.parametrize("crd_rule", [True, False], ids=["deployed-rbac", "without-crd-rbac"])
def test_the_deployed_rbac_lets_the_webhook_follow_the_crd(guard: Guard, crds: _crds.Crds, tmp_path: Path,
                                                           crd_rule: bool) -> None:
    """As the deployment's ClusterRole allows it (resourceNames, so the list and watch go by field selector);
    without that rule, Karpenter's own (embedded) with one warning, and ready all the same."""
    name = unique("e2e-crd-rbac")
    rules = [r for r in _deployed_rules(guard) if crd_rule or "customresourcedefinitions" not in r["resources"]]
    assert len(rules) == len(_deployed_rules(guard)) - (0 if crd_rule else 1)
    kubeconfig = _service_account_kubeconfig(guard, name, rules, tmp_path)
    try:
        # The later --kubeconfig wins: the ServiceAccount's, not the admin's.
        hook = guard.spawn(name, extra_args=("--kubeconfig", str(kubeconfig), "--audit-interval", "0"))
        try:
            hook.wait_crd()
            refused = hook.events("cannot read the NodeOverlay CRD; judging by Karpenter's own, embedded")
            if crd_rule:
                assert _generation(hook) >= 1 and refused == []
            else:
                assert hook.metric("overlay_guard_crd_generation", source="embedded") == 0
                assert 'source="embedded"' in hook.metrics()
                assert [e.get("status") for e in refused] == [403]
        finally:
            hook.stop()
    finally:
        guard.plane.kubectl("delete", f"clusterrolebinding/{name}", f"clusterrole/{name}", f"namespace/{name}",
                            "--ignore-not-found", "--wait=false")
        guard.plane.kubectl("delete", "-n", LEDGER_NAMESPACE, f"rolebinding/{name}", f"role/{name}",
                            "--ignore-not-found")
