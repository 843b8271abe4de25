"""What a pre-commit hook adds to every commit: the wall and CPU time (user + system of the child) of
`overlay-lint check one.yaml` (one NodePool and one overlay) against a bare start of the same interpreter
(`python -c pass`), runs interleaved so that both see the same machine. The target is a median at most 8 times the
bare start (docs/performance.md). `--against TREE`: another checkout with its own .venv (the tree before a change)
runs interleaved with this one, each against its own bare start."""

from __future__ import annotations

import argparse
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

# The hook's usual input: one overlay and the NodePool it is for.
ONE_FILE = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: reserved-m5}
spec:
  weight: 10
  requirements:
    - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}
  priceAdjustment: "-10%"
"""
TARGET = 8.0


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of `argv`."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=env)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def _commands(python: str, path: str) -> tuple[list[str], list[str]]:
    lint = str(pathlib.Path(python).with_name("overlay-lint"))
    check = [lint, "check", path] if os.path.exists(lint) else [python, "-m", "lint", "check", path]
    return [python, "-c", "pass"], check


def run(rounds: int = 15, against: str | None = None) -> dict[str, Any]:
    pythons = {"this": sys.executable}
    if against is not None:
        pythons["against"] = os.path.join(against, ".venv", "bin", "python")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "one.yaml")
        pathlib.Path(path).write_text(ONE_FILE, encoding="utf-8")
        # Bytecode caches as an installed package has them (pip compiles at install), kept apart from the tree: a
        # PYTHONDONTWRITEBYTECODE environment would otherwise compile every module from source on every run.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pycache")
        commands = {name: _commands(python, path) for name, python in pythons.items()}
        times: dict[str, dict[str, list[tuple[float, float]]]] = {n: {"bare": [], "check": []} for n in commands}
        for _, check in commands.values():
            _timed(check, env)  # writes the bytecode caches
        for _ in range(rounds):
            for name, (bare, check) in commands.items():
                times[name]["bare"].append(_timed(bare, env))
                times[name]["check"].append(_timed(check, env))
    out: dict[str, Any] = {"command": "overlay-lint check one.yaml (a NodePool and an overlay)", "rounds": rounds,
                           "target_ratio": TARGET, "load_average": [round(x, 2) for x in os.getloadavg()]}
    for name, measured in times.items():
        figures = {}
        for what, index in (("wall", 0), ("cpu", 1)):
            base = statistics.median(t[index] for t in measured["bare"])
            median = statistics.median(t[index] for t in measured["check"])
            figures[what] = {"python_c_pass_median_s": round(base, 4), "check_median_s": round(median, 4),
                             "ratio": round(median / base, 2)}
        if name == "this":
            out.update(figures)
        else:
            out["against"] = {"tree": against, **figures}
    return out


if __name__ == "__main__":
    import json

    options = argparse.ArgumentParser(description=__doc__)
    options.add_argument("--rounds", type=int, default=15)
    options.add_argument("--against", metavar="TREE", help="another checkout with its own .venv, interleaved")
    given = options.parse_args()
    print(json.dumps(run(given.rounds, given.against), indent=2))
