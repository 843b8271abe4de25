"""NodeOverlay CRDs compiled for validation: the schema as a tree of places holding CEL rules, a jsonschema
validator for the OpenAPI part, and the rules compiled once (cel.py). The CRD is data: Karpenter's own by
default (what `kubectl apply` checks in a cluster that runs Karpenter), the project's DRA-extended one (package
data) when chosen, or the one the user runs, which the front ends read (`--crd FILE`, the cluster) and hand in
through `load`. A `Crd` is compared by identity."""

from __future__ import annotations

import copy
import dataclasses
import functools
import re
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import fastjsonschema

from simulation import memo, once, packagedata
from simulation.memo import Memo
from simulation.validation import cel

if TYPE_CHECKING:
    import jsonschema

GROUP, KIND, VERSION = "karpenter.sh", "NodeOverlay", "v1alpha1"
NAME = "nodeoverlays.karpenter.sh"
DRA_FIELD = ("spec", "dynamicResources")
# The release whose CRD `karpenter()` is: the one the oracle pins (hack/karpenter-oracle/go.mod).
KARPENTER_RELEASE = "v1.15.0"


class CrdError(ValueError):
    """Not a usable NodeOverlay CRD; the message says why."""


@dataclasses.dataclass(frozen=True, eq=False)
class Crd:
    """A NodeOverlay CRD compiled for validation: its schema, a jsonschema validator and its CEL rules."""

    origin: str
    openapi: Mapping[str, Any] = dataclasses.field(repr=False)
    # The OpenAPI schema as JSON Schema (_to_json_schema), for the validator.
    converted: Mapping[str, Any] = dataclasses.field(repr=False)
    node: Node = dataclasses.field(repr=False)
    # True only for an instance the validator finds no error in, at a fraction of its cost; None where the
    # schema could not be compiled for it. Most objects are valid: only the rest pay for the error walk.
    accepts: Callable[[Any], bool] | None = dataclasses.field(default=None, repr=False)

    @once.Once
    def validator(self) -> Any:
        """The jsonschema validator that names each error. Made on first use: most runs meet only objects the
        quick check accepts, and importing jsonschema costs a one-file check a third of its start-up."""
        return _validator_class()(self.converted)

    def defines(self, *path: str) -> bool:
        """Whether the schema declares the field at `path` (property names from the object's root)."""
        node: Node | None = self.node
        for name in path:
            node = node.properties.get(name) if node is not None else None
        return node is not None

    @once.Once
    def extended(self) -> bool:
        """Whether the CRD has the DRA extension (Karpenter's own has not): asked for every overlay checked."""
        return self.defines(*DRA_FIELD)

    def rules(self) -> list[cel.Rule]:
        return [rule for rule_set in self.node.rule_sets() for rule in rule_set.rules]

    def unchecked(self) -> list[tuple[str, str]]:
        """(rule, why) for each rule the guard cannot evaluate: the API server may reject what passes here."""
        return [(r.text, r.skipped) for r in self.rules() if r.skipped is not None]


@dataclasses.dataclass(frozen=True)
class Node:
    """One place in the schema: what rule evaluation and null pruning need of it."""

    type: str
    nullable: bool
    rules: cel.RuleSet
    properties: Mapping[str, Node]
    items: Node | None
    additional: Node | None
    # Whether a rule sits here or below: rule evaluation need not walk the rest of an object.
    guarded: bool = True
    # The properties that are guarded, and whether any value this node admits beyond them may be.
    guarded_properties: Mapping[str, Node] = dataclasses.field(default_factory=dict)
    guarded_rest: bool = True
    # As an element of a list: the rules' violations at and under an element, per element value (schema.py).
    memo: Memo[Any] = dataclasses.field(default_factory=Memo, compare=False, repr=False)
    # As a list: the rules' violations at and under it, per value. Whether null pruning keeps a value here as it is
    # (a list, or an element of one), per value.
    lists: Memo[Any] = dataclasses.field(default_factory=Memo, compare=False, repr=False)
    kept: Memo[bool] = dataclasses.field(default_factory=Memo, compare=False, repr=False)

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> Node:
        def child(key: str) -> Node | None:
            return cls.of(raw[key]) if isinstance(raw.get(key), Mapping) else None

        raw_properties = raw.get("properties")
        properties = {str(k): cls.of(v) for k, v in
                      (raw_properties.items() if isinstance(raw_properties, Mapping) else ()) if isinstance(v, Mapping)}
        rules = cel.RuleSet.of(raw.get("x-kubernetes-validations") or ())
        items, additional = child("items"), child("additionalProperties")
        below = (*properties.values(), items, additional)
        return cls(str(raw.get("type", "")), bool(raw.get("nullable")), rules, properties, items, additional,
                   bool(rules.rules) or any(n is not None and n.guarded for n in below),
                   {k: n for k, n in properties.items() if n.guarded}, additional is not None and additional.guarded)

    def rule_sets(self) -> Iterator[cel.RuleSet]:
        yield self.rules
        for node in (*self.properties.values(), self.items, self.additional):
            if node is not None:
                yield from node.rule_sets()


