"""Issue 31, item 3: Karpenter in the loop. Karpenter's own KWOK operator with the AWS provider's metrics controller
(hack/karpenter-kwok.sh) runs against the suite's API server, given the guard's default catalog as its instance
types. With the guard in warn mode (so conflicts land), the ValidationSucceeded condition Karpenter writes on each
NodeOverlay must be the status the guard predicts; the offerings Karpenter publishes must be the file's, the price
of an adjusted one the base price adjusted.

Overlays select by labels both sides define (instance type, NodePool, template labels): KWOK's instance types carry
karpenter.kwok.sh/* labels where the guard's catalog carries karpenter.k8s.aws/* ones."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from simulation.semantics import catalog as cat
from simulation.semantics import requirements as reqs
from tests import tools

from . import _karpenter
from ._cluster import REPO_ROOT, ControlPlaneError, _child_env
from ._guard import Guard, Webhook, apply, events_about, overlay, unique, wait_for
from ._karpenter import AVAILABLE, PRICE, Karpenter

pytestmark = pytest.mark.e2e

# Types every scenario selects; KWOK offers every type of the file, so any of the catalog's would do.
TYPES = ("m5.large", "m5.xlarge")
# Selected by the metrics test alone: no scenario's overlay may change its published price.
ADJUSTED_TYPE = "c6i.large"
# The metrics controller requeues itself every minute; a restart publishes at once.
PUBLISH_TIMEOUT = 60.0
# An audit replica beside Karpenter: short timings, its own Lease, so that it leads alone and soon.
GRACE = 1.0
AUDIT_ARGS = ("--audit-interval", "2", "--audit-debounce", "0.5", "--prediction-grace", str(GRACE),
              "--leader-election-namespace", "default")
# A disagreement is reported about grace + debounce after it begins (docs/audit.md); the rest is slack.
MISMATCH_TIMEOUT = 30.0
MISMATCH = "OverlayPredictionMismatch"


@dataclass(frozen=True)
class Harness:
    karpenter: Karpenter
    warn: Webhook
    # The catalog Karpenter was given, in the JSON catalog format, for the guard's side.
    catalog_file: Path
    instance_types: list[dict[str, Any]]


@pytest.fixture(scope="module")
def harness(guard: Guard, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    workdir = tmp_path_factory.mktemp("karpenter")
    offered = _karpenter.offered(cat.default())
    catalog_file = workdir / "catalog.json"
    catalog_file.write_text(json.dumps(cat.to_json(offered)))
    instance_types = _karpenter.kwok_instance_types(offered)
    types_file = workdir / "instance-types.json"
    types_file.write_text(json.dumps(instance_types))
    try:
        _karpenter.install_node_class(guard.plane)
        karpenter = Karpenter(guard.plane, tools.karpenter_kwok(), types_file)
        karpenter.start()
    except (ControlPlaneError, subprocess.CalledProcessError) as exc:
        pytest.fail(f"Karpenter did not start:\n{exc}", pytrace=False)
    try:
        warn = guard.spawn("karpenter-warn", mode="warn", extra_args=("--catalog", str(catalog_file)))
        try:
            guard.route_to(warn)
            yield Harness(karpenter, warn, catalog_file, instance_types)
        finally:
            guard.route_to(guard.webhook)
            warn.stop()
    finally:
        karpenter.stop()


def new_pool(guard: Guard, test: str, labels: dict[str, str] | None = None, name: str = "") -> str:
    name = name or unique("e2e-kpool")
    done = apply(guard.plane, _karpenter.kwok_pool(name, labels, test=test))
    assert done.returncode == 0, done.stderr
    guard.wait_pool_visible(name)
    return name


def typed(name: str, pool: str | None, test: str, *, types: tuple[str, ...] = TYPES, **spec: Any) -> dict[str, Any]:
    """An overlay on `types` (in `pool` where given), by the instance-type label both catalogs define."""
    body = overlay(name, pool, test=test, **spec)
    body["spec"]["requirements"] = [
        *(r for r in body["spec"]["requirements"] if r["key"] == reqs.NODEPOOL),
        {"key": reqs.INSTANCE_TYPE, "operator": "In", "values": list(types)}]
    return body


def land(guard: Guard, *objects: dict[str, Any]) -> set[str]:
    """Apply through the warn-mode guard; returns the NodeOverlays' names."""
    done = apply(guard.plane, *objects)
    assert done.returncode == 0, done.stderr
    return {o["metadata"]["name"] for o in objects if o["kind"] == "NodeOverlay"}


