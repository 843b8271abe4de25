"""A Flux Kustomization's `spec.path` rendered as kustomize-controller renders it.

As github.com/fluxcd/pkg/kustomize does (the generator kustomize-controller builds with): the kustomization file
at the path is used, else one is generated that lists every `.yaml`/`.yml` file under it (a subdirectory holding a
kustomization is listed as a directory and not descended into); `spec.targetNamespace`, `spec.namePrefix`,
`spec.nameSuffix`, `spec.patches` and `spec.components` are set on that kustomization; the build may read any file
of the repository (LoadRestrictionsNone); then each rendered object's YAML goes through `spec.postBuild.substitute`
(bash-style `${VAR}`, `${VAR:-default}`, `${VAR:=default}`; an unknown variable is empty, `$${` is a literal `${`;
objects labelled or annotated `kustomize.toolkit.fluxcd.io/substitute: disabled` are left alone).
`spec.postBuild.substituteFrom` names ConfigMaps and Secrets of a cluster: a note says their variables are left
as written. What source-controller leaves out of every artifact (`.git/`, `.github/`, CI files...) is left out;
`.sourceignore` files and a GitRepository's `spec.ignore` are not read (a note says so when a generated
kustomization would have listed files under a `.sourceignore`, which it walks). tests/test_flux.py holds this
to Flux's own code."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sources import kustomize, origins, rendercache, templates, tree
from sources.positions import Origin

_SUBSTITUTE_KEY = "kustomize.toolkit.fluxcd.io/substitute"
_VAR_NAME = re.compile(r"^[_a-zA-Z][_a-zA-Z0-9]*$")
# `${NAME}` and the default forms; `$${` (an escaped dollar) is matched first so it is never substituted.
_REFERENCE = re.compile(r"\$\$\{|\$\{([_a-zA-Z][_a-zA-Z0-9]*)(?:(:?[-=])([^}$]*))?\}")
_DOCUMENT_SEPARATOR = re.compile(r"^---[ \t]*\n", re.MULTILINE)
_REMOTE = ("git::", "gh:", "ssh://", "https://", "http://", "git@", "github.com:", "github.com/")
# What source-controller leaves out of every artifact (github.com/fluxcd/pkg/sourceignore: ExcludeVCS, ExcludeCI,
# ExcludeExtra), at any depth: Flux never sees these files, so its generated kustomization never lists them.
_EXCLUDED_DIRS = frozenset({".git", ".github", ".circleci"})
_EXCLUDED_FILES = frozenset({".travis.yml", ".gitlab-ci.yml", "appveyor.yml", ".drone.yml", "cloudbuild.yaml",
                             "codeship-services.yml", "codeship-steps.yml", ".goreleaser.yml", ".sops.yaml",
                             ".flux.yaml"})


@dataclasses.dataclass(frozen=True)
class Problem:
    """A Kustomization that cannot be rendered; `file` and `line` point at the field to fix when known."""

    message: str
    file: str | None
    line: int | None


@dataclasses.dataclass(frozen=True)
class Rendered:
    directory: str
    documents: tuple[kustomize.Traced, ...] = ()
    # The files the render read (real paths).
    files: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    errors: tuple[Problem, ...] = ()
    # The Kustomization's own patches, where it holds them, by the kustomization file they were added to.
    patches: Mapping[str, tuple[origins.Patch, ...]] = dataclasses.field(default_factory=dict)


def render_kustomization(repo_root: Path | str, kustomization: Mapping[str, Any], *,
                         defined_at: Origin | None = None, command: Sequence[str] | None = None) -> Rendered:
    """The objects Flux applies for `kustomization` (a Kustomization object, or its spec), its `spec.path` taken
    from `repo_root`. `defined_at` is where the object was read (for file:line in errors and in findings of
    objects its inline patches set); `command` the renderer (default: kustomize's, else kubectl's)."""
    spec = kustomization.get("spec", kustomization)
    spec = spec if isinstance(spec, Mapping) else {}
    root = str(repo_root)
    name = _name(kustomization)
    path = spec.get("path", "./")

    def problem(message: str, field: tree.Path = ("path",)) -> Rendered:
        return Rendered(root, errors=(_problem(f"{name}: {message}", defined_at, ("spec", *field)),))

    directory, wrong = _directory(root, path)
    if wrong is not None:
        return problem(wrong)
    command = command or templates.renderer()
    if command is None:
        return Rendered(directory, notes=(templates.unrendered_note(directory),))
    amendment, notes = _amendment(spec, directory, name)
    substitute, more = _substitution(spec, name)

    def finish(text: str) -> list[kustomize.Traced]:
        documents: list[kustomize.Traced] = []
        for chunk in _DOCUMENT_SEPARATOR.split(text):
            if substitute is not None and not _disabled(chunk):
                chunk = substitute(chunk)
            documents += kustomize.traced(chunk, directory)
        return documents

    try:
        render = rendercache.build(directory, amendment, command, finish, root=root,
                                   extra=amendment.resources or (),
                                   salt=json.dumps(spec.get("postBuild"), sort_keys=True, default=str))
    except templates.RenderError as err:
        return problem(str(err))
    except ValueError as err:
        return problem(str(err), ("postBuild", "substitute"))
    return Rendered(directory, render.documents, render.files, (*notes, *more),
                    patches={origins.kustomization_of(directory): _patches_at(amendment, defined_at)})


def _patches_at(amendment: kustomize.Amendment, defined_at: Origin | None) -> tuple[origins.Patch, ...]:
    if defined_at is None or defined_at.file is None:
        return ()
    locator = origins.Locator()
    return tuple(locator.inline(p["patch"], defined_at.file, defined_at.positions.get(("spec", "patches", i, "patch")),
                                p.get("target") if isinstance(p.get("target"), Mapping) else None)
                 for i, p in enumerate(amendment.patches) if isinstance(p.get("patch"), str))


def _directory(root: str, path: Any) -> tuple[str, str | None]:
    """The directory `spec.path` names, or what is wrong with it."""
    if not isinstance(path, str) or path.lower().startswith(_REMOTE) or os.path.isabs(path):
        return root, f"spec.path {path!r} must be a path in the repository"
    directory = os.path.normpath(os.path.join(root, path))
    if os.path.relpath(os.path.realpath(directory), os.path.realpath(root)).startswith(os.pardir):
        return directory, f"spec.path {path!r} leads out of the repository"
    if not os.path.isdir(directory):
        return directory, f"spec.path {path!r} is not a directory of the repository ({directory})"
    return directory, None


def render_all(repo_root: Path | str, kustomizations: Sequence[tuple[Mapping[str, Any], Origin | None]],
               command: Sequence[str] | None = None) -> list[Rendered]:
    """`render_kustomization` of each (object, where it was read), several at once (each build is its own
    kustomize process), in the order given."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, min(len(kustomizations), os.cpu_count() or 1))) as pool:
        return list(pool.map(lambda k: render_kustomization(repo_root, k[0], defined_at=k[1], command=command),
                             kustomizations))


