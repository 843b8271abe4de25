"""The API server layer: the CRD, every CEL rule both ways, legacy and unknown fields, wrong types."""

from __future__ import annotations

import json
import math
import os
import pathlib
from typing import Any

import pytest

from simulation import findings
from simulation.validation import crds, legacy
from tests.schema_support import (
    ADJ,
    BIND,
    DELETE,
    DEV,
    K0,
    LONG,
    O0,
    REQS,
    TPL,
    V0,
    codes,
    edit,
    run,
    valid,
    with_edits,
)

ROOT = pathlib.Path(__file__).resolve().parent.parent


# --- the CRD itself -------------------------------------------------------------------------------

def test_package_data_is_a_relative_symlink_to_the_manifest() -> None:
    link = ROOT / "simulation" / "data" / "nodeoverlays.crd.yaml"
    assert link.is_symlink()
    assert os.readlink(link) == "../../manifests/crd/karpenter.sh_nodeoverlays.yaml"
    assert link.resolve() == (ROOT / "manifests" / "crd" / "karpenter.sh_nodeoverlays.yaml").resolve()
    raw = crds.raw_dra()
    assert (raw["kind"], raw["spec"]["scope"]) == ("CustomResourceDefinition", "Cluster")


def test_every_cel_rule_of_the_crd_is_evaluated() -> None:
    rules = crds.dra().rules()
    assert len(rules) == 30 and crds.dra().unchecked() == []


def openapi_schema() -> dict[str, Any]:
    return dict(crds.dra().openapi)


def test_upstream_fields_and_quirks_are_kept() -> None:
    spec = openapi_schema()["properties"]["spec"]
    assert set(spec["properties"]) == {"capacity", "dynamicResources", "price", "priceAdjustment",
                                       "requirements", "weight"}
    assert spec["required"] == ["requirements"]
    values = spec["properties"]["requirements"]["items"]["properties"]["values"]
    # Upstream puts the label-value limits on the array, where the API server never applies them.
    assert values["type"] == "array" and "maxLength" in values and "pattern" in values
    assert "pattern" not in values["items"]
    gt = "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value"
    assert gt in {rule.message for rule in crds.dra().rules()}


def _nodes(node: Any) -> list[dict[str, Any]]:
    if not isinstance(node, dict):
        return []
    out = [node]
    for child in (*node.get("properties", {}).values(), node.get("items"), node.get("additionalProperties")):
        out += _nodes(child)
    return out


def _excluded(node: dict[str, Any]) -> bool:
    return str(node.get("description", "")).startswith("Excluded by the DRA RFC")


def _excluded_content(node: dict[str, Any]) -> bool:
    spec = openapi_schema()["properties"]["spec"]["properties"]["dynamicResources"]["properties"][
        "resourceSliceTemplates"]["items"]["properties"]["spec"]
    device = spec["properties"]["devices"]["items"]
    excluded = [v for n in (spec, device) for v in n["properties"].values() if _excluded(v)]
    return any(node is e or node is e.get("items") for e in excluded)


def test_schema_is_structural_and_prunes_unknown_fields() -> None:
    for node in _nodes(openapi_schema()):
        assert "type" in node or node.get("x-kubernetes-int-or-string"), node
        # Only the fields the RFC excludes keep their contents: they are refused whole anyway.
        assert not node.get("x-kubernetes-preserve-unknown-fields") or _excluded_content(node)
        for rule in node.get("x-kubernetes-validations", ()):
            assert rule["message"]


def test_rfc_excluded_fields_are_declared_only_to_be_refused_with_the_rfc_reason() -> None:
    """The API server rejects them with the RFC's reason, not as unknown fields."""
    template = openapi_schema()["properties"]["spec"]["properties"]["dynamicResources"]["properties"][
        "resourceSliceTemplates"]["items"]["properties"]["spec"]
    device = template["properties"]["devices"]["items"]
    for node, fields in ((template, legacy.EXCLUDED_TEMPLATE_SPEC_FIELDS), (device, legacy.EXCLUDED_DEVICE_FIELDS)):
        rules = {r["rule"]: r["message"] for r in node["x-kubernetes-validations"]}
        for name, reason in fields.items():
            assert _excluded(node["properties"][name])
            assert reason in rules[f"!has(self.{name})"]


