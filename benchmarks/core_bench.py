"""Core figures: one candidate against the workload, a cold `overlay-lint check`, and the
speed-up over the plain reference loop, all measured in one run."""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import workload
from simulation import evaluate as ev
from simulation.semantics import catalog as cat
from simulation.semantics import model
from tests import reference

REFERENCE_OVERLAYS = 8


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def per_candidate(requests: int = 300) -> dict[str, Any]:
    started = time.perf_counter()
    catalog = cat.default()
    docs = [ev.Document(o, i, False) for i, o in
            enumerate([*workload.nodepools(), *workload.overlays(catalog=catalog)])]
    prepared = ev.prepare(docs, catalog)
    loaded = time.perf_counter() - started
    times = []
    existing = workload.overlays(catalog=catalog)
    for i in range(requests):
        # Alternate new overlays and edits of existing ones, as admission traffic does.
        obj = workload.candidate(i) if i % 2 == 0 else existing[(i * 37) % len(existing)]
        t = time.perf_counter()
        ev.evaluate([ev.Document(obj, 10_000 + i)], prepared)
        times.append(time.perf_counter() - t)
    return {"load_s": round(loaded, 3), "requests": requests,
            "median_ms": round(statistics.median(times) * 1000, 3),
            "p99_ms": round(_percentile(times, 0.99) * 1000, 3)}


def cold_lint() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "workload.json"
        items = [*workload.nodepools(), *workload.overlays()]
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "lint", "check", str(path), "--format", "json"],
                              capture_output=True, text=True, check=False,
                              env={**os.environ, "PYTHONPATH": os.getcwd()})
        wall = time.perf_counter() - started
        peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    summary = json.loads(proc.stdout).get("summary", {}) if proc.stdout.startswith("{") else {}
    return {"wall_s": round(wall, 3), "peak_rss_mb": round(max(peak_kib, before) / 1024, 1),
            "exit": proc.returncode, "summary": summary}


def versus_reference() -> dict[str, Any]:
    """The same overlays through the plain nested loop and through the engine. The reference
    walks every NodePool x instance type per overlay, so only a slice of the workload is
    affordable; both sides get exactly that slice (all 20 NodePools, the full catalog)."""
    catalog = cat.default()
    pools_raw = workload.nodepools()
    overlays_raw = workload.overlays(catalog=catalog)[:REFERENCE_OVERLAYS]
    started = time.perf_counter()
    reference.run([model.overlay(o) for o in overlays_raw], [model.nodepool(p) for p in pools_raw], catalog)
    slow = time.perf_counter() - started
    docs = [ev.Document(o, i) for i, o in enumerate([*pools_raw, *overlays_raw])]
    prepared = ev.prepare([], catalog)
    started = time.perf_counter()
    ev.evaluate(docs, prepared)
    fast = time.perf_counter() - started
    return {"overlays": REFERENCE_OVERLAYS, "reference_s": round(slow, 3), "engine_s": round(fast, 4),
            "speedup": round(slow / fast, 1)}


def run() -> dict[str, Any]:
    return {"cores": os.cpu_count(), "per_candidate": per_candidate(), "cold_lint": cold_lint(),
            "versus_reference": versus_reference()}