def _name(kustomization: Mapping[str, Any]) -> str:
    meta = kustomization.get("metadata")
    if isinstance(meta, Mapping) and isinstance(meta.get("name"), str):
        namespace = meta.get("namespace")
        return f"Kustomization {namespace}/{meta['name']}" if isinstance(namespace, str) else \
            f"Kustomization {meta['name']}"
    return "Kustomization"


def _problem(message: str, defined_at: Origin | None, path: tree.Path) -> Problem:
    if defined_at is None or defined_at.file is None:
        return Problem(message, None, None)
    found = defined_at.locate(path)
    return Problem(message, defined_at.file, found[0] if found is not None else None)


def _amendment(spec: Mapping[str, Any], directory: str, name: str) -> tuple[kustomize.Amendment, list[str]]:
    notes: list[str] = []

    def text(field: str) -> str | None:
        value = spec.get(field)
        return value if isinstance(value, str) else None

    patches = spec.get("patches")
    components = spec.get("components")
    for dropped in ("patchesStrategicMerge", "patchesJson6902"):
        if dropped in spec:
            notes.append(f"{name}: spec.{dropped} is not read (Flux's v1 API has only spec.patches)")
    resources = None if templates.kustomization_file(directory) is not None else tuple(_manifests(directory))
    if resources is not None and _ignore_files(directory):
        notes.append(f"{name}: .sourceignore files are not read: every manifest under spec.path is rendered "
                     f"(list the ones to lint in .overlay-lint.yaml)")
    return kustomize.Amendment(
        namespace=text("targetNamespace"), name_prefix=text("namePrefix"), name_suffix=text("nameSuffix"),
        patches=tuple(p for p in patches if isinstance(p, Mapping)) if isinstance(patches, list) else (),
        components=tuple(c for c in components if isinstance(c, str)) if isinstance(components, list) else (),
        resources=resources, unrestricted=True), notes


