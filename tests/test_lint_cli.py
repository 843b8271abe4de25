"""`overlay-lint` options, exit statuses and output formats."""

from __future__ import annotations

import io
import json
import pathlib
import subprocess
import sys

import pytest

from lint import cli, formats
from sources.positions import Location
from tests.lint_support import BASIC, CATALOG, ROOT, VENV_BIN, codes, nodepool, overlay, run, write

# --- exit statuses -------------------------------------------------------------------------------

def test_clean_input_exits_0(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, "o.yaml", overlay("a", 10, family="m5"), overlay("b", 20, family="g5"))
    code, out, _ = run("check", path)
    assert code == 0 and out.startswith("0 errors, 0 warnings")


def test_conflict_exits_1(tmp_path: pathlib.Path) -> None:
    code, out, _ = run("check", write(tmp_path, "o.yaml", overlay("a"), overlay("b")), "--format", "json")
    assert code == 1 and codes(out) == ["same-weight-conflict"]


def test_fail_on_warning(tmp_path: pathlib.Path) -> None:
    shadowing = write(tmp_path, "o.yaml", overlay("high", 20), overlay("low", 10))
    code, out, _ = run("check", shadowing, "--format", "json")
    assert code == 0 and codes(out) == ["shadowed"]
    assert run("check", shadowing, "--fail-on", "warning")[0] == 1
    assert run("check", shadowing, "--fail-on", "error")[0] == 0


@pytest.mark.parametrize("argv", [
    [], ["check"], ["lint", "x"], ["check", BASIC, "--format", "xml"], ["check", BASIC, "--fail-on", "info"],
    ["check", BASIC, "--bogus"], ["check", BASIC, "--max-file-size", "lots"],
    ["check", BASIC, "--max-file-size", "0"], ["explain", BASIC], ["simulate", BASIC, "--format", "sarif"],
    ["check", BASIC, "--kubeconfig", "k"], ["check", BASIC, "--context", "c"],
])
def test_usage_errors_exit_2(argv: list[str]) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(argv, stdout=out, stderr=err) == 2
    assert "error:" in err.getvalue() and out.getvalue() == ""


def test_a_region_typo_is_a_usage_error_naming_the_real_one() -> None:
    """A made-up region would lay the catalog out in made-up zones and turn a real conflict into no-match."""
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["check", BASIC, "--region", "eu-wset-1"], stdout=out, stderr=err) == 2
    assert "eu-west-1" in err.getvalue() and out.getvalue() == ""
    assert cli.main(["check", BASIC, "--region", "eu-west-1", "--format", "json"], stdout=io.StringIO(),
                    stderr=io.StringIO()) in (0, 1)


def test_help_and_version_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    assert "check" in capsys.readouterr().out
    assert cli.main(["check", "--help"]) == 0
    assert "--fail-on" in capsys.readouterr().out
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("overlay-lint ")


def test_stdin(tmp_path: pathlib.Path) -> None:
    data = "\n---\n".join(json.dumps(o) for o in (overlay("a"), overlay("b"))).encode()
    code, out, _ = run("check", "-", "--format", "json", stdin=data)
    found = json.loads(out)["findings"]
    assert code == 1 and found[0]["file"] == "<stdin>" and found[0]["line"] == 1


