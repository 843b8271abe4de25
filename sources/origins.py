"""A rendered object's fields traced back to the lines a user edits.

kustomize records the resource file an object came from and the kustomizations whose patches touched it
(`kustomize.Traced`). The object is found again in its file (by kind and name; a prefix or suffix added later is
allowed for), which gives the position of every field as written; then each patch of those kustomizations that
targets the object claims the fields it sets (a strategic-merge patch: each value it holds; a JSON 6902 patch:
each `path` it adds or replaces), at their line in the patch file, or in the kustomization or Flux Kustomization
that holds the patch inline. A field no patch set is reported in the resource file."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from sources import kustomize, templates, tree
from sources.positions import Origin

Position = tree.Position
_IDENTITY = frozenset({("apiVersion",), ("kind",), ("metadata",), ("metadata", "name"), ("metadata", "namespace")})


@dataclasses.dataclass(frozen=True)
class Patch:
    """One patch as written: its text, where that text starts, and the target it names (if any)."""

    text: str
    file: str
    # Added to positions within `text`: lines before it, and its indentation (inline patches).
    lines: int = 0
    columns: int = 0
    target: Mapping[str, Any] | None = None


class Locator:
    """Origins of rendered objects; each file is read and parsed once."""

    def __init__(self) -> None:
        self._parsed: dict[str, list[tree.Parsed]] = {}
        self._lines: dict[str, list[str]] = {}
        self._index: dict[str, dict[tuple[Any, str], tree.Parsed]] = {}
        self._patch_documents: dict[str, list[tree.Parsed]] = {}
        self._patch_lists: dict[str, list[Patch]] = {}

    def origin(self, traced: kustomize.Traced, fallback: str,
               extra: Mapping[str, Sequence[Patch]] | None = None) -> Origin:
        """`fallback`: the file to name when kustomize did not say where the object came from (a generator's
        object: its kustomization). `extra`: patches a kustomization gained outside its file (Flux's), by the
        kustomization's path."""
        kind, name = traced.obj.get("kind"), _name(traced.obj)
        if traced.origin is None:
            return Origin(traced.configured_in or fallback, 0, {(): (1, 1)})
        index, positions = self._find(traced.origin, kind, name)
        patched: dict[tree.Path, tuple[str, Position]] = {}
        for kfile in dict.fromkeys(traced.patched_by):
            if kfile not in self._patch_lists:
                self._patch_lists[kfile] = list(self._patches(kfile))
            for patch in [*self._patch_lists[kfile], *(extra or {}).get(os.path.normpath(kfile), ())]:
                patched.update(self._claims(patch, traced.obj))
        return Origin(traced.origin, index, positions or {(): (1, 1)}, patched=patched)

    def _documents(self, path: str) -> list[tree.Parsed]:
        if path not in self._parsed:
            try:
                with open(path, encoding="utf-8") as handle:
                    text = handle.read()
            except (OSError, UnicodeDecodeError):
                text = ""
            self._lines[path] = text.splitlines()
            self._parsed[path] = [p for p in tree.documents(text) if p.problem is None]
        return self._parsed[path]

    def _find(self, path: str, kind: Any, name: str) -> tuple[int, Mapping[tree.Path, Position]]:
        """The document of `path` the object was read from: same kind, and the name it had before a prefix or
        suffix was added (the longest such name)."""
        if path not in self._index:
            index: dict[tuple[Any, str], tree.Parsed] = {}
            for parsed in self._documents(path):
                if isinstance(parsed.value, dict):
                    index.setdefault((parsed.value.get("kind"), _name(parsed.value)), parsed)
            self._index[path] = index
        index = self._index[path]
        found = index.get((kind, name))
        for cut in range(len(name)):
            found = found or index.get((kind, name[cut:])) or index.get((kind, name[:len(name) - cut]))
        if found is None:
            found = next((p for (k, n), p in index.items() if k == kind and n in name), None)
        return (found.index, found.positions) if found is not None else (0, {})

    def _patches(self, kfile: str) -> Iterator[Patch]:
        documents = self._documents(kfile)
        content = documents[0].value if documents and isinstance(documents[0].value, dict) else {}
        positions = documents[0].positions if documents else {}
        directory = os.path.dirname(kfile)
        entries = content.get("patches")
        for i, entry in enumerate(entries if isinstance(entries, list) else ()):
            if isinstance(entry, Mapping):
                target = entry.get("target") if isinstance(entry.get("target"), Mapping) else None
                yield from self._written(entry, kfile, positions, ("patches", i), directory, target)
        merges = content.get("patchesStrategicMerge")
        for i, entry in enumerate(merges if isinstance(merges, list) else ()):
            if isinstance(entry, str):
                yield from self.inline_or_file(entry, kfile, positions.get(("patchesStrategicMerge", i)),
                                               directory, None)
        jsons = content.get("patchesJson6902")
        for i, entry in enumerate(jsons if isinstance(jsons, list) else ()):
            if isinstance(entry, Mapping) and isinstance(entry.get("target"), Mapping):
                yield from self._written(entry, kfile, positions, ("patchesJson6902", i), directory,
                                         entry["target"])

    def _written(self, entry: Mapping[str, Any], kfile: str, positions: Mapping[tree.Path, Position],
                 at: tree.Path, directory: str, target: Mapping[str, Any] | None) -> Iterator[Patch]:
        if isinstance(entry.get("path"), str):
            yield from self.inline_or_file(entry["path"], kfile, None, directory, target)
        elif isinstance(entry.get("patch"), str):
            yield self.inline(entry["patch"], kfile, positions.get((*at, "patch")), target)

    def inline_or_file(self, text: str, kfile: str, where: Position | None, directory: str,
                       target: Mapping[str, Any] | None) -> Iterator[Patch]:
        path = os.path.normpath(os.path.join(directory, text))
        if "\n" not in text and os.path.isfile(path):
            self._documents(path)
            yield Patch("\n".join(self._lines[path]), path, target=target)
        else:
            yield self.inline(text, kfile, where, target)

    def inline(self, text: str, file: str, where: Position | None, target: Mapping[str, Any] | None) -> Patch:
        """A patch held in a YAML string of `file` whose key is at `where`: as a block scalar (`|`), its lines
        start on the next line, at that line's indentation; otherwise positions are the key's."""
        if where is None:
            return Patch(text, file, target=target)
        self._documents(file)
        lines = self._lines.get(file, [])
        key_line = where[0]
        if key_line <= len(lines) and re.search(r":\s*[|>][-+0-9]*\s*(#.*)?$", lines[key_line - 1]):
            following = lines[key_line] if key_line < len(lines) else ""
            return Patch(text, file, key_line, len(following) - len(following.lstrip(" ")), target)
        return Patch(text, file, key_line - 1, where[1] - 1, target)

    def _claims(self, patch: Patch, obj: Mapping[str, Any]) -> dict[tree.Path, tuple[str, Position]]:
        """The fields `patch` set on `obj`: those it writes whose value `obj` still holds (a kustomization's
        patches are told apart by what they wrote, not by re-running their selectors)."""
        kind, name = obj.get("kind"), _name(obj)
        if patch.target is not None and not _targets(patch.target, kind, name):
            return {}
        out: dict[tree.Path, tuple[str, Position]] = {}

        def at(position: Position) -> tuple[str, Position]:
            line, column = position
            return patch.file, (line + patch.lines, column + (patch.columns if line > 0 else 0))

        if patch.text not in self._patch_documents:
            self._patch_documents[patch.text] = list(tree.documents(patch.text))
        for parsed in self._patch_documents[patch.text]:
            value = parsed.value
            if isinstance(value, list):
                for i, op in enumerate(value):
                    if isinstance(op, Mapping) and op.get("op") in ("add", "replace") and \
                            isinstance(op.get("path"), str):
                        field = _pointer(op["path"])
                        if _value_at(obj, field) != op.get("value", _MISSING):
                            continue
                        out[field] = at(parsed.positions.get((i, "value"), parsed.positions.get((i,), (1, 1))))
                        out.update({(*field, *p[2:]): at(pos) for p, pos in parsed.positions.items()
                                    if len(p) > 2 and p[:2] == (i, "value")})
            elif isinstance(value, dict) and (patch.target is not None or
                                              (value.get("kind") == kind and _name(value) in name)):
                out.update({p: at(parsed.positions[p]) for p in _set(value, ())
                            if p in parsed.positions and _value_at(obj, p) == _value_at(value, p)})
        return out


_MISSING = object()


def _value_at(value: Any, path: tree.Path) -> Any:
    for step in path:
        present = step in value if isinstance(value, Mapping) else \
            isinstance(value, list) and isinstance(step, int) and 0 <= step < len(value)
        if not present:
            return _MISSING
        value = value[step]
    return value


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) else ""


