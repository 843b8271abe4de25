"""`python -m benchmarks.peak OUT MODULE ARGS...`: run MODULE as `python -m MODULE ARGS...` would, then write
this process's peak RSS (VmHWM, KiB) to OUT as it exits.

The child measures itself because its parent cannot: Linux carries a process's RSS high-water mark into
the program it execs, so wait4's ru_maxrss for a child of a 300 MB benchmark process is at least 300 MB,
whatever the child itself used."""

from __future__ import annotations

import atexit
import runpy
import sys
from pathlib import Path


def peak_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key == "VmHWM":
            return int(value.split()[0])
    raise RuntimeError("no VmHWM in /proc/self/status")


def main(argv: list[str]) -> None:
    out, module, *rest = argv
    atexit.register(lambda: Path(out).write_text(str(peak_kib())))
    sys.argv = [module, *rest]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
