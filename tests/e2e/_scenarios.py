"""Admission scenarios against the real kube-apiserver that tests/e2e/test_security.py runs through one webhook and
tests/e2e/test_replicas.py through three replicas behind a round-robin proxy: a denial rests only on objects that
exist (a forged review, a delete followed by a replacement, replace --force) and two conflicting applies at once
are never both admitted."""

from __future__ import annotations

import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ._guard import Guard, apply, as_input, exists, forge, overlay, unique

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


def forged_review_held_until_its_deadline(guard: Guard, label: str) -> None:
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


def deleted_overlay_does_not_deny_its_replacement(guard: Guard, label: str, settled: bool) -> None:
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


def replace_force_judged_by_the_new_incarnation(guard: Guard, label: str, tmp_path: Path) -> None:
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


def two_conflicting_applies_exactly_one_admitted(guard: Guard, label: str, tmp_path: Path) -> None:
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


class Scenarios:
    """The scenarios as tests: a test module runs them by subclassing (its fixtures and marks apply)."""

    def test_a_forged_review_holds_a_conflicting_write_off_until_its_deadline_at_most(self, guard: Guard,
                                                                                        label: str) -> None:
        forged_review_held_until_its_deadline(guard, label)

    @pytest.mark.parametrize("settled", [False, True], ids=["while-held", "after-the-watch"])
    def test_a_deleted_overlay_does_not_deny_its_replacement(self, guard: Guard, label: str, settled: bool) -> None:
        deleted_overlay_does_not_deny_its_replacement(guard, label, settled)

    def test_replace_force_judges_by_the_new_incarnation(self, guard: Guard, label: str, tmp_path: Path) -> None:
        replace_force_judged_by_the_new_incarnation(guard, label, tmp_path)

    def test_two_conflicting_applies_at_once_exactly_one_admitted(self, guard: Guard, label: str,
                                                                  tmp_path: Path) -> None:
        two_conflicting_applies_exactly_one_admitted(guard, label, tmp_path)