def _manifests(directory: str) -> list[str]:
    """What Flux's generated kustomization lists: every YAML file under `directory`, and each subdirectory
    holding a kustomization (not descended into), as `./` paths, in walk order."""
    out: list[str] = []
    for here, subdirs, names in os.walk(directory):
        subdirs[:] = sorted(d for d in subdirs if d not in _EXCLUDED_DIRS)
        if here != directory and templates.kustomization_file(here) is not None:
            out.append("./" + os.path.relpath(here, directory))
            subdirs[:] = []
            continue
        out += ["./" + os.path.relpath(os.path.join(here, n), directory) for n in sorted(names)
                if n.endswith((".yaml", ".yml")) and n not in _EXCLUDED_FILES]
    return out


def _ignore_files(directory: str) -> bool:
    return any(".sourceignore" in names for _, _, names in os.walk(directory))


def _substitution(spec: Mapping[str, Any], name: str) -> tuple[Any, list[str]]:
    post = spec.get("postBuild")
    if not isinstance(post, Mapping):
        return None, []
    given = post.get("substitute")
    variables = {k: str(v).replace("\n", "") for k, v in given.items()} if isinstance(given, Mapping) else {}
    bad = sorted(k for k in variables if not _VAR_NAME.match(str(k)))
    notes: list[str] = []
    partial = bool(post.get("substituteFrom"))
    if partial:
        notes.append(f"{name}: spec.postBuild.substituteFrom names ConfigMaps or Secrets of the cluster, not read "
                     f"here: the variables they define are left as written")

    def substitute(text: str) -> str:
        if bad:
            raise ValueError(f"var name {bad[0]!r} is invalid, must match {_VAR_NAME.pattern!r}")

        def one(match: re.Match[str]) -> str:
            if match.group(1) is None:
                return "${"
            var, operator, default = match.group(1), match.group(2), match.group(3)
            if var not in variables and partial:
                return match.group(0)
            # Flux substitutes leniently: an unknown variable counts as set and empty.
            value = variables.get(var, "")
            if operator in (":-", ":=") and value == "":
                return default or ""
            return value

        return _REFERENCE.sub(one, text)

    return substitute, notes


def _disabled(chunk: str) -> bool:
    if _SUBSTITUTE_KEY not in chunk:
        return False
    parsed = next(iter(tree.documents(chunk)), None)
    meta = parsed.value.get("metadata") if parsed is not None and isinstance(parsed.value, dict) else None
    if not isinstance(meta, dict):
        return False
    return any(isinstance(meta.get(f), dict) and meta[f].get(_SUBSTITUTE_KEY) == "disabled"
               for f in ("labels", "annotations"))