def load(raw: Any, origin: str, *, trusted: bool = False) -> Crd:
    """Compile a parsed CustomResourceDefinition of NodeOverlays; CrdError if it is not one. `trusted`: the
    schema is not checked against JSON Schema's metaschema (the embedded CRD's is, by tests/test_schema_crd.py)."""
    if not isinstance(raw, dict) or raw.get("kind") != "CustomResourceDefinition":
        raise CrdError(f"{origin}: not a CustomResourceDefinition")
    kind, group = dig(raw, "spec", "names", "kind"), dig(raw, "spec", "group")
    if (kind, group) != (KIND, GROUP):
        raise CrdError(f"{origin}: the CRD is for {kind}.{group}, not {KIND}.{GROUP}")
    versions = dig(raw, "spec", "versions")
    version = next((v for v in versions if dig(v, "name") == VERSION), None) if isinstance(versions, list) else None
    openapi = dig(version, "schema", "openAPIV3Schema")
    if not isinstance(openapi, dict):
        raise CrdError(f"{origin}: the CRD has no {VERSION} version with an openAPIV3Schema")
    try:
        converted = _to_json_schema(openapi)
        if not trusted:
            _check_schema(converted)
        for pattern in _patterns(converted):
            go_regex(pattern)
        return Crd(origin, openapi, converted, Node.of(openapi), _quick_check(converted))
    except (AttributeError, TypeError, ValueError, re.error) as err:
        # The API server would not have accepted such a CRD; nothing of it can be trusted.
        raise CrdError(f"{origin}: not a usable openAPIV3Schema: {str(err).splitlines()[0]}") from None


def load_from(documents: Iterable[Any], origin: str) -> Crd:
    """The NodeOverlay CRD among parsed documents: a file may hold all of Karpenter's CRDs, or a List."""
    found: list[Any] = []
    for doc in documents:
        listed = isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List")
        found += [i for i in doc.get("items") or () if isinstance(i, dict)] if listed else [doc]
    named = [d for d in found if dig(d, "metadata", "name") == NAME]
    if not (named or found):
        raise CrdError(f"{origin}: no CustomResourceDefinition in it")
    return load((named or found)[0], origin)


def _patterns(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("goPattern"), str):
            yield node["goPattern"]
        for child in node.values():
            yield from _patterns(child)
    elif isinstance(node, list):
        for child in node:
            yield from _patterns(child)


@functools.cache
def raw_dra() -> Mapping[str, Any]:
    """The project's DRA-extended CRD (manifests/crd/, shipped as package data), as parsed YAML."""
    loaded: Mapping[str, Any] = packagedata.yaml_twin("nodeoverlays.crd.yaml")
    return loaded


@functools.cache
def raw_karpenter() -> Mapping[str, Any]:
    """Karpenter's own CRD as its release ships it: the DRA-extended one without `spec.dynamicResources`,
    which is all the two differ in (tests/test_schema_crd.py compares it with Karpenter's file), so the
    project ships one copy of the schema."""
    raw: dict[str, Any] = copy.deepcopy(dict(raw_dra()))
    for version in dig(raw, "spec", "versions") or ():
        properties = dig(version, "schema", "openAPIV3Schema", "properties", *DRA_FIELD[:-1], "properties")
        if isinstance(properties, dict):
            properties.pop(DRA_FIELD[-1], None)
    return raw


@functools.cache
def karpenter() -> Crd:
    """The default: what the API server of a cluster running Karpenter checks."""
    return load(raw_karpenter(), f"the embedded NodeOverlay CRD of Karpenter {KARPENTER_RELEASE}",
                trusted=True)


@functools.cache
def dra() -> Crd:
    """The DRA extension, chosen explicitly (`--crd dra`)."""
    return load(raw_dra(), "the embedded DRA-extended NodeOverlay CRD", trusted=True)


# --- jsonschema over the OpenAPI schema -----------------------------------------------------------

_KEPT = ("type", "required", "enum", "maxLength", "minLength", "maximum", "minimum", "maxItems", "minItems",
         "maxProperties", "minProperties", "multipleOf", "uniqueItems")


def _to_json_schema(node: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: node[k] for k in _KEPT if k in node}
    if "pattern" in node:
        out["goPattern"] = node["pattern"]
    if "properties" in node:
        out["properties"] = {k: _to_json_schema(v) for k, v in node["properties"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), Mapping):
            out[key] = _to_json_schema(node[key])
    for key in ("anyOf", "allOf", "oneOf"):
        if key in node:
            out[key] = [_to_json_schema(v) for v in node[key]]
    if node.get("x-kubernetes-int-or-string") and "anyOf" not in out:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    # Without additionalProperties an object admits only its properties: the strict field validation that
    # kubectl asks for by default rejects the rest.
    if "properties" in node and "additionalProperties" not in node \
            and not node.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


@functools.cache
def go_regex(pattern: str) -> re.Pattern[str]:
    """An OpenAPI `pattern` as Go's regexp reads it. Python's re is far quicker to call than RE2's wrapper
    and, for the patterns CRDs use, agrees once `$` means the very end and `\\d` is ASCII. Spelled as the quick
    check's generated code compiles it (_as_patterns: `(?a)` and the same `$`), the two share one compiled pattern."""
    return re.compile("(?a)" + re.sub(r"(?<!\\)\$", r"\\Z", pattern))


