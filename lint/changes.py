"""`check --changed-since REF`: the files a pull request changes, from git, to judge against the rest of the tree."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence

from sources import files

GIT_SECONDS = 60


class ChangesError(Exception):
    """git could not say what changed; the message says why and what to do."""


def _git(args: Sequence[str]) -> str:
    try:
        done = subprocess.run(["git", *args], capture_output=True, text=True, timeout=GIT_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ChangesError(f"git {' '.join(args)}: {err}") from None
    if done.returncode != 0:
        said = next((line for line in done.stderr.splitlines() if line.strip()), f"exit {done.returncode}")
        raise ChangesError(f"git {' '.join(args)}: {said.strip()}")
    return done.stdout


def changed_files(ref: str, roots: Sequence[str]) -> list[str]:
    """The YAML and JSON files under `roots` that differ in the working tree from where HEAD left `ref` (their
    merge base: a pull request's own changes, not those made on its base since), deleted ones excepted."""
    try:
        base = _git(["merge-base", ref, "HEAD"]).strip()
    except ChangesError as err:
        raise ChangesError(f"--changed-since {ref}: {err}; the history must reach it (a shallow clone: "
                           "actions/checkout with fetch-depth: 0, GitLab's GIT_DEPTH: 0)") from None
    top = _git(["rev-parse", "--show-toplevel"]).strip()
    listed = _git(["diff", "--name-only", "-z", "--no-renames", "--diff-filter=d", base, "--", *roots])
    out = []
    for name in filter(None, listed.split("\0")):
        path = os.path.relpath(os.path.join(top, name))
        if path.lower().endswith(files.SUFFIXES) and os.path.isfile(path):
            out.append(path)
    return sorted(out)
