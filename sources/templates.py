"""Files that are not manifests yet: Helm and other Go templates, and kustomizations.

A Go template (`{{ .Values.x }}`) is not YAML until it is rendered: it is skipped with a note that says how to lint
what it renders. A directory with a kustomization file is what `kustomize build` renders, not its files one by one
(patches are partial objects): it is rendered when kustomize (or kubectl, which embeds it) is on PATH, else skipped
with a note. Findings in what it renders point at the files it came from (sources/kustomize.py, origins.py)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence

from sources import tree

# A Go template action on a line that is not a YAML comment: `{{`, an optional `-`, something (Go refuses an empty
# action, and `{{}}` is a YAML flow mapping in a key), then `}}` on the same line. YAML and JSON manifests of our
# kinds never hold one (label values, names and quantities cannot contain braces).
_ACTION = re.compile(r"^(?![ \t]*#).*?\{\{-?\s*[^\s}].*?\}\}", re.MULTILINE)
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
# A kustomization's entries that may name another kustomization directory.
_REFERENCES = ("resources", "bases", "components")
RENDER_SECONDS = 120


def is_template(text: str) -> bool:
    # The substring test first: a line-by-line search costs 50 ms per 4 MB file, the test a millisecond.
    return "{{" in text and _ACTION.search(text) is not None


def template_note(name: str) -> str:
    chart = _chart_of(name)
    if chart is not None:
        how = f"helm template RELEASE {chart} | overlay-lint check -"
        return f"{name}: a Helm template ({{{{ }}}}), not linted; lint what it renders: {how}"
    return f"{name}: a Go template ({{{{ }}}}), not linted; lint what it renders: <render it> | overlay-lint check -"


def _chart_of(name: str) -> str | None:
    """The Helm chart directory a template file belongs to: the nearest ancestor with a Chart.yaml."""
    directory = os.path.dirname(os.path.abspath(name))
    while True:
        if os.path.isfile(os.path.join(directory, "Chart.yaml")):
            return os.path.relpath(directory) if not os.path.isabs(name) else directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def kustomization_file(directory: str) -> str | None:
    for name in KUSTOMIZATION_FILES:
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            return path
    return None


def roots(directories: Sequence[str]) -> list[str]:
    """The kustomization directories no other one of them names as a resource, base or component: rendering
    `overlays/prod` renders the `base` it names, which rendered again on its own would be a second copy."""
    found = {os.path.realpath(d): d for d in directories}
    named: set[str] = set()
    for real, directory in found.items():
        named |= {os.path.realpath(os.path.join(directory, ref)) for ref in references(directory)} - {real}
    return [d for real, d in found.items() if real not in named]


# How kustomize names a remote base (a go-getter URL, a git host path): never a file of this repository.
_REMOTE_PREFIXES = ("git@", "github.com/", "gh:", "git::")


def is_remote(reference: str) -> bool:
    """Whether a kustomization's reference names a remote base rather than a path."""
    return "://" in reference or reference.startswith(_REMOTE_PREFIXES)


def references(directory: str) -> Iterable[str]:
    path = kustomization_file(directory)
    if path is None:
        return ()
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError):
        return ()
    out: list[str] = []
    for parsed in tree.documents(text):
        if isinstance(parsed.value, Mapping):
            for key in _REFERENCES:
                entries = parsed.value.get(key)
                out += [e for e in entries if isinstance(e, str)] if isinstance(entries, list) else []
    return out


def renderer() -> list[str] | None:
    """The command that renders a kustomization: kustomize's own, else kubectl's embedded one."""
    import shutil  # shutil and subprocess only where a kustomization is met: not on a one-file check's path

    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize"]
    return None


class RenderError(Exception):
    """kustomize refused the kustomization (sources/kustomize.py builds it); the message is its first line of
    explanation."""


def unrendered_note(directory: str) -> str:
    return (f"{directory}: a kustomization, not linted file by file (patches are partial objects) and neither "
            f"kustomize nor kubectl is on PATH to render it; lint what it renders: "
            f"kustomize build {directory} | overlay-lint check -")
