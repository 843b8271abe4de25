"""A generated Flux fleet (issue 37 item 4): the whole fleet against the per-cluster loop a user would script, one
staged file against its cluster alone, and peak memory. `python -m benchmarks.fleet_bench [CLUSTERS OVERLAYS POOLS]`
prints one JSON document; docs/performance.md "Fleets" holds the figures."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

CLUSTERS, OVERLAYS, POOLS = 40, 60, 4
FAMILIES = ("m5", "c5", "r5", "m6i", "c6i", "r6i", "m7i", "c7i", "r7i", "t3", "m6g", "c6g")
BIN = pathlib.Path(sys.executable).parent


def _overlay(i: int) -> dict[str, Any]:
    # Distinct weights: a clean fleet, so every run does the same work (no finding output to vary).
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": f"overlay-{i}"},
            "spec": {"weight": 10 + i, "priceAdjustment": f"-{1 + i % 30}%", "requirements": [
                {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": [FAMILIES[i % len(FAMILIES)]]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand" if i % 2 else "spot"]}]}}


def _pool(cluster: int, j: int) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": f"pool-{j}"},
            "spec": {"weight": j + 1, "template": {
                "metadata": {"labels": {"team": f"team-{j}"}},
                "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                         "requirements": [{"key": "topology.kubernetes.io/zone", "operator": "In",
                                           "values": [f"us-east-1{'abc'[cluster % 3]}"]}]}}}}


def _write(path: pathlib.Path, *documents: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n---\n".join(json.dumps(d) for d in documents) + "\n", encoding="utf-8")


def _kustomization(name: str, path: str) -> dict[str, Any]:
    return {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": name, "namespace": "flux-system"},
            "spec": {"path": path, "interval": "10m", "prune": True,
                     "sourceRef": {"kind": "GitRepository", "name": "flux-system"}}}


def generate(root: pathlib.Path, clusters: int = CLUSTERS, overlays: int = OVERLAYS, pools: int = POOLS) -> None:
    """clusters/cN/{flux-system/gotk-sync.yaml, karpenter.yaml} and infrastructure/karpenter/{base, cN}: every
    cluster renders the base's overlays (its weight patched per cluster) and its own NodePools."""
    base = root / "infrastructure" / "karpenter" / "base"
    _write(base / "overlays.yaml", *(_overlay(i) for i in range(overlays)))
    (base / "kustomization.yaml").write_text("resources: [overlays.yaml]\n")
    for n in range(clusters):
        name = f"c{n}"
        source = {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
                  "metadata": {"name": "flux-system", "namespace": "flux-system"},
                  "spec": {"url": "ssh://git@example.com/fleet", "ref": {"branch": "main"}, "interval": "1m"}}
        _write(root / "clusters" / name / "flux-system" / "gotk-sync.yaml", source,
               _kustomization("flux-system", f"./clusters/{name}"))
        _write(root / "clusters" / name / "karpenter.yaml",
               _kustomization("karpenter", f"./infrastructure/karpenter/{name}"))
        own = root / "infrastructure" / "karpenter" / name
        _write(own / "nodepools.yaml", *(_pool(n, j) for j in range(pools)))
        (own / "kustomization.yaml").write_text(
            "resources: [../base, nodepools.yaml]\npatches:\n  - target: {kind: NodeOverlay, name: overlay-0}\n"
            f"    patch: '[{{\"op\": \"replace\", \"path\": \"/spec/weight\", \"value\": {1000 + n}}}]'\n")


def _timed(command: str, cwd: pathlib.Path, env: dict[str, str]) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=3600, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{command}: exit {done.returncode}: {done.stderr[-2000:]}")
    return elapsed, done.returncode


def _peak_mib(argv: list[str], cwd: pathlib.Path, env: dict[str, str]) -> dict[str, float]:
    """Peak RSS of `overlay-lint ARGV` itself, and the largest of the processes it waited for (its judging workers,
    and the kustomize builds they ran)."""
    script = ("import resource, sys\nfrom lint.cli import main\nstatus = main(sys.argv[1:])\n"
              "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,"
              " resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n")
    done = subprocess.run([str(BIN / "python"), "-c", script, *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=3600, check=False)
    own, children = (int(v) / 1024 for v in done.stderr.strip().splitlines()[-1].split())
    return {"own": round(own), "largest_child": round(children)}


def run(clusters: int = CLUSTERS, overlays: int = OVERLAYS, pools: int = POOLS) -> dict[str, Any]:
    render = "kustomize build" if shutil.which("kustomize") else "kubectl kustomize"
    with tempfile.TemporaryDirectory() as scratch:
        root = pathlib.Path(scratch) / "fleet"
        generate(root, clusters, overlays, pools)
        # A render cache of its own: the first fleet run renders everything, the second reads the cache.
        env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
               "OVERLAY_GUARD_RENDER_CACHE": str(pathlib.Path(scratch) / "renders")}
        fleet_cold, _ = _timed("overlay-lint check .", root, env)
        fleet_warm, _ = _timed("overlay-lint check .", root, env)
        loop, _ = _timed(f"for d in infrastructure/karpenter/c*/; do {render} $d | overlay-lint check - "
                         "|| exit; done", root, env)
        middle = f"c{clusters // 2}"
        one_cluster, _ = _timed(f"{render} infrastructure/karpenter/{middle} | overlay-lint check -", root, env)
        staged, _ = _timed(f"overlay-lint check --against . infrastructure/karpenter/{middle}/nodepools.yaml", root,
                           env)
        fleet_peak = _peak_mib(["check", "."], root, env)
        # Every cluster is the same size: any one is the largest.
        cluster_peak = _peak_mib(["check", ".", "--only-cluster", middle], root, env)
    return {"shape": {"clusters": clusters, "overlays": overlays, "nodepools": pools, "cores": os.cpu_count(),
                      "renderer": render},
            "fleet_seconds": {"first": round(fleet_cold, 2), "again": round(fleet_warm, 2)},
            "loop_seconds": round(loop, 2),
            "fleet_over_loop": round(fleet_cold / loop, 2), "again_over_loop": round(fleet_warm / loop, 2),
            "staged_file_seconds": round(staged, 2), "its_cluster_alone_seconds": round(one_cluster, 2),
            "staged_over_cluster": round(staged / one_cluster, 2),
            "peak_mib": {"fleet": fleet_peak, "one_cluster": cluster_peak},
            "peak_fleet_over_cluster": round(max(fleet_peak.values()) / max(cluster_peak.values()), 2)}


if __name__ == "__main__":
    sizes = [int(a) for a in sys.argv[1:4]]
    json.dump(run(*sizes), sys.stdout, indent=2)
    print()
