"""The one list of finding codes (simulation/codes.py) and what is made from it: docs/cli.md's table, the
committed JSON Schema of `check --format json`, the SARIF rules. A code used anywhere must be listed.
Also the committed JSON Schema of `simulate --format json`, made by the same module."""

from __future__ import annotations

import ast
import io
import json
import os
import pathlib
from typing import Any

import jsonschema
import pytest

from lint import cli, reference, sarif
from simulation import codes, findings

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"


def committed_schema() -> Any:
    return json.loads(reference.SCHEMA.read_text(encoding="utf-8"))


def committed_simulate_schema() -> Any:
    return json.loads(reference.SIMULATE_SCHEMA.read_text(encoding="utf-8"))


def test_code_table_is_the_generated_one() -> None:
    doc = reference.CODES_DOC.read_text(encoding="utf-8")
    assert reference.codes_section(doc) == reference.codes_block(), "run `make reference`"
    for c in codes.ALL:
        assert f"| `{c.code}` | {c.severity} |" in doc


def test_committed_schema_is_the_generated_one() -> None:
    assert reference.SCHEMA.read_text(encoding="utf-8") == reference.schema_text(), "run `make reference`"
    jsonschema.Draft202012Validator.check_schema(committed_schema())


def test_committed_simulate_schema_is_the_generated_one() -> None:
    assert reference.SIMULATE_SCHEMA.read_text(encoding="utf-8") == reference.simulate_schema_text(), \
        "run `make reference`"
    jsonschema.Draft202012Validator.check_schema(committed_simulate_schema())


def test_committed_diff_schema_is_the_generated_one() -> None:
    assert reference.DIFF_SCHEMA.read_text(encoding="utf-8") == reference.diff_schema_text(), "run `make reference`"
    jsonschema.Draft202012Validator.check_schema(json.loads(reference.DIFF_SCHEMA.read_text(encoding="utf-8")))


