"""Findings to an admission verdict: who decides, the denial message and the warnings.

Denials use HTTP-style code 403 with reason Forbidden, as Gatekeeper does: the object is
well-formed, the guard's policy forbids it. kubectl shows `Error from server (Forbidden):
admission webhook "..." denied the request: <message>`.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence

from simulation import evaluate as ev
from simulation import findings

# The API server drops warnings of 256 characters or more; stay strictly under, in bytes.
WARNING_LIMIT = 255
MAX_WARNINGS = 20
MAX_DENIAL_ERRORS = 10
MAX_AUDIT = 100
PREFIX = "overlay-guard: "
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")
_CONTROL_BYTES = bytes([*range(0x20), 0x7f])
_ELLIPSIS = "…".encode()
# str() of a Severity reads the enum member's name each time; the audit annotation needs it per finding.
_SEVERITY = {s: str(s) for s in findings.Severity}
# How json.dumps writes a string (ensure_ascii): the audit annotation's rows are written around it, as
# json.dumps(rows, separators=(",", ":")) writes them, at a fraction of its cost per row (a dict each).
_STRING = json.encoder.encode_basestring_ascii


@dataclasses.dataclass(frozen=True)
class Verdict:
    allowed: bool
    message: str
    warnings: tuple[str, ...]
    errors: int

    @property
    def label(self) -> str:
        """For metrics and logs: denied, warned (allowed with warnings) or allowed."""
        if not self.allowed:
            return "denied"
        return "warned" if self.warnings else "allowed"


def clip(text: str, limit: int = WARNING_LIMIT) -> str:
    """One line of at most `limit` UTF-8 bytes, never cutting a character in half."""
    data = text.encode()
    # Deleting the control bytes is the cheapest test for them (half of isprintable()'s cost): the
    # common case skips the regex. UTF-8 puts no byte under 0x80 inside a longer character's encoding.
    line = (text if len(data.translate(None, _CONTROL_BYTES)) == len(data) else _CONTROL.sub(" ", text)).strip()
    if line.isascii():
        # A character per byte (isascii() reads a flag the string carries).
        return line if len(line) <= limit else line[:limit - len(_ELLIPSIS)].rstrip() + "…"
    data = line.encode()
    if len(data) <= limit:
        return line
    cut = data[:limit - len(_ELLIPSIS)].decode("utf-8", "ignore")
    return cut.rstrip() + "…"


def describe(f: findings.Finding, subject: findings.ObjectRef | None = None) -> str:
    """`[code] field: message`, naming the finding's object when it is not the subject (a
    conflict is reported on the later overlay of the pair). Messages already name the other
    object, the weight and the witness where the check has them; a witness is appended where
    the message lacks it."""
    where = f.field or "-"
    if subject is not None and f.obj != subject:
        where = f"{f.obj} {where}"
    text = f"[{f.code}] {where}: {f.message}"
    if f.witness is not None and f.witness.instance_type not in f.message:
        text += f" (e.g. {f.witness.describe()})"
    return text + (f"; fix: {f.hint}" if f.hint else "")


def brief(f: findings.Finding) -> str:
    """A warning line: the message first (it names both objects and the witness early, so
    clipping to the API server's limit cuts the least useful part), the field last."""
    text = f"[{f.code}] {_bound(f)}{f.message}"
    if f.witness is not None and f.witness.instance_type not in f.message:
        text += f" (e.g. {f.witness.describe()})"
    return f"{text} [{f.obj} {f.field or '-'}]"


def _bound(f: findings.Finding) -> str:
    """A capped finding's count of the ones it stands for, up front: its message ends with it,
    and that end is what clipping to the API server's limit cuts."""
    if not f.detail:
        return ""
    detail = dict(f.detail)
    # The detail keys of a capped finding that count the findings it stands for.
    more = int(detail.get("more", "0")) + int(detail.get("moreObjects", "0"))
    return f"(and {more} more) " if more else ""


def warnings(found: Sequence[findings.Finding], notes: Sequence[str] = (), *,
             subject: findings.ObjectRef | None = None, as_error: str = "") -> list[str]:
    total = len(found) + len(notes)
    # Only the lines that are sent are written: a report may hold hundreds of findings.
    shown = total if total <= MAX_WARNINGS else MAX_WARNINGS - 1
    lines = [clip(PREFIX + as_error + brief(f)) for f in found[:shown]]
    lines += [clip(PREFIX + n) for n in notes[:shown - len(lines)]]
    if total > shown:
        lines.append(clip(f"{PREFIX}and {total - shown} more; run overlay-lint check for the full list"))
    return lines


def denial(subject: findings.ObjectRef, errors: Sequence[findings.Finding]) -> str:
    shown = errors[:MAX_DENIAL_ERRORS]
    noun = "error" if len(errors) == 1 else "errors"
    parts = [f"{i}) {describe(f, subject)}" for i, f in enumerate(shown, 1)]
    text = f"overlay-guard: {subject.kind} {subject.name} has {len(errors)} {noun}: " + "; ".join(parts)
    if len(errors) > len(shown):
        text += f"; and {len(errors) - len(shown)} more (run overlay-lint check for all)"
    return text


def audit(report: ev.Report, label: str) -> dict[str, str]:
    """Machine-readable findings for the audit log (and for tests comparing with the linter)."""
    rows = [f'{{"code":{_STRING(f.code)},"severity":{_STRING(_SEVERITY[f.severity])},'
            f'"object":{_STRING(str(f.obj))},"field":{_STRING(f.field)}}}' for f in report.findings[:MAX_AUDIT]]
    out = {"verdict": label, "findings": f"[{','.join(rows)}]"}
    if len(report.findings) > MAX_AUDIT:
        out["truncated"] = str(len(report.findings))
    return out


def being_admitted(names: Sequence[str]) -> str:
    """Why a denial that rests only on admissions in flight may not stand for long."""
    objects = ", ".join(f"NodeOverlay {n}" for n in names)
    verb = "is" if len(names) == 1 else "are"
    return (f"{objects} {verb} being admitted right now and not stored yet: if the API server refuses it, "
            "retry in a few seconds")


def overlay(report: ev.Report, subject: findings.ObjectRef, *, enforce: bool,
            in_flight: Sequence[str] = ()) -> Verdict:
    """`in_flight`: the errors rest only on these overlays, admitted and not stored yet (the denial says so)."""
    errors = report.errors()
    rest = [f for f in report.findings if f.severity < findings.Severity.ERROR]
    notes = list(report.notes)
    if errors and enforce:
        text = denial(subject, errors)
        if in_flight:
            text += "; " + being_admitted(in_flight)
        return Verdict(False, text, tuple(warnings(rest, notes, subject=subject)), len(errors))
    lines = warnings(errors, subject=subject, as_error="not enforced (warn mode): ") if errors else []
    lines += warnings(rest, notes, subject=subject)
    return Verdict(True, "", tuple(lines[:MAX_WARNINGS]), len(errors))


def grounds(report: ev.Report, subject: findings.ObjectRef) -> list[findings.ObjectRef]:
    """The other objects the report's errors rest on, in order of first mention: a denial is
    only as good as their existence."""
    # Keyed by (kind, name), hashed and compared in C: a reference's dataclass __hash__ and __eq__ are Python calls,
    # and every denial asks this of its errors' objects.
    mine = (subject.kind, subject.name)
    out: dict[tuple[str, str], findings.ObjectRef] = {}
    for f in report.errors():
        for ref in (f.obj, *f.related):
            if (key := (ref.kind, ref.name)) != mine:
                out.setdefault(key, ref)
    return list(out.values())


def nodepool(found: Sequence[findings.Finding], subject: findings.ObjectRef) -> Verdict:
    """Never a denial: Karpenter must always be able to write its own objects."""
    lines = [clip(f"{PREFIX}{subject.kind} {subject.name} changed: {brief(f)}") for f in found]
    if len(lines) > MAX_WARNINGS:
        lines = [*lines[:MAX_WARNINGS - 1], clip(f"{PREFIX}and {len(found) - MAX_WARNINGS + 1} more")]
    return Verdict(True, "", tuple(lines), 0)
