"""The DRA fixture cases through Karpenter's own in-memory model (cloudprovider.DynamicResources of
sigs.k8s.io/karpenter v1.15.0) and its scheduler's binding graph (BuildAttributeBindings), via
hack/karpenter-oracle. Karpenter's NodeOverlay type has no spec.dynamicResources, so this is the
only place upstream code can judge the templates: the harness converts each overlay's templates the
way the RFC describes (a template is a pool, bindingKeys and attributeBindings become
AttributeBindings over DeviceIDs), decodes values strictly into resource.k8s.io/v1 types, and
reports which bindings the scheduler would honour and which fields the model drops.

Where the core reports an error that Karpenter would swallow, the test pins both sides, and the
core's message must say what Karpenter does.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from simulation import evaluate as ev
from simulation.semantics import catalog as cat
from tests import casefmt
from tests import oracle_support as oracle

# The cases that choose the DRA-extended CRD: under Karpenter's the API server refuses the templates.
DRA_CASES = [c for c in oracle.CASES if c.crd == "dra" and any(
    isinstance(o, Mapping) and isinstance(o.get("spec"), Mapping) and "dynamicResources" in o["spec"]
    for o in c.input_documents())]


# The module fixture below is dear: one xdist worker runs every test here, so it is made once.
pytestmark = pytest.mark.xdist_group("test_oracle_dra")


@pytest.fixture(scope="module")
def karpenter(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Case -> overlay -> Karpenter's view of its templates; one harness process for all."""
    base = tmp_path_factory.mktemp("oracle-dra")
    dirs = [oracle.write_objects(base / c.name, oracle.cluster_after_admission(c)) for c in DRA_CASES]
    out = {}
    for case, result in zip(DRA_CASES, oracle.run_oracle(dirs, oracle.DEFAULT_CATALOG), strict=True):
        assert not result.get("error"), result
        out[case.name] = {d["overlay"]: d for d in result["dynamicResources"]}
    return out


@functools.cache
def _catalog() -> cat.Catalog:
    return cat.default()


def _core_findings(case: casefmt.Case) -> list[Any]:
    docs = [ev.Document(o, i) for i, o in enumerate(oracle.cluster_after_admission(case))]
    return list(ev.evaluate(docs, ev.prepare([], _catalog(), crd=case.compiled_crd())).findings)


def test_dra_corpus_reaches_the_model() -> None:
    assert len(DRA_CASES) >= 10


@pytest.mark.tools
@pytest.mark.parametrize("case", DRA_CASES, ids=[c.name for c in DRA_CASES])
def test_karpenter_types_accept_the_templates(case: casefmt.Case, karpenter: Mapping[str, Any]) -> None:
    """Every value decodes strictly into resource.k8s.io/v1's DeviceAttribute and DeviceCapacity
    and survives Karpenter's generated deep copy."""
    overlays = karpenter[case.name]
    assert overlays, "no overlay with templates reached the model"
    for name, view in overlays.items():
        assert view["errors"] == [], f"{name}: Karpenter's types refuse {view['errors']}"
        assert view["templates"] >= 1 and view["devices"] >= 1


@pytest.mark.tools
def test_valid_bindings_are_honoured(karpenter: Mapping[str, Any]) -> None:
    view = karpenter["dra-valid-gpu-rdma"]["p5-gpu-rdma"]
    assert view["ignored"] == []
    assert [(b["source"], len(b["devices"]), b["bound"]) for b in view["bindings"]] == [
        ("bindingKey root-0", 2, True), ("bindingKey root-1", 2, True)]


def _binding_key_messages(case: casefmt.Case) -> list[str]:
    return [f.message for f in _core_findings(case) if f.code == "invalid-binding-key"]


def _case(name: str) -> casefmt.Case:
    return next(c for c in DRA_CASES if c.name == name)


@pytest.mark.tools
def test_single_device_key_is_silently_dropped_by_karpenter(karpenter: Mapping[str, Any]) -> None:
    """Karpenter takes the one-device binding and its scheduler skips it: nothing is bound and
    nothing is said. The core's error says so."""
    [binding] = karpenter["dra-binding-key-single-device"]["lonely-key"]["bindings"]
    assert len(binding["devices"]) == 1 and binding["bound"] is False
    messages = _binding_key_messages(_case("dra-binding-key-single-device"))
    assert any("only one device" in m and "Karpenter" in m for m in messages), messages


@pytest.mark.tools
def test_key_under_two_attributes_leaves_one_device_per_attribute(karpenter: Mapping[str, Any]) -> None:
    bindings = karpenter["dra-binding-key-two-attributes"]["mixed-attributes"]["bindings"]
    split = [b for b in bindings if b["source"] == "bindingKey root-0"]
    assert sorted(b["attribute"] for b in split) == ["numaNode", "resource.k8s.io/pcieRoot"]
    assert all(len(b["devices"]) == 1 and b["bound"] is False for b in split)
    messages = _binding_key_messages(_case("dra-binding-key-two-attributes"))
    assert any("one attribute name" in m and "Karpenter" in m for m in messages), messages


@pytest.mark.tools
def test_binding_to_an_unknown_template_is_accepted_by_karpenter(karpenter: Mapping[str, Any]) -> None:
    """The core refuses a selector naming no template; Karpenter binds the real device to a
    DeviceID with no driver that no ResourceSlice will ever carry."""
    [binding] = karpenter["dra-attribute-binding-unknown-template"]["missing-template"]["bindings"]
    assert "/nic-slice/nic-0" in binding["devices"] and binding["bound"] is True
    codes = {f.code for f in _core_findings(_case("dra-attribute-binding-unknown-template"))}
    assert "invalid-attribute-binding" in codes


@pytest.mark.tools
def test_conflicting_bound_values_are_accepted_by_karpenter(karpenter: Mapping[str, Any]) -> None:
    [binding] = karpenter["dra-attribute-binding-conflicting-values"]["conflicting-roots"]["bindings"]
    assert binding["bound"] is True
    codes = {f.code for f in _core_findings(_case("dra-attribute-binding-conflicting-values"))}
    assert "invalid-attribute-binding" in codes


@pytest.mark.tools
@pytest.mark.parametrize(("name", "overlay", "field"), [
    ("dra-device-excluded-field", "device-taints", "resourceSliceTemplates[0].spec.devices[0].taints"),
    ("dra-template-excluded-field", "node-name", "resourceSliceTemplates[0].spec.nodeName"),
])
def test_excluded_fields_have_no_place_in_karpenters_model(name: str, overlay: str, field: str,
                                                           karpenter: Mapping[str, Any]) -> None:
    """The RFC excludes these fields and the core refuses them; Karpenter's model would drop them."""
    assert field in karpenter[name][overlay]["ignored"]
    assert any(f.code == "invalid-resource-slice-template" for f in _core_findings(_case(name)))


@pytest.mark.tools
def test_harness_reports_what_it_was_given(tmp_path: Path) -> None:
    overlay = {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "bad"},
               "spec": {"requirements": [], "dynamicResources": {"resourceSliceTemplates": [
                   {"metadata": {"name": "t"}, "spec": {"driver": "d.example.com", "devices": [
                       {"name": "x", "attributes": {"a": {"integer": 1}}, "capacity": {"m": {"value": "1Gi"}}}]}}]}}}
    [result] = oracle.run_oracle([oracle.write_objects(tmp_path / "set", [overlay])], oracle.DEFAULT_CATALOG)
    [view] = result["dynamicResources"]
    assert len(view["errors"]) == 1 and "integer" in view["errors"][0], view
