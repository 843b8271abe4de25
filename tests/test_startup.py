"""What a one-file check loads: a pre-commit hook pays its start-up on every commit (benchmarks/startup_bench.py
times it). Libraries that only some runs need stay out of the others."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

from benchmarks.startup_bench import ONE_FILE

# Probe run in a fresh interpreter: which of these modules a clean one-file check imported.
PROBE = """
import io, json, sys
from lint import cli
status = cli.main(["check", sys.argv[1]], stdout=io.StringIO(), stderr=io.StringIO())
watched = ("prompt_toolkit", "pygments", "jsonschema", "importlib.metadata", "lint.report")
print(json.dumps({"status": status, "loaded": [m for m in watched if m in sys.modules]}))
"""


def _probe(path: pathlib.Path) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, timeout=120,
                          check=True)
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_a_clean_one_file_check_loads_no_prompt_library_and_no_jsonschema(tmp_path: pathlib.Path) -> None:
    one = tmp_path / "one.yaml"
    one.write_text(ONE_FILE, encoding="utf-8")
    assert _probe(one) == {"status": 0, "loaded": []}


def test_an_invalid_overlay_still_gets_jsonschemas_findings(tmp_path: pathlib.Path) -> None:
    one = tmp_path / "one.yaml"
    one.write_text(ONE_FILE.replace("weight: 10", "weight: 0"), encoding="utf-8")
    assert _probe(one) == {"status": 1, "loaded": ["jsonschema"]}
