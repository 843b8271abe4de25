"""Shape families (issue 38): inputs real repositories have, each generated at N, 2N and 4N overlays, timed as a
cold `overlay-lint check` from YAML, the webhook's readiness (prepare and warm, as `webhook/state.py` does) and one
candidate against the prepared set; each family's growth exponent log(t(4N)/t(N))/log 4 says whether its cost is
linear (1) or worse. Also one candidate checked with `--existing` beside the same objects checked all at once.

`python -m benchmarks.shapes [N] [--family NAME]...` prints one JSON document; `make bench` runs it at N = 2,500.
Each measurement runs in a child process, so its peak RSS is its own.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks import core_bench

N = 2_500
# Candidates timed per size; the figure is their 99th percentile.
REQUESTS = 40
# Families by instance family: a window of this many consecutive ones.
WINDOW = 4
TYPES = ("m5.large", "m5.xlarge", "c5.large")
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
CAPACITY_TYPES = ("on-demand", "spot")
# Overlays per NodePool in the NodePool-scoped tiers.
TIERS = 50
# Objects per file: a repository's files, each below the linter's per-file size limit (10 MiB).
PER_FILE = 500

Doc = dict[str, Any]


def _overlay(name: str, reqs: list[Doc], **spec: Any) -> Doc:
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
            "spec": {"requirements": reqs, **spec}}


def _req(key: str, operator: str, *values: str) -> Doc:
    return {"key": key, "operator": operator, "values": list(values)}


def _pool(name: str, labels: dict[str, str] | None = None) -> Doc:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": {"metadata": {"labels": labels or {}}, "spec": {"requirements": []}}}}


def _families() -> list[str]:
    from simulation.semantics import catalog as cat

    return sorted({t.labels["karpenter.k8s.aws/instance-family"] for t in cat.default().types})


def identical(n: int) -> list[Doc]:
    """One weight, one field, the same cells: every pair collides."""
    return [_overlay(f"same-{i:05d}", [_req("karpenter.k8s.aws/instance-family", "In", "m5")],
                     priceAdjustment="-10%") for i in range(n)]


def ladder(n: int) -> list[Doc]:
    """A generator's per-type prices: the same three types, each overlay at its own weight (all but one shadowed)."""
    return [_overlay(f"ladder-{i:05d}", [_req("node.kubernetes.io/instance-type", "In", *TYPES)],
                     weight=1 + i % 10_000, price=f"0.{i + 1:05d}") for i in range(n)]


def windows(n: int) -> list[Doc]:
    """Sliding windows of instance families at a hundred weights: neighbours overlap, far ones do not."""
    families = _families()
    return [_overlay(f"window-{i:05d}", [_req("karpenter.k8s.aws/instance-family", "In",
                                              *(families[(i + k) % len(families)] for k in range(WINDOW)))],
                     weight=1 + i % 100, priceAdjustment=f"-{1 + i % 50}%") for i in range(n)]


