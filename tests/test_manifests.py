"""manifests/: `kubectl kustomize` renders the base, the cert-manager variant and the folder
`python -m certs` writes; the rendered objects have the properties the webhook relies on."""

from __future__ import annotations

import base64
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from certs import render

ROOT = Path(__file__).resolve().parent.parent
MANIFESTS = ROOT / "manifests"
KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")


def kustomize(path: Path) -> list[dict[str, Any]]:
    assert KUBECTL is not None
    out = subprocess.run([KUBECTL, "kustomize", str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return [d for d in YAML(typ="safe", pure=True).load_all(out.stdout) if d]


def one(docs: list[dict[str, Any]], kind: str, name: str = "overlay-guard") -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name, [(d["kind"], d["metadata"]["name"]) for d in docs])
    return found[0]


@needs_kubectl
def test_base_renders_every_object() -> None:
    docs = kustomize(MANIFESTS)
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    for kind in (
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "PodDisruptionBudget",
        "Service",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ):
        assert (kind, "overlay-guard") in kinds, kind
    assert ("CustomResourceDefinition", "nodeoverlays.karpenter.sh") in kinds


@needs_kubectl
def test_rbac_is_read_only_on_the_two_resources() -> None:
    role = one(kustomize(MANIFESTS), "ClusterRole")
    assert role["rules"] == [
        {
            "apiGroups": ["karpenter.sh"],
            "resources": ["nodeoverlays", "nodepools"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    binding = one(kustomize(MANIFESTS), "ClusterRoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "overlay-guard", "namespace": "overlay-guard"}
    ]


@needs_kubectl
def test_deployment_is_hardened_and_probed() -> None:
    docs = kustomize(MANIFESTS)
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
    # Graceful shutdown fits in the grace period: preStop sleep + --shutdown-timeout.
    assert pod["terminationGracePeriodSeconds"] >= 5 + 25
    svc = one(docs, "Service")
    assert {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"} in svc["spec"]["ports"]
    assert svc["spec"]["selector"] == spec["selector"]["matchLabels"]
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1 and pdb["spec"]["selector"] == spec["selector"]


def _hooks(doc: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {h["rules"][0]["resources"][0]: h for h in doc["webhooks"]}


@needs_kubectl
def test_webhook_configurations() -> None:
    docs = kustomize(MANIFESTS)
    for kind, path in (
        ("ValidatingWebhookConfiguration", "/validate"),
        ("MutatingWebhookConfiguration", "/mutate"),
    ):
        hooks = _hooks(one(docs, kind))
        assert set(hooks) == {"nodeoverlays", "nodepools"}
        assert hooks["nodeoverlays"]["failurePolicy"] == "Fail"
        assert hooks["nodepools"]["failurePolicy"] == "Ignore"
        for h in hooks.values():
            assert h["admissionReviewVersions"] == ["v1"] and h["sideEffects"] == "None"
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


@needs_kubectl
def test_cert_manager_variant() -> None:
    docs = kustomize(MANIFESTS / "cert-manager")
    serving = one(docs, "Certificate", "overlay-guard-serving")
    assert serving["spec"]["secretName"] == render.SECRET
    assert "overlay-guard.overlay-guard.svc" in serving["spec"]["dnsNames"]
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        notes = one(docs, kind)["metadata"]["annotations"]
        assert notes["cert-manager.io/inject-ca-from"] == "overlay-guard/overlay-guard-serving"
    assert one(docs, "Issuer", "overlay-guard-ca")["spec"]["ca"]["secretName"] == "overlay-guard-ca"


@needs_kubectl
def test_certs_cli_output_deploys_with_ca_bundle(tmp_path: Path) -> None:
    out = tmp_path / "certs"
    run = subprocess.run(
        [sys.executable, "-m", "certs", "--out", str(out), "--namespace", "guard-system"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
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
    docs = kustomize(out)
    ca = (out / "ca.crt").read_bytes()
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        for hook in one(docs, kind)["webhooks"]:
            assert base64.b64decode(hook["clientConfig"]["caBundle"]) == ca
            assert hook["clientConfig"]["service"]["namespace"] == "guard-system"
    secret = one(docs, "Secret", render.SECRET)
    assert secret["metadata"]["namespace"] == "guard-system" and secret["type"] == "kubernetes.io/tls"
    assert base64.b64decode(secret["data"]["tls.crt"]) == (out / "tls.crt").read_bytes()
    assert one(docs, "Deployment")["metadata"]["namespace"] == "guard-system"


def test_dockerfile_runs_as_non_root() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "FROM python:3.11-slim" in text and "pip install" in text
    user = [line.split()[1] for line in text.splitlines() if line.startswith("USER ")]
    assert user and not user[-1].startswith(("0", "root"))
    assert 'ENTRYPOINT ["overlay-webhook"]' in text
