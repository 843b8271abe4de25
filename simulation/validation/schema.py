"""The API server's verdict on a NodeOverlay, offline: the CRD's OpenAPI schema (through jsonschema), each of
its CEL rules (re-implemented in cel.py, keyed by the rule's exact text), object-metadata checks, and the
strict field validation kubectl asks for. The CRD shipped as package data is the only source of the schema."""

from __future__ import annotations

import functools
import importlib.resources
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

import jsonschema
from ruamel.yaml import YAML

from simulation import findings
from simulation.validation import cel, legacy
from simulation.validation.syntax import (
    dns_subdomain_errors,
    label_value_errors,
    plain_json,
    qualified_name_errors,
)

Path = tuple[str | int, ...]
_LAYER = {"layer": "apiserver"}


@functools.cache
def crd() -> dict[str, Any]:
    text = (importlib.resources.files("simulation") / "data" / "nodeoverlays.crd.yaml").read_text("utf-8")
    loaded: dict[str, Any] = YAML(typ="safe", pure=True).load(text)
    return loaded


def openapi_schema() -> dict[str, Any]:
    """The openAPIV3Schema of the storage version."""
    version = next(v for v in crd()["spec"]["versions"] if v.get("storage"))
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def validation_rules() -> list[tuple[Path, str, str]]:
    """Every x-kubernetes-validations rule of the CRD as (schema location, rule, message)."""
    out: list[tuple[Path, str, str]] = []

    def visit(node: Mapping[str, Any], at: Path) -> None:
        out.extend((at, r["rule"], r.get("message", "")) for r in node.get("x-kubernetes-validations", ()))
        for name, child in node.get("properties", {}).items():
            visit(child, (*at, "properties", name))
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), Mapping):
                visit(node[key], (*at, key))

    visit(openapi_schema(), ())
    return out


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


def _go_pattern(_v: Any, pattern: str, instance: Any, _s: Any) -> Iterator[jsonschema.ValidationError]:
    if isinstance(instance, str) and not cel.go_regex(pattern).search(instance):
        yield jsonschema.ValidationError(f"does not match {pattern}")


@functools.cache
def _validator() -> Any:
    extend: Any = jsonschema.validators.extend  # untyped in the stubs
    validator_class = extend(jsonschema.Draft202012Validator, {"goPattern": _go_pattern})
    return validator_class(_to_json_schema(openapi_schema()))


class _Issue(NamedTuple):
    path: Path
    message: str
    code: str | None = None
    typing: bool = False  # a wrong type: the one finding worth making at that path
    detail: Mapping[str, str] = {}


def _schema_issues(instance: dict[str, Any]) -> Iterator[_Issue]:
    for error in _validator().iter_errors(instance):
        path: Path = tuple(error.absolute_path)
        kind, want, value, schema = error.validator, error.validator_value, error.instance, error.schema
        here = findings.json_path(*path) or "object"
        if kind == "type":
            wanted = " or ".join(legacy.TYPE_NAMES[t] for t in ([want] if isinstance(want, str) else want))
            yield _Issue(path, f"{here}: must be {wanted}, not {legacy.describe(value)}", typing=True)
        elif kind == "anyOf":  # only int-or-string quantities use it
            yield _Issue(path, f"{here}: must be a quantity, not {legacy.describe(value)}", typing=True)
        elif kind == "required":
            for name in (n for n in want if n not in value):
                yield _Issue((*path, name), f"{findings.json_path(*path, name)}: required field is missing")
        elif kind == "additionalProperties":
            defined = schema.get("properties", {})
            yield from (_unknown(path, n, value[n], defined, instance) for n in value if n not in defined)
        elif kind == "enum":
            choices = ", ".join(want)
            yield _Issue(path, f"{here}: unsupported value {legacy.quote(value)}: must be one of {choices}")
        elif kind == "goPattern":
            yield _Issue(path, f"{here}: {legacy.quote(value)} is not {legacy.pattern_name(want)}")
        else:
            yield _Issue(path, f"{here}: {legacy.bound_message(kind, want, value)}")


def _unknown(parent: Path, name: str, value: Any, defined: Iterable[str], obj: dict[str, Any]) -> _Issue:
    message, code, detail = legacy.unknown_field(parent, name, value, defined, cel.dig(obj, "spec") or {})
    return _Issue((*parent, name), message, code, detail=detail)


# --- object metadata, which the API server checks for every kind ----------------------------------

_OBJECT_META = ("annotations", "creationTimestamp", "deletionGracePeriodSeconds", "deletionTimestamp",
                "finalizers", "generateName", "generation", "labels", "managedFields", "name", "namespace",
                "ownerReferences", "resourceVersion", "selfLink", "uid")


def _metadata_issues(obj: dict[str, Any]) -> Iterator[_Issue]:
    meta = obj.get("metadata", {})
    if not isinstance(meta, dict):
        return  # the schema's type check reports it
    yield from (_unknown(("metadata",), n, meta[n], _OBJECT_META, obj) for n in meta if n not in _OBJECT_META)
    name = meta.get("name")
    if name is None or name == "":
        if not meta.get("generateName"):  # else the API server makes the name up
            yield _Issue(("metadata", "name"), "metadata.name: required field is missing")
    elif not isinstance(name, str):
        yield _Issue(("metadata", "name"), f"metadata.name: must be a string, not {legacy.describe(name)}",
                     typing=True)
    elif errors := dns_subdomain_errors(name):
        yield _Issue(("metadata", "name"), f"metadata.name: {legacy.quote(name)} {'; '.join(errors)}")
    for field in ("labels", "annotations"):
        entries = {} if meta.get(field) is None else meta[field]  # ObjectMeta decodes null as empty
        if not isinstance(entries, dict):
            yield _Issue(("metadata", field), f"metadata.{field}: must be a map of strings", typing=True)
            continue
        for key, value in entries.items():
            problems = [f"key {e}" for e in qualified_name_errors(key)]
            value = "" if value is None else value
            if not isinstance(value, str):
                problems.append(f"value must be a string, not {legacy.describe(value)}")
            elif field == "labels":
                problems += [f"value {e}" for e in label_value_errors(value)]
            if problems:
                path = ("metadata", field, key)
                yield _Issue(path, f"{findings.json_path(*path)}: {'; '.join(problems)}")


