"""`--format junit`, `--output FILE` and shell completion of `overlay-lint`."""

from __future__ import annotations

import io
import json
import os
import pathlib
import subprocess
import xml.etree.ElementTree as ET

import pytest

from lint import cli, completion
from tests import tools
from tests.lint_support import BASIC, CATALOG, nodepool, overlay, write

ROOT = pathlib.Path(__file__).resolve().parent.parent


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main([*args, "--catalog", CATALOG], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


# --- JUnit ---------------------------------------------------------------------------------------

def _cases(xml: str) -> tuple[ET.Element, dict[str, ET.Element]]:
    root = ET.fromstring(xml)
    suites = root.findall("testsuite")
    assert root.tag == "testsuites" and len(suites) == 1
    return root, {c.get("name", ""): c for c in suites[0].findall("testcase")}


@pytest.mark.parametrize("fail_on", ["error", "warning"])
def test_junit_one_testcase_per_object_and_a_failure_per_finding(fail_on: str) -> None:
    code, xml, _ = run("check", BASIC, "--format", "junit", "--fail-on", fail_on)
    _, findings_out, _ = run("check", BASIC, "--format", "json")
    data = json.loads(findings_out)
    root, cases = _cases(xml)
    suite = root.find("testsuite")
    assert suite is not None
    # Every input object is a testcase, and the counts agree with what the XML holds.
    assert len(cases) == data["summary"]["objects"]
    assert int(suite.get("tests", "-1")) == len(cases) == int(root.get("tests", "-1"))
    threshold = {"error"} if fail_on == "error" else {"error", "warning"}
    expected = [f for f in data["findings"] if f["severity"] in threshold]
    failures = [(name, f.get("type")) for name, case in cases.items() for f in case.findall("failure")]
    assert sorted(failures) == sorted((f"{f['object']['kind']}/{f['object']['name']}", f["code"])
                                      for f in expected)
    failed_cases = {name for name, _ in failures}
    assert int(suite.get("failures", "-1")) == len(failed_cases) == int(root.get("failures", "-1"))
    assert code == (1 if expected else 0)
    # Below the threshold a finding is still shown, without failing its testcase.
    if fail_on == "error":
        case = cases["NodeOverlay/gpu-sharing"]
        assert case.find("failure") is None
        out = case.find("system-out")
        assert out is not None and "ignored-values" in (out.text or "")
    for name, case in cases.items():
        assert case.get("classname") == name.split("/")[0]
        assert case.get("file", "").startswith(str(pathlib.Path(BASIC)))


def test_junit_conflict_with_a_cluster_object_fails_the_candidate(tmp_path: pathlib.Path) -> None:
    live = write(tmp_path, "live.yaml", overlay("live"))
    new = write(tmp_path, "new.yaml", overlay("new"), nodepool("p"))
    code, xml, _ = run("check", new, "--existing", live, "--format", "junit")
    _, cases = _cases(xml)
    assert code == 1 and set(cases) == {"NodeOverlay/new", "NodePool/p"}
    failures = cases["NodeOverlay/new"].findall("failure")
    assert [f.get("type") for f in failures] == ["same-weight-conflict"]
    assert cases["NodePool/p"].find("failure") is None


def test_junit_unparseable_file_is_a_failing_testcase(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: NodeOverlay\nspec: [\n")
    code, xml, _ = run("check", str(bad), "--format", "junit")
    _, cases = _cases(xml)
    assert code == 1 and len(cases) == 1
    (case,) = cases.values()
    assert [f.get("type") for f in case.findall("failure")] == ["parse-error"]


def test_junit_clean_input(tmp_path: pathlib.Path) -> None:
    code, xml, _ = run("check", write(tmp_path, "o.yaml", overlay("a")), "--format", "junit")
    root, cases = _cases(xml)
    assert code == 0 and root.get("failures") == "0" and list(cases) == ["NodeOverlay/a"]
    assert xml.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')


# --- --output ------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github", "junit"])
def test_output_file_holds_exactly_what_stdout_would(tmp_path: pathlib.Path, fmt: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    target = tmp_path / f"report.{fmt}"
    code, out, _ = run("check", BASIC, "--format", fmt, "--output", str(target))
    code_stdout, expected, _ = run("check", BASIC, "--format", fmt)
    assert out == "" and code == code_stdout == 1
    assert target.read_text(encoding="utf-8") == expected
    assert oct(target.stat().st_mode & 0o777) == "0o644"


def test_output_for_simulate_and_explain(tmp_path: pathlib.Path) -> None:
    target = tmp_path / "sim.json"
    code, out, _ = run("simulate", BASIC, "--format", "json", "-o", str(target))
    assert code == 0 and out == "" and json.loads(target.read_text())["overlays"]
    code, out, _ = run("explain", BASIC, "--instance-type", "g5.xlarge", "-o", str(target))
    assert code == 0 and out == "" and target.read_text().startswith("instance type g5.xlarge")


def test_output_replaces_whole_and_is_untouched_on_input_errors(tmp_path: pathlib.Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("previous report " * 1000)
    code, _, _ = run("check", BASIC, "--format", "json", "--output", str(target))
    assert code == 1 and json.loads(target.read_text())["findings"]
    before = target.read_text()
    code, _, err = run("check", str(tmp_path / "missing.yaml"), "--format", "json", "--output", str(target))
    assert code == 2 and "missing.yaml" in err and target.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"], "no temporary file is left behind"


def test_output_into_a_missing_directory_exits_2(tmp_path: pathlib.Path) -> None:
    code, out, err = run("check", BASIC, "--output", str(tmp_path / "no" / "such" / "r.txt"))
    assert code == 2 and out == "" and "--output" in err and err.count("\n") == 1


def test_text_ends_with_one_summary_line(tmp_path: pathlib.Path) -> None:
    _, out, _ = run("check", BASIC)
    summary = out.splitlines()[-1]
    data = json.loads(run("check", BASIC, "--format", "json")[1])["summary"]
    assert summary.startswith(f"{data['errors']} errors, {data['warnings']} warning")
    assert f"in {data['objects']} objects" in summary


# --- completion ----------------------------------------------------------------------------------

def _script(shell: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["completion", shell], stdout=out, stderr=err) == 0, err.getvalue()
    return out.getvalue()


def _bash_complete(script: pathlib.Path, words: list[str]) -> list[str]:
    """What bash offers for the last word of `overlay-lint WORDS...`, through the script's own
    `complete` registration."""
    line = " ".join(["overlay-lint", *words])
    program = f"""
source {script}
spec=$(complete -p overlay-lint)
fn=$(sed -E 's/.* -F ([^ ]+) .*/\\1/' <<< "$spec")
COMP_WORDS=(overlay-lint {' '.join(repr(w) if w else "''" for w in words)})
COMP_CWORD={len(words)}
COMP_LINE={line!r}
COMP_POINT=${{#COMP_LINE}}
"$fn"
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return [w for w in done.stdout.splitlines() if w]


@pytest.fixture
def bash_script(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "overlay-lint.bash"
    path.write_text(_script("bash"))
    return path


def test_bash_completes_commands_options_and_values(bash_script: pathlib.Path) -> None:
    parser = cli.build_parser()
    commands = set(completion.subcommands(parser))
    assert set(_bash_complete(bash_script, [""])) >= commands | {"--version"}
    assert _bash_complete(bash_script, ["si"]) == ["simulate"]
    check_options = _bash_complete(bash_script, ["check", "--"])
    assert {"--existing", "--format", "--fail-on", "--catalog", "--output", "--cluster", "--context"} <= set(
        check_options)
    # Options given before and after the paths are completed alike.
    assert _bash_complete(bash_script, ["check", "examples", "--fo"]) == ["--format"]
    assert _bash_complete(bash_script, ["check", "--format", ""]) == list(cli.formats.FORMATS)
    assert _bash_complete(bash_script, ["simulate", "--format", "j"]) == ["json"]
    assert _bash_complete(bash_script, ["diff", "--format", ""]) == ["text", "markdown", "json"]
    assert _bash_complete(bash_script, ["diff", "--fail-on-"]) == ["--fail-on-increase"]
    assert _bash_complete(bash_script, ["completion", ""]) == ["bash", "zsh", "fish"]
    # A path argument completes files.
    assert "examples/" in _bash_complete(bash_script, ["check", "exam"]) or "examples" in _bash_complete(
        bash_script, ["check", "exam"])
    assert "--instance-type" in _bash_complete(bash_script, ["explain", "--inst"])
    # --crd takes a file or the word dra.
    offered = _bash_complete(bash_script, ["report", "--crd", "d"])
    assert "dra" in offered and ("docs" in offered or "docs/" in offered)


def test_completion_follows_the_parser(bash_script: pathlib.Path) -> None:
    """Every option of every command appears in both scripts: they are generated, not written."""
    parser = cli.build_parser()
    bash_text, zsh_text = bash_script.read_text(), _script("zsh")
    for name, sub in completion.subcommands(parser).items():
        for action in sub._actions:
            for option in action.option_strings:
                assert option in bash_text and option in zsh_text, (name, option)
        offered = _bash_complete(bash_script, [name, "-"])
        assert set(offered) == {s for a in sub._actions for s in a.option_strings}


def _shell(name: str) -> str:
    """The shell's path, installed from Debian's packages when missing, so the checks never skip."""
    return tools.built("debian-tool.sh", name, timeout=900)


@pytest.mark.tools
def test_zsh_script_parses(tmp_path: pathlib.Path) -> None:
    zsh = _shell("zsh")
    script = tmp_path / "_overlay-lint"
    script.write_text(_script("zsh"))
    done = subprocess.run([zsh, "-n", str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # Loaded for real after compinit: the completion function is registered for the command.
    program = f"autoload -U compinit && compinit -u -D && source {script} && print -r -- $_comps[overlay-lint]"
    loaded = subprocess.run([zsh, "-f", "-c", program], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "HOME": str(tmp_path)})
    assert loaded.returncode == 0 and loaded.stdout.strip() == "_overlay_lint", loaded.stderr


def _fish_complete(fish: str, script: pathlib.Path, line: str, home: pathlib.Path) -> list[str]:
    """What fish offers for `line`, through the script's own `complete` definitions (the words only)."""
    done = subprocess.run([fish, "-N", "-c", f"source {script}; complete -C {line!r}"], capture_output=True,
                          text=True, timeout=60, cwd=ROOT, env={**os.environ, "HOME": str(home)})
    assert done.returncode == 0, done.stderr
    return [w.split("\t")[0] for w in done.stdout.splitlines() if w]


@pytest.mark.tools
def test_fish_completes_commands_options_and_values(tmp_path: pathlib.Path) -> None:
    fish = _shell("fish")
    script = tmp_path / "overlay-lint.fish"
    script.write_text(_script("fish"))
    assert subprocess.run([fish, "-n", str(script)], capture_output=True, timeout=60).returncode == 0
    parser = cli.build_parser()
    assert _fish_complete(fish, script, "overlay-lint ", tmp_path) == sorted(completion.subcommands(parser))
    assert _fish_complete(fish, script, "overlay-lint check --fo", tmp_path) == ["--format"]
    assert _fish_complete(fish, script, "overlay-lint check --format ", tmp_path) == sorted(cli.formats.FORMATS)
    assert _fish_complete(fish, script, "overlay-lint completion ", tmp_path) == sorted(completion.SHELLS)
    for name, sub in completion.subcommands(parser).items():
        offered = set(_fish_complete(fish, script, f"overlay-lint {name} --", tmp_path))
        assert offered == {s for a in sub._actions for s in a.option_strings if s.startswith("--")}, name
