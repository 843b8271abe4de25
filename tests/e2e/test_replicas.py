"""Issue 29 against the real kube-apiserver: three webhook processes behind a round-robin proxy (each
request to the next replica, as kube-proxy spreads the API server's connections), one ledger of
admissions in flight. Conflicting applies sent at once: exactly one admitted, every round. The
forged-review, delete-then-replace and race scenarios of test_security.py run again through the proxy,
and the cost of three replicas against one is measured."""

from __future__ import annotations

import json
import ssl
import statistics
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from . import _scenarios
from ._guard import Guard, Webhook, apply, as_input, exists, overlay, unique
from ._proxy import RoundRobin

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("replicas")]

VALIDATOR = 'admission webhook "nodeoverlays.validate.overlay-guard.io" denied the request'
ROUNDS = 50
SAMPLES = 30



@pytest.fixture(scope="module")
def replicas(guard: Guard) -> Iterator[RoundRobin]:
    hooks = [guard.webhook, guard.spawn("replica-b"), guard.spawn("replica-c")]
    proxy = RoundRobin(hooks, guard.certs)
    proxy.start()
    try:
        guard.route_to(proxy)
        yield proxy
    finally:
        guard.route_to(guard.webhook)
        proxy.stop()
        for hook in hooks[1:]:
            hook.stop()


def _at_once(guard: Guard, files: list[Path]) -> list[subprocess.CompletedProcess[str]]:
    with ThreadPoolExecutor(len(files)) as threads:
        futures = [threads.submit(guard.plane.kubectl, "apply", "-f", str(f), check=False) for f in files]
        return [f.result() for f in futures]


def test_conflicting_applies_at_once_through_three_replicas_exactly_one_admitted(
        guard: Guard, replicas: RoundRobin, label: str, tmp_path: Path) -> None:
    pool = guard.new_pool(label)
    conflicts_before = sum(h.metric("overlay_guard_ledger_writes_total", result="conflict") for h in replicas.hooks)
    tally: dict[int, int] = {}
    for round_ in range(ROUNDS):
        # A weight of its own per round: a round's winner never meets the next round's candidates.
        weight = 100 + round_
        names = [unique(f"e2e-r{round_}-{i}") for i in range(2 + round_ % 2)]
        files = []
        for i, name in enumerate(names):
            files.append(tmp_path / f"{name}.json")
            files[-1].write_text(as_input(overlay(name, pool, weight=weight, test=label, price=f"0.{i + 1}")))
        results = _at_once(guard, files)
        admitted = [r.returncode == 0 for r in results]
        assert admitted.count(True) == 1, (round_, [r.stderr for r in results])
        winner = names[admitted.index(True)]
        for result, ok in zip(results, admitted, strict=True):
            assert ok or (VALIDATOR in result.stderr and winner in result.stderr), (round_, result.stderr)
        assert [exists(guard.plane, "nodeoverlay", n) for n in names] == admitted
        tally[len(names)] = tally.get(len(names), 0) + 1
    conflicts = sum(h.metric("overlay_guard_ledger_writes_total", result="conflict")
                    for h in replicas.hooks) - conflicts_before
    print(f"{ROUNDS} rounds ({tally}) through {len(replicas.hooks)} replicas: exactly one admitted in each; "
          f"{conflicts:g} ledger writes lost a compare-and-swap and were judged again")


def _latencies(guard: Guard, label: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        harmless = overlay(unique("e2e-cost"), "e2e-cost-matches-nothing", weight=None, test=label,
                           capacity={"example.com/cost": "1"})
        began = time.monotonic()
        done = apply(guard.plane, harmless)
        out.append(time.monotonic() - began)
        assert done.returncode == 0, done.stderr
    return out


def _figures(seconds: list[float]) -> tuple[float, float]:
    ordered = sorted(seconds)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def test_cost_of_three_replicas_against_one(guard: Guard, replicas: RoundRobin, label: str) -> None:
    three = _latencies(guard, label, SAMPLES)
    with guard.routed_to(guard.webhook):
        one = _latencies(guard, label, SAMPLES)
    guard.route_to(replicas)
    (m3, p3), (m1, p1) = _figures(three), _figures(one)
    print(f"kubectl apply of a harmless overlay, {SAMPLES} each: three replicas median {m3 * 1000:.0f} ms, "
          f"p99 {p3 * 1000:.0f} ms; one replica median {m1 * 1000:.0f} ms, p99 {p1 * 1000:.0f} ms; "
          f"ratio {m3 / m1:.2f}x (median), {p3 / p1:.2f}x (p99)")
    # The target is 1.5x; the bound leaves room for a shared two-core machine.
    assert m3 / m1 <= 2.0


def _review(obj: dict[str, Any], dry_run: bool) -> bytes:
    gvk = {"group": "karpenter.sh", "version": "v1alpha1", "kind": "NodeOverlay"}
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "kind": gvk, "resource": {**gvk, "resource": "nodeoverlays"},
        "name": obj["metadata"]["name"], "operation": "CREATE", "object": obj, "dryRun": dry_run,
        "userInfo": {"username": "e2e"}}}).encode()


def _rate(hook: Webhook, dry_run: bool, n: int, threads: int) -> float:
    """Admissions per second of one harmless overlay posted straight to `hook`, `threads` at a time (one
    name: its record is replaced each time, so the ledger stays one record long)."""
    body = _review(overlay("e2e-rate", "e2e-rate-matches-nothing", weight=None,
                           capacity={"example.com/rate": "1"}), dry_run)
    context = ssl.create_default_context(cafile=str(hook.certs.ca))

    def post(_: int) -> bool:
        req = urllib.request.Request(hook.url + "/validate", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10, context=context) as resp:
            return bool(json.load(resp)["response"]["allowed"])

    began = time.monotonic()
    with ThreadPoolExecutor(threads) as pool:
        assert all(pool.map(post, range(n)))
    return n / (time.monotonic() - began)


def test_admissions_per_second_with_the_ledger_against_without(guard: Guard) -> None:
    """A dry run is judged the same way and writes no record: the difference is the ledger's write."""
    hook = guard.webhook
    _rate(hook, True, 20, 4)  # warm: connections, the candidate's checks
    for threads in (1, 4):
        without = _rate(hook, True, SAMPLES * 4, threads)
        with_ledger = _rate(hook, False, SAMPLES * 4, threads)
        print(f"admissions/s straight to one replica, {threads} at a time: {with_ledger:.0f} with the ledger, "
              f"{without:.0f} without (dry runs); {with_ledger / without:.2f}x")


class TestThroughThreeReplicas(_scenarios.Scenarios):
    """The scenarios of test_security.py again, through three replicas."""
