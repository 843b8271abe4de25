"""Core figures, all measured in one run: per-candidate latency (scoped and broad candidates, clean
and conflicting) against a prepared workload, a cold `overlay-lint check`, 1,000 identical
same-weight overlays, the speed-up over the plain reference loop, a scaling table, and one candidate checked
with `--existing` against the largest workloads beside the same objects checked all at once.

Each size runs in a child process (`python -m benchmarks.core_bench SIZE`), so its peak RSS is its own."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import workload
from simulation import evaluate as ev
from simulation.semantics import catalog as cat
from simulation.semantics import model
from tests import reference

REFERENCE_OVERLAYS = 8
REQUESTS = 200
IDENTICAL = 1000
# The crowd sizes `make bench` runs (docs/performance.md), up to as many alike overlays as the 10,000 / 100 workload.
CROWDS = (IDENTICAL, 5_000, 10_000)
# One candidate checked with --existing against these (issue 28: the distinct fields made it slower than all at once).
EXISTING = (workload.Size(10_000, 100), workload.Size(10_000, 100, distinct=True))


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _timed(make: Callable[[int], dict[str, Any]], prepared: ev.Prepared, requests: int) -> dict[str, float]:
    """Wall time per request, and the CPU time this process spent on it: on a shared machine the wall
    figure also counts time spent waiting for a core, the CPU figure does not."""
    times, cpu = [], []
    for i in range(requests):
        doc = ev.Document(make(i), 1_000_000 + i)
        t, c = time.perf_counter(), time.process_time()
        ev.evaluate([doc], prepared)
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return {"median_ms": round(statistics.median(times) * 1000, 3),
            "p99_ms": round(_percentile(times, 0.99) * 1000, 3),
            "cpu_median_ms": round(statistics.median(cpu) * 1000, 3),
            "cpu_p99_ms": round(_percentile(cpu, 0.99) * 1000, 3)}


def per_candidate(size: workload.Size = workload.DEFAULT, requests: int = REQUESTS) -> dict[str, Any]:
    """Load the workload (`prepare`), then time single candidates of each kind against it."""
    catalog = cat.default()
    raw = workload.documents(size, catalog)
    started = time.perf_counter()
    # Warmed as the webhook's snapshots are: what a request costs, not the tables its first one would make.
    prepared = ev.warmed(ev.prepare([ev.Document(o, i, False) for i, o in enumerate(raw)], catalog))
    loaded = time.perf_counter() - started
    existing = [o for o in raw if o["kind"] == "NodeOverlay"]
    kinds: dict[str, Callable[[int], dict[str, Any]]] = {
        "scoped": lambda i: workload.candidate(i, size.pools) if i % 2 == 0 else existing[(i * 37) % len(existing)],
        # workload.broad's two shapes, apart: a median over both would be the edge between them. Spot-wide meets
        # every spot overlay of its weight (2,266 same-weight clashes at 10,000 / 100).
        "broad_family_clean": lambda i: workload.broad(2 * i, conflicting=False, catalog=catalog),
        "broad_family_conflicting": lambda i: workload.broad(2 * i, conflicting=True, catalog=catalog),
        "broad_spot_clean": lambda i: workload.broad(2 * i + 1, conflicting=False, catalog=catalog),
        "broad_spot_conflicting": lambda i: workload.broad(2 * i + 1, conflicting=True, catalog=catalog),
    }
    out: dict[str, Any] = {"overlays": size.overlays, "nodepools": size.pools, "distinct": size.distinct,
                           "prepare_s": round(loaded, 3),
                           "requests": requests, "load_avg": os.getloadavg()[0]}
    for name, make in kinds.items():
        out[name] = _timed(make, prepared, requests)
    return out


def _check(items: list[dict[str, Any]]) -> dict[str, Any]:
    """A cold `overlay-lint check` of the items in a child process: wall time and peak RSS."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "workload.json"
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        started = time.perf_counter()
        proc, peak_kib = _child(["lint", "check", str(path), "--format", "json"])
        wall = time.perf_counter() - started
    summary = json.loads(proc.stdout).get("summary", {}) if proc.stdout.startswith("{") else {}
    return {"wall_s": round(wall, 3), "peak_rss_mb": round(peak_kib / 1024, 1), "exit": proc.returncode,
            "summary": summary}


