"""The pre-commit hook, end to end: `pre-commit try-repo` builds the hook from a copy of this
repository and runs it on a throwaway project."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest

from tests import input_support
from tests.input_support import OVERLAY

ROOT = pathlib.Path(__file__).resolve().parent.parent
PRE_COMMIT = ROOT / ".venv" / "bin" / "pre-commit"
def overlay(name: str, weight: int, adjustment: str) -> str:
    return OVERLAY.format(name=name, weight=weight).replace('priceAdjustment: "-10%"',
                                                            f'priceAdjustment: "{adjustment}"')


IGNORED = shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info", ".mypy_cache", ".ruff_cache",
                                 ".pytest_cache", ".hypothesis", "build", "dist", "out", ".certs")



def git(cwd: pathlib.Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, timeout=120)


# The module fixture below is dear: one xdist worker runs every test here, so it is made once. pre-commit
# builds the hook's environment, a pip install of the project (minutes on two cores): `make check` leaves it out.
pytestmark = [pytest.mark.xdist_group("test_lint_precommit"), pytest.mark.tools]


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The working tree as a committed git repository: try-repo clones what is committed."""
    repo = tmp_path_factory.mktemp("hook") / "overlay-guard"
    shutil.copytree(ROOT, repo, ignore=IGNORED, symlinks=True)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "snapshot")
    return repo


def try_repo(hook_repo: pathlib.Path, project: pathlib.Path,
             cache: pathlib.Path) -> subprocess.CompletedProcess[str]:
    git(project, "init", "-q")
    git(project, "add", "-A")
    env = {**os.environ, "PRE_COMMIT_HOME": str(cache), "NO_COLOR": "1"}
    return subprocess.run([str(PRE_COMMIT), "try-repo", str(hook_repo), "overlay-lint", "--all-files",
                           "--color", "never"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_pre_commit_hook(hook_repo: pathlib.Path, tmp_path: pathlib.Path) -> None:
    cache = tmp_path / "pre-commit-cache"  # shared by both runs: the hook env is built once
    conflicting = tmp_path / "conflicting"
    overlays = conflicting / "overlays"
    overlays.mkdir(parents=True)
    (overlays / "a.yaml").write_text(overlay("team-a", 10, "-10%"))
    (overlays / "b.yaml").write_text(overlay("team-b", 10, "+5%"))
    (conflicting / "README.md").write_text("not checked\n")
    result = try_repo(hook_repo, conflicting, cache)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "same-weight-conflict" in output and "overlays/" in output

    clean = tmp_path / "clean"
    (clean / "overlays").mkdir(parents=True)
    (clean / "overlays" / "a.yaml").write_text(overlay("team-a", 10, "-10%"))
    (clean / "overlays" / "b.yaml").write_text(overlay("team-b", 20, "+5%"))
    (clean / "ci.yml").write_text("on: push\njobs: {}\n")
    result = try_repo(hook_repo, clean, cache)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Passed" in result.stdout


NODEPOOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
"""


def try_staged(hook_repo: pathlib.Path, project: pathlib.Path, cache: pathlib.Path) -> subprocess.CompletedProcess[str]:
    """The hook as `git commit` runs it: on the staged files only."""
    env = {**os.environ, "PRE_COMMIT_HOME": str(cache), "NO_COLOR": "1"}
    return subprocess.run([str(PRE_COMMIT), "try-repo", str(hook_repo), "overlay-lint", "--color", "never"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_pre_commit_hook_judges_the_staged_files_against_the_committed_ones(hook_repo: pathlib.Path,
                                                                             tmp_path: pathlib.Path) -> None:
    cache = tmp_path / "pre-commit-cache"
    project = tmp_path / "gitops"
    (project / "clusters" / "prod").mkdir(parents=True)
    (project / "clusters" / "prod" / "nodepools.yaml").write_text(NODEPOOL)
    (project / "clusters" / "prod" / "ri.yaml").write_text(overlay("reserved", 10, "-10%"))
    chart = project / "charts" / "overlays"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: overlays\nversion: 0.1.0\n")
    (chart / "templates" / "discount.yaml").write_text(input_support.HELM_TEMPLATE)
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "committed")

    # A Savings-Plan overlay of the same weight on the same cells, staged alone: the committed one conflicts.
    (project / "clusters" / "prod" / "savings-plan.yaml").write_text(overlay("savings-plan", 10, "-20%"))
    git(project, "add", "clusters/prod/savings-plan.yaml")
    result = try_staged(hook_repo, project, cache)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "same-weight-conflict" in output and "reserved" in output and "savings-plan" in output

    # Raised above the committed one, it passes; the Helm template staged with it is a note, not an error.
    (project / "clusters" / "prod" / "savings-plan.yaml").write_text(overlay("savings-plan", 20, "-20%"))
    (chart / "templates" / "discount.yaml").write_text(input_support.HELM_TEMPLATE.replace("discount", "rebate"))
    git(project, "add", "-A")
    result = try_staged(hook_repo, project, cache)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "parse-error" not in output and "Passed" in output


@pytest.mark.slow
def test_pre_commit_hook_in_a_flux_fleet(hook_repo: pathlib.Path, tmp_path: pathlib.Path) -> None:
    """issue 37 row 5: in the Flux layout each file is judged in the clusters that read it. As one cluster, every
    overlay of the shared base was a duplicate; a conflict in production fails there, and staging stays clean."""
    if shutil.which("kustomize") is None and shutil.which("kubectl") is None:
        pytest.skip("neither kustomize nor kubectl on PATH")
    cache = tmp_path / "pre-commit-cache"
    fleet = pathlib.Path(shutil.copytree(ROOT / "tests" / "fleet_fixtures" / "flux", tmp_path / "fleet"))
    result = try_repo(hook_repo, fleet, cache)
    assert result.returncode == 0, result.stdout + result.stderr
    production = fleet / "infrastructure" / "karpenter" / "overlays" / "production"
    (production / "reserved.yaml").write_text(overlay("reserved", 20, "-30%").replace("[spot]", "[on-demand]"))
    kustomization = production / "kustomization.yaml"
    kustomization.write_text(kustomization.read_text().replace("  - ../base\n", "  - ../base\n  - reserved.yaml\n"))
    result = try_repo(hook_repo, fleet, cache)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "[production] " in output and "same-weight-conflict" in output
    assert "[staging] 0 errors, 0 warnings" in output
