"""One fuzz target in this process: `python -m fuzz.engine TARGET [libFuzzer flags] [CORPUS...]`.

With atheris (libFuzzer, coverage-guided over lint/, sources/, simulation/ and webhook/), or, where
atheris is not installed, a plain mutation loop over the seed corpus that takes the flags this
project uses (-max_total_time, -runs, -seed) and prints libFuzzer's closing line, so the
driver reads both alike.
"""

from __future__ import annotations

import os
import random
import sys
import time
import traceback
from collections.abc import Callable, Sequence

try:
    import atheris
except ImportError:  # a platform with no atheris wheel: the fallback below
    atheris = None

INSTRUMENTED = ["lint", "sources", "simulation", "webhook", "fuzz", "tests.reference"]


def _load(name: str) -> Callable[[bytes], None]:
    if atheris is not None:
        with atheris.instrument_imports(include=INSTRUMENTED):
            from fuzz import targets
    else:
        from fuzz import targets
    targets.warm_up(name)
    return targets.TARGETS[name]


def _flags(argv: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    flags = dict(a[1:].split("=", 1) for a in argv if a.startswith("-") and "=" in a)
    return flags, [a for a in argv if not a.startswith("-")]


def _seeds(dirs: Sequence[str]) -> list[bytes]:
    out: list[bytes] = []
    for top in dirs:
        for directory, _, files in os.walk(top):
            for name in sorted(files):
                with open(os.path.join(directory, name), "rb") as fh:
                    out.append(fh.read(1 << 16))
    return out or [b""]


def _mutate(rng: random.Random, data: bytes, pool: Sequence[bytes]) -> bytes:
    buf = bytearray(data)
    for _ in range(1 + rng.randrange(8)):
        op = rng.randrange(4)
        at = rng.randrange(len(buf) + 1)
        if op == 0 and buf:
            del buf[at:at + rng.randrange(1, 16)]
        elif op == 1:
            buf[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
        elif op == 2:
            other = rng.choice(pool)
            start = rng.randrange(len(other) + 1)
            buf[at:at] = other[start:start + rng.randrange(1, 64)]
        elif buf:
            buf[min(at, len(buf) - 1)] ^= 1 << rng.randrange(8)
    return bytes(buf)


def _fallback(target: Callable[[bytes], None], argv: Sequence[str]) -> int:
    flags, dirs = _flags(argv)
    seconds, runs = float(flags.get("max_total_time", "10")), int(flags.get("runs", "-1"))
    rng = random.Random(int(flags.get("seed", "0")))
    pool = _seeds(dirs)
    started, done = time.monotonic(), 0
    while time.monotonic() - started < seconds and done != runs:
        data = _mutate(rng, rng.choice(pool), pool)
        try:
            target(data)
        except Exception:
            traceback.print_exc()
            crash = f"{flags.get('artifact_prefix', './')}crash-{done}"
            with open(crash, "wb") as fh:
                fh.write(data)
            print(f"==ERROR: uncaught exception; input written to {crash}", file=sys.stderr)
            return 1
        done += 1
        if done % 64 == 0:
            pool.append(data)
            del pool[:-4096]
    print(f"Done {done} runs in {round(time.monotonic() - started)} second(s)", file=sys.stderr)
    return 0


def main(argv: Sequence[str]) -> int:
    name, rest = argv[1], list(argv[2:])
    target = _load(name)
    if atheris is None:
        return _fallback(target, rest)
    atheris.Setup([argv[0], *rest], target)
    atheris.Fuzz()
    return 0  # Fuzz() exits the process itself


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