def statuses(status: dict[str, str]) -> list[str]:
    return sorted(status.values())


Prices = dict[_karpenter.Cell, float]


def publish_adjusted(guard: Guard, harness: Harness, label: str, prefix: str
                     ) -> tuple[Prices, Prices, dict[str, Prices]]:
    """A NodePool and a -25% overlay on ADJUSTED_TYPE in every NodePool (so whichever NodePool the metrics controller
    lists last publishes the adjusted price), Applied by Karpenter, then Karpenter restarted to publish at once:
    the file's prices, the prices wanted (the adjustment in effect), and the offerings last read (waited for until
    they show the wanted prices, or PUBLISH_TIMEOUT)."""
    new_pool(guard, label)
    adjusted = typed(unique(prefix), None, label, types=(ADJUSTED_TYPE,), priceAdjustment="-25%")
    names = land(guard, adjusted)
    assert statuses(_karpenter.agree(guard.plane, harness.karpenter, harness.catalog_file, names)) == ["Applied"]
    harness.karpenter.restart()
    prices = _karpenter.file_prices(harness.instance_types)
    want = {cell: price * 0.75 if cell[0] == ADJUSTED_TYPE else price for cell, price in prices.items()}
    deadline = time.monotonic() + PUBLISH_TIMEOUT
    published = harness.karpenter.offerings()
    while time.monotonic() < deadline and not all(
            abs(published[PRICE].get(c, -1.0) - p) < 1e-9 for c, p in want.items()):
        time.sleep(1.0)
        published = harness.karpenter.offerings()
    return prices, want, published


def test_published_offerings_are_the_files_and_adjusted_prices_the_base_adjusted(
        guard: Guard, harness: Harness, label: str) -> None:
    prices, want, published = publish_adjusted(guard, harness, label, "e2e-k-adjust")
    available = {c for c, v in published[AVAILABLE].items() if v == 1.0}
    assert available == set(prices)
    # The AWS controller adds, with ReservedCapacity on (the default), an unavailable reserved offering in each
    # zone of each type, priced 0; nothing else is unavailable.
    unavailable = {c for c, v in published[AVAILABLE].items() if v != 1.0}
    assert unavailable == {(t, z, "reserved") for t, z, _ in prices}
    assert all(published[PRICE][c] == 0.0 for c in unavailable)
    assert set(published[PRICE]) == set(published[AVAILABLE])
    off = {c: (published[PRICE][c], p) for c, p in want.items() if abs(published[PRICE][c] - p) >= 1e-9}
    assert not off, f"published vs base (adjusted where the overlay applies): {dict(list(off.items())[:5])}"
    assert any(c[0] == ADJUSTED_TYPE for c in want)


def test_conflicting_pair_then_a_delete_resolves_it(guard: Guard, harness: Harness, label: str) -> None:
    pool = new_pool(guard, label)
    a = typed(unique("e2e-k-pair-a"), pool, label, price="0.5")
    b = typed(unique("e2e-k-pair-b"), pool, label, priceAdjustment="-20%")
    names = land(guard, a, b)
    status = _karpenter.agree(guard.plane, harness.karpenter, harness.catalog_file, names)
    assert statuses(status) == ["Applied", "Conflict"]

    loser = next(n for n, s in status.items() if s == "Conflict")
    winner = next(n for n, s in status.items() if s == "Applied")
    guard.plane.kubectl("delete", "nodeoverlay", winner)
    after = _karpenter.agree(guard.plane, harness.karpenter, harness.catalog_file, {loser})
    assert after == {loser: "Applied"}


