"""Karpenter as the peer: its own NodeOverlay controller (hack/karpenter-oracle, sigs.k8s.io/karpenter
built from the module proxy) against this project's core on the same workloads, in the same run.

Karpenter validates by re-running one full pass (`Reconcile`: list, runtime validation, the conflict
test and the store for every overlay x NodePool x instance type) on every change; this project answers
an admission by evaluating one candidate against a prepared snapshot. Reported:

- per size: Karpenter's full pass, this project's full `check` of the same objects and its
  per-candidate evaluation, as wall and CPU seconds and as ratios (CPU time is what stays comparable on
  a shared machine, so the ratios use it);
- growth: Karpenter's pass grows with overlays x NodePools x instance types; it takes minutes at the
  benchmark's own sizes on 2 cores, so it runs at several smaller sizes and a power law fitted to
  those gives its estimate at 2,000/20 and 10,000/100 (marked as estimated), where this project's
  figures are measured;
- "one more overlay": Karpenter's full pass with N+1 overlays against one admission here
  (`karpenter_pass_over_core_candidate`; the N+1 pass is also measured once, at the smallest size).
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import workload
from simulation import evaluate as ev
from simulation.semantics import catalog as cat

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "hack" / "karpenter-oracle.sh"
CATALOG = ROOT / "simulation" / "data" / cat.DEFAULT_DATA
# Karpenter needs ~5 CPU seconds per pass at 100 overlays / 1 NodePool with the full catalog on the
# reference machine and ~105 at 500 / 5; together about three CPU minutes.
PEER_SIZES = (workload.Size(100, 1), workload.Size(200, 2), workload.Size(300, 3), workload.Size(500, 5))
TARGET_SIZES = (workload.Size(2000, 20), workload.Size(10_000, 100))
REQUESTS = 50


def _oracle() -> str:
    proc = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, check=True)
    return proc.stdout.strip()


def _write(directory: Path, objects: Sequence[dict[str, Any]]) -> Path:
    directory.mkdir(parents=True)
    # Concatenated JSON documents: the harness's YAML-or-JSON reader takes them as a stream.
    (directory / "objects.json").write_text("".join(json.dumps(o) + "\n" for o in objects), encoding="utf-8")
    return directory


def karpenter_passes(sizes: Sequence[workload.Size], catalog: cat.Catalog) -> tuple[list[dict[str, Any]], float]:
    """One harness process for every size, plus the smallest size with one more overlay (a pass
    with N+1 overlays costs what one with N does, within noise, so it is measured once)."""
    with tempfile.TemporaryDirectory(prefix="peer-bench-") as tmp:
        dirs = [_write(Path(tmp) / f"{s.overlays}-{s.pools}", workload.documents(s, catalog)) for s in sizes]
        smallest = sizes[0]
        dirs.append(_write(Path(tmp) / "plus-one", [*workload.documents(smallest, catalog),
                                                     workload.candidate(0, smallest.pools)]))
        proc = subprocess.run([_oracle(), "-catalog", str(CATALOG), "-bench", "1", *map(str, dirs)],
                              capture_output=True, text=True, check=True)
    results = json.loads(proc.stdout)["results"]
    for r in results:
        if r.get("error"):
            raise RuntimeError(f"karpenter-oracle: {r['error']}")
    rows = [{"overlays": size.overlays, "nodepools": size.pools, "instance_types": r["counts"]["instanceTypes"],
             "pass_wall_s": round(r["passSeconds"][0], 3), "pass_cpu_s": round(r["passCpuSeconds"][0], 3)}
            for size, r in zip(sizes, results[:-1], strict=True)]
    return rows, float(results[-1]["passCpuSeconds"][0])


def core_figures(size: workload.Size, catalog: cat.Catalog, requests: int = REQUESTS) -> dict[str, Any]:
    """This project on the same objects: the full `check` (every object a candidate, as
    `overlay-lint check` runs it) and one candidate against the prepared snapshot (an admission)."""
    raw = workload.documents(size, catalog)
    wall, cpu = time.perf_counter(), time.process_time()
    ev.evaluate([ev.Document(o, i) for i, o in enumerate(raw)], ev.prepare([], catalog))
    check_wall, check_cpu = time.perf_counter() - wall, time.process_time() - cpu
    prepared = ev.prepare([ev.Document(o, i, False) for i, o in enumerate(raw)], catalog)
    walls, cpus = [], []
    for i in range(requests):
        doc = ev.Document(workload.candidate(i, size.pools), 1_000_000 + i)
        wall, cpu = time.perf_counter(), time.process_time()
        ev.evaluate([doc], prepared)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return {"check_wall_s": round(check_wall, 3), "check_cpu_s": round(check_cpu, 3),
            "candidate_median_ms": round(statistics.median(walls) * 1000, 3),
            "candidate_cpu_median_ms": round(statistics.median(cpus) * 1000, 3)}


def fit(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Least squares of log(t) = log(a) + b log(x): (a, b)."""
    xs = [math.log(x) for x, _ in points]
    ys = [math.log(y) for _, y in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return math.exp(my - b * mx), b


def _ratios(peer_cpu_s: float, core: dict[str, Any]) -> dict[str, float]:
    return {"karpenter_pass_over_core_check": round(peer_cpu_s / max(core["check_cpu_s"], 1e-9), 1),
            "karpenter_pass_over_core_candidate": round(
                peer_cpu_s / max(core["candidate_cpu_median_ms"] / 1000, 1e-9), 1)}


def run() -> dict[str, Any]:
    catalog = cat.default()
    measured, plus_one_cpu_s = karpenter_passes(PEER_SIZES, catalog)
    rows = []
    for size, peer in zip(PEER_SIZES, measured, strict=True):
        core = core_figures(size, catalog)
        rows.append({**peer, **core, **_ratios(peer["pass_cpu_s"], core)})
    rows[0]["plus_one_pass_cpu_s"] = round(plus_one_cpu_s, 3)
    a, b = fit([(r["overlays"] * r["nodepools"], r["pass_cpu_s"]) for r in rows])
    targets = []
    for size in TARGET_SIZES:
        core = core_figures(size, catalog)
        estimate = a * (size.overlays * size.pools) ** b
        targets.append({"overlays": size.overlays, "nodepools": size.pools,
                        "karpenter_pass_cpu_s_estimated": round(estimate, 1), **core, **_ratios(estimate, core)})
    return {"karpenter": "sigs.k8s.io/karpenter (hack/karpenter-oracle/go.mod)",
            "measured": rows,
            "growth": {"model": "karpenter_pass_cpu_s = a * (overlays * nodepools) ** b",
                       "a": a, "b": round(b, 3)},
            "benchmark_sizes": targets}


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
