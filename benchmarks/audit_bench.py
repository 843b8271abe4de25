"""Audit figures: a full audit (`webhook.audit.evaluate` plus planning its events) of the 2,000/20
and 10,000/100 workloads on a prepared snapshot, against the cold evaluation `overlay-lint check
--cluster` does (every check run again) in the same process; and the per-candidate admission
latency while audits run back to back in a worker thread, against the same candidates without.

Each size runs in a child process (`python -m benchmarks.audit_bench SIZE`), so the sizes do not
share memory or warm caches."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

from benchmarks import workload
from simulation import evaluate as ev
from simulation.semantics import catalog as cat
from simulation.semantics import model
from webhook import audit, events, store

SIZES = (workload.Size(2000, 20), workload.Size(10_000, 100))
ROUNDS = 3
REQUESTS = 200


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _full_audit(prepared: ev.Prepared, objects: store.Store) -> float:
    started = time.perf_counter()
    report = audit.evaluate(prepared, objects)
    result = audit.summarise(0, report, 0.0)
    events.Ledger().plan(events.notes(result.findings), [])
    return time.perf_counter() - started


def _admissions(prepared: ev.Prepared, pools: int) -> list[float]:
    times = []
    for i in range(REQUESTS):
        doc = ev.Document(workload.candidate(i, pools), 1_000_000 + i)
        t = time.perf_counter()
        ev.evaluate([doc], prepared)
        times.append(time.perf_counter() - t)
    return times


def _latency(times: list[float]) -> dict[str, float]:
    return {"median_ms": round(statistics.median(times) * 1000, 3),
            "p99_ms": round(_percentile(times, 0.99) * 1000, 3)}


def measure(size: workload.Size) -> dict[str, Any]:
    catalog = cat.default()
    objects = store.build(workload.documents(size, catalog))
    docs = store.documents(objects)
    started = time.perf_counter()
    prepared = ev.prepare(docs, catalog)
    out: dict[str, Any] = {"overlays": size.overlays, "nodepools": size.pools,
                           "prepare_s": round(time.perf_counter() - started, 3)}
    audits = [_full_audit(prepared, objects) for _ in range(ROUNDS)]
    started = time.perf_counter()
    pools = [d for d in docs if model.kind_of(d.obj) == model.NODEPOOL]
    ev.evaluate([d for d in docs if model.kind_of(d.obj) == model.NODEOVERLAY], ev.prepare(pools, catalog),
                full=True)
    cold = time.perf_counter() - started
    median = statistics.median(audits)
    out.update({"audit_s": [round(a, 3) for a in audits], "audit_median_s": round(median, 3),
                "cold_check_s": round(cold, 3), "cold_over_audit": round(cold / median, 2)})
    if size == workload.DEFAULT:
        quiet = _admissions(prepared, size.pools)
        stop = threading.Event()

        def loop() -> None:
            while not stop.is_set():
                _full_audit(prepared, objects)

        worker = threading.Thread(target=loop, daemon=True)
        worker.start()
        try:
            busy = _admissions(prepared, size.pools)
        finally:
            stop.set()
            worker.join()
        out["admission_quiet"] = _latency(quiet)
        out["admission_during_audits"] = _latency(busy)
        out["p99_ratio"] = round(_percentile(busy, 0.99) / _percentile(quiet, 0.99), 2)
    return out


def run() -> list[dict[str, Any]]:
    results = []
    for size in SIZES:
        done = subprocess.run([sys.executable, "-m", "benchmarks.audit_bench", str(size.overlays), str(size.pools)],
                              capture_output=True, text=True, check=True)
        results.append(json.loads(done.stdout))
    return results


def main(argv: list[str]) -> int:
    if len(argv) == 2:
        print(json.dumps(measure(workload.Size(int(argv[0]), int(argv[1])))))
    else:
        print(json.dumps(run(), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
