"""The CI integrations run as CI would run them: the GitHub Action's and the GitLab template's
command lines are read from their files and executed here against examples/, and the krew
archive is rebuilt and checked against its manifest."""

from __future__ import annotations

import collections.abc
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.lint_support import fake_forge

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = "examples"
CONFLICT = "examples/conflict-spot-gpu-pricing.yaml"
DRA = "examples/dra-gpu-rdma.yaml"


def _yaml(path: pathlib.Path) -> Any:
    return YAML(typ="safe").load(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def installer(tmp_path_factory: pytest.TempPathFactory) -> collections.abc.Iterator[dict[str, str]]:
    """A fresh virtualenv that sees the project's dependencies but not the project, and a copy of
    the project to install into it: the integrations' own `pip install` lines run for real."""
    base = tmp_path_factory.mktemp("install")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next((venv / "lib").glob("python3*/site-packages"))
    import setuptools  # the project's build backend, already in the project's environment

    deps = pathlib.Path(setuptools.__file__).resolve().parent.parent
    # After the venv's own site-packages: pip, setuptools and the runtime dependencies are found,
    # the project itself is not.
    (site / "project-deps.pth").write_text(f"{deps}\n")
    source = base / "overlay-guard"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "*.egg-info", "build", "dist", "__pycache__", ".mypy_cache", ".ruff_cache",
        ".pytest_cache", ".hypothesis", "tests", "benchmarks", "out", ".certs"))
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "VIRTUAL_ENV": str(venv), "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONNOUSERSITE": "1"}
    env.pop("PYTHONPATH", None)
    yield {"env": json.dumps(env), "source": str(source), "bin": str(venv / "bin")}


def _bash(script: str, env: dict[str, str], cwd: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=600)


def _expressions(text: str, values: dict[str, str]) -> str:
    """GitHub's `${{ ... }}` substitution for the expressions the action uses."""
    def one(match: re.Match[str]) -> str:
        expression = match.group(1).strip()
        assert expression in values, f"unexpected expression {expression!r} in action.yml"
        return values[expression]
    return re.sub(r"\$\{\{(.*?)\}\}", one, text)


def _condition(expression: str, values: dict[str, str]) -> bool:
    """A step's `if:` for the operators the action uses (==, &&, ||, always())."""
    text = expression.strip()
    if text.startswith("${{"):
        text = text[3:-2]
    for name in sorted(values, key=len, reverse=True):
        text = text.replace(name, repr(values[name]))
    text = text.replace("always()", "True").replace("&&", " and ").replace("||", " or ")
    assert re.fullmatch(r"[\sA-Za-z0-9_'().=\-]*", text), text
    return bool(eval(text, {"__builtins__": {}}, {}))


def _inputs(inputs: dict[str, str], action_path: str) -> dict[str, str]:
    action = _yaml(ROOT / "action.yml")
    assert action["runs"]["using"] == "composite"
    values = {f"inputs.{name}": inputs.get(name, spec.get("default", ""))
              for name, spec in action["inputs"].items()}
    values["github.action_path"] = action_path
    return values


