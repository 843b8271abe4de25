"""Typed views of the raw objects the core reasons about.

Parsing here is deliberately forgiving: a malformed field becomes a neutral value, because the
schema and runtime checks report the problem and mark the overlay Invalid, so the engine never
uses it. Nothing in this module raises on user input.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Hashable, Mapping
from operator import attrgetter
from typing import Any, cast

from simulation import findings, memo, once
from simulation.semantics import requirements as reqs

NODEOVERLAY = "NodeOverlay"
NODEPOOL = "NodePool"
INSTANCETYPE = "InstanceType"
OVERLAY_API = "karpenter.sh/v1alpha1"
NODEPOOL_API = "karpenter.sh/v1"


@dataclasses.dataclass(frozen=True)
class ReqSpec:
    """One requirement as written: key, operator and values."""

    key: str
    operator: str
    values: tuple[str, ...]

    # One object per distinct requirement (_spec), held by every list that holds it: its Requirement is made once
    # for all of them, and read at C speed after (a thousand new lists of a hundred requirements each).
    @once.Once
    def requirement(self) -> reqs.Requirement:
        return reqs.Requirement.new(self.key, self.operator, self.values)


@dataclasses.dataclass(frozen=True)
class Template:
    """One ResourceSlice template an overlay adds: its index, name and driver."""

    index: int
    name: str
    driver: str


@dataclasses.dataclass(frozen=True)
class Overlay:
    """A NodeOverlay's fields that Karpenter reads."""

    name: str
    weight: int
    requirements: tuple[ReqSpec, ...]
    price: str | None
    price_adjustment: str | None
    capacity: tuple[tuple[str, str], ...]
    templates: tuple[Template, ...]
    source: int | None = None
    # `capacity: {}` is not absent for Karpenter: it still becomes the "last" capacity update.
    capacity_set: bool = False

    # Read for every finding on the overlay and every filter of a report: built once per overlay.
    @once.Once
    def ref(self) -> findings.ObjectRef:
        return findings.ObjectRef(NODEOVERLAY, self.name)

    # Read by every overlap test of Karpenter's (thousands of neighbours per broad candidate): worked out once.
    @once.Once
    def price_update(self) -> str | None:
        """Karpenter stores price and priceAdjustment as one field: price wins when both exist."""
        return self.price if self.price is not None else self.price_adjustment

    @property
    def price_path(self) -> tuple[str | int, ...]:
        return ("spec", "price") if self.price is not None else ("spec", "priceAdjustment")

    def requirement_map(self) -> dict[str, reqs.Requirement]:
        # A copy: the map is the caller's to change, the intersection made once per distinct requirement list.
        shared: dict[str, reqs.Requirement] = memo.held(_MAPS, self.requirements, _requirement_map)
        return dict(shared)

    def label_keys(self) -> frozenset[str]:
        """Its requirements' keys as Karpenter normalizes them, made once per distinct requirement list."""
        return memo.held(_KEYS, self.requirements, _label_keys)

    def drivers(self) -> tuple[str, ...]:
        return tuple(sorted({t.driver for t in self.templates}))


@dataclasses.dataclass(frozen=True)
class NodePool:
    """A NodePool's fields that choose instance types: weight, labels and requirements."""

    name: str
    weight: int
    labels: Mapping[str, str]
    requirements: tuple[ReqSpec, ...]
    source: int | None = None
    implicit: bool = False

    @property
    def ref(self) -> findings.ObjectRef:
        return findings.ObjectRef(NODEPOOL, self.name)

    def launch_requirements(self) -> dict[str, reqs.Requirement]:
        """What a node this NodePool launches must satisfy: its template's requirements (minValues aside)
        and each template label as `In [value]`, as Karpenter's NodeClaimTemplate combines them."""
        specs = [(r.key, r.operator, r.values) for r in self.requirements]
        specs += [(k, reqs.IN, (v,)) for k, v in self.labels.items()]
        return reqs.from_specs(specs)


IMPLICIT_NODEPOOL = NodePool("default", 0, {}, (), None, implicit=True)


def kind_of(obj: Any) -> str | None:
    # A dict first (as _mapping): the abstract Mapping costs more to test than the rest.
    kind = obj.get("kind") if type(obj) is dict or isinstance(obj, Mapping) else None
    return kind if isinstance(kind, str) else None


def name_of(obj: Any) -> str | None:
    meta = obj.get("metadata") if type(obj) is dict or isinstance(obj, Mapping) else None
    name = meta.get("name") if type(meta) is dict or isinstance(meta, Mapping) else None
    return name if isinstance(name, str) and name else None


def _mapping(value: Any) -> Mapping[str, Any]:
    # A dict first: testing against the abstract Mapping costs more than the rest of a small object's parse.
    return value if type(value) is dict or isinstance(value, Mapping) else {}


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


_STR = frozenset({str})


def _req_specs(raw: Any) -> tuple[ReqSpec, ...]:
    # Requirement lists recur whole across overlays: one tuple of specs per distinct list.
    if not isinstance(raw, list):
        return ()
    made = memo.key(raw)
    return memo.known(_SPECS, made, raw, lambda value: _specs_of(value, made))


