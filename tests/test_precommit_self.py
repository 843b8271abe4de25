"""The project runs its own pre-commit hooks on itself (.pre-commit-config.yaml): ruff, mypy --strict,
import-linter and the published overlay-lint hook on examples/, all `language: system` (the tools in
.venv, nothing downloaded)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".venv" / "bin"
HOOKS = ("ruff", "mypy --strict", "import-linter", "finding-code reference", "overlay-lint (examples)")

pytestmark = pytest.mark.slow


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    """The working tree's files (tracked, and new ones git does not ignore) in a repository of their own:
    an editor saving a file while the hooks run must not read as a hook that modified it."""
    repo = tmp_path / "overlay-guard"
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            check=True, capture_output=True, timeout=60)
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file() and not source.is_symlink():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / name)
    # mypy's cache from `make lint` (ignored by git, so not a file the hooks judge): mypy still checks every
    # file, and re-reads only those whose hash changed instead of the whole tree and its dependencies.
    if (ROOT / ".mypy_cache").is_dir():
        shutil.copytree(ROOT / ".mypy_cache", repo / ".mypy_cache")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True, timeout=60)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, timeout=60)
    return repo


def run_hooks(repo: Path, *hook: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           "PRE_COMMIT_HOME": str(repo.parent / "pre-commit-home"), "NO_COLOR": "1"}
    return subprocess.run([str(BIN / "pre-commit"), "run", *hook, "--all-files", "--color", "never"],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=900)


def verdicts(output: str) -> dict[str, str]:
    """hook name -> Passed / Failed / Skipped, from pre-commit's dotted lines."""
    return {m[1]: m[2] for m in re.finditer(r"^(.+?)\.{3,}.*?(Passed|Failed|Skipped)$", output, re.M)}


def test_every_hook_passes_on_the_repository(snapshot: Path) -> None:
    done = run_hooks(snapshot)
    assert done.returncode == 0, done.stdout + done.stderr
    seen = verdicts(done.stdout)
    for hook in HOOKS:
        assert any(name.startswith(hook) and v == "Passed" for name, v in seen.items()), (hook, done.stdout)


def test_hooks_catch_a_lint_error_an_impure_core_and_a_conflict(snapshot: Path) -> None:
    (snapshot / "simulation" / "unused.py").write_text("import os\n")
    # The pure core must not import the webhook.
    (snapshot / "simulation" / "impure.py").write_text('"""No."""\n\nimport webhook\n\n__all__ = ["webhook"]\n')
    conflict = (snapshot / "examples" / "extended-resource.yaml").read_text()
    (snapshot / "examples" / "twin.yaml").write_text(conflict.replace("name: ", "name: twin-", 1))
    subprocess.run(["git", "add", "-A"], cwd=snapshot, check=True, timeout=60)
    for hook, evidence in (("ruff", "F401"), ("lint-imports", "simulation.impure -> webhook"),
                           ("overlay-lint", "same-weight-conflict")):
        done = run_hooks(snapshot, hook)
        assert done.returncode == 1, (hook, done.stdout)
        assert evidence in done.stdout, (hook, done.stdout)
