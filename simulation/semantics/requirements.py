"""Karpenter's requirement algebra (pkg/scheduling), reproduced for exact match semantics.

A requirement is a set of allowed label values: either a concrete set (`In`, or
`DoesNotExist` when empty) or a complement (`NotIn`, or `Exists` when empty), with
optional inclusive integer bounds (Gt/Lt are canonicalised to Gte/Lte).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import operator
import re
from collections.abc import Iterable, Mapping

from simulation import memo

IN, NOT_IN, EXISTS, DOES_NOT_EXIST = "In", "NotIn", "Exists", "DoesNotExist"
GT, LT, GTE, LTE = "Gt", "Lt", "Gte", "Lte"
OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT, GTE, LTE)
BOUND_OPERATORS = frozenset({GT, LT, GTE, LTE})

NODEPOOL = "karpenter.sh/nodepool"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"

WELL_KNOWN_LABELS = frozenset({
    NODEPOOL, ZONE, REGION, INSTANCE_TYPE, "kubernetes.io/arch", "kubernetes.io/os",
    CAPACITY_TYPE, "node.kubernetes.io/windows-build",
})

# Aliases Karpenter rewrites before building a requirement.
NORMALIZED_LABELS: Mapping[str, str] = {
    "failure-domain.beta.kubernetes.io/zone": ZONE,
    "beta.kubernetes.io/arch": "kubernetes.io/arch",
    "beta.kubernetes.io/os": "kubernetes.io/os",
    "beta.kubernetes.io/instance-type": INSTANCE_TYPE,
    "failure-domain.beta.kubernetes.io/region": REGION,
}

_INT64_MAX = 2**63 - 1
_INT64_MIN = -(2**63)
_ATOI = re.compile(r"[+-]?[0-9]+\Z")


def atoi(text: str) -> int | None:
    """Go's strconv.Atoi on a 64-bit platform: None where Go returns an error."""
    if not _ATOI.match(text):
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


@dataclasses.dataclass(frozen=True)
class Requirement:
    key: str
    complement: bool
    values: frozenset[str]
    gte: int | None = None
    lte: int | None = None

    @classmethod
    def new(cls, key: str, operator: str, values: Iterable[str] = ()) -> Requirement:
        return _built(key, operator, tuple(values))

    def operator(self) -> str:
        if self.complement:
            return NOT_IN if self.values else EXISTS
        return IN if self.values else DOES_NOT_EXIST

    def has(self, value: str) -> bool:
        if self.complement:
            return value not in self.values and within_bounds(value, self.gte, self.lte)
        return value in self.values and within_bounds(value, self.gte, self.lte)

    def intersection(self, other: Requirement) -> Requirement:
        if self.complement and other.complement:
            values = self.values | other.values
        elif self.complement:
            values = other.values - self.values
        elif other.complement:
            values = self.values - other.values
        else:
            values = self.values & other.values
        return _bounded(self.key, self.complement and other.complement, values, _max(self.gte, other.gte),
                        _min(self.lte, other.lte))

    def has_intersection(self, other: Requirement) -> bool:
        gte = _max(self.gte, other.gte)
        lte = _min(self.lte, other.lte)
        if gte is not None and lte is not None and gte > lte:
            return False
        if self.complement and other.complement:
            return True
        if self.complement:
            return any(v not in self.values and within_bounds(v, gte, lte) for v in other.values)
        if other.complement:
            return any(v not in other.values and within_bounds(v, gte, lte) for v in self.values)
        return any(v in other.values and within_bounds(v, gte, lte) for v in self.values)

    def accepts_undefined(self) -> bool:
        """Karpenter lets a NotIn/DoesNotExist requirement pass where the key is undefined."""
        return self.operator() in (NOT_IN, DOES_NOT_EXIST)

    def describe(self) -> str:
        op = self.operator()
        text = f"{self.key} {op}"
        if op in (IN, NOT_IN):
            text += " [" + ", ".join(sorted(self.values)) + "]"
        if self.gte is not None:
            text += f" >={self.gte}"
        if self.lte is not None:
            text += f" <={self.lte}"
        return text


def within_bounds(value: str, gte: int | None, lte: int | None) -> bool:
    if gte is None and lte is None:
        return True
    n = atoi(value)
    if n is None:
        return False
    return not ((gte is not None and n < gte) or (lte is not None and n > lte))


