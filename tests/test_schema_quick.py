"""The schema layer's quick check (crds.Crd.accepts, compiled by fastjsonschema) passes exactly the objects
jsonschema finds no error in, under every CRD the guard supports: corpus overlays, the workload's, and
random edits of them (wrong types, tricky strings for Go's patterns, unknown fields, deletions)."""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks import workload
from simulation import findings
from simulation.validation import crds, schema
from tests import casefmt
from tests.schema_support import valid
from tests.strategies import examples

REF = findings.ObjectRef("NodeOverlay", "test")


def _corpus() -> list[dict[str, Any]]:
    """Every NodeOverlay of the case corpus, the schema tests' full overlay and a slice of the workload."""
    found: list[dict[str, Any]] = [valid(), *workload.overlays()[:50]]
    for case in casefmt.discover():
        try:
            docs = [*case.input_documents(), *case.existing_documents()]
        except Exception:  # the deliberately unreadable inputs
            continue
        found += [d for d in docs if isinstance(d, dict) and d.get("kind") == "NodeOverlay"]
    return found


CORPUS = _corpus()


def _verdicts(crd: crds.Crd, obj: Any) -> tuple[bool, bool]:
    """(the quick check's verdict, jsonschema's) on the object as the API server validates it."""
    plain = schema.as_validated(obj, crd)
    assert crd.accepts is not None
    return crd.accepts(plain), not any(crd.validator.iter_errors(plain))


CRDS = {"dra": crds.dra, "karpenter": crds.karpenter}


def test_both_crds_get_a_quick_check() -> None:
    assert crds.dra().accepts is not None and crds.karpenter().accepts is not None


@pytest.mark.parametrize("which", list(CRDS))
def test_corpus_verdicts_agree(which: str) -> None:
    crd = CRDS[which]()
    verdicts = [_verdicts(crd, obj) for obj in CORPUS]
    assert [quick for quick, _ in verdicts] == [full for _, full in verdicts]
    # Both answers occur, so the comparison above says something.
    assert {full for _, full in verdicts} == {True, False}


@pytest.mark.parametrize("which", list(CRDS))
def test_findings_are_the_same_without_the_quick_check(which: str) -> None:
    crd = CRDS[which]()
    slow = dataclasses.replace(crd, accepts=None)
    for obj in CORPUS:
        assert schema.check(obj, REF, 1, crd) == schema.check(obj, REF, 1, slow)


def test_a_schema_fastjsonschema_refuses_leaves_jsonschema_alone() -> None:
    assert crds._quick_check({"type": "object", "properties": {"a": 5}}) is None
    assert crds._quick_check({"type": "string", "pattern": "("}) is None
    accepts = crds._quick_check({"type": "string", "goPattern": "^\\d+$"})
    # Go's reading: `$` is the very end and \d is ASCII.
    assert accepts is not None and accepts("12") and not accepts("12\n") and not accepts("\u0663")


# --- random edits -------------------------------------------------------------------------------------

TRICKY = ["", "a", "a\n", "1", "-1", "+1", "01", "1.5", "1e3", "\u0663", "In", "NotIn", "Exists", "DoesNotExist",
          "Gt", "Lte", "Bogus", "karpenter.sh/capacity-type", "karpenter.sh/x", "kubernetes.io/hostname",
          "example.com/x", "Example.com/x", "-10%", "-100%", "-101%", "+5", "5%", "0.5", "1Gi", "cpu", "gpu-0",
          "gpu.example.com", "Gpu_0", "x" * 64, "a" * 317, "r1", "1.2.3", "v1.2.3"]
FIELDS = ["key", "operator", "values", "name", "string", "int", "bool", "version", "bindingKey", "value",
          "metadata", "spec", "driver", "devices", "attributes", "capacity", "weight", "price",
          "priceAdjustment", "requirements", "nodeSelector", "nodeSelectorTerms", "unknownField"]
SCALARS = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.sampled_from(TRICKY)
           | st.text(max_size=6))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=4), inner, max_size=3),
                      max_leaves=8)


def _places(node: Any) -> list[tuple[Any, Any]]:
    """(container, key or index) of every value inside `node`, and of a new member of each container."""
    out: list[tuple[Any, Any]] = []
    if isinstance(node, dict):
        out += [(node, None)]
        for key, child in node.items():
            out += [(node, key), *_places(child)]
    elif isinstance(node, list):
        out += [(node, None)]
        for i, child in enumerate(node):
            out += [(node, i), *_places(child)]
    return out


@st.composite
def edited(draw: st.DrawFn) -> dict[str, Any]:
    obj: dict[str, Any] = copy.deepcopy(draw(st.sampled_from(CORPUS)))
    for _ in range(draw(st.integers(1, 3))):
        container, at = draw(st.sampled_from(_places(obj)))
        action = draw(st.sampled_from(["set", "set", "delete"]))
        value = draw(VALUES)
        if at is None and isinstance(container, dict):
            container[draw(st.sampled_from(FIELDS))] = value
        elif at is None:
            container.append(value)
        elif action == "delete":
            del container[at]
        else:
            container[at] = value
    return obj


@settings(max_examples=examples(400), deadline=None)
@given(obj=edited())
def test_random_edits_get_the_same_verdict(obj: dict[str, Any]) -> None:
    for crd in (crds.dra(), crds.karpenter()):
        quick, full = _verdicts(crd, obj)
        assert quick == full


@pytest.mark.parametrize("value", [math.nan, math.inf, 1.0, 2**64, True])
def test_odd_numbers_get_the_same_verdict(value: Any) -> None:
    obj = valid()
    obj["spec"]["weight"] = value
    quick, full = _verdicts(crds.dra(), obj)
    assert quick == full
