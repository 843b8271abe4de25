"""Which clusters a repository holds, found the way the repository itself says (docs/cli.md "Fleets").

The first source that applies decides: a `.overlay-lint.yaml` (or `--config FILE`) naming the clusters; Flux
Kustomizations of this repository's GitRepository (the directory holding a cluster's Kustomizations is that cluster);
Argo CD Applications (and the ApplicationSet generators whose values are in the repository); else each kustomization
root (one no other includes) is its own cluster; else everything given is one cluster. Discovery reads files only:
it renders nothing and judges nothing, so the hook can discover a whole repository and render one cluster.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from sources import files, positions, templates, tree
from sources.objects import FluxPath

CONFIG_FILE = ".overlay-lint.yaml"
FLUX_GROUP = "kustomize.toolkit.fluxcd.io"
ARGO_GROUP = "argoproj.io"
# The GitRepository `flux bootstrap` writes (into gotk-sync.yaml) and points the cluster's Kustomizations at.
FLUX_SYNC_FILE = "gotk-sync.yaml"
FLUX_DEFAULT_SOURCE = "flux-system"
_CONFIG_KEYS = frozenset({"name", "paths", "region", "catalog", "crd", "karpenterMetrics"})
# Argo CD's two template syntaxes: fasttemplate `{{path.basename}}` and Go templates `{{ .path.basename }}`.
_PARAMETER = re.compile(r"\{\{\s*\.?([\w.\[\]-]+)\s*\}\}")

_COMPONENT = re.compile(r"^kind:\s*Component\s*$", re.MULTILINE)
# A document (or JSON object) of kind NodeOverlay or NodePool; a CRD's `names.kind` is indented and not one.
_OUR_KINDS = re.compile(r"^kind:\s*[\"']?(?:NodeOverlay|NodePool)\b|\"kind\"\s*:\s*\"(?:NodeOverlay|NodePool)\"",
                        re.MULTILINE)

CONFIG, FLUX, ARGOCD, KUSTOMIZATION, ALL = "config", "flux", "argocd", "kustomization", "all"


class ConfigError(Exception):
    """A `.overlay-lint.yaml` that cannot be read at all: a usage error."""


@dataclasses.dataclass(frozen=True)
class Origin:
    """Where a cluster was declared."""

    how: str
    file: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        what = {CONFIG: "config", FLUX: "Flux Kustomization", ARGOCD: "Argo CD Application",
                KUSTOMIZATION: "kustomization root", ALL: "all inputs"}[self.how]
        if self.file is None:
            return what
        return f"{what} at {self.file}" + (f":{self.line}" if self.line is not None else "")


@dataclasses.dataclass(frozen=True)
class Cluster:
    """One cluster of a repository: where it is declared, the paths read for it and its options."""

    name: str
    origins: tuple[Origin, ...]
    # What is read for it, as the loader reads paths: a directory with a kustomization is rendered.
    paths: tuple[str, ...]
    region: str | None = None
    catalog: str | None = None
    crd: str | None = None
    karpenter_metrics: str | None = None
    # Per path, the directories and files its rendering reads (kustomizations it includes, transitively).
    reach: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # The paths Flux Kustomizations apply, by real path: rendered as Flux renders them.
    flux_paths: tuple[tuple[str, FluxPath], ...] = ()

    @property
    def origin(self) -> Origin:
        return self.origins[0]

    def holders(self, path: str) -> list[str]:
        """The cluster's paths whose reading reads `path`."""
        real = os.path.realpath(path)
        return [p for p, reached in self.reach if any(_within(real, r) for r in reached)]


@dataclasses.dataclass(frozen=True)
class Problem:
    """A discovery error: a file and line, and what is wrong there."""

    file: str
    line: int
    message: str
    cluster: str | None = None


@dataclasses.dataclass(frozen=True)
class Fleet:
    """The clusters discovery found, how, and the files none reads."""

    how: str
    clusters: tuple[Cluster, ...]
    # Files that may hold our kinds and that no cluster reads.
    unclaimed: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def split(self) -> bool:
        """Whether clusters are judged apart (and output names them): one cluster found on its own is judged, and
        shown, as today."""
        return self.how == CONFIG or len(self.clusters) > 1 or bool(self.problems)

    def holding(self, path: str) -> list[tuple[Cluster, list[str]]]:
        """The clusters that read `path`, each with the paths of it that read it."""
        return [(c, held) for c in self.clusters if (held := c.holders(path))]


