"""Validation remembers verdicts across objects (CEL outcomes per value and per list element, runtime problems
per requirement text): a remembered verdict must be the one a fresh evaluation gives, whatever came before."""

from __future__ import annotations

import copy
import dataclasses
import types
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from simulation import evaluate as ev
from simulation import memo
from simulation.validation import cel, celexpr, crds, schema
from tests.schema_support import REF

RULE = {"rule": "!has(self.weight) || self.weight != 1", "message": "weight must not be 1"}
ELEMENT_RULE = {"rule": "self.all(x, x.operator != 'NotIn' || x.values.size() != 2)", "message": "no NotIn pairs"}


def _crd() -> crds.Crd:
    raw = copy.deepcopy(dict(crds.raw_dra()))
    spec = raw["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["x-kubernetes-validations"] = [*spec["x-kubernetes-validations"], RULE]
    spec["properties"]["requirements"]["x-kubernetes-validations"].append(ELEMENT_RULE)
    return crds.load(raw, "test")


def _overlay(requirements: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "test"},
            "spec": {"requirements": requirements, **spec}}


def _fields(crd: crds.Crd, obj: dict[str, Any]) -> set[str]:
    return {f.field for f in schema.check(obj, REF, None, crd) if f.code == "schema"}


def test_equal_python_values_of_other_json_types_are_judged_apart() -> None:
    crd = _crd()
    # 1 first, so that a memo keyed by Python equality (True == 1) would hand its verdict on to True.
    assert _fields(crd, _overlay([], weight=1)) == {"spec"}
    # A bool is not 1: the rule errs on the type, which the type error covers.
    assert _fields(crd, _overlay([], weight=True)) == {"spec.weight"}
    assert _fields(crd, _overlay([], weight=2)) == set()


def test_element_verdicts_follow_the_element_wherever_it_stands() -> None:
    crd = _crd()
    pair = {"key": "a", "operator": "NotIn", "values": ["x", "y"]}
    one = {"key": "b", "operator": "NotIn", "values": ["x"]}
    assert _fields(crd, _overlay([pair, one])) == {"spec.requirements[0]"}
    assert _fields(crd, _overlay([one, one, pair])) == {"spec.requirements[2]"}
    assert _fields(crd, _overlay([one])) == set()


def _runtime_fields(obj: dict[str, Any]) -> set[str]:
    checked = ev.check_overlay(ev.Document(obj, 1))
    return {f.field for f in checked.findings if f.code == "runtime-invalid"}


def test_remembered_runtime_problems_take_the_path_of_the_requirement_at_hand() -> None:
    bad = {"key": "example.com/team", "operator": "In", "values": ["ok", "not ok!"]}
    fine = {"key": "example.com/tier", "operator": "In", "values": ["web"]}
    assert _runtime_fields(_overlay([bad])) == {"spec.requirements[0].values[1]"}
    assert _runtime_fields(_overlay([fine, fine, bad])) == {"spec.requirements[2].values[1]"}
    assert _runtime_fields(_overlay([fine])) == set()


def test_a_requirement_the_api_server_rejects_is_left_to_it_even_when_its_text_was_seen_valid() -> None:
    gt = {"key": "example.com/gen", "operator": "Gt", "values": ["3"]}
    assert _runtime_fields(_overlay([gt])) == set()
    # The same text under a key the CRD's pattern rejects: the API server's finding, not a runtime one.
    checked = ev.check_overlay(ev.Document(_overlay([{**gt, "key": "-bad"}]), 1))
    assert {f.code for f in checked.findings} == {"schema"}


_VALUE = st.one_of(st.text(max_size=5), st.integers(-3, 3), st.booleans(), st.none())


@given(st.lists(st.dictionaries(st.sampled_from(["key", "operator", "values", "minValues"]),
                                st.one_of(_VALUE, st.lists(_VALUE, max_size=3)), max_size=4), max_size=3))
