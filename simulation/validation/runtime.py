"""Karpenter's RuntimeValidate for NodeOverlays (pkg/apis/v1alpha1/nodeoverlay_validation.go with v1's
ValidateRequirement): what the API server accepts but Karpenter refuses at run time, marking the overlay
ValidationSucceeded=False (reason RuntimeValidation) and ignoring it whole. Problems the API server layer
already rejects are left to that layer, so each problem is reported once."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from simulation import findings, memo
from simulation.validation import schema, syntax

Path = tuple[str | int, ...]

SUPPORTED_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte")
WELL_KNOWN_LABELS = frozenset({
    "karpenter.sh/nodepool", "topology.kubernetes.io/zone", "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type", "kubernetes.io/arch", "kubernetes.io/os",
    "karpenter.sh/capacity-type", "node.kubernetes.io/windows-build",
})
WELL_KNOWN_VALUES: Mapping[str, tuple[str, ...]] = {
    "karpenter.sh/capacity-type": ("on-demand", "spot", "reserved"),
}
WELL_KNOWN_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods")
RESTRICTED_LABEL_DOMAINS = ("karpenter.sh",)
RESTRICTED_LABELS = ("kubernetes.io/hostname",)
# Aliases Karpenter rewrites to a well-known key before validating (and matching) a requirement.
NORMALIZED_LABELS: Mapping[str, str] = {
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "beta.kubernetes.io/arch": "kubernetes.io/arch",
    "beta.kubernetes.io/os": "kubernetes.io/os",
    "beta.kubernetes.io/instance-type": "node.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
}
_BOUNDS = ("Gt", "Lt", "Gte", "Lte")
_STR = frozenset({str})
_CONSEQUENCE = "Karpenter's runtime validation fails and it ignores the whole overlay"


def restricted_label_error(key: str) -> str | None:
    """IsRestrictedLabel: keys in Karpenter's own domains (but for its well-known labels) and the hostname."""
    if key in WELL_KNOWN_LABELS:
        return None
    domain = key.split("/", 1)[0] if "/" in key else ""
    restricted_domain = any(domain == d or domain.endswith("." + d) for d in RESTRICTED_LABEL_DOMAINS)
    if restricted_domain or key in RESTRICTED_LABELS:
        return (f"label {key} is restricted: it might interfere with Karpenter's provisioning logic; use a "
                f"well-known label or a custom label outside {', '.join(RESTRICTED_LABEL_DOMAINS)}")
    return None


def check(obj: Mapping[str, Any], ref: findings.ObjectRef, source: int | None, *,
          apiserver: Iterable[findings.Finding] | None = None, validated: Any = None) -> list[findings.Finding]:
    """runtime-invalid findings for one raw NodeOverlay. `apiserver` is the schema layer's findings for the
    same object (computed here when not given), used to leave out what the API server already rejects;
    `validated` the object as the API server validated it (schema.as_validated), when the caller has it."""
    plain = schema.as_validated(obj) if validated is None else validated
    if apiserver is None:
        apiserver = schema.check(obj, ref, source)
    rejected = frozenset(f.path for f in apiserver if dict(f.detail).get("layer") == "apiserver")
    spec = plain.get("spec") if isinstance(plain, dict) else None
    if not isinstance(spec, dict):
        return []
    problems: list[tuple[Path, str]] = []
    requirements = spec.get("requirements")
    if isinstance(requirements, list) and not _under(rejected, _REQUIREMENTS):
        # Nothing in them rejected: their problems are those of the list alone, which recurs across overlays.
        problems += [((*_REQUIREMENTS, *at), why) for at, why in memo.remembered(_LISTS, requirements, _list)]
    elif isinstance(requirements, list):
        for i, req in enumerate(requirements):
            if isinstance(req, dict):
                problems += _requirement((*_REQUIREMENTS, i), req, rejected)
    capacity = spec.get("capacity")
    for name in capacity if isinstance(capacity, dict) else ():
        path = ("spec", "capacity", name)
        if name in WELL_KNOWN_RESOURCES and not _under(rejected, path):
            problems.append((path, f"{name} is a standard resource; overlays add extended resources only"))
    if not problems:  # most overlays
        return []
    return findings.ordered(
        findings.make("runtime-invalid", ref, path, f"{findings.json_path(*path)}: {why}; {_CONSEQUENCE}",
                      source=source, detail={"layer": "runtime"})
        for path, why in problems)