def _run_action(installer: dict[str, str], tmp_path: pathlib.Path, inputs: dict[str, str],
                github: dict[str, str] | None = None, work: pathlib.Path | None = None) -> tuple[
        list[tuple[str, subprocess.CompletedProcess[str] | None]], dict[str, str]]:
    """Every `run:` step in order, as the runner would: stop at the first failing one. `github`: values of the
    workflow's context the pull-request mode reads; `work`: the checked-out workspace (default: examples/)."""
    env = json.loads(installer["env"])
    tmp_path.mkdir(parents=True, exist_ok=True)
    output_file = tmp_path / "github-output"
    output_file.write_text("")
    if work is None:
        work = tmp_path / "workspace"
        shutil.copytree(ROOT / EXAMPLES, work / EXAMPLES)
    done = []
    values = {**_inputs(inputs, installer["source"]), **(github or {})}
    for step in _yaml(ROOT / "action.yml")["runs"]["steps"]:
        outputs = dict(line.split("=", 1) for line in output_file.read_text().splitlines() if line)
        state = {**values, **{f"steps.{s}.outputs.{k}": v for k, v in outputs.items() for s in ("lint", "diff")}}
        unset = {"steps.lint.outputs.exit-code": "", "steps.diff.outputs.diff-exit-code": ""}
        if "if" in step and not _condition(str(step["if"]), {**unset, **state}):
            continue
        if "uses" in step:
            assert step["uses"].startswith(("actions/setup-python@", "github/codeql-action/upload-sarif@"))
            if "upload-sarif" in step["uses"]:
                sarif_file = work / _expressions(step["with"]["sarif_file"], values)
                done.append(("upload " + str(json.loads(sarif_file.read_text())["version"]), None))
            continue
        assert step["shell"] == "bash"
        env_vars = {k: _expressions(str(v), values) for k, v in (step.get("env") or {}).items()}
        result = _bash(_expressions(step["run"], values), {**env, **env_vars, "GITHUB_OUTPUT": str(output_file)},
                       work)
        done.append((step.get("name", ""), result))
        if result.returncode != 0:
            break
    outputs = dict(line.split("=", 1) for line in output_file.read_text().splitlines() if line)
    return done, outputs


Steps = list[tuple[str, subprocess.CompletedProcess[str] | None]]


def _codes(done: Steps) -> list[tuple[str, int | None]]:
    return [(name, None if r is None else r.returncode) for name, r in done]


def _errors(done: Steps) -> list[tuple[str, str]]:
    return [(name, r.stderr[-2000:]) for name, r in done if r is not None]


@pytest.mark.tools  # pip installs the project as the recipe does: minutes, not for make check
def test_github_action_finds_the_conflict_and_writes_sarif(installer: dict[str, str],
                                                           tmp_path: pathlib.Path) -> None:
    done, outputs = _run_action(installer, tmp_path, {"paths": f"{EXAMPLES}/nodepools.yaml\n{CONFLICT}"})
    assert _codes(done) == [("Install overlay-lint", 0), ("Run overlay-lint", 0), ("upload 2.1.0", None),
                            ("Fail on findings", 1)], _errors(done)
    assert outputs == {"exit-code": "1"}
    sarif = json.loads((tmp_path / "workspace" / "overlay-lint.sarif").read_text())
    results = sarif["runs"][0]["results"]
    assert sarif["version"] == "2.1.0" and "same-weight-conflict" in {r["ruleId"] for r in results}
    uris = {loc["physicalLocation"]["artifactLocation"]["uri"] for r in results for loc in r["locations"]}
    assert uris == {CONFLICT}, "paths are relative to the repository root, as code scanning needs"


@pytest.mark.tools  # pip installs the project as the recipe does: minutes, not for make check
def test_github_action_inputs(installer: dict[str, str], tmp_path: pathlib.Path) -> None:
    # Only warnings in these: clean at fail-on error, failing at warning; a catalog, the DRA-extended CRD
    # (Karpenter's own refuses the DRA example) and an output name.
    inputs = {"paths": f"{EXAMPLES}/nodepools.yaml {EXAMPLES}/savings-plan.yaml {DRA}", "sarif-file": "out.sarif",
              "catalog": str(ROOT / "tests" / "lint_fixtures" / "catalog.yaml"), "crd": "dra",
              "existing": f"{EXAMPLES}/team-chargeback.yaml"}
    done, outputs = _run_action(installer, tmp_path, inputs)
    assert _codes(done) == [("Install overlay-lint", 0), ("Run overlay-lint", 0), ("upload 2.1.0", None)], (
        _errors(done))
    assert outputs == {"exit-code": "0"} and (tmp_path / "workspace" / "out.sarif").is_file()
    # The catalog leaves one overlay matching nothing: a warning, which fails at fail-on warning.
    done, outputs = _run_action(installer, tmp_path / "again", {**inputs, "fail-on": "warning"})
    assert outputs == {"exit-code": "1"} and _codes(done)[-1] == ("Fail on findings", 1)
    # A path that does not exist is an error of the step itself (2), not a finding: no upload.
    done, outputs = _run_action(installer, tmp_path / "missing", {"paths": "no-such-dir"})
    assert _codes(done) == [("Install overlay-lint", 0), ("Run overlay-lint", 2)]
    assert outputs == {"exit-code": "2"}


