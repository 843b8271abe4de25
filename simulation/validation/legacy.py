"""What the guard says about fields the API server rejects. Fields the CRD does not define are recognised so
the finding can say what to do instead of only "unknown field": shapes from the first NodeOverlay RFC (with
their migration), ResourceSlice fields the DRA RFC leaves out of ResourceSliceTemplates (with its reason),
names from drafts of that RFC, and one-edit typos of defined fields. Schema violations get plain phrasing."""

from __future__ import annotations

import decimal
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from simulation.findings import json_path as _json_path

Path = tuple[str | int, ...]

# Fields of the first NodeOverlay RFC (kubernetes-sigs/karpenter#1305) that the shipped API replaced
LEGACY_SPEC_FIELDS = ("overhead", "pricePercent", "selector")

# The DRA RFC's reasons for leaving ResourceSlice fields out of a ResourceSliceTemplate, by where they occur.
EXCLUDED_TEMPLATE_SPEC_FIELDS: Mapping[str, str] = {
    "nodeName": "a template describes devices of nodes that do not exist yet, so no node name can be known",
    "pool": "pools play no part in Karpenter's scheduling simulation",
    "perDeviceNodeSelection": "alpha in Kubernetes (partitionable devices), not supported by Karpenter",
    "sharedCounters": "alpha in Kubernetes (partitionable devices), not supported by Karpenter",
    "allNodes": "templates describe node-local devices only; devices shared by all nodes are out of scope",
}
_BINDING_CONDITIONS = "alpha (device binding conditions) and irrelevant to choosing instance types"
EXCLUDED_DEVICE_FIELDS: Mapping[str, str] = {
    "allNodes": "alpha in Kubernetes (partitionable devices), not supported by Karpenter",
    "allowMultipleAllocations": "alpha in Kubernetes (consumable capacity), not supported by Karpenter",
    "bindingConditions": _BINDING_CONDITIONS,
    "bindingFailureConditions": _BINDING_CONDITIONS,
    "bindsToNode": _BINDING_CONDITIONS,
    "consumesCounters": "alpha in Kubernetes (consumable capacity), not supported by Karpenter",
    "nodeName": "a template's devices belong to a node that does not exist yet; a node name cannot be known",
    "nodeSelector": "alpha in Kubernetes (partitionable devices); use the template's spec.nodeSelector",
    "taints": "alpha in Kubernetes (device taints), not supported by Karpenter",
}

# Names used by drafts of the DRA RFC before it settled on spec.dynamicResources.
DRAFT_NAMES: Mapping[tuple[Path, str], str] = {
    (("spec",), "resourceSlices"): "dynamicResources.resourceSliceTemplates",
    (("spec",), "resourceSliceTemplates"): "dynamicResources.resourceSliceTemplates",
    (("spec",), "resourceSlicesTemplates"): "dynamicResources.resourceSliceTemplates",
    (("spec",), "slices"): "dynamicResources.resourceSliceTemplates",
    (("spec", "dynamicResources"), "templates"): "resourceSliceTemplates",
    (("spec", "dynamicResources"), "slices"): "resourceSliceTemplates",
    (("spec", "dynamicResources"), "resourceSlices"): "resourceSliceTemplates",
    (("spec", "dynamicResources"), "boundAttributes"): "attributeBindings",
}


def unknown_field(parent: Path, name: str, value: Any, defined: Iterable[str],
                  spec: Mapping[str, Any]) -> tuple[str, str | None, dict[str, str]]:
    """(message, code or None for `schema`, detail) for field `name` under `parent` that the CRD lacks."""
    here = _json_path(*parent, name)
    if parent == ("spec",) and name in LEGACY_SPEC_FIELDS:
        message, detail = migration(name, value, spec)
        return message, "legacy-field", detail
    reason = excluded_reason(parent, name)
    if reason is not None:
        return (f"{here}: {name} is not part of a ResourceSliceTemplate: {reason}",
                "invalid-resource-slice-template", {})
    hint = suggestion(parent, name, defined)
    detail = {"unknown": name, **({"didYouMean": hint} if hint else {})}
    return f'{here}: unknown field "{name}"' + (f'; did you mean "{hint}"?' if hint else ""), None, detail


def excluded_reason(parent: Path, name: str) -> str | None:
    """Why the DRA RFC excludes field `name` under `parent`, or None if it does not."""
    under_templates = parent[:3] == ("spec", "dynamicResources", "resourceSliceTemplates")
    if under_templates and len(parent) == 5 and parent[4] == "spec":
        return EXCLUDED_TEMPLATE_SPEC_FIELDS.get(name)
    if under_templates and len(parent) == 7 and parent[4:6] == ("spec", "devices"):
        return EXCLUDED_DEVICE_FIELDS.get(name)
    return None


def suggestion(parent: Path, name: str, defined: Iterable[str]) -> str | None:
    """A defined field the user probably meant: a draft-RFC name's successor, else one edit away."""
    successor = DRAFT_NAMES.get((parent, name))
    if successor is not None and successor.split(".")[0] in defined:  # the CRD in use has it
        return successor
    close = sorted(d for d in defined if _within_one_edit(name, d))
    return close[0] if close else None


def _within_one_edit(a: str, b: str) -> bool:
    # Optimal string alignment distance <= 1: a swap of neighbours counts as one edit ("wieght").
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                  and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]])
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


