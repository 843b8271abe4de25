"""A change judged against the rest of its repository (`check --against`, `--changed-since`), and the files of a
repository that are not manifests yet: Helm and Go templates, kustomizations."""

from __future__ import annotations

import json
import os
import pathlib
import stat
import subprocess

import pytest

from tests import input_support
from tests.lint_support import codes, nodepool, overlay, run, write


def notes(output: str) -> list[str]:
    return list(json.loads(output)["notes"])



def _repo(tmp_path: pathlib.Path) -> pathlib.Path:
    """Committed: a NodePool and a reserved-instance overlay at weight 10."""
    repo = tmp_path / "repo"
    (repo / "prod").mkdir(parents=True)
    write(repo / "prod", "nodepools.yaml", nodepool("general"))
    write(repo / "prod", "ri.yaml", overlay("reserved", 10))
    return repo


# --- --against ------------------------------------------------------------------------------------------


def test_a_staged_file_alone_misses_the_conflict_the_rest_of_the_repository_shows(tmp_path: pathlib.Path) -> None:
    repo = _repo(tmp_path)
    staged = write(repo / "prod", "savings-plan.yaml", overlay("savings-plan", 10, adjustment="-20%"))
    assert run("check", staged, "--format", "json")[0] == 0
    code, out, _ = run("check", staged, "--against", str(repo), "--format", "json")
    assert code == 1 and codes(out) == ["same-weight-conflict"]
    # Either way of raising one resolves it: the rest is judged, not replaced.
    raised = write(repo / "prod", "savings-plan.yaml", overlay("savings-plan", 11, adjustment="-20%"))
    assert run("check", raised, "--against", str(repo))[0] == 0


def test_problems_of_the_rest_alone_are_not_the_changes(tmp_path: pathlib.Path) -> None:
    repo = _repo(tmp_path)
    write(repo / "prod", "other.yaml", overlay("other", 10, adjustment="-30%"))  # conflicts with reserved
    (repo / "prod" / "broken.yaml").write_text("kind: NodeOverlay\nmetadata: [\n", encoding="utf-8")
    # A Helm template is not linted, and no problem (issue 40 row 6).
    (repo / "chart" / "templates").mkdir(parents=True)
    (repo / "chart" / "templates" / "overlay.yaml").write_text(
        "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata:\n  name: {{ .Values.name }}\n",
        encoding="utf-8")
    staged = write(repo / "prod", "gpu.yaml", overlay("gpu", 50, family="g5"))
    code, out, _ = run("check", staged, "--against", str(repo), "--format", "json")
    assert (code, codes(out)) == (0, [])
    said = [n for n in notes(out) if "problem(s) in the rest of the repository" in n]
    # The committed conflict and the unparsable file, each said by its code; the template apart.
    assert len(said) == 1 and said[0].startswith("2 problem(s)"), notes(out)
    assert "parse-error" in said[0] and "same-weight-conflict NodeOverlay/" in said[0]
    assert any("not linted" in n and "template" in n.lower() for n in notes(out)), notes(out)


def test_a_second_copy_in_the_rest_is_a_duplicate_not_an_old_version(tmp_path: pathlib.Path) -> None:
    repo = _repo(tmp_path)
    copy = write(repo / "prod", "copy.yaml", overlay("reserved", 20))
    code, out, _ = run("check", copy, "--against", str(repo), "--format", "json")
    assert code == 1 and "duplicate-object" in codes(out)


def test_all_files_as_candidates_is_the_whole_tree_check(tmp_path: pathlib.Path) -> None:
    repo = _repo(tmp_path)
    write(repo / "prod", "savings-plan.yaml", overlay("savings-plan", 10, adjustment="-20%"))
    every = [str(p) for p in sorted((repo / "prod").iterdir())]
    whole = run("check", str(repo), "--format", "json")
    assert run("check", *every, "--against", str(repo), "--format", "json")[:2] == whole[:2]


# --- --changed-since ------------------------------------------------------------------------------------


def _git(repo: pathlib.Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, timeout=60)


def test_changed_since_checks_a_pull_requests_files_against_the_rest(tmp_path: pathlib.Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    repo = _repo(tmp_path)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    _git(repo, "checkout", "-q", "-b", "change")
    write(repo / "prod", "savings-plan.yaml", overlay("savings-plan", 10, adjustment="-20%"))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "pull request")
    monkeypatch.chdir(repo)
    code, out, _ = run("check", ".", "--changed-since", "main", "--format", "json")
    assert code == 1 and codes(out) == ["same-weight-conflict"]
    assert "1 file(s) changed since main, checked against the rest" in notes(out)
    # Nothing changed under a path: nothing to judge.
    (repo / "staging").mkdir()
    assert run("check", "staging", "--changed-since", "main")[0] == 0
    code, _, err = run("check", ".", "--changed-since", "no-such-ref")
    assert code == 2 and "fetch-depth: 0" in err


# --- templates ------------------------------------------------------------------------------------------