def _gitlab_script(variables: dict[str, str]) -> tuple[str, dict[str, str]]:
    template = _yaml(ROOT / "ci" / "gitlab" / "overlay-lint.gitlab-ci.yml")
    job = template["overlay-lint"]
    assert job["artifacts"]["reports"]["junit"] == "overlay-lint.junit.xml"
    assert job["artifacts"]["when"] == "always"
    return "\n".join(job["script"]), {**template["variables"], **variables}


def _run_gitlab(installer: dict[str, str], tmp_path: pathlib.Path, variables: dict[str, str],
                work: pathlib.Path | None = None) -> tuple[subprocess.CompletedProcess[str], pathlib.Path]:
    script, env_vars = _gitlab_script({"OVERLAY_LINT_PACKAGE": installer["source"], **variables})
    if work is None:
        work = tmp_path / "project"
        shutil.copytree(ROOT / EXAMPLES, work / EXAMPLES)
    # pip is the install environment's: GitLab's python image has it on PATH as `python -m pip`.
    result = _bash(script, {**json.loads(installer["env"]), **env_vars}, work)
    return result, work / "overlay-lint.junit.xml"


@pytest.mark.tools  # pip installs the project as the recipe does: minutes, not for make check
def test_gitlab_template_fails_on_the_conflict_with_a_junit_report(installer: dict[str, str],
                                                                   tmp_path: pathlib.Path) -> None:
    result, report = _run_gitlab(installer, tmp_path, {"OVERLAY_LINT_PATHS": EXAMPLES})
    assert result.returncode == 1, result.stderr[-2000:]
    assert "same-weight-conflict" in result.stdout  # the job log shows the findings
    root = ET.parse(report).getroot()
    failures = [f.get("type") for f in root.iter("failure")]
    assert "same-weight-conflict" in failures
    assert int(root.get("tests", "0")) == len(list(root.iter("testcase"))) > 1


@pytest.mark.tools  # pip installs the project as the recipe does: minutes, not for make check
def test_gitlab_template_clean_run(installer: dict[str, str], tmp_path: pathlib.Path) -> None:
    result, report = _run_gitlab(installer, tmp_path, {
        "OVERLAY_LINT_PATHS": f"{EXAMPLES}/nodepools.yaml {EXAMPLES}/savings-plan.yaml {DRA}",
        "OVERLAY_LINT_CRD": "dra", "OVERLAY_LINT_EXISTING": f"{EXAMPLES}/team-chargeback.yaml"})
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    assert ET.parse(report).getroot().get("failures") == "0"


# --- pull-request comments ------------------------------------------------------------------------

SPOT = """apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: spot-discount}
spec:
  weight: 10
  requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]
  priceAdjustment: "%s"
"""


def _git(work: pathlib.Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=work,
                          check=True, capture_output=True, text=True, timeout=60).stdout.strip()


def _commits(work: pathlib.Path, *adjustments: str) -> list[str]:
    """A repository whose commits set the spot discount to each adjustment in turn; their shas."""
    (work / "overlays").mkdir(parents=True)
    _git(work, "init", "-q", "-b", "main")
    shas = []
    for adjustment in adjustments:
        (work / "overlays" / "spot.yaml").write_text(SPOT % adjustment, encoding="utf-8")
        _git(work, "add", "-A")
        _git(work, "commit", "-q", "-m", adjustment)
        shas.append(_git(work, "rev-parse", "HEAD"))
    return shas


