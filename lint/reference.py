"""Reference documents made from the core's own lists: docs/cli.md's code table and the JSON Schema of
`overlay-lint check --format json` (from the finding codes), the JSON Schemas of `overlay-lint simulate
--format json` and `overlay-lint diff --format json` (from Karpenter's overlay states), and the JSON twin of each
YAML file of the core's package data (read at start-up instead of the YAML). All are committed; `make reference`
rewrites them and tests/test_reference.py fails when a committed copy differs from what this module makes."""

from __future__ import annotations

import json
import pathlib
import sys
from collections.abc import Sequence
from typing import Any

from ruamel.yaml import YAML

from simulation import codes
from simulation.semantics import merge

ROOT = pathlib.Path(__file__).resolve().parent.parent
CODES_DOC = ROOT / "docs" / "cli.md"
SCHEMA = pathlib.Path(__file__).resolve().parent / "schemas" / "check-output.schema.json"
SIMULATE_SCHEMA = SCHEMA.parent / "simulate-output.schema.json"
DIFF_SCHEMA = SCHEMA.parent / "diff-output.schema.json"
PACKAGE_DATA = ROOT / "simulation" / "data"
# The code table sits between these two lines, so regenerating it leaves the prose around it alone.
TABLE_START = "<!-- finding-codes:start (made by `make reference` from simulation/codes.py) -->"
TABLE_END = "<!-- finding-codes:end -->"


def codes_table() -> str:
    rows = ["| code | severity | when |", "|---|---|---|"]
    rows += [f"| `{c.code}` | {c.severity} | {c.when} |" for c in codes.ALL]
    return "\n".join(rows) + "\n"


def codes_block() -> str:
    # Blank lines around the table: Markdown would otherwise read a marker as part of the table.
    return "\n" + codes_table() + "\n"


def codes_section(text: str) -> str:
    """What the document's text holds between the markers."""
    start, end = _markers(text)
    return text[start:end]


def with_table(text: str) -> str:
    start, end = _markers(text)
    return text[:start] + codes_block() + text[end:]


def _markers(text: str) -> tuple[int, int]:
    start = text.find(TABLE_START + "\n")
    end = text.find(TABLE_END, start)
    if start < 0 or end < 0:
        raise ValueError(f"{CODES_DOC.name} has no {TABLE_START!r} ... {TABLE_END!r} block")
    return start + len(TABLE_START) + 1, end


def _strings(*required: str) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "required": list(required),
            "properties": {key: {"type": "string"} for key in required}}


def _count() -> dict[str, Any]:
    return {"type": "integer", "minimum": 0}


def _position() -> dict[str, Any]:
    return {"type": ["integer", "null"], "minimum": 1}


def _finding() -> dict[str, Any]:
    offering = _strings("zone", "capacityType")
    witness = _strings("nodepool", "instanceType")
    witness["properties"]["offering"] = offering
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["code", "severity", "object", "field", "message", "related", "file", "line", "column"],
        "properties": {
            "code": {"oneOf": [{"const": c.code, "description": c.short} for c in codes.ALL]},
            "severity": {"enum": [str(s) for s in sorted(codes.Severity, reverse=True)]},
            "object": {"$ref": "#/$defs/object"},
            "field": {"type": "string", "description": "JSON path of the field inside the object"},
            "message": {"type": "string"},
            "related": {"type": "array", "items": {"$ref": "#/$defs/object"}},
            "witness": witness,
            "detail": {"type": "object", "additionalProperties": {"type": "string"}, "properties": {
                "disjoint": {"type": "object", "additionalProperties": False, "required": ["overlay", "requirement"],
                             "description": "the requirement to add to one overlay's spec.requirements that "
                                            "parts it from the other",
                             "properties": {"overlay": {"type": "string"}, "requirement": {
                                 "type": "object", "additionalProperties": False,
                                 "required": ["key", "operator", "values"],
                                 "properties": {"key": {"type": "string"}, "operator": {"const": "NotIn"},
                                                "values": {"type": "array", "items": {"type": "string"}}}}}}}},
            "hint": {"type": "string", "minLength": 1},
            "file": {"type": ["string", "null"]},
            "line": _position(),
            "column": _position(),
            # A fleet's findings name the cluster judged (docs/cli.md "Fleets").
            "cluster": {"type": "string", "minLength": 1},
        },
    }