def _child(argv: list[str]) -> tuple[subprocess.CompletedProcess[str], int]:
    """`python -m argv...`: its exit, output and its own peak RSS in KiB (benchmarks/peak.py says why the
    child reports it)."""
    with tempfile.TemporaryDirectory() as tmp:
        peak = Path(tmp) / "peak"
        proc = subprocess.run([sys.executable, "-m", "benchmarks.peak", str(peak), *argv], capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": os.getcwd()}, check=False)
        return proc, int(peak.read_text()) if peak.exists() else 0


def cold_lint(size: workload.Size = workload.DEFAULT) -> dict[str, Any]:
    return _check(workload.documents(size))


def against_existing(size: workload.Size) -> dict[str, Any]:
    """A pre-commit hook's shape: `overlay-lint check --existing DIR candidate.json`, one broad conflicting
    candidate against the workload, and in the same run the same objects checked all at once (the target:
    no slower than that)."""
    documents = workload.documents(size)
    candidate = workload.broad(0, conflicting=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "existing"
        folder.mkdir()
        (folder / "workload.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": documents}))
        (Path(tmp) / "candidate.json").write_text(json.dumps(candidate))
        started = time.perf_counter()
        proc, peak_kib = _child(["lint", "check", "--existing", str(folder), str(Path(tmp) / "candidate.json"),
                                 "--format", "json"])
        wall = time.perf_counter() - started
    return {"workload": size.label, "wall_s": round(wall, 3), "peak_rss_mb": round(peak_kib / 1024, 1),
            "exit": proc.returncode, "all_at_once": _check([*documents, candidate])}


def identical(count: int = IDENTICAL, requests: int = 50) -> dict[str, Any]:
    """`count` overlays, one weight, one field, the same cells: a cold check, and one more of them judged
    against the prepared rest (what the webhook does): named first in Karpenter's order (it displaces the
    crowd's winner: every other verdict moves), named among them (Karpenter drops it), and an edit of one
    of them that only adds a label."""
    overlays = workload.identical(count)
    items = [*workload.nodepools(1), *overlays]
    checked = _check(items)
    catalog = cat.default()
    prepared = ev.warmed(ev.prepare([ev.Document(o, i, False) for i, o in enumerate(items)], catalog))
    one_more = workload.identical(count + 1)[-1]
    among = {**one_more, "metadata": {"name": f"{overlays[count // 2]['metadata']['name']}x"}}
    edit = {**overlays[count // 2], "metadata": {**overlays[count // 2]["metadata"], "labels": {"team": "a"}}}
    return {"overlays": count, "check": checked, "one_more": _timed(lambda i: one_more, prepared, requests),
            "among": _timed(lambda i: among, prepared, requests), "edit": _timed(lambda i: edit, prepared, requests)}


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


def scaled(size: workload.Size, requests: int = REQUESTS) -> dict[str, Any]:
    """One row of the scaling table, measured in a child process (prepare + candidates), plus a cold check."""
    argv = ["benchmarks.core_bench", size.argument, str(requests)]
    proc, peak_kib = _child(argv)
    row: dict[str, Any] = json.loads(proc.stdout) if proc.returncode == 0 else {"error": proc.stderr[-500:]}
    row["peak_rss_mb"] = round(peak_kib / 1024, 1)
    row["check"] = cold_lint(size)
    return row


def run(sizes: tuple[workload.Size, ...] = workload.SCALING) -> dict[str, Any]:
    return {"cores": os.cpu_count(), "load_avg": os.getloadavg()[0],
            "per_candidate": per_candidate(), "identical": [identical(n) for n in CROWDS],
            "versus_reference": versus_reference(), "scaling": [scaled(s) for s in sizes],
            "existing": [against_existing(s) for s in EXISTING]}


def main(argv: list[str]) -> int:
    if argv[:1] == ["existing"]:
        json.dump([against_existing(workload.Size.parse(a)) for a in argv[1:]] or
                  [against_existing(s) for s in EXISTING], sys.stdout, indent=2)
        return 0
    json.dump(per_candidate(workload.Size.parse(argv[0]), int(argv[1]) if len(argv) > 1 else REQUESTS), sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