@pytest.mark.tools  # pip installs the project as the recipe does: minutes, not for make check
def test_github_action_comments_on_the_pull_request(installer: dict[str, str], tmp_path: pathlib.Path) -> None:
    """comment: true posts the diff as one comment, and the next push updates that comment."""
    comments = "/repos/team/gitops/issues/7/comments"
    work = tmp_path / "checkout"
    base, head, later = _commits(work, "-20%", "-30%", "-40%")
    inputs = {"paths": "overlays", "upload": "false", "comment": "true", "github-token": "s3cret",
              "catalog": str(ROOT / "tests" / "lint_fixtures" / "catalog.yaml")}
    with fake_forge([comments]) as (url, api):
        context = {"github.event.pull_request.base.sha": base, "github.event.pull_request.head.sha": head,
                   "github.event.pull_request.number": "7", "github.api_url": url,
                   "github.repository": "team/gitops"}
        done, outputs = _run_action(installer, tmp_path / "first", inputs, context, work)
        assert _codes(done) == [("Install overlay-lint", 0), ("Run overlay-lint", 0), ("Diff the pull request", 0),
                                ("Comment on the pull request", 0)], _errors(done)
        assert outputs["diff-exit-code"] == "0"
        assert [m for m, _ in api.log] == ["GET", "POST"]
        (comment_id, first), = api.comments[comments].items()
        assert first.startswith("<!-- overlay-lint:diff") and "spot-discount" in first and "-12.5%" in first
        # The branch moves: the same comment is updated.
        _git(work, "checkout", "-q", later)
        context["github.event.pull_request.head.sha"] = later
        done, _ = _run_action(installer, tmp_path / "second", inputs, context, work)
        assert [m for m, _ in api.log] == ["GET", "POST", "GET", "PATCH"], _errors(done)
        assert list(api.comments[comments]) == [comment_id]
        assert "-25.0%" in api.comments[comments][comment_id]
        # A token that may not comment: the step is skipped, not failed.
        api.denied = True
        done, _ = _run_action(installer, tmp_path / "third", inputs, context, work)
        assert _codes(done)[-1] == ("Comment on the pull request", 0)
        last = done[-1][1]
        assert last is not None and "skipped" in last.stderr