def _within(real: str, reached: str) -> bool:
    return real == reached or real.startswith(reached.rstrip(os.sep) + os.sep)


@dataclasses.dataclass(frozen=True)
class _Doc:
    """A document read during discovery, with the positions of its keys."""

    obj: Mapping[str, Any]
    file: str
    positions: Mapping[tree.Path, tree.Position]

    def line(self, *path: str | int) -> int:
        for end in range(len(path), -1, -1):
            found = self.positions.get(path[:end])
            if found is not None:
                return found[0]
        return 1


def discover(roots: Sequence[str], config: str | None = None) -> Fleet:
    """The clusters of what is linted. Discovery applies to one directory (the repository's root, where Flux and
    Argo CD paths start) or a config; anything else is one cluster, as before."""
    directories = [r for r in roots if r != files.STDIN and os.path.isdir(r)]
    if config is None and len(roots) == 1 and directories:
        beside = os.path.join(directories[0], CONFIG_FILE)
        config = beside if os.path.isfile(beside) else None
    if config is not None:
        read = _read_config(config)
        if "clusters" in read.obj:
            return _claimed(_from_config(read), directories)
        settings: Mapping[str, Any] = read.obj
    else:
        settings = {}
    if len(roots) != 1 or len(directories) != 1:
        return Fleet(ALL, (_everything(roots),))
    root = directories[0]
    docs = list(_documents(root))
    for how, found in ((FLUX, _flux(root, docs, settings)), (ARGOCD, _argocd(root, docs))):
        if found is not None:
            clusters, problems, notes = found
            kept, errors = _unique(clusters, problems)
            return _claimed(Fleet(how, kept, problems=errors, notes=tuple(notes)), [root])
    kustomized = _kustomization_roots(root)
    if kustomized is not None and (len(kustomized[0]) > 1 or kustomized[1]):
        kept, errors = _unique(*kustomized)
        return _claimed(Fleet(KUSTOMIZATION, kept, problems=errors), [root])
    return Fleet(ALL, (_everything(roots),))


def _everything(roots: Sequence[str]) -> Cluster:
    return Cluster("all", (Origin(ALL),), tuple(roots),
                   reach=tuple((r, (os.path.realpath(r),)) for r in roots if r != files.STDIN))


def _read_config(path: str) -> _Doc:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"--config {path}: {getattr(err, 'strerror', None) or err}") from None
    parsed = next(iter(tree.documents(text)), None)
    if parsed is not None and parsed.problem is not None:
        line = parsed.problem.position[0]
        raise ConfigError(f"{path}:{line}: {parsed.problem.message}")
    if parsed is None or parsed.value is None:
        return _Doc({}, path, {})
    if not isinstance(parsed.value, Mapping):
        raise ConfigError(f"{path}: a mapping with `clusters: [{{name, paths}}]` expected")
    return _Doc(parsed.value, path, parsed.positions)


def _from_config(doc: _Doc) -> Fleet:
    path, base = doc.file, os.path.dirname(doc.file)
    entries = doc.obj["clusters"]
    if not isinstance(entries, list):
        raise ConfigError(f"{path}:{doc.line('clusters')}: clusters must be a list of {{name, paths}}")
    clusters, problems = [], []
    for i, entry in enumerate(entries):
        where = doc.line("clusters", i)
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str) or not entry["name"]:
            raise ConfigError(f"{path}:{where}: each cluster needs a name (a string) and paths")
        unknown = sorted(set(entry) - _CONFIG_KEYS)
        if unknown:
            raise ConfigError(f"{path}:{where}: unknown field(s) {', '.join(unknown)} (known: "
                              f"{', '.join(sorted(_CONFIG_KEYS))})")
        raw = entry.get("paths")
        if not isinstance(raw, list) or not raw or not all(isinstance(p, str) and p for p in raw):
            raise ConfigError(f"{path}:{where}: cluster {entry['name']!r}: paths must be a list of paths")
        paths = []
        for j, p in enumerate(raw):
            full = os.path.normpath(os.path.join(base, p))
            if os.path.exists(full):
                paths.append(full)
            else:
                problems.append(Problem(path, doc.line("clusters", i, "paths", j),
                                        f"cluster {entry['name']!r}: path {p} does not exist", entry["name"]))
        clusters.append(Cluster(entry["name"], (Origin(CONFIG, path, where),), tuple(paths),
                                region=_text(entry.get("region")), catalog=_beside(base, entry.get("catalog")),
                                crd=_beside(base, entry.get("crd"), keep=("dra",)),
                                karpenter_metrics=_text(entry.get("karpenterMetrics"))))
    kept, found = _unique(clusters, problems)
    return Fleet(CONFIG, kept, problems=found)