def _under(rejected: frozenset[Path], prefix: Path) -> bool:
    return bool(rejected) and any(p[:len(prefix)] == prefix for p in rejected)


_REQUIREMENTS: Path = ("spec", "requirements")
# The problems of a requirement list none of whose requirements the API server rejects, paths relative to it.
_LISTS: memo.Memo[tuple[tuple[Path, str], ...]] = memo.Memo()


def _list(requirements: list[Any]) -> tuple[tuple[Path, str], ...]:
    found = memo.each(_ONE, memo.parts(requirements), requirements, _alone)
    return tuple(((i, *at), why) for i, problems in enumerate(found) if problems for at, why in problems)


# The problems of one requirement of such a list, paths relative to it: a new list holds requirements met before.
_ONE: memo.Memo[tuple[tuple[Path, str], ...]] = memo.Memo()


def _alone(req: Any) -> tuple[tuple[Path, str], ...]:
    # Not a map: the schema's finding alone.
    return tuple(_requirement((), req, frozenset())) if isinstance(req, dict) else ()


def _requirement(at: Path, req: dict[str, Any], rejected: frozenset[Path]) -> Iterable[tuple[Path, str]]:
    key, operator, values = req.get("key"), req.get("operator"), req.get("values", [])
    if type(key) is str and type(operator) is str and type(values) is list and not _under(rejected, at) \
            and set(map(type, values)) <= _STR:
        # Nothing under it rejected: the problems are those of its text alone, which recurs across overlays.
        return [((*at, *where), why) for where, why in _plain_requirement(key, operator, tuple(values))]
    return _checked_requirement(at, req, rejected)


@functools.lru_cache(maxsize=4096)
def _plain_requirement(key: str, operator: str, values: tuple[str, ...]) -> tuple[tuple[Path, str], ...]:
    """The problems of a requirement with string fields, none of them rejected by the API server; paths
    relative to the requirement."""
    return tuple(_checked_requirement((), {"key": key, "operator": operator, "values": list(values)}, frozenset()))


def _checked_requirement(at: Path, req: dict[str, Any], rejected: frozenset[Path]) -> Iterator[tuple[Path, str]]:
    key, operator, values = req.get("key"), req.get("operator"), req.get("values", [])
    unsupported = isinstance(operator, str) and operator not in SUPPORTED_OPERATORS
    if unsupported and not _under(rejected, (*at, "operator")):
        yield (*at, "operator"), f"operator {operator} is not one of {', '.join(SUPPORTED_OPERATORS)}"
    if isinstance(key, str):
        key = NORMALIZED_LABELS.get(key, key)
        if not _under(rejected, (*at, "key")):
            why = [w for w in (restricted_label_error(key),) if w] + [
                f"key is not a qualified name: {e}" for e in syntax.qualified_name_errors(key)]
            if why:
                yield (*at, "key"), "; ".join(why)
    # When the CRD's CEL rules reject this requirement's values, the values are the schema layer's problem.
    if not isinstance(values, list) or at in rejected:
        return
    for j, value in enumerate(values):
        errors = syntax.label_value_errors(value) if isinstance(value, str) else []
        if errors and not _under(rejected, (*at, "values", j)):
            yield (*at, "values", j), f"value \"{value}\" is not a valid label value: {'; '.join(errors)}"
    if not _under(rejected, (*at, "values")):  # a mistyped value would skew the count
        yield from _values_for_operator(at, key, operator, [v for v in values if isinstance(v, str)])


def _values_for_operator(at: Path, key: Any, operator: Any, values: list[str]) -> Iterator[tuple[Path, str]]:
    here = (*at, "values")
    known = WELL_KNOWN_VALUES.get(key) if isinstance(key, str) and key in WELL_KNOWN_LABELS else None
    if operator == "In" and known and values and not set(values) & set(known):
        yield here, f"none of {', '.join(values)} is a value of {key}; use at least one of {', '.join(known)}"
    if operator in ("In", "NotIn") and not values:
        yield here, f"operator {operator} needs at least one value"
    number = syntax.parse_go_int(values[0]) if len(values) == 1 else None
    if operator in _BOUNDS and (number is None or number < 0):
        yield here, f"operator {operator} needs a single non-negative integer value"
