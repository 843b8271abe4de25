"""Issue 7: installing overlay-guard as the README says, on the e2e API server with Karpenter's CRDs.

Every manifest the chart and the kustomize base render passes `kubectl apply --dry-run=server`; the
README's Helm and kustomize blocks are run as written, and the webhook configurations they install,
pointed at a webhook process serving the certificate they issued, refuse a conflicting overlay. (The
opt-in CRD block of docs/webhook.md is run by the `dra_crd` fixture.) The cluster has no controllers, so the
Deployments never start pods: the webhook runs as a local process, reached by URL.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import tools

from . import _readme
from ._cluster import REPO_ROOT, ControlPlane
from ._guard import CONFIG_KINDS, Certs, Guard, Webhook, apply, overlay, unique, webhook_configurations

pytestmark = pytest.mark.e2e

NAMESPACE = "overlay-guard"
RELEASE = "overlay-guard"
VALIDATOR = 'admission webhook "nodeoverlays.validate.overlay-guard.io" denied the request'
MANIFESTS = REPO_ROOT / "manifests"
COMPONENTS = MANIFESTS / "components"


def _helm(plane: ControlPlane, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**tools.helm_env(home), "KUBECONFIG": str(plane.kubeconfig)}
    done = subprocess.run([tools.helm(), *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _kustomization(folder: Path, resources: list[Path], components: list[Path]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kustomization.yaml").write_text(json.dumps({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [os.path.relpath(p, folder) for p in resources],
        "components": [os.path.relpath(p, folder) for p in components]}))
    return folder


def _certs(out: Path) -> Path:
    done = subprocess.run([sys.executable, "-m", "certs", "--out", str(out), "--base", str(MANIFESTS)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return out


def _sandbox(where: Path) -> Path:
    """A directory laid out like the repository's root (manifests/, charts/), for README blocks that
    write files (.certs/) the repository must not get."""
    where.mkdir(parents=True, exist_ok=True)
    for name in ("manifests", "charts"):
        link = where / name
        if not link.exists():
            link.symlink_to(REPO_ROOT / name)
    return where


def _renders(tmp: Path) -> dict[str, list[dict[str, Any]]]:
    home = tmp / "helm"
    certs = _certs(tmp / "certs")
    every = _kustomization(tmp / "every-component", [certs],
                           [COMPONENTS / "dra-crd", COMPONENTS / "network-policy", COMPONENTS / "client-ca",
                            COMPONENTS / "break-glass"])
    return {
        "kustomize base": tools.kustomize(MANIFESTS),
        "python -m certs": tools.kustomize(certs),
        "kustomize with every component": tools.kustomize(every),
        "kustomize cert-manager": tools.kustomize(MANIFESTS / "cert-manager"),
        "chart": tools.chart(home),
        "chart with every option": tools.chart(
            home, "--set", "namespace.create=true", "--set", "mode=warn", "--set", "networkPolicy.enabled=true",
            "--set", "clientCA.enabled=true", "--set", "clientCA.configMap=overlay-guard-client-ca",
            "--set", "draCRD.enabled=true", "--set", "replicaCount=3", "--set", "webhook.failurePolicy=Ignore",
            "--set", "webhook.breakGlassGroups={overlay-guard:break-glass,system:masters}",
            "--set", "priorityClassName=system-cluster-critical",
            "--api-versions", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"),
        "chart cert-manager": tools.chart(home, "--set", "certificates.source=cert-manager"),
        "chart cert-manager, own issuer": tools.chart(
            home, "--set", "certificates.source=cert-manager", "--set", "certificates.certManager.issuerRef.name=corp",
            "--set", "certificates.certManager.issuerRef.kind=ClusterIssuer"),
    }


def test_every_rendered_manifest_passes_server_side_dry_run(guard: Guard, tmp_path: Path) -> None:
    plane = guard.plane
    # Namespaced objects are checked in their namespace, which a dry run of the Namespace does not create.
    if plane.kubectl("get", "namespace", NAMESPACE, check=False).returncode != 0:
        plane.kubectl("create", "namespace", NAMESPACE)
    # cert-manager's own CRDs (its Go module), so the cert-manager variants' Certificates and Issuers are
    # validated too; no cert-manager controller runs.
    plane.kubectl("apply", "--server-side", "-f", str(tools.cert_manager_crds()))
    # `kubectl wait` errors out on a CRD whose status has no conditions yet (just created, a busy API server)
    # instead of waiting: poll until both are Established.
    deadline = time.monotonic() + 60
    while plane.kubectl("wait", "--for=condition=Established", "crd/certificates.cert-manager.io",
                        "crd/issuers.cert-manager.io", "--timeout=10s", check=False).returncode != 0:
        assert time.monotonic() < deadline, "cert-manager's CRDs never became Established"
        time.sleep(0.5)
    for variant, docs in _renders(tmp_path).items():
        assert len(docs) >= 8, variant
        done = plane.kubectl("apply", "--dry-run=server", "-f", "-", check=False,
                             input=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
        assert done.returncode == 0, f"{variant}:\n{done.stderr}"
        assert done.stdout.count("(server dry run)") == len(docs), f"{variant}:\n{done.stdout}"


def _secret_files(plane: ControlPlane, out: Path) -> Certs:
    secret = json.loads(plane.kubectl("get", "secret", "-n", NAMESPACE, "overlay-guard-tls", "-o", "json").stdout)
    out.mkdir(parents=True, exist_ok=True)
    for key in ("ca.crt", "tls.crt", "tls.key"):
        path = out / key
        path.write_bytes(base64.b64decode(secret["data"][key]))
        path.chmod(0o600)
    return Certs(out)


@pytest.fixture
def unrouted(guard: Guard) -> Iterator[Guard]:
    """The suite's own registration removed: the installed configurations are the only ones."""
    with guard.unregistered():
        yield guard


