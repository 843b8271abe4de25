"""Findings: the one vocabulary every check speaks and every front end formats."""

from __future__ import annotations

import dataclasses
import functools
import json
import operator
from collections.abc import Iterable, Mapping
from typing import Any

from simulation import codes, once

# Re-exported: every check and front end names severities through this module.
Severity = codes.Severity

# Detail entries whose value the core writes as a JSON document (a finding stays hashable with string values only),
# handed to outputs as the structure it is: `disjoint`, the requirement that parts two overlays (hints.conflict).
STRUCTURED_DETAIL = frozenset({"disjoint"})

# code -> severity, from the one list of codes.
CODES: Mapping[str, Severity] = {c.code: c.severity for c in codes.ALL}


@dataclasses.dataclass(frozen=True, order=True)
class ObjectRef:
    """The object a finding is about: kind and name."""

    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}"


@dataclasses.dataclass(frozen=True, order=True)
class Offering:
    """A zone and capacity type of an instance type, in a witness."""

    zone: str
    capacity_type: str


@dataclasses.dataclass(frozen=True, order=True)
class Witness:
    """A cell (NodePool, instance type, maybe offering) where a finding shows."""

    nodepool: str
    instance_type: str
    offering: Offering | None = None

    def describe(self) -> str:
        text = f"nodepool {self.nodepool}, instance type {self.instance_type}"
        if self.offering is not None:
            text += f", offering {self.offering.zone}/{self.offering.capacity_type}"
        return text

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"nodepool": self.nodepool, "instanceType": self.instance_type}
        if self.offering is not None:
            out["offering"] = {"zone": self.offering.zone, "capacityType": self.offering.capacity_type}
        return out


# ObjectRef's own ordering, compared in C: the dataclass's __lt__ builds two tuples per comparison.
_REF_ORDER = operator.attrgetter("kind", "name")


@dataclasses.dataclass(frozen=True, init=False)
class Finding:
    """One problem. `source` is the index of the input document it is about, for adapters
    that map `field` back to a file position; the core never looks at it."""

    code: str
    obj: ObjectRef
    path: tuple[str | int, ...]
    message: str
    related: tuple[ObjectRef, ...] = ()
    witness: Witness | None = None
    severity: Severity = Severity.ERROR
    source: int | None = None
    # Extra machine-readable detail (e.g. Karpenter's own verdict on a conflict).
    detail: tuple[tuple[str, str], ...] = ()
    # What to change so that the intended overlay wins (every error has one; see analysis.hints).
    hint: str = ""

    def __init__(self, code: str, obj: ObjectRef, path: tuple[str | int, ...], message: str,
                 related: tuple[ObjectRef, ...] = (), witness: Witness | None = None,
                 severity: Severity = Severity.ERROR, source: int | None = None,
                 detail: tuple[tuple[str, str], ...] = (), hint: str = "") -> None:
        # The dataclass's own, with the fields written into the instance's dict: a frozen dataclass's generated
        # __init__ calls object.__setattr__ per field, five times this cost, and a request builds a finding per
        # shadowed field and conflict (tests/test_findings_type.py holds the fields and defaults to the class's).
        own = self.__dict__
        own["code"] = code
        own["obj"] = obj
        own["path"] = path
        own["message"] = message
        own["related"] = related
        own["witness"] = witness
        own["severity"] = severity
        own["source"] = source
        own["detail"] = detail
        own["hint"] = hint

    @once.Once
    def field(self) -> str:
        # Read several times per finding (sort keys, JSON): rendered once per instance.
        return json_path(*self.path)

    @once.Once
    def order_key(self) -> tuple[Any, ...]:
        # Kept per instance: a request orders its findings twice and ratchets them (evaluate._identity) between.
        # The objects as their (kind, name), the order ObjectRef defines: hashed and compared in C, where
        # the refs' own __hash__ and __eq__ are Python calls (findings.ordered runs twice per request).
        return (self.source if self.source is not None else -1, self.obj.kind, self.obj.name, self.field, self.code,
                tuple(map(_REF_ORDER, self.related)), self.message)

    def identity(self) -> tuple[Any, ...]:
        """Its object, field, code and related objects: what makes two findings the same problem, whatever
        their wording or witness (taken from the kept sort key, and hashed in C)."""
        return self.order_key[1:6]

    def with_severity(self, severity: Severity, note: str = "") -> Finding:
        message = self.message if not note else f"{self.message} ({note})"
        return dataclasses.replace(self, severity=severity, message=message)

    def detail_json(self) -> dict[str, Any]:
        """The detail as outputs give it: strings, and the STRUCTURED_DETAIL entries as their structure."""
        return {k: json.loads(v) if k in STRUCTURED_DETAIL else v for k, v in self.detail}

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "code": self.code,
            "severity": str(self.severity),
            "object": {"kind": self.obj.kind, "name": self.obj.name},
            "field": self.field,
            "message": self.message,
            "related": [{"kind": r.kind, "name": r.name} for r in self.related],
        }
        if self.witness is not None:
            out["witness"] = self.witness.to_json()
        if self.detail:
            out["detail"] = self.detail_json()
        if self.hint:
            out["hint"] = self.hint
        return out


