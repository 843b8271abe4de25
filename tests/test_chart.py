"""charts/overlay-guard with a real helm (hack/helm.sh): lint, the objects it renders by default and with
other values, the same RBAC, webhook rules and pod as the kustomize base, certificates that verify, and
values.schema.json refusing bad values."""

from __future__ import annotations

import base64
import ipaddress
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from ruamel.yaml import YAML

from certs import render
from tests import tools

ROOT = Path(__file__).resolve().parent.parent
# Every test renders with helm or kubectl (hack/ builds them); one xdist worker renders the defaults once.
pytestmark = [pytest.mark.tools, pytest.mark.xdist_group("test_chart")]
MANIFESTS = ROOT / "manifests"
WEBHOOK_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")


def by_kind(docs: list[dict[str, Any]], kind: str, name: str = "overlay-guard") -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name, [(d["kind"], d["metadata"]["name"]) for d in docs])
    return found[0]


@pytest.fixture(scope="module")
def base() -> list[dict[str, Any]]:
    return tools.kustomize(MANIFESTS)


# What `helm install` learns from an API server that serves ValidatingAdmissionPolicy (1.30 and later);
# `helm template` alone does not claim it.
SERVES_VAP = ("--api-versions", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy")
LEASE_POLICY = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")


@pytest.fixture(scope="module")
def default(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return tools.chart(tmp_path_factory.mktemp("helm"), *SERVES_VAP)


MONITORING = ("--set", "monitoring.serviceMonitor.enabled=true", "--set", "monitoring.prometheusRule.enabled=true",
              "--set", "monitoring.grafanaDashboard.enabled=true")
OPTIONS = ("--set", "certificates.source=cert-manager", "--set", "networkPolicy.enabled=true",
           "--set", "draCRD.enabled=true", *MONITORING)


@pytest.mark.parametrize("args", [(), OPTIONS], ids=["default", "options"])
def test_helm_lint_is_clean(tmp_path: Path, args: tuple[str, ...]) -> None:
    done = subprocess.run([tools.helm(), "lint", "--strict", str(tools.CHART), *tools.IMAGE, *args],
                          capture_output=True, text=True, timeout=120, env=tools.helm_env(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout


def test_default_objects(default: list[dict[str, Any]], base: list[dict[str, Any]]) -> None:
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in default)
    assert kinds == sorted([
        ("ServiceAccount", "overlay-guard"), ("ClusterRole", "overlay-guard"), ("ClusterRoleBinding", "overlay-guard"),
        ("Role", "overlay-guard"), ("RoleBinding", "overlay-guard"),
        ("Role", "overlay-guard-karpenter-metrics"), ("RoleBinding", "overlay-guard-karpenter-metrics"),
        ("Role", "overlay-guard-events"), ("RoleBinding", "overlay-guard-events"),
        *((k, "overlay-guard-leases") for k in LEASE_POLICY),
        ("Service", "overlay-guard"), ("Deployment", "overlay-guard"), ("PodDisruptionBudget", "overlay-guard"),
        ("Secret", "overlay-guard-ca"), ("Secret", render.SECRET),
        *((k, "overlay-guard") for k in WEBHOOK_KINDS)])
    for doc in default:
        if doc["metadata"]["name"].endswith("-karpenter-metrics"):
            # Where Karpenter's Service is: a grant outside the guard's namespace.
            assert doc["metadata"]["namespace"] == "kube-system", doc["kind"]
        elif doc["metadata"]["name"].endswith("-events"):
            # Where the audit writes Events about cluster-scoped objects, and nowhere else.
            assert doc["metadata"]["namespace"] == "default", doc["kind"]
        elif doc["kind"] not in ("ClusterRole", "ClusterRoleBinding", *WEBHOOK_KINDS, *LEASE_POLICY):
            assert doc["metadata"]["namespace"] == "overlay-guard", doc["kind"]
    # The chart's objects are the base's, plus the certificates, minus the Namespace (helm --create-namespace).
    assert {k for k, _ in kinds} - {"Secret"} == {d["kind"] for d in base} - {"Namespace"}


def test_rbac_is_identical_to_the_kustomize_base(default: list[dict[str, Any]], base: list[dict[str, Any]]) -> None:
    for kind, fields in (("ClusterRole", ("rules",)), ("ClusterRoleBinding", ("roleRef", "subjects")),
                         ("Role", ("rules",)), ("RoleBinding", ("roleRef", "subjects"))):
        for name in ("overlay-guard", "overlay-guard-karpenter-metrics", "overlay-guard-events"):
            if kind.startswith("Cluster") and name != "overlay-guard":
                continue
            for field in fields:
                assert by_kind(default, kind, name)[field] == by_kind(base, kind, name)[field], (kind, name, field)
    metrics = by_kind(default, "Role", "overlay-guard-karpenter-metrics")["rules"]
    assert metrics == [{"apiGroups": [""], "resources": ["services/proxy"], "resourceNames": ["karpenter:http-metrics"],
                        "verbs": ["get"]}]
    assert by_kind(default, "ServiceAccount")["metadata"]["namespace"] == "overlay-guard"


def _without_ca_bundle(doc: dict[str, Any]) -> list[dict[str, Any]]:
    hooks = []
    for hook in doc["webhooks"]:
        client = {k: v for k, v in hook["clientConfig"].items() if k != "caBundle"}
        hooks.append({**hook, "clientConfig": client})
    return hooks


def test_webhook_configurations_equal_the_base(default: list[dict[str, Any]], base: list[dict[str, Any]]) -> None:
    for kind in WEBHOOK_KINDS:
        assert _without_ca_bundle(by_kind(default, kind)) == by_kind(base, kind)["webhooks"]
    hooks = by_kind(default, WEBHOOK_KINDS[0])["webhooks"]
    policies = {h["name"]: (h["failurePolicy"], h["timeoutSeconds"]) for h in hooks}
    assert policies == {"nodeoverlays.validate.overlay-guard.io": ("Fail", 5),
                        "nodepools.validate.overlay-guard.io": ("Ignore", 5)}


def test_pod_equals_the_base(default: list[dict[str, Any]], base: list[dict[str, Any]]) -> None:
    chart_dep, base_dep = by_kind(default, "Deployment"), by_kind(base, "Deployment")
    chart_pod, base_pod = chart_dep["spec"]["template"]["spec"], base_dep["spec"]["template"]["spec"]
    # Only the image's repository differs: the chart must be told it, the base is given it by `images:`.
    (chart_container,), (base_container,) = chart_pod["containers"], base_pod["containers"]
    assert chart_container["image"] == f"registry.example/{base_container['image']}"
    assert {**chart_container, "image": ""} == {**base_container, "image": ""}
    same = ("securityContext", "volumes", "terminationGracePeriodSeconds", "serviceAccountName")
    assert {k: chart_pod[k] for k in same} == {k: base_pod[k] for k in same}
    assert chart_dep["spec"]["replicas"] == base_dep["spec"]["replicas"] == 2
    assert chart_dep["spec"]["strategy"] == base_dep["spec"]["strategy"]
    selector = chart_dep["spec"]["selector"]["matchLabels"]
    assert by_kind(default, "Service")["spec"]["selector"] == selector
    assert by_kind(default, "PodDisruptionBudget")["spec"] == {"minAvailable": 1, "selector": {"matchLabels": selector}}
    anti = chart_pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["podAffinityTerm"]["labelSelector"]["matchLabels"] == selector
    # The same zone spread, over the release's pods.
    assert [{**c, "labelSelector": None} for c in chart_pod["topologySpreadConstraints"]] == \
        [{**c, "labelSelector": None} for c in base_pod["topologySpreadConstraints"]]
    assert chart_pod["topologySpreadConstraints"][0]["labelSelector"]["matchLabels"] == selector


def _pem(secret: dict[str, Any], key: str) -> bytes:
    return base64.b64decode(secret["data"][key])


def test_self_signed_certificates_verify(default: list[dict[str, Any]]) -> None:
    tls = by_kind(default, "Secret", render.SECRET)
    ca_secret = by_kind(default, "Secret", "overlay-guard-ca")
    assert tls["type"] == "kubernetes.io/tls" and set(tls["data"]) == {"ca.crt", "tls.crt", "tls.key"}
    ca = x509.load_pem_x509_certificate(_pem(ca_secret, "ca.crt"))
    cert = x509.load_pem_x509_certificate(_pem(tls, "tls.crt"))
    for kind in WEBHOOK_KINDS:
        for hook in by_kind(default, kind)["webhooks"]:
            assert base64.b64decode(hook["clientConfig"]["caBundle"]) == _pem(ca_secret, "ca.crt")
    cert.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == [
        "overlay-guard.overlay-guard.svc", "overlay-guard.overlay-guard.svc.cluster.local", "localhost"]
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.IPv4Address("127.0.0.1")]
    key = serialization.load_pem_private_key(_pem(tls, "tls.key"), password=None)
    public = cert.public_key()
    assert isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(public, ec.EllipticCurvePublicKey)
    assert key.public_key().public_numbers() == public.public_numbers()
    assert int(tls["metadata"]["annotations"]["overlay-guard.io/renew-after"]) > 0


def test_non_default_values(tmp_path: Path) -> None:
    docs = tools.chart(
        tmp_path, "--set", "replicaCount=3", "--set", "mode=warn", "--set", "webhook.failurePolicy=Ignore",
        "--set", "webhook.timeoutSeconds=10", "--set", "namespace.create=true", "--set", "namespace.name=guard",
        "--set", "clientCA.enabled=true", "--set", "clientCA.secret=api-client-ca", "--set", "clientCA.key=ca.pem",
        "--set", "networkPolicy.enabled=true", "--set", "podDisruptionBudget.enabled=false",
        "--set", "resources.limits.memory=1Gi", "--set", "webhook.url=https://127.0.0.1:9443",
        "--set", "certificates.selfSigned.extraIPAddresses={10.0.0.7}", "--set", "extraArgs={--max-pending=10}",
        "--set", "predictionGraceSeconds=30",
        "--set", "karpenter.service.namespace=karpenter", "--set", "karpenter.metricsIntervalSeconds=60")
    ns = by_kind(docs, "Namespace", "guard")
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert all(d["metadata"].get("namespace", "guard") == "guard" for d in docs
               if not d["metadata"]["name"].endswith(("-karpenter-metrics", "-events")))
    for kind in ("Role", "RoleBinding"):
        assert by_kind(docs, kind, "overlay-guard-karpenter-metrics")["metadata"]["namespace"] == "karpenter"
    assert not [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    dep = by_kind(docs, "Deployment")
    assert dep["spec"]["replicas"] == 3
    pod = dep["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert "--mode=warn" in container["args"] and "--max-pending=10" in container["args"]
    assert "--prediction-grace=30" in container["args"]
    assert "--client-ca=/etc/overlay-guard/client-ca/ca.pem" in container["args"]
    assert {"--karpenter-service=karpenter/karpenter:http-metrics", "--karpenter-metrics-interval=60"} <= \
        set(container["args"])
    assert {"name": "client-ca", "secret": {"secretName": "api-client-ca"}} in pod["volumes"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics", "scheme": "HTTP"}
    assert container["resources"]["limits"]["memory"] == "1Gi"
    for kind in WEBHOOK_KINDS:
        verb = "validate" if kind.startswith("Validating") else "mutate"
        hooks = {h["name"].split(".")[0]: h for h in by_kind(docs, kind)["webhooks"]}
        assert hooks["nodeoverlays"]["failurePolicy"] == "Ignore" and hooks["nodepools"]["failurePolicy"] == "Ignore"
        assert hooks["nodeoverlays"]["timeoutSeconds"] == 10
        assert hooks["nodeoverlays"]["clientConfig"]["url"] == f"https://127.0.0.1:9443/{verb}"
        assert "service" not in hooks["nodeoverlays"]["clientConfig"]
    cert = x509.load_pem_x509_certificate(_pem(by_kind(docs, "Secret", render.SECRET), "tls.crt"))
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "overlay-guard.guard.svc" in sans.get_values_for_type(x509.DNSName)
    assert ipaddress.IPv4Address("10.0.0.7") in sans.get_values_for_type(x509.IPAddress)
    policy = by_kind(docs, "NetworkPolicy")
    assert [p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]] == ["https", "metrics"]


def test_network_policy_matches_the_kustomize_component(tmp_path: Path) -> None:
    docs = tools.chart(tmp_path, "--set", "networkPolicy.enabled=true",
                       "--set", "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=monitoring")
    rules = by_kind(docs, "NetworkPolicy")["spec"]["ingress"]
    component = YAML(typ="safe", pure=True).load(MANIFESTS / "components" / "network-policy" / "networkpolicy.yaml")
    assert [p for r in rules for p in r["ports"]] == [p for r in component["spec"]["ingress"] for p in r["ports"]]
    assert "from" not in rules[0]
    assert rules[1]["from"] == [{"namespaceSelector": {"matchLabels": {"team": "monitoring"}}}]


def test_cert_manager_source(tmp_path: Path) -> None:
    docs = tools.chart(tmp_path, "--set", "certificates.source=cert-manager")
    assert not [d for d in docs if d["kind"] == "Secret"]
    serving = by_kind(docs, "Certificate", "overlay-guard-serving")
    assert serving["spec"]["secretName"] == render.SECRET
    assert serving["spec"]["issuerRef"] == {"name": "overlay-guard-ca", "kind": "Issuer"}
    for kind in WEBHOOK_KINDS:
        doc = by_kind(docs, kind)
        assert doc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == "overlay-guard/overlay-guard-serving"
        assert all("caBundle" not in h["clientConfig"] for h in doc["webhooks"])
    own = tools.chart(tmp_path, "--set", "certificates.source=cert-manager",
                      "--set", "certificates.certManager.issuerRef.name=corp-ca",
                      "--set", "certificates.certManager.issuerRef.kind=ClusterIssuer")
    assert [d["kind"] for d in own if d["kind"] in ("Issuer", "Certificate")] == ["Certificate"]
    assert by_kind(own, "Certificate", "overlay-guard-serving")["spec"]["issuerRef"] == {
        "name": "corp-ca", "kind": "ClusterIssuer"}


def test_monitoring_is_opt_in_and_renders_the_kustomize_components(default: list[dict[str, Any]],
                                                                   tmp_path: Path) -> None:
    kinds = ("ServiceMonitor", "PrometheusRule", "ConfigMap")
    assert not [d for d in default if d["kind"] in kinds]
    docs = tools.chart(tmp_path, *MONITORING, "--set", "namespace.name=guard",
                       "--set", "monitoring.serviceMonitor.interval=1m",
                       "--set", "monitoring.serviceMonitor.labels.release=kps",
                       "--set", "monitoring.prometheusRule.labels.release=kps")
    components = MANIFESTS / "components"
    svc, monitor = by_kind(docs, "Service"), by_kind(docs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kps" and monitor["metadata"]["namespace"] == "guard"
    assert monitor["spec"]["selector"]["matchLabels"] == svc["spec"]["selector"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["guard"]}
    shipped = YAML(typ="safe", pure=True).load(components / "monitoring" / "servicemonitor.yaml")
    assert monitor["spec"]["endpoints"] == [{**e, "interval": "1m"} for e in shipped["spec"]["endpoints"]]
    assert "metrics" in [p["name"] for p in svc["spec"]["ports"]]
    rule = by_kind(docs, "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "kps" and rule["metadata"]["namespace"] == "guard"
    assert rule["spec"] == YAML(typ="safe", pure=True).load(components / "monitoring" / "prometheusrule.yaml")["spec"]
    dashboard = by_kind(docs, "ConfigMap", "overlay-guard-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped_json = (components / "grafana-dashboard" / "overlay-guard.json").read_text()
    assert dashboard["data"]["overlay-guard.json"] == shipped_json


def test_dra_crd_is_opt_in_and_kept_on_uninstall(default: list[dict[str, Any]], tmp_path: Path) -> None:
    assert not [d for d in default if d["kind"] == "CustomResourceDefinition"]
    docs = tools.chart(tmp_path, "--set", "draCRD.enabled=true")
    crd = by_kind(docs, "CustomResourceDefinition", "nodeoverlays.karpenter.sh")
    shipped = YAML(typ="safe", pure=True).load((MANIFESTS / "crd" / "karpenter.sh_nodeoverlays.yaml").read_text())
    assert crd["spec"] == shipped["spec"]
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


@pytest.mark.parametrize("bad", [
    ("mode=block",), ("webhook.failurePolicy=Never",), ("replicaCount=0",), ("webhook.timeoutSeconds=31",),
    ("certificates.source=vault",), ("clientCA.enabled=true",),
    ("clientCA.enabled=true", "clientCA.configMap=a", "clientCA.secret=b"), ("extraArgs={mode=warn}",),
    ("webhook.url=http://127.0.0.1:9443",), ("certificates.selfSigned.extraIPAddresses={not-an-ip}",),
    ("replicas=3",), ("image.tag=1",), ("monitoring.serviceMonitor.interval=soon",),
    ("monitoring.prometheusRule.labels.release=1",), ("webhook.breakGlassGroups={a'b}",),
    ("leasePolicy.enabled=yes",),
], ids=lambda bad: ",".join(bad))
def test_schema_rejects_bad_values(tmp_path: Path, bad: tuple[str, ...]) -> None:
    args = [a for value in bad for a in ("--set", value)]
    done = tools.helm_template(tmp_path, *args, check=False)
    assert done.returncode == 1, done.stdout[:500]
    assert "values don't meet the specifications of the schema" in done.stderr, done.stderr


def test_image_repository_is_required(default: list[dict[str, Any]], tmp_path: Path) -> None:
    # Nothing publishes the image: a default repository would pull nothing and, with failurePolicy Fail,
    # block every NodeOverlay write.
    done = tools.helm_template(tmp_path, "--set", "image.repository=", check=False)
    assert done.returncode == 1 and "image.repository is required" in done.stderr, done.stderr
    assert "oci-archive:dist/overlay-guard-0.1.0.oci.tar" in done.stderr
    (container,) = by_kind(default, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example/overlay-guard:0.1.0"
    tagged = tools.chart(tmp_path, "--set", "image.tag=dev")
    (container,) = by_kind(tagged, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example/overlay-guard:dev"


def test_packaged_chart_carries_the_linked_crd(tmp_path: Path) -> None:
    # files/ links to manifests/crd/; a packaged chart must hold the file itself.
    env = tools.helm_env(tmp_path)
    done = subprocess.run([tools.helm(), "package", str(tools.CHART), "-d", str(tmp_path)], capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    (archive,) = tmp_path.glob("overlay-guard-*.tgz")
    rendered = subprocess.run([tools.helm(), "template", "overlay-guard", str(archive), *tools.IMAGE,
                               "--set", "draCRD.enabled=true"], capture_output=True, text=True, timeout=120, env=env)
    assert rendered.returncode == 0, rendered.stderr
    docs = [d for d in YAML(typ="safe", pure=True).load_all(rendered.stdout) if d]
    crds = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    assert len(crds) == 1 and "dynamicResources" in json.dumps(crds[0])


def test_the_live_catalog_can_be_turned_off(tmp_path: Path) -> None:
    docs = tools.chart(tmp_path, "--set", "karpenter.enabled=false")
    assert not [d for d in docs if d["metadata"]["name"].endswith("-karpenter-metrics")]
    (container,) = by_kind(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert not [a for a in container["args"] if a.startswith("--karpenter")]


def test_the_lease_policy_is_the_base_s_and_only_where_the_api_server_serves_it(
        default: list[dict[str, Any]], base: list[dict[str, Any]], tmp_path: Path) -> None:
    for kind in LEASE_POLICY:
        name = "overlay-guard-leases"
        assert by_kind(default, kind, name)["spec"] == by_kind(base, kind, name)["spec"]
    # Older API servers (and `helm template` without --api-versions) get none; leasePolicy.enabled=false neither.
    for args in ((), (*SERVES_VAP, "--set", "leasePolicy.enabled=false")):
        assert not [d for d in tools.chart(tmp_path, *args) if d["kind"] in LEASE_POLICY], args
    # Another namespace and name: the policy follows both.
    docs = tools.chart(tmp_path, *SERVES_VAP, "--set", "namespace.name=guard", "--set", "fullnameOverride=og")
    policy = by_kind(docs, "ValidatingAdmissionPolicy", "og-leases")
    assert policy["spec"]["matchConstraints"]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "guard"}
    assert "':og'" in policy["spec"]["validations"][0]["expression"]
    assert by_kind(docs, "ValidatingAdmissionPolicyBinding", "og-leases")["spec"]["policyName"] == "og-leases"


def test_production_values_spread_prioritise_and_break_glass(default: list[dict[str, Any]], tmp_path: Path) -> None:
    pod = by_kind(default, "Deployment")["spec"]["template"]["spec"]
    (spread,) = pod["topologySpreadConstraints"]
    assert spread["topologyKey"] == "topology.kubernetes.io/zone" and spread["whenUnsatisfiable"] == "ScheduleAnyway"
    assert spread["labelSelector"]["matchLabels"] == by_kind(default, "Deployment")["spec"]["selector"]["matchLabels"]
    assert "priorityClassName" not in pod
    for kind in WEBHOOK_KINDS:
        assert all("matchConditions" not in h for h in by_kind(default, kind)["webhooks"])
    zones_only = [{"maxSkew": 2, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule"}]
    # One group renders as manifests/components/break-glass has it.
    one_group = tools.chart(tmp_path, "--set", "webhook.breakGlassGroups={overlay-guard:break-glass}")
    component = YAML(typ="safe", pure=True).load(MANIFESTS / "components" / "break-glass" / "kustomization.yaml")
    patched = YAML(typ="safe", pure=True).load(component["patches"][0]["patch"])[0]["value"]
    for kind in WEBHOOK_KINDS:
        assert all(h["matchConditions"] == patched for h in by_kind(one_group, kind)["webhooks"])
    docs = tools.chart(tmp_path, "--set", "priorityClassName=system-cluster-critical",
                       "--set", "webhook.breakGlassGroups={overlay-guard:break-glass,system:masters}",
                       "--set-json", f"topologySpreadConstraints={json.dumps(zones_only)}")
    pod = by_kind(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["topologySpreadConstraints"] == zones_only
    for kind in WEBHOOK_KINDS:
        for hook in by_kind(docs, kind)["webhooks"]:
            groups = "['overlay-guard:break-glass','system:masters']"
            assert hook["matchConditions"] == [
                {"name": "break-glass", "expression": f"!request.userInfo.groups.exists(g, g in {groups})"}]