def test_a_correct_overlay_has_no_findings() -> None:
    assert run(valid()) == []
    assert run({"metadata": {"name": "min"}, "spec": {"requirements": []}}) == []


# --- every CEL rule and OpenAPI validation, both ways ----------------------------------------------

SC, TE, AB = "schema", "invalid-resource-slice-template", "invalid-attribute-binding"
ATTRS, R1, R2 = f"{DEV}.attributes", "spec.requirements[1]", "spec.requirements[2]"
MANY = {f"a{i}": {"int": i} for i in range(20)}
CAPS = {f"c{i}": {"value": "1"} for i in range(12)}
TERMS = f"{TPL}[0].spec.nodeSelector.nodeSelectorTerms"
Edits = tuple[str, Any] | list[tuple[str, Any]]

Expected = tuple[str, str] | list[tuple[str, str]] | None
# (id, edits to valid(), the one expected (code, field), several, or None)
CASES: list[tuple[str, Edits, Expected]] = [
    ("capacity ok", ("spec.capacity", {"example.com/x": "1"}), None),
    ("capacity cpu", ("spec.capacity", {"cpu": "1", "x": "1"}), (SC, "spec.capacity.cpu")),
    ("capacity pods", ("spec.capacity", {"pods": 3}), (SC, "spec.capacity.pods")),
    ("nodepool key ok", (K0, "karpenter.sh/nodepool"), None),
    ("karpenter domain", (K0, "karpenter.sh/foo"), (SC, K0)),
    ("domain suffix", (K0, "notkarpenter.sh/x"), (SC, K0)),
    ("subdomain", (K0, "a.karpenter.sh/x"), (SC, K0)),
    ("no prefix", (K0, "mykarpenter.sh"), (SC, K0)),
    ("hostname", (K0, "kubernetes.io/hostname"), (SC, K0)),
    ("NotIn empty", (f"{R2}.values", []), (SC, R2)),
    ("NotIn absent", (f"{R2}.values", DELETE), (SC, R2)),
    ("In empty", (V0, []), (SC, "spec.requirements[0]")),
    ("In absent", (V0, DELETE), (SC, "spec.requirements[0]")),
    ("Gt signed", (f"{R1}.values", ["+5"]), None),
    ("Gt zero", (f"{R1}.values", ["0"]), None),
    ("Gt negative", (f"{R1}.values", ["-1"]), (SC, R1)),
    ("Gt text", (f"{R1}.values", ["abc"]), (SC, R1)),
    ("Gt two", (f"{R1}.values", ["1", "2"]), (SC, R1)),
    ("Gt int64 overflow", (f"{R1}.values", ["9223372036854775808"]), (SC, R1)),
    ("Lte absent", [(f"{R1}.operator", "Lte"), (f"{R1}.values", DELETE)], (SC, R1)),
    ("price and adjustment", ("spec.price", "1.5"), (SC, "spec")),
    ("price alone", [("spec.price", "1.5"), (ADJ, DELETE)], None),
    ("attribute none", (f"{ATTRS}.cores", {}), (TE, f"{ATTRS}.cores")),
    ("attribute two values", (f"{ATTRS}.cores", {"int": 1, "string": "x"}), (TE, f"{ATTRS}.cores")),
    ("bindingKey and value", (f"{ATTRS}.cores", {"int": 1, "bindingKey": "k"}),
     ("invalid-binding-key", f"{ATTRS}.cores.bindingKey")),
    ("32 attributes and capacities", [(ATTRS, dict(MANY)), (f"{DEV}.capacity", dict(CAPS))], None),
    ("33 attributes and capacities", [(ATTRS, {**MANY, "z": {"int": 1}}), (f"{DEV}.capacity", dict(CAPS))],
     (TE, DEV)),
    ("no term", (TERMS, []), (TE, TERMS)),
    ("two terms", (TERMS, [{}, {}]), (TE, TERMS)),
    # Every element for which `self.all(x, ...)` fails: both duplicates.
    ("duplicate template", (f"{TPL}[1].metadata.name", "gpu"), [(TE, f"{TPL}[0]"), (TE, f"{TPL}[1]")]),
    ("duplicate device", (f"{TPL}[0].spec.devices[1].name", "gpu-0"),
     [(TE, f"{TPL}[0].spec.devices[0]"), (TE, f"{TPL}[0].spec.devices[1]")]),
    ("one selector", (f"{BIND}[0].deviceSelectors", [{"resourceSliceTemplate": "gpu", "device": "gpu-0"}]),
     (AB, f"{BIND}[0].deviceSelectors")),
    ("attribute name", (f"{ATTRS}.a/b/c", {"int": 1}), (TE, f"{ATTRS}['a/b/c']")),
    ("attribute id too long", (f"{ATTRS}.{'x' * 33}", {"int": 1}), (TE, f"{ATTRS}.{'x' * 33}")),
    ("attribute domain too long", (ATTRS, {f"{LONG}/x": {"int": 1}}), (TE, f"{ATTRS}['{LONG}/x']")),
    ("C identifier", (f"{ATTRS}._id", {"int": 1}), None),
    ("capacity name", (f"{DEV}.capacity.bad-name", {"value": "1"}), (TE, f"{DEV}.capacity.bad-name")),
    ("binding domain too long", (f"{BIND}[0].attributes", [f"{LONG}/x"]), (AB, f"{BIND}[0].attributes[0]")),
    ("operator enum", (O0, "In!"), (SC, O0)),
    ("key pattern", (K0, "-x"), (SC, K0)),
    ("key trailing newline", (K0, "foo\n"), (SC, K0)),
    ("key too long", (K0, "a" * 317), (SC, K0)),
    ("101 requirements", ("spec.requirements", [{"key": "a", "operator": "Exists"}] * 101), (SC, REQS)),
    ("weight 0", ("spec.weight", 0), (SC, "spec.weight")),
    ("weight 10001", ("spec.weight", 10001), (SC, "spec.weight")),
    ("price pattern", [(ADJ, DELETE), ("spec.price", "-1")], (SC, "spec.price")),
    ("price non-ASCII", [(ADJ, DELETE), ("spec.price", "\u0661\u0662")], (SC, "spec.price")),
    ("adjustment -100%", (ADJ, "-100%"), None),
    ("adjustment -150%", (ADJ, "-150%"), (SC, ADJ)),
    ("adjustment +250%", (ADJ, "+250%"), None),
    ("adjustment unsigned", (ADJ, "10"), (SC, ADJ)),
    ("quantity", ("spec.capacity", {"example.com/x": "1x"}), (SC, "spec.capacity['example.com/x']")),
    ("driver", (f"{TPL}[0].spec.driver", "GPU.example.com"), (TE, f"{TPL}[0].spec.driver")),
    ("driver too long", (f"{TPL}[0].spec.driver", "d" * 60 + ".com"), (TE, f"{TPL}[0].spec.driver")),
    ("driver missing", (f"{TPL}[0].spec.driver", DELETE), (TE, f"{TPL}[0].spec.driver")),
    ("template name", (f"{TPL}[0].metadata.name", "a.b"), (TE, f"{TPL}[0].metadata.name")),
    ("device name", (f"{TPL}[0].spec.devices[1].name", "x" * 64), (TE, f"{TPL}[0].spec.devices[1].name")),
    ("129 devices", (f"{TPL}[1].spec.devices", [{"name": f"d{i}"} for i in range(129)]),
     (TE, f"{TPL}[1].spec.devices")),
    ("string too long", (f"{ATTRS}.productName", {"string": "x" * 65}), (TE, f"{ATTRS}.productName.string")),
    ("version", (f"{ATTRS}.driverVersion", {"version": "1.2"}), (TE, f"{ATTRS}.driverVersion.version")),
    ("capacity value missing", (f"{DEV}.capacity.memory", {}), (TE, f"{DEV}.capacity.memory.value")),
    ("binding attribute", (f"{BIND}[0].attributes", ["not a name"]), (AB, f"{BIND}[0].attributes[0]")),
    ("binding attributes empty", (f"{BIND}[0].attributes", []), (AB, f"{BIND}[0].attributes")),
    ("selector device missing", (f"{BIND}[0].deviceSelectors[0].device", DELETE),
     (AB, f"{BIND}[0].deviceSelectors[0].device")),
    ("term operator", (f"{TERMS}[0].matchExpressions[0].operator", "Gte"),
     (TE, f"{TERMS}[0].matchExpressions[0].operator")),
    ("metadata name", ("metadata.name", "Bad_Name"), (SC, "metadata.name")),
    ("metadata name length", ("metadata.name", "a" * 254), (SC, "metadata.name")),
    ("label value", ("metadata.labels", {"team": "-ml-"}), (SC, "metadata.labels.team")),
    # The API server drops nulls of defined fields before validating; an unknown field fails even when null.
    ("weight null", ("spec.weight", None), None),
    ("capacity entry null", ("spec.capacity", {"x": None}), None),
    ("attribute null", (f"{ATTRS}.cores", None), None),
    ("In values null", (V0, None), (SC, "spec.requirements[0]")),
    ("labels null", [("metadata.labels", None), ("metadata.annotations", {"a": None})], None),
    ("generateName", [("metadata.name", DELETE), ("metadata.generateName", "x-")], None),
    ("unknown null", ("spec.wieght", None), (SC, "spec.wieght")),
]


