"""Input files to core Documents, with a handle table that maps findings back to file positions.

Everything that can go wrong with the content of an input becomes a `parse-error` finding, whatever
type any field holds. A path met in a directory walk that cannot be read becomes an
`unreadable-input` finding (the run then exits 2); only inputs named on the command line that
cannot be read raise InputError.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import typing
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, BinaryIO, TypeVar

from simulation import findings
from simulation.evaluate import Document
from simulation.semantics import model
from simulation.validation import crds
from sources import files, shapes, templates, tree
from sources.positions import Origin, Table, split_items

if typing.TYPE_CHECKING:
    # Rendering (processes, threads, hashing, scratch trees) is imported where a kustomization is met: not on a
    # one-file check's path.
    from concurrent.futures import Future

    from sources import flux, kustomize, origins, rendercache

RELEVANT_KINDS = frozenset({model.NODEOVERLAY, model.NODEPOOL, model.INSTANCETYPE})
# `kubectl get -o yaml` writes `kind: List`; the API itself answers with typed lists.
LIST_KINDS = frozenset({"List", *(f"{k}List" for k in RELEVANT_KINDS)})
FILE_KIND = "File"
T = TypeVar("T")


@dataclasses.dataclass
class Loaded:
    documents: list[Document] = dataclasses.field(default_factory=list)
    # InstanceType documents: the catalog, not objects to check.
    instance_types: list[tuple[Mapping[str, Any], int]] = dataclasses.field(default_factory=list)
    problems: list[findings.Finding] = dataclasses.field(default_factory=list)
    ignored: int = 0
    skipped: int = 0
    # Paths found in a directory walk that could not be read: the run exits 2.
    unreadable: int = 0
    # What the reader says of files it did not lint (a Helm template, a kustomization).
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def objects(self) -> int:
        return len(self.documents) + len(self.instance_types)

    def extend(self, other: Loaded) -> None:
        self.documents += other.documents
        self.instance_types += other.instance_types
        self.problems += other.problems
        self.ignored += other.ignored
        self.skipped += other.skipped
        self.unreadable += other.unreadable
        self.notes += other.notes


def cannot_matter(text: str) -> bool:
    """True when no document in `text` can be one of our kinds: none of their names occurs, and
    there is no backslash (a YAML or JSON escape could spell a kind without its letters)."""
    return "\\" not in text and not any(kind in text for kind in RELEVANT_KINDS)


def is_relevant(obj: Mapping[str, Any]) -> bool:
    """One of our kinds, in the karpenter.sh group. Another group's `NodePool` is someone
    else's object; a missing or malformed apiVersion is left for the schema check to report."""
    if model.kind_of(obj) not in RELEVANT_KINDS:
        return False
    api = obj.get("apiVersion")
    return not isinstance(api, str) or "/" not in api or api.split("/", 1)[0] == crds.GROUP


@dataclasses.dataclass(frozen=True)
class FluxPath:
    """A Flux Kustomization of the repository at `repo_root`, and where it is written."""

    repo_root: str
    kustomization: Mapping[str, Any]
    defined_at: Origin


