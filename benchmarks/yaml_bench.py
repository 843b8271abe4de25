"""What reading YAML costs against JSON: `overlay-lint check` of the same objects (5,000 capacity overlays, each
setting a resource of its own, and their NodePools) written as multi-document YAML and as a stream of JSON
objects, in one file and one object a file (how many repositories hold them), runs interleaved so that both see
the same machine; and reading alone, in this process, of shape families written as YAML and as JSON (`reading`).
The target is a median at most 1.5 times the JSON run's (docs/performance.md)."""

from __future__ import annotations

import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import yaml

from benchmarks import shapes, workload
from sources import tree

OVERLAYS = 5_000
POOLS = 20
TARGET = 1.5


def documents(count: int = OVERLAYS, pools: int = POOLS) -> list[dict[str, Any]]:
    """NodePools and clean capacity overlays: every overlay sets an extended resource no other sets."""
    overlays = workload.overlays(count, pools=pools, distinct=True)
    for i, overlay in enumerate(overlays):
        spec = overlay["spec"]
        spec.pop("price", None)
        spec.pop("priceAdjustment", None)
        spec["capacity"] = {f"example.com/device-{i:05d}": "2"}
    return [*workload.nodepools(pools), *overlays]


def _timed(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run: CPU time moves less than wall time with the shared machine's load."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def _written(tmp: str, docs: list[dict[str, Any]], layout: str) -> tuple[str, str]:
    """The objects as YAML and as JSON, in one file or one object a file: the paths to check."""
    as_yaml, as_json = os.path.join(tmp, "yaml"), os.path.join(tmp, "json")
    for path in (as_yaml, as_json):
        os.mkdir(path)
    if layout == "one file":
        pathlib.Path(as_yaml, "objects.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
        pathlib.Path(as_json, "objects.json").write_text("\n".join(json.dumps(d, indent=2) for d in docs),
                                                         encoding="utf-8")
        return as_yaml, as_json
    for i, doc in enumerate(docs):
        pathlib.Path(as_yaml, f"{i:05d}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        pathlib.Path(as_json, f"{i:05d}.json").write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return as_yaml, as_json


def reading(family: str, count: int = 2_500, rounds: int = 5) -> dict[str, Any]:
    """Reading alone: `tree.documents` of a shape family's objects in files of `shapes.PER_FILE` (a YAML stream, or
    one JSON List), the files of a round in one reading as `objects.Loader.load` reads a run's; CPU seconds, the
    least of the rounds (the collector's share of decoding, paid by both, varies between them). Nothing read is
    kept across rounds: what is alive is what the collector walks."""
    items = shapes.FAMILIES[family](count)
    texts = {form: [shapes.text_of(items[at:at + shapes.PER_FILE], form) for at in range(0, count, shapes.PER_FILE)]
             for form in ("yaml", "json")}
    del items
    # The same objects, or the ratio compares different work.
    values = {form: [p.value for text in files for p in tree.documents(text)] for form, files in texts.items()}
    if [item for listed in values["json"] for item in listed["items"]] != values["yaml"]:
        raise AssertionError(f"{family}: YAML and JSON read different objects")
    del values
    best = {form: float("inf") for form in texts}
    for _ in range(rounds):
        for form, files in texts.items():
            start = time.process_time()
            with tree.reading():
                read = [list(tree.documents(text)) for text in files]
            best[form] = min(best[form], time.process_time() - start)
            del read
    return {"json_s": round(best["json"], 3), "yaml_s": round(best["yaml"], 3),
            "ratio": round(best["yaml"] / best["json"], 2)}


def run(rounds: int = 3, count: int = OVERLAYS) -> dict[str, Any]:
    lint = str(pathlib.Path(sys.executable).with_name("overlay-lint"))
    check = [lint, "check"] if os.path.exists(lint) else [sys.executable, "-m", "lint", "check"]
    out: dict[str, Any] = {"command": f"overlay-lint check PATH ({count} capacity overlays, {POOLS} NodePools)",
                           "rounds": rounds, "target_ratio": TARGET, "load": os.getloadavg()}
    for layout in ("one file", "one object a file"):
        with tempfile.TemporaryDirectory() as tmp:
            as_yaml, as_json = _written(tmp, documents(count), layout)
            from_yaml, from_json = [], []
            for _ in range(rounds):
                from_json.append(_timed([*check, as_json]))
                from_yaml.append(_timed([*check, as_yaml]))
        out[layout] = {}
        for i, what in enumerate(("wall", "cpu")):
            yaml_s, json_s = statistics.median(r[i] for r in from_yaml), statistics.median(r[i] for r in from_json)
            out[layout][what] = {"json_median_s": round(json_s, 3), "yaml_median_s": round(yaml_s, 3),
                                 "ratio": round(yaml_s / json_s, 2)}
    out["reading alone, 2,500"] = {family: reading(family) for family in ("long-requirements", "resources", "ladder")}
    return out


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
