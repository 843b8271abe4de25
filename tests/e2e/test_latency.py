"""docs/performance.md's figure: the latency of `kubectl apply` of one overlay through the guard, through
webhooks that answer at once (benchmarks/echo.py, registered the same way: the floor any webhook pays) and
through no webhook, with 2,000 overlays stored, all three measured in the same run (issue 28: guard/echo
<= 1.1).

Two kinds of apply: `--dry-run=server` of one candidate, and a real create of a fresh overlay (deleted
afterwards, outside the timed part), for which the guard records its ledger Lease before answering.
The registration is switched in blocks whose order rotates, so drift in the machine's load affects every
series alike; before each timed run the guard is idle (its snapshot rebuilt and the audit that follows a
change done, in every series: it watches the cluster whoever is registered).

Prints the figures and writes them to latency.json in the test's tmp dir, with the API server's own
account of its webhook calls and the guard's handler times; asserts only that every series completed and
that each apply was answered by the series' webhooks.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import statistics
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.client import HTTPSConnection
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from benchmarks import echo as echo_server
from benchmarks import workload

from ._cluster import LOOPBACK, ControlPlane
from ._echo import Echo
from ._guard import ANNOTATIONS, TEST_LABEL, Guard, realistic, unique

pytestmark = pytest.mark.e2e

SERIES = ("guard", "echo", "none")
# A multiple of len(SERIES): each series takes each place in a block's order equally often.
BLOCKS = 6
DRY_RUNS_PER_BLOCK = 3
CREATES_PER_BLOCK = 2
CREATE_THREADS = 8
SYNC_TIMEOUT = 180.0
# The audit runs 2 s after the snapshot settles (--audit-debounce).
SETTLE_TIMEOUT = 60.0
_POST = re.compile(r'"Response" verb="POST" url="[^"]*/nodeoverlays\?[^"]*" status="[^"]*" milliseconds=(\d+)')
_WEBHOOK_SECONDS = "apiserver_admission_webhook_admission_duration_seconds"
# The API server's account: its calls to the webhooks (`admit`: the mutating ones), and its Lease writes
# (the guard's ledger for a real create; also every leader election's renewals, in every series).
_APISERVER = {"webhookAdmit": (_WEBHOOK_SECONDS, {"type": "admit"}),
              "webhookValidating": (_WEBHOOK_SECONDS, {"type": "validating"}),
              "leasePut": ("apiserver_request_duration_seconds", {"verb": "PUT", "resource": "leases"})}


def _admin(plane: ControlPlane) -> HTTPSConnection:
    tls = ssl.create_default_context(cafile=str(plane.pki.ca_cert))
    tls.load_cert_chain(str(plane.pki.admin_cert), str(plane.pki.admin_key))
    return HTTPSConnection(LOOPBACK, plane.apiserver_port, context=tls, timeout=60)


def _create_all(plane: ControlPlane, path: str, objects: list[dict[str, Any]]) -> None:
    """POST through the API with a few keep-alive connections: kubectl would create 2,000 objects
    one request at a time behind its client-side rate limit."""

    def worker(chunk: list[dict[str, Any]]) -> None:
        conn = _admin(plane)
        try:
            for obj in chunk:
                conn.request("POST", path, json.dumps(obj), {"Content-Type": "application/json"})
                resp = conn.getresponse()
                body = resp.read()
                if resp.status != 201:
                    raise AssertionError(f"creating {obj['metadata']['name']}: {resp.status} {body[:300]!r}")
        finally:
            conn.close()

    chunks = [objects[i::CREATE_THREADS] for i in range(CREATE_THREADS)]
    with ThreadPoolExecutor(CREATE_THREADS) as pool:
        list(pool.map(worker, chunks))


def _labelled(objects: list[dict[str, Any]], value: str) -> list[dict[str, Any]]:
    for obj in objects:
        obj["metadata"].setdefault("labels", {})[TEST_LABEL] = value
    return objects


def _wait_event(guard: Guard, msg: str, since: int, wanted: Callable[[dict[str, Any]], bool], what: str,
                timeout: float = SETTLE_TIMEOUT) -> dict[str, Any]:
    """The first of the main webhook's log events `msg` after the `since` first that is `wanted`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = next((e for e in guard.webhook.events(msg)[since:] if wanted(e)), None)
        if found is not None:
            return found
        time.sleep(0.1)
    raise AssertionError(f"the webhook never logged {what}:\n{guard.webhook.tail()}")