def test_three_way_at_one_weight(guard: Guard, harness: Harness, label: str) -> None:
    pool = new_pool(guard, label)
    # A{x} B{y} C{x}: A and C agree on the price, B does not.
    trio = [typed(unique(f"e2e-k-three-{n}"), pool, label, price=p) for n, p in (("a", "0.5"), ("b", "0.7"),
                                                                                    ("c", "0.5"))]
    names = land(guard, *trio)
    status = _karpenter.agree(guard.plane, harness.karpenter, harness.catalog_file, names)
    assert "Conflict" in statuses(status) and "Applied" in statuses(status)


def test_runtime_invalid_overlays(guard: Guard, harness: Harness, label: str) -> None:
    pool = new_pool(guard, label)
    # Both pass the API server's schema; Karpenter's RuntimeValidate refuses them.
    bad_capacity_type = typed(unique("e2e-k-invalid-ct"), pool, label, price="0.5")
    bad_capacity_type["spec"]["requirements"].append(
        {"key": reqs.CAPACITY_TYPE, "operator": "In", "values": ["on-demand-ish"]})
    bad_value = typed(unique("e2e-k-invalid-value"), pool, label, types=("not a label value!",), price="0.6")
    good = typed(unique("e2e-k-valid"), pool, label, weight=20, price="0.4")
    names = land(guard, bad_capacity_type, bad_value, good)
    status = _karpenter.agree(guard.plane, harness.karpenter, harness.catalog_file, names)
    assert statuses(status) == ["Applied", "Invalid", "Invalid"]


def test_capacity_and_price_overlays(guard: Guard, harness: Harness, label: str) -> None:
    pool = new_pool(guard, label)
    objects = [
        # Same weight, same resource, different quantities: a capacity conflict.
        typed(unique("e2e-k-cap-a"), pool, label, capacity={"example.com/widget": "1"}),
        typed(unique("e2e-k-cap-b"), pool, label, capacity={"example.com/widget": "2"}),
        # A heavier one on the same resource wins outright.
        typed(unique("e2e-k-cap-heavy"), pool, label, weight=30, capacity={"example.com/widget": "3"}),
        # Price and adjustment at different weights: both apply, the heavier one in effect.
        typed(unique("e2e-k-price"), pool, label, weight=40, price="0.3"),
        typed(unique("e2e-k-adjustment"), pool, label, weight=50, priceAdjustment="+10%"),
    ]
    names = land(guard, *objects)
    status = _karpenter.agree(guard.plane, harness.karpenter, harness.catalog_file, names)
    assert statuses(status) == ["Applied", "Applied", "Applied", "Applied", "Conflict"]


def test_a_nodepool_makes_existing_overlays_conflict(guard: Guard, harness: Harness, label: str) -> None:
    pool = unique("e2e-kpool-later")
    # Scoped to a NodePool that does not exist yet: they select nothing, so both apply.
    names = land(guard, typed(unique("e2e-k-later-a"), pool, label, price="0.5"),
                 typed(unique("e2e-k-later-b"), pool, label, price="0.7"))
    assert statuses(_karpenter.agree(guard.plane, harness.karpenter, harness.catalog_file, names)) == [
        "Applied", "Applied"]

    new_pool(guard, label, name=pool)
    status = _karpenter.agree(guard.plane, harness.karpenter, harness.catalog_file, names)
    assert statuses(status) == ["Applied", "Conflict"]


