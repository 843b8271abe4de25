"""Issue 11 against the real kube-apiserver: the audit of two webhook processes sharing one Lease.
Overlays that conflict, written while no webhook was registered, are reported as Events once the
guard is back; only the Lease holder writes; killing it hands the Lease over within the Lease
duration, and the new leader reports the fix."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from ._guard import Guard, Webhook, apply, events_about, overlay, unique, wait_for

pytestmark = pytest.mark.e2e

LEASE_DURATION = 6.0
RETRY = 1.0
# What each audit webhook runs with: its own Lease, in a namespace of this test, short timings.
AUDIT_ARGS = ("--audit-debounce", "0.5", "--lease-duration", str(LEASE_DURATION), "--lease-renew-deadline", "4",
              "--lease-retry-period", str(RETRY))


def leader_gauge(hook: Webhook) -> float:
    return hook.metric("overlay_guard_audit_leader")


@pytest.fixture
def auditors(guard: Guard) -> Iterator[tuple[str, list[Webhook]]]:
    """A namespace for the Lease, and a way to start audit webhooks on it (stopped afterwards)."""
    namespace = unique("e2e-audit")
    guard.plane.kubectl("create", "namespace", namespace)
    started: list[Webhook] = []
    try:
        yield namespace, started
    finally:
        for hook in started:
            hook.stop()
        guard.plane.kubectl("delete", "namespace", namespace, "--wait=false")


def spawn(guard: Guard, started: list[Webhook], namespace: str, name: str) -> Webhook:
    hook = guard.spawn(name, extra_args=(*AUDIT_ARGS, "--leader-election-namespace", namespace,
                                         "--leader-election-lease", "audit"))
    started.append(hook)
    return hook


def unguarded_conflict(guard: Guard, label: str, prefix: str) -> tuple[str, set[str], dict[str, Any]]:
    """A NodePool and two overlays setting different prices on it at one weight, applied with the webhook
    unregistered (nothing stops the conflict): the NodePool's name, the overlays' names, and the second overlay."""
    pool = guard.new_pool(label)
    a = overlay(unique(f"{prefix}-a"), pool, test=label, price="0.5")
    b = overlay(unique(f"{prefix}-b"), pool, test=label, price="0.7")
    with guard.unregistered():
        done = apply(guard.plane, a, b)
        assert done.returncode == 0, done.stderr
    return pool, {a["metadata"]["name"], b["metadata"]["name"]}, b


def test_audit_reports_unguarded_conflicts_once_and_hands_over(
        guard: Guard, label: str, auditors: tuple[str, list[Webhook]]) -> None:
    namespace, started = auditors
    pool, names, b = unguarded_conflict(guard, label, "e2e-audit")

    first = spawn(guard, started, namespace, f"audit-1-{label}")
    second = spawn(guard, started, namespace, f"audit-2-{label}")
    leading = wait_for("one leader", lambda: [h for h in (first, second) if leader_gauge(h) == 1.0])
    assert len(leading) == 1
    leader = leading[0]
    follower = second if leader is first else first

    conflicts = wait_for("conflict events", lambda: [
        e for e in events_about(guard, names | {pool}) if e["reason"] == "OverlayConflict"])
    regarding = {(e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in conflicts}
    assert ("NodePool", pool) in regarding and any(k == "NodeOverlay" for k, _ in regarding)
    assert all(e["type"] == "Warning" and e["message"] for e in conflicts)

    # Only the leader writes; a stable cluster gets nothing new.
    time.sleep(3)
    assert follower.metric("overlay_guard_audit_events_written_total") == 0.0
    assert leader.metric("overlay_guard_audit_events_written_total") > 0.0
    assert leader.metric("overlay_guard_audit_overlays", status="Conflict") >= 1.0
    assert leader.metric("overlay_guard_audit_findings", code="same-weight-conflict") >= 1.0
    before = sorted(e["metadata"]["name"] for e in events_about(guard, names | {pool}))

    assert leader.proc is not None
    killed = time.monotonic()
    leader.proc.kill()
    wait_for("the follower to take over", lambda: leader_gauge(follower) == 1.0, timeout=3 * LEASE_DURATION)
    handover = time.monotonic() - killed
    print(f"audit leader handover after SIGKILL: {handover:.1f} s (Lease {LEASE_DURATION:g} s, retry {RETRY:g} s)")
    # The follower waits one Lease duration from the last renewal it saw (at most a retry before the kill).
    assert handover <= LEASE_DURATION + 3 * RETRY, handover
    time.sleep(2)
    assert sorted(e["metadata"]["name"] for e in events_about(guard, names | {pool})) == before  # no duplicates

    # The new leader reports the fix once: the conflict's overlay(s) get OverlayApplied.
    b["spec"]["weight"] = 20
    with guard.unregistered():
        done = apply(guard.plane, b)
        assert done.returncode == 0, done.stderr
    applied = wait_for("a resolving event", lambda: [
        e for e in events_about(guard, names) if e["reason"] == "OverlayApplied"])
    assert all(e["type"] == "Normal" for e in applied)
    assert {e["involvedObject"]["name"] for e in applied} <= {
        e["involvedObject"]["name"] for e in conflicts if e["involvedObject"]["kind"] == "NodeOverlay"}


def set_condition(guard: Guard, name: str, status: str, reason: str, message: str) -> None:
    """Write the ValidationSucceeded condition as Karpenter does: through the status subresource, for the
    overlay's current generation (no Karpenter runs here)."""
    obj = json.loads(guard.plane.kubectl("get", "nodeoverlay", name, "-o", "json").stdout)
    generation = obj["metadata"]["generation"]
    conditions = [{"type": t, "status": status, "reason": r, "message": message, "observedGeneration": generation,
                   "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
                  for t, r in (("ValidationSucceeded", reason), ("Ready", reason))]
    guard.plane.kubectl("patch", "nodeoverlay", name, "--subresource=status", "--type=merge",
                        "-p", json.dumps({"status": {"conditions": conditions}}))


def test_a_planted_disagreement_with_karpenter_is_an_event_and_a_gauge_until_corrected(
        guard: Guard, label: str, auditors: tuple[str, list[Webhook]]) -> None:
    namespace, started = auditors
    _, names, _ = unguarded_conflict(guard, label, "e2e-predict")
    hook = guard.spawn(f"predict-{label}", extra_args=(
        *AUDIT_ARGS, "--prediction-grace", "1", "--leader-election-namespace", namespace,
        "--leader-election-lease", "audit"))
    started.append(hook)
    wait_for("the leader's audit", lambda: hook.metric("overlay_guard_audit_overlays", status="Conflict") >= 1.0)
    assert hook.metric("overlay_guard_prediction_mismatches", kind="status") == 0.0  # nothing reconciled yet

    # The plant: Karpenter "says" both are Applied; the guard predicts one of them in Conflict.
    planted = time.monotonic()
    for name in sorted(names):
        set_condition(guard, name, "True", "ValidationSucceeded", "")
    [mismatch] = wait_for("the mismatch event", lambda: [
        e for e in events_about(guard, names) if e["reason"] == "OverlayPredictionMismatch"])
    loser = mismatch["involvedObject"]["name"]
    assert mismatch["type"] == "Warning"
    assert mismatch["message"].startswith("guard predicts Conflict") and \
        mismatch["message"].endswith("Karpenter says Applied")
    assert (names - {loser}).pop() in mismatch["message"]  # the overlay it conflicts with
    wait_for("the gauge", lambda: hook.metric("overlay_guard_prediction_mismatches", kind="status") == 1.0)
    reported = time.monotonic() - planted

    # Corrected as Karpenter would write it: the gauge goes back to 0.
    corrected = time.monotonic()
    set_condition(guard, loser, "False", "Conflict", "conflict with another overlay")
    wait_for("the gauge to clear", lambda: hook.metric("overlay_guard_prediction_mismatches", kind="status") == 0.0)
    print(f"planted mismatch reported after {reported:.1f} s, correction cleared after "
          f"{time.monotonic() - corrected:.1f} s (grace 1 s, audit debounce 0.5 s)")
    assert len([e for e in events_about(guard, names) if e["reason"] == "OverlayPredictionMismatch"]) == 1