@pytest.mark.parametrize(("edits", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_cel_rules_and_openapi_validations(edits: Edits, expected: Expected) -> None:
    wanted = set(expected) if isinstance(expected, list) else {expected} if expected else set()
    assert codes(run(with_edits(*(edits if isinstance(edits, list) else [edits])))) == wanted


# --- wrong types: findings, never exceptions ------------------------------------------------------

NONE: dict[str, Any] = {"requirements": []}
TYPE_CASES: list[tuple[str, Any, tuple[str, str]]] = [
    ("weight text", with_edits(("spec.weight", "ten")), (SC, "spec.weight")),
    ("weight fraction", with_edits(("spec.weight", 0.5)), (SC, "spec.weight")),
    ("weight infinite", with_edits(("spec.weight", math.inf)), (SC, "spec.weight")),
    ("weight bool", with_edits(("spec.weight", True)), (SC, "spec.weight")),
    ("requirements map", with_edits(("spec.requirements", {})), (SC, REQS)),
    ("requirement text", with_edits(("spec.requirements", ["x"])), (SC, "spec.requirements[0]")),
    ("values text", with_edits((V0, "spot")), (SC, V0)),
    ("value number", with_edits((V0, [1])), (SC, f"{V0}[0]")),
    ("value null", with_edits((V0, [None])), (SC, f"{V0}[0]")),
    ("key number", with_edits((K0, 5)), (SC, K0)),
    ("operator missing", with_edits((O0, DELETE)), (SC, O0)),
    ("price negative number", with_edits((ADJ, DELETE), ("spec.price", -1)), (SC, "spec.price")),
    ("adjustment NaN", with_edits((ADJ, math.nan)), (SC, ADJ)),
    ("capacity fraction", with_edits(("spec.capacity", {"x": 1.5})), (SC, "spec.capacity.x")),
    ("capacity list", with_edits(("spec.capacity", ["x"])), (SC, "spec.capacity")),
    ("dynamicResources list", with_edits(("spec.dynamicResources", [])), (SC, "spec.dynamicResources")),
    ("templates map", with_edits(("spec.dynamicResources.resourceSliceTemplates", {})), (TE, TPL)),
    ("devices text", with_edits((f"{TPL}[0].spec.devices", "gpu")), (TE, f"{TPL}[0].spec.devices")),
    ("attributes list", with_edits((ATTRS, [])), (TE, ATTRS)),
    ("int attribute text", with_edits((f"{ATTRS}.cores", {"int": "5"})), (TE, f"{ATTRS}.cores.int")),
    ("selectors map", with_edits((f"{BIND}[0].deviceSelectors", {})), (AB, f"{BIND}[0].deviceSelectors")),
    ("spec list", {"metadata": {"name": "x"}, "spec": []}, (SC, "spec")),
    ("spec null", {"metadata": {"name": "x"}, "spec": None}, (SC, "spec")),
    ("spec missing", {"metadata": {"name": "x"}}, (SC, "spec")),
    ("metadata missing", {"spec": NONE}, (SC, "metadata.name")),
    ("metadata text", {"metadata": "x", "spec": NONE}, (SC, "metadata")),
    ("name number", {"metadata": {"name": 5}, "spec": NONE}, (SC, "metadata.name")),
    ("labels list", {"metadata": {"name": "x", "labels": []}, "spec": NONE}, (SC, "metadata.labels")),
    ("object list", ["x"], (SC, "")),
    ("object null", None, (SC, "")),
]


@pytest.mark.parametrize(("obj", "expected"), [c[1:] for c in TYPE_CASES], ids=[c[0] for c in TYPE_CASES])
def test_wrong_types_give_one_finding_each(obj: Any, expected: tuple[str, str]) -> None:
    found = run(obj)
    assert codes(found) == {expected} and len(found) == 1


# --- legacy fields --------------------------------------------------------------------------------

def _legacy(field: str, value: Any, **spec: Any) -> findings.Finding:
    obj = {"metadata": {"name": "x"}, "spec": {"requirements": [], **spec, field: value}}
    found = run(obj)
    assert codes(found) == {("legacy-field", f"spec.{field}")}, found
    return found[0]


@pytest.mark.parametrize(("percent", "adjustment"), [
    (90, "-10%"), (110, "+10%"), (0, "-100%"), (50.5, "-49.5%"), ("75", "-25%"), (250, "+150%"), (1, "-99%"),
    (100, None), (-5, None), ("lots", None), (None, None), (math.nan, None)])
def test_price_percent_migrates_to_price_adjustment(percent: Any, adjustment: str | None) -> None:
    replacement = json.loads(dict(_legacy("pricePercent", percent).detail).get("replacement", "{}"))
    assert replacement.get("priceAdjustment") == adjustment
    pattern = openapi_schema()["properties"]["spec"]["properties"]["priceAdjustment"]["pattern"]
    assert adjustment is None or crds.go_regex(pattern).search(adjustment)


def test_selector_migrates_to_requirements() -> None:
    selector = {"matchLabels": {"karpenter.sh/capacity-type": "on-demand", "zone": 1},
                "matchExpressions": [{"key": "node.kubernetes.io/instance-type", "operator": "NotIn",
                                      "values": ["m5.large"]}, {"key": "gpu", "operator": "Exists"}]}
    obj = {"metadata": {"name": "x"}, "spec": {"selector": selector}}
    found = run(obj)  # no second finding for the requirements the selector stood in for
    assert codes(found) == {("legacy-field", "spec.selector")}
    assert json.loads(dict(found[0].detail)["replacement"]) == {"requirements": [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "zone", "operator": "In", "values": ["1"]},
        {"key": "node.kubernetes.io/instance-type", "operator": "NotIn", "values": ["m5.large"]},
        {"key": "gpu", "operator": "Exists"}]}


def test_unconvertible_selector_and_overhead_are_still_one_legacy_finding() -> None:
    assert "replacement" not in dict(_legacy("selector", {"matchLabels": "x"}).detail)
    assert "no NodeOverlay equivalent" in _legacy("overhead", {"memory": "10Mi"}).message


# --- unknown fields, typos and RFC-excluded fields ------------------------------------------------

@pytest.mark.parametrize(("dotted", "hint"), [
    ("spec.wieght", "weight"), ("spec.requirement", "requirements"), ("spec.Weight", "weight"),
    ("spec.pricee", "price"), ("specs", "spec"), ("metadata.label", "labels"),
    ("spec.requirements[0].vaules", "values"), (f"{TPL}[0].spec.drivers", "driver"),
    ("spec.resourceSlices", "dynamicResources.resourceSliceTemplates"),
    ("spec.dynamicResources.templates", "resourceSliceTemplates"), ("spec.frobnicate", None),
])
def test_unknown_fields_with_did_you_mean(dotted: str, hint: str | None) -> None:
    found = run(edit(valid(), dotted, 1))
    field = findings.json_path(*[int(p) if p.isdigit() else p
                                 for p in dotted.replace("]", "").replace("[", ".").split(".")])
    code = "invalid-resource-slice-template" if dotted.startswith(TPL) else "schema"
    assert codes(found) == {(code, field)}
    assert (f'did you mean "{hint}"' in found[0].message) == (hint is not None)


@pytest.mark.parametrize(("parent", "field", "reason"), [
    *((f"{TPL}[0].spec", f, r) for f, r in sorted(legacy.EXCLUDED_TEMPLATE_SPEC_FIELDS.items())),
    *((DEV, f, r) for f, r in sorted(legacy.EXCLUDED_DEVICE_FIELDS.items()))])
def test_rfc_excluded_fields_say_why(parent: str, field: str, reason: str) -> None:
    found = run(edit(valid(), f"{parent}.{field}", True))
    assert codes(found) == {(TE, f"{parent}.{field}")} and reason in found[0].message
