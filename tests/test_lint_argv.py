"""Argument order: every documented `overlay-lint` command line gives the same result whichever
order the user types its options and paths in, and options taking several values never swallow
a path."""

from __future__ import annotations

import io
import json
import pathlib
from typing import Any

import pytest

from lint import cli
from tests.lint_support import BASIC, CATALOG, nodepool, overlay, write

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "lint_fixtures" / "basic"
PRICING = str(FIXTURES / "pricing.yaml")
NODEPOOLS = str(FIXTURES / "nodepools.yaml")
GPU = str(FIXTURES / "gpu.json")


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


Option = tuple[str, ...]


def orders(command: str, paths: list[str], options: list[Option]) -> dict[str, list[str]]:
    """The same command line typed several ways."""
    flat = [word for option in options for word in option]
    reversed_flat = [word for option in reversed(options) for word in option]
    out = {
        "paths-first": [command, *paths, *flat],
        "options-first": [command, *flat, *paths],
        "options-reversed": [command, *reversed_flat, *paths],
    }
    if len(paths) > 1 or len(options) > 1:
        # Options between the paths: first option, first path, the other options, the other paths.
        out["interleaved"] = [command, *options[0], paths[0], *flat[len(options[0]):], *paths[1:]]
        out["split"] = [command, paths[0], *flat, *paths[1:]]
    return out


# Each documented command line (docs/cli.md and docs/design.md §2.3), with what a correct run shows.
DOCUMENTED: dict[str, tuple[str, list[str], list[Option], int]] = {
    "check-existing": ("check", [PRICING], [("--existing", GPU), ("--existing", NODEPOOLS),
                                             ("--catalog", CATALOG), ("--format", "json")], 1),
    "check-fail-on": ("check", [GPU, NODEPOOLS], [("--fail-on", "warning"), ("--catalog", CATALOG),
                                                  ("--format", "json")], 1),
    "check-formats": ("check", [BASIC], [("--format", "sarif"), ("--catalog", CATALOG)], 1),
    "simulate-filters": ("simulate", [BASIC], [("--instance-type", "m5.large"), ("--nodepool", "ml"),
                                               ("--catalog", CATALOG), ("--format", "json")], 0),
    "simulate-repeated": ("simulate", [PRICING, NODEPOOLS], [("--instance-type", "m5.large"),
                                                             ("--instance-type", "g5.xlarge"),
                                                             ("--catalog", CATALOG), ("--format", "json")], 0),
    "explain": ("explain", [PRICING, NODEPOOLS], [("--instance-type", "g5.xlarge"), ("--nodepool", "ml"),
                                                  ("--catalog", CATALOG)], 0),
}


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_documented_command_lines_in_every_order(name: str) -> None:
    command, paths, options, status = DOCUMENTED[name]
    results = {label: run(argv) for label, argv in orders(command, paths, options).items()}
    expected = results["paths-first"]
    assert expected[0] == status, expected[2]
    assert expected[1].strip(), "the canonical order produced output"
    for label, result in results.items():
        assert result == expected, f"{name}: {label} differs"


def test_check_existing_before_the_candidate(tmp_path: pathlib.Path) -> None:
    """The command line of the issue: `--existing DIR new.yaml` must not take new.yaml as existing."""
    cluster = tmp_path / "cluster"
    cluster.mkdir()
    write(cluster, "live.yaml", overlay("live"))
    new = write(tmp_path, "new.yaml", overlay("new"))
    code, out, err = run(["check", "--existing", str(cluster), new, "--catalog", CATALOG, "--format", "json"])
    data = json.loads(out)
    assert code == 1, err
    assert data["summary"]["objects"] == 1  # only new.yaml is a candidate
    finding = data["findings"][0]
    assert {finding["object"]["name"], *(r["name"] for r in finding["related"])} == {"live", "new"}


def test_simulate_instance_type_before_the_directory() -> None:
    code, out, err = run(["simulate", "--instance-type", "m5.large", BASIC, "--catalog", CATALOG,
                          "--format", "json"])
    assert code == 0, err
    assert {t for pool in json.loads(out)["nodepools"].values() for t in pool} == {"m5.large"}


def _simulated(argv: list[str]) -> dict[str, Any]:
    code, out, err = run(["simulate", BASIC, "--catalog", CATALOG, "--format", "json", *argv])
    assert code == 0, err
    return dict(json.loads(out)["nodepools"])


def test_comma_lists_equal_repetition() -> None:
    repeated = _simulated(["--instance-type", "m5.large", "--instance-type", "g5.xlarge",
                           "--nodepool", "ml", "--nodepool", "general"])
    listed = _simulated(["--instance-type", "m5.large,g5.xlarge", "--nodepool", "ml, general"])
    assert repeated == listed
    assert set(listed) == {"ml", "general"}
    assert all(set(types) == {"m5.large", "g5.xlarge"} for types in listed.values())


def test_existing_comma_list_and_comma_in_a_file_name(tmp_path: pathlib.Path) -> None:
    a = write(tmp_path, "a.yaml", overlay("a"))
    b = write(tmp_path, "b.yaml", nodepool("p"))
    odd = write(tmp_path, "odd,name.yaml", overlay("odd"))
    new = write(tmp_path, "new.yaml", overlay("new"))
    for existing in ([f"{a},{b}"], [a, b]):
        argv = ["check", new, *[w for e in existing for w in ("--existing", e)], "--catalog", CATALOG,
                "--format", "json"]
        code, out, _ = run(argv)
        data = json.loads(out)
        assert code == 1 and data["notes"] == [], "b.yaml's NodePool was read as existing"
        assert data["findings"][0]["witness"]["nodepool"] == "p"
    # An existing path is taken whole even with a comma in its name.
    code, out, _ = run(["check", new, "--existing", odd, "--catalog", CATALOG, "--format", "json"])
    assert code == 1 and "odd" in {r["name"] for f in json.loads(out)["findings"] for r in f["related"]} | {
        f["object"]["name"] for f in json.loads(out)["findings"]}


@pytest.mark.parametrize("argv", [
    ["simulate", BASIC, "--instance-type", "m5.large,,g5.xlarge"],
    ["simulate", BASIC, "--nodepool", ","],
    ["check", "--existing", BASIC],  # no candidate path left
    ["check", BASIC, "--existing"],
])
def test_bad_lists_are_usage_errors(argv: list[str]) -> None:
    code, out, err = run([*argv, "--catalog", CATALOG])
    assert code == 2 and out == "" and "error:" in err and "Traceback" not in err


def test_double_dash_ends_options(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "--format").write_text(json.dumps(overlay("a")))
    monkeypatch.chdir(tmp_path)
    code, out, err = run(["check", "--catalog", CATALOG, "--format", "json", "--", "--format"])
    assert code == 0, err
    assert json.loads(out)["summary"]["objects"] == 1