def _denies_a_conflict(guard: Guard, hook: Webhook, label: str) -> None:
    guard.wait_effective(hook)
    pool = guard.new_pool(label)
    first, second = unique("e2e-installed-a"), unique("e2e-installed-b")
    admitted = apply(guard.plane, overlay(first, pool, test=label, price="0.5"))
    assert admitted.returncode == 0, admitted.stderr

    denied = apply(guard.plane, overlay(second, pool, test=label, priceAdjustment="-20%"))

    assert denied.returncode == 1, denied.stdout
    assert VALIDATOR in denied.stderr and "same-weight-conflict" in denied.stderr and first in denied.stderr


def _webhook(guard: Guard, certs: Certs, name: str) -> Webhook:
    # The installed ValidatingAdmissionPolicy lets only the release's ServiceAccount write the Leases in its
    # namespace; this stand-in runs as the suite's admin, so its Leases live in `default`.
    hook = Webhook(guard.plane, certs, name, extra_args=("--leader-election-namespace", "default"))
    # Registered with the guard so a failure report shows its log and the session stops it.
    guard.extra.append(hook)
    hook.start()
    return hook


def test_readme_helm_install_enforces(unrouted: Guard, label: str, tmp_path: Path) -> None:
    guard, plane, home = unrouted, unrouted.plane, tmp_path / "home"
    # The README's block names the image with $REGISTRY; this cluster runs no pods, so no registry is dialled.
    _readme.run(plane, "install-helm", home=home, extra_env={"REGISTRY": "registry.example"})
    hook: Webhook | None = None
    try:
        for kind in CONFIG_KINDS:
            config = json.loads(plane.kubectl("get", kind.lower(), RELEASE, "-o", "json").stdout)
            assert config["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
            assert config["webhooks"][0]["clientConfig"]["service"]["namespace"] == NAMESPACE
        issued = _secret_files(plane, tmp_path / "issued")
        hook = _webhook(guard, issued, "helm")

        # Point the release at the process by URL; the certificate the chart issued is kept.
        _helm(plane, home, "upgrade", RELEASE, "charts/overlay-guard", "--namespace", NAMESPACE, "--reuse-values",
              "--set", f"webhook.url={hook.url}")

        kept = _secret_files(plane, tmp_path / "after-upgrade")
        for key in ("ca.crt", "tls.crt", "tls.key"):
            assert (kept.directory / key).read_bytes() == (issued.directory / key).read_bytes(), key
        _denies_a_conflict(guard, hook, label)

        # Near expiry (its renew-after in the past), the next upgrade re-issues the serving certificate
        # from the same CA: the caBundle the API server holds stays valid.
        plane.kubectl("annotate", "--overwrite", "secret", "-n", NAMESPACE, "overlay-guard-tls",
                      "overlay-guard.io/renew-after=1")
        _helm(plane, home, "upgrade", RELEASE, "charts/overlay-guard", "--namespace", NAMESPACE, "--reuse-values")
        renewed = _secret_files(plane, tmp_path / "renewed")
        assert (renewed.directory / "tls.crt").read_bytes() != (issued.directory / "tls.crt").read_bytes()
        assert (renewed.directory / "ca.crt").read_bytes() == (issued.directory / "ca.crt").read_bytes()
        config = json.loads(plane.kubectl("get", "validatingwebhookconfiguration", RELEASE, "-o", "json").stdout)
        bundle = base64.b64decode(config["webhooks"][0]["clientConfig"]["caBundle"])
        assert bundle == (issued.directory / "ca.crt").read_bytes()
    finally:
        _helm(plane, home, "uninstall", RELEASE, "--namespace", NAMESPACE)
        if hook is not None:
            hook.stop()
    assert plane.kubectl("get", "validatingwebhookconfiguration", RELEASE, check=False).returncode != 0


def test_readme_kustomize_install_enforces(unrouted: Guard, label: str, tmp_path: Path) -> None:
    guard, plane = unrouted, unrouted.plane
    root = _sandbox(tmp_path / "checkout")
    _readme.run(plane, "install-kustomize", cwd=root, home=tmp_path / "home")
    hook: Webhook | None = None
    try:
        certs = Certs(root / ".certs")
        hook = _webhook(guard, certs, "kustomize")
        # As the rest of the suite does: the applied configurations with the service swapped for a URL.
        plane.kubectl("apply", "-f", "-", input=json.dumps(
            {"apiVersion": "v1", "kind": "List", "items": webhook_configurations(plane, certs, hook.url)}))
        _denies_a_conflict(guard, hook, label)
    finally:
        # Not the Namespace: with no namespace controller here it would stay Terminating for good.
        plane.kubectl("delete", "-n", NAMESPACE, "deployment,service,serviceaccount,poddisruptionbudget,secret",
                      "-l", "app.kubernetes.io/name=overlay-guard", "--ignore-not-found")
        plane.kubectl("delete", *(f"{k.lower()}/{RELEASE}" for k in CONFIG_KINDS), "clusterrole/overlay-guard",
                      "clusterrolebinding/overlay-guard", "validatingadmissionpolicy/overlay-guard-leases",
                      "validatingadmissionpolicybinding/overlay-guard-leases", "--ignore-not-found")
        if hook is not None:
            hook.stop()