def tiers(n: int) -> list[Doc]:
    """Per-team NodePools, each with a ladder of TIERS price tiers over its own cells."""
    pools = max(1, n // TIERS)
    out: list[Doc] = [_pool(f"team-{p:04d}", {"team": f"team-{p:04d}"}) for p in range(pools)]
    out += [_overlay(f"tier-{i:05d}", [_req("karpenter.sh/nodepool", "In", f"team-{i % pools:04d}"),
                                       _req("karpenter.k8s.aws/instance-category", "In", "m", "c", "r")],
                     weight=1 + i // pools, priceAdjustment=f"-{1 + i % 40}%") for i in range(n)]
    return out


def grid(n: int) -> list[Doc]:
    """Zone x capacity type x instance family cells, one overlay each, at one weight: disjoint cells, no conflict."""
    families = _families()
    out = []
    for i in range(n):
        zone, kind = ZONES[i % len(ZONES)], CAPACITY_TYPES[i // len(ZONES) % len(CAPACITY_TYPES)]
        family = families[i // (len(ZONES) * len(CAPACITY_TYPES)) % len(families)]
        out.append(_overlay(f"grid-{i:05d}", [_req("topology.kubernetes.io/zone", "In", zone),
                                              _req("karpenter.sh/capacity-type", "In", kind),
                                              _req("karpenter.k8s.aws/instance-family", "In", family)],
                            weight=1 + i // (len(ZONES) * len(CAPACITY_TYPES) * len(families)),
                            priceAdjustment=f"-{1 + i % 30}%"))
    return out


def resources(n: int) -> list[Doc]:
    """Device-plugin overlays: each sets an extended resource of its own on a family."""
    families = _families()
    return [_overlay(f"device-{i:05d}", [_req("karpenter.k8s.aws/instance-family", "In",
                                              families[i % len(families)])],
                     capacity={f"example.com/device-{i:05d}": str(1 + i % 8)}) for i in range(n)]


def long_requirements(n: int) -> list[Doc]:
    """Overlays with near the CRD's 100 requirements: many NotIn keys and a few ranges."""
    families = _families()
    out = []
    for i in range(n):
        reqs = [_req("karpenter.k8s.aws/instance-family", "NotIn", families[(i + k) % len(families)])
                for k in range(90)]
        reqs += [_req("karpenter.k8s.aws/instance-cpu", "Gt", str(i % 8)),
                 _req("karpenter.k8s.aws/instance-memory", "Lt", str(65536 * (1 + i % 4))),
                 _req("kubernetes.io/arch", "In", "amd64", "arm64")]
        out.append(_overlay(f"long-{i:05d}", reqs, weight=1 + i % 10_000, priceAdjustment="-1%"))
    return out


def instance_types(n: int) -> list[Doc]:
    """A catalog given as InstanceType documents, as many as overlays, one overlay per type."""
    out: list[Doc] = []
    for i in range(n):
        name = f"x{i // 100}.size{i % 100}"
        out.append({"apiVersion": "karpenter.sh/v1alpha1", "kind": "InstanceType",
                    "metadata": {"name": name, "labels": {"kubernetes.io/arch": "amd64",
                                                          "example.com/family": f"x{i // 100}"}},
                    "spec": {"offerings": [{"karpenter.sh/capacity-type": kind, "topology.kubernetes.io/zone": zone,
                                            "karpenter.sh/price": f"{0.01 * (1 + i % 97):.2f}"}
                                           for zone in ZONES[:2] for kind in CAPACITY_TYPES],
                             "resources": {"cpu": str(2 + i % 64), "memory": f"{4 + i % 256}Gi", "pods": "110"}}})
    out += [_overlay(f"per-type-{i:05d}", [_req("node.kubernetes.io/instance-type", "In",
                                                f"x{i // 100}.size{i % 100}")], price=f"{0.02 * (1 + i % 89):.2f}")
            for i in range(n)]
    return out


FAMILIES: dict[str, Callable[[int], list[Doc]]] = {
    "identical": identical, "ladder": ladder, "windows": windows, "tiers": tiers, "grid": grid,
    "resources": resources, "long-requirements": long_requirements, "instance-types": instance_types,
}


def candidate(family: str, n: int, i: int) -> Doc:
    """The overlay the family's generator makes next after `n` (what an admission of one more such overlay asks),
    under a name of its own: it meets, shadows or conflicts with what its shape makes it meet."""
    made = [d for d in FAMILIES[family](n + 1) if d["kind"] == "NodeOverlay"][-1]
    return {**made, "metadata": {"name": f"zz-candidate-{i:03d}"}}


def text_of(items: Sequence[Doc], form: str) -> str:
    """The objects as a YAML stream (block style, what repositories hold) or one JSON List."""
    if form == "json":
        return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(items)})
    import io

    from ruamel.yaml import YAML

    out = io.StringIO()
    YAML(typ="safe").dump_all(list(items), out)
    return out.getvalue()


def _child(argv: list[str]) -> tuple[float, float, float, subprocess.CompletedProcess[str]]:
    """Wall seconds, CPU seconds, peak RSS in MB and the run of `python -m argv...` in a child. On a shared machine
    the CPU figure is the one to compare: the wall figure also counts the time spent waiting for a core."""
    started, before = time.perf_counter(), _children_cpu()
    proc, peak_kib = core_bench._child(argv)
    return time.perf_counter() - started, _children_cpu() - before, round(peak_kib / 1024, 1), proc


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def measure(family: str, n: int, form: str = "yaml") -> dict[str, Any]:
    """A family at one size: cold check, readiness, one candidate, and --existing beside all at once."""
    items = FAMILIES[family](n)
    suffix = f".{form}"
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "existing"
        folder.mkdir()
        for start in range(0, len(items), PER_FILE):
            (folder / f"objects-{start:06d}{suffix}").write_text(text_of(items[start:start + PER_FILE], form))
        one = Path(tmp) / f"candidate{suffix}"
        one.write_text(text_of([candidate(family, n, 0)], form))
        check_s, check_cpu, check_mb, proc = _child(["lint", "check", str(folder), "--format", "json"])
        existing_s, existing_cpu, _, _ = _child(["lint", "check", "--existing", str(folder), str(one), "--format",
                                                 "json"])
        all_s, all_cpu, _, _ = _child(["lint", "check", str(folder), str(one), "--format", "json"])
        _, _, ready_mb, ready = _child(["benchmarks.shapes", "--ready", family, str(n)])
    row: dict[str, Any] = {"family": family, "overlays": n, "format": form, "check_s": round(check_s, 3),
                           "check_cpu_s": round(check_cpu, 3), "check_peak_mb": check_mb,
                           "check_exit": proc.returncode, "existing_s": round(existing_s, 3),
                           "existing_cpu_s": round(existing_cpu, 3), "all_at_once_s": round(all_s, 3),
                           "all_at_once_cpu_s": round(all_cpu, 3),
                           "existing_ratio_cpu": round(existing_cpu / max(all_cpu, 1e-6), 3)}
    row.update(json.loads(ready.stdout) if ready.returncode == 0 else {"error": ready.stderr[-500:]})
    row["ready_peak_mb"] = ready_mb
    return row


def ready(family: str, n: int) -> dict[str, Any]:
    """In this process: the webhook's readiness (prepare, then warm) and one candidate's p99 against it."""
    from simulation import evaluate as ev
    from simulation.semantics import catalog as cat
    from webhook.server import LOADING_GC_THRESHOLD

    items = FAMILIES[family](n)
    catalog = cat.default()
    # The webhook loads with a raised first GC threshold (webhook/server.py) and restores it once ready; the figure
    # is the webhook's only when the collector runs as often as it does there.
    collecting = gc.get_threshold()
    gc.set_threshold(LOADING_GC_THRESHOLD, *collecting[1:])
    started, cpu = time.perf_counter(), time.process_time()
    if family == "instance-types":
        catalog = cat.from_documents([i for i in items if i["kind"] == "InstanceType"])
    prepared = ev.warmed(ev.prepare([ev.Document(o, i, False) for i, o in enumerate(items)], catalog))
    ready_s, ready_cpu = time.perf_counter() - started, time.process_time() - cpu
    # As the webhook does once ready (webhook/server.py): the snapshot lives as long as the process, and a request's
    # collections need not scan it (unfrozen, a full collection of 10,000 overlays' objects costs ~100 ms CPU and
    # lands in some of the 40 requests).
    gc.freeze()
    gc.set_threshold(*collecting)
    times, cpus = [], []
    made = candidate(family, n, 0)
    for i in range(REQUESTS):
        doc = ev.Document({**made, "metadata": {"name": f"zz-candidate-{i:03d}"}}, 1_000_000 + i)
        t, c = time.perf_counter(), time.process_time()
        ev.evaluate([doc], prepared)
        times.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return {"ready_s": round(ready_s, 3), "ready_cpu_s": round(ready_cpu, 3),
            "candidate_median_ms": round(statistics.median(times) * 1000, 3),
            "candidate_p99_ms": round(core_bench._percentile(times, 0.99) * 1000, 3),
            "candidate_cpu_p99_ms": round(core_bench._percentile(cpus, 0.99) * 1000, 3)}


def exponent(small: float, large: float, factor: int = 4) -> float:
    """log(t(4N)/t(N))/log 4: 1 is linear, 2 quadratic."""
    return round(math.log(max(large, 1e-6) / max(small, 1e-6)) / math.log(factor), 3)


FIGURES = ("check_s", "check_cpu_s", "ready_s", "ready_cpu_s", "candidate_p99_ms", "candidate_cpu_p99_ms",
           "existing_cpu_s")


def run(n: int = N, families: Sequence[str] = tuple(FAMILIES), form: str = "yaml") -> dict[str, Any]:
    out: dict[str, Any] = {"n": n, "format": form, "cores": os.cpu_count(), "load_avg": os.getloadavg()[0],
                           "families": {}}
    for family in families:
        rows = [measure(family, size, form) for size in (n, 2 * n, 4 * n)]
        growth = {figure: exponent(rows[0].get(figure, 0), rows[-1].get(figure, 0)) for figure in FIGURES}
        out["families"][family] = {"rows": rows, "exponent": growth}
        # Each family as it is done: a long run read before its end still says something.
        print(json.dumps({family: out["families"][family]}), file=sys.stderr, flush=True)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.shapes")
    parser.add_argument("n", nargs="?", type=int, default=N)
    parser.add_argument("--family", action="append", choices=sorted(FAMILIES))
    parser.add_argument("--format", choices=("yaml", "json"), default="yaml", help="how the files are written")
    parser.add_argument("--ready", nargs=2, metavar=("FAMILY", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.ready:
        json.dump(ready(args.ready[0], int(args.ready[1])), sys.stdout)
        return 0
    json.dump(run(args.n, args.family or tuple(FAMILIES), args.format), sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
