"""A decision's own cost in process, without HTTP: `webhook.state.Cache.decide` on the default workload (2,000
overlays, 20 NodePools, as `--state` loads them) for broad candidates, a dry run of a clean one and of a conflicting
one in turn, and a held admission of the clean one (the ledger read, judged and written by compare-and-swap; the
ledger is emptied after each and the wall clock moved past its record's deadline, outside the timing).
Per-decision CPU and wall medians in microseconds.

`python -m benchmarks.decision_bench [COUNT]`: run it with each tree's own interpreter, the trees alternated, to
compare a change of the decision path (docs/performance.md, row 5).
"""

from __future__ import annotations

import asyncio
import gc
import json
import statistics
import sys
import time
from typing import Any

from benchmarks import workload
from simulation import evaluate as ev
from simulation.semantics import catalog as cat
from webhook import ledger as lg
from webhook.ledgerstore import MemoryLedger
from webhook.state import Cache

COUNT = 400
# Decisions first made and not counted: the evaluation's caches fill on the first few.
WARMUP = 40
KINDS = ("dry_clean", "dry_conflicting", "held")


def _admits(report: ev.Report) -> bool:
    return not report.errors()


async def _run(count: int) -> dict[str, dict[str, float]]:
    catalog = cat.default()
    now = [time.time()]
    cache = Cache(debounce=0.0, wall=lambda: now[0])
    cache.set_catalog(catalog)
    cache.load(workload.documents(workload.DEFAULT, catalog))
    await cache.start()
    try:
        if not await cache.wait_ready(300):
            raise RuntimeError("the cache did not become ready")
        # As the webhook does once ready (webhook/server.py): the snapshot is not scanned by a request's collections.
        gc.freeze()
        shapes = [workload.broad(i // 2, conflicting=i % 2 == 1, catalog=catalog) for i in range(64)]
        cpu: dict[str, list[float]] = {k: [] for k in KINDS}
        wall: dict[str, list[float]] = {k: [] for k in KINDS}

        async def timed(kind: str, counted: bool, obj: dict[str, Any], dry_run: bool) -> None:
            started, used = time.perf_counter(), time.process_time()
            decision = await cache.decide(obj, "CREATE", None, dry_run=dry_run, admits=_admits)
            if counted:
                cpu[kind].append(time.process_time() - used)
                wall[kind].append(time.perf_counter() - started)
            if not dry_run and not (decision.allowed and decision.held):
                raise RuntimeError(f"a clean candidate was not admitted: {decision}")

        for i in range(count + WARMUP):
            shape = shapes[i % len(shapes)]
            obj = {**shape, "metadata": {**shape["metadata"], "name": f"bench-{i}", "uid": f"u-{i}"}}
            await timed("dry_conflicting" if i % 2 else "dry_clean", i >= WARMUP, obj, True)
            if i % 2 == 0:
                await timed("held", i >= WARMUP, obj, False)
                cache.ledger, cache.view = MemoryLedger(), lg.Ledger()
                # The record this replica wrote counts no more (it would be written back into the empty ledger).
                now[0] += 3600
        return {k: {"cpu_us": round(statistics.median(cpu[k]) * 1e6, 1),
                    "wall_us": round(statistics.median(wall[k]) * 1e6, 1)} for k in KINDS}
    finally:
        await cache.close()


def main(argv: list[str]) -> int:
    json.dump(asyncio.run(_run(int(argv[0]) if argv else COUNT)), sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
