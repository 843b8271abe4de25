"""Hand-written code against the library that could replace it (docs/design.md §8): Karpenter's metrics read by
sources/karpenter.py's two-family line parser against prometheus_client's text parser, and a valid NodeOverlay's
schema check by the fastjsonschema-compiled yes/no check against jsonschema's validator, each on the same input in
the same run. `python -m benchmarks.engines_bench`."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from benchmarks import schema_bench
from simulation.validation import crds
from sources import karpenter

# A large region as the AWS provider publishes it (types x zones x capacity types), among Karpenter's other
# metrics (histograms of its controllers), which a scrape also carries.
TYPES, ZONES, CAPACITY_TYPES, OTHER_SERIES = 1_400, 6, ("on-demand", "spot", "reserved"), 60_000


def exposition() -> bytes:
    lines = [f"# HELP {karpenter.AVAILABLE} Availability.", f"# TYPE {karpenter.AVAILABLE} gauge"]
    prices = [f"# HELP {karpenter.PRICE} Price.", f"# TYPE {karpenter.PRICE} gauge"]
    for t in range(TYPES):
        for z in range(ZONES):
            for ct in CAPACITY_TYPES:
                labels = f'capacity_type="{ct}",instance_type="t{t}.large",zone="us-east-1{"abcdef"[z]}"'
                lines.append(f"{karpenter.AVAILABLE}{{{labels}}} 1")
                prices.append(f"{karpenter.PRICE}{{{labels}}} {0.01 * (t % 97 + 1):.4f}")
    other = ["# HELP controller_runtime_reconcile_time_seconds Time.",
             "# TYPE controller_runtime_reconcile_time_seconds histogram"]
    other += [f'controller_runtime_reconcile_time_seconds_bucket{{controller="c{i // 20}",le="{i % 20}"}} {i}'
              for i in range(OTHER_SERIES)]
    return ("\n".join([*other, *lines, *prices]) + "\n").encode()


def with_library(body: bytes) -> int:
    """The two families through prometheus_client's parser (it reads every family of the body)."""
    from prometheus_client.parser import text_string_to_metric_families

    wanted = {karpenter.AVAILABLE, karpenter.PRICE}
    return sum(len(family.samples) for family in text_string_to_metric_families(body.decode())
               if family.name in wanted)


def with_library_filtered(body: bytes) -> int:
    """prometheus_client's parser on only the lines of the two families (the hand parser's own pre-filter)."""
    from prometheus_client.parser import text_string_to_metric_families

    ours = b"\n".join(line for line in body.splitlines() if line.startswith(karpenter._OURS)).decode() + "\n"
    return sum(len(family.samples) for family in text_string_to_metric_families(ours))


def best(call: Callable[[], Any], repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return min(times)


def import_seconds(module: str) -> float:
    """A fresh interpreter's import of `module` (its median of 5), minus an empty interpreter's."""
    def once(code: str) -> float:
        done = subprocess.run([sys.executable, "-c", f"import time; s = time.perf_counter(); {code}; "
                               "print(time.perf_counter() - s)"], capture_output=True, text=True, check=True)
        return float(done.stdout)
    return statistics.median(once(f"import {module}") for _ in range(5))


def run() -> dict[str, Any]:
    body = exposition()
    series = TYPES * ZONES * len(CAPACITY_TYPES) * 2
    assert with_library(body) == with_library_filtered(body) == series
    assert len(karpenter.parse(body)[0]) == series // 2
    metrics = {"bodyBytes": len(body), "offeringSeries": series,
               "handSeconds": best(lambda: karpenter.parse(body)),
               "prometheusClientSeconds": best(lambda: with_library(body), 3),
               "prometheusClientFilteredSeconds": best(lambda: with_library_filtered(body), 3)}
    crd = crds.karpenter()
    overlay = schema_bench.plain_overlay()
    assert crd.accepts is not None and crd.accepts(overlay) and crd.validator.is_valid(overlay)
    rounds = 2_000
    schema = {"fastjsonschemaSecondsPerOverlay": best(lambda: [crd.accepts(overlay) for _ in range(rounds)]) / rounds,
              "jsonschemaSecondsPerOverlay": best(lambda: [crd.validator.is_valid(overlay) for _ in range(rounds)])
              / rounds,
              "importJsonschemaSeconds": import_seconds("jsonschema"),
              "importFastjsonschemaSeconds": import_seconds("fastjsonschema")}
    return {"metrics": metrics, "schema": schema}


if __name__ == "__main__":
    json.dump(run(), sys.stdout, indent=2)
    print()
