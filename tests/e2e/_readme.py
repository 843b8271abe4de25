"""The documented install commands (the README's Helm and kustomize blocks, docs/webhook.md's DRA CRD opt-in),
run by the e2e suite exactly as written.

A block is the first ```sh fence after a `<!-- e2e: NAME -->` marker, in either document. It runs under
`bash -euo pipefail` with the e2e cluster as the current kubeconfig and the cached kubectl and helm first on
PATH, so what a user copies is what was tested.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from tests import tools

from ._cluster import REPO_ROOT, ControlPlane, ControlPlaneError

DOCS = (REPO_ROOT / "README.md", REPO_ROOT / "docs" / "webhook.md")
_FENCE = re.compile(r"<!-- e2e: (?P<name>[\w-]+) -->\s*\n```sh\n(?P<body>.*?)\n```", re.DOTALL)


def blocks() -> dict[str, str]:
    """Every marked block, in the documents' order."""
    return {m["name"]: m["body"] for doc in DOCS for m in _FENCE.finditer(doc.read_text(encoding="utf-8"))}


def block(name: str) -> str:
    found = blocks().get(name)
    if found is None:
        raise ControlPlaneError(f"no document has a ```sh block after <!-- e2e: {name} -->")
    return found


def env(plane: ControlPlane, home: Path) -> dict[str, str]:
    out = tools.helm_env(home)
    path = [str(Path(plane.kubectl_path).parent), str(Path(tools.helm()).parent), str(Path(sys.executable).parent)]
    out.update(PATH=os.pathsep.join([*path, out.get("PATH", "")]), KUBECONFIG=str(plane.kubeconfig),
               KUBECACHEDIR=str(home / "kube-cache"))
    return out


def run(plane: ControlPlane, name: str, *, cwd: Path = REPO_ROOT, home: Path | None = None,
        extra_env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run block `name` in `cwd`; raises with its output when it fails."""
    script = block(name)
    home = home or plane.workdir / "readme-home"
    full = {**env(plane, home), **(extra_env or {})}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=300)
    if done.returncode != 0:
        raise ControlPlaneError(f"documented block {name} failed ({done.returncode}):\n{script}\n--- stdout\n"
                                f"{done.stdout}\n--- stderr\n{done.stderr}")
    return done
