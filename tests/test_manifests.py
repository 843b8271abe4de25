"""manifests/: `kubectl kustomize` renders the base, the cert-manager variant, the folder `python -m certs`
writes and the opt-in components; the rendered objects have the properties the webhook relies on, and
none of the default deployments installs a CRD (Karpenter owns them)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from certs import render
from tests import tools
from tests.e2e import _readme

ROOT = Path(__file__).resolve().parent.parent
MANIFESTS = ROOT / "manifests"
COMPONENTS = MANIFESTS / "components"
DRA_CRD = MANIFESTS / "crd" / "karpenter.sh_nodeoverlays.yaml"


def one(docs: list[dict[str, Any]], kind: str, name: str = "overlay-guard") -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name, [(d["kind"], d["metadata"]["name"]) for d in docs])
    return found[0]


@pytest.mark.tools
def test_base_renders_every_object() -> None:
    docs = tools.kustomize(MANIFESTS)
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    for kind in (
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "PodDisruptionBudget",
        "Service",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ):
        assert (kind, "overlay-guard") in kinds, kind
    assert {("ValidatingAdmissionPolicy", "overlay-guard-leases"),
            ("ValidatingAdmissionPolicyBinding", "overlay-guard-leases")} <= kinds


@pytest.mark.tools
def test_rbac_is_read_only_on_the_two_resources_their_crd_and_writes_only_its_leases() -> None:
    role = one(tools.kustomize(MANIFESTS), "ClusterRole")
    assert role["rules"] == [
        {
            "apiGroups": ["karpenter.sh"],
            "resources": ["nodeoverlays", "nodepools"],
            "verbs": ["get", "list", "watch"],
        },
        # The cluster's region from its Nodes' labels, read once at start.
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]},
        # The NodeOverlay CRD the webhook follows, and no other.
        {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
         "resourceNames": ["nodeoverlays.karpenter.sh"], "verbs": ["get", "list", "watch"]},
        # The admission chain's timeouts (webhook/chain.py).
        {"apiGroups": ["admissionregistration.k8s.io"], "resources": ["validatingwebhookconfigurations"],
         "verbs": ["list"]},
    ]
    # The audit's Lease and the admissions ledger: created in the guard's namespace, then only those two
    # read and replaced.
    lease = one(tools.kustomize(MANIFESTS), "Role")
    assert lease["metadata"]["namespace"] == "overlay-guard"
    assert lease["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
         "resourceNames": ["overlay-guard-audit", "overlay-guard-admissions"], "verbs": ["get", "update"]},
    ]
    assert one(tools.kustomize(MANIFESTS), "RoleBinding")["roleRef"]["kind"] == "Role"
    binding = one(tools.kustomize(MANIFESTS), "ClusterRoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "overlay-guard", "namespace": "overlay-guard"}
    ]
    # The audit's Events, only where it writes them: the default namespace.
    events = one(tools.kustomize(MANIFESTS), "Role", "overlay-guard-events")
    assert events["metadata"]["namespace"] == "default"
    assert events["rules"] == [{"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]}]
    events_binding = one(tools.kustomize(MANIFESTS), "RoleBinding", "overlay-guard-events")
    assert events_binding["metadata"]["namespace"] == "default"
    assert events_binding["subjects"] == binding["subjects"]


@pytest.mark.tools
def test_deployment_is_hardened_and_probed() -> None:
    docs = tools.kustomize(MANIFESTS)
    dep = one(docs, "Deployment")
    spec = dep["spec"]
    pod = spec["template"]["spec"]
    assert spec["replicas"] == 2
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"https": 9443, "metrics": 8080}
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        get = container[probe]["httpGet"]
        assert get == {"path": path, "port": "https", "scheme": "HTTPS"}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == render.SECRET and mounts["tls"]["readOnly"] is True
    args = " ".join(container["args"])
    tls_dir = mounts["tls"]["mountPath"]
    assert (
        f"--tls-cert-file={tls_dir}/tls.crt" in args and f"--tls-private-key-file={tls_dir}/tls.key" in args
    )
    # Graceful shutdown fits in the grace period: preStop sleep + --shutdown-timeout. The image has no
    # shell and no sleep binary, so an exec hook would fail and the pod would die mid-request.
    assert container["lifecycle"]["preStop"] == {"sleep": {"seconds": 5}}
    assert pod["terminationGracePeriodSeconds"] >= 5 + 25
    svc = one(docs, "Service")
    assert {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"} in svc["spec"]["ports"]
    assert svc["spec"]["selector"] == spec["selector"]["matchLabels"]
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1 and pdb["spec"]["selector"] == spec["selector"]


def _hooks(doc: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {h["rules"][0]["resources"][0]: h for h in doc["webhooks"]}


@pytest.mark.tools
def test_webhook_configurations() -> None:
    docs = tools.kustomize(MANIFESTS)
    for kind, path in (
        ("ValidatingWebhookConfiguration", "/validate"),
        ("MutatingWebhookConfiguration", "/mutate"),
    ):
        hooks = _hooks(one(docs, kind))
        assert set(hooks) == {"nodeoverlays", "nodepools"}
        assert hooks["nodeoverlays"]["failurePolicy"] == "Fail"
        assert hooks["nodepools"]["failurePolicy"] == "Ignore"
        for h in hooks.values():
            assert h["admissionReviewVersions"] == ["v1"] and h["sideEffects"] == "NoneOnDryRun"
            assert h["timeoutSeconds"] == 5 and h["matchPolicy"] == "Equivalent"
            assert h["clientConfig"]["service"] == {
                "name": "overlay-guard",
                "namespace": "overlay-guard",
                "path": path,
                "port": 443,
            }
            assert h["rules"][0]["apiGroups"] == ["karpenter.sh"]
            assert sorted(h["rules"][0]["operations"]) == ["CREATE", "UPDATE"]


def test_base_webhook_file_matches_the_renderer() -> None:
    text = (MANIFESTS / "base" / "webhook-configurations.yaml").read_text()
    on_disk = [d for d in YAML(typ="safe", pure=True).load_all(text) if d]
    assert on_disk == render.webhook_configurations(), (
        "regenerate: python -m certs --print-base-webhooks"
    )


@pytest.mark.tools
def test_cert_manager_variant() -> None:
    docs = tools.kustomize(MANIFESTS / "cert-manager")
    serving = one(docs, "Certificate", "overlay-guard-serving")
    assert serving["spec"]["secretName"] == render.SECRET
    assert "overlay-guard.overlay-guard.svc" in serving["spec"]["dnsNames"]
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        notes = one(docs, kind)["metadata"]["annotations"]
        assert notes["cert-manager.io/inject-ca-from"] == "overlay-guard/overlay-guard-serving"
    assert one(docs, "Issuer", "overlay-guard-ca")["spec"]["ca"]["secretName"] == "overlay-guard-ca"


@pytest.mark.tools
def test_certs_cli_output_deploys_with_ca_bundle(tmp_path: Path) -> None:
    out = _certs_dir(tmp_path, "guard-system")
    for name in (
        "ca.crt",
        "ca.key",
        "tls.crt",
        "tls.key",
        "secret.yaml",
        "webhook-configurations.yaml",
        "kustomization.yaml",
    ):
        assert (out / name).is_file(), name
    assert (out / "tls.key").stat().st_mode & 0o077 == 0
    docs = tools.kustomize(out)
    ca = (out / "ca.crt").read_bytes()
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        for hook in one(docs, kind)["webhooks"]:
            assert base64.b64decode(hook["clientConfig"]["caBundle"]) == ca
            assert hook["clientConfig"]["service"]["namespace"] == "guard-system"
    secret = one(docs, "Secret", render.SECRET)
    assert secret["metadata"]["namespace"] == "guard-system" and secret["type"] == "kubernetes.io/tls"
    assert base64.b64decode(secret["data"]["tls.crt"]) == (out / "tls.crt").read_bytes()
    assert one(docs, "Deployment")["metadata"]["namespace"] == "guard-system"


def _certs_dir(tmp_path: Path, namespace: str = "overlay-guard") -> Path:
    out = tmp_path / "certs"
    run = subprocess.run([sys.executable, "-m", "certs", "--out", str(out), "--namespace", namespace],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return out


def _kustomization(tmp_path: Path, resources: list[Path], components: list[Path]) -> Path:
    """A user's own kustomization in tmp_path that builds on the given folders."""
    rel = [os.path.relpath(p, tmp_path) for p in resources]
    comps = [os.path.relpath(p, tmp_path) for p in components]
    (tmp_path / "kustomization.yaml").write_text(render.dump([{
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": rel, "components": comps}]))
    return tmp_path


DEFAULT_DEPLOYMENTS = ("kustomize-base", "kustomize-cert-manager", "python-m-certs", "chart", "chart-cert-manager")


def _render_default(kind: str, tmp_path: Path) -> list[dict[str, Any]]:
    if kind == "kustomize-base":
        return tools.kustomize(MANIFESTS)
    if kind == "kustomize-cert-manager":
        return tools.kustomize(MANIFESTS / "cert-manager")
    if kind == "python-m-certs":
        return tools.kustomize(_certs_dir(tmp_path))
    if kind == "chart":
        return tools.chart(tmp_path)
    return tools.chart(tmp_path, "--set", "certificates.source=cert-manager")


@pytest.mark.tools
@pytest.mark.parametrize("kind", DEFAULT_DEPLOYMENTS)
def test_default_deployments_install_no_crd(kind: str, tmp_path: Path) -> None:
    docs = _render_default(kind, tmp_path)
    assert one(docs, "ValidatingWebhookConfiguration") and one(docs, "Deployment")
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition"] == []


@pytest.mark.tools
def test_dra_crd_component_opts_in(tmp_path: Path) -> None:
    mine = _kustomization(tmp_path, [_certs_dir(tmp_path)], [COMPONENTS / "dra-crd"])
    docs = tools.kustomize(mine)
    crd = one(docs, "CustomResourceDefinition", "nodeoverlays.karpenter.sh")
    shipped = [d for d in YAML(typ="safe", pure=True).load_all(DRA_CRD.read_text()) if d]
    assert [crd] == shipped
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert "dynamicResources" in spec
    # Everything else is still there.
    assert one(docs, "Deployment") and one(docs, "Secret", render.SECRET)


def test_dra_crd_stays_where_simulation_reads_it() -> None:
    link = ROOT / "simulation" / "data" / "nodeoverlays.crd.yaml"
    assert link.resolve() == DRA_CRD.resolve()
    chart_copy = tools.CHART / "files" / "karpenter.sh_nodeoverlays.yaml"
    assert chart_copy.is_symlink() and chart_copy.resolve() == DRA_CRD.resolve()


@pytest.mark.tools
def test_break_glass_component_skips_the_group_on_every_webhook(tmp_path: Path) -> None:
    docs = tools.kustomize(_kustomization(tmp_path, [MANIFESTS], [COMPONENTS / "break-glass"]))
    expected = [{"name": "break-glass",
                 "expression": "!request.userInfo.groups.exists(g, g in ['overlay-guard:break-glass'])"}]
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        hooks = one(docs, kind)["webhooks"]
        assert len(hooks) == 2 and all(h["matchConditions"] == expected for h in hooks), kind
    assert all("matchConditions" not in h for d in tools.kustomize(MANIFESTS) for h in d.get("webhooks", ()))


@pytest.mark.tools
def test_network_policy_component_admits_the_two_ports_only(tmp_path: Path) -> None:
    docs = tools.kustomize(_kustomization(tmp_path, [MANIFESTS], [COMPONENTS / "network-policy"]))
    policy = one(docs, "NetworkPolicy")
    assert policy["metadata"]["namespace"] == "overlay-guard"
    assert policy["spec"]["podSelector"]["matchLabels"] == one(docs, "Deployment")["spec"]["selector"]["matchLabels"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    ports = [p for rule in policy["spec"]["ingress"] for p in rule["ports"]]
    assert ports == [{"port": "https", "protocol": "TCP"}, {"port": "metrics", "protocol": "TCP"}]


@pytest.mark.tools
def test_client_ca_component_mounts_the_ca_and_moves_the_probes(tmp_path: Path) -> None:
    docs = tools.kustomize(_kustomization(tmp_path, [MANIFESTS], [COMPONENTS / "client-ca"]))
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert f"--client-ca={mounts['client-ca']}/ca.crt" in container["args"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["client-ca"]["configMap"] == {"name": "overlay-guard-client-ca"}
    assert volumes["tls"]["secret"]["secretName"] == render.SECRET
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["port"] == "metrics" and container[probe]["httpGet"]["scheme"] == "HTTP"


@pytest.mark.tools
def test_monitoring_components_scrape_the_metrics_port_and_ship_the_rules_and_dashboard(tmp_path: Path) -> None:
    docs = tools.kustomize(_kustomization(tmp_path, [MANIFESTS],
                                          [COMPONENTS / "monitoring", COMPONENTS / "grafana-dashboard"]))
    svc, monitor = one(docs, "Service"), one(docs, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [svc["metadata"]["namespace"]]
    (endpoint,) = monitor["spec"]["endpoints"]
    metrics_port = [p for p in svc["spec"]["ports"] if p["name"] == endpoint["port"]]
    assert metrics_port == [{"name": "metrics", "port": 8080, "targetPort": "metrics", "protocol": "TCP"}]
    rule = one(docs, "PrometheusRule")
    assert rule["metadata"]["namespace"] == "overlay-guard"
    assert rule["spec"] == YAML(typ="safe", pure=True).load(COMPONENTS / "monitoring" / "prometheusrule.yaml")["spec"]
    dashboard = one(docs, "ConfigMap", "overlay-guard-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = (COMPONENTS / "grafana-dashboard" / "overlay-guard.json").read_text()
    assert dashboard["data"]["overlay-guard.json"] == shipped
    # Opt-in: the base has none of them.
    kinds = ("ServiceMonitor", "PrometheusRule", "ConfigMap")
    assert not [d for d in tools.kustomize(MANIFESTS) if d["kind"] in kinds]


def test_the_chart_links_to_the_monitoring_components() -> None:
    # One copy of the rules, the ServiceMonitor's endpoints and the dashboard: the chart's files/ link here.
    for name, target in (("prometheusrule.yaml", "monitoring/prometheusrule.yaml"),
                         ("servicemonitor.yaml", "monitoring/servicemonitor.yaml"),
                         ("grafana-dashboard.json", "grafana-dashboard/overlay-guard.json")):
        link = tools.CHART / "files" / name
        assert link.is_symlink() and link.resolve() == (COMPONENTS / target).resolve(), name


def test_docs_install_with_helm_then_kustomize_then_the_opt_in_crd() -> None:
    # tests/e2e/test_install.py and the dra_crd fixture run these blocks as written: the README's two, then
    # docs/webhook.md's opt-in CRD.
    blocks = _readme.blocks()
    assert list(blocks) == ["install-helm", "install-kustomize", "install-dra-crd"]
    assert blocks["install-helm"].startswith("helm install overlay-guard charts/overlay-guard")
    assert "image.repository=" in blocks["install-helm"]
    assert "kubectl apply -k .certs" in blocks["install-kustomize"]
    assert "manifests/crd/karpenter.sh_nodeoverlays.yaml" in blocks["install-dra-crd"]


@pytest.mark.tools
def test_only_the_guard_writes_its_leases() -> None:
    docs = tools.kustomize(MANIFESTS)
    policy = one(docs, "ValidatingAdmissionPolicy", "overlay-guard-leases")
    assert policy["apiVersion"] == "admissionregistration.k8s.io/v1"
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["leases"] and rule["apiGroups"] == ["coordination.k8s.io"]
    assert set(rule["operations"]) == {"CREATE", "UPDATE", "DELETE"}
    # The Role's two names, no other Lease.
    names = one(docs, "Role")["rules"][1]["resourceNames"]
    assert sorted(rule["resourceNames"]) == sorted(names)
    assert policy["spec"]["matchConstraints"]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": one(docs, "ServiceAccount")["metadata"]["namespace"]}}
    assert policy["spec"]["failurePolicy"] == "Fail"
    (check,) = policy["spec"]["validations"]
    assert "':overlay-guard'" in check["expression"] and check["reason"] == "Forbidden"
    binding = one(docs, "ValidatingAdmissionPolicyBinding", "overlay-guard-leases")
    assert binding["spec"] == {"policyName": "overlay-guard-leases", "validationActions": ["Deny"]}
