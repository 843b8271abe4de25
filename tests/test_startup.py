"""What a one-file check loads: a pre-commit hook pays its start-up on every commit (benchmarks/startup_bench.py
times it). Libraries that only some runs need stay out of the others."""

from __future__ import annotations

import argparse
import io
import json
import pathlib
import subprocess
import sys

import pytest

from benchmarks.startup_bench import ONE_FILE
from lint import cli, completion

# Probe run in a fresh interpreter: which of these modules a clean one-file check imported.
PROBE = """
import io, json, sys
from lint import cli
status = cli.main(["check", sys.argv[1]], stdout=io.StringIO(), stderr=io.StringIO())
watched = ("prompt_toolkit", "pygments", "jsonschema", "importlib.metadata", "lint.report", "numpy", "lint.diffview",
           "lint.sides", "lint.changes", "xml.etree.ElementTree", "subprocess", "ruamel", "urllib.request", "ssl",
           "http.client", "kubernetes", "aiohttp", "sources.karpenter", "sources.kube", "simulation.live",
           "lint.sarif", "lint.jsonstream", "simulation.analysis.incremental", "simulation.analysis.candidate",
           "simulation.analysis.shadows", "simulation.analysis.dra", "ryml", "sources.fastyaml")
print(json.dumps({"status": status, "loaded": [m for m in watched if m in sys.modules]}))
"""


def _probe(path: pathlib.Path) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, timeout=120,
                          check=True)
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_a_clean_one_file_check_loads_no_prompt_library_no_jsonschema_no_numpy(tmp_path: pathlib.Path) -> None:
    """Nor ruamel (YAML is read by libyaml), nor an HTTP client or the metrics reader (only --karpenter-metrics
    fetches a URL), nor the API client (only --cluster), nor the writers of formats not chosen, nor the core's
    incremental path (a one-shot check judges everything at once), nor the DRA analysis (Karpenter's CRD has no
    dynamicResources)."""
    one = tmp_path / "one.yaml"
    one.write_text(ONE_FILE, encoding="utf-8")
    assert _probe(one) == {"status": 0, "loaded": []}


def test_an_invalid_overlay_still_gets_jsonschemas_findings(tmp_path: pathlib.Path) -> None:
    one = tmp_path / "one.yaml"
    one.write_text(ONE_FILE.replace("weight: 10", "weight: 0"), encoding="utf-8")
    assert _probe(one) == {"status": 1, "loaded": ["jsonschema"]}


def test_a_one_file_check_indexes_only_the_label_keys_it_asks_about(tmp_path: pathlib.Path) -> None:
    """The grid indexes a key of the catalog on the first question about it (cells._Labels): the overlay's
    instance-family and what a NodePool without requirements launches, not the catalog's dozens of keys."""
    probe = """
import io, json, sys
from lint import cli
from simulation.semantics import cells
built = []
index = cells._Labels.__getitem__
def counted(self, key):
    if key not in self._made:
        built.append(key)
    return index(self, key)
cells._Labels.__getitem__ = counted
status = cli.main(["check", sys.argv[1]], stdout=io.StringIO(), stderr=io.StringIO())
print(json.dumps({"status": status, "built": sorted(set(built))}))
"""
    one = tmp_path / "one.yaml"
    one.write_text(ONE_FILE, encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", probe, str(one)], capture_output=True, text=True, timeout=120,
                          check=True)
    assert json.loads(done.stdout) == {"status": 0, "built": ["karpenter.k8s.aws/instance-family"]}



def _options(parser: argparse.ArgumentParser) -> list[tuple[object, ...]]:
    return [(a.dest, a.option_strings, a.default, a.required, a.choices, a.nargs, a.type) for a in parser._actions]


@pytest.mark.parametrize("command", sorted(cli._PARSERS))
def test_a_command_parsed_alone_has_the_parser_the_whole_one_holds(command: str) -> None:
    """A run builds only its command's parser: the same options, defaults and help as in the whole parser."""
    alone = completion.subcommands(cli.build_parser(command=command))
    whole = completion.subcommands(cli.build_parser())
    assert list(alone) == [command]
    assert _options(alone[command]) == _options(whole[command])
    assert alone[command].format_help() == whole[command].format_help()


@pytest.mark.parametrize("argv", [["--help"], ["completion", "bash"], ["no-such-command"]])
def test_help_completion_and_a_usage_error_see_every_command(argv: list[str],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    out, err = io.StringIO(), io.StringIO()
    cli.main(argv, stdout=out, stderr=err)
    said = capsys.readouterr().out + out.getvalue() + err.getvalue()
    # Every command is named: in --help's list, the completion script, argparse's invalid-choice message.
    assert all(name in said for name in cli._PARSERS)
