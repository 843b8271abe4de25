"""The audit without a cluster: what it plans to write (dedup, resolution, bound), the Lease
election against a fake API with the API server's resourceVersion rule, and the gauges.
(Against a real API server: tests/e2e/test_audit.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from simulation import findings
from simulation.semantics import model
from tests.webhook_support import CONFLICTING, P5, FakeEvents, cache_of, nodepool, overlay
from webhook import audit, events, leader
from webhook.config import Config


def reasons(api: FakeEvents) -> list[tuple[str, str, str]]:
    return sorted((b["reason"], b["regarding"]["kind"], b["regarding"]["name"]) for b in api.created.values())




async def test_conflict_is_reported_once_on_the_overlays_and_the_nodepool() -> None:
    cache = await cache_of(*CONFLICTING)
    api = FakeEvents()
    auditor = audit.Auditor(cache, api, instance="me")
    result = await auditor.audit(cache.snapshot)
    assert sorted(result.status.values()) == ["Applied", "Conflict"]  # Karpenter applies one of the two
    got = reasons(api)
    assert ("OverlayConflict", "NodePool", "gpu") in got
    assert {n for r, k, n in got if r == "OverlayConflict" and k == "NodeOverlay"} <= {"a", "b"}
    assert any(k == "NodeOverlay" for _, k, _ in got)
    conflict = next(b for b in api.created.values() if b["reason"] == "OverlayConflict")
    assert conflict["type"] == "Warning" and conflict["reportingController"] == events.CONTROLLER
    assert "p5" in conflict["note"]  # the witness: an instance type of the family
    before = dict(api.created)
    await auditor.audit(cache.snapshot)
    assert api.created == before and not api.patched  # a stable cluster emits nothing new


async def test_a_new_leader_does_not_duplicate_what_an_earlier_one_wrote() -> None:
    cache = await cache_of(*CONFLICTING)
    api = FakeEvents()
    await audit.Auditor(cache, api, instance="first").audit(cache.snapshot)
    count = len(api.created)
    second = audit.Auditor(cache, api, instance="second")
    await second.audit(cache.snapshot)
    assert len(api.created) == count and not api.patched
    # It counts them as announced: fixing the conflict later resolves them.
    assert second.ledger.active


async def test_a_fixed_conflict_emits_one_resolving_event_and_a_recurrence_patches_its_series() -> None:
    cache = await cache_of(*CONFLICTING)
    api = FakeEvents()
    auditor = audit.Auditor(cache, api, instance="me")
    await auditor.audit(cache.snapshot)
    reported = sorted(b["regarding"]["name"] for b in api.created.values()
                      if b["reason"] == "OverlayConflict" and b["regarding"]["kind"] == "NodeOverlay")
    assert reported
    fixed = overlay("b", price="2", family="m5", extra=P5)  # no longer on the same cells
    cache.load([CONFLICTING[0], CONFLICTING[1], fixed])
    await cache.rebuild()
    before = set(api.created)
    await auditor.audit(cache.snapshot)
    new = [api.created[n] for n in set(api.created) - before]
    assert sorted((b["reason"], b["regarding"]["name"]) for b in new) == [("OverlayApplied", n) for n in reported]
    assert all(b["type"] == "Normal" for b in new)
    await auditor.audit(cache.snapshot)
    assert len(api.created) == len(before) + len(reported)  # resolved once
    cache.load(CONFLICTING)
    await cache.rebuild()
    await auditor.audit(cache.snapshot)
    assert len(api.created) == len(before) + len(reported)  # same names: the events exist already...
    assert {name for name, _ in api.patched} >= {n for n in before if api.created[n]["reason"] == "OverlayConflict"}
    assert all(body["series"]["count"] == 2 for _, body in api.patched)  # ...and count again


async def test_no_match_and_invalid() -> None:
    typo = overlay("typo", price="1", extra=[{"key": "karpenter.k8s.aws/instance-famliy", "operator": "In",
                                              "values": ["p5"]}])
    broken = overlay("broken", price="not-a-price")
    cache = await cache_of(nodepool("gpu"), typo, broken)
    api = FakeEvents()
    result = await audit.Auditor(cache, api, instance="me").audit(cache.snapshot)
    assert result.status["broken"] == "Invalid"
    got = reasons(api)
    assert ("OverlayNoMatch", "NodeOverlay", "typo") in got
    assert ("OverlayInvalid", "NodeOverlay", "broken") in got


async def test_events_per_audit_are_bounded_and_the_rest_follow() -> None:
    many = [overlay(f"o{i}", price="1", extra=P5) for i in range(6)]
    cache = await cache_of(nodepool("gpu"), *many)
    api = FakeEvents()
    auditor = audit.Auditor(cache, api, instance="me", limit=3)
    await auditor.audit(cache.snapshot)
    assert len(api.created) == 3 and auditor.deferred > 0
    while auditor.deferred:
        await auditor.audit(cache.snapshot)
        assert len(api.created) <= 3 * auditor.audits
    assert auditor.deferred == 0 and len(api.created) > 3


async def test_failed_writes_are_retried_at_the_next_audit() -> None:
    cache = await cache_of(*CONFLICTING)
    api = FakeEvents()
    api.fail = True
    auditor = audit.Auditor(cache, api, instance="me")
    await auditor.audit(cache.snapshot)
    assert not api.created and auditor.deferred > 0
    api.fail = False
    await auditor.audit(cache.snapshot)
    assert api.created and auditor.deferred == 0


async def test_a_deleted_overlay_gets_no_resolving_event() -> None:
    cache = await cache_of(*CONFLICTING)
    api = FakeEvents()
    auditor = audit.Auditor(cache, api, instance="me")
    await auditor.audit(cache.snapshot)
    cache.load([CONFLICTING[0], CONFLICTING[1]])
    await cache.rebuild()
    await auditor.audit(cache.snapshot)
    applied = [b["regarding"]["name"] for b in api.created.values() if b["reason"] == "OverlayApplied"]
    assert applied == ["a"]


async def test_gauges() -> None:
    cache = await cache_of(*CONFLICTING, overlay("fine", price="1", weight=77, family="m5"))
    auditor = audit.Auditor(cache, FakeEvents(), instance="me")
    registry = CollectorRegistry()
    registry.register(audit.AuditCollector(auditor))
    assert b"overlay_guard_audit_findings" not in generate_latest(registry)  # nothing before the first audit
    await auditor.audit(cache.snapshot)
    text = generate_latest(registry).decode()
    assert "overlay_guard_audit_leader 1.0" in text
    assert 'overlay_guard_audit_overlays{status="Conflict"} 1.0' in text
    assert 'overlay_guard_audit_overlays{status="Applied"} 2.0' in text
    assert 'overlay_guard_audit_findings{code="same-weight-conflict",severity="error"}' in text
    assert "overlay_guard_audit_cells_matched_count 3.0" in text
    assert 'overlay_guard_audit_events_written_total{reason="OverlayConflict"}' in text


# -- leader election ----------------------------------------------------------------------


class FakeLeases:
    """One Lease with the API server's rules: create fails if it exists, replace fails unless
    the resourceVersion matches; every write bumps it."""

    where = "test/lease"

    def __init__(self) -> None:
        self.record: leader.Record | None = None
        self.version = 0
        self.down = False

    def _write(self, record: leader.Record) -> leader.Record:
        self.version += 1
        self.record = dataclasses.replace(record, resource_version=str(self.version))
        return self.record

    async def get(self) -> leader.Record | None:
        if self.down:
            raise ConnectionError("API server unavailable")
        return self.record

    async def create(self, record: leader.Record) -> leader.Record:
        if self.record is not None:
            raise leader.Conflict("exists")
        return self._write(record)

    async def replace(self, record: leader.Record) -> leader.Record:
        if self.down:
            raise ConnectionError("API server unavailable")
        if self.record is None or record.resource_version != self.record.resource_version:
            raise leader.Conflict("stale resourceVersion")
        return self._write(record)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def electors(api: FakeLeases, clock: Clock, *names: str) -> list[leader.Elector]:
    return [leader.Elector(api, n, lease_duration=15, renew_deadline=10, retry_period=2, clock=clock)
            for n in names]


async def test_one_leader_and_takeover_after_the_lease_duration() -> None:
    api, clock = FakeLeases(), Clock()
    a, b = electors(api, clock, "a", "b")
    assert await a.step() and not await b.step()
    for _ in range(10):  # a renews; b keeps seeing fresh renewals
        clock.now += 2
        assert await a.step() and not await b.step()
    clock.now += 14  # a goes silent: not yet expired for b
    assert not await b.step()
    clock.now += 2
    assert await b.step() and api.record is not None and api.record.holder == "b"
    assert api.record.transitions == 1
    assert not await a.step()  # a is back: follows


async def test_racing_candidates_cannot_both_win() -> None:
    api, clock = FakeLeases(), Clock()
    a, b = electors(api, clock, "a", "b")
    results = await asyncio.gather(a.step(), b.step())
    assert sorted(results) == [False, True]


async def test_a_leader_that_cannot_renew_steps_down_before_its_lease_expires() -> None:
    api, clock = FakeLeases(), Clock()
    (a,) = electors(api, clock, "a")
    assert await a.step()
    api.down = True
    clock.now += 8
    assert await a.step()  # within the renew deadline
    clock.now += 3
    assert not await a.step() and not a.leading  # past it (11 s), before the 15 s lease expires


async def test_release_hands_over_at_the_next_retry() -> None:
    api, clock = FakeLeases(), Clock()
    a, b = electors(api, clock, "a", "b")
    assert await a.step() and not await b.step()
    await a.release()
    assert await b.step()


def test_lease_record_round_trip() -> None:
    record = leader.Record("me", 15, 3, "2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:01.000000Z", "42")
    assert leader.Record.from_lease(record.to_lease("l", "ns")) == record


def test_timings_must_nest() -> None:
    with pytest.raises(ValueError):
        leader.Elector(FakeLeases(), "a", lease_duration=10, renew_deadline=10, retry_period=2)


def test_notes_for_a_finding_without_a_witness_go_on_the_overlay_only() -> None:
    ref = findings.ObjectRef(model.NODEOVERLAY, "x")
    f = findings.make("no-match", ref, ("spec", "requirements"), "matches nothing")
    (note,) = events.notes([f])
    assert note.regarding == ref and note.reason == events.NO_MATCH
    other = findings.make("no-match", ref, ("spec", "requirements"), "matches nothing, reworded")
    assert events.notes([other])[0].name == note.name  # identity, not wording


async def test_an_unchanged_snapshot_is_not_evaluated_again(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = await cache_of(*CONFLICTING)
    calls: list[int] = []
    real = audit.evaluate

    def counted(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(audit, "evaluate", counted)
    auditor = audit.Auditor(cache, FakeEvents(), instance="me")
    await auditor.audit(cache.snapshot)
    await auditor.audit(cache.snapshot)
    assert len(calls) == 1
    cache.load([CONFLICTING[0], CONFLICTING[1]])
    await cache.rebuild()
    await auditor.audit(cache.snapshot)
    assert len(calls) == 2


class Turns:
    """The auditor's clock, counting its reads: each turn of its loop reads it, so a test lets the loop turn a
    number of times (each a poll apart) rather than sleeping and hoping it turned."""

    def __init__(self) -> None:
        self.reads = 0
        self._read = asyncio.Event()

    def __call__(self) -> float:
        self.reads += 1
        self._read.set()
        return time.monotonic()

    async def after(self, turns: int) -> None:
        target = self.reads + turns
        while self.reads < target:
            self._read.clear()
            await self._read.wait()


async def test_the_loop_audits_after_a_change_settles_and_only_while_leading() -> None:
    cache = await cache_of(*CONFLICTING)
    api = FakeEvents()
    leases = FakeLeases()
    elector = leader.Elector(leases, "me", lease_duration=15, renew_deadline=10, retry_period=2)
    turns = Turns()
    auditor = audit.Auditor(cache, api, instance="me", debounce=0.05, poll=0.01, elector=elector, clock=turns)
    task = asyncio.create_task(auditor.run())
    try:
        await turns.after(20)
        assert auditor.audits == 0 and not api.created  # a follower writes nothing
        assert await elector.step()
        for _ in range(500):
            if auditor.audits:
                break
            await asyncio.sleep(0.01)
        assert auditor.audits == 1 and api.created
        cache.load([CONFLICTING[0], CONFLICTING[1]])
        await cache.rebuild()
        for _ in range(500):
            if auditor.audits == 2:
                break
            await asyncio.sleep(0.01)
        assert auditor.audits == 2  # the change, once settled
        await turns.after(20)  # well past the debounce: 20 turns a poll apart
        assert auditor.audits == 2  # nothing more until the next change or the interval
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_with_state_files_the_audit_is_off_unless_asked_for_and_then_only_logs(
        caplog: pytest.LogCaptureFixture) -> None:
    cache = await cache_of(*CONFLICTING)
    config = Config(tls_cert_file=Path("c"), tls_private_key_file=Path("k"), audit_debounce=0)
    assert audit.start(config, cache, CollectorRegistry(), api_client=None) == []
    registry = CollectorRegistry()
    tasks = audit.start(dataclasses.replace(config, audit_interval=60), cache, registry, api_client=None)
    assert len(tasks) == 1  # no Lease without a cluster
    try:
        with caplog.at_level(logging.INFO, logger="overlay-guard.audit"):
            for _ in range(400):
                if any(r.getMessage().startswith("audit done") for r in caplog.records):
                    break
                await asyncio.sleep(0.025)
        logged = [r for r in caplog.records if r.getMessage().startswith("audit event")]
        assert any(getattr(r, "fields", {}).get("reason") == "OverlayConflict" for r in logged)
        assert "overlay_guard_audit_leader 1.0" in generate_latest(registry).decode()
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def test_the_ledger_forgets_old_counts_beyond_its_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events, "MEMORY", 5)
    ledger = events.Ledger(limit=100)
    for i in range(20):
        ref = findings.ObjectRef(model.NODEOVERLAY, f"o{i}")
        note = events.Note(ref, events.NO_MATCH, "no-match|spec", "matches nothing")
        plan = ledger.plan([note], [ref])
        ledger.commit([note], plan.emit, [ref])
        ledger.commit([], [], [])  # the overlay is deleted
    assert len(ledger._counts) <= 5 and not ledger.active


async def test_a_lasting_lease_failure_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    api, clock = FakeLeases(), Clock()
    api.down = True
    (a,) = electors(api, clock, "a")
    with caplog.at_level(logging.DEBUG, logger="overlay-guard.leader"):
        for _ in range(5):
            await a.step()
    levels = [r.levelno for r in caplog.records if r.getMessage() == "lease round failed"]
    assert levels == [logging.WARNING] + [logging.DEBUG] * 4
