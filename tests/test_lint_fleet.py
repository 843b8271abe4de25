"""`overlay-lint` over a repository of many clusters (issue 37's rows 1-5, docs/cli.md "Fleets"): each cluster
judged alone, every output format naming it, the exit status the worst, the hook judging a file in its own
clusters, discovery errors as findings that leave the other clusters judged."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import textwrap
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from ruamel import yaml

from lint import cli, fleets, reference
from sources import templates
from tests.lint_support import overlay, run, write

FIXTURES = pathlib.Path(__file__).resolve().parent / "fleet_fixtures"
DIFF_SCHEMA = jsonschema.Draft202012Validator(json.loads(reference.DIFF_SCHEMA.read_text(encoding="utf-8")))
kustomize = pytest.mark.skipif(templates.renderer() is None, reason="neither kustomize nor kubectl on PATH")


@pytest.fixture
def inside(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[pathlib.Path]:
    monkeypatch.chdir(tmp_path)
    yield tmp_path


def _copy(name: str, where: pathlib.Path) -> pathlib.Path:
    return pathlib.Path(shutil.copytree(FIXTURES / name, where / name))


def _json(*args: str, catalog: bool = False) -> tuple[int, dict[str, Any], str]:
    code, out, err = run(*args, "--format", "json", catalog=catalog)
    return code, json.loads(out), err


def _clusters(report: dict[str, Any]) -> dict[str, dict[str, int]]:
    clusters: dict[str, dict[str, int]] = report["summary"]["clusters"]
    return clusters


@kustomize
def test_row_1_2_flux_environments_judged_alone_each_in_its_region(inside: pathlib.Path) -> None:
    """Today: duplicate-object for every overlay of the base, and one region for both."""
    root = _copy("flux", inside)
    code, report, _ = _json("check", str(root))
    assert (code, report["findings"]) == (0, [])
    assert _clusters(report) == {"production": {"errors": 0, "warnings": 0, "objects": 3},
                                 "staging": {"errors": 0, "warnings": 0, "objects": 3}}
    notes = report["notes"]
    assert isinstance(notes, list)
    assert any(n.startswith("[production] region eu-west-1 ") for n in notes), notes
    # staging is in the catalog's own region (us-east-1): nothing to say.
    assert not any(n.startswith("[staging] ") and "eu-west-1" in n for n in notes), notes
    assert not any("also name region" in n for n in notes), notes


@kustomize
def test_row_3_kustomization_roots_never_share_a_cluster(inside: pathlib.Path) -> None:
    """Today: same-weight-conflict (and duplicate NodePool default) between prod-eu and prod-us."""
    root = _copy("kustomize", inside)
    code, report, _ = _json("check", str(root))
    assert (code, report["findings"]) == (0, [])
    assert set(_clusters(report)) == {"prod-eu", "prod-us"}


def test_row_4_argocd_applications_judged_per_destination(inside: pathlib.Path) -> None:
    root = _copy("argocd", inside)
    code, report, _ = _json("check", str(root))
    assert (code, report["findings"]) == (0, [])
    assert set(_clusters(report)) == {"dev", "prod-eu", "prod-us"}


@kustomize
def test_flux_kustomization_patches_are_rendered(inside: pathlib.Path) -> None:
    """spec.patches of the production Kustomization (not of a kustomization file) move spot-discount onto
    savings-plan's offerings and weight there: a conflict in production only, reported at the patch."""
    root = _copy("flux", inside)
    sync = root / "clusters/production/karpenter.yaml"
    sync.write_text(sync.read_text() + textwrap.indent(textwrap.dedent("""\
        patches:
          - target: {kind: NodeOverlay, name: spot-discount}
            patch: |-
              - {op: replace, path: /spec/weight, value: 20}
              - {op: replace, path: /spec/requirements/0/values, value: [on-demand]}
        """), "  "))
    code, report, _ = _json("check", str(root))
    assert code == 1 and {(f["code"], f["cluster"]) for f in report["findings"]} == {
        ("same-weight-conflict", "production")}


def _git(root: pathlib.Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                   capture_output=True, timeout=60)


