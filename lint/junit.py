"""JUnit XML for CI dashboards: one testcase per object, one failure per finding at or above --fail-on.

The shape is the one Jenkins, GitLab and most JUnit readers accept (a `testsuites` root with one
`testsuite`, one per cluster in a fleet); findings below the threshold go to the testcase's `system-out`, so they
stay visible without failing it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from simulation.findings import Finding, ObjectRef, Severity
from sources.positions import Location

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

SUITE = "overlay-lint"


@dataclasses.dataclass(frozen=True)
class Subject:
    """An input object: one testcase."""

    ref: ObjectRef
    location: Location


def _place(loc: Location) -> str:
    if loc.file is None:
        return "<cluster>"
    return loc.file if loc.line is None else f"{loc.file}:{loc.line}:{loc.column}"


def _line(finding: Finding, loc: Location) -> str:
    return f"{_place(loc)}: {finding.severity} {finding.code} {finding.obj}: {finding.message}"


def _owner(finding: Finding, known: dict[ObjectRef, Subject]) -> ObjectRef:
    """The testcase a finding belongs to: its object when that is an input, else the first input
    it names (a conflict reported against an object already in the cluster)."""
    if finding.obj in known:
        return finding.obj
    return next((r for r in finding.related if r in known), finding.obj)


@dataclasses.dataclass(frozen=True)
class Suite:
    """One judgement: a cluster's (named) or the run's."""

    cluster: str | None
    subjects: Sequence[Subject]
    located: Sequence[tuple[Finding, Location]]


def document(suites: Sequence[Suite], threshold: Severity) -> ET.Element:
    import xml.etree.ElementTree as ET  # only runs that write JUnit: every check builds its Subjects

    root = ET.Element("testsuites", name=SUITE, tests="0", failures="0", errors="0")
    for suite in suites:
        tests, failed = _suite(ET.SubElement(root, "testsuite"), suite, threshold)
        root.set("tests", str(int(root.get("tests", "0")) + tests))
        root.set("failures", str(int(root.get("failures", "0")) + failed))
    return root


def _suite(suite: ET.Element, given: Suite, threshold: Severity) -> tuple[int, int]:
    """Fills one testsuite; its tests and failures."""
    import xml.etree.ElementTree as ET

    subjects, located = given.subjects, given.located
    known = {s.ref: s for s in subjects}
    order = list(known)
    failures: dict[ObjectRef, list[tuple[Finding, Location]]] = {}
    others: dict[ObjectRef, list[str]] = {}
    for finding, loc in located:
        owner = _owner(finding, known)
        if owner not in known:
            # An input that never became an object (a file that does not parse): still a testcase.
            known[owner] = Subject(owner, loc)
            order.append(owner)
        if finding.severity >= threshold:
            failures.setdefault(owner, []).append((finding, loc))
        else:
            others.setdefault(owner, []).append(_line(finding, loc))
    failed = sum(1 for ref in order if ref in failures)
    for key, value in (("name", given.cluster if given.cluster is not None else SUITE), ("tests", str(len(order))),
                       ("failures", str(failed)), ("errors", "0"), ("skipped", "0")):
        suite.set(key, value)
    for ref in order:
        subject = known[ref]
        case = ET.SubElement(suite, "testcase", classname=ref.kind, name=str(ref))
        if subject.location.file is not None:
            case.set("file", subject.location.file)
            if subject.location.line is not None:
                case.set("line", str(subject.location.line))
        for finding, loc in failures.get(ref, []):
            failure = ET.SubElement(case, "failure", type=finding.code, message=finding.message)
            failure.text = _line(finding, loc) + (f"\nhint: {finding.hint}" if finding.hint else "")
        if ref in others:
            ET.SubElement(case, "system-out").text = "\n".join(others[ref])
    return len(order), failed


def write(suites: Sequence[Suite], threshold: Severity, out: TextIO) -> None:
    import xml.etree.ElementTree as ET

    root = document(suites, threshold)
    ET.indent(root)
    out.write('<?xml version="1.0" encoding="UTF-8"?>\n')
    out.write(ET.tostring(root, encoding="unicode"))
    out.write("\n")