@pytest.fixture(scope="module")
def stored(guard: Guard) -> Iterator[dict[str, Any]]:
    plane = guard.plane
    value = unique("latency")
    # Karpenter's NodePool CRD requires what real NodePools carry (nodeClassRef...).
    pools = _labelled([realistic(p) for p in workload.nodepools()], value)
    overlays = _labelled(workload.overlays(), value)
    since = len(guard.webhook.events("snapshot rebuilt"))
    started = time.monotonic()
    # Stored without the webhook in the way: what is measured is one apply against them, not
    # 2,000 admissions.
    with guard.unregistered():
        _create_all(plane, "/apis/karpenter.sh/v1/nodepools", pools)
        _create_all(plane, "/apis/karpenter.sh/v1alpha1/nodeoverlays", overlays)
        created = time.monotonic() - started
    synced = _wait_event(guard, "snapshot rebuilt", since,
                         lambda e: e.get("nodeoverlays", 0) >= len(overlays) and e.get("nodepools", 0) >= len(pools),
                         f"a snapshot with {len(overlays)} overlays", SYNC_TIMEOUT)
    facts = {"overlays": len(overlays), "nodepools": len(pools), "createSeconds": round(created, 2),
             "snapshotRebuildSeconds": synced.get("seconds")}
    try:
        yield facts
    finally:
        selector = urllib.parse.quote(f"{TEST_LABEL}={value}")
        for path in ("/apis/karpenter.sh/v1alpha1/nodeoverlays", "/apis/karpenter.sh/v1/nodepools"):
            plane.kubectl("delete", "--raw", f"{path}?labelSelector={selector}")


@pytest.fixture(scope="module")
def echo(guard: Guard) -> Iterator[Echo]:
    hook = Echo(guard.plane, guard.certs)
    hook.start()
    try:
        yield hook
    finally:
        hook.stop()


@dataclass(frozen=True)
class Run:
    wall_ms: float
    post_ms: float
    # Which series' webhooks answered, from the annotations their /mutate added.
    answered_by: str
    # The API server's connections to that webhook afterwards (their client ports).
    connections: frozenset[int]


def _answered_by(annotations: dict[str, str]) -> str:
    ours = {k for k in annotations if k.startswith(ANNOTATIONS)}
    if not ours:
        return "none"
    return "echo" if ours == {echo_server.ANNOTATION} else "guard"


