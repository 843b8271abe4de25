"""kustomize builds whose every object knows the file it came from.

A build never touches the user's tree: the directory is mirrored in a scratch directory (its own files
copied, everything around it symbolic links to the real tree, so `../base` still resolves) and the mirror's
kustomization is the user's plus what the caller amends (Flux's `spec.patches`, `targetNamespace`...) plus
`buildMetadata: [originAnnotations, transformerAnnotations]`, kustomize's own record of the file each
object came from and the kustomizations whose patches touched it. Those annotations are read back and removed:
the objects judged are the ones kustomize renders without them."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from sources import templates, tree

ORIGIN = "config.kubernetes.io/origin"
TRANSFORMATIONS = "alpha.config.kubernetes.io/transformations"
_TRACING = ("originAnnotations", "transformerAnnotations")
_PATCHERS = frozenset({"PatchTransformer", "PatchStrategicMergeTransformer", "PatchJson6902Transformer"})


@dataclasses.dataclass(frozen=True)
class Amendment:
    """What a build adds to a directory's kustomization: Flux's fields of a Kustomization object, or nothing.
    `resources` set means there is no kustomization file there and this generated one stands in (Flux's)."""

    namespace: str | None = None
    name_prefix: str | None = None
    name_suffix: str | None = None
    patches: tuple[Mapping[str, Any], ...] = ()
    components: tuple[str, ...] = ()
    resources: tuple[str, ...] | None = None
    # Flux builds with LoadRestrictionsNone: files outside the kustomization's directory may be read.
    unrestricted: bool = False

    def key(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True, default=list)


@dataclasses.dataclass(frozen=True)
class Traced:
    """One rendered object with where it came from, as kustomize recorded it (paths from here)."""

    obj: Mapping[str, Any]
    plain: Mapping[tree.Path, str]
    # The resource file the object was read from; None when a generator made it.
    origin: str | None
    # The kustomization that configured the generator of a generated object.
    configured_in: str | None
    # The kustomization files whose patches were applied to it, in the order applied.
    patched_by: tuple[str, ...]


def build(directory: str, amendment: Amendment, command: Sequence[str], root: str | None = None) -> str:
    """The rendered YAML stream of `directory` with the amendment, with the tracing annotations in it. `root`
    is the tree references may reach (a repository's root; by default the git work tree holding `directory`)."""
    real = os.path.realpath(directory)
    reach = os.path.realpath(root or _top(directory))
    if os.path.relpath(real, reach).startswith(os.pardir):
        reach = os.sep
    scratch = tempfile.mkdtemp(prefix="overlay-lint-build-")
    try:
        mirrored = _mirror(real, reach, scratch)
        _write_kustomization(mirrored, amendment)
        restrictor = ["--load-restrictor", "LoadRestrictionsNone"] if amendment.unrestricted else []
        try:
            return _run([*command, *restrictor, mirrored], shown=f"{' '.join(command)} {directory}")
        except templates.RenderError as err:
            # kustomize names the paths it read: the user's, not the mirror's.
            mirror_root = os.path.join(scratch, "root")
            raise templates.RenderError(str(err).replace(mirror_root, reach.rstrip(os.sep))) from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _top(directory: str) -> str:
    """The git work tree holding `directory`, else the file system's root."""
    here = os.path.realpath(directory)
    while not os.path.exists(os.path.join(here, ".git")):
        parent = os.path.dirname(here)
        if parent == here:
            return here
        here = parent
    return here


def _run(argv: Sequence[str], shown: str) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=templates.RENDER_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise templates.RenderError(f"{shown}: {err}") from None
    if done.returncode != 0:
        said = next((line.strip() for line in done.stderr.splitlines() if line.strip()), f"exit {done.returncode}")
        raise templates.RenderError(f"{shown} failed: {said}")
    return done.stdout


def _mirror(real: str, root: str, scratch: str) -> str:
    """`real` copied under `scratch` at its path from `root`, each ancestor's other entries linked to the real
    ones: relative references out of the directory resolve as in the real tree, and kustomize's rule that a
    kustomization reads only files below it still holds for the copy."""
    parts = [] if real == root else os.path.relpath(real, root).split(os.sep)
    here, mirror = root, os.path.join(scratch, "root")
    os.mkdir(mirror)
    for part in parts:
        for entry in os.listdir(here):
            if entry != part:
                os.symlink(os.path.join(here, entry), os.path.join(mirror, entry))
        here, mirror = os.path.join(here, part), os.path.join(mirror, part)
        os.mkdir(mirror)
    os.rmdir(mirror)
    # Hard links where the file system allows (a repository's root may be the directory); git's own files are
    # never read by kustomize.
    shutil.copytree(real, mirror, symlinks=True, ignore=shutil.ignore_patterns(".git"), copy_function=_link)
    return mirror


def _link(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _write_kustomization(mirrored: str, amendment: Amendment) -> None:
    existing = templates.kustomization_file(mirrored)
    if amendment.resources is not None or existing is None:
        content: dict[str, Any] = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                                   "resources": list(amendment.resources or ())}
        target = os.path.join(mirrored, templates.KUSTOMIZATION_FILES[0])
    else:
        read = read_kustomization(existing)
        if read is None:
            # Not a kustomization kustomize can read either: left as written, for kustomize to say why.
            return
        content, target = read, existing
    if amendment.namespace is not None:
        content["namespace"] = amendment.namespace
    if amendment.name_prefix is not None:
        content["namePrefix"] = amendment.name_prefix
    if amendment.name_suffix is not None:
        content["nameSuffix"] = amendment.name_suffix
    if amendment.patches:
        content["patches"] = [*_list(content.get("patches")), *amendment.patches]
    if amendment.components:
        content["components"] = [*_list(content.get("components")), *amendment.components]
    content["buildMetadata"] = sorted({*_list(content.get("buildMetadata")), *_TRACING})
    # The mirror's file may be a hard link to the user's: it is replaced, never written through.
    with contextlib.suppress(FileNotFoundError):
        os.unlink(target)
    # JSON is YAML, and needs no YAML writer.
    with open(target, "x", encoding="utf-8") as handle:
        json.dump(content, handle)


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def read_kustomization(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError):
        return None
    parsed = next(iter(tree.documents(text)), None)
    return parsed.value if parsed is not None and isinstance(parsed.value, dict) else None


def traced(rendered: str, directory: str) -> list[Traced]:
    """The objects of a rendered stream of `directory` with their tracing annotations read and removed, the
    paths they name made paths from here."""
    out: list[Traced] = []

    def here(path: Any) -> str | None:
        return os.path.normpath(os.path.join(directory, path)) if isinstance(path, str) else None

    for parsed in tree.documents(rendered):
        if not isinstance(parsed.value, dict):
            continue
        obj = parsed.value
        meta = obj.get("metadata")
        annotations = meta.get("annotations") if isinstance(meta, dict) else None
        origin = transformations = None
        if isinstance(annotations, dict):
            origin = _yaml_value(annotations.get(ORIGIN))
            transformations = _yaml_value(annotations.get(TRANSFORMATIONS))
            annotations.pop(ORIGIN, None)
            annotations.pop(TRANSFORMATIONS, None)
            if not annotations and isinstance(meta, dict):
                del meta["annotations"]
        source = origin if isinstance(origin, dict) else {}
        steps = transformations if isinstance(transformations, list) else []
        patched = tuple(os.path.normpath(os.path.join(directory, t["configuredIn"])) for t in steps
                        if isinstance(t, dict) and isinstance(t.get("configuredIn"), str)
                        and isinstance(t.get("configuredBy"), dict) and t["configuredBy"].get("kind") in _PATCHERS)
        out.append(Traced(obj, parsed.plain, here(source.get("path")), here(source.get("configuredIn")), patched))
    return out


def _yaml_value(text: Any) -> Any:
    return _parsed_annotation(text) if isinstance(text, str) else None


@functools.lru_cache(maxsize=4096)
def _parsed_annotation(text: str) -> Any:
    """Parsed once per text: every object of a file carries the same origin, every object a kustomization patches
    the same transformations. The value is only read."""
    parsed = next(iter(tree.documents(text)), None)
    return None if parsed is None else parsed.value
