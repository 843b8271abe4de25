"""What a pre-commit hook adds to every commit: the wall time of `overlay-lint check one.yaml` (one NodePool and
one overlay) against a bare start of the same interpreter (`python -c pass`), runs interleaved so that both see
the same machine. The target is a median at most 8 times the bare start (docs/performance.md)."""

from __future__ import annotations

import os
import pathlib
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


def _wall(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=env)
    return time.perf_counter() - start


def run(rounds: int = 15) -> dict[str, Any]:
    python = sys.executable
    lint = str(pathlib.Path(python).with_name("overlay-lint"))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "one.yaml")
        pathlib.Path(path).write_text(ONE_FILE, encoding="utf-8")
        check = [lint, "check", path] if os.path.exists(lint) else [python, "-m", "lint", "check", path]
        # Bytecode caches as an installed package has them (pip compiles at install), kept apart from the tree: a
        # PYTHONDONTWRITEBYTECODE environment would otherwise compile every module from source on every run.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pycache")
        _wall(check, env)  # writes the bytecode caches
        bare, checked = [], []
        for _ in range(rounds):
            bare.append(_wall([python, "-c", "pass"], env))
            checked.append(_wall(check, env))
    base, median = statistics.median(bare), statistics.median(checked)
    return {"command": "overlay-lint check one.yaml (a NodePool and an overlay)", "rounds": rounds,
            "python_c_pass_median_s": round(base, 4), "check_median_s": round(median, 4),
            "ratio": round(median / base, 2), "target_ratio": TARGET}


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
