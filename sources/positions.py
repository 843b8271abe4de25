"""Where each document came from, so a finding's `source` and path become file:line:column."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TypeVar

from simulation import findings
from sources.tree import Path, Position

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Origin:
    """One loaded document. `file` is None for objects read from a cluster."""

    file: str | None
    index: int
    positions: Mapping[Path, Position] = dataclasses.field(default_factory=dict)
    # The item number when the document is an element of a `kind: List`.
    item: int | None = None
    # Fields a kustomize patch set, each where the patch sets it (the patch file, or the kustomization holding
    # it inline): a finding there points at the line a user edits.
    patched: Mapping[Path, tuple[str, Position]] = dataclasses.field(default_factory=dict)

    def where(self, path: Path) -> tuple[str | None, Position | None]:
        """The file and position of `path`, or of its nearest ancestor set by a patch or present in the file."""
        for end in range(len(path), -1, -1):
            patched = self.patched.get(path[:end])
            if patched is not None:
                return patched
            found = self.positions.get(path[:end])
            if found is not None:
                return self.file, found
        return self.file, None

    def locate(self, path: Path) -> Position | None:
        """The position of `path`, or of its nearest ancestor that exists in the file (a
        missing field is reported where it should have been)."""
        for end in range(len(path), -1, -1):
            found = self.positions.get(path[:end])
            if found is not None:
                return found
        return None


@dataclasses.dataclass(frozen=True)
class Location:
    """Where in a file a finding points: file, line and column (None where unknown)."""

    file: str | None
    line: int | None
    column: int | None


NOWHERE = Location(None, None, None)


class Table:
    """Document handles: a handle is an index into this table. Handles grow in load order,
    which is the order the core sorts findings by."""

    def __init__(self) -> None:
        self._origins: list[Origin] = []

    def add(self, origin: Origin) -> int:
        self._origins.append(origin)
        return len(self._origins) - 1

    def __getitem__(self, handle: int) -> Origin:
        return self._origins[handle]

    def __len__(self) -> int:
        return len(self._origins)

    def locate(self, finding: findings.Finding) -> Location:
        if finding.source is None or not 0 <= finding.source < len(self._origins):
            return NOWHERE
        origin = self._origins[finding.source]
        if origin.file is None:
            return NOWHERE
        file, found = origin.where(finding.path)
        return Location(file, *(found if found is not None else (None, None)))


def split_items(positions: Mapping[Path, T], key: str) -> dict[int, dict[Path, T]]:
    """Entries (positions, or anything else keyed by path) of every element of the list under
    `key`, relative to the element, in one pass (a `kind: List` with thousands of items must not
    rescan the map per item)."""
    out: dict[int, dict[Path, T]] = {}
    for p, pos in positions.items():
        if len(p) >= 2 and p[0] == key and isinstance(p[1], int):
            out.setdefault(p[1], {})[p[2:]] = pos
    return out
