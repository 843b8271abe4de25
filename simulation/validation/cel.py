"""The CRD's CEL rules in Python, keyed by each rule's exact text (a test checks that every rule in the
CRD has exactly one implementation here, so a new rule cannot go unchecked)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

from simulation.validation import legacy
from simulation.validation.syntax import parse_go_int

Path = tuple[str | int, ...]

@functools.cache
def go_regex(pattern: str) -> re.Pattern[str]:
    # Go's `$` matches only at the very end and its `\d` is ASCII; Python needs \Z and re.ASCII for the same.
    return re.compile(re.sub(r"(?<!\\)\$", r"\\Z", pattern), re.ASCII)


# --- CEL rules: exact rule text -> where the rule fails -------------------------------------------

class Violation(NamedTuple):
    """Where a rule fails, relative to the value it validates; `code` overrides the code of the area."""

    at: Path = ()
    note: str = ""
    code: str | None = None


Rule = Callable[[Any], Iterator[Violation]]
_ABSENT = object()
_QN = "^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z_][A-Za-z0-9_]{0,31}$"


def _unless(holds: Callable[[Any], bool]) -> Rule:
    def rule(value: Any) -> Iterator[Violation]:
        if not holds(value):
            yield Violation()
    return rule


def _karpenter_domain(key: str) -> bool:
    # The rule looks at the text before the first slash (the whole key when there is none), at its end only:
    # "notkarpenter.sh/x" and "mykarpenter.sh" are rejected too, which Karpenter's own check would allow.
    found = go_regex("^([^/]+)").search(key)
    return key in ("karpenter.sh/capacity-type", "karpenter.sh/nodepool") or \
        not (found.group(0) if found else "").endswith("karpenter.sh")


def _requirement_rule(operators: tuple[str, ...], ok: Callable[[list[Any]], bool | None]) -> Rule:
    # `ok` returns None when a value has the wrong type: the schema reports that, and CEL would not run.
    def rule(requirements: list[Any]) -> Iterator[Violation]:
        for i, req in enumerate(requirements):
            if not isinstance(req, dict) or req.get("operator") not in operators:
                continue
            values = req.get("values", _ABSENT)
            # A missing optional list is CEL's "no such key" error, which rejects the object as well.
            if values is _ABSENT or (isinstance(values, list) and ok(values) is False):
                yield Violation((i,), f"operator {req['operator']}")
    return rule


def _single_non_negative(values: list[Any]) -> bool | None:
    if len(values) != 1:
        return False
    if not isinstance(values[0], str):
        return None
    number = parse_go_int(values[0])
    return number is not None and number >= 0


def _one_attribute_value(attribute: dict[str, Any]) -> Iterator[Violation]:
    present = [k for k in ("string", "int", "bool", "version", "bindingKey") if k in attribute]
    if len(present) != 1:
        note = f"has {', '.join(present) or 'none'}"
        # A bindingKey beside a concrete value breaks a bindingKey rule: reported where the DRA checks put it.
        binding = "bindingKey" in present
        yield Violation(("bindingKey",), note, "invalid-binding-key") if binding else Violation((), note)


def _combined_size(device: dict[str, Any]) -> Iterator[Violation]:
    maps = [device.get(k, {}) for k in ("attributes", "capacity")]
    if all(isinstance(m, dict) for m in maps) and sum(map(len, maps)) > 32:
        yield Violation((), f"has {sum(map(len, maps))}")


def _unique(name_path: tuple[str, ...]) -> Rule:
    def rule(items: list[Any]) -> Iterator[Violation]:
        first: dict[str, int] = {}
        for i, item in enumerate(items):
            name = dig(item, *name_path)
            if isinstance(name, str) and first.setdefault(name, i) != i:
                yield Violation((i, *name_path), f'"{name}" is also item {first[name]}')
    return rule


def _size(holds: Callable[[int], bool]) -> Rule:
    def rule(items: list[Any]) -> Iterator[Violation]:
        if not holds(len(items)):
            yield Violation((), f"has {len(items)}")
    return rule


def _each_key(holds: Callable[[str], bool]) -> Rule:
    def rule(mapping: dict[str, Any]) -> Iterator[Violation]:
        yield from (Violation((key,)) for key in mapping if not holds(key))
    return rule


def _absent(name: str) -> Rule:
    """A field the DRA RFC excludes: the CRD declares it only to reject it with the RFC's reason."""
    def rule(node: dict[str, Any]) -> Iterator[Violation]:
        if name in node:
            yield Violation((name,), "", "invalid-resource-slice-template")
    return rule


def dig(value: Any, *keys: str) -> Any:
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


CEL_RULES: Mapping[str, Rule] = {
    "self.all(x, !(x in ['cpu', 'memory', 'ephemeral-storage', 'pods']))":
        _each_key(lambda name: name not in ("cpu", "memory", "ephemeral-storage", "pods")),
    'self in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || '
    '!self.find("^([^/]+)").endsWith("karpenter.sh")': _unless(_karpenter_domain),
    'self != "kubernetes.io/hostname"': _unless(lambda key: key != "kubernetes.io/hostname"),
    "self.all(x, x.operator == 'NotIn' ? x.values.size() != 0 : true)":
        _requirement_rule(("NotIn",), lambda values: len(values) != 0),
    "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)":
        _requirement_rule(("In",), lambda values: len(values) != 0),
    "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? "
    "(x.values.size() == 1 && int(x.values[0]) >= 0) : true)":
        _requirement_rule(("Gt", "Lt", "Gte", "Lte"), _single_non_negative),
    "!has(self.price) || !has(self.priceAdjustment)":
        _unless(lambda spec: "price" not in spec or "priceAdjustment" not in spec),
    "self.indexOf('/') <= 63": _unless(lambda name: name.find("/") <= 63),
    "self.size() >= 2": _size(lambda n: n >= 2),
    "(has(self.string) ? 1 : 0) + (has(self.int) ? 1 : 0) + (has(self.bool) ? 1 : 0) + "
    "(has(self.version) ? 1 : 0) + (has(self.bindingKey) ? 1 : 0) == 1": _one_attribute_value,
    f"self.all(k, k.matches('{_QN}') && k.indexOf('/') <= 63)":
        _each_key(lambda key: bool(go_regex(_QN).search(key)) and key.find("/") <= 63),
    "(has(self.attributes) ? self.attributes.size() : 0) + (has(self.capacity) ? self.capacity.size() : 0) "
    "<= 32": _combined_size,
    "self.all(d, self.exists_one(e, e.name == d.name))": _unique(("name",)),
    "self.size() == 1": _size(lambda n: n == 1),
    "self.all(t, self.exists_one(u, u.metadata.name == t.metadata.name))": _unique(("metadata", "name")),
    **{f"!has(self.{name})": _absent(name)
       for name in {*legacy.EXCLUDED_TEMPLATE_SPEC_FIELDS, *legacy.EXCLUDED_DEVICE_FIELDS}},
}
