"""Golden output of every `overlay-lint` format on tests/lint_fixtures/.

Regenerate with `OVERLAY_GUARD_UPDATE_GOLDENS=1 pytest tests/test_lint_golden.py`, then read the
diff: the goldens are the reviewed contract of what users and CI see.
"""

from __future__ import annotations

import io
import json
import os
import pathlib
from typing import Any

import pytest

from lint import cli
from simulation import findings

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
FIXTURES = "tests/lint_fixtures/basic"
CATALOG = "tests/lint_fixtures/catalog.yaml"
CHANGED = "tests/lint_fixtures/changed"
UPDATE = os.environ.get("OVERLAY_GUARD_UPDATE_GOLDENS") == "1"

CASES = {
    "check.txt": (["check", FIXTURES, "--catalog", CATALOG], 1),
    "check.json": (["check", FIXTURES, "--catalog", CATALOG, "--format", "json"], 1),
    "check.sarif": (["check", FIXTURES, "--catalog", CATALOG, "--format", "sarif"], 1),
    "check.github": (["check", FIXTURES, "--catalog", CATALOG, "--format", "github"], 1),
    "check.junit": (["check", FIXTURES, "--catalog", CATALOG, "--format", "junit"], 1),
    "simulate.txt": (["simulate", FIXTURES, "--catalog", CATALOG], 0),
    "simulate-full.txt": (["simulate", FIXTURES, "--catalog", CATALOG, "--full"], 0),
    "simulate.json": (["simulate", FIXTURES, "--catalog", CATALOG, "--format", "json"], 0),
    "explain.txt": (["explain", FIXTURES, "--catalog", CATALOG, "--instance-type", "g5.xlarge"], 0),
    # The fixture set before and after a change (tests/lint_fixtures/changed/pricing.yaml says what changed).
    "diff.txt": (["diff", FIXTURES, CHANGED, "--catalog", CATALOG], 0),
    "diff.json": (["diff", FIXTURES, CHANGED, "--catalog", CATALOG, "--format", "json"], 0),
    "diff.md": (["diff", FIXTURES, CHANGED, "--catalog", CATALOG, "--format", "markdown"], 0),
    "diff-reverse.md": (["diff", CHANGED, FIXTURES, "--catalog", CATALOG, "--format", "markdown"], 1),
}


def run_in_root(args: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    # Paths in the output are relative to the working directory.
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("NO_COLOR", raising=False)
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(args, stdout=out, stderr=err)
    return code, out.getvalue()


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    args, status = CASES[name]
    code, output = run_in_root(args, monkeypatch)
    path = GOLDEN / name
    if UPDATE:
        path.write_text(output, encoding="utf-8")
    assert code == status
    assert output == path.read_text(encoding="utf-8"), f"{name} differs from its golden file"


def test_goldens_cover_the_fixture_findings() -> None:
    """The fixture set keeps a conflict, a schema error and a warning in every golden."""
    data = json.loads((GOLDEN / "check.json").read_text(encoding="utf-8"))
    codes = {f["code"] for f in data["findings"]}
    assert {"same-weight-conflict", "schema", "ignored-values"} <= codes
    assert all(f["file"] and f["line"] and f["column"] for f in data["findings"])
    github = (GOLDEN / "check.github").read_text(encoding="utf-8")
    assert "title=same-weight-conflict::" in github and "::error file=" in github


def _require(obj: dict[str, Any], *keys: str) -> None:
    missing = [k for k in keys if k not in obj]
    assert not missing, f"missing SARIF keys {missing} in {sorted(obj)}"


def test_sarif_structure(monkeypatch: pytest.MonkeyPatch) -> None:
    """The required structure of SARIF 2.1.0 (its JSON schema is not available offline)."""
    _, output = run_in_root(CASES["check.sarif"][0], monkeypatch)
    log = json.loads(output)
    _require(log, "version", "runs", "$schema")
    assert log["version"] == "2.1.0"
    assert isinstance(log["runs"], list) and len(log["runs"]) == 1
    run = log["runs"][0]
    _require(run, "tool", "results")
    driver = run["tool"]["driver"]
    _require(driver, "name", "rules")
    assert driver["name"] == "overlay-lint"
    rule_ids = [r["id"] for r in driver["rules"]]
    assert rule_ids == list(findings.CODES), "every code is a rule, in the contract's order"
    levels = {"none", "note", "warning", "error"}
    for rule, (code, severity) in zip(driver["rules"], findings.CODES.items(), strict=True):
        _require(rule, "id", "shortDescription", "defaultConfiguration")
        assert rule["shortDescription"]["text"]
        assert rule["defaultConfiguration"]["level"] == {"error": "error", "warning": "warning",
                                                         "info": "note"}[str(severity)], code
    assert run["results"], "the fixtures have findings"
    for result in run["results"]:
        _require(result, "ruleId", "level", "message", "locations")
        assert result["level"] in levels
        assert rule_ids[result["ruleIndex"]] == result["ruleId"]
        assert result["message"]["text"]
        for location in result["locations"]:
            physical = location["physicalLocation"]
            uri = physical["artifactLocation"]["uri"]
            assert not uri.startswith("/") and "://" not in uri and uri.startswith("tests/lint_fixtures/")
            region = physical["region"]
            assert region["startLine"] >= 1 and region["startColumn"] >= 1
    assert {r["ruleId"] for r in run["results"]} >= {"same-weight-conflict", "schema"}