def test_reference_check_mode_reports_a_stale_copy(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert reference.main(["--check"]) == 0
    stale = tmp_path / "schema.json"
    stale.write_text("{}\n", encoding="utf-8")
    monkeypatch.setattr(reference, "SCHEMA", stale)
    monkeypatch.setattr(reference, "ROOT", tmp_path)
    assert reference.main(["--check"]) == 1
    assert "schema.json is stale" in capsys.readouterr().err
    assert stale.read_text(encoding="utf-8") == "{}\n", "--check writes nothing"
    assert reference.main([]) == 0 and stale.read_text(encoding="utf-8") == reference.schema_text()


def test_reference_check_mode_reports_a_stale_simulate_schema(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "simulate.json"
    monkeypatch.setattr(reference, "SIMULATE_SCHEMA", missing)
    monkeypatch.setattr(reference, "ROOT", tmp_path)
    assert reference.main(["--check"]) == 1
    assert "simulate.json is stale" in capsys.readouterr().err
    assert not missing.exists(), "--check writes nothing"
    assert reference.main([]) == 0 and missing.read_text(encoding="utf-8") == reference.simulate_schema_text()


def json_goldens() -> list[pathlib.Path]:
    return sorted(p for p in GOLDEN.glob("check*.json"))


def test_there_is_a_json_golden() -> None:
    assert json_goldens()


@pytest.mark.parametrize("path", json_goldens(), ids=lambda p: p.name)
def test_json_goldens_validate(path: pathlib.Path) -> None:
    jsonschema.validate(json.loads(path.read_text(encoding="utf-8")), committed_schema(),
                        cls=jsonschema.Draft202012Validator)


def test_simulate_json_golden_validates() -> None:
    golden = json.loads((GOLDEN / "simulate.json").read_text(encoding="utf-8"))
    assert golden["overlays"] and golden["nodepools"], "the golden exercises the schema"
    jsonschema.validate(golden, committed_simulate_schema(), cls=jsonschema.Draft202012Validator)


def test_simulate_schema_rejects_what_the_contract_does_not_allow() -> None:
    golden = json.loads((GOLDEN / "simulate.json").read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(committed_simulate_schema())
    name, status = next(iter(golden["overlays"].items()))
    pool, types = next(iter(golden["nodepools"].items()))
    type_name, cell = next(iter(types.items()))
    offering = cell["offerings"][0]

    def with_cell(changed: dict[str, Any]) -> dict[str, Any]:
        return {**golden, "nodepools": {pool: {type_name: changed}}}

    def with_offering(changed: dict[str, Any]) -> dict[str, Any]:
        return with_cell({**cell, "offerings": [changed]})

    assert validator.is_valid(with_offering(offering))
    bad_documents = [
        {**golden, "overlays": {name: {**status, "status": "Pending"}}},
        {**golden, "overlays": {name: {"status": status["status"]}}},
        {k: v for k, v in golden.items() if k != "nodepools"},
        {**golden, "findings": []},
        {**golden, "nodepools": [cell]},
        with_cell({k: v for k, v in cell.items() if k != "resourceSliceTemplates"}),
        with_cell({**cell, "capacity": {"cpu": 2}}),
        with_cell({**cell, "capacityOverlays": {"cpu": None}}),
        with_offering({k: v for k, v in offering.items() if k != "priceOverlay"}),
        with_offering({**offering, "price": "0.5"}),
        with_offering({**offering, "basePrice": -1}),
        with_offering({**offering, "capacity-type": "spot"}),
    ]
    for bad in bad_documents:
        assert not validator.is_valid(bad), bad


def _check_json(args: list[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.chdir(ROOT)
    out, err = io.StringIO(), io.StringIO()
    cli.main(["check", *args, "--format", "json"], stdout=out, stderr=err)
    return json.loads(out.getvalue())


def test_output_without_positions_validates(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken file and a dangling link: findings whose line and column are null."""
    (tmp_path / "bad.yaml").write_text("kind: [\n", encoding="utf-8")
    (tmp_path / "dir").mkdir()
    os.symlink(tmp_path / "nowhere.yaml", tmp_path / "dir" / "dangling.yaml")
    document = _check_json([str(tmp_path / "dir"), str(tmp_path / "bad.yaml")], monkeypatch)
    assert {f["code"] for f in document["findings"]} >= {"parse-error", "unreadable-input"}
    jsonschema.validate(document, committed_schema(), cls=jsonschema.Draft202012Validator)


def test_schema_rejects_what_the_contract_does_not_allow() -> None:
    golden = json.loads((GOLDEN / "check.json").read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(committed_schema())
    finding = golden["findings"][0]
    for bad in ({**finding, "code": "no-such-code"}, {**finding, "severity": "fatal"},
                {k: v for k, v in finding.items() if k != "field"}, {**finding, "line": 0}):
        assert not validator.is_valid({**golden, "findings": [bad]}), bad


def test_unknown_code_is_an_error_not_a_default() -> None:
    with pytest.raises(KeyError, match="no-such-code"):
        codes.get("no-such-code")
    with pytest.raises(KeyError):
        findings.make("no-such-code", findings.ObjectRef("NodeOverlay", "a"), (), "message")


def test_the_list_is_checked_when_imported() -> None:
    entry = codes.ALL[0]
    with pytest.raises(ValueError, match="duplicate"):
        codes._check([entry, entry])
    with pytest.raises(ValueError, match="kebab-case"):
        codes._check([codes.Code("No_Match", entry.severity, "w", "s", "f", "h")])
    with pytest.raises(ValueError, match="non-empty"):
        codes._check([codes.Code("no-help", entry.severity, "w", "s", "f", "")])


def test_sarif_rules_carry_every_description() -> None:
    rules = sarif.rules()
    assert [r["id"] for r in rules] == [c.code for c in codes.ALL]
    for rule, c in zip(rules, codes.ALL, strict=True):
        assert (rule["shortDescription"]["text"], rule["fullDescription"]["text"], rule["help"]["text"]) == \
            (c.short, c.full, c.help)


def _literal_codes(tree: ast.AST) -> set[str]:
    """First arguments of `findings.make(...)` / `make(...)` that are string literals."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        first = node.args[0]
        if name == "make" and isinstance(first, ast.Constant) and isinstance(first.value, str):
            out.add(first.value)
    return out


def test_every_code_the_source_reports_is_listed() -> None:
    used: set[str] = set()
    for package in ("simulation", "sources", "lint", "webhook"):
        for path in (ROOT / package).rglob("*.py"):
            used |= _literal_codes(ast.parse(path.read_text(encoding="utf-8")))
    assert len(used) >= 10, "the scan finds the checks' findings.make calls"
    assert not used - set(codes.BY_CODE)


def test_package_data_twins_are_the_yaml_they_stand_for() -> None:
    """The core reads each YAML file of its package data from a JSON twin (no YAML parse at start-up): every
    YAML file has one, equal to the YAML parsed."""
    from ruamel.yaml import YAML

    from simulation import packagedata

    yamls = sorted(reference.PACKAGE_DATA.glob("*.yaml"))
    assert yamls, "the embedded CRD is package data"
    for path in yamls:
        parsed = YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))
        assert packagedata.yaml_twin(path.name) == parsed, f"{path.name}: run `make reference`"
    assert set(reference.json_twins()) == {p.with_name(p.name + ".json") for p in yamls}