# The schema of one requirement: a NodeOverlay holds up to a hundred, and overlays repeat the same few.
_REQUIREMENT = ("properties", "spec", "properties", "requirements", "items")


def _quick_check(converted: Mapping[str, Any]) -> Callable[[Any], bool] | None:
    """The converted schema compiled to Python by fastjsonschema, as a yes/no check (tests/test_schema_quick.py
    shows it agrees with the validator). Patterns keep Go's reading: go_regex's `$` (fastjsonschema makes the
    same substitution) and ASCII classes. A requirement is checked apart, once per distinct one: an object is
    valid when it is with any requirements and each of its requirements is (JSON Schema's `items`), and most
    of an overlay's check was its requirements (a few microseconds each)."""
    requirement = _dig(converted, _REQUIREMENT)
    try:
        whole = _compiled(_replaced(converted, _REQUIREMENT, {}) if requirement is not None else converted)
        one = _compiled(requirement) if requirement is not None else None
    except Exception:  # fastjsonschema refuses with many types; the validator alone still does the job
        return None
    verdicts: memo.Memo[bool] = memo.Memo()
    lists: memo.Memo[bool] = memo.Memo()

    def accepts(instance: Any) -> bool:
        if not _passes(whole, instance):
            return False
        spec = instance.get("spec") if type(instance) is dict else None
        requirements = spec.get("requirements") if type(spec) is dict else None
        if one is None or type(requirements) is not list:
            return True
        passes = functools.partial(_passes, one)

        def each_passes(listed: list[Any]) -> bool:
            found: list[bool] = memo.each(verdicts, memo.parts(listed), listed, passes)
            return all(found)

        # Per requirement list too: lists recur whole across overlays.
        return memo.remembered(lists, requirements, each_passes)

    return accepts


def _compiled(schema: Mapping[str, Any]) -> Callable[[Any], Any]:
    return typing.cast(Callable[[Any], Any], fastjsonschema.compile(
        _as_patterns(schema), use_default=False, use_formats=False, detailed_exceptions=False))


def _passes(validate: Callable[[Any], Any], instance: Any) -> bool:
    try:
        validate(instance)
    except Exception:  # a rejection, or a value the generated code cannot handle: the validator decides
        return False
    return True


def _dig(schema: Mapping[str, Any], path: Sequence[str]) -> Mapping[str, Any] | None:
    for name in path:
        child = schema.get(name) if isinstance(schema, Mapping) else None
        if not isinstance(child, Mapping):
            return None
        schema = child
    return schema


def _replaced(schema: Mapping[str, Any], path: Sequence[str], by: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `schema` with the schema at `path` replaced."""
    out = dict(schema)
    out[path[0]] = by if len(path) == 1 else _replaced(schema[path[0]], path[1:], by)
    return out


def _as_patterns(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The converted schema with each goPattern as a standard pattern (only schemas are walked: a property
    may be named goPattern)."""
    out = {k: v for k, v in schema.items() if k != "goPattern"}
    if "goPattern" in schema:
        if not isinstance(schema["goPattern"], str):
            raise TypeError("goPattern must be a string")
        out["pattern"] = "(?a)" + schema["goPattern"]
    if isinstance(schema.get("properties"), Mapping):
        out["properties"] = {k: _as_patterns(v) for k, v in schema["properties"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), Mapping):
            out[key] = _as_patterns(schema[key])
    for key in ("anyOf", "allOf", "oneOf"):
        if isinstance(schema.get(key), list):
            out[key] = [_as_patterns(v) for v in schema[key]]
    if isinstance(out.get("anyOf"), list):
        # The generated code tries the branches in order and a failed one costs an exception: int-or-string
        # quantities are mostly written as strings, so that branch goes first (the verdict is the same).
        out["anyOf"] = sorted(out["anyOf"], key=lambda branch: branch.get("type") != "string")
    return out


@functools.cache
def _validator_class() -> Any:
    import jsonschema  # only where an object fails the quick check, or a CRD is read: see Crd.validator

    extend: Any = jsonschema.validators.extend  # untyped in the stubs
    return extend(jsonschema.Draft202012Validator, {"goPattern": _go_pattern})


def _check_schema(converted: Mapping[str, Any]) -> None:
    import jsonschema

    try:
        _validator_class().check_schema(converted)
    except jsonschema.SchemaError as err:
        raise ValueError(str(err)) from None


def _go_pattern(_v: Any, pattern: str, instance: Any, _s: Any) -> Iterator[jsonschema.ValidationError]:
    import jsonschema

    if isinstance(instance, str) and not go_regex(pattern).search(instance):
        yield jsonschema.ValidationError(f"does not match {pattern}")


def dig(value: Any, *keys: str | int) -> Any:
    for key in keys:
        if isinstance(value, dict):
            value = value.get(key)
        elif isinstance(value, list) and isinstance(key, int) and 0 <= key < len(value):
            value = value[key]
        else:
            return None
    return value