def _apply(plane: ControlPlane, path: Path, port: int | None, *, dry_run: bool) -> Run:
    started = time.perf_counter()
    done = plane.kubectl("apply", *(("--dry-run=server",) if dry_run else ()), "-f", str(path), "-v=6",
                         "-o", "jsonpath={.metadata.annotations}", check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise AssertionError(f"{path.name} was refused:\n{done.stderr[-2000:]}")
    posts = _POST.findall(done.stderr)
    assert len(posts) == 1, done.stderr[-2000:]
    return Run(wall * 1000, float(posts[0]), _answered_by(json.loads(done.stdout or "{}")),
               frozenset(_connections(port) if port is not None else ()))


def _apiserver_seconds(plane: ControlPlane) -> dict[str, tuple[float, float]]:
    """The API server's (seconds, calls) so far in what _APISERVER names."""
    text = plane.kubectl("get", "--raw", "/metrics").stdout
    # Only the sums and counts wanted are parsed: the whole exposition takes about a second.
    totals = tuple(metric + suffix for metric, _ in _APISERVER.values() for suffix in ("_sum", "_count"))
    wanted = "\n".join(line for line in text.splitlines() if line.startswith(totals))
    out: dict[str, tuple[float, float]] = {}
    for family in text_string_to_metric_families(wanted):
        for sample in family.samples:
            for what, (metric, labels) in _APISERVER.items():
                if not sample.name.startswith(metric) or any(sample.labels.get(k) != v for k, v in labels.items()):
                    continue
                seconds, calls = out.get(what, (0.0, 0.0))
                out[what] = ((seconds + sample.value, calls) if sample.name.endswith("_sum")
                             else (seconds, calls + sample.value))
    return out


def _connections(port: int) -> set[int]:
    """The client ports of the established loopback TCP connections to `port` (/proc/net/tcp)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, remote, state = line.split()[1:4]
        if state == "01" and int(local.split(":")[1], 16) == port:
            found.add(int(remote.split(":")[1], 16))
    return found


class Measured:
    """Every run and the API server's account, by kind of apply and series."""

    def __init__(self) -> None:
        self.runs: dict[tuple[str, str], list[Run]] = {}
        self.apiserver: dict[tuple[str, str, str], list[float]] = {}

    def add(self, kind: str, series: str, run: Run) -> None:
        self.runs.setdefault((kind, series), []).append(run)

    def add_apiserver(self, kind: str, series: str, before: dict[str, tuple[float, float]],
                      after: dict[str, tuple[float, float]]) -> None:
        for what, (seconds, calls) in after.items():
            was_seconds, was_calls = before.get(what, (0.0, 0.0))
            total = self.apiserver.setdefault((kind, series, what), [0.0, 0.0])
            total[0] += seconds - was_seconds
            total[1] += calls - was_calls

    def figures(self, kind: str) -> dict[str, Any]:
        runs = {s: self.runs[(kind, s)] for s in SERIES}
        med = {s: {"wall": _median(r.wall_ms for r in runs[s]), "post": _median(r.post_ms for r in runs[s])}
               for s in SERIES}
        apiserver = {s: {what: {"calls": int(n), "msPerCall": round(1000 * sec / n, 1)}
                         for (k, s2, what), (sec, n) in sorted(self.apiserver.items()) if k == kind and s2 == s and n}
                     for s in SERIES}
        return {"runsEach": len(runs[SERIES[0]]), "medianMs": med,
                "guardOverEcho": {m: round(med["guard"][m] / med["echo"][m], 2) for m in ("wall", "post")},
                # The series differ only in the POST's time (kubectl's start, discovery and GET are alike), so the
                # echo's wall plus the POSTs' difference is the guard's wall without the noise of kubectl's own
                # ~100 ms on a loaded machine.
                "guardOverEchoWallByPost": round(1 + (med["guard"]["post"] - med["echo"]["post"])
                                                 / med["echo"]["wall"], 3),
                "apiserver": apiserver,
                # Reused keep-alive connections: a few per series, not two per run.
                "webhookConnectionsSeen": {s: len(set().union(*(r.connections for r in runs[s]))) for s in SERIES}}


def _median(values: Iterable[float]) -> float:
    return round(statistics.median(list(values)), 1)


def _route(guard: Guard, echo: Echo, series: str) -> int | None:
    """Register the series' webhooks; their port."""
    if series == "guard":
        guard.route_to(guard.webhook)
        return guard.webhook.port
    if series == "echo":
        guard.route_to(echo)
        return echo.port
    guard.unregister()
    return None


def _create_settled(guard: Guard, path: Path, port: int | None, name: str, overlays: int, series: str) -> Run:
    """A timed real apply of `path` (a fresh overlay `name`), then, untimed, its deletion and the guard
    back at rest: the snapshot without it rebuilt, the audit of that snapshot done and its record out of
    the ledger."""
    plane = guard.plane
    ledger_since = len(guard.webhook.events("records left the ledger"))
    rebuilt_since = len(guard.webhook.events("snapshot rebuilt"))
    audits_since = len(guard.webhook.events("audit done"))
    run = _apply(plane, path, port, dry_run=False)
    # At once (not through kubectl's ~0.1 s start): usually within the guard's debounce of the create, so that
    # one rebuild, not two, takes in both.
    conn = _admin(plane)
    try:
        conn.request("DELETE", f"/apis/karpenter.sh/v1alpha1/nodeoverlays/{name}")
        resp = conn.getresponse()
        assert resp.status == 200, resp.read()[:300]
    finally:
        conn.close()
    # Nothing else changes the cluster meanwhile: the first snapshot without it came after both.
    rebuilt = _wait_event(guard, "snapshot rebuilt", rebuilt_since, lambda e: e.get("nodeoverlays") == overlays,
                          f"the snapshot without {name}")
    _wait_event(guard, "audit done", audits_since, lambda e: e.get("generation", -1) >= rebuilt["generation"],
                f"the audit after {name} was deleted")
    if series == "guard":
        _wait_event(guard, "records left the ledger", ledger_since, lambda e: name in e.get("records", ()),
                    f"{name}'s record leaving the ledger")
    return run


def test_apply_latency_guard_echo_none(guard: Guard, echo: Echo, stored: dict[str, Any], tmp_path: Path) -> None:
    plane = guard.plane
    candidate = workload.candidate(0)
    dry_path = tmp_path / "candidate.json"
    dry_path.write_text(json.dumps(candidate))
    value = unique("latency-create")
    overlays = int(guard.webhook.events("snapshot rebuilt")[-1]["nodeoverlays"])
    measured = Measured()
    created: list[str] = []
    # Untimed: the guard's first judgement of a candidate builds what later ones reuse (about 0.1-0.4 s).
    _apply(plane, dry_path, guard.webhook.port, dry_run=True)
    logged_before = len(guard.webhook.events("admission"))
    load_before = os.getloadavg()
    started = time.monotonic()
    try:
        for block in range(BLOCKS):
            shift = block % len(SERIES)
            for series in SERIES[shift:] + SERIES[:shift]:
                port = _route(guard, echo, series)
                # Deletions call no webhook (CREATE and UPDATE only): the webhook figures are the timed applies'.
                before = _apiserver_seconds(plane)
                for _ in range(DRY_RUNS_PER_BLOCK):
                    measured.add("dryRun", series, _apply(plane, dry_path, port, dry_run=True))
                dry = _apiserver_seconds(plane)
                measured.add_apiserver("dryRun", series, before, dry)
                for _ in range(CREATES_PER_BLOCK):
                    # The candidate under a fresh name: a record of a deleted overlay never meets the next.
                    name = f"{value}-{len(created):03d}"
                    fresh = json.loads(json.dumps(candidate))
                    fresh["metadata"] = {"name": name, "labels": {TEST_LABEL: value}}
                    path = tmp_path / f"{name}.json"
                    path.write_text(json.dumps(fresh))
                    created.append(name)
                    measured.add("create", series, _create_settled(guard, path, port, name, overlays, series))
                measured.add_apiserver("create", series, dry, _apiserver_seconds(plane))
    finally:
        plane.kubectl("delete", "nodeoverlays", "-l", f"{TEST_LABEL}={value}", "--ignore-not-found")
        guard.route_to(guard.webhook)
    seconds = time.monotonic() - started

    names = {candidate["metadata"]["name"]: "dryRun", **{n: "create" for n in created}}
    handler: dict[str, dict[str, list[float]]] = {}
    for event in guard.webhook.events("admission")[logged_before:]:
        kind = names.get(event.get("name", ""))
        if kind is not None:
            handler.setdefault(kind, {}).setdefault(event["endpoint"], []).append(float(event["durationMs"]))
    figures = {
        **stored,
        "seconds": round(seconds, 1),
        "loadAverage": {"before": [round(x, 2) for x in load_before],
                        "after": [round(x, 2) for x in os.getloadavg()]},
        **{kind: {**measured.figures(kind),
                  "guardHandlerMedianMs": {e: _median(v) for e, v in sorted(handler.get(kind, {}).items())}}
           for kind in ("dryRun", "create")},
        "runs": {f"{kind}/{series}": [(round(r.wall_ms, 1), r.post_ms, sorted(r.connections)) for r in runs]
                 for (kind, series), runs in measured.runs.items()},
    }
    out = tmp_path / "latency.json"
    out.write_text(json.dumps(figures, indent=1))
    print(f"\nlatency figures ({out}):\n{json.dumps({k: v for k, v in figures.items() if k != 'runs'}, indent=1)}")

    wrong = {(kind, series): [r.answered_by for r in runs if r.answered_by != series]
             for (kind, series), runs in measured.runs.items()}
    assert not any(wrong.values()), f"applies answered by another series' webhooks: {wrong}"
    counts = {key: len(runs) for key, runs in measured.runs.items()}
    assert counts == {**{("dryRun", s): BLOCKS * DRY_RUNS_PER_BLOCK for s in SERIES},
                      **{("create", s): BLOCKS * CREATES_PER_BLOCK for s in SERIES}}, counts
    # The guard's own log: it judged (and, for the creates, recorded) the applies routed to it.
    assert set(handler) == {"dryRun", "create"}
    assert all(set(by) == {"validate", "mutate"} for by in handler.values()), handler