# --- putting it together --------------------------------------------------------------------------

_TYPES: Mapping[str, type] = {"object": dict, "array": list, "string": str}


def _rule_sites(node: Mapping[str, Any], value: Any,
                path: Path) -> Iterator[tuple[Mapping[str, str], Any, Path]]:
    # Rules run only on values of the declared type: a mistyped value is the schema's finding alone.
    if not isinstance(value, _TYPES.get(node.get("type", ""), ())):
        return
    for rule in node.get("x-kubernetes-validations", ()):
        yield rule, value, path
    if isinstance(value, dict):
        for key, child in value.items():
            schema = node.get("properties", {}).get(key, node.get("additionalProperties"))
            if isinstance(schema, Mapping):
                yield from _rule_sites(schema, child, (*path, key))
    elif isinstance(value, list) and isinstance(node.get("items"), Mapping):
        for i, child in enumerate(value):
            yield from _rule_sites(node["items"], child, (*path, i))


def _cel_issues(obj: dict[str, Any]) -> Iterator[_Issue]:
    for rule, value, path in _rule_sites(openapi_schema(), obj, ()):
        for violation in cel.CEL_RULES[rule["rule"]](value):
            at = (*path, *violation.at)
            note = f" ({violation.note})" if violation.note else ""
            text = rule.get("message", rule["rule"])
            yield _Issue(at, f"{findings.json_path(*at) or 'object'}: {text}{note}", violation.code)


def _code(issue: _Issue) -> str:
    if issue.code:
        return issue.code
    area = issue.path[:3]
    if area == ("spec", "dynamicResources", "resourceSliceTemplates"):
        return "invalid-resource-slice-template"
    if area == ("spec", "dynamicResources", "attributeBindings"):
        return "invalid-attribute-binding"
    return "schema"


def _ignored_values(obj: dict[str, Any], ref: findings.ObjectRef,
                    source: int | None) -> Iterator[findings.Finding]:
    requirements = cel.dig(obj, "spec", "requirements")
    for i, req in enumerate(requirements if isinstance(requirements, list) else ()):
        operator, values = cel.dig(req, "operator"), cel.dig(req, "values")
        if operator in ("Exists", "DoesNotExist") and isinstance(values, list) and values:
            path = ("spec", "requirements", i, "values")
            message = f"{findings.json_path(*path)}: Karpenter ignores the values of {operator}; remove them"
            yield findings.make("ignored-values", ref, path, message, source=source)


def check(obj: Mapping[str, Any], ref: findings.ObjectRef, source: int | None) -> list[findings.Finding]:
    """Everything the API server would reject in one raw NodeOverlay, plus ignored-values warnings."""
    plain = as_validated(obj)
    if not isinstance(plain, dict):
        return [findings.make("schema", ref, (), f"object: must be an object, not {legacy.describe(plain)}",
                              source=source, detail=_LAYER)]
    issues = [*_schema_issues(plain), *_metadata_issues(plain), *_cel_issues(plain)]
    if isinstance(cel.dig(plain, "spec", "selector"), dict):
        # The selector's migration already says what the requirements should be.
        issues = [i for i in issues if i.path != ("spec", "requirements")]
    # A field the RFC excludes is refused whole with the RFC's reason, whatever its value's type.
    excluded = {i.path for i in issues if not i.typing and i.path
                and legacy.excluded_reason(i.path[:-1], str(i.path[-1])) is not None}
    issues = [i for i in issues if not (i.typing and any(i.path[:len(x)] == x for x in excluded))]
    mistyped = {i.path for i in issues if i.typing}
    out = [findings.make(_code(i), ref, i.path, i.message, source=source, detail={**i.detail, **_LAYER})
           for i in issues if i.typing or i.path not in mistyped]
    return findings.ordered([*out, *_ignored_values(plain, ref, source)])


def as_validated(obj: Any) -> Any:
    """The object as the API server validates it: plain JSON, with nulls of non-nullable fields dropped (the
    API server prunes them first, so `weight: null` means no weight, not a wrongly typed one)."""
    return _drop_nulls(plain_json(obj), openapi_schema())


def _drop_nulls(value: Any, node: Mapping[str, Any] | None) -> Any:
    if isinstance(value, dict):
        known = node.get("properties", {}) if node else {}
        extra = node.get("additionalProperties") if node else None
        out: dict[str, Any] = {}
        for key, child in value.items():
            schema = known.get(key, extra if isinstance(extra, Mapping) else None)
            # Unknown fields keep their nulls: strict decoding rejects them before any pruning.
            if child is not None or schema is None or schema.get("nullable"):
                out[key] = _drop_nulls(child, schema)
        return out
    if isinstance(value, list) and node and isinstance(node.get("items"), Mapping):
        return [_drop_nulls(child, node["items"]) for child in value]
    return value
