"""Issue 13 against the real kube-apiserver: a denial rests only on objects that exist (a forged
review, a delete followed by a replacement, a real race), and `--client-ca` with an API server
whose admission configuration presents a client certificate."""

from __future__ import annotations

import json
import ssl
import subprocess
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from certs import generate

from . import _cluster
from ._guard import Guard, Webhook, apply, as_input, exists, forge, overlay, unique

pytestmark = pytest.mark.e2e

VALIDATOR = 'admission webhook "nodeoverlays.validate.overlay-guard.io" denied the request'
# kubectl's own start and round trips, with a denial's live reads.
PROMPT = 5.0
# A record's deadline with no other validating webhook for NodeOverlays (webhook/chain.py's PERSIST); a forged
# one is gone at the first denial after it, or the next sweep (0.5 s), plus a kubectl round trip.
DEADLINE = 3.0
FORGED_BOUND = DEADLINE + 3.0


def timed_apply(guard: Guard, obj: dict[str, Any]) -> tuple[subprocess.CompletedProcess[str], float]:
    began = time.monotonic()
    done = apply(guard.plane, obj)
    return done, time.monotonic() - began


def test_a_forged_review_holds_a_conflicting_write_off_until_its_deadline_at_most(guard: Guard, label: str) -> None:
    pool = guard.new_pool(label)
    forged = overlay(unique("e2e-forged"), pool, test=label, price="0.01")
    began = time.monotonic()
    assert forge(guard.webhook, forged)["allowed"] is True  # recorded: the webhook cannot tell

    real = overlay(unique("e2e-real"), pool, test=label, priceAdjustment="-20%")
    first = apply(guard.plane, real)
    # Within the record's deadline the denial says it rests on an admission in flight.
    assert first.returncode == 1 and VALIDATOR in first.stderr, first.stderr
    assert forged["metadata"]["name"] in first.stderr and "being admitted right now" in first.stderr
    while (done := apply(guard.plane, real)).returncode != 0:
        assert time.monotonic() - began < FORGED_BOUND, done.stderr
        time.sleep(0.25)
    seconds = time.monotonic() - began
    print(f"a forged review held a conflicting real write off for {seconds:.2f}s (deadline {DEADLINE:g}s)")
    assert seconds >= DEADLINE - 0.5
    assert not exists(guard.plane, "nodeoverlay", forged["metadata"]["name"])
    # Real conflicts are still refused: the real overlay is stored and confirmed.
    again = apply(guard.plane, overlay(unique("e2e-late"), pool, test=label, price="0.3"))
    assert again.returncode == 1 and VALIDATOR in again.stderr and real["metadata"]["name"] in again.stderr
    assert "being admitted right now" not in again.stderr


@pytest.mark.parametrize("settled", [False, True], ids=["while-held", "after-the-watch"])
def test_a_deleted_overlay_does_not_deny_its_replacement(guard: Guard, label: str, settled: bool) -> None:
    pool = guard.new_pool(label)
    old = overlay(unique("e2e-old"), pool, test=label, price="0.5")
    assert apply(guard.plane, old).returncode == 0
    if settled:
        time.sleep(1.0)  # the watch has delivered it: it is in the cache, not held
    guard.plane.kubectl("delete", "nodeoverlay", old["metadata"]["name"], "--wait=false")

    done, seconds = timed_apply(guard, overlay(unique("e2e-new"), pool, test=label, price="0.4"))

    assert done.returncode == 0, done.stderr
    assert seconds < PROMPT, f"admitted after {seconds:.1f}s"
    print(f"replacement ({'after the watch' if settled else 'while held'}) admitted in {seconds:.2f}s")


def test_replace_force_judges_by_the_new_incarnation(guard: Guard, label: str, tmp_path: Path) -> None:
    pool = guard.new_pool(label)
    name = unique("e2e-replaced")
    assert apply(guard.plane, overlay(name, pool, test=label, weight=10, price="0.5")).returncode == 0
    path = tmp_path / "replacement.json"
    path.write_text(as_input(overlay(name, pool, test=label, weight=20, price="0.5")))
    # Delete and create in one command (a new uid): the old incarnation's watch DELETE must not
    # release the hold of the new one, and the old one must not deny anything.
    done = guard.plane.kubectl("replace", "--force", "-f", str(path), check=False)
    assert done.returncode == 0, done.stderr

    clash = apply(guard.plane, overlay(unique("e2e-clash"), pool, test=label, weight=20, priceAdjustment="-5%"))
    assert clash.returncode == 1 and VALIDATOR in clash.stderr and name in clash.stderr, clash.stderr
    done, seconds = timed_apply(guard, overlay(unique("e2e-fine"), pool, test=label, weight=10, price="0.3"))
    assert done.returncode == 0 and seconds < PROMPT, (seconds, done.stderr)


def test_two_conflicting_applies_at_once_exactly_one_admitted(guard: Guard, label: str, tmp_path: Path) -> None:
    pool = guard.new_pool(label)
    for round_ in range(5):
        names = (unique("e2e-race-a"), unique("e2e-race-b"))
        files = (tmp_path / f"a{round_}.json", tmp_path / f"b{round_}.json")
        files[0].write_text(as_input(overlay(names[0], pool, test=label, price="0.5")))
        files[1].write_text(as_input(overlay(names[1], pool, test=label, priceAdjustment="-20%")))
        with ThreadPoolExecutor(2) as threads:
            futures = [threads.submit(guard.plane.kubectl, "apply", "-f", str(f), check=False) for f in files]
            results = [f.result() for f in futures]
        admitted = [r.returncode == 0 for r in results]
        assert sorted(admitted) == [False, True], (round_, [r.stderr for r in results])
        loser = results[admitted.index(False)].stderr
        assert VALIDATOR in loser and names[admitted.index(True)] in loser, loser
        assert [exists(guard.plane, "nodeoverlay", n) for n in names] == admitted
        guard.plane.kubectl("delete", "nodeoverlay", *names, "--ignore-not-found")


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
    """The README's steps: a kubeconfig naming the webhook's host:port with the client
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
