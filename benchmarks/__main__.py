"""`make bench`: every benchmark, one JSON document on stdout (figures go into docs/performance.md)."""

from __future__ import annotations

import json
import platform
import sys
from typing import Any

from benchmarks import audit_bench, core_bench, diff_bench, engines_bench, schema_bench, startup_bench, yaml_bench


def main(argv: list[str]) -> int:
    # The interpreter too: with PGO, LTO and a static libpython the same code takes about 0.88 of the time.
    results: dict[str, Any] = {"machine": {"cores": __import__("os").cpu_count(), "python": platform.python_version(),
                           "interpreter": sys._base_executable, "processor": platform.machine()},
               "startup": startup_bench.run(), "yaml": yaml_bench.run(), "core": core_bench.run(),
               "schema": schema_bench.run(), "diff": diff_bench.run(), "engines": engines_bench.run()}
    if "--core-only" not in argv:
        from benchmarks import peer_bench, webhook_bench

        results["webhook"] = webhook_bench.run()
        results["audit"] = audit_bench.run()
        results["karpenter_peer"] = peer_bench.run()
    json.dump(results, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
