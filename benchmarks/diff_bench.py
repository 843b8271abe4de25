"""`overlay-lint diff` of two revisions of the 10,000-overlay / 100-NodePool workload that differ in one overlay,
against a cold `overlay-lint check` of one revision, measured in the same run (child processes, alternated, the
median of `REPEAT`). The workload is one `kind: List` file, as core_bench's cold check reads it: the file differs
between the revisions, so the diff parses both sides in full (the worst case; unchanged files are parsed once).
The target: the diff takes at most twice the check."""

from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import workload
from benchmarks.core_bench import _child

SIZE = workload.Size(10_000, 100)
REPEAT = 3
TARGET = 2.0


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com", *args], cwd=repo,
                   check=True, capture_output=True, timeout=120)


def _repository(repo: Path) -> Path:
    """Two commits of the workload; the second changes one overlay's price adjustment."""
    items = workload.documents(SIZE)
    path = repo / "workload.json"
    _git(repo, "init", "-q")
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    edited = next(o for o in items[SIZE.pools + SIZE.overlays // 2:] if "priceAdjustment" in o["spec"])
    edited["spec"]["priceAdjustment"] = "-45%"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    _git(repo, "commit", "-q", "-am", "one overlay")
    return path


def _timed(argv: list[str]) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    proc, peak_kib = _child(argv)
    return time.perf_counter() - started, peak_kib / 1024, proc


def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp)
        path = _repository(repo)
        check = ["lint", "check", str(path), "--format", "json"]
        diff = ["lint", "diff", "HEAD~1..HEAD", str(path), "--format", "json"]
        checks, diffs, peaks = [], [], {"check": 0.0, "diff": 0.0}
        summary: dict[str, Any] = {}
        for _ in range(REPEAT):
            for name, argv, out in (("check", check, checks), ("diff", diff, diffs)):
                wall, peak, proc = _timed(argv)
                if proc.returncode not in (0, 1):
                    return {"error": f"{name}: exit {proc.returncode}: {proc.stderr[-500:]}"}
                out.append(wall)
                peaks[name] = max(peaks[name], peak)
                if name == "diff":
                    summary = json.loads(proc.stdout)["summary"]
    check_s, diff_s = statistics.median(checks), statistics.median(diffs)
    return {"overlays": SIZE.overlays, "nodepools": SIZE.pools, "repeat": REPEAT,
            "check_s": round(check_s, 3), "diff_s": round(diff_s, 3), "diff_over_check": round(diff_s / check_s, 2),
            "target": TARGET, "check_peak_rss_mb": round(peaks["check"], 1),
            "diff_peak_rss_mb": round(peaks["diff"], 1), "diff_summary": summary}


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
