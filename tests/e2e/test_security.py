"""Issue 13 against the real kube-apiserver: a denial rests only on objects that exist (a forged
review, a delete followed by a replacement, a real race), and `--client-ca` with an API server
whose admission configuration presents a client certificate."""

from __future__ import annotations

import json
import ssl
import urllib.request
from pathlib import Path

import pytest

from certs import generate

from . import _cluster, _scenarios
from ._guard import Guard, Webhook, apply, forge, overlay, unique

pytestmark = pytest.mark.e2e

VALIDATOR = _scenarios.VALIDATOR


class TestThroughOneWebhook(_scenarios.Scenarios):
    """The admission scenarios through the suite's one webhook."""


# --- --client-ca with the API server's admission configuration ------------------------------------

class MetricsProbedWebhook(Webhook):
    """With --client-ca the HTTPS port refuses clients without a certificate, probes included:
    readiness is read from the plain metrics port, as the chart's probes do."""

    def readyz(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{_cluster.LOOPBACK}:{self.metrics_port}/readyz", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False


def admission_configuration(directory: Path, hook: Webhook, cert: Path, key: Path) -> Path:
    """docs/webhook.md's steps (Security): a kubeconfig naming the webhook's host:port with the client
    certificate, referenced from an AdmissionConfiguration for both admission plugins."""
    kubeconfig = directory / "admission-kubeconfig.json"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "users": [{"name": f"{_cluster.LOOPBACK}:{hook.port}",
                   "user": {"client-certificate": str(cert), "client-key": str(key)}}]}))
    webhook_config = {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "WebhookAdmissionConfiguration",
                      "kubeConfigFile": str(kubeconfig)}
    config = directory / "admission-configuration.json"
    config.write_text(json.dumps({
        "apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
        "plugins": [{"name": name, "configuration": webhook_config}
                    for name in ("ValidatingAdmissionWebhook", "MutatingAdmissionWebhook")]}))
    return config


def test_client_ca_admits_only_the_api_server(guard: Guard, label: str, tmp_path: Path) -> None:
    ca_cert, ca_key = generate.new_ca("e2e-apiserver-client-ca")
    cert, key = generate.issue_client(ca_cert, ca_key, "kube-apiserver-webhook-client")
    paths = {n: tmp_path / n for n in ("client-ca.crt", "client.crt", "client.key")}
    paths["client-ca.crt"].write_bytes(generate.cert_pem(ca_cert))
    paths["client.crt"].write_bytes(generate.cert_pem(cert))
    paths["client.key"].write_bytes(generate.key_pem(key))
    paths["client.key"].chmod(0o600)

    hook = MetricsProbedWebhook(guard.plane, guard.certs, "mtls",
                                extra_args=("--client-ca", str(paths["client-ca.crt"])))
    guard.extra.append(hook)
    config = admission_configuration(tmp_path, hook, paths["client.crt"], paths["client.key"])
    guard.plane.restart_apiserver([f"--admission-control-config-file={config}"])
    try:
        hook.start()
        guard.webhook.wait_ready()
        with guard.routed_to(hook):  # returns once the API server's calls reach it
            pool = guard.new_pool(label)
            first = overlay(unique("e2e-mtls-first"), pool, test=label, price="0.5")
            assert apply(guard.plane, first).returncode == 0
            done = apply(guard.plane, overlay(unique("e2e-mtls-second"), pool, test=label, price="0.4"))
            assert done.returncode == 1 and VALIDATOR in done.stderr, done.stderr
            # Anyone else is refused in the handshake: a forged review cannot even be sent.
            with pytest.raises((ssl.SSLError, OSError)):
                forge(hook, overlay(unique("e2e-forged"), pool, price="0.01"))
            # With the API server's certificate it would be heard (the CA is the gate).
            holder = ssl.create_default_context(cafile=str(guard.certs.ca))
            holder.load_cert_chain(str(paths["client.crt"]), str(paths["client.key"]))
            assert forge(hook, overlay(unique("e2e-dry"), pool, price="0.01"), holder)["allowed"] is False
    finally:
        hook.stop()
        guard.plane.restart_apiserver()
        guard.webhook.wait_ready()
        guard.route_to(guard.webhook)