_SPECS: memo.Memo[tuple[ReqSpec, ...]] = memo.Memo()


def _requirement_map(specs: tuple[ReqSpec, ...]) -> dict[str, reqs.Requirement]:
    return reqs.build(map(_REQUIREMENT, specs))


_REQUIREMENT = attrgetter("requirement")


# Per tuple of specs (one per distinct requirement list, _SPECS): its requirements intersected per key.
_MAPS: dict[int, tuple[Any, dict[str, reqs.Requirement]]] = {}


def _label_keys(specs: tuple[ReqSpec, ...]) -> frozenset[str]:
    return frozenset(reqs.NORMALIZED_LABELS.get(r.key, r.key) for r in specs)


_KEYS: dict[int, tuple[Any, frozenset[str]]] = {}


def _specs_of(raw: list[Any], key: Hashable | None) -> tuple[ReqSpec, ...]:
    # Per requirement too: a new list holds requirements met before. `key`: the list's (memo.key), already made.
    made: list[ReqSpec | tuple[()]] = memo.each(_SPEC, memo.parts(raw, key), raw, _spec_of)
    return cast(tuple[ReqSpec, ...], tuple(filter(None, made)))  # () is falsy, a spec is not


# Per requirement: its spec, or () when it has no string key and operator (skipped).
_SPEC: memo.Memo[ReqSpec | tuple[()]] = memo.Memo()


def _spec_of(item: Any) -> ReqSpec | tuple[()]:
    item = _mapping(item)
    key, op, values = item.get("key"), item.get("operator"), item.get("values")
    if not (isinstance(key, str) and isinstance(op, str)):
        return ()
    if not isinstance(values, list):
        values = ()
    elif not set(map(type, values)) <= _STR:  # strings only (most lists) are kept whole
        values = [v for v in values if isinstance(v, str)]
    return _spec(key, op, tuple(values))


@functools.lru_cache(maxsize=8192)
def _spec(key: str, operator: str, values: tuple[str, ...]) -> ReqSpec:
    """One object per distinct requirement: overlays repeat theirs (a hundred each, the same few across 10,000)."""
    return ReqSpec(key, operator, values)


def requirements_of(obj: Mapping[str, Any]) -> Any:
    """An overlay's `spec.requirements` as it stands (None when it has none)."""
    return _mapping(obj.get("spec")).get("requirements")


def overlay_requirements(obj: Mapping[str, Any], operator: str) -> tuple[ReqSpec, ...]:
    """An overlay's requirements with one operator, as `overlay` reads them: the others are not built (a
    question about the In ones of 10,000 overlays of a hundred requirements each)."""
    raw = requirements_of(obj)
    # A dict tested first: the abstract Mapping costs more than the rest of the filter.
    return _req_specs([r for r in raw if (type(r) is dict or isinstance(r, Mapping)) and r.get("operator") == operator]
                      if isinstance(raw, list) else None)


def _string_labels(raw: Any) -> dict[str, str]:
    return {k: v for k, v in _mapping(raw).items() if isinstance(k, str) and isinstance(v, str)}


def overlay(obj: Mapping[str, Any], source: int | None = None) -> Overlay:
    spec = _mapping(obj.get("spec"))
    raw_capacity = spec.get("capacity")
    capacity = tuple(sorted(
        (k, v if isinstance(v, str) else str(v))
        for k, v in _mapping(raw_capacity).items()
        if isinstance(k, str) and isinstance(v, (str, int)) and not isinstance(v, bool))) if raw_capacity else ()
    dyn = spec.get("dynamicResources")
    # Positional: this runs for every overlay checked, and keywords cost a dataclass more to bind.
    return Overlay(name_of(obj) or "", _int(spec.get("weight")), _req_specs(spec.get("requirements")),
                   _str(spec.get("price")), _str(spec.get("priceAdjustment")), capacity,
                   _templates(_mapping(dyn).get("resourceSliceTemplates")) if dyn else (), source,
                   isinstance(raw_capacity, Mapping))


def _templates(raw: Any) -> tuple[Template, ...]:
    templates = []
    for i, t in enumerate(raw if isinstance(raw, list) else ()):
        name = _str(_mapping(_mapping(t).get("metadata")).get("name")) or f"#{i}"
        driver = _str(_mapping(_mapping(t).get("spec")).get("driver"))
        if driver:
            templates.append(Template(i, name, driver))
    return tuple(templates)


def nodepool(obj: Mapping[str, Any], source: int | None = None) -> NodePool:
    spec = _mapping(obj.get("spec"))
    template = _mapping(spec.get("template"))
    return NodePool(
        name=name_of(obj) or "",
        weight=_int(spec.get("weight")),
        labels=_string_labels(_mapping(template.get("metadata")).get("labels")),
        requirements=_req_specs(_mapping(template.get("spec")).get("requirements")),
        source=source,
    )