def _production_conflict(root: pathlib.Path) -> str:
    """An overlay added to production only, at savings-plan's weight there (20) on the same offerings."""
    extra = root / "infrastructure/karpenter/overlays/production/reserved.yaml"
    extra.write_text(textwrap.dedent("""\
        apiVersion: karpenter.sh/v1alpha1
        kind: NodeOverlay
        metadata: {name: reserved}
        spec:
          weight: 20
          requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
          priceAdjustment: "-30%"
        """))
    kustomization = extra.parent / "kustomization.yaml"
    kustomization.write_text(kustomization.read_text().replace("  - ../base\n", "  - ../base\n  - reserved.yaml\n"))
    return str(extra.relative_to(root))


@kustomize
def test_row_5_the_hook_judges_a_staged_file_in_its_own_clusters(inside: pathlib.Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    root = _copy("flux", inside)
    monkeypatch.chdir(root)
    # The shared base: judged in both clusters, once each; no duplicate of its own rendering.
    base = "infrastructure/karpenter/overlays/base/overlays.yaml"
    code, report, _ = _json("check", "--against", ".", base)
    assert (code, report["findings"], set(_clusters(report))) == (0, [], {"production", "staging"})
    # A conflict in production only: that cluster fails, staging is not even rendered.
    added = _production_conflict(root)
    code, report, _ = _json("check", "--against", ".", added)
    assert code == 1 and set(_clusters(report)) == {"production"}
    findings = report["findings"]
    assert isinstance(findings, list)
    assert {(f["code"], f["cluster"]) for f in findings} == {("same-weight-conflict", "production")}
    # A file no cluster reads is judged against --against as before, and the note says so.
    stray = write(root, "stray.yaml", overlay("stray", 99))
    code, report, _ = _json("check", "--against", ".", os.path.relpath(stray))
    assert code == 0 and "summary" in report and "clusters" not in report["summary"]
    assert any("no cluster reads" in n for n in report["notes"]), report["notes"]
    # One that cannot hold our kinds is read alone: nothing else is rendered for it.
    (root / "ci.yml").write_text("on: push\n")
    code, report, _ = _json("check", "--against", ".", "ci.yml")
    assert code == 0 and report["summary"]["objects"] == 0
    assert any("read alone" in n for n in report["notes"]), report["notes"]
    # --changed-since: the same judgement from git.
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "base")
    (root / added).write_text((root / added).read_text().replace("-30%", "-35%"))
    code, report, _ = _json("check", "--changed-since", "HEAD", ".")
    assert code == 1 and set(_clusters(report)) == {"production"}
    assert report["notes"][0].startswith("[production] 1 file(s) changed since HEAD")


@kustomize
@pytest.mark.parametrize("cached", [True, False])
def test_every_clusters_flux_paths_render_ahead_into_the_cache(inside: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
                                                              cached: bool) -> None:
    root = _copy("flux", inside)
    cache = inside / "renders"
    monkeypatch.setenv("OVERLAY_GUARD_RENDER_CACHE", str(cache) if cached else "off")
    args = cli.parse(cli.build_parser(), ["check", str(root)])
    planned = fleets.whole(args, fleets.discover(args, args.paths))
    applied = {os.path.realpath(p) for plan in planned.plans for p in plan.args.paths
               if os.path.realpath(p) in plan.args.flux_paths}
    fleets.render_ahead(planned.plans)
    # One entry per Flux path of every cluster; without a cache nothing is rendered ahead (nothing would keep it).
    assert len([p for p in cache.rglob("*") if p.is_file()]) == (len(applied) if cached else 0)
    assert len(applied) >= 2


def _two_clusters(root: pathlib.Path) -> pathlib.Path:
    """A config fleet (no renderer needed): cluster `a` holds a same-weight conflict, `b` is clean."""
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    write(root / "a", "pair.yaml", overlay("x", 7), overlay("y", 7))
    write(root / "b", "one.yaml", overlay("x", 7))
    (root / ".overlay-lint.yaml").write_text("clusters:\n  - {name: a, paths: [a]}\n  - {name: b, paths: [b]}\n")
    return root