@functools.lru_cache(maxsize=8192)
def _built(key: str, operator: str, vals: tuple[str, ...]) -> Requirement:
    """Requirement.new. Requirements are values and recur across objects (a NodePool's name, an instance
    family, a zone): each is built once, whether for an overlay, a NodePool or a candidate."""
    key = NORMALIZED_LABELS.get(key, key)
    if operator == IN:
        return Requirement(key, False, frozenset(vals))
    if operator == DOES_NOT_EXIST:
        return Requirement(key, False, frozenset())
    if operator == NOT_IN:
        return Requirement(key, True, frozenset(vals))
    if operator in BOUND_OPERATORS:
        # Karpenter ignores the parse error ("prevalidated"), so a bad value reads as 0.
        n = (atoi(vals[0]) if vals else None) or 0
        if operator == GT:
            if n == _INT64_MAX:
                return Requirement(key, False, frozenset())
            return Requirement(key, True, frozenset(), gte=n + 1)
        if operator == LT:
            return Requirement(key, True, frozenset(), lte=n - 1)
        if operator == GTE:
            return Requirement(key, True, frozenset(), gte=n)
        return Requirement(key, True, frozenset(), lte=n)
    # Exists, and any unknown operator, allow everything: Karpenter builds a bare complement.
    return Requirement(key, True, frozenset())


def _max(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else max(a, b)


def _min(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else min(a, b)


Requirements = Mapping[str, Requirement]


def build(items: Iterable[Requirement]) -> dict[str, Requirement]:
    """Karpenter's Requirements.Add: requirements on one key intersect."""
    listed = list(items)
    keys = [*map(_KEY, listed)]
    # Keys in the order they first come, each with its one requirement; a key that comes again (an overlay's ninety
    # NotIn on one key) with its requirements intersected. Counted and gathered in C, not grouped one by one.
    out = dict(zip(keys, listed, strict=True))
    if len(out) != len(listed):
        for key, count in collections.Counter(keys).items():
            if count > 1:
                out[key] = _intersected([r for r in listed if r.key == key])
    return out


_KEY = operator.attrgetter("key")


def _intersected(group: list[Requirement]) -> Requirement:
    """What intersecting the requirements of one key one after another gives, in one pass: a hundred NotIn on one
    key would otherwise copy their growing union a hundred times. Bounds only tighten along the way, so filtering
    once by the tightest is filtering at every step; a pair of bounds that cross leaves nothing, at any step."""
    gte = max((r.gte for r in group if r.gte is not None), default=None)
    lte = min((r.lte for r in group if r.lte is not None), default=None)
    excluded = frozenset[str]().union(*(r.values for r in group if r.complement))
    allowed = [r.values for r in group if not r.complement]
    complement = not allowed
    made = _bounded(group[0].key, complement,
                    excluded if complement else frozenset.intersection(*allowed) - excluded, gte, lte)
    return memo.bounded(_INTERSECTED, made, lambda: made, _REMEMBERED)


def _bounded(key: str, complement: bool, values: frozenset[str], gte: int | None, lte: int | None) -> Requirement:
    """The requirement on `key` of `values` (all but them, with `complement`) within the bounds `gte`, `lte`: bounds
    that cross leave nothing, and an In keeps no bounds once they have dropped its values."""
    if gte is not None and lte is not None and gte > lte:
        return Requirement(key, False, frozenset())
    if gte is not None or lte is not None:
        # Only bounds drop values: an overlay's hundred NotIn on one key intersect without a pass over each.
        values = frozenset(v for v in values if within_bounds(v, gte, lte))
    if not complement:
        gte = lte = None
    return Requirement(key, complement, values, gte, lte)


# Intersections kept, one object per distinct value: overlays that list the same hundred NotIn values hold one set.
_INTERSECTED: dict[Requirement, Requirement] = {}
_REMEMBERED = 4096


def from_specs(specs: Iterable[tuple[str, str, Iterable[str]]]) -> dict[str, Requirement]:
    return build(Requirement.new(k, op, vals) for k, op, vals in specs)


def from_labels(labels: Mapping[str, str]) -> dict[str, Requirement]:
    return build(Requirement.new(k, IN, (v,)) for k, v in labels.items())


def intersects(existing: Requirements, incoming: Requirements) -> bool:
    """Requirements.Intersects: every shared key must overlap, except NotIn/DoesNotExist pairs."""
    for key in existing.keys() & incoming.keys():
        a, b = existing[key], incoming[key]
        if not a.has_intersection(b) and not (a.accepts_undefined() and b.accepts_undefined()):
            return False
    return True


def compatible(existing: Requirements, incoming: Requirements,
               allow_undefined: frozenset[str] = frozenset()) -> bool:
    """Requirements.Compatible: incoming keys must be defined in `existing` unless they are
    NotIn/DoesNotExist (or allowed undefined), then every shared key must intersect."""
    for key, req in incoming.items():
        if key in allow_undefined or key in existing or req.accepts_undefined():
            continue
        return False
    return intersects(existing, incoming)