def _beside(base: str, value: Any, keep: Sequence[str] = ()) -> str | None:
    """A file the config names, relative to it as its paths are; `keep`: names that are not files (`crd: dra`)."""
    text = _text(value)
    return text if text is None or text in keep else os.path.normpath(os.path.join(base, text))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _unique(clusters: Iterable[Cluster], problems: Sequence[Problem]) -> tuple[tuple[Cluster, ...],
                                                                                tuple[Problem, ...]]:
    """Two clusters of one name are an error at the second; the first is judged."""
    kept: dict[str, Cluster] = {}
    out = list(problems)
    for c in clusters:
        if c.name in kept:
            first = kept[c.name].origin
            out.append(Problem(c.origin.file or "", c.origin.line or 1,
                               f"a second cluster named {c.name!r} (the first: {first}); this one is not judged",
                               c.name))
        else:
            kept[c.name] = c
    return tuple(kept.values()), tuple(out)


def _claimed(found: Fleet, roots: Sequence[str]) -> Fleet:
    """The fleet with each cluster's reach and the files under the roots that no cluster reads."""
    clusters = tuple(dataclasses.replace(c, reach=tuple((p, _reach(p)) for p in c.paths)) for c in found.clusters)
    reached = [r for c in clusters for _, rs in c.reach for r in rs]
    unclaimed = []
    for root in roots:
        for path in _manifests(root):
            real = os.path.realpath(path)
            if not any(_within(real, r) for r in reached) and may_matter(path):
                unclaimed.append(path)
    return dataclasses.replace(found, clusters=clusters, unclaimed=tuple(unclaimed))


def _read(path: str) -> str | None:
    """A file's text as the loader reads a walked one: a FIFO or device is never opened to block or run on."""
    try:
        return files.read(files.Source(path, path, walked=True), files.DEFAULT_MAX_BYTES).text
    except files.InputError:
        return None


def may_matter(path: str) -> bool:
    """Whether the file may hold a NodeOverlay, NodePool or InstanceType (the loader's own test)."""
    from sources import objects  # the loader, only to share its test of what can hold our kinds

    text = _read(path)
    return text is not None and not objects.cannot_matter(text)


def _manifests(root: str) -> Iterator[str]:
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in (".git", ".hg", ".svn"))
        for name in sorted(names):
            if name.lower().endswith(files.SUFFIXES) and name != CONFIG_FILE:
                yield os.path.normpath(os.path.join(directory, name))


def _reach(path: str) -> tuple[str, ...]:
    """What reading `path` reads: the path itself and, transitively, what its kustomizations include."""
    out: list[str] = []
    pending = [path]
    while pending:
        current = os.path.realpath(pending.pop())
        if current in out:
            continue
        out.append(current)
        if os.path.isdir(current):
            directories = [current] if templates.kustomization_file(current) else _kustomization_dirs(current)
            for directory in directories:
                pending += [os.path.join(directory, ref) for ref in templates.references(directory)
                            if not templates.is_remote(ref)]
    return tuple(out)


def _kustomization_dirs(root: str) -> list[str]:
    out = []
    for directory, subdirs, _ in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in (".git", ".hg", ".svn"))
        if templates.kustomization_file(directory) is not None:
            out.append(os.path.normpath(directory))
    return out


