"""The schema layer's warnings, its split from Karpenter's runtime layer, determinism and input forms."""

from __future__ import annotations

import copy

import pytest
from ruamel.yaml import YAML

from simulation import findings
from simulation.validation import schema
from tests.schema_support import BIND, K0, REF, TPL, codes, run, with_edits

# --- warnings, layers, determinism, input forms ---------------------------------------------------

@pytest.mark.parametrize(("operator", "values", "warned"), [
    ("Exists", ["a"], True), ("DoesNotExist", ["a", "b"], True), ("Exists", [], False), ("In", ["a"], False),
])
def test_ignored_values(operator: str, values: list[str], warned: bool) -> None:
    found = run(with_edits(("spec.requirements[3]", {"key": "bar", "operator": operator, "values": values})))
    assert codes(found) == ({("ignored-values", "spec.requirements[3].values")} if warned else set())
    assert all(f.severity == findings.Severity.WARNING for f in found)


def test_every_rejection_is_marked_as_the_api_server_layer_and_all_problems_are_collected() -> None:
    obj = with_edits(("spec.weight", "ten"), ("spec.wieght", 1), ("spec.pricePercent", 90),
                     (K0, "kubernetes.io/hostname"), (f"{TPL}[0].spec.pool", {}),
                     (f"{BIND}[0].deviceSelectors", []), ("spec.requirements[3].values", ["x"]))
    found = run(obj)
    assert [f.code for f in found].count("ignored-values") == 1
    assert {f.code for f in found} == {"schema", "legacy-field", "invalid-resource-slice-template",
                                       "invalid-attribute-binding", "ignored-values"}
    assert all(dict(f.detail)["layer"] == "apiserver" for f in found if f.code != "ignored-values")
    assert all(f.source == 7 and f.obj == REF for f in found)
    assert found == run(copy.deepcopy(obj)) == findings.ordered(found)


def test_round_trip_yaml_input_matches_plain_data() -> None:
    text = """
metadata: {name: test}
spec:
  requirements:
    - &req {key: foo, operator: Exists, values: [a]}
  weight: &w 5
  capacity: {example.com/x: *w, example.com/on: true}
  when: 2024-01-01
"""
    loaded = YAML().load(text)
    assert codes(run(loaded)) == {("ignored-values", "spec.requirements[0].values"),
                                  ("schema", "spec.capacity['example.com/on']"), ("schema", "spec.when")}
    assert schema.as_validated(loaded)["spec"]["when"] == "2024-01-01"
