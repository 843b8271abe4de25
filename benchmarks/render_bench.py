"""`overlay-lint check` of a tree of kustomizations, cold (nothing cached: every root rendered, several at once)
against warm (the same tree again: every render answered from the cache), measured in the same run (child
processes, alternated, the median of `REPEAT`). The tree: `ROOTS` overlays/<env> kustomizations over one base of
`OVERLAYS` NodeOverlays and `POOLS` NodePools, each adding its own name prefix and a patch; kustomize is the one
on PATH (kubectl's embedded one when kustomize itself is missing), as the linter finds it."""

from __future__ import annotations

import json
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.core_bench import _child
from sources import templates

ROOTS = 20
OVERLAYS = 60
POOLS = 4
REPEAT = 3


def tree(root: Path) -> Path:
    base = root / "base"
    base.mkdir(parents=True)
    overlays = [{"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": f"o{i}"},
                 "spec": {"weight": 1 + i, "priceAdjustment": "-10%", "requirements": [
                     {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": [f"m{i % 7 + 3}"]}]}}
                for i in range(OVERLAYS)]
    pools = [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": f"p{i}"},
              "spec": {"weight": 1 + i, "template": {"spec": {"requirements": [], "nodeClassRef": {
                  "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}} for i in range(POOLS)]
    (base / "objects.yaml").write_text("\n---\n".join(json.dumps(o) for o in [*pools, *overlays]))
    (base / "kustomization.yaml").write_text("resources: [objects.yaml]\n")
    for env in range(ROOTS):
        folder = root / "overlays" / f"env{env}"
        folder.mkdir(parents=True)
        (folder / "kustomization.yaml").write_text(
            f"namePrefix: env{env}-\nresources: [../../base]\npatches: [{{path: weight.yaml}}]\n")
        (folder / "weight.yaml").write_text(json.dumps({"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
                                                        "metadata": {"name": "o0"}, "spec": {"weight": 900 + env}}))
    return root


def _timed(target: Path, cache: Path) -> tuple[float, float]:
    """Wall seconds, and CPU seconds of the run and every process it started (kustomize's included): on a
    shared machine the second is the steadier figure."""
    os.environ["OVERLAY_GUARD_RENDER_CACHE"] = str(cache)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc, _ = _child(["lint", "check", str(target), "--format", "json"])
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert proc.returncode in (0, 1), proc.stderr
    return elapsed, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def run() -> dict[str, Any]:
    if templates.renderer() is None:
        return {"skipped": "neither kustomize nor kubectl is on PATH"}
    before = os.environ.get("OVERLAY_GUARD_RENDER_CACHE")
    cold: list[tuple[float, float]] = []
    warm: list[tuple[float, float]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            target = tree(Path(tmp) / "tree")
            for i in range(REPEAT):
                cache = Path(tmp) / f"cache{i}"
                cold.append(_timed(target, cache))
                warm.append(_timed(target, cache))
    finally:
        if before is None:
            os.environ.pop("OVERLAY_GUARD_RENDER_CACHE", None)
        else:
            os.environ["OVERLAY_GUARD_RENDER_CACHE"] = before
    figures: dict[str, Any] = {"roots": ROOTS, "objects_per_root": OVERLAYS + POOLS,
                               "renderer": " ".join(templates.renderer() or [])}
    for i, unit in enumerate(("seconds", "cpu_seconds")):
        figures[f"cold_{unit}"] = round(statistics.median(c[i] for c in cold), 3)
        figures[f"warm_{unit}"] = round(statistics.median(w[i] for w in warm), 3)
        figures[f"warm_over_cold_{unit}"] = round(figures[f"warm_{unit}"] / figures[f"cold_{unit}"], 3)
    return figures


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