def _documents(root: str) -> Iterator[_Doc]:
    """The Flux and Argo CD objects under `root` (a file that cannot name them is not parsed)."""
    for path in _manifests(root):
        text = _read(path)
        if text is None:
            continue
        # ApplicationSet templates hold `{{ }}` in YAML strings: they are read as YAML, not skipped as templates.
        if FLUX_GROUP not in text and ARGO_GROUP not in text and "GitRepository" not in text:
            continue
        for parsed in tree.documents(text):
            if parsed.problem is None and isinstance(parsed.value, Mapping):
                yield _Doc(parsed.value, path, parsed.positions)


def _group(obj: Mapping[str, Any]) -> str:
    api = obj.get("apiVersion")
    return api.split("/", 1)[0] if isinstance(api, str) else ""


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) else "?"


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


Found = tuple[list[Cluster], list[Problem], list[str]]


def _flux(root: str, docs: Sequence[_Doc], settings: Mapping[str, Any]) -> Found | None:
    """Flux Kustomizations whose sourceRef is this repository's GitRepository: the ones gotk-sync.yaml declares, any
    the config names under `gitRepositories`, else `flux-system`."""
    sources = {_name(d.obj) for d in docs
               if d.obj.get("kind") == "GitRepository" and os.path.basename(d.file) == FLUX_SYNC_FILE}
    named = settings.get("gitRepositories")
    sources |= {n for n in named if isinstance(n, str)} if isinstance(named, list) else set()
    sources = sources or {FLUX_DEFAULT_SOURCE}
    ours = []
    for d in docs:
        if d.obj.get("kind") != "Kustomization" or _group(d.obj) != FLUX_GROUP:
            continue
        ref = _spec(d.obj).get("sourceRef")
        if isinstance(ref, Mapping) and ref.get("kind", "GitRepository") == "GitRepository" \
                and ref.get("name") in sources:
            ours.append(d)
    if not ours:
        return None
    by_dir: dict[str, list[Cluster]] = {}
    problems: list[Problem] = []
    notes: list[str] = []
    homes = {d.file: _home(d.file) for d in ours}
    tops = _tops(root, ours, homes)
    for d in ours:
        home = homes[d.file]
        name = os.path.basename(home)
        spec = _spec(d.obj)
        where = Origin(FLUX, d.file, d.line())
        raw = spec.get("path", "")
        path = os.path.normpath(os.path.join(tops.get(home, root), raw if isinstance(raw, str) else ""))
        if not os.path.isabs(raw if isinstance(raw, str) else "") and not os.path.isabs(root):
            path = os.path.relpath(path)
        paths: tuple[str, ...] = ()
        if not isinstance(raw, str) or not os.path.isdir(path):
            problems.append(Problem(d.file, d.line("spec", "path"),
                                    f"Flux Kustomization {_name(d.obj)}: spec.path {raw} is not a directory of "
                                    "the repository", name))
        elif not _within(os.path.realpath(home), os.path.realpath(path)):
            # The sync Kustomization applies the cluster's own directory, which holds the Flux objects.
            paths = (path,)
        rendered = tuple((os.path.realpath(p), FluxPath(tops.get(home, root), d.obj,
                                                        positions.Origin(d.file, 0, d.positions))) for p in paths)
        by_dir.setdefault(home, []).append(Cluster(name, (where,), paths, flux_paths=rendered))
    clusters = [Cluster(parts[0].name, tuple(o for p in parts for o in p.origins),
                        tuple(dict.fromkeys(path for p in parts for path in p.paths)),
                        flux_paths=tuple(f for p in parts for f in p.flux_paths))
                for parts in by_dir.values()]
    return clusters, problems, notes


def _home(file: str) -> str:
    """The cluster directory of a Flux Kustomization: the one holding it, or above `flux-system/`, where
    `flux bootstrap` writes the cluster's own sync."""
    home = os.path.dirname(os.path.abspath(file))
    return os.path.dirname(home) if os.path.basename(home) == FLUX_DEFAULT_SOURCE else home


def _tops(root: str, ours: Sequence[_Doc], homes: Mapping[str, str]) -> dict[str, str]:
    """Per cluster directory, the repository root its paths start from: where the sync Kustomization's own path
    (`./clusters/production`) leads back to the cluster directory (a repository inside the linted tree, such as a
    test fixture, has its own), else the linted root."""
    out = {}
    for d in ours:
        raw = _spec(d.obj).get("path")
        if not isinstance(raw, str):
            continue
        tail = os.path.normpath(raw.lstrip("./") or ".")
        home = homes[d.file]
        if tail != "." and home.endswith(os.sep + tail):
            out[home] = home[:-len(tail) - 1]
    return {h: t for h, t in out.items() if _within(os.path.realpath(t), os.path.realpath(root))}


