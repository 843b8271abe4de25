"""SARIF 2.1.0 for code scanning (GitHub and other SARIF consumers)."""

from __future__ import annotations

import os
import pathlib
import urllib.parse
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from lint import jsonstream
from simulation import codes, findings
from simulation.findings import Severity
from sources.positions import Location

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
TOOL = "overlay-lint"

LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def version() -> str:
    import importlib.metadata  # a metadata scan and the email package: only runs that show the version pay

    try:
        return importlib.metadata.version("overlay-guard")
    except importlib.metadata.PackageNotFoundError:
        return "0.0.0"


def relative(path: str, cwd: str) -> str:
    """`path` relative to `cwd` when it lies inside it, else absolute; '/' separators."""
    absolute = os.path.abspath(path)
    try:
        rel = os.path.relpath(absolute, cwd)
    except ValueError:  # another drive on Windows
        return absolute
    return absolute if rel == ".." or rel.startswith(".." + os.sep) else rel.replace(os.sep, "/")


def artifact(path: str, cwd: str) -> dict[str, str]:
    rel = relative(path, cwd)
    if os.path.isabs(rel):
        return {"uri": pathlib.Path(rel).as_uri()}
    return {"uri": urllib.parse.quote(rel), "uriBaseId": "%SRCROOT%"}


def _camel(code: str) -> str:
    return "".join(part.capitalize() for part in code.split("-"))


def rules() -> list[dict[str, Any]]:
    return [{"id": c.code, "name": _camel(c.code),
             "shortDescription": {"text": c.short},
             "fullDescription": {"text": c.full},
             "help": {"text": c.help},
             "defaultConfiguration": {"level": LEVELS[c.severity]},
             "properties": {"tags": ["karpenter", "nodeoverlay"]}}
            for c in codes.ALL]


def _logical(ref: findings.ObjectRef) -> dict[str, str]:
    return {"name": ref.name, "fullyQualifiedName": str(ref), "kind": "object"}


def result(finding: findings.Finding, loc: Location, index: dict[str, int], cwd: str,
           cluster: str | None = None) -> dict[str, Any]:
    location: dict[str, Any] = {}
    if loc.file is not None and not loc.file.startswith("<"):
        physical: dict[str, Any] = {"artifactLocation": artifact(loc.file, cwd)}
        if loc.line is not None:
            physical["region"] = {"startLine": loc.line, "startColumn": loc.column}
        location["physicalLocation"] = physical
    location["logicalLocations"] = [_logical(finding.obj)]
    properties: dict[str, Any] = {"field": finding.field,
                                  "related": [str(r) for r in finding.related]}
    if finding.witness is not None:
        properties["witness"] = finding.witness.to_json()
    if finding.detail:
        properties["detail"] = finding.detail_json()
    text = finding.message
    if cluster is not None:
        # In a fleet the same object can be judged in several clusters: code scanning shows the message.
        properties["cluster"] = cluster
        text = f"[{cluster}] {text}"
    if finding.hint:
        # A SARIF `fix` must carry concrete byte replacements; the hint is prose, so it rides in the
        # message (what code scanning shows) and in the properties (for tools).
        properties["hint"] = finding.hint
        text += f" Hint: {finding.hint}"
    out: dict[str, Any] = {"ruleId": finding.code, "level": LEVELS[finding.severity],
                           "message": {"text": text}, "locations": [location],
                           "properties": properties,
                           "ruleIndex": index[finding.code]}
    return out


def document(located: Iterable[tuple[findings.Finding, Location, str | None]], cwd: str,
             notes: Sequence[str] = ()) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """The SARIF log with jsonstream.SLOT for its results, and the results (built as they are read, for
    jsonstream.write)."""
    driver_rules = rules()
    index = {r["id"]: i for i, r in enumerate(driver_rules)}
    run: dict[str, Any] = {
        "tool": {"driver": {"name": TOOL, "version": version(), "rules": driver_rules}},
        "columnKind": "unicodeCodePoints",
        "results": jsonstream.SLOT,
        "invocations": [{"executionSuccessful": True, "toolExecutionNotifications": [
            {"level": "note", "message": {"text": note}} for note in notes]}],
    }
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}, (result(f, loc, index, cwd, cluster)
                                                                   for f, loc, cluster in located)
