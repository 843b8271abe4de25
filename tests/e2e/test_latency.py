"""docs/performance.md's figure: added latency of `kubectl apply --dry-run=server` for one overlay with
overlay-guard registered vs not, with 2,000 overlays stored, both measured in the same run.

Prints the figures and writes them to latency.json in the test's tmp dir; asserts only that
both series completed. The registration is toggled in blocks (interleaved) so drift in the
machine's load affects both series alike.
"""

from __future__ import annotations

import json
import re
import ssl
import statistics
import time
import urllib.parse
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.client import HTTPSConnection
from pathlib import Path
from typing import Any

import pytest

from benchmarks import workload

from ._cluster import LOOPBACK, ControlPlane
from ._guard import ANNOTATIONS, TEST_LABEL, Guard, realistic, unique

pytestmark = pytest.mark.e2e

BLOCKS = 5
RUNS_PER_BLOCK = 3
CREATE_THREADS = 8
SYNC_TIMEOUT = 180.0
_POST = re.compile(r'"Response" verb="POST" url="[^"]*/nodeoverlays\?[^"]*" status="[^"]*" milliseconds=(\d+)')


def _create_all(plane: ControlPlane, path: str, objects: list[dict[str, Any]]) -> None:
    """POST through the API with a few keep-alive connections: kubectl would create 2,000 objects
    one request at a time behind its client-side rate limit."""
    tls = ssl.create_default_context(cafile=str(plane.pki.ca_cert))
    tls.load_cert_chain(str(plane.pki.admin_cert), str(plane.pki.admin_key))

    def worker(chunk: list[dict[str, Any]]) -> None:
        conn = HTTPSConnection(LOOPBACK, plane.apiserver_port, context=tls, timeout=60)
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


def _wait_synced(guard: Guard, since: int, overlays: int, pools: int) -> float:
    """Until the main webhook has rebuilt its snapshot with everything; returns that rebuild's seconds."""
    deadline = time.monotonic() + SYNC_TIMEOUT
    while time.monotonic() < deadline:
        for event in guard.webhook.events("snapshot rebuilt")[since:]:
            if event.get("nodeoverlays", 0) >= overlays and event.get("nodepools", 0) >= pools:
                return float(event.get("seconds", 0.0))
        time.sleep(0.5)
    raise AssertionError(f"the webhook never synced {overlays} overlays:\n{guard.webhook.tail()}")


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
    rebuild = _wait_synced(guard, since, len(overlays), len(pools))
    facts = {"overlays": len(overlays), "nodepools": len(pools), "createSeconds": round(created, 2),
             "snapshotRebuildSeconds": rebuild}
    try:
        yield facts
    finally:
        selector = urllib.parse.quote(f"{TEST_LABEL}={value}")
        for path in ("/apis/karpenter.sh/v1alpha1/nodeoverlays", "/apis/karpenter.sh/v1/nodepools"):
            plane.kubectl("delete", "--raw", f"{path}?labelSelector={selector}")


def _one_apply(plane: ControlPlane, candidate: Path) -> tuple[float, float, bool, str]:
    """(wall seconds, POST milliseconds as kubectl logged them, webhook called, stderr)."""
    started = time.perf_counter()
    done = plane.kubectl("apply", "--dry-run=server", "-f", str(candidate), "-v=6",
                         "-o", "jsonpath={.metadata.annotations}", check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise AssertionError(f"the candidate was refused:\n{done.stderr[-2000:]}")
    posts = _POST.findall(done.stderr)
    assert len(posts) == 1, done.stderr[-2000:]
    return wall, float(posts[0]), ANNOTATIONS in done.stdout, done.stderr


def _median_ms(values: list[float]) -> float:
    return round(statistics.median(values), 1)


def test_added_latency_with_2000_overlays(guard: Guard, stored: dict[str, Any], tmp_path: Path) -> None:
    plane = guard.plane
    candidate = tmp_path / "candidate.json"
    wanted = workload.candidate(0)
    candidate.write_text(json.dumps(wanted))
    series: dict[str, dict[str, list[float]]] = {s: {"wall": [], "post": []} for s in ("with", "without")}
    logged_before = len(guard.webhook.events("admission"))

    for block in range(BLOCKS):
        order = ("with", "without") if block % 2 == 0 else ("without", "with")
        for state in order:
            if state == "with":
                guard.route_to(guard.webhook)
            else:
                guard.unregister()
            for _ in range(RUNS_PER_BLOCK):
                wall, post, called, _ = _one_apply(plane, candidate)
                # wait_effective already proved the state; this proves it for the run itself.
                assert called == (state == "with")
                series[state]["wall"].append(wall * 1000)
                series[state]["post"].append(post)
    guard.route_to(guard.webhook)

    own = [float(e["durationMs"]) for e in guard.webhook.events("admission")[logged_before:]
           if e.get("name") == wanted["metadata"]["name"]]
    with_, without = series["with"], series["without"]
    figures = {
        **stored,
        "runsEach": len(with_["wall"]),
        "medianMs": {
            "kubectlWallWith": _median_ms(with_["wall"]), "kubectlWallWithout": _median_ms(without["wall"]),
            "postWith": _median_ms(with_["post"]), "postWithout": _median_ms(without["post"]),
            "addedWall": round(_median_ms(with_["wall"]) - _median_ms(without["wall"]), 1),
            "addedPost": round(_median_ms(with_["post"]) - _median_ms(without["post"]), 1),
            "webhookHandlerPerCall": _median_ms(own) if own else None,
        },
        "series": series,
    }
    out = tmp_path / "latency.json"
    out.write_text(json.dumps(figures, indent=1))
    print(f"\nlatency figures ({out}):\n{json.dumps({k: v for k, v in figures.items() if k != 'series'}, indent=1)}")

    assert len(with_["wall"]) == len(without["wall"]) == BLOCKS * RUNS_PER_BLOCK
    assert own, "the webhook logged no admission of the candidate"