def _targets(target: Mapping[str, Any], kind: Any, name: str) -> bool:
    """Whether a patch's target selects the object (kind and name, the name a regular expression as kustomize
    reads it; label and annotation selectors are taken to match)."""
    if isinstance(target.get("kind"), str) and target["kind"] != kind:
        return False
    wanted = target.get("name")
    if not isinstance(wanted, str):
        return True
    try:
        return re.fullmatch(wanted, name) is not None or re.search(wanted, name) is not None
    except re.error:
        return wanted == name


def _pointer(text: str) -> tree.Path:
    parts = text.lstrip("/").split("/") if text.strip("/") else []
    return tuple(int(p) if p.isdigit() else p.replace("~1", "/").replace("~0", "~") for p in parts)


def _set(value: Any, prefix: tree.Path) -> Iterator[tree.Path]:
    """The fields a strategic-merge patch sets: each value that is not a mapping (a list replaces the whole
    list), with everything under it; its identity fields excepted."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _set(child, (*prefix, key))
        return
    if prefix not in _IDENTITY:
        yield prefix
    if isinstance(value, list):
        for i, child in enumerate(value):
            yield from _under(child, (*prefix, i))


def _under(value: Any, prefix: tree.Path) -> Iterator[tree.Path]:
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _under(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from _under(child, (*prefix, i))


def kustomization_of(directory: str) -> str:
    """The kustomization file of a built directory, or where Flux's generated one would be."""
    return templates.kustomization_file(directory) or os.path.join(directory, templates.KUSTOMIZATION_FILES[0])
