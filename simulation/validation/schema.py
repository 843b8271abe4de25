"""The API server's verdict on a NodeOverlay, offline: the CRD's OpenAPI schema (through jsonschema), its CEL
rules (evaluated by cel.py), object-metadata checks, and the strict field validation kubectl asks for; against
the CRD given (crds.py), Karpenter's own by default."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from simulation import findings, memo
from simulation.validation import cel, crds, legacy
from simulation.validation.syntax import (
    dns_subdomain_errors,
    label_value_errors,
    plain_json,
    plain_key,
    qualified_name_errors,
)

Path = tuple[str | int, ...]
_LAYER = {"layer": "apiserver"}


class _Issue(NamedTuple):
    path: Path
    message: str
    code: str | None = None
    typing: bool = False  # a wrong type: the one finding worth making at that path
    detail: Mapping[str, str] = {}
    # Besides a wrong type, what keeps the API server from evaluating any CEL rule: a missing required field,
    # a value outside an enum, and (`oversized`) one over a maximum length, item or property count.
    blocking: bool = False
    oversized: bool = False


def _schema_issues(crd: crds.Crd, instance: dict[str, Any]) -> Iterator[_Issue]:
    if crd.accepts is not None and crd.accepts(instance):
        return
    for error in crd.validator.iter_errors(instance):
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
                yield _Issue((*path, name), f"{findings.json_path(*path, name)}: required field is missing",
                             blocking=True)
        elif kind == "additionalProperties":
            defined = schema.get("properties", {})
            yield from (_unknown(path, n, value[n], defined, instance) for n in value if n not in defined)
        elif kind == "enum":
            choices = ", ".join(want)
            yield _Issue(path, f"{here}: unsupported value {legacy.quote(value)}: must be one of {choices}",
                         blocking=True)
        elif kind == "goPattern":
            yield _Issue(path, f"{here}: {legacy.quote(value)} is not {legacy.pattern_name(want)}")
        else:
            yield _Issue(path, f"{here}: {legacy.bound_message(kind, want, value)}",
                         oversized=kind in ("maxLength", "maxItems", "maxProperties"))


def _unknown(parent: Path, name: str, value: Any, defined: Iterable[str], obj: dict[str, Any]) -> _Issue:
    message, code, detail = legacy.unknown_field(parent, name, value, defined, crds.dig(obj, "spec") or {})
    if (*parent, name) == crds.DRA_FIELD:
        # The hint (analysis/hints.py) says how to choose the extension.
        message += "; the NodeOverlay CRD in use has no DRA extension (Karpenter's own has none)"
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
    yield from _name_issues(meta)
    for field in ("labels", "annotations"):
        if meta.get(field) is not None:  # ObjectMeta decodes null as empty: nothing to check
            yield from _string_map_issues(meta, field)


def _name_issues(meta: dict[str, Any]) -> Iterator[_Issue]:
    name = meta.get("name")
    if name is None or name == "":
        if not meta.get("generateName"):  # else the API server makes the name up
            yield _Issue(("metadata", "name"), "metadata.name: required field is missing")
    elif not isinstance(name, str):
        yield _Issue(("metadata", "name"), f"metadata.name: must be a string, not {legacy.describe(name)}",
                     typing=True)
    elif errors := dns_subdomain_errors(name):
        yield _Issue(("metadata", "name"), f"metadata.name: {legacy.quote(name)} {'; '.join(errors)}")


def _string_map_issues(meta: dict[str, Any], field: str) -> Iterator[_Issue]:
    entries = {} if meta.get(field) is None else meta[field]  # ObjectMeta decodes null as empty
    if not isinstance(entries, dict):
        yield _Issue(("metadata", field), f"metadata.{field}: must be a map of strings", typing=True)
        return
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

_TYPES: Mapping[str, tuple[type, ...]] = {"object": (dict,), "array": (list,), "string": (str,),
                                          "integer": (int,), "number": (int, float), "boolean": (bool,)}


# Where a rule fails: the path of the value it validates, and the violation (its path relative to that).
_Found = list[tuple[Path, cel.Violation]]


def _violations(node: crds.Node, value: Any, path: Path, out: _Found) -> None:
    """Appends the violations of the rules at every place of `value` (a list, not a generator: this walk runs
    for every object)."""
    # Rules run only on values of the declared type: a mistyped value is the schema's finding alone.
    wanted = _TYPES.get(node.type, ())
    if not node.guarded or not isinstance(value, wanted) or (isinstance(value, bool) and bool not in wanted):
        return
    if type(value) is list:
        if found := _list_violations(node, value):
            out += (((*path, *at), v) for at, v in found)
        return
    _violations_here(node, value, path, out)


def _violations_here(node: crds.Node, value: Any, path: Path, out: _Found) -> None:
    if node.rules.rules:
        out += ((path, v) for v in cel.violations(node.rules, value))
    if isinstance(value, dict):
        _property_violations(node, value, path, out)
    elif isinstance(value, list) and node.items is not None and node.items.guarded:
        # Elements (requirements above all) recur across objects: the walk under each is remembered per element.
        items = node.items
        for i, found in enumerate(memo.each(items.memo, memo.parts(value), value, _walker(items, _violations))):
            if found:
                out += (((*path, i, *at), v) for at, v in found)


def _list_violations(node: crds.Node, value: list[Any]) -> tuple[tuple[Path, cel.Violation], ...]:
    """The violations at and under a list, relative to it. A list (an overlay's requirements above all) recurs
    whole across objects: remembered per value, its rules and its elements' lookups made once."""
    return memo.remembered(node.lists, value, _walker(node, _violations_here))


def _walker(node: crds.Node, walk: Callable[[crds.Node, Any, Path, _Found], None]) \
        -> Callable[[Any], tuple[tuple[Path, cel.Violation], ...]]:
    """walk's violations of a value at `node`, from the value's own root (what a memo keeps)."""
    def walked(value: Any) -> tuple[tuple[Path, cel.Violation], ...]:
        out: _Found = []
        walk(node, value, (), out)
        return tuple(out)

    return walked


def _property_violations(node: crds.Node, value: dict[str, Any], path: Path, out: _Found) -> None:
    if not node.guarded_rest:  # only the few properties with rules at or under them are walked
        for key, schema in node.guarded_properties.items():
            if key in value:
                _violations(schema, value[key], (*path, key), out)
        return
    for key, child in value.items():
        place = node.properties.get(key) or node.additional
        if place is not None:
            _violations(place, child, (*path, key), out)


def _cel_issues(crd: crds.Crd, obj: dict[str, Any], blocked: bool) -> Iterator[_Issue]:
    """The rules' violations. The API server evaluates none when a blocking error stands; all of them are
    still reported, so that one run shows every problem, but for rules that fail to evaluate: those
    errors (a required field missing, say) come from the blocking error itself."""
    found: _Found = []
    _violations(crd.node, obj, (), found)
    for path, violation in found:
        if blocked and violation.error:
            continue
        at = (*path, *violation.at)
        message = f"{findings.json_path(*at) or 'object'}: {violation.message}"
        if _binding_key_beside_a_value(at, crds.dig(obj, *at)):
            # The DRA RFC's bindingKey rule (a bindingKey excludes any concrete value in the same
            # attribute): reported where the DRA checks report bindingKeys.
            yield _Issue((*at, "bindingKey"), message, "invalid-binding-key")
        else:
            yield _Issue(at, message)


def _binding_key_beside_a_value(at: Path, value: Any) -> bool:
    # spec.dynamicResources.resourceSliceTemplates[i].spec.devices[j].attributes[name]
    return (len(at) == 9 and at[:3] == (*crds.DRA_FIELD, "resourceSliceTemplates") and at[7] == "attributes"
            and isinstance(value, dict) and "bindingKey" in value and len(value) > 1)


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
    spec = obj.get("spec")
    requirements = spec.get("requirements") if isinstance(spec, dict) else None
    if not isinstance(requirements, list):
        return
    for i, ignoring in memo.remembered(_IGNORED, requirements, _ignoring):
        path = ("spec", "requirements", i, "values")
        message = f"{findings.json_path(*path)}: Karpenter ignores the values of {ignoring}; remove them"
        yield findings.make("ignored-values", ref, path, message, source=source)


# The requirements whose values Karpenter ignores, per requirement list (lists recur across overlays), and the
# operator so ignored per requirement ("" for none; requirements recur across lists).
_IGNORED: memo.Memo[tuple[tuple[int, str], ...]] = memo.Memo()
_IGNORING: memo.Memo[str] = memo.Memo()


def _ignoring(requirements: list[Any]) -> tuple[tuple[int, str], ...]:
    """(index, operator) of each requirement whose operator ignores the values it has."""
    found = memo.each(_IGNORING, memo.parts(requirements), requirements, _ignored_by)
    return tuple((i, operator) for i, operator in enumerate(found) if operator)


def _ignored_by(req: Any) -> str:
    operator, values = (req.get("operator"), req.get("values")) if isinstance(req, dict) else (None, None)
    return operator if operator in ("Exists", "DoesNotExist") and isinstance(values, list) and values else ""


def check(obj: Mapping[str, Any], ref: findings.ObjectRef, source: int | None,
          crd: crds.Crd | None = None, *, validated: Any = None) -> list[findings.Finding]:
    """Everything the API server would reject in one raw NodeOverlay, plus ignored-values warnings; against
    Karpenter's CRD unless another is given. `validated`: as_validated(obj, crd), when the caller has it."""
    crd = crd or crds.karpenter()
    plain = as_validated(obj, crd) if validated is None else validated
    if not isinstance(plain, dict):
        return [findings.make("schema", ref, (), f"object: must be an object, not {legacy.describe(plain)}",
                              source=source, detail=_LAYER)]
    issues = [*_schema_issues(crd, plain), *_metadata_issues(plain)]
    # The CRD's size limits bound what its rules cost (the API server's CEL cost budget rests on them):
    # past one, no rule is evaluated, as on the API server.
    if not any(i.oversized for i in issues):
        issues += _cel_issues(crd, plain, blocked=any(i.typing or i.blocking for i in issues))
    if not issues:  # most objects
        return findings.ordered(_ignored_values(plain, ref, source))
    if isinstance(crds.dig(plain, "spec", "selector"), dict):
        # The selector's migration already says what the requirements should be.
        issues = [i for i in issues if i.path != ("spec", "requirements")]
    issues = [_excluded(i) for i in issues]
    # A wrong type is the one finding at its path.
    mistyped: dict[Path, _Issue] = {}
    for issue in issues:
        if issue.typing:
            mistyped.setdefault(issue.path, issue)
    kept = [*mistyped.values(), *(i for i in issues if not i.typing and i.path not in mistyped)]
    out = [findings.make(_code(i), ref, i.path, i.message, source=source, detail={**i.detail, **_LAYER})
           for i in kept]
    return findings.ordered([*out, *_ignored_values(plain, ref, source)])


def _excluded(issue: _Issue) -> _Issue:
    """A field the RFC excludes is refused with the RFC's reason, whatever its value's type: a wrong type in
    or under it (which keeps the API server from evaluating the rule that gives the reason) says so too."""
    if not issue.typing:
        return issue
    for end in range(1, len(issue.path) + 1):
        parent, name = issue.path[:end - 1], str(issue.path[end - 1])
        reason = legacy.excluded_reason(parent, name)
        if reason is not None:
            where = findings.json_path(*issue.path[:end])
            return issue._replace(path=issue.path[:end],
                                  message=f"{where}: {name} is not part of a ResourceSliceTemplate: {reason}")
    return issue


def as_validated(obj: Any, crd: crds.Crd | None = None) -> Any:
    """The object as the API server validates it: plain JSON, with nulls of non-nullable fields dropped (the
    API server prunes them first, so `weight: null` means no weight, not a wrongly typed one)."""
    return _plain_pruned(obj, (crd or crds.karpenter()).node)


_LEAVES = frozenset({str, int, float, bool, type(None)})
# Leaves that stay as they are wherever they stand (a null may be pruned).
_PLAIN_LEAVES = frozenset({str, int, float, bool})
_STR = frozenset({str})


def _plain_pruned(value: Any, node: crds.Node | None) -> Any:
    """plain_json(value) with the nulls pruned, in one walk. A value that is already plain and has nothing to
    prune is returned itself, not copied (most objects from JSON or YAML: nothing judges the copy in place)."""
    kind = type(value)
    if node is None or kind in _LEAVES:
        return plain_json(value)
    if kind is list and _scalars(value):  # most lists
        return value
    if kind is list or isinstance(value, list | tuple):  # before Mapping, an abstract class and slower to test
        return _plain_list(value, node)
    if kind is dict and None not in value.values() and set(map(type, value)) == _STR:
        # Nothing to prune here, keys already names: copied only when a nested value is converted.
        copy = value
        for key, child in value.items():
            kind = type(child)
            # A list of plain scalars (a requirement's values) is tested here: a call each was much of the walk.
            if kind not in _PLAIN_LEAVES and (kind is not list or not _scalars(child)):
                made = _plain_pruned(child, node.properties.get(key, node.additional))
                if made is not child:
                    if copy is value:
                        copy = value.copy()
                    copy[key] = made
        return copy
    if kind is dict or isinstance(value, dict | Mapping):
        return _pruned_mapping(value, node)
    return plain_json(value)


def _scalars(value: list[Any]) -> bool:
    """Whether a list holds plain scalars only; one of maps (an overlay's requirements) is told by its first item."""
    return (not value or type(value[0]) in _LEAVES) and set(map(type, value)) <= _LEAVES


def _plain_list(value: list[Any] | tuple[Any, ...], node: crds.Node) -> list[Any]:
    items = node.items
    # A list of maps (an overlay's requirements) recurs whole across objects: whether it is kept as it is,
    # remembered per value.
    if type(value) is list and memo.remembered(node.kept, value, lambda v: _kept(v, items)):
        return value
    return _pruned_list(value, items)


def _kept(value: list[Any], items: crds.Node | None) -> bool:
    """Whether pruning keeps a list as it is: whether it keeps each element as it is, remembered per element at
    the elements' place (a new list of a hundred requirements holds requirements met before)."""
    if items is None:
        return _pruned_list(value, items) is value
    def alone(child: Any) -> bool:
        return type(child) in _PLAIN_LEAVES or _plain_pruned(child, items) is child

    found: list[bool] = memo.each(items.kept, memo.parts(value), value, alone)
    return all(found)


def _pruned_list(value: list[Any] | tuple[Any, ...], items: crds.Node | None) -> list[Any]:
    # Leaves are kept as they are: they are most of an object, and a call each is most of the walk.
    made = [child if type(child) in _PLAIN_LEAVES else _plain_pruned(child, items) for child in value]
    return value if type(value) is list and all(map(operator.is_, made, value)) else made


def _pruned_mapping(value: Mapping[Any, Any], node: crds.Node) -> dict[str, Any]:
    properties, additional = node.properties, node.additional
    out: dict[str, Any] = {}
    for raw_key, child in value.items():
        key = raw_key if type(raw_key) is str else plain_key(raw_key)
        schema = properties.get(key, additional)
        if child is None:
            # Unknown fields keep their nulls: strict decoding rejects them before any pruning.
            if schema is None or schema.nullable:
                out[key] = None
            else:
                out.pop(key, None)  # two keys the same in JSON (true and "true"): the later one counts
        else:
            out[key] = child if type(child) in _PLAIN_LEAVES else _plain_pruned(child, schema)
    return out
