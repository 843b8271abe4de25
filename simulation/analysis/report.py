"""The values that pass through the entry point: parsed documents, per-overlay checks and the report
the analyses (effects, explain) read."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from simulation import findings

# Report has a field named `findings`; this alias keeps the module reachable in its body.
from simulation import findings as finding_types
from simulation.semantics import cells, merge, model


@dataclasses.dataclass(frozen=True)
class Document:
    """One parsed object. `source` is the adapter's handle (e.g. a document number) that
    findings carry back so it can point at a file and line."""

    obj: Any
    source: int
    candidate: bool = True


@dataclasses.dataclass(frozen=True)
class Checked:
    """An overlay with the findings that depend on it alone."""

    overlay: model.Overlay
    raw: Mapping[str, Any]
    findings: tuple[findings.Finding, ...]
    candidate: bool
    keys: frozenset[str] = frozenset()

    @property
    def invalid(self) -> bool:
        return any(f.code == "runtime-invalid" or dict(f.detail).get("layer") == "apiserver"
                   for f in self.findings)


@dataclasses.dataclass(frozen=True)
class Status:
    """An overlay's status as Karpenter would set it, with the reason people are shown (the finding
    that makes it Invalid, or the overlay and cell a Conflict met)."""

    state: merge.State
    reason: str = ""


@dataclasses.dataclass(frozen=True)
class Report:
    """The core's answer: findings, each overlay's status, and the merge they come from."""

    findings: tuple[finding_types.Finding, ...]
    status: Mapping[str, Status]
    outcome: merge.Merged
    entries: Mapping[str, merge.Entry]
    overlays: Mapping[str, Checked]
    grid: cells.Grid
    notes: tuple[str, ...]

    def errors(self) -> list[finding_types.Finding]:
        return [f for f in self.findings if f.severity == finding_types.Severity.ERROR]

    def status_of(self, name: str) -> Status:
        """An overlay the report does not hold is one Karpenter ignores."""
        return self.status.get(name, Status(merge.INVALID))