def test_catalog_captured_from_karpenters_metrics_has_the_files_cells_and_base_prices(
        guard: Guard, harness: Harness, label: str, tmp_path: Path) -> None:
    """`overlay-lint catalog --karpenter-metrics URL PATH` against this Karpenter: its cells are the file's, and where
    an adjustment is in effect in every NodePool the published (effective) price is undone to the file's base."""
    prices, _, _ = publish_adjusted(guard, harness, label, "e2e-k-capture")
    adjusted_cells = [c for c in prices if c[0] == ADJUSTED_TYPE]
    # What is in effect in the cluster, as the capture recovers base prices against it, written as a repository
    # holds it: without the write times that would (rightly, seconds after the change) keep every base estimated
    # until Karpenter's next publish (live.REPUBLISH_SECONDS; tests/test_live_catalog.py covers that rule).
    in_effect = tmp_path / "cluster.json"
    listed = json.loads(guard.plane.kubectl("get", "nodepools,nodeoverlays", "-o", "json").stdout)
    for item in listed["items"]:
        item["metadata"].pop("managedFields", None)
        item["metadata"].pop("creationTimestamp", None)
    in_effect.write_text(json.dumps(listed))
    out = tmp_path / "catalog.json"
    done = subprocess.run([sys.executable, "-m", "lint", "catalog", "--karpenter-metrics",
                           harness.karpenter.metrics_url, str(in_effect), "-o", str(out)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, env=_child_env())
    assert done.returncode == 0, done.stderr
    captured = cat.from_json(json.loads(out.read_text()))
    offerings = {(t.name, o.zone, o.capacity_type): o for t in captured.types for o in t.offerings if o.available}
    assert set(offerings) == set(prices)
    origins = {offerings[c].origin for c in adjusted_cells}
    assert origins == {"recovered"}, origins
    off = {c: (o.price, prices[c]) for c, o in offerings.items()
           if o.price is None or abs(o.price - prices[c]) > 1e-9 * max(1.0, prices[c])}
    assert not off, f"captured base vs the file's: {dict(list(off.items())[:5])}"


@contextlib.contextmanager
def auditor(guard: Guard, name: str, *args: str) -> Iterator[Webhook]:
    """A webhook replica that audits (not routed to: it only compares), leading its own Lease."""
    hook = guard.spawn(name, extra_args=(*AUDIT_ARGS, "--leader-election-lease", unique("e2e-kloop"), *args))
    try:
        wait_for("the replica to lead", lambda: hook.metric("overlay_guard_audit_leader") == 1.0)
        yield hook
    finally:
        hook.stop()


def mismatches(hook: Webhook, kind: str) -> float:
    return hook.metric("overlay_guard_prediction_mismatches", kind=kind)


def compared(hook: Webhook, kind: str) -> float:
    return hook.metric("overlay_guard_prediction_compared", kind=kind)


def priced(hook: Webhook) -> float:
    """Offerings both sides price: compared, or not, where the prediction rests on the live catalog's own figure."""
    return compared(hook, "price") + compared(hook, "price_unverifiable")


def test_the_audits_prediction_agrees_with_karpenter(guard: Guard, harness: Harness, label: str) -> None:
    """A replica reading Karpenter's metrics (--karpenter-metrics: the live catalog, and the published prices to
    compare) predicts every status Karpenter writes and every price it publishes: after Karpenter has reconciled
    a conflicting pair and an adjustment and republished, a full grace period passes with nothing reported. The
    comparison did run: every overlay Karpenter reconciled and every offering of the file were compared."""
    pool = new_pool(guard, label)
    names = land(guard, typed(unique("e2e-k-agree-a"), pool, label, price="0.5"),
                 typed(unique("e2e-k-agree-b"), pool, label, priceAdjustment="-20%"),
                 typed(unique("e2e-k-agree-adj"), pool, label, types=("m5.2xlarge",), priceAdjustment="+10%"))
    status = _karpenter.agree(guard.plane, harness.karpenter, harness.catalog_file, names)
    assert statuses(status) == ["Applied", "Applied", "Conflict"]
    harness.karpenter.restart()
    base = _karpenter.file_prices(harness.instance_types)
    adjusted = [c for c in base if c[0] == "m5.2xlarge"]
    wait_for("Karpenter to publish the adjusted prices", lambda: all(
        abs(harness.karpenter.offerings()[PRICE].get(c, -1.0) - base[c] * 1.1) < 1e-9 for c in adjusted),
        timeout=PUBLISH_TIMEOUT)

    with auditor(guard, f"kloop-agree-{label}", "--karpenter-metrics", harness.karpenter.metrics_url,
                 "--karpenter-metrics-interval", "2") as hook:
        def all_compared() -> bool:
            reconciled = sum(1 for c in _karpenter.conditions(guard.plane).values() if c is not None)
            return compared(hook, "status") == reconciled >= len(names) and priced(hook) >= len(base)
        wait_for("the audit to compare every reconciled overlay and every offering", all_compared)
        # An audit that finished a grace period (and a debounce) after everything was compared would report
        # any disagreement seen then.
        since = time.time()
        wait_for("an audit past the grace period", lambda: hook.metric(
            "overlay_guard_audit_last_timestamp_seconds") > since + GRACE + 0.5, timeout=MISMATCH_TIMEOUT)
        assert (mismatches(hook, "status"), mismatches(hook, "price")) == (0.0, 0.0), hook.tail()
        assert compared(hook, "status") >= len(names) and priced(hook) >= len(base)
        assert not [e for e in events_about(guard, names | {pool}) if e["reason"] == MISMATCH]


def test_a_stale_catalog_is_a_reported_disagreement_with_karpenter(
        guard: Guard, harness: Harness, label: str, tmp_path: Path) -> None:
    """The planted disagreement: a replica judging by a stale catalog, the file Karpenter was given less one
    instance type (as for a type the guard's price list does not have yet). Two overlays setting different prices
    on that type at one weight conflict in Karpenter, which offers it; the replica sees them select nothing, so it
    predicts both Applied. Karpenter's Conflict on one of them must come back as an OverlayPredictionMismatch
    Event naming both sides, and as the status gauge, within grace + debounce and some slack."""
    stale_type = "m5.large"
    full = cat.from_json(json.loads(harness.catalog_file.read_text()))
    assert any(t.name == stale_type for t in full.types)
    stale = dataclasses.replace(full, types=tuple(t for t in full.types if t.name != stale_type))
    stale_file = tmp_path / "stale-catalog.json"
    stale_file.write_text(json.dumps(cat.to_json(stale)))

    pool = new_pool(guard, label)
    names = land(guard, *(typed(unique(f"e2e-k-stale-{n}"), pool, label, types=(stale_type,), price=p)
                          for n, p in (("a", "0.5"), ("b", "0.7"))))
    with auditor(guard, f"kloop-stale-{label}", "--catalog", str(stale_file)) as hook:
        # Karpenter (and the guard given Karpenter's own catalog) sees the conflict.
        status = _karpenter.agree(guard.plane, harness.karpenter, harness.catalog_file, names)
        assert statuses(status) == ["Applied", "Conflict"]
        loser = next(n for n, s in status.items() if s == "Conflict")
        started = time.monotonic()
        [event] = wait_for("the mismatch event", lambda: [
            e for e in events_about(guard, names) if e["reason"] == MISMATCH], timeout=MISMATCH_TIMEOUT)
        wait_for("the gauge", lambda: mismatches(hook, "status") >= 1.0, timeout=MISMATCH_TIMEOUT)
        print(f"stale-catalog mismatch reported {time.monotonic() - started:.1f} s after Karpenter's condition "
              f"(grace {GRACE:g} s)")
        assert event["involvedObject"]["name"] == loser and event["type"] == "Warning"
        assert event["message"].startswith("guard predicts Applied") and "Karpenter says Conflict" in event["message"]
        assert mismatches(hook, "price") == 0.0  # --catalog: no published prices to compare