def test_helm_templates_are_skipped_with_a_note_saying_how_to_lint_them(tmp_path: pathlib.Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    chart = tmp_path / "charts" / "overlays"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: overlays\nversion: 0.1.0\n", encoding="utf-8")
    (chart / "templates" / "discount.yaml").write_text(input_support.HELM_TEMPLATE, encoding="utf-8")
    (chart / "values.yaml").write_text("weight: 10\nadjustment: '-10%'\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for path in ("charts", "charts/overlays/templates/discount.yaml"):
        code, out, err = run("check", path, "--format", "json")
        assert (code, codes(out)) == (0, []), err
        said = [n for n in notes(out) if "template" in n]
        assert said == ["charts/overlays/templates/discount.yaml: a Helm template ({{ }}), not linted; lint what it "
                        "renders: helm template RELEASE charts/overlays | overlay-lint check -"]


def test_a_go_template_outside_a_chart_is_skipped_with_a_note(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "overlay.yaml.tmpl"
    path.write_text(input_support.HELM_TEMPLATE, encoding="utf-8")
    code, out, _ = run("check", str(path), "--format", "json")
    assert (code, codes(out)) == (0, []) and any("a Go template" in n for n in notes(out))


def test_a_template_beside_a_real_error_still_fails(tmp_path: pathlib.Path) -> None:
    (tmp_path / "t.yaml").write_text(input_support.HELM_TEMPLATE, encoding="utf-8")
    write(tmp_path, "bad.yaml", overlay("bad", 0))
    code, out, _ = run("check", str(tmp_path), "--format", "json")
    assert code == 1 and codes(out) == ["schema"]


# --- kustomizations -------------------------------------------------------------------------------------

KUSTOMIZE = """#!/bin/sh
# A stand-in for kustomize: records what it was asked to build and prints the rendered overlays.
echo "$@" >> "$(dirname "$0")/calls"
cat "$(dirname "$0")/rendered.yaml"
"""


def _kustomize_layout(tmp_path: pathlib.Path) -> pathlib.Path:
    """base/ (an overlay), overlays/prod/ (base plus a patch that raises the weight: a partial object)."""
    root = tmp_path / "deploy"
    (root / "base").mkdir(parents=True)
    (root / "overlays" / "prod").mkdir(parents=True)
    (root / "base" / "kustomization.yaml").write_text("resources: [ri.yaml]\n", encoding="utf-8")
    write(root / "base", "ri.yaml", overlay("reserved", 10))
    (root / "overlays" / "prod" / "kustomization.yaml").write_text(
        "resources: [../../base]\npatches: [{path: weight.yaml}]\n", encoding="utf-8")
    (root / "overlays" / "prod" / "weight.yaml").write_text(
        "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: reserved}\nspec: {weight: 0}\n",
        encoding="utf-8")
    return root


def _fake_kustomize(tmp_path: pathlib.Path, rendered: str) -> pathlib.Path:
    tools = tmp_path / "bin"
    tools.mkdir()
    script = tools / "kustomize"
    script.write_text(KUSTOMIZE, encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    (tools / "rendered.yaml").write_text(rendered, encoding="utf-8")
    return tools


def test_a_kustomization_is_linted_as_kustomize_renders_it(tmp_path: pathlib.Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    root = _kustomize_layout(tmp_path)
    tools = _fake_kustomize(tmp_path, write(tmp_path, "out.yaml", overlay("reserved", 0))
                            and (tmp_path / "out.yaml").read_text())
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    code, out, _ = run("check", str(root), "--format", "json")
    # Only overlays/prod is built (it names base), in a scratch copy that asks kustomize where each object came
    # from; the patch is never read as an object on its own.
    verb, built = (tools / "calls").read_text().split()
    prod = str(root / "overlays" / "prod")
    assert verb == "build" and built.endswith(prod) and built != prod
    assert code == 1 and codes(out) == ["schema"]
    # The user raises the weight: the tree changed, so it is rendered again.
    (root / "overlays" / "prod" / "weight.yaml").write_text(
        (root / "overlays" / "prod" / "weight.yaml").read_text().replace("weight: 0", "weight: 5"))
    (tools / "rendered.yaml").write_text((tmp_path / "out.yaml").read_text().replace('"weight": 0', '"weight": 5'))
    assert run("check", str(root))[0] == 0
    assert len((tools / "calls").read_text().splitlines()) == 2


def test_a_kustomization_without_a_renderer_is_a_note(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _kustomize_layout(tmp_path)
    empty = tmp_path / "nothing"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    code, out, _ = run("check", str(root), "--format", "json")
    assert (code, codes(out)) == (0, [])
    said = [n for n in notes(out) if "kustomization" in n]
    assert len(said) == 1 and said[0].startswith(f"{root / 'overlays' / 'prod'}: a kustomization")
    assert f"kustomize build {root / 'overlays' / 'prod'} | overlay-lint check -" in said[0]


def test_a_kustomization_kustomize_refuses_is_a_parse_error(tmp_path: pathlib.Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    root = _kustomize_layout(tmp_path)
    tools = _fake_kustomize(tmp_path, "")
    (tools / "kustomize").write_text("#!/bin/sh\necho 'Error: accumulating resources' >&2\nexit 1\n")
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    code, out, _ = run("check", str(root), "--format", "json")
    assert code == 1 and codes(out) == ["parse-error"]


@pytest.mark.parametrize(("text", "template"), [
    ("name: {{ .Release.Name }}", True), ("  {{- if .Values.enabled }}", True), ("{{/* a comment */}}", True),
    ("# mentions {{ .Values.x }} in a comment", False), ("capacity: {{}}", False), ("spec: {weight: 1}", False),
])
def test_what_counts_as_a_go_template(text: str, template: bool) -> None:
    from sources import templates

    assert templates.is_template(f"kind: NodeOverlay\n{text}\n") is template
