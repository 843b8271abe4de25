"""Output formats of `overlay-lint check`: text, json, sarif, GitHub workflow commands and JUnit XML."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any, TextIO

from lint import junit
from simulation.findings import Finding, Severity
from sources.positions import Location, Table

FORMATS = ("text", "json", "sarif", "github", "junit")


@dataclasses.dataclass(frozen=True)
class Output:
    """One judgement as the formats write it: its findings, where they are, and the counts."""

    findings: Sequence[Finding]
    table: Table
    objects: int
    ignored: int = 0
    notes: Sequence[str] = ()
    skipped: int = 0
    # The input objects (JUnit's testcases) and the --fail-on threshold (its failures).
    subjects: Sequence[junit.Subject] = ()
    threshold: Severity = Severity.ERROR
    # The cluster judged, in a fleet (docs/cli.md "Fleets"); None: the one cluster of a run, named nowhere.
    cluster: str | None = None

    @property
    def prefix(self) -> str:
        return f"[{self.cluster}] " if self.cluster is not None else ""

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    def located(self) -> list[tuple[Finding, Location]]:
        return [(f, self.table.locate(f)) for f in self.findings]


def render(fmt: str, result: Output, out: TextIO, err: TextIO) -> None:
    render_all(fmt, [result], out, err)


def render_all(fmt: str, results: Sequence[Output], out: TextIO, err: TextIO) -> None:
    """One report of the judgements of a run: one per cluster in a fleet, each naming its cluster."""
    # The JSON writer and SARIF's rules are imported by the formats that write them (a hook's text run pays neither).
    if fmt == "json":
        from lint import jsonstream

        jsonstream.write(out, _skeleton(results), (finding_json(f, loc, r.cluster) for r in results
                                                   for f, loc in r.located()))
        return
    for result in results:
        for note in result.notes:
            err.write(f"note: {result.prefix}{note}\n")
    if fmt == "text":
        color = use_color(out)
        for result in results:
            write_text(result, out, color=color)
        _fleet_line(results, out)
    elif fmt == "sarif":
        from lint import jsonstream, sarif

        jsonstream.write(out, *sarif.document(((f, loc, r.cluster) for r in results for f, loc in r.located()),
                                              os.getcwd(), [f"{r.prefix}{n}" for r in results for n in r.notes]))
    elif fmt == "github":
        for result in results:
            write_github(result, out)
        _fleet_line(results, out)
    elif fmt == "junit":
        junit.write([junit.Suite(r.cluster, r.subjects, r.located()) for r in results], results[0].threshold,
                    out)
    else:
        raise ValueError(f"unknown format {fmt!r}")


def _fleet_line(results: Sequence[Output], out: TextIO) -> None:
    """The total over a fleet's clusters, after each cluster's own summary line."""
    if len(results) < 2:
        return
    errors = sum(r.count(Severity.ERROR) for r in results)
    warnings = sum(r.count(Severity.WARNING) for r in results)
    clusters = plural(sum(1 for r in results if r.cluster is not None), "cluster")
    rest = " and the files no cluster reads" if any(r.cluster is None for r in results) else ""
    out.write(f"{plural(errors, 'error')}, {plural(warnings, 'warning')} in {clusters}{rest}\n")


def use_color(stream: TextIO) -> bool:
    """Colour for people only: a terminal, and no NO_COLOR (https://no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def subject(finding: Finding, loc: Location) -> str:
    """The object column; for an input with no usable name the name is its file, already shown."""
    return finding.obj.kind if finding.obj.name == loc.file else str(finding.obj)


def where(finding: Finding, loc: Location) -> str:
    if loc.file is None:
        return "<cluster>" if finding.source is not None else "<input>"
    if loc.line is None:
        return loc.file
    return f"{loc.file}:{loc.line}:{loc.column}"


_COLORS = {Severity.ERROR: "\033[1;31m", Severity.WARNING: "\033[1;33m", Severity.INFO: "\033[1;36m"}
_BOLD, _DIM, _RESET = "\033[1m", "\033[2m", "\033[0m"


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def summary_line(result: Output) -> str:
    parts = [plural(result.count(Severity.ERROR), "error"),
             plural(result.count(Severity.WARNING), "warning")]
    infos = result.count(Severity.INFO)
    if infos:
        parts.append(plural(infos, "note"))
    text = f"{', '.join(parts)} in {plural(result.objects, 'object')}"
    aside = []
    if result.ignored:
        aside.append(f"{plural(result.ignored, 'other document')} ignored")
    if result.skipped:
        aside.append(f"{plural(result.skipped, 'file')} without NodeOverlays, NodePools or InstanceTypes "
                     "skipped")
    return text + (f" ({'; '.join(aside)})" if aside else "")


def write_text(result: Output, out: TextIO, color: bool = False) -> None:
    for f, loc in result.located():
        place, severity, code = where(f, loc), str(f.severity), f.code
        if color:
            place = f"{_BOLD}{place}{_RESET}"
            severity = f"{_COLORS[f.severity]}{severity}{_RESET}"
            code = f"{_DIM}{code}{_RESET}"
        out.write(f"{result.prefix}{place}: {severity} {code} {subject(f, loc)}: {f.message}\n")
        if f.hint:
            out.write(f"  {_DIM if color else ''}hint:{_RESET if color else ''} {f.hint}\n")
    out.write(result.prefix + summary_line(result) + "\n")


def finding_json(finding: Finding, loc: Location, cluster: str | None = None) -> dict[str, Any]:
    out = finding.to_json()
    out.update(file=loc.file, line=loc.line, column=loc.column)
    if cluster is not None:
        out["cluster"] = cluster
    return out


def _counts(result: Output) -> dict[str, int]:
    return {"errors": result.count(Severity.ERROR), "warnings": result.count(Severity.WARNING),
            "objects": result.objects}


def _skeleton(results: Sequence[Output]) -> dict[str, Any]:
    """The JSON report with its findings streamed in place of jsonstream.SLOT; a fleet's summary also counts per
    cluster."""
    from lint import jsonstream

    summary = {key: sum(_counts(r)[key] for r in results) for key in ("errors", "warnings", "objects")}
    named = [r for r in results if r.cluster is not None]
    if named:
        summary["clusters"] = {r.cluster: _counts(r) for r in named}  # type: ignore[assignment]
    return {
        "findings": jsonstream.SLOT,
        "summary": summary,
        "notes": [f"{r.prefix}{n}" for r in results for n in r.notes],
    }


def _escape_data(text: str) -> str:
    # GitHub's workflow-command escaping (toolkit's escapeData / escapeProperty).
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


_COMMANDS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def github_line(finding: Finding, loc: Location, prefix: str = "") -> str:
    from lint import sarif  # its file names relative to the root, as GitHub's annotations take them

    props = []
    if loc.file is not None and not loc.file.startswith("<"):
        props.append(f"file={_escape_property(sarif.relative(loc.file, os.getcwd()))}")
        if loc.line is not None:
            props.append(f"line={loc.line}")
            props.append(f"col={loc.column}")
    props.append(f"title={_escape_property(finding.code)}")
    message = prefix + finding.message + (f"\nhint: {finding.hint}" if finding.hint else "")
    return f"::{_COMMANDS[finding.severity]} {','.join(props)}::{_escape_data(message)}"


def write_github(result: Output, out: TextIO) -> None:
    for f, loc in result.located():
        out.write(github_line(f, loc, result.prefix) + "\n")
    out.write(result.prefix + summary_line(result) + "\n")