def migration(name: str, value: Any, spec: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    """The message and machine-readable detail for legacy field spec.`name`."""
    if name == "pricePercent":
        return _price_percent(value, spec)
    if name == "selector":
        return _selector(value, spec)
    return (
        "spec.overhead is from the first NodeOverlay RFC and has no NodeOverlay equivalent: overlays can "
        "add extended resources (spec.capacity) and adjust prices, not reserve capacity; reserve it in the "
        "NodeClass (kubelet systemReserved/kubeReserved) or with the provider's VM memory overhead setting, "
        "then remove spec.overhead",
        {},
    )


def _price_percent(value: Any, spec: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    percent = _decimal(value)
    head = "spec.pricePercent is from the first NodeOverlay RFC"
    if percent is None or percent < 0:
        return (f"{head} and {json.dumps(value, default=str)} is not a percentage of the price: "
                "use spec.priceAdjustment (e.g. \"-10%\") or spec.price instead", {})
    delta = percent - 100
    if delta == 0:
        return f"{head}; pricePercent: 100 leaves the price unchanged: remove it", {"replacement": "{}"}
    amount = format(abs(delta).normalize(), "f")
    adjustment = f"{'+' if delta > 0 else '-'}{amount}%"
    message = f"{head}: replace pricePercent: {_number(percent)} with priceAdjustment: \"{adjustment}\""
    if "price" in spec or "priceAdjustment" in spec:
        message += " (the overlay already sets a price; keep only one of them)"
    return message, {"replacement": json.dumps({"priceAdjustment": adjustment})}


def _selector(value: Any, spec: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    head = "spec.selector is from the first NodeOverlay RFC"
    requirements = _requirements_from_selector(value)
    if requirements is None:
        return (f"{head}: express it as spec.requirements (key, operator, values); "
                "this selector is not a label selector that can be converted automatically", {})
    rendered = json.dumps(requirements)
    target = "append to spec.requirements" if "requirements" in spec else "replace it with requirements"
    return f"{head}: {target}: {rendered}", {"replacement": json.dumps({"requirements": requirements})}


def _requirements_from_selector(selector: Any) -> list[dict[str, Any]] | None:
    if not isinstance(selector, Mapping) or set(selector) - {"matchLabels", "matchExpressions"}:
        return None
    labels = selector.get("matchLabels", {})
    expressions = selector.get("matchExpressions", [])
    if not isinstance(labels, Mapping) or not isinstance(expressions, list):
        return None
    out: list[dict[str, Any]] = [
        {"key": str(k), "operator": "In", "values": [_label(v)]} for k, v in labels.items()
    ]
    for expression in expressions:
        if not isinstance(expression, Mapping) or set(expression) - {"key", "operator", "values"}:
            return None
        # LabelSelector operators are a subset of NodeOverlay's, so each expression carries over unchanged.
        converted: dict[str, Any] = {"key": expression.get("key"), "operator": expression.get("operator")}
        values = expression.get("values")
        if isinstance(values, list) and values:
            converted["values"] = [_label(v) for v in values]
        out.append(converted)
    return out


def _label(value: Any) -> str:
    # A YAML author who wrote `zone: 1` meant the label value "1"; booleans print as YAML spells them.
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _decimal(value: Any) -> decimal.Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    try:
        number = decimal.Decimal(str(value).strip())
    except decimal.InvalidOperation:
        return None
    return number if number.is_finite() else None


def _number(value: decimal.Decimal) -> str:
    return format(value.normalize(), "f")


# --- plain phrasing of schema violations ----------------------------------------------------------

_PATTERN_NAMES: Mapping[str, str] = {
    r"^\d+(\.\d+)?$": "a non-negative decimal number such as \"0.52\"",
    r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$":
        "+N or -N (additive), +N% or -N% with N below 100, or -100%",
    "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$": "a DNS label (lowercase alphanumerics and '-')",
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?"
    "[A-Za-z0-9]$": "a label key (an optional DNS subdomain and '/', then a name)",
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|"
    r"(\.[0-9]+))))?$": "a Kubernetes quantity such as 2, 500m or 16Gi",
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z_][A-Za-z0-9_]{0,31}$":
        "a qualified name such as resource.k8s.io/pcieRoot (C identifier of at most 32 characters)",
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|"
    r"\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?$":
        "a semantic version such as 1.2.3",
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$":
        "a DNS subdomain such as gpu.example.com",
}
TYPE_NAMES: Mapping[str, str] = {"object": "an object", "array": "a list", "string": "a string",
                                 "integer": "an integer", "number": "a number", "boolean": "a boolean",
                                 "null": "null"}


def describe(value: Any) -> str:
    """A value as the user wrote it, for "must be X, not <this>"."""
    if isinstance(value, dict | list):
        return TYPE_NAMES["object" if isinstance(value, dict) else "array"]
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    kind = "string" if isinstance(value, str) else "integer" if isinstance(value, int) else "number"
    return f"{kind} {quote(value)}"


def quote(value: Any) -> str:
    """JSON spelling, as kubectl users see values (double quotes, NaN, true)."""
    return json.dumps(value, ensure_ascii=False)


def pattern_name(pattern: str) -> str:
    """What a CRD pattern asks for, in words where the guard knows the pattern."""
    return _PATTERN_NAMES.get(pattern, f"a string matching {pattern}")


def bound_message(kind: str, bound: Any, value: Any) -> str:
    """Phrase a failed jsonschema size or range keyword (maxLength, minItems, maximum, ...)."""
    size = len(value) if isinstance(value, str | list | dict) else value
    noun = {"maxLength": "characters", "minLength": "characters", "maxItems": "items", "minItems": "items",
            "maxProperties": "entries", "minProperties": "entries"}.get(kind)
    word = "most" if kind.startswith("max") else "least"
    if noun:
        return f"must have at {word} {bound} {noun} (has {size})"
    return f"must be at {word} {bound}, not {size}"