class Loader:
    def __init__(self, table: Table, max_bytes: int = files.DEFAULT_MAX_BYTES,
                 stdin: BinaryIO | None = None, flux_paths: Mapping[str, FluxPath] | None = None) -> None:
        self.table = table
        # Directories a Flux Kustomization applies (real paths): rendered as Flux renders them (sources/fleet.py).
        self.flux_paths = flux_paths or {}
        self.max_bytes = max_bytes
        self.stdin = stdin
        self._stdin_used = False
        # The files read so far (real paths): a walk of the rest of a repository (`--against`) leaves them out.
        self.read: set[str] = set()
        self._locator: origins.Locator | None = None

    def load(self, args: Sequence[str], candidate: bool = True, *, rest: bool = False) -> Loaded:
        """`rest`: the files of `args` not read already (the rest of a repository)."""
        out = Loaded()
        plain = []
        applied: list[FluxPath] = []
        for arg in args:
            real = os.path.realpath(arg) if arg != files.STDIN else ""
            given = self.flux_paths.get(real)
            if given is None:
                plain.append(arg)
            elif not (rest and (real in self.read or self._holds_read(real))):
                self.read.add(real)
                applied.append(given)
        if applied:
            out.extend(self._flux(applied, candidate))
        sources = list(files.discover(plain))
        ahead = self._render_ahead([s for s in sources if s.kustomization and s.path is not None and not (
            rest and self._holds_read(os.path.realpath(s.path)))])
        # The files share the fast YAML reader's parse trees, let go when the last is read.
        with tree.reading():
            for source in sources:
                if source.path is None:
                    if self._stdin_used:
                        raise files.InputError("'-' (stdin) can be given only once")
                    self._stdin_used = True
                else:
                    real = os.path.realpath(source.path)
                    if rest and (real in self.read or (source.kustomization and self._holds_read(real))):
                        continue
                    self.read.add(real)
                if source.kustomization:
                    out.extend(self._kustomization(source, candidate, ahead.get(source.name)))
                    continue
                out.extend(self.load_text(files.read(source, self.max_bytes, self.stdin), candidate))
        return out

    def _flux(self, applied: Sequence[FluxPath], candidate: bool) -> Loaded:
        """Flux paths, rendered at once (each its own kustomize process), read in the order given."""
        from sources import flux

        out = Loaded()
        for root in dict.fromkeys(f.repo_root for f in applied):
            group = [(f.kustomization, f.defined_at) for f in applied if f.repo_root == root]
            for rendered in flux.render_all(root, group):
                out.extend(self.load_rendered(rendered, candidate))
        return out

    def _holds_read(self, directory: str) -> bool:
        """Whether a file read already lies in this directory: the rest of a repository leaves out a
        kustomization that renders a candidate (its copy would be the candidate's old version, or the same)."""
        inside = directory.rstrip(os.sep) + os.sep
        return any(path.startswith(inside) for path in self.read)

    def _render_ahead(self, sources: Sequence[files.Source]) -> dict[str, Future[rendercache.Render]]:
        """Several kustomizations are rendered at once, each its own kustomize process; results are read in the
        walk's order."""
        command = templates.renderer()
        if len(sources) < 2 or command is None:
            return {}
        from concurrent.futures import ThreadPoolExecutor

        from sources import kustomize, rendercache

        pool = ThreadPoolExecutor(max_workers=min(len(sources), os.cpu_count() or 1))
        try:
            return {s.name: pool.submit(rendercache.build, s.name, kustomize.Amendment(), command,
                                        functools.partial(kustomize.traced, directory=s.name)) for s in sources}
        finally:
            pool.shutdown(wait=False)

    def _kustomization(self, source: files.Source, candidate: bool,
                       ahead: Future[rendercache.Render] | None = None) -> Loaded:
        from sources import kustomize, origins, rendercache

        command = templates.renderer()
        if command is None:
            return Loaded(notes=[templates.unrendered_note(source.name)])
        try:
            render = ahead.result() if ahead is not None else rendercache.build(
                source.name, kustomize.Amendment(), command, functools.partial(kustomize.traced, directory=source.name))
        except templates.RenderError as err:
            out = Loaded()
            out.problems.append(self._problem(origins.kustomization_of(source.name), 0, str(err), (1, 1)))
            return out
        return self.load_traced(render.documents, source.name, candidate)

    def load_rendered(self, rendered: flux.Rendered, candidate: bool | Collection[str] = True) -> Loaded:
        """What a Flux Kustomization renders: its objects at their files, its notes, and what kept it from
        rendering as a `parse-error` at the Kustomization's field. `candidate` as for `load_traced`."""
        out = self.load_traced(rendered.documents, rendered.directory, candidate, rendered.patches)
        out.notes += rendered.notes
        for error in rendered.errors:
            name = error.file or rendered.directory
            out.problems.append(self._problem(name, 0, error.message, (error.line or 1, 1)))
        return out

    def load_traced(self, documents: Sequence[kustomize.Traced], directory: str,
                    candidate: bool | Collection[str] = True,
                    extra: Mapping[str, Sequence[origins.Patch]] | None = None) -> Loaded:
        """Objects kustomize rendered from `directory`, each reported at the file (and the patch) it came from.
        `candidate`: all of them or none, or (files) those whose resource or a patch of theirs is one of these
        files (a hook's staged files). `extra`: patches the directory's kustomization gained outside its file (a
        Flux Kustomization's)."""
        from sources import origins

        out = Loaded()
        fallback = origins.kustomization_of(directory)
        self._locator = self._locator or origins.Locator()
        staged = None if isinstance(candidate, bool) else {os.path.realpath(f) for f in candidate}
        for traced in documents:
            origin = self._locator.origin(traced, fallback, extra)
            made_of = {origin.file or fallback, *(p for p, _ in origin.patched.values())}
            chosen = candidate if staged is None else any(os.path.realpath(f) in staged for f in made_of)
            self._object(out, origin.file or fallback, traced.obj, origin, traced.plain, bool(chosen))
        return out

    def load_text(self, text: files.Text, candidate: bool = True) -> Loaded:
        out = Loaded()
        name = text.source.name
        if text.unreadable:
            handle = self.table.add(Origin(name, 0))
            out.problems.append(findings.make(
                "unreadable-input", findings.ObjectRef(FILE_KIND, name), (),
                f"{name}: {text.problem or 'cannot be read'}; the rest of the input is checked", source=handle))
            out.unreadable += 1
            return out
        if text.text is None:
            out.problems.append(self._problem(name, 0, text.problem or "unreadable", text.position))
            return out
        # A directory walk meets every YAML file of a repository (CI workflows, Helm templates...);
        # one that cannot hold our kinds is not parsed, so unrelated broken files stay quiet and a
        # walk over thousands of them stays fast. Files named explicitly are always parsed.
        if text.source.walked and cannot_matter(text.text):
            out.skipped += 1
            return out
        if templates.is_template(text.text):
            out.notes.append(templates.template_note(name))
            return out
        for parsed in tree.documents(text.text):
            if parsed.problem is not None:
                out.problems.append(self._problem(name, parsed.index, parsed.problem.message,
                                                  parsed.problem.position))
            elif parsed.value is not None:
                self._document(out, name, parsed, candidate)
        return out

    def add_objects(self, objects: Iterable[Mapping[str, Any]], candidate: bool = False) -> Loaded:
        """Objects with no file behind them (read from a cluster): findings get no position."""
        out = Loaded()
        for i, obj in enumerate(objects):
            if is_relevant(obj) and model.name_of(obj):
                handle = self.table.add(Origin(None, i))
                self._keep(out, obj, handle, candidate)
            else:
                out.ignored += 1
        return out

    def _document(self, out: Loaded, name: str, parsed: tree.Parsed, candidate: bool) -> None:
        obj = parsed.value
        # Asked only for a problem: a position may cost a second reading of the document (`fastyaml`).
        if not isinstance(obj, dict):
            where = parsed.positions.get((), (1, 1))
            out.problems.append(self._problem(
                name, parsed.index, f"a document must be a mapping (an object), not {_describe(obj)}", where))
            return
        if model.kind_of(obj) in LIST_KINDS and "items" in obj:
            items = obj["items"]
            if not isinstance(items, list):
                where = parsed.positions.get(("items",)) or parsed.positions.get((), (1, 1))
                out.problems.append(self._problem(
                    name, parsed.index, f"the items of a List must be a list, not {_describe(items)}", where))
                return
            item_positions, item_plain = _items(parsed.positions, len(items)), _items(parsed.plain, len(items))
            for i, item in enumerate(items):
                origin = Origin(name, parsed.index, item_positions[i], item=i)
                self._object(out, name, item, origin, item_plain[i], candidate)
            return
        self._object(out, name, obj, Origin(name, parsed.index, parsed.positions), parsed.plain, candidate)

    def _object(self, out: Loaded, name: str, obj: Any, origin: Origin, plain: Mapping[tree.Path, str],
                candidate: bool) -> None:
        what = f"List item {origin.item}" if origin.item is not None else "the document"
        if not isinstance(obj, dict):
            self._wrong(out, name, origin, FILE_KIND, (), f"{what} must be a mapping (an object), "
                                                         f"not {_describe(obj)}")
            return
        # Without a string kind a document cannot be told apart from any other: it is reported
        # rather than guessed at. The apiVersion of other kinds is none of our business.
        fields = ("kind", "apiVersion") if model.kind_of(obj) in RELEVANT_KINDS else ("kind",)
        for field in fields:
            if field in obj and not isinstance(obj[field], str):
                self._wrong(out, name, origin, FILE_KIND, (field,),
                            f"{field} must be a string, not {_describe(obj[field])}; {what} is not checked")
                return
        if not is_relevant(obj):
            out.ignored += 1
            return
        kind = model.kind_of(obj) or FILE_KIND
        meta = obj.get("metadata")
        if meta is not None and not isinstance(meta, dict):
            self._wrong(out, name, origin, kind, ("metadata",),
                        f"{kind} metadata must be a mapping (an object), not {_describe(meta)}; not checked")
            return
        handle = self.table.add(origin)
        # First, as it repairs quoting slips (`name: on`) that the checks below would trip on.
        problems, usable = shapes.check(obj, plain)
        ref = findings.ObjectRef(kind, model.name_of(obj) or name)
        out.problems += [findings.make("parse-error", ref, p.path, p.message, source=handle) for p in problems]
        if model.name_of(obj) is None:
            raw = None if meta is None else meta.get("name")
            message = (f"{kind} without metadata.name: every object needs a name; ignored" if raw in (None, "")
                       else f"{kind} metadata.name must be a string, not {_describe(raw)}; not checked")
            if not any(p.path == ("metadata", "name") for p in problems):
                out.problems.append(findings.make("parse-error", findings.ObjectRef(kind, name),
                                                  ("metadata", "name"), message, source=handle))
            return
        if usable:
            self._keep(out, obj, handle, candidate)

    def _wrong(self, out: Loaded, name: str, origin: Origin, kind: str, path: tuple[str, ...],
               message: str) -> None:
        out.problems.append(findings.make("parse-error", findings.ObjectRef(kind, name), path, message,
                                          source=self.table.add(origin)))

    def _keep(self, out: Loaded, obj: Mapping[str, Any], handle: int, candidate: bool) -> None:
        if model.kind_of(obj) == model.INSTANCETYPE:
            out.instance_types.append((obj, handle))
        else:
            out.documents.append(Document(obj=obj, source=handle, candidate=candidate))

    def _problem(self, name: str, index: int, message: str, position: tree.Position) -> findings.Finding:
        handle = self.table.add(Origin(name, index, {(): position}))
        return findings.make("parse-error", findings.ObjectRef(FILE_KIND, name), (), message, source=handle)


def _items(found: Mapping[tree.Path, T], count: int) -> list[Mapping[tree.Path, T]]:
    """Per item of a List, its entries (positions, literals) relative to the item."""
    # A reader's lazy mapping (jsontext's, tree's in order, fastyaml's) gives each item's without reading any.
    within = getattr(found, "within", None)
    if within is not None:
        return [typing.cast(Mapping[tree.Path, T], within(("items", i))) for i in range(count)]
    split = split_items(found, "items")
    return [split.get(i, {}) for i in range(count)]


def _describe(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    return "a number" if isinstance(value, (int, float)) else type(value).__name__