def _argocd(root: str, docs: Sequence[_Doc]) -> Found | None:
    apps: list[tuple[_Doc, Mapping[str, Any], tuple[str | int, ...]]] = []
    notes: list[str] = []
    for d in docs:
        if _group(d.obj) != ARGO_GROUP:
            continue
        if d.obj.get("kind") == "Application":
            apps.append((d, _spec(d.obj), ("spec",)))
        elif d.obj.get("kind") == "ApplicationSet":
            expanded, said = _expand(root, d)
            apps += expanded
            notes += said
    if not apps and not notes:
        return None
    by_name: dict[str, list[Cluster]] = {}
    problems: list[Problem] = []
    for d, spec, at in apps:
        destination = spec.get("destination")
        destination = destination if isinstance(destination, Mapping) else {}
        name = _text(destination.get("name")) or _text(destination.get("server")) or "in-cluster"
        sources = [(spec.get("source"), (*at, "source"))]
        listed = spec.get("sources")
        sources += [(s, (*at, "sources", i)) for i, s in enumerate(listed)] if isinstance(listed, list) else []
        paths = []
        for source, where in sources:
            if not isinstance(source, Mapping) or "path" not in source:
                continue
            raw = source["path"]
            path = os.path.normpath(os.path.join(root, raw if isinstance(raw, str) else ""))
            if isinstance(raw, str) and os.path.exists(path):
                paths.append(path)
            else:
                problems.append(Problem(d.file, d.line(*where, "path"),
                                        f"Argo CD {d.obj.get('kind')} {_name(d.obj)}: path {raw} is not in the "
                                        "repository", name))
        by_name.setdefault(name, []).append(Cluster(name, (Origin(ARGOCD, d.file, d.line()),), tuple(paths)))
    clusters = [Cluster(name, tuple(o for p in parts for o in p.origins),
                        tuple(dict.fromkeys(path for p in parts for path in p.paths)))
                for name, parts in by_name.items()]
    return clusters, problems, notes


def _expand(root: str, d: _Doc) -> tuple[list[tuple[_Doc, Mapping[str, Any], tuple[str | int, ...]]], list[str]]:
    """An ApplicationSet's Applications, for the generators whose values the repository holds: `list` elements,
    `git` directories (globs over the repository) and `clusters` with listed values; others get a note."""
    spec = _spec(d.obj)
    template = spec.get("template")
    template_spec = template.get("spec") if isinstance(template, Mapping) else None
    generators = spec.get("generators")
    if not isinstance(template_spec, Mapping) or not isinstance(generators, list):
        return [], [f"{d.file}:{d.line()}: ApplicationSet {_name(d.obj)}: no template or generators read"]
    out: list[tuple[_Doc, Mapping[str, Any], tuple[str | int, ...]]] = []
    notes = []
    for i, generator in enumerate(generators):
        params, why = _parameters(root, generator)
        if why is not None:
            notes.append(f"{d.file}:{d.line('spec', 'generators', i)}: ApplicationSet {_name(d.obj)}: {why}; "
                         f"name its clusters in {CONFIG_FILE}")
        for values in params:
            out.append((d, _substitute(template_spec, values), ("spec", "template", "spec")))
    return out, notes


def _parameters(root: str, generator: Any) -> tuple[list[Mapping[str, str]], str | None]:
    if not isinstance(generator, Mapping):
        return [], "a generator that is not a mapping"
    if isinstance(generator.get("list"), Mapping):
        elements = generator["list"].get("elements")
        if isinstance(elements, list) and all(isinstance(e, Mapping) for e in elements):
            return [{str(k): str(v) for k, v in e.items()} for e in elements], None
        return [], "a list generator without literal elements"
    if isinstance(generator.get("clusters"), Mapping):
        values = generator["clusters"].get("values")
        if isinstance(values, Mapping) and isinstance(values.get("name"), str):
            return [{f"values.{k}": str(v) for k, v in values.items()} | {"name": values["name"]}], None
        return [], "a clusters generator reads the clusters Argo CD knows, which the repository does not hold"
    git = generator.get("git")
    if isinstance(git, Mapping) and isinstance(git.get("directories"), list):
        return _directories(root, git["directories"]), None
    kinds = ", ".join(sorted(str(k) for k in generator)) or "empty"
    return [], f"a {kinds} generator, whose values are not in the repository"


