"""The webhook configurations (one source of truth for manifests/ and `python -m certs`), the
TLS Secret, and a kustomization that deploys the base with both."""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from typing import Any

from ruamel.yaml import YAML

from certs.generate import SERVICE

NAME = "overlay-guard"
NAMESPACE = "overlay-guard"
SECRET = "overlay-guard-tls"
GROUP = "karpenter.sh"
# NodeOverlays are the guard's purpose: fail closed. NodePools are Karpenter's own objects:
# never block them because the guard is down.
TARGETS = (("nodeoverlays", "v1alpha1", "Fail"), ("nodepools", "v1", "Ignore"))


def _webhook(kind: str, resource: str, policy: str, namespace: str, path: str,
             ca_bundle: bytes | None, mutating: bool) -> dict[str, Any]:
    client: dict[str, Any] = {"service": {"name": SERVICE, "namespace": namespace, "path": path, "port": 443}}
    if ca_bundle is not None:
        client["caBundle"] = base64.b64encode(ca_bundle).decode()
    hook: dict[str, Any] = {
        "name": f"{resource}.{kind}.overlay-guard.io",
        "admissionReviewVersions": ["v1"],
        "clientConfig": client,
        # DELETE is always allowed, so it is not routed here at all: deleting an overlay
        # keeps working while the webhook is down.
        "rules": [{"apiGroups": [GROUP], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
                   "resources": [resource], "scope": "Cluster"}],
        "failurePolicy": policy,
        "matchPolicy": "Equivalent",
        "sideEffects": "NoneOnDryRun",
        "timeoutSeconds": 5,
    }
    if mutating:
        # The patch only rewrites overlay-guard.io/ annotations and is idempotent, so running
        # again after a later mutating webhook changed the object is safe.
        hook["reinvocationPolicy"] = "IfNeeded"
    return hook


def webhook_configurations(namespace: str = NAMESPACE,
                           ca_bundle: bytes | None = None) -> list[dict[str, Any]]:
    """ValidatingWebhookConfiguration and MutatingWebhookConfiguration `overlay-guard`, each
    with one entry for nodeoverlays (Fail) and one for nodepools (Ignore)."""
    out = []
    for api_kind, kind, path, mutating in (
            ("ValidatingWebhookConfiguration", "validate", "/validate", False),
            ("MutatingWebhookConfiguration", "mutate", "/mutate", True)):
        out.append({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": api_kind,
            "metadata": {"name": NAME, "labels": {"app.kubernetes.io/name": NAME}},
            "webhooks": [_webhook(kind, resource, policy, namespace, path, ca_bundle, mutating)
                         for resource, _, policy in TARGETS],
        })
    return out


def secret(namespace: str, ca_pem: bytes, cert_pem: bytes, key_pem: bytes) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": SECRET, "namespace": namespace, "labels": {"app.kubernetes.io/name": NAME}},
        "data": {"ca.crt": base64.b64encode(ca_pem).decode(), "tls.crt": base64.b64encode(cert_pem).decode(),
                 "tls.key": base64.b64encode(key_pem).decode()},
    }


def kustomization(base: str, namespace: str) -> dict[str, Any]:
    """Deploys the base with the generated Secret and the caBundle in one `kubectl apply -k`,
    so the webhook configurations never exist without a caBundle (with failurePolicy Fail
    that would block every NodeOverlay write until the second apply)."""
    out: dict[str, Any] = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [base, "secret.yaml"],
        "patches": [{"path": "webhook-configurations.yaml"}],
    }
    if namespace != NAMESPACE:
        out["namespace"] = namespace
    return out


def dump(docs: Sequence[Mapping[str, Any]]) -> str:
    yaml = YAML(typ="rt")
    yaml.default_flow_style = False
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    buf = io.StringIO()
    yaml.dump_all([dict(d) for d in docs], buf)
    return buf.getvalue()