def check_output_schema() -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "overlay-lint check --format json",
        "type": "object",
        "additionalProperties": False,
        "required": ["findings", "summary", "notes"],
        "properties": {
            "findings": {"type": "array", "items": {"$ref": "#/$defs/finding"}},
            "summary": {"type": "object", "additionalProperties": False,
                        "required": ["errors", "warnings", "objects"],
                        "properties": {"errors": _count(), "warnings": _count(), "objects": _count(),
                                       "clusters": {"type": "object", "additionalProperties": {
                                           "$ref": "#/$defs/counts"}}}},
            "notes": {"type": "array", "items": {"type": "string"}},
        },
        "$defs": {"finding": _finding(), "object": _strings("kind", "name"),
                  "counts": {"type": "object", "additionalProperties": False,
                             "required": ["errors", "warnings", "objects"],
                             "properties": {"errors": _count(), "warnings": _count(), "objects": _count()}}},
    }


def schema_text() -> str:
    return json.dumps(check_output_schema(), indent=2) + "\n"


def _names_to(value: dict[str, Any], description: str) -> dict[str, Any]:
    return {"type": "object", "description": description, "propertyNames": {"minLength": 1},
            "additionalProperties": value}


def _price(description: str) -> dict[str, Any]:
    return {"type": ["number", "null"], "minimum": 0, "description": description}


def _launchable(what: str) -> dict[str, Any]:
    return {"type": "boolean", "description": f"false where the NodePool's requirements and template labels never "
                                              f"launch {what}: Karpenter's overlay store still holds it"}


def _offering() -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["zone", "capacityType", "basePrice", "price", "priceOverlay", "estimated", "available",
                     "launchable"],
        "properties": {
            "zone": {"type": "string", "minLength": 1},
            "capacityType": {"type": "string", "minLength": 1},
            "basePrice": _price("the catalog's price; null where it publishes none"),
            "price": _price("the price Karpenter will use, the applied overlay's price change in effect"),
            "priceOverlay": {"type": ["string", "null"], "description": "the overlay whose price is in effect"},
            "estimated": {"type": "boolean", "description": "the base price is an estimate, not published upstream"},
            "available": {"type": "boolean", "description": "false where the offering has no price to launch at"},
            "launchable": _launchable("the offering"),
        },
    }


def _cell() -> dict[str, Any]:
    overlay = {"type": "string", "minLength": 1, "description": "the overlay whose value is in effect"}
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["launchable", "capacity", "allocatable", "capacityOverlays", "offerings",
                     "resourceSliceTemplates"],
        "properties": {
            "launchable": _launchable("any offering of the instance type"),
            "capacity": _names_to({"type": "string", "minLength": 1},
                                  "resource -> quantity in Kubernetes' canonical form: the catalog's (net of the "
                                  "kubelet and system overhead), overlays applied"),
            "allocatable": _names_to({"type": "string", "minLength": 1},
                                     "resource -> quantity Karpenter schedules against: the capacity with every "
                                     "hugepages-* quantity taken off the memory, clamped at 0"),
            "capacityOverlays": _names_to(overlay, "resource -> the overlay that set its capacity"),
            "offerings": {"type": "array", "items": {"$ref": "#/$defs/offering"}},
            "resourceSliceTemplates": _names_to(overlay, "DRA driver -> the overlay whose templates are in effect"),
        },
    }


def simulate_output_schema() -> dict[str, Any]:
    status = {
        "type": "object",
        "additionalProperties": False,
        "required": ["status", "reason"],
        "properties": {
            "status": {"enum": [str(s) for s in merge.State], "description":
                       "the status condition Karpenter will set (Invalid for schema and runtime-invalid overlays)"},
            "reason": {"type": "string", "description": "empty when Applied"},
        },
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "overlay-lint simulate --format json",
        "type": "object",
        "additionalProperties": False,
        "required": ["overlays", "nodepools"],
        "properties": {
            "overlays": _names_to(status, "NodeOverlay name -> its status"),
            "nodepools": _names_to(_names_to({"$ref": "#/$defs/cell"}, "instance type -> its simulated effect"),
                                   "NodePool name -> instance types"),
        },
        "$defs": {"cell": _cell(), "offering": _offering()},
    }


def simulate_schema_text() -> str:
    return json.dumps(simulate_output_schema(), indent=2) + "\n"


def _nullable(kind: str, description: str) -> dict[str, Any]:
    return {"type": [kind, "null"], "description": description}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "required": list(properties), "properties": properties}


def _side_status() -> dict[str, Any]:
    return {"oneOf": [{"type": "null", "description": "the overlay does not exist on this side"},
                      _object({"status": {"enum": [str(s) for s in merge.State]}, "reason": {"type": "string"}})]}