def _directories(root: str, patterns: Sequence[Any]) -> list[Mapping[str, str]]:
    include = [p["path"] for p in patterns if isinstance(p, Mapping) and isinstance(p.get("path"), str)
               and not p.get("exclude")]
    exclude = [p["path"] for p in patterns if isinstance(p, Mapping) and isinstance(p.get("path"), str)
               and p.get("exclude")]
    found: list[Mapping[str, str]] = []
    for directory, subdirs, _ in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in (".git", ".hg", ".svn"))
        rel = os.path.relpath(directory, root).replace(os.sep, "/")
        if rel != "." and any(fnmatch.fnmatchcase(rel, p) for p in include) \
                and not any(fnmatch.fnmatchcase(rel, p) for p in exclude):
            parts = rel.split("/")
            found.append({"path": rel, "path.path": rel, "path.basename": parts[-1],
                          "path.basenameNormalized": re.sub(r"[^a-z0-9-]", "-", parts[-1].lower()),
                          **{f"path[{n}]": part for n, part in enumerate(parts)}})
    return found


def _substitute(value: Any, params: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return _PARAMETER.sub(lambda m: params.get(m.group(1), m.group(0)), value)
    if isinstance(value, Mapping):
        return {k: _substitute(v, params) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, params) for v in value]
    return value


def _kustomization_roots(root: str) -> tuple[list[Cluster], list[Problem]] | None:
    """Each kustomization no other includes, as its own cluster (named by its directory, or its path from the root
    where two share a name); a cycle of kustomizations is an error at each file on it."""
    directories = [d for d in _kustomization_dirs(root) if not _component(d)]
    if not directories:
        return None
    problems = [Problem(templates.kustomization_file(d) or d, 1, f"kustomization cycle: {' -> '.join(cycle)}")
                for d, cycle in _cycles(root, directories)]
    # Only roots that render NodeOverlays or NodePools are apply sets of ours (a webhook's base is not a cluster).
    found = [d for d in templates.roots(directories) if any(_names_our_kinds(p) for p in _files(_reach(d)))]
    names = [os.path.basename(os.path.abspath(d)) for d in found]
    clusters = []
    for directory, name in zip(found, names, strict=True):
        label = name if names.count(name) == 1 else os.path.relpath(directory, root)
        clusters.append(Cluster(label, (Origin(KUSTOMIZATION, templates.kustomization_file(directory), 1),),
                                (directory,)))
    return clusters, problems


def _component(directory: str) -> bool:
    """A kustomize Component is included by kustomizations, never applied on its own."""
    path = templates.kustomization_file(directory)
    text = _read(path) if path is not None else None
    return text is not None and _COMPONENT.search(text) is not None


def _names_our_kinds(path: str) -> bool:
    text = _read(path)
    return text is not None and _OUR_KINDS.search(text) is not None


def _files(reached: Iterable[str]) -> Iterator[str]:
    for path in reached:
        if os.path.isfile(path):
            yield path
        elif os.path.isdir(path):
            yield from _manifests(path)


def _cycles(root: str, directories: Sequence[str]) -> list[tuple[str, list[str]]]:
    """Kustomization directories on a cycle of includes, with the cycle as paths from the root."""
    edges = {os.path.realpath(d): [os.path.realpath(os.path.join(d, r)) for r in templates.references(d)
                                   if not templates.is_remote(r)] for d in directories}
    out = []
    for start in edges:
        path, seen = [start], {start}
        stack = [(start, iter(edges[start]))]
        while stack:
            _, following = stack[-1]
            step = next(following, None)
            if step is None:
                stack.pop()
                path.pop()
                continue
            if step == start:
                out.append((start, [os.path.relpath(p, root) for p in [*path, start]]))
                break
            if step in edges and step not in seen:
                seen.add(step)
                path.append(step)
                stack.append((step, iter(edges[step])))
    return out