@pytest.mark.tools  # pip installs the project as the recipe does: minutes, not for make check
def test_gitlab_template_notes_the_merge_request(installer: dict[str, str], tmp_path: pathlib.Path) -> None:
    template = _yaml(ROOT / "ci" / "gitlab" / "overlay-lint.gitlab-ci.yml")
    job = template["overlay-lint-diff"]
    assert job["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "merge_request_event"'}]
    notes = "/api/v4/projects/42/merge_requests/3/notes"
    work = tmp_path / "project"
    base, head, later = _commits(work, "-20%", "-30%", "-10%")
    with fake_forge([notes]) as (url, api):
        variables = {**template["variables"], **job["variables"], "OVERLAY_LINT_PACKAGE": installer["source"],
                     "OVERLAY_LINT_PATHS": "overlays", "OVERLAY_LINT_GITLAB_TOKEN": "s3cret",
                     "OVERLAY_LINT_CATALOG": str(ROOT / "tests" / "lint_fixtures" / "catalog.yaml"),
                     "CI_API_V4_URL": f"{url}/api/v4", "CI_PROJECT_ID": "42", "CI_MERGE_REQUEST_IID": "3",
                     "CI_MERGE_REQUEST_DIFF_BASE_SHA": base, "CI_COMMIT_SHA": head}
        script = "\n".join(job["script"])
        result = _bash(script, {**json.loads(installer["env"]), **variables}, work)
        assert result.returncode == 0, result.stderr[-2000:]
        assert [m for m, _ in api.log] == ["GET", "POST"]
        result = _bash(script, {**json.loads(installer["env"]), **variables, "CI_COMMIT_SHA": later}, work)
        assert result.returncode == 0, result.stderr[-2000:]
        assert [m for m, _ in api.log] == ["GET", "POST", "GET", "PUT"]
        (note,) = api.comments[notes].values()
        assert "+12.5%" in note and (work / "overlay-lint-diff.md").read_text(encoding="utf-8") == note


# --- a pull request's change against the rest of the repository -----------------------------------------

SAVINGS_PLAN = """\
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: savings-plan-m5}
spec:
  weight: %d
  requirements:
    - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}
  priceAdjustment: "-20%%"
"""
RESERVED = SAVINGS_PLAN.replace("savings-plan-m5", "reserved-m5").replace("-20%", "-10%")


def _pull_request(tmp_path: pathlib.Path, weight: int) -> tuple[pathlib.Path, str]:
    """A repository whose base commit holds an overlay at weight 10 and a broken file elsewhere, and a pull
    request adding a Savings-Plan overlay at `weight`; and the base commit."""
    work = tmp_path / "checkout"
    (work / "clusters" / "prod").mkdir(parents=True)
    (work / "clusters" / "prod" / "reserved.yaml").write_text(RESERVED % 10)
    (work / "clusters" / "staging").mkdir()
    (work / "clusters" / "staging" / "broken.yaml").write_text("kind: NodeOverlay\nmetadata: [\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "base"]):
        subprocess.run(["git", *args], cwd=work, env=env, check=True, capture_output=True, timeout=60)
    base = subprocess.run(["git", "rev-parse", "HEAD"], cwd=work, check=True, capture_output=True, text=True,
                          timeout=60).stdout.strip()
    (work / "clusters" / "prod" / "savings-plan.yaml").write_text(SAVINGS_PLAN % weight)
    for args in (["add", "-A"], ["commit", "-q", "-m", "pull request"]):
        subprocess.run(["git", *args], cwd=work, env=env, check=True, capture_output=True, timeout=60)
    return work, base


@pytest.mark.tools  # pip installs the project as the recipe does: minutes, not for make check
def test_github_action_pull_request_mode(installer: dict[str, str], tmp_path: pathlib.Path) -> None:
    work, base = _pull_request(tmp_path / "conflict", 10)
    done, outputs = _run_action(installer, tmp_path / "conflict", {"changed-since": base}, work=work)
    assert outputs == {"exit-code": "1"}, _errors(done)
    results = json.loads((work / "overlay-lint.sarif").read_text())["runs"][0]["results"]
    assert {r["ruleId"] for r in results} == {"same-weight-conflict"}
    # The whole-tree mode (no changed-since) reports the broken file the pull request did not touch too.
    done, outputs = _run_action(installer, tmp_path / "whole", {}, work=_pull_request(tmp_path / "whole", 20)[0])
    assert outputs == {"exit-code": "1"}
    work, base = _pull_request(tmp_path / "clean", 20)
    done, outputs = _run_action(installer, tmp_path / "clean", {"changed-since": base}, work=work)
    assert outputs == {"exit-code": "0"}, _errors(done)


@pytest.mark.tools  # pip installs the project as the recipe does: minutes, not for make check
def test_gitlab_template_merge_request_mode(installer: dict[str, str], tmp_path: pathlib.Path) -> None:
    work, base = _pull_request(tmp_path / "conflict", 10)
    result, report = _run_gitlab(installer, tmp_path, {"OVERLAY_LINT_CHANGED_SINCE": base}, work)
    assert result.returncode == 1 and "same-weight-conflict" in result.stdout, result.stderr[-2000:]
    assert "parse-error" not in result.stdout
    work, base = _pull_request(tmp_path / "clean", 20)
    result, report = _run_gitlab(installer, tmp_path, {"OVERLAY_LINT_CHANGED_SINCE": base}, work)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    assert ET.parse(report).getroot().get("failures") == "0"


# --- krew ----------------------------------------------------------------------------------------

KREW = ROOT / "plugins" / "krew"


def _krew_manifest(out_dir: pathlib.Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(KREW / "manifest.py"), *args, "--out-dir", str(out_dir)],
                          capture_output=True, text=True, timeout=60)


def test_krew_template_leaves_address_and_digest_to_the_release() -> None:
    template = _yaml(KREW / "overlay.template.yaml")
    assert template["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert template["kind"] == "Plugin" and template["metadata"]["name"] == "overlay"
    (platform,) = template["spec"]["platforms"]
    assert (template["spec"]["version"], platform["sha256"]) == ("${VERSION}", "${SHA256}")
    assert platform["uri"] == "https://github.com/${REPO}/releases/download/${VERSION}/kubectl-overlay.tar.gz"
    assert not (KREW / "overlay.yaml").exists(), "the manifest is made by a release, not committed"


@pytest.mark.parametrize("args", [
    [],
    ["--version", "v0.1.0"],
    ["--repo", "example-org/overlay-guard"],
    ["--repo", "not a repo", "--version", "v0.1.0"],
    ["--repo", "example-org/overlay-guard", "--version", "v99.0.0"],
], ids=["nothing", "no-repo", "no-version", "bad-repo", "other-version"])
def test_krew_manifest_refuses_without_a_release(args: list[str], tmp_path: pathlib.Path) -> None:
    refused = _krew_manifest(tmp_path / "dist", *args)
    assert refused.returncode == 2 and refused.stderr.startswith("krew manifest: ")
    assert not (tmp_path / "dist").exists(), "nothing is written"


def test_make_krew_manifest_refuses_without_repo_and_version() -> None:
    refused = subprocess.run(["make", "-s", "-C", str(ROOT), "krew-manifest", "REPO=", "VERSION="],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "krew manifest: REPO is required" in refused.stderr


def test_krew_manifest_matches_the_reproducible_archive(tmp_path: pathlib.Path) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    version = f"v{project['version']}"
    assert "kubectl-overlay" in project["scripts"]
    made = _krew_manifest(tmp_path / "dist", "--repo", "example-org/overlay-guard", "--version", version)
    assert made.returncode == 0, made.stderr
    text = (tmp_path / "dist" / "overlay.yaml").read_text(encoding="utf-8")
    assert "$" not in text, "every placeholder is filled"
    manifest = _yaml(tmp_path / "dist" / "overlay.yaml")
    assert manifest["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert manifest["kind"] == "Plugin" and manifest["metadata"]["name"] == "overlay"
    assert manifest["spec"]["version"] == version
    archive = tmp_path / "kubectl-overlay.tar.gz"
    built = subprocess.run([sys.executable, str(KREW / "archive.py"), str(archive)],
                           capture_output=True, text=True, check=True, timeout=60)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    assert built.stdout.strip() == digest
    assert (tmp_path / "dist" / "kubectl-overlay.tar.gz").read_bytes() == archive.read_bytes(), "reproducible"
    (platform,) = manifest["spec"]["platforms"]
    assert platform["sha256"] == digest
    assert platform["uri"] == \
        f"https://github.com/example-org/overlay-guard/releases/download/{version}/kubectl-overlay.tar.gz"
    launcher = tmp_path / platform["bin"]
    with tarfile.open(archive) as tar:
        (member,) = tar.getmembers()
        assert member.name == platform["bin"] and member.isfile()
        # Read, not extracted: extractall's `filter` is missing from Debian bookworm's Python 3.11.2, the image's.
        read = tar.extractfile(member)
        assert read is not None
        launcher.write_bytes(read.read())
        launcher.chmod(member.mode)
    assert os.access(launcher, os.X_OK)
    assert f"overlay-guard=={project['version']}" in launcher.read_text()
    # The launcher runs the installed plugin (here: the project's environment).
    env = {**os.environ, "PATH": f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    shown = subprocess.run([str(launcher), "--help"], capture_output=True, text=True, env=env, timeout=120)
    assert shown.returncode == 0 and shown.stdout.startswith("usage: kubectl overlay")


# --- the documented "where to lint" recipes, as written ---------------------------------------------------

# The sections that hold them: the README's CI and pre-commit recipes, docs/cli.md's rendering pipes and plugin.
RECIPES = ((ROOT / "README.md", "## Lint in CI and pre-commit"), (ROOT / "docs" / "cli.md", "## More places to lint"))
HELM = pathlib.Path(os.environ.get("OVERLAY_GUARD_CACHE", pathlib.Path.home() / ".cache" / "overlay-guard"))


def _recipes() -> list[tuple[str, str]]:
    """(language, text) of every code block of those sections (each up to the next heading of its level)."""
    found = []
    for path, heading in RECIPES:
        text = path.read_text(encoding="utf-8")
        start = text.index(f"\n{heading}\n")
        end = text.find("\n## ", start + 1)
        found += re.findall(r"```(\w+)\n(.*?)```", text[start:end if end >= 0 else len(text)], re.DOTALL)
    return found


def test_readme_pre_commit_recipe_is_the_published_hook() -> None:
    """The recipe as written (repo and rev filled) names the hook .pre-commit-hooks.yaml publishes; the hook
    itself runs for real in tests/test_lint_precommit.py (pre-commit try-repo, staged against committed files)."""
    (recipe,) = [YAML(typ="safe").load(t) for lang, t in _recipes() if lang == "yaml" and "hooks:" in t]
    published = {h["id"]: h for h in _yaml(ROOT / ".pre-commit-hooks.yaml")}
    assert [h["id"] for h in recipe[0]["hooks"]] == ["overlay-lint"]
    assert published["overlay-lint"]["args"] == ["--against", "."]


def _kustomized(tmp_path: pathlib.Path) -> pathlib.Path:
    """A GitOps checkout: clusters/prod (a kustomization: NodePool and two overlays, the second a pull request's
    addition), and a Helm chart of overlays with values-prod.yaml."""
    work, _ = _pull_request(tmp_path, 10)
    prod = work / "clusters" / "prod"
    (prod / "nodepools.yaml").write_text(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: general}\nspec:\n  template:\n    spec:\n"
        "      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements: []\n")
    (prod / "kustomization.yaml").write_text("resources: [nodepools.yaml, reserved.yaml, savings-plan.yaml]\n")
    chart = work / "charts" / "overlays"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: overlays\nversion: 0.1.0\n")
    (chart / "templates" / "discount.yaml").write_text(
        "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata:\n  name: {{ .Release.Name }}-discount\n"
        "spec:\n  weight: {{ .Values.weight }}\n  requirements: []\n"
        "  priceAdjustment: {{ .Values.adjustment | quote }}\n")
    (work / "values-prod.yaml").write_text("weight: 10\nadjustment: '-10%'\n")
    return work


@pytest.mark.tools  # pip installs the project as the recipe does: minutes, not for make check
def test_readme_rendering_recipes_run_as_written(installer: dict[str, str], tmp_path: pathlib.Path) -> None:
    """Each `... | overlay-lint check -` line, run by bash in a checkout. kustomize is kubectl's embedded one when
    kustomize itself is missing; helm is hack/helm.sh's build. A line whose tool is missing here (flux) or that
    needs a live cluster (--cluster, tests/e2e) is left out, and the test says which in its name list."""
    work = _kustomized(tmp_path)
    tools = tmp_path / "tools"
    tools.mkdir()
    if not shutil.which("kustomize") and shutil.which("kubectl"):
        (tools / "kustomize").write_text('#!/bin/sh\n[ "$1" = build ] && shift\nexec kubectl kustomize "$@"\n')
        (tools / "kustomize").chmod(0o755)
    helm = next(iter(sorted(HELM.glob("helm-*/helm"))), None)
    if helm is not None:
        (tools / "helm").symlink_to(helm)
    env = {**json.loads(installer["env"])}
    subprocess.run([f"{installer['bin']}/python", "-m", "pip", "install", "--quiet", installer["source"]], env=env,
                   check=True, capture_output=True, timeout=600)
    env["PATH"] = f"{tools}{os.pathsep}{env['PATH']}"
    lines = [line.split("  #")[0].strip() for lang, text in _recipes() if lang == "sh"
             for line in text.splitlines() if "| overlay-lint check -" in line]
    ran, left = [], []
    for line in lines:
        tool = line.split()[0]
        if "--cluster" in line or not shutil.which(tool, path=env["PATH"]):
            left.append(line)
            continue
        done = _bash(line, env, work)
        ran.append(line)
        expected = 0 if tool == "helm" else 1  # clusters/prod holds a same-weight conflict; the chart does not
        assert done.returncode == expected, (line, done.stdout[-2000:], done.stderr[-2000:])
        if "--output overlay-lint.xml" in line:
            assert "same-weight-conflict" in (work / "overlay-lint.xml").read_text()
        elif tool == "kustomize":
            assert "same-weight-conflict" in done.stdout
    assert any(line.startswith("kustomize build") for line in ran), (ran, left)
    assert helm is None or any(line.startswith("helm template") for line in ran), (ran, left)
    assert all(line.startswith("flux ") or "--cluster" in line or line.startswith("helm ") for line in left), left


@pytest.mark.tools  # pip installs the project as the recipe does: minutes, not for make check
def test_readme_github_workflow_runs_as_written(installer: dict[str, str], tmp_path: pathlib.Path) -> None:
    (workflow,) = [YAML(typ="safe").load(t) for lang, t in _recipes() if lang == "yaml" and "jobs:" in t]
    steps = workflow["jobs"]["lint"]["steps"]
    assert steps[0] == {"uses": "actions/checkout@v4", "with": {"fetch-depth": 0}}
    inputs = {k: str(v) for k, v in steps[1]["with"].items()}
    assert set(inputs) <= set(_yaml(ROOT / "action.yml")["inputs"])
    work, base = _pull_request(tmp_path / "pr", 10)
    # The pull request's base sha, as GitHub fills the expression.
    inputs = {k: v.replace("${{ github.event.pull_request.base.sha }}", base) for k, v in inputs.items()}
    done, outputs = _run_action(installer, tmp_path / "pr", inputs, work=work)
    assert outputs == {"exit-code": "1"}, _errors(done)
    # On push the expression is empty: the whole of `paths` is checked (here without a conflict).
    work, _ = _pull_request(tmp_path / "push", 20)
    done, outputs = _run_action(installer, tmp_path / "push", {**inputs, "changed-since": ""}, work=work)
    assert outputs == {"exit-code": "0"}, _errors(done)


@pytest.mark.tools  # pip installs the project as the recipe does: minutes, not for make check
def test_readme_gitlab_include_runs_as_written(installer: dict[str, str], tmp_path: pathlib.Path) -> None:
    (include,) = [YAML(typ="safe").load(t) for lang, t in _recipes() if lang == "yaml" and "include:" in t]
    assert include["include"][0]["remote"].endswith("/ci/gitlab/overlay-lint.gitlab-ci.yml")
    variables = {k: str(v) for k, v in include["variables"].items()}
    assert set(variables) <= set(_yaml(ROOT / "ci" / "gitlab" / "overlay-lint.gitlab-ci.yml")["variables"])
    work, _ = _pull_request(tmp_path, 10)
    result, _ = _run_gitlab(installer, tmp_path, variables, work)
    assert result.returncode == 1 and "same-weight-conflict" in result.stdout, result.stderr[-2000:]