def test_elementwise_rules_judged_in_one_scope_equal_a_scope_each(elements: list[dict[str, Any]]) -> None:
    # The CRD's rules on each requirement (self.all over the list), evaluated fresh: one scope per element for
    # all of them must give what a scope per rule and element gives.
    node = crds.dra().node.properties["spec"].properties["requirements"]
    rules = dataclasses.replace(node.rules, memo=memo.Memo(), element_memo=memo.Memo())
    assert rules.elementwise
    expected = [cel.Violation((*rule.field_path, i), cel._message(rule, elements, outcome),
                              isinstance(outcome, celexpr.Failure))
                for i, element in enumerate(elements)
                for rule, name, body in rules.elementwise
                if (outcome := celexpr.evaluate(body, {name: cel._pruned(element, rules.element_reads)})) is not True]
    assert list(cel._elementwise(rules, elements)) == expected


def _fresh_fields(obj: dict[str, Any]) -> list[tuple[str, str, str]]:
    # A CRD loaded anew has no remembered verdicts.
    crd = crds.load(copy.deepcopy(dict(crds.raw_dra())), "fresh")
    return [(f.code, f.field, f.message) for f in schema.check(obj, REF, None, crd)]


def test_remembered_element_violations_take_the_path_of_the_element_at_hand() -> None:
    crd = _crd()
    restricted = {"key": "karpenter.sh/team", "operator": "In", "values": ["a"]}
    fine = {"key": "example.com/tier", "operator": "In", "values": ["web"]}
    assert _fields(crd, _overlay([restricted])) == {"spec.requirements[0].key"}
    assert _fields(crd, _overlay([fine, fine, restricted])) == {"spec.requirements[2].key"}
    assert _fields(crd, _overlay([fine])) == set()


_KEYS = st.sampled_from(["example.com/a", "karpenter.sh/x", "kubernetes.io/hostname", "-bad", "",
                         "node.kubernetes.io/instance-type"])
_REQUIREMENT = st.fixed_dictionaries({"key": st.one_of(_KEYS, _VALUE), "operator": st.sampled_from(
    ["In", "NotIn", "Gt", "Exists", "Bogus"])}, optional={"values": st.lists(st.one_of(
        st.sampled_from(["1", "x", "-1"]), _VALUE), max_size=2)})


@given(st.lists(st.lists(_REQUIREMENT, max_size=4), min_size=1, max_size=4))
def test_findings_with_remembered_element_verdicts_equal_a_fresh_judgement(
        overlays: list[list[dict[str, Any]]]) -> None:
    # One CRD judges the overlays in turn (its memos warmed by those before); each must get what a CRD loaded
    # anew gives it.
    crd = crds.load(copy.deepcopy(dict(crds.raw_dra())), "shared")
    for requirements in overlays:
        obj = _overlay(requirements)
        assert [(f.code, f.field, f.message) for f in schema.check(obj, REF, None, crd)] == _fresh_fields(obj)


_JSON = st.recursive(st.one_of(st.text(max_size=3), st.integers(), st.booleans(), st.none()),
                     lambda inner: st.one_of(st.lists(inner, max_size=3),
                                             st.dictionaries(st.sampled_from(["spec", "weight", "requirements",
                                                                              "key", "values", "capacity", "x"]),
                                                             inner, max_size=3)), max_leaves=12)


def _tupled(value: Any) -> Any:
    # The same value as a caller's tuples and read-only mappings: always converted, never passed through.
    if isinstance(value, list):
        return tuple(_tupled(v) for v in value)
    if isinstance(value, dict):
        return types.MappingProxyType({k: _tupled(v) for k, v in value.items()})
    return value


@given(st.dictionaries(st.sampled_from(["apiVersion", "kind", "metadata", "spec"]), _JSON, max_size=4))
def test_a_validated_object_passed_through_equals_its_converted_copy(obj: dict[str, Any]) -> None:
    before = copy.deepcopy(obj)
    validated = schema.as_validated(obj)
    assert validated == schema.as_validated(_tupled(obj))
    assert obj == before  # the object read is never changed


def test_a_plain_object_with_nothing_to_prune_is_validated_as_it_is() -> None:
    obj = _overlay([{"key": "example.com/a", "operator": "In", "values": ["x"]}], weight=3)
    assert schema.as_validated(obj) is obj
    nulled = _overlay([{"key": "example.com/a", "operator": "In", "values": ["x"]}], weight=None)
    assert schema.as_validated(nulled)["spec"] == {"requirements": nulled["spec"]["requirements"]}
    assert nulled["spec"]["weight"] is None