def test_every_format_names_the_cluster(inside: pathlib.Path) -> None:
    root = str(_two_clusters(inside / "repo"))
    code, out, _ = run("check", root)
    lines = out.splitlines()
    assert code == 1
    assert lines[0].startswith("[a] ") and "same-weight-conflict" in lines[0]
    assert lines[-3:] == ["[a] 1 error, 0 warnings in 2 objects", "[b] 0 errors, 0 warnings in 1 object",
                          "1 error, 0 warnings in 2 clusters"]
    code, report, _ = _json("check", root, catalog=True)
    assert {f["cluster"] for f in report["findings"]} == {"a"}
    assert report["summary"] == {"errors": 1, "warnings": 0, "objects": 3,
                                 "clusters": {"a": {"errors": 1, "warnings": 0, "objects": 2},
                                              "b": {"errors": 0, "warnings": 0, "objects": 1}}}
    _, out, _ = run("check", root, "--format", "sarif")
    results = json.loads(out)["runs"][0]["results"]
    assert {r["properties"]["cluster"] for r in results} == {"a"}
    assert all(r["message"]["text"].startswith("[a] ") for r in results)
    _, out, _ = run("check", root, "--format", "github")
    assert all("::[a] " in line for line in out.splitlines() if line.startswith("::"))
    _, out, _ = run("check", root, "--format", "junit")
    suites = ET.fromstring(out).findall("testsuite")
    assert [(s.get("name"), s.get("tests"), s.get("failures")) for s in suites] == [("a", "2", "1"),
                                                                                    ("b", "1", "0")]


def test_only_cluster_limits_the_run(inside: pathlib.Path) -> None:
    root = str(_two_clusters(inside / "repo"))
    code, report, _ = _json("check", root, "--only-cluster", "b", catalog=True)
    assert (code, set(_clusters(report))) == (0, {"b"})
    code, _, err = run("check", root, "--only-cluster", "c")
    assert code == 2 and "--only-cluster c: no such cluster" in err
    code, _, err = run("simulate", root)
    assert code == 2 and "choose one with --only-cluster" in err
    code, out, _ = run("simulate", root, "--only-cluster", "b", "--format", "json")
    assert code == 0 and json.loads(out)["overlays"]["x"]["status"] == "Applied"


def test_discovery_errors_are_findings_and_the_rest_is_judged(inside: pathlib.Path) -> None:
    root = _two_clusters(inside / "repo")
    (root / ".overlay-lint.yaml").write_text(
        "clusters:\n  - {name: a, paths: [a]}\n  - name: b\n    paths: [b, gone]\n  - {name: b, paths: [a]}\n")
    code, report, _ = _json("check", str(root), "--only-cluster", "b", catalog=True)
    findings = report["findings"]
    assert isinstance(findings, list)
    assert code == 1 and set(_clusters(report)) == {"b"}
    assert sorted((f["code"], f["cluster"], f["line"]) for f in findings) == [
        ("cluster-discovery", "b", 4), ("cluster-discovery", "b", 5)]
    assert all(f["file"].endswith(".overlay-lint.yaml") for f in findings)


def test_clusters_lists_discovery_as_json(inside: pathlib.Path) -> None:
    root = _copy("argocd", inside)
    (root / "karpenter" / "stray.yaml").write_text(json.dumps(overlay("stray")))
    code, out, _ = run("clusters", str(root), "--format", "json", catalog=False)
    data = json.loads(out)
    assert code == 0 and data["discovery"] == "argocd"
    assert [(c["name"], c["origin"], c["nodeOverlays"], c["nodePools"]) for c in data["clusters"]] == [
        ("dev", "argocd", 1, 1), ("prod-eu", "argocd", 1, 1), ("prod-us", "argocd", 1, 1)]
    assert data["unclaimed"] == [str(root / "karpenter" / "stray.yaml")] and data["errors"] == []


