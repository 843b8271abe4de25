"""Input files to core Documents, with a handle table that maps findings back to file positions.

Everything that can go wrong with the content of an input becomes a `parse-error` finding; only
inputs that cannot be read at all (missing, unreadable) raise InputError.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, BinaryIO

from lint import reader, tree
from lint.positions import Origin, Table, split_items
from simulation import findings
from simulation.evaluate import Document
from simulation.semantics import model

RELEVANT_KINDS = frozenset({model.NODEOVERLAY, model.NODEPOOL, model.INSTANCETYPE})
GROUP = "karpenter.sh"
# `kubectl get -o yaml` writes `kind: List`; the API itself answers with typed lists.
LIST_KINDS = frozenset({"List", *(f"{k}List" for k in RELEVANT_KINDS)})
FILE_KIND = "File"


@dataclasses.dataclass
class Loaded:
    documents: list[Document] = dataclasses.field(default_factory=list)
    # InstanceType documents: the catalog, not objects to check.
    instance_types: list[tuple[Mapping[str, Any], int]] = dataclasses.field(default_factory=list)
    problems: list[findings.Finding] = dataclasses.field(default_factory=list)
    ignored: int = 0
    skipped: int = 0

    @property
    def objects(self) -> int:
        return len(self.documents) + len(self.instance_types)

    def extend(self, other: Loaded) -> None:
        self.documents += other.documents
        self.instance_types += other.instance_types
        self.problems += other.problems
        self.ignored += other.ignored
        self.skipped += other.skipped


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
    return not isinstance(api, str) or "/" not in api or api.split("/", 1)[0] == GROUP


class Loader:
    def __init__(self, table: Table, max_bytes: int = reader.DEFAULT_MAX_BYTES,
                 stdin: BinaryIO | None = None) -> None:
        self.table = table
        self.max_bytes = max_bytes
        self.stdin = stdin
        self._stdin_used = False

    def load(self, args: Sequence[str], candidate: bool = True) -> Loaded:
        out = Loaded()
        for source in reader.discover(args):
            if source.path is None:
                if self._stdin_used:
                    raise reader.InputError("'-' (stdin) can be given only once")
                self._stdin_used = True
            out.extend(self.load_text(reader.read(source, self.max_bytes, self.stdin), candidate))
        return out

    def load_text(self, text: reader.Text, candidate: bool = True) -> Loaded:
        out = Loaded()
        name = text.source.name
        if text.text is None:
            out.problems.append(self._problem(name, 0, text.problem or "unreadable", text.position))
            return out
        # A directory walk meets every YAML file of a repository (CI workflows, Helm templates...);
        # one that cannot hold our kinds is not parsed, so unrelated broken files stay quiet and a
        # walk over thousands of them stays fast. Files named explicitly are always parsed.
        if text.source.walked and cannot_matter(text.text):
            out.skipped += 1
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
        where = parsed.positions.get((), (1, 1))
        if not isinstance(obj, dict):
            out.problems.append(self._problem(
                name, parsed.index, f"a document must be a mapping (an object), not {_describe(obj)}", where))
            return
        if obj.get("kind") in LIST_KINDS and "items" in obj:
            items = obj["items"]
            if not isinstance(items, list):
                where = parsed.positions.get(("items",), where)
                out.problems.append(self._problem(name, parsed.index, "the items of a List must be a list",
                                                  where))
                return
            item_positions = split_items(parsed.positions, "items")
            for i, item in enumerate(items):
                origin = Origin(name, parsed.index, item_positions.get(i, {}), item=i)
                self._object(out, name, item, origin, candidate)
            return
        self._object(out, name, obj, Origin(name, parsed.index, parsed.positions), candidate)

    def _object(self, out: Loaded, name: str, obj: Any, origin: Origin, candidate: bool) -> None:
        if not isinstance(obj, dict):
            what = f"List item {origin.item}" if origin.item is not None else "a document"
            handle = self.table.add(origin)
            out.problems.append(findings.make(
                "parse-error", findings.ObjectRef(FILE_KIND, name), (),
                f"{what} must be a mapping (an object), not {_describe(obj)}", source=handle))
            return
        if not is_relevant(obj):
            out.ignored += 1
            return
        handle = self.table.add(origin)
        kind = model.kind_of(obj) or FILE_KIND
        if model.name_of(obj) is None:
            out.problems.append(findings.make(
                "parse-error", findings.ObjectRef(kind, name), ("metadata", "name"),
                f"{kind} without metadata.name: every object needs a name; ignored", source=handle))
            return
        self._keep(out, obj, handle, candidate)

    def _keep(self, out: Loaded, obj: Mapping[str, Any], handle: int, candidate: bool) -> None:
        if model.kind_of(obj) == model.INSTANCETYPE:
            out.instance_types.append((obj, handle))
        else:
            out.documents.append(Document(obj=obj, source=handle, candidate=candidate))

    def _problem(self, name: str, index: int, message: str, position: tree.Position) -> findings.Finding:
        handle = self.table.add(Origin(name, index, {(): position}))
        return findings.make("parse-error", findings.ObjectRef(FILE_KIND, name), (), message, source=handle)


def _describe(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    return "a number" if isinstance(value, (int, float)) else type(value).__name__
