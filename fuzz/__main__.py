"""`python -m fuzz [--seconds N] [--runs N] [TARGET ...]`: run fuzz targets one after another, each in its own
process, and print one summary line per target (inputs run, peak RSS, crashes).

The corpus each run grows is kept in the cache (`$OVERLAY_GUARD_CACHE/fuzz/corpus/TARGET`), so a
later run starts where the last one stopped; a crashing input is written to
`$OVERLAY_GUARD_CACHE/fuzz/crashes/` and the exit status is 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = ("loader", "shapes", "admission", "core", "quantity", "fastyaml")
# Longest input per target: files for the loader, a handful of choices for the structured ones.
MAX_LEN = {"loader": 16384, "admission": 8192, "shapes": 1024, "core": 4096, "quantity": 128, "fastyaml": 16384}
SEEDS = {"loader": ("examples", "tests/lint_fixtures/basic"), "admission": ("tests/admission",),
         "fastyaml": ("examples", "tests/lint_fixtures/basic")}
RSS_LIMIT_MB = 2048
# An input that runs longer than this counts as a hang (libFuzzer writes it out as a timeout).
INPUT_TIMEOUT = 30


@dataclasses.dataclass(frozen=True)
class Result:
    target: str
    inputs: int
    peak_rss_mb: int
    seconds: float
    crashes: tuple[str, ...]
    # The engine stopped for another reason than a crash or the end of its time.
    failed: bool
    log: Path

    @property
    def ok(self) -> bool:
        return not self.crashes and not self.failed

    def line(self) -> str:
        verdict = "ok" if self.ok else (f"{len(self.crashes)} crash(es): {', '.join(self.crashes)}" if self.crashes
                                        else f"FAILED, see {self.log}")
        return (f"{self.target}: {self.inputs} inputs in {self.seconds:.0f}s, peak RSS {self.peak_rss_mb} MB, "
                f"{verdict}")


def cache_dir() -> Path:
    base = os.environ.get("OVERLAY_GUARD_CACHE") or str(Path.home() / ".cache" / "overlay-guard")
    return Path(base) / "fuzz"


def _stat(text: str, name: str) -> int:
    found = re.findall(rf"stat::{name}:\s*(\d+)", text)
    if found:
        return int(found[-1])
    done = re.findall(r"Done (\d+) runs", text)
    return int(done[-1]) if done and name == "number_of_executed_units" else 0


def run(target: str, seconds: int, work: Path, nice: int = 0, keep_going: bool = False, runs: int = 0) -> Result:
    """Fuzz `target` for `seconds`, or until `runs` inputs have run if that is sooner. With
    keep_going, a crash is recorded and the engine started again on the grown corpus until the
    time is spent, so one long run finds more than one bug."""
    corpus, crashes, logs = work / "corpus" / target, work / "crashes", work / "logs"
    for d in (corpus, crashes, logs):
        d.mkdir(parents=True, exist_ok=True)
    seeds = [str(ROOT / s) for s in SEEDS.get(target, ()) if (ROOT / s).is_dir()]
    log = logs / f"{target}.log"
    started = time.monotonic()
    inputs = rss = 0
    found: list[str] = []
    failed = False
    with log.open("w") as out:
        while True:
            left = int(seconds - (time.monotonic() - started))
            if left < 1 or (found and not keep_going) or (runs and inputs >= runs):
                break
            before = set(os.listdir(crashes))
            command = [sys.executable, "-m", "fuzz.engine", target, f"-max_total_time={left}",
                       f"-rss_limit_mb={RSS_LIMIT_MB}", f"-timeout={INPUT_TIMEOUT}",
                       f"-max_len={MAX_LEN[target]}", f"-artifact_prefix={crashes}/{target}-",
                       "-print_final_stats=1", *([f"-runs={runs - inputs}"] if runs else []),
                       str(corpus), *seeds]
            mark = out.tell()
            status = subprocess.run(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, check=False,
                                    preexec_fn=(lambda: os.nice(nice)) if nice else None).returncode
            out.flush()
            text = log.read_text(errors="replace")[mark:]
            inputs += _stat(text, "number_of_executed_units")
            rss = max(rss, _stat(text, "peak_rss_mb"))
            # Only this target's artifacts, and not slow-unit reports (slow, not wrong): targets may
            # share the directory while running side by side.
            new = sorted(n for n in set(os.listdir(crashes)) - before
                         if n.startswith(f"{target}-") and "slow-unit" not in n)
            found += [str(crashes / n) for n in new]
            if status != 0 and not new:
                failed = True
                break
            if status == 0:
                break
    return Result(target, inputs, rss, time.monotonic() - started, tuple(found), failed, log)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("targets", nargs="*", metavar="TARGET",
                        help=f"targets to run (default all: {', '.join(TARGETS)})")
    parser.add_argument("--seconds", type=int, default=60, help="per target (default 60)")
    parser.add_argument("--runs", type=int, default=0,
                        help="stop a target once this many inputs have run (default: only --seconds)")
    parser.add_argument("--nice", type=int, default=0, help="niceness increment for the fuzzing processes")
    parser.add_argument("--work", type=Path, default=None, help="corpus, crashes and logs (default: the cache)")
    parser.add_argument("--keep-going", action="store_true",
                        help="after a crash, record it and fuzz on until the time is spent")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON lines")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.targets) - set(TARGETS))
    if unknown:
        parser.error(f"unknown target(s) {', '.join(unknown)}; choose from {', '.join(TARGETS)}")
    work = args.work or cache_dir()
    failed = 0
    for target in args.targets or TARGETS:
        result = run(target, args.seconds, work, args.nice, args.keep_going, args.runs)
        if args.json:
            print(json.dumps({**dataclasses.asdict(result), "log": str(result.log)}), flush=True)
        else:
            print(result.line(), flush=True)
        failed += not result.ok
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
