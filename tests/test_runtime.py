"""Karpenter's RuntimeValidate, and the split between it and the API server layer: one finding per problem."""

from __future__ import annotations

from typing import Any

import pytest

from simulation import findings
from simulation.validation import runtime, schema, syntax

REF = findings.ObjectRef("NodeOverlay", "test")
R0 = "spec.requirements[0]"
KEY, VALUES, RT = f"{R0}.key", f"{R0}.values", "runtime-invalid"


def overlay(*requirements: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "test"},
            "spec": {"requirements": list(requirements), **spec}}


def req(key: str, operator: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


def layers(obj: Any) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(API server findings, runtime findings) as (code, field) pairs; warnings left out."""
    api = schema.check(obj, REF, 0)
    rt = runtime.check(obj, REF, 0)
    assert rt == runtime.check(obj, REF, 0, apiserver=api)
    assert all(f.code == "runtime-invalid" and f.severity == findings.Severity.ERROR for f in rt)
    return ({(f.code, f.field) for f in api if f.severity == findings.Severity.ERROR},
            {(f.code, f.field) for f in rt})


SPLIT: list[tuple[str, dict[str, Any], set[tuple[str, str]], set[tuple[str, str]]]] = [
    ("bad In value is runtime only", overlay(req("team", "In", "-bad-")),
     set(), {(RT, f"{VALUES}[0]")}),
    ("notkarpenter.sh is the CRD's alone", overlay(req("notkarpenter.sh/x", "Exists")),
     {("schema", KEY)}, set()),
    ("karpenter.sh domain is the CRD's", overlay(req("karpenter.sh/foo", "Exists")),
     {("schema", KEY)}, set()),
    ("hostname is the CRD's", overlay(req("kubernetes.io/hostname", "In", "a")), {("schema", KEY)}, set()),
    ("unknown capacity type", overlay(req("karpenter.sh/capacity-type", "In", "foo")),
     set(), {(RT, VALUES)}),
    ("one known capacity type is enough", overlay(req("karpenter.sh/capacity-type", "In", "foo", "spot")),
     set(), set()),
    ("NotIn unknown capacity types", overlay(req("karpenter.sh/capacity-type", "NotIn", "foo")),
     set(), set()),
    ("name part over 63", overlay(req("a" * 64, "Exists")), set(), {(RT, KEY)}),
    ("prefixed name part over 63", overlay(req("example.com/" + "a" * 64, "Exists")),
     set(), {(RT, KEY)}),
    ("prefix over 253", overlay(req("d" * 250 + ".com/x", "Exists")), set(), {(RT, KEY)}),
    ("value over 63", overlay(req("team", "NotIn", "v" * 64)), set(), {(RT, f"{VALUES}[0]")}),
    ("Exists value still checked", overlay(req("team", "Exists", "-bad-")),
     set(), {(RT, f"{VALUES}[0]")}),
    ("Gt negative is the CRD's", overlay(req("gen", "Gt", "-1")), {("schema", R0)}, set()),
    ("Gt text is the CRD's", overlay(req("gen", "Gt", "abc")), {("schema", R0)}, set()),
    ("In without values is the CRD's", overlay(req("team", "In")), {("schema", R0)}, set()),
    ("NotIn without values is the CRD's", overlay(req("team", "NotIn")), {("schema", R0)}, set()),
    ("standard capacity is the CRD's", overlay(capacity={"cpu": "1"}),
     {("schema", "spec.capacity.cpu")}, set()),
    ("extended capacity", overlay(capacity={"example.com/fuse": "1"}), set(), set()),
    ("normalized alias", overlay(req("beta.kubernetes.io/arch", "In", "amd64")), set(), set()),
    ("both layers, different problems", overlay(req("notkarpenter.sh/x", "In", "-bad-")),
     {("schema", KEY)}, {(RT, f"{VALUES}[0]")}),
    ("mistyped values are the schema's", overlay({"key": "team", "operator": "In", "values": [1, "-bad-"]}),
     {("schema", f"{R0}.values[0]")}, {(RT, f"{VALUES}[1]")}),
    ("valid", overlay(req("karpenter.sh/capacity-type", "In", "on-demand"), req("gen", "Gte", "0"),
                      req("node.kubernetes.io/windows-build", "In", "10.0.17763")), set(), set()),
]


@pytest.mark.parametrize(("obj", "api", "rt"), [c[1:] for c in SPLIT], ids=[c[0] for c in SPLIT])
def test_layer_split(obj: dict[str, Any], api: set[tuple[str, str]], rt: set[tuple[str, str]]) -> None:
    assert layers(obj) == (api, rt)


# Each rule of RuntimeValidate on its own, as if no API server had looked first (apiserver=[]).
RAW: list[tuple[str, dict[str, Any], set[str]]] = [
    ("unsupported operator", overlay(req("team", "Foo", "a")), {f"{R0}.operator"}),
    ("restricted domain", overlay(req("karpenter.sh/foo", "Exists")), {KEY}),
    ("restricted subdomain", overlay(req("x.karpenter.sh/foo", "Exists")), {KEY}),
    ("well-known karpenter label", overlay(req("karpenter.sh/nodepool", "In", "a")), set()),
    ("suffix is not a subdomain at run time", overlay(req("notkarpenter.sh/x", "Exists")), set()),
    ("restricted label", overlay(req("kubernetes.io/hostname", "Exists")), {KEY}),
    ("key not qualified", overlay(req("a/b/c", "Exists")), {KEY}),
    ("In empty", overlay(req("team", "In")), {VALUES}),
    ("NotIn empty", overlay(req("team", "NotIn")), {VALUES}),
    ("Gt text", overlay(req("gen", "Gt", "abc")), {VALUES}),
    ("Gt two values", overlay(req("gen", "Lt", "1", "2")), {VALUES}),
    ("Gt negative", overlay(req("gen", "Lte", "-1")), {VALUES, f"{VALUES}[0]"}),
    ("Gt signed", overlay(req("gen", "Gt", "+1")), {f"{VALUES}[0]"}),
    ("capacity type", overlay(req("karpenter.sh/capacity-type", "In", "x")), {VALUES}),
    ("standard resource", overlay(capacity={"memory": "1Gi", "pods": 2}),
     {"spec.capacity.memory", "spec.capacity.pods"}),
]


@pytest.mark.parametrize(("obj", "fields"), [c[1:] for c in RAW], ids=[c[0] for c in RAW])
def test_runtime_rules_on_their_own(obj: dict[str, Any], fields: set[str]) -> None:
    found = runtime.check(obj, REF, 3, apiserver=[])
    assert {f.field for f in found} == fields
    assert all(f.code == "runtime-invalid" and f.source == 3 and dict(f.detail) == {"layer": "runtime"}
               for f in found)


@pytest.mark.parametrize("obj", [
    None, [], "x", {}, {"spec": []}, {"spec": {"requirements": {}}},
    {"spec": {"requirements": ["x", None, 5]}}, {"spec": {"requirements": [{"operator": "Gt"}]}},
    overlay({"key": 5, "operator": ["In"], "values": "a"}), overlay({"values": [None, {}, "ok"]}),
    overlay(capacity=["cpu"]), overlay(capacity={"cpu": None}),
    overlay({"key": "karpenter.sh/capacity-type", "operator": "In", "values": [{}, ["spot"]]}),
])
def test_malformed_input_never_raises(obj: Any) -> None:
    assert isinstance(runtime.check(obj, REF, None), list)
    assert isinstance(runtime.check(obj, REF, None, apiserver=[]), list)


@pytest.mark.parametrize(("text", "valid"), [
    ("example.com/Name_1", True), ("a" * 63, True), ("a" * 64, False), ("/x", False), ("x/", False),
    ("a/b/c", False), ("-x", False), ("Example.com/x", False), ("d" * 254 + "/x", False),
])
def test_qualified_name(text: str, valid: bool) -> None:
    assert (syntax.qualified_name_errors(text) == []) == valid


@pytest.mark.parametrize(("text", "value"), [
    ("5", 5), ("+5", 5), ("-0", 0), ("007", 7), ("9223372036854775807", 2**63 - 1),
    ("9223372036854775808", None), ("1_000", None), (" 5", None), ("5.0", None), ("", None), ("\u0665", None),
])
def test_go_integer_parsing(text: str, value: int | None) -> None:
    assert syntax.parse_go_int(text) == value