def make(code: str, obj: ObjectRef, path: tuple[str | int, ...], message: str, *, related: Iterable[ObjectRef] = (),
         witness: Witness | None = None, source: int | None = None,
         detail: Mapping[str, str] | None = None, hint: str = "") -> Finding:
    """Build a finding with the severity its code defines."""
    return Finding(code=code, obj=obj, path=path, message=message,
                   related=_refs(related), witness=witness, severity=codes.get(code).severity,
                   source=source, detail=tuple(sorted((detail or {}).items())), hint=hint)


def _refs(related: Iterable[ObjectRef]) -> tuple[ObjectRef, ...]:
    if isinstance(related, tuple) and len(related) < 2:
        return related
    unique = set(related)
    return tuple(sorted(unique, key=_REF_ORDER)) if len(unique) > 1 else tuple(unique)


def ordered(findings: Iterable[Finding]) -> list[Finding]:
    """Deterministic output order; also drops exact duplicates."""
    # Each key built once: a report's findings are ordered twice per admission request.
    seen: dict[tuple[Any, ...], tuple[tuple[Any, ...], Finding]] = {}
    for f in findings:
        key = f.order_key
        seen.setdefault((key, f.code, f.severity), (key, f))
    return [f for _, f in sorted(seen.values(), key=operator.itemgetter(0))]


def first_few(found: list[Finding], total: int) -> list[Finding]:
    """`found` (the first of `total` findings on other overlays that name one candidate), the last saying
    how many more (the cap on a candidate's report, evaluate._bounded, and the shadow findings built only
    that far)."""
    if total <= len(found) or not found:
        return found
    last = found[-1]
    more = str(total - len(found))
    # dataclasses.replace's finding, built positionally (its generic walk over the fields costs twice this).
    found[-1] = Finding(last.code, last.obj, last.path,
                        f"{last.message}; and {more} more such findings on other objects", last.related,
                        last.witness, last.severity, last.source,
                        tuple(sorted((*last.detail, ("moreObjects", more)))), last.hint)
    return found


# Kept per distinct path: a request renders the same few dozen fields (a price, a capacity resource) each time.
# Typed: a key True (YAML's `yes:`) is not the index 1.
@functools.lru_cache(maxsize=4096, typed=True)
def json_path(*parts: str | int) -> str:
    """`spec.requirements[2].key` style paths from path segments."""
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif out:
            out += f".{p}" if _plain(p) else f"[{p!r}]"
        else:
            out = p
    return out


def _plain(segment: str) -> bool:
    return segment.replace("_", "a").replace("-", "a").isalnum()