def _fleet_history(root: pathlib.Path) -> None:
    """Two commits of a config fleet: the head adds a same-weight conflict to `a` and a new cluster `c`, and leaves
    `b` as it was."""
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    write(root / "a", "pair.yaml", overlay("x", 7))
    write(root / "b", "one.yaml", overlay("x", 7))
    (root / ".overlay-lint.yaml").write_text("clusters:\n  - {name: a, paths: [a]}\n  - {name: b, paths: [b]}\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "base")
    write(root / "a", "pair.yaml", overlay("x", 7), overlay("y", 7))
    (root / "c").mkdir()
    write(root / "c", "one.yaml", overlay("z", 3))
    with (root / ".overlay-lint.yaml").open("a") as config:
        config.write("  - {name: c, paths: [c]}\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "head")


def test_diff_in_a_fleet_shows_only_the_clusters_the_change_touches(inside: pathlib.Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    root = inside / "repo"
    _fleet_history(root)
    monkeypatch.chdir(root)
    code, report, _ = _json("diff", "HEAD~1..HEAD", catalog=True)
    DIFF_SCHEMA.validate(report)
    assert code == 1
    assert [(c["cluster"], c["change"]) for c in report["clusters"]] == [("a", "changed"), ("c", "added")]
    assert report["unchanged"] == ["b"]
    a, c = (c["diff"] for c in report["clusters"])
    assert [(f["code"], f["file"]) for f in a["introduced"]] == [("same-weight-conflict", "a/pair.yaml")]
    assert {(o["name"], o["change"]) for o in a["overlays"]} == {("x", "unchanged"), ("y", "added")}
    assert [(o["name"], o["change"]) for o in c["overlays"]] == [("z", "added")] and c["introduced"] == []

    code, out, _ = run("diff", "HEAD~1..HEAD")
    prefixes = {line.split("]")[0] + "]" for line in out.splitlines() if line.startswith("[")}
    assert code == 1 and prefixes == {"[a]", "[c (added)]", "[c]"}
    assert "unchanged: b" in out.splitlines()

    code, out, _ = run("diff", "HEAD~1..HEAD", "--format", "markdown")
    sections = re.findall(r"^## Cluster `([^`]*)`", out, re.MULTILINE)
    assert (code, sections) == (1, ["a", "c (added)"]) and out.startswith("<!-- overlay-lint:diff changes=")

    # The worst over the clusters shown; a removed cluster is said.
    assert _json("diff", "HEAD~1..HEAD", "--only-cluster", "c", catalog=True)[0] == 0
    code, report, _ = _json("diff", "HEAD..HEAD~1", catalog=True)
    assert code == 0 and [(c["cluster"], c["change"]) for c in report["clusters"]] == [("a", "changed"),
                                                                                      ("c", "removed")]
    code, report, _ = _json("diff", "HEAD~1..HEAD", "--only-cluster", "b", catalog=True)
    assert (code, report["clusters"], report["unchanged"]) == (0, [], ["b"])
    code, _, err = run("diff", "HEAD~1..HEAD", "--only-cluster", "d")
    assert code == 2 and "--only-cluster d: no such cluster" in err


@kustomize
def test_diff_in_a_flux_fleet_compares_each_environment_alone(inside: pathlib.Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    root = _copy("flux", inside)
    monkeypatch.chdir(root)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "base")
    added = _production_conflict(root)
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "head")
    code, report, _ = _json("diff", "HEAD~1..HEAD")
    assert code == 1 and report["unchanged"] == ["staging"]
    [production] = report["clusters"]
    assert (production["cluster"], production["change"]) == ("production", "changed")
    introduced = production["diff"]["introduced"]
    assert {f["code"] for f in introduced} == {"same-weight-conflict"}
    # Named as in the work tree, never in the revision's scratch copy.
    assert any(f["file"] == added for f in introduced), introduced
    assert not any("overlay-lint-diff-" in n for n in production["diff"]["notes"])


def test_one_cluster_output_is_unchanged(inside: pathlib.Path) -> None:
    """No fleet: the same bytes whether discovery ran (a directory) or could not (the files named)."""
    write(inside, "pair.yaml", overlay("x", 7), overlay("y", 7))
    assert run("check", str(inside))[1] == run("check", str(inside / "pair.yaml"))[1]


# --- docs/cli.md "Fleets": the examples and the CI matrix recipes, as written ---------------------------------

DOCS = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text(encoding="utf-8")
VENV_BIN = pathlib.Path(__file__).resolve().parent.parent / ".venv" / "bin"


def _block(marker: str, fence: str) -> str:
    found = re.search(rf"<!-- {marker} -->\n```{fence}\n(.*?)```", DOCS, re.DOTALL)
    assert found is not None, marker
    return found.group(1)


@kustomize
@pytest.mark.parametrize("layout", ["flux", "kustomize", "argocd"])
def test_fleet_examples_run_as_written(inside: pathlib.Path, monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    monkeypatch.chdir(_copy(layout, inside))
    commands = re.split(r"^\$ ", _block(f"fleet-example: {layout}", "console"), flags=re.MULTILINE)[1:]
    assert len(commands) == 2
    for command in commands:
        line, _, expected = command.partition("\n")
        argv = shlex.split(line)
        assert argv[0] == "overlay-lint"
        code, out, _ = run(*argv[1:], catalog=False)
        assert (code, out) == (0, expected), line


def _bash(script: str, cwd: pathlib.Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}", **env}
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=environment, capture_output=True,
                          text=True, timeout=300, check=False)


@kustomize
@pytest.mark.skipif(shutil.which("jq") is None, reason="the recipes use jq, as CI images have it")
def test_github_matrix_recipe_runs_as_written(inside: pathlib.Path) -> None:
    root = _copy("flux", inside)
    workflow = yaml.YAML(typ="safe").load(_block("fleet-matrix: github", "yaml"))
    (listing,) = [s["run"] for s in workflow["jobs"]["clusters"]["steps"] if s.get("id") == "list"]
    outputs = inside / "github-output"
    done = _bash(listing, root, GITHUB_OUTPUT=str(outputs))
    assert done.returncode == 0, done.stderr
    names = json.loads(outputs.read_text().removeprefix("names="))
    assert names == ["production", "staging"]
    assert workflow["jobs"]["lint"]["strategy"]["matrix"]["cluster"] == "${{ fromJSON(needs.clusters.outputs.names) }}"
    step = workflow["jobs"]["lint"]["steps"][-1]["run"]
    for name in names:
        done = _bash(step.replace("${{ matrix.cluster }}", name), root)
        assert done.returncode == 0, done.stderr
        suites = ET.parse(root / f"overlay-lint-{name}.xml").getroot().findall("testsuite")
        assert [s.get("name") for s in suites] == [name]


@kustomize
@pytest.mark.skipif(shutil.which("jq") is None, reason="the recipes use jq, as CI images have it")
def test_gitlab_matrix_recipe_runs_as_written(inside: pathlib.Path) -> None:
    root = _copy("flux", inside)
    pipeline = yaml.YAML(typ="safe").load(_block("fleet-matrix: gitlab", "yaml"))
    listing = pipeline["overlay-lint-clusters"]["script"][-1]
    done = _bash(listing, root)
    assert done.returncode == 0, done.stderr
    child = json.loads((root / "clusters.gitlab-ci.json").read_text())["overlay-lint"]
    assert pipeline["overlay-lint"]["trigger"]["include"][0]["artifact"] == "clusters.gitlab-ci.json"
    (matrix,) = child["parallel"]["matrix"]
    assert matrix == {"CLUSTER": ["production", "staging"]}
    for name in matrix["CLUSTER"]:
        done = _bash(child["script"][-1], root, CLUSTER=name)
        assert done.returncode == 0 and done.stdout.startswith(f"[{name}] "), done.stdout + done.stderr


def test_clusters_exits_1_on_discovery_errors(inside: pathlib.Path) -> None:
    root = _two_clusters(inside / "repo")
    (root / ".overlay-lint.yaml").write_text("clusters:\n  - {name: a, paths: [a]}\n  - {name: b, paths: [b, gone]}\n")
    code, out, _ = run("clusters", str(root), catalog=False)
    assert code == 1
    assert f"{root / '.overlay-lint.yaml'}:3: error cluster-discovery: cluster 'b': path gone does not exist" in out
    code, out, _ = run("clusters", str(root), "--format", "json", catalog=False)
    assert code == 1 and [(e["line"], e["cluster"]) for e in json.loads(out)["errors"]] == [(3, "b")]
