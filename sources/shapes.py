"""Field types checked while the YAML is still at hand, for what the core cannot tell.

- Where a string belongs, an unquoted `on`, `yes`, `1.10` or `0800` is read by YAML as kubectl
  reads it (a boolean or a number), which the API server then refuses or, in a label, Karpenter
  never matches. The user meant the text: a `parse-error` says to quote it, and the object is
  checked on as if it were quoted, so this one slip is reported once.
- NodePools and InstanceTypes are context the core reads leniently (a malformed field becomes
  a neutral value) and no schema check covers: every field of the wrong type is a
  `parse-error`. An InstanceType with one is left out of the catalog rather than ending the run.
- NodeOverlays have the API server's own schema check for every other type error (`schema`).

Schemas are OpenAPI-shaped, small ones written here: a NodeOverlay's metadata, and the fields of
NodePools and InstanceTypes the core reads.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from simulation import findings
from simulation.semantics import model

Path = tuple[str | int, ...]
Schema = Mapping[str, Any]

_STRING: Schema = {"type": "string"}
_INT: Schema = {"type": "integer"}
_QUANTITY: Schema = {"x-kubernetes-int-or-string": True}
_STRINGS: Schema = {"type": "object", "additionalProperties": _STRING}


def _object(**properties: Schema) -> Schema:
    return {"type": "object", "properties": properties}


def _list(items: Schema) -> Schema:
    return {"type": "array", "items": items}


_METADATA = _object(name=_STRING, generateName=_STRING, namespace=_STRING, labels=_STRINGS, annotations=_STRINGS)
_REQUIREMENT = _object(key=_STRING, operator=_STRING, values=_list(_STRING), minValues=_INT)
_NODEPOOL = _object(metadata=_METADATA, spec=_object(
    weight=_INT,
    template=_object(metadata=_object(labels=_STRINGS, annotations=_STRINGS),
                     spec=_object(requirements=_list(_REQUIREMENT)))))
# Offerings carry labels and a price; the catalog reads a price written as a number too.
# Of a NodeOverlay only the metadata: its spec is the API server's to refuse (`schema`).
_NODEOVERLAY = _object(metadata=_METADATA)
_OFFERING = {"type": "object", "additionalProperties": _STRING,
             "properties": {"karpenter.sh/price": {"type": ["string", "number"]},
                            "price": {"type": ["string", "number"]},
                            "available": {"type": "boolean"}, "estimated": {"type": "boolean"}}}
_INSTANCETYPE = _object(metadata=_METADATA, spec=_object(
    offerings=_list(_OFFERING), resources={"type": "object", "additionalProperties": _QUANTITY}))


@dataclasses.dataclass(frozen=True)
class Problem:
    """A field whose type the object's kind does not allow."""

    path: Path
    message: str


def check(obj: dict[str, Any], plain: Mapping[Path, str]) -> tuple[list[Problem], bool]:
    """Problems with the field types of `obj` (one of our kinds), and whether it can still be
    used. Quoting slips are repaired in `obj` in place."""
    kind = model.kind_of(obj)
    strict = kind != model.NODEOVERLAY
    schema = {model.NODEPOOL: _NODEPOOL, model.INSTANCETYPE: _INSTANCETYPE}.get(kind or "", _NODEOVERLAY)
    walk = _Walk(plain, strict)
    walk.value(obj, schema, ())
    # The catalog refuses an InstanceType with a field of the wrong type, and would end the run.
    usable = not (kind == model.INSTANCETYPE and walk.mistyped)
    return walk.problems, usable


_TYPES: Mapping[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "object": (dict,), "array": (list,),
}
_NAMES = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "a boolean",
          "object": "a mapping", "array": "a list", "quantity": "a quantity (a string or an integer)"}


def _is(value: Any, wanted: str) -> bool:
    if isinstance(value, bool) and wanted != "boolean":
        return False
    return isinstance(value, _TYPES[wanted])


def _describe(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{'a string' if isinstance(value, str) else 'a number'} {json.dumps(value)}"


def _field(path: Path) -> str:
    return findings.json_path(*path) or "the object"


class _Walk:
    def __init__(self, plain: Mapping[Path, str], strict: bool) -> None:
        self.plain = plain
        self.strict = strict
        self.problems: list[Problem] = []
        self.mistyped = False

    def value(self, value: Any, schema: Schema, path: Path) -> Any:
        """`value`, or its text when it is an unquoted scalar where a string belongs."""
        if value is None:
            return value  # the API server drops nulls of optional fields
        if schema.get("x-kubernetes-int-or-string"):
            if not (isinstance(value, str | int) and not isinstance(value, bool)):
                return self._mistyped(value, "quantity", path)
            return value
        raw = schema.get("type")
        wanted = [raw] if isinstance(raw, str) else list(raw or ())
        if not wanted:
            return value
        if not any(_is(value, w) for w in wanted):
            return self._mistyped(value, wanted[0], path)
        if isinstance(value, dict):
            self._mapping(value, schema, path)
        elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
            for i, item in enumerate(value):
                value[i] = self.value(item, schema["items"], (*path, i))
        return value

    def _mapping(self, value: dict[str, Any], schema: Schema, path: Path) -> None:
        properties = schema.get("properties", {})
        rest = schema.get("additionalProperties")
        for key, item in value.items():
            sub = properties.get(key, rest)
            if isinstance(sub, Mapping):
                value[key] = self.value(item, sub, (*path, key))

    def _mistyped(self, value: Any, wanted: str, path: Path) -> Any:
        text = self.plain.get(path)
        # A quantity is a number as often as a string; `true` there is no slip of quoting.
        slip = wanted == "string" or (wanted == "quantity" and not isinstance(value, bool))
        # A NodeOverlay's spec is the API server's to refuse (`schema`, the overlay is Invalid): repairing
        # the slip here would simulate an overlay that can never be stored.
        if text is not None and slip and (self.strict or path[:1] == ("metadata",)):
            what = "a boolean" if isinstance(value, bool) else "a number"
            self.problems.append(Problem(path, (
                f"{_field(path)}: the unquoted {text} is read as {what} ({json.dumps(value)}), as kubectl "
                f"reads YAML; a string belongs here: quote it ({json.dumps(text)})")))
            return text
        if self.strict:
            self.mistyped = True
            self.problems.append(Problem(path, f"{_field(path)}: must be {_NAMES[wanted]}, not {_describe(value)}"))
        return value