def test_module_and_console_script(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, "o.yaml", overlay("a"), overlay("b"))
    module = subprocess.run([sys.executable, "-m", "lint", "check", path, "--catalog", CATALOG],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert module.returncode == 1 and "same-weight-conflict" in module.stdout
    script = subprocess.run([str(VENV_BIN / "overlay-lint"), "check", "-", "--catalog", CATALOG],
                            input=pathlib.Path(path).read_text(), capture_output=True, text=True, timeout=120)
    assert script.returncode == 1 and "<stdin>:" in script.stdout
    usage = subprocess.run([sys.executable, "-m", "lint", "check"], capture_output=True, text=True,
                           timeout=120)
    assert usage.returncode == 2 and "Traceback" not in usage.stderr


def test_kubernetes_is_not_imported_offline(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, "o.yaml", overlay("a"))
    code = ("import sys; from lint import cli; "
            f"rc = cli.main(['check', {path!r}, '--catalog', {CATALOG!r}]); "
            "assert 'kubernetes' not in sys.modules; sys.exit(rc)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120).returncode == 0


# --- --existing, catalogs ------------------------------------------------------------------------

def test_existing_conflict_is_reported_against_the_candidate(tmp_path: pathlib.Path) -> None:
    live = write(tmp_path, "live.yaml", overlay("live"))
    code, out, _ = run("check", write(tmp_path, "new.yaml", overlay("new")), "--existing", live,
                       "--format", "json")
    found = json.loads(out)["findings"]
    assert code == 1 and [f["code"] for f in found] == ["same-weight-conflict"]
    names = {found[0]["object"]["name"], *(r["name"] for r in found[0]["related"])}
    assert names == {"live", "new"}
    assert json.loads(out)["summary"]["objects"] == 1


def test_findings_among_existing_objects_only_are_not_reported(tmp_path: pathlib.Path) -> None:
    live = write(tmp_path, "live.yaml", overlay("a"), overlay("b"))
    unrelated = write(tmp_path, "new.yaml", overlay("c", 30, family="m5"))
    code, out, _ = run("check", unrelated, "--existing", live, "--format", "json")
    assert code == 0 and json.loads(out)["findings"] == []


def test_candidate_replaces_existing_version(tmp_path: pathlib.Path) -> None:
    live = write(tmp_path, "live.yaml", overlay("a", 10), overlay("b", 20))
    # Editing `a` to weight 20 now collides with `b`; it is an edit, not a duplicate.
    code, out, _ = run("check", write(tmp_path, "a.yaml", overlay("a", 20)), "--existing", live,
                       "--format", "json")
    assert code == 1 and codes(out) == ["same-weight-conflict"]
    # Moving `a` away from `b` is fine.
    code, out, _ = run("check", write(tmp_path, "a2.yaml", overlay("a", 5)), "--existing", live)
    assert code == 0


def test_editing_an_already_broken_overlay_is_ratcheted(tmp_path: pathlib.Path) -> None:
    broken = overlay("old", operator="Within")
    live = write(tmp_path, "live.yaml", broken)
    code, out, _ = run("check", write(tmp_path, "edit.yaml", broken), "--existing", live, "--format", "json")
    found = json.loads(out)["findings"]
    assert code == 0 and found and {f["severity"] for f in found} == {"warning"}


def test_existing_accepts_several_paths(tmp_path: pathlib.Path) -> None:
    a = write(tmp_path, "a.yaml", overlay("x1"))
    b = write(tmp_path, "b.yaml", nodepool("p"))
    code, out, _ = run("check", write(tmp_path, "n.yaml", overlay("y", 99)), "--existing", f"{a},{b}",
                       "--existing", a, "--format", "json")
    assert code == 0 and "notes" in json.loads(out) and json.loads(out)["notes"] == []


def test_json_catalog_and_instance_type_documents(tmp_path: pathlib.Path) -> None:
    catalog = tmp_path / "cat.json"
    catalog.write_text(json.dumps({"region": "eu-west-1", "instanceTypes": [
        {"name": "x1.tiny", "labels": {"kubernetes.io/arch": "amd64"}, "allocatable": {"cpu": "1"},
         "onDemandPrice": 0.01}]}))
    path = write(tmp_path, "o.yaml", overlay("a"))
    code, out, _ = run("simulate", path, "--catalog", str(catalog), "--format", "json", catalog=False)
    assert code == 0 and list(json.loads(out)["nodepools"]["default"]) == ["x1.tiny"]
    offering = {"karpenter.sh/capacity-type": "spot", "topology.kubernetes.io/zone": "z1",
                "karpenter.sh/price": "0.5"}
    itype = {"apiVersion": "karpenter.sh/v1alpha1", "kind": "InstanceType", "metadata": {"name": "y1.tiny"},
             "spec": {"offerings": [offering], "resources": {"cpu": "1"}}}
    both = write(tmp_path, "both.yaml", overlay("a"), itype)
    code, out, _ = run("simulate", both, "--format", "json", catalog=False)
    assert code == 0 and list(json.loads(out)["nodepools"]["default"]) == ["y1.tiny"]
    code, _, err = run("check", both)
    assert code == 2 and "both --catalog" in err


@pytest.mark.parametrize(("content", "needle"), [
    ('{"instanceTypes": [{"labels": {}}]}', "name"),
    ("kind: ConfigMap\n", "InstanceType"),
    ("x: [\n", "--catalog"),
    (None, "No such file"),
])
def test_bad_catalog_exits_2(tmp_path: pathlib.Path, content: str | None, needle: str) -> None:
    catalog = tmp_path / "bad-catalog.yaml"
    if content is not None:
        catalog.write_text(content)
    code, out, err = run("check", BASIC, "--catalog", str(catalog), catalog=False)
    assert code == 2 and needle in err and err.count("\n") == 1 and out == ""


def test_default_catalog_is_used_without_catalog(tmp_path: pathlib.Path) -> None:
    code, out, _ = run("simulate", write(tmp_path, "o.yaml", overlay("a", family="m5")), "--instance-type",
                       "m5.large", "--format", "json", catalog=False)
    assert code == 0 and json.loads(out)["nodepools"]["default"]["m5.large"]["offerings"]


# --- formats -------------------------------------------------------------------------------------

class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_only_on_a_tty_without_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    tty, err = _Tty(), io.StringIO()
    cli.main(["check", BASIC, "--catalog", CATALOG], stdout=tty, stderr=err)
    assert "\033[1;31merror\033[0m" in tty.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    tty = _Tty()
    cli.main(["check", BASIC, "--catalog", CATALOG], stdout=tty, stderr=err)
    assert "\033[" not in tty.getvalue()
    plain = io.StringIO()
    monkeypatch.delenv("NO_COLOR")
    cli.main(["check", BASIC, "--catalog", CATALOG], stdout=plain, stderr=err)
    assert "\033[" not in plain.getvalue()


def test_notes_go_to_stderr_in_text_and_into_json(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, "o.yaml", overlay("a"))
    _, out, err = run("check", path)
    assert "note: no NodePools given" in err and "note:" not in out
    _, out, err = run("check", path, "--format", "json")
    assert json.loads(out)["notes"] == [
        "no NodePools given: assuming one NodePool named 'default' with no labels"]
    assert err == ""
    _, out, err = run("check", path, "--format", "sarif")
    assert "note: no NodePools" in err
    assert json.loads(out)["runs"][0]["invocations"][0]["toolExecutionNotifications"]


def test_github_escaping(tmp_path: pathlib.Path) -> None:
    from simulation import findings

    finding = findings.make("schema", findings.ObjectRef("NodeOverlay", "o"), ("spec",),
                            "100% wrong,\nreally: yes", source=0)
    line = formats.github_line(finding, Location("dir,a:b/x%.yaml", 3, 4))
    assert line == ("::error file=dir%2Ca%3Ab/x%25.yaml,line=3,col=4,title=schema::"
                    "100%25 wrong,%0Areally: yes")
    warning = findings.make("shadowed", findings.ObjectRef("NodeOverlay", "o"), (), "m")
    assert formats.github_line(warning, Location(None, None, None)) == "::warning title=shadowed::m"


def test_text_output_shape(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, "o.yaml", overlay("a"), overlay("b"))
    _, out, _ = run("check", path)
    first, hint, summary = out.splitlines()
    assert first.startswith(f"{path}:") and " error same-weight-conflict NodeOverlay/" in first
    assert hint.startswith("  hint: ") and "spec.weight to 11" in hint
    assert summary == "1 error, 0 warnings in 2 objects"


def test_sarif_uri_outside_cwd_is_absolute(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    path = write(tmp_path, "o.yaml", overlay("a"), overlay("b"))
    _, out, _ = run("check", path, "--format", "sarif")
    location = json.loads(out)["runs"][0]["results"][0]["locations"][0]
    uri = location["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == pathlib.Path(path).as_uri()


# --- simulate and explain ------------------------------------------------------------------------

def test_simulate_filters_and_shape() -> None:
    code, out, _ = run("simulate", BASIC, "--nodepool", "ml", "--instance-type", "m5.large,c7g.large",
                       "--format", "json")
    data = json.loads(out)
    assert code == 0 and set(data) == {"overlays", "nodepools"}
    assert list(data["nodepools"]) == ["ml"] and set(data["nodepools"]["ml"]) == {"m5.large", "c7g.large"}
    cell = data["nodepools"]["ml"]["m5.large"]
    assert {"capacity", "capacityOverlays", "offerings", "resourceSliceTemplates"} <= set(cell)
    assert set(cell["offerings"][0]) >= {"zone", "capacityType", "basePrice", "price", "priceOverlay"}
    assert data["overlays"]["gpu-spot-risk"]["status"] == "Conflict"
    assert data["overlays"]["typo-operator"]["status"] == "Invalid"


@pytest.mark.parametrize(("argv", "needle"), [
    (["simulate", BASIC, "--instance-type", "m5.larg"], "did you mean 'm5.large'"),
    (["simulate", BASIC, "--nodepool", "gpu"], "unknown NodePool 'gpu'"),
    (["explain", BASIC, "--instance-type", "nope"], "unknown instance type"),
    (["explain", BASIC, "--instance-type", "m5.large", "--nodepool", "nope"], "unknown NodePool"),
])
def test_unknown_names_exit_2(argv: list[str], needle: str) -> None:
    code, out, err = run(*argv)
    assert code == 2 and needle in err and out == ""


def test_simulate_and_explain_report_input_errors_on_stderr(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("x: [\n")
    code, out, err = run("simulate", BASIC, str(bad), "--format", "json")
    assert code == 1 and json.loads(out)["overlays"] and "parse-error" in err
    code, out, err = run("explain", BASIC, str(bad), "--instance-type", "g5.xlarge", "--nodepool", "ml")
    assert code == 1 and "parse-error" in err and "NodePool(s) ml" in out


SPOT_R6I = str(ROOT / "tests" / "cases" / "nodepool-launch-spot-r6i" / "input.yaml")


def _offering_rows(text: str) -> list[str]:
    return [line.split()[1] for line in text.splitlines() if line.startswith("  us-west-2a ")]


def test_simulate_text_marks_what_a_nodepool_never_launches() -> None:
    """Of a spot-only r6i-only NodePool, the on-demand offering and the g5 type are not ordinary rows; named
    with --instance-type, a type it never launches is shown whole under a marked header."""
    code, out, _ = run("simulate", SPOT_R6I, "--full", catalog=False)
    headers = [line for line in out.splitlines() if line.startswith("NodePool spot-r6i, instance type")]
    assert code == 0 and headers == ["NodePool spot-r6i, instance type r6i.large"]
    assert _offering_rows(out) == ["spot"]
    assert "g5.xlarge" in out.splitlines()[-1] and "us-west-2a/on-demand" in out
    code, out, _ = run("simulate", SPOT_R6I, "--instance-type", "g5.xlarge", catalog=False)
    header, = (line for line in out.splitlines() if line.startswith("NodePool spot-r6i, instance type"))
    assert header.startswith("NodePool spot-r6i, instance type g5.xlarge (")
    assert _offering_rows(out) == ["on-demand", "spot"]


def test_simulate_text_without_changes(tmp_path: pathlib.Path) -> None:
    code, out, _ = run("simulate", write(tmp_path, "np.yaml", nodepool("p")))
    assert code == 0 and "no NodeOverlays" in out and "no instance type is changed" in out


@pytest.fixture(scope="module")
def crowded(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A tree whose every command prints far more than a pipe holds: 120 overlays of one weight on the same
    offerings (conflicts: errors) and one file that cannot be parsed (an input error for simulate and explain)."""
    root = tmp_path_factory.mktemp("crowded")
    (root / "new").mkdir()
    (root / "old").mkdir()
    write(root / "old", "np.yaml", nodepool("general"))
    write(root / "new", "np.yaml", nodepool("general"))
    write(root / "new", "o.yaml", *(overlay(f"o{i:03}", 10) for i in range(120)))
    (root / "new" / "broken.yaml").write_text("kind: NodeOverlay\nmetadata: {name: broken\n", encoding="utf-8")
    return root


def _closed_early(argv: list[str], cwd: pathlib.Path) -> tuple[int, str]:
    """Run overlay-lint with its stdout a pipe whose reader is closed before the child writes: every write meets
    the closed pipe (the child is still starting Python when the parent closes its end)."""
    child = subprocess.Popen([sys.executable, "-m", "lint", *argv], cwd=cwd, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    assert child.stdout is not None
    child.stdout.close()
    _, err = child.communicate(timeout=120)
    return child.returncode, err.decode()


@pytest.mark.parametrize(("argv", "status"), [
    (["check", "new"], 1), (["check", "new", "--format", "json"], 1), (["check", "new", "--format", "sarif"], 1),
    (["check", "new", "--format", "junit"], 1), (["check", "new", "--format", "github"], 1),
    (["simulate", "new", "--full"], 1), (["simulate", "new", "--format", "json"], 1),
    (["explain", "new", "--instance-type", "m5.large"], 1), (["diff", "old", "new"], 1),
    (["diff", "old", "new", "--format", "markdown"], 1), (["completion", "bash"], 0), (["check", "old"], 0),
    (["--version"], 0), (["check", "--help"], 0),
])
def test_a_closed_stdout_ends_the_run_with_its_own_status(crowded: pathlib.Path, argv: list[str],
                                                          status: int) -> None:
    """`set -o pipefail; overlay-lint ... | head -1` never passes over errors, and says nothing of the pipe."""
    evaluating = argv[0] in ("check", "simulate", "explain", "diff") and "--help" not in argv
    code, err = _closed_early([*argv, "--catalog", CATALOG] if evaluating else argv, crowded)
    assert (code, err.count("Traceback"), err.count("BrokenPipe"), err.count("Exception ignored")) == \
        (status, 0, 0, 0)


def test_head_keeps_the_first_line_and_the_status_of_the_run(crowded: pathlib.Path) -> None:
    """The shell's own pipeline, reader closing after one line."""
    script = (f"set -o pipefail; {sys.executable} -m lint check new --catalog {CATALOG} | head -1; "
              "echo \"status=$?\"")
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120, cwd=crowded)
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and lines[1] == "status=1" and "Traceback" not in done.stderr
    assert "error" in lines[0]


def test_report_counts_in_the_singular(tmp_path: pathlib.Path) -> None:
    page = tmp_path / "report.html"
    path = write(tmp_path, "o.yaml", nodepool("general"), overlay("bad", 0))
    run("report", path, "-o", str(page))
    text = page.read_text()
    assert 'data-errors="1">1 error</span>' in text and 'data-nodepools="1">1 NodePool</span>' in text


def test_report_help_shows_output_required() -> None:
    out = io.StringIO()
    parser = cli.build_parser()
    report = cli.completion.subcommands(parser)["report"]
    out.write(report.format_usage())
    assert " -o FILE" in out.getvalue() and "[-o FILE]" not in out.getvalue()
    code, _, err = run("report", BASIC)
    assert code == 2 and "-o/--output" in err


def test_duplicate_names_the_first_copys_file_and_line(tmp_path: pathlib.Path) -> None:
    first = tmp_path / "a.yaml"
    first.write_text("# the first copy\n---\n" + json.dumps(overlay("twice", 10)), encoding="utf-8")
    second = write(tmp_path, "b.yaml", overlay("twice", 20))
    code, out, _ = run("check", str(tmp_path), "--format", "json")
    (dup,) = [f for f in json.loads(out)["findings"] if f["code"] == "duplicate-object"]
    assert code == 1 and dup["file"] == second and dup["detail"]["first"] == f"{first}:3"
    assert "kubectl apply -f" in dup["message"]


def test_explain_counts_matched_and_won_cells_apart(tmp_path: pathlib.Path) -> None:
    """Two overlays on m5.large's spot offering at different weights: both match it, the higher one wins it."""
    path = write(tmp_path, "o.yaml", nodepool("p"), overlay("high", 20, family="m5"), overlay("low", 10, family="m5"))
    code, out, _ = run("explain", path, "--instance-type", "m5.large")
    assert code == 0
    rows = {line.split()[1]: line.split() for line in out.splitlines() if line.strip().startswith(("won", "lost"))}
    header = next(line.split() for line in out.splitlines() if line.strip().startswith("OUTCOME"))
    matched, won = header.index("MATCHED"), header.index("WON")
    assert (rows["high"][matched], rows["high"][won]) == ("1", "1")
    assert (rows["low"][matched], rows["low"][won]) == ("1", "0")


def test_simulate_without_a_filter_is_a_summary(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, "o.yaml", nodepool("p"), overlay("broad", 10), overlay("gpu", 20, family="g5"))
    code, summary, _ = run("simulate", path)
    assert code == 0 and "TYPES" in summary.splitlines()[0] and "--full" in summary
    assert "ZONE" not in summary, "no per-type table"
    rows = {line.split()[0]: line.split()[1:4] for line in summary.splitlines()[1:3]}
    # broad loses g5.xlarge's spot offering to gpu, and c7g.large has none: it is in effect on m5.large alone.
    assert rows == {"broad": ["Applied", "1", "1"], "gpu": ["Applied", "1", "1"]}
    for args in (["--full"], ["--instance-type", "m5.large"], ["--nodepool", "p"]):
        assert "ZONE" in run("simulate", path, *args)[1], args