def diff_output_schema() -> dict[str, Any]:
    overlay = _nullable("string", "the overlay whose value is in effect on that side")
    percent = _nullable("number", "the change in percent; null when a side has no price")
    findings = {"type": "array", "items": {"$ref": "#/$defs/finding"}}
    one = _object({
            "base": {"type": "string", "description": "what the base side is read from"},
            "head": {"type": "string", "description": "what the head side is read from"},
            "headline": {"type": "string"},
            "summary": _object({k: _count() for k in (
                "overlaysChanged", "statusChanges", "stopsApplying", "overlaysUnchanged", "offeringsChanged",
                "dearer", "cheaper", "heldPrices", "heldResources", "heldTemplates", "resourcesChanged",
                "templatesChanged", "findingsIntroduced", "errorsIntroduced", "findingsResolved")}),
            "overlays": {"type": "array", "items": _object({
                "name": {"type": "string", "minLength": 1},
                "change": {"enum": ["added", "removed", "changed", "renamed", "unchanged"],
                           "description": "unchanged: the spec is the same and only the status moves"},
                "renamedFrom": _nullable("string", "a renamed overlay's old name"),
                "before": _side_status(), "after": _side_status()})},
            "nodepools": _object({k: {"type": "array", "items": {"type": "string"}}
                                  for k in ("added", "removed", "changed")}),
            "pools": {"type": "array", "items": _object({
                "nodepool": {"type": "string"}, "offerings": _count(), "resources": _count(),
                "medianPercent": percent, "lowestPercent": percent, "highestPercent": percent})},
            "prices": {"type": "array", "description": "largest change first", "items": _object({
                "nodepool": {"type": "string"}, "instanceType": {"type": "string"}, "zone": {"type": "string"},
                "capacityType": {"type": "string"},
                "before": _price("the effective price before; null when the offering has none"),
                "after": _price("the effective price after; null when the offering has none"),
                "percent": percent, "beforeOverlay": overlay, "afterOverlay": overlay,
                "presentBefore": {"type": "boolean"}, "presentAfter": {"type": "boolean"},
                "estimated": {"type": "boolean", "description": "a base price not published upstream"}})},
            "pricesOmitted": _count(),
            "resources": {"type": "array", "items": _object({
                "nodepool": {"type": "string"}, "instanceType": {"type": "string"}, "resource": {"type": "string"},
                "figure": {"enum": ["capacity", "allocatable"]},
                "before": _nullable("string", "the quantity before; null when absent"),
                "after": _nullable("string", "the quantity after; null when absent"),
                "beforeOverlay": overlay, "afterOverlay": overlay})},
            "resourcesOmitted": _count(),
            "resourceSliceTemplates": {"type": "array", "items": _object({
                "nodepool": {"type": "string"}, "instanceType": {"type": "string"}, "driver": {"type": "string"},
                "beforeOverlay": overlay, "afterOverlay": overlay})},
            "introduced": findings,
            "resolved": findings,
            "notes": {"type": "array", "items": {"type": "string"}},
        })
    # A repository of several clusters (docs/cli.md "Fleets"): the clusters the change touches, each as one.
    fleet = _object({
        "base": {"type": "string"}, "head": {"type": "string"}, "headline": {"type": "string"},
        "clusters": {"type": "array", "items": _object({
            "cluster": {"type": "string", "minLength": 1},
            "change": {"enum": ["changed", "added", "removed"]},
            "diff": {"$ref": "#/$defs/diff"}})},
        "unchanged": {"type": "array", "items": {"type": "string"},
                      "description": "clusters on both sides the change leaves as they were"},
        "notes": {"type": "array", "items": {"type": "string"}},
    })
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "overlay-lint diff --format json",
        "oneOf": [{"$ref": "#/$defs/diff"}, fleet],
        "$defs": {"diff": one, "finding": _finding(), "object": _strings("kind", "name")},
    }


def diff_schema_text() -> str:
    return json.dumps(diff_output_schema(), indent=2) + "\n"


def json_twins() -> dict[pathlib.Path, str]:
    """Per YAML file of the package data, its JSON twin (packagedata.yaml_twin): the same value, parsed as the
    core parsed the YAML before (YAML 1.2 safe, pure Python)."""
    return {path.with_name(path.name + ".json"):
            json.dumps(YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8")), indent=1) + "\n"
            for path in sorted(PACKAGE_DATA.glob("*.yaml"))}


def main(argv: Sequence[str]) -> int:
    """Rewrite the committed copies (no arguments), or with --check report which ones are stale."""
    check = list(argv) == ["--check"]
    if argv and not check:
        sys.stderr.write("usage: python -m lint.reference [--check]\n")
        return 2
    doc = CODES_DOC.read_text(encoding="utf-8")
    wanted = {CODES_DOC: with_table(doc), SCHEMA: schema_text(), SIMULATE_SCHEMA: simulate_schema_text(),
              DIFF_SCHEMA: diff_schema_text(), **json_twins()}
    stale = [path for path, text in wanted.items()
             if not path.exists() or path.read_text(encoding="utf-8") != text]
    for path in stale:
        if check:
            sys.stderr.write(f"{path.relative_to(ROOT)} is stale: run `make reference`\n")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(wanted[path], encoding="utf-8")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
