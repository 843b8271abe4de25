"""Semantic DRA rules: bindingKey, attributeBindings and cross-overlay key scope."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from simulation import evaluate as ev
from simulation import findings
from simulation.analysis import dra
from simulation.validation import crds

PCIE = "resource.k8s.io/pcieRoot"
TPL = ("spec", "dynamicResources", "resourceSliceTemplates")
BIND = ("spec", "dynamicResources", "attributeBindings")


def ref(name: str = "gpu") -> findings.ObjectRef:
    return findings.ObjectRef("NodeOverlay", name)


def dev(name: str, **attrs: dict[str, Any]) -> dict[str, Any]:
    # Keyword arguments cannot carry "/" so callers pass qualified names through `attrs=`.
    return {"name": name, "attributes": dict(attrs.pop("attrs", {}), **attrs)}


def tpl(name: str, driver: str, *devices: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"driver": driver, "devices": list(devices)}}


def sel(template: str, device: str) -> dict[str, str]:
    return {"resourceSliceTemplate": template, "device": device}


def overlay(templates: list[Any], bindings: list[Any] | None = None) -> dict[str, Any]:
    dr: dict[str, Any] = {"resourceSliceTemplates": templates}
    if bindings is not None:
        dr["attributeBindings"] = bindings
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "gpu"},
            "spec": {"requirements": [], "dynamicResources": dr}}


def key(k: str) -> dict[str, Any]:
    return {"bindingKey": k}


def attr_path(t: int, d: int, name: str, *rest: str) -> tuple[str | int, ...]:
    return (*TPL, t, "spec", "devices", d, "attributes", name, *rest)


def pair(a: dict[str, Any], b: dict[str, Any], bindings: list[Any] | None = None) -> dict[str, Any]:
    """An RDMA NIC and a GPU, one device each, in two templates."""
    return overlay([tpl("rdma-slice", "rdma.nvidia.com", dev("rdma-0", attrs=a)),
                    tpl("gpu-slice", "gpu.nvidia.com", dev("gpu-0", attrs=b))], bindings)


BOUND = [{"attributes": [PCIE], "deviceSelectors": [sel("rdma-slice", "rdma-0"), sel("gpu-slice", "gpu-0")]}]

VALID = {
    "binding key across two templates": pair({PCIE: key("root-1")}, {PCIE: key("root-1")}),
    "attribute binding, attribute left to the binding": pair({}, {}, BOUND),
    "attribute binding with equal concrete values": pair({PCIE: {"string": "pci0000:00"}},
                                                         {PCIE: {"string": "pci0000:00"}}, BOUND),
    "attribute binding, one side concrete": pair({PCIE: {"string": "pci0000:00"}}, {}, BOUND),
    "versions differing only in build metadata": pair({PCIE: {"version": "1.2.0+a"}},
                                                      {PCIE: {"version": "1.2.0+b"}}, BOUND),
    "bound devices using binding keys": overlay(
        [tpl("rdma-slice", "rdma.nvidia.com", dev("rdma-0", attrs={PCIE: key("r1")})),
         tpl("gpu-slice", "gpu.nvidia.com", dev("gpu-0", attrs={PCIE: key("r1")}),
             dev("gpu-1", attrs={PCIE: {"string": "pci0000:00"}}))],
        [{"attributes": [PCIE], "deviceSelectors": [sel("gpu-slice", "gpu-0"), sel("gpu-slice", "gpu-1")]}]),
    "unprefixed attribute name": pair({}, {}, [{"attributes": ["numaNode"],
                                               "deviceSelectors": BOUND[0]["deviceSelectors"]}]),
    "no dynamic resources": {"spec": {"requirements": []}},
}


@pytest.mark.parametrize("obj", VALID.values(), ids=list(VALID))
def test_valid_overlays_have_no_findings(obj: dict[str, Any]) -> None:
    assert dra.check_overlay(obj, ref(), 0) == []


def three(attrs0: dict[str, Any], attrs1: dict[str, Any], attrs2: dict[str, Any] | None = None,
          bindings: list[Any] | None = None) -> dict[str, Any]:
    devices = [dev("gpu-0", attrs=attrs1)] + ([dev("gpu-1", attrs=attrs2)] if attrs2 is not None else [])
    return overlay([tpl("rdma-slice", "rdma.nvidia.com", dev("rdma-0", attrs=attrs0)),
                    tpl("gpu-slice", "gpu.nvidia.com", *devices)], bindings)


NUMA = "resource.k8s.io/numaNode"
BK = "invalid-binding-key"
AB = "invalid-attribute-binding"
SELS = BOUND[0]["deviceSelectors"]

INVALID: dict[str, tuple[dict[str, Any], list[tuple[str, tuple[str | int, ...]]]]] = {
    "key not a DNS label": (pair({PCIE: key("Root_1")}, {PCIE: key("Root_1")}),
                            [(BK, attr_path(0, 0, PCIE, "bindingKey"))]),
    "key longer than 63": (pair({PCIE: key("r" * 64)}, {PCIE: key("r" * 64)}),
                           [(BK, attr_path(0, 0, PCIE, "bindingKey"))]),
    "empty key": (pair({PCIE: key("")}, {PCIE: key("")}), [(BK, attr_path(0, 0, PCIE, "bindingKey"))]),
    "key with a concrete value": (pair({PCIE: key("r1")}, {PCIE: {"bindingKey": "r1", "string": "x"}}),
                                  [(BK, attr_path(1, 0, PCIE, "bindingKey"))]),
    "key on one device": (pair({PCIE: key("r1")}, {}), [(BK, attr_path(0, 0, PCIE, "bindingKey"))]),
    "key under two attribute names": (three({PCIE: key("r1")}, {PCIE: key("r1")}, {NUMA: key("r1")}),
                                      [(BK, attr_path(1, 1, NUMA, "bindingKey"))]),
    "key twice on one device": (pair({PCIE: key("r1")}, {PCIE: key("r1"), NUMA: key("r1")}),
                                [(BK, attr_path(1, 0, NUMA, "bindingKey"))]),
    "key twice on its only device": (pair({PCIE: key("r1"), NUMA: key("r1")}, {}),
                                     [(BK, attr_path(0, 0, PCIE, "bindingKey")),
                                      (BK, attr_path(0, 0, NUMA, "bindingKey"))]),
    "one finding per rule per key": (three({PCIE: key("BAD")}, {PCIE: key("BAD")}, {PCIE: key("BAD")}),
                                     [(BK, attr_path(0, 0, PCIE, "bindingKey"))]),
    "unknown template": (pair({}, {}, [{"attributes": [PCIE],
                                       "deviceSelectors": [SELS[0], sel("gpu", "gpu-0")]}]),
                         [(AB, (*BIND, 0, "deviceSelectors", 1, "resourceSliceTemplate"))]),
    "unknown device": (pair({}, {}, [{"attributes": [PCIE],
                                     "deviceSelectors": [SELS[0], sel("gpu-slice", "gpu-9")]}]),
                       [(AB, (*BIND, 0, "deviceSelectors", 1, "device"))]),
    "same device twice": (pair({}, {}, [{"attributes": [PCIE], "deviceSelectors": [*SELS, SELS[1]]}]),
                          [(AB, (*BIND, 0, "deviceSelectors", 2))]),
    "different concrete values": (pair({PCIE: {"string": "a"}}, {PCIE: {"string": "b"}}, BOUND),
                                  [(AB, attr_path(1, 0, PCIE, "string"))]),
    "string and int are different": (pair({PCIE: {"string": "1"}}, {PCIE: {"int": 1}}, BOUND),
                                     [(AB, attr_path(1, 0, PCIE, "int"))]),
    "bool and int are different": (pair({PCIE: {"bool": True}}, {PCIE: {"int": 1}}, BOUND),
                                   [(AB, attr_path(1, 0, PCIE, "int"))]),
    "conflict through a chain of bindings": (
        three({PCIE: {"string": "a"}}, {}, {PCIE: {"string": "b"}},
              [{"attributes": [PCIE], "deviceSelectors": [SELS[0], sel("gpu-slice", "gpu-0")]},
               {"attributes": [PCIE],
                "deviceSelectors": [sel("gpu-slice", "gpu-0"), sel("gpu-slice", "gpu-1")]}]),
        [(AB, attr_path(1, 1, PCIE, "string"))]),
}

BAD_NAMES = ["pcie root", "a/b/c", "-bad.example/x", "x" * 33, "example.com/", "/x", "Example.com/x",
             "1abc", ("d" * 64) + "/x", "dash-name"]
for _name in BAD_NAMES:
    INVALID[f"attribute name {_name[:20]!r}"] = (
        pair({}, {}, [{"attributes": [PCIE, _name], "deviceSelectors": SELS}]),
        [(AB, (*BIND, 0, "attributes", 1))])


@pytest.mark.parametrize(("obj", "expected"), INVALID.values(), ids=list(INVALID))
def test_each_violation_is_reported_once(obj: dict[str, Any],
                                         expected: list[tuple[str, tuple[str | int, ...]]]) -> None:
    # Through the whole per-object check: some rules are the CRD's (schema.py), the rest dra.py's,
    # and together they must report each problem exactly once.
    got = [f for f in ev.check_overlay(ev.Document(obj, 3), crds.dra()).findings if f.code in DRA_CODES]
    assert sorted((f.code, f.path) for f in got) == sorted(expected)
    for f in got:
        assert f.source == 3 and f.obj == ref() and f.severity == findings.Severity.ERROR
        assert "\n" not in f.message


DRA_CODES = frozenset({"invalid-binding-key", "invalid-attribute-binding", "invalid-resource-slice-template"})


def test_message_names_template_device_and_attribute() -> None:
    [f] = dra.check_overlay(pair({PCIE: key("r1")}, {}), ref(), None)
    assert "rdma-slice" in f.message and "rdma-0" in f.message and PCIE in f.message
    [g] = dra.check_overlay(INVALID["different concrete values"][0], ref(), None)
    for word in ("rdma-slice", "rdma-0", "gpu-slice", "gpu-0", PCIE, "'a'", "'b'", "attributeBindings[0]"):
        assert word in g.message


def _valid() -> dict[str, Any]:
    return copy.deepcopy(VALID["binding key across two templates"])


MALFORMED: list[Any] = [
    None, "x", [], 5, {"spec": "x"}, {"spec": {"dynamicResources": []}},
    overlay("x"), overlay([1, "a", None, []]), overlay([{"spec": []}, {"metadata": "x", "spec": {}}]),
    overlay([{"metadata": {"name": 7}, "spec": {"driver": 5, "devices": {}}}]),
    overlay([tpl("t", "d.example.com", "x", [], {"name": 3})]),
    overlay([tpl("t", "d.example.com", {"name": "a", "attributes": []}, {"name": "b", "attributes": "x"})]),
    overlay([tpl("t", "d.example.com", dev("a", attrs={PCIE: "x", 5: key("k"), NUMA: [], "n": None}))]),
    overlay([tpl("t", "d.example.com", dev("a", attrs={PCIE: {"bindingKey": 5}, NUMA: {"int": "x"}}),
                 dev("b", attrs={PCIE: {"bindingKey": None}, NUMA: {"int": 2.5}}))]),
    overlay([], "x"), overlay([], [1, "x", None, {"attributes": "x", "deviceSelectors": {}}]),
    overlay([], [{"attributes": [5, None, {}],
                  "deviceSelectors": [5, {"resourceSliceTemplate": 1, "device": None}]}]),
    # A selector cannot be judged against templates the schema layer could not read.
    overlay("x", [{"attributes": [PCIE], "deviceSelectors": SELS}]),
    overlay([5], [{"attributes": [PCIE], "deviceSelectors": SELS}]),
    overlay([{"metadata": {"name": ["x"]}}], [{"attributes": [PCIE], "deviceSelectors": SELS}]),
    pair({}, {}, [{"attributes": [PCIE], "deviceSelectors": SELS}]) | {"spec": {"dynamicResources": {
        "resourceSliceTemplates": [tpl("rdma-slice", "r.example.com", dev("rdma-0"), "junk"),
                                   tpl("gpu-slice", "g.example.com", {"name": 9})],
        "attributeBindings": [{"attributes": [PCIE], "deviceSelectors": SELS}]}}},
]


@pytest.mark.parametrize("obj", MALFORMED, ids=[f"malformed-{i}" for i in range(len(MALFORMED))])
def test_malformed_input_never_raises_and_reports_nothing(obj: Any) -> None:
    assert dra.check_overlay(obj, ref(), None) == []
    dra.templates(obj)
    assert dra.check_scope([(ref("a"), obj, None), (ref("b"), obj, None)]) == []


def test_device_with_unreadable_name_still_counts_its_key_use() -> None:
    obj = overlay([tpl("t", "d.example.com", {"name": 3, "attributes": {PCIE: key("k")}},
                       dev("b", attrs={PCIE: key("k")}))])
    assert dra.check_overlay(obj, ref(), None) == []


def test_templates_lists_well_formed_templates_with_their_driver() -> None:
    obj = overlay([tpl("rdma-slice", "rdma.nvidia.com"), "junk", {"spec": {"driver": 5}},
                   {"spec": {"driver": "gpu.nvidia.com"}}, {"metadata": {"name": "x"}}])
    assert dra.templates(obj) == [(0, "rdma-slice", "rdma.nvidia.com"), (3, "", "gpu.nvidia.com")]


def scope_overlay(*keys: str) -> dict[str, Any]:
    devices = [dev(f"d{i}", attrs={PCIE: key(k)}) for i, k in enumerate(keys)]
    return overlay([tpl("slice", "gpu.nvidia.com", *devices)])


def test_check_scope_warns_on_the_later_overlay_for_each_pair() -> None:
    inputs = [(ref("c"), scope_overlay("r1", "r1"), 2), (ref("a"), scope_overlay("r1", "r1", "r2", "r2"), 0),
              (ref("b"), scope_overlay("r2", "r1", "r1", "r2"), 1)]
    got = dra.check_scope(inputs)
    summary = [(f.code, f.obj.name, f.related, f.source, f.path) for f in got]
    assert summary == [
        ("binding-key-scope", "b", (ref("a"),), 1, attr_path(0, 1, PCIE, "bindingKey")),
        ("binding-key-scope", "c", (ref("a"),), 2, attr_path(0, 0, PCIE, "bindingKey")),
        ("binding-key-scope", "c", (ref("b"),), 2, attr_path(0, 0, PCIE, "bindingKey")),
        ("binding-key-scope", "b", (ref("a"),), 1, attr_path(0, 0, PCIE, "bindingKey")),
    ]
    assert all(f.severity == findings.Severity.WARNING for f in got)
    assert "'r1'" in got[0].message and "NodeOverlay a" in got[0].message
    assert dra.check_scope(list(reversed(inputs))) == got


@pytest.mark.parametrize("inputs", [
    [],
    [(ref("a"), scope_overlay("r1", "r1"), 0)],
    [(ref("a"), scope_overlay("r1", "r1"), 0), (ref("b"), scope_overlay("r2", "r2"), 1)],
    # The same name twice is a duplicate-object problem, not a scope one.
    [(ref("a"), scope_overlay("r1", "r1"), 0), (ref("a"), scope_overlay("r1", "r1"), 1)],
], ids=["empty", "single", "distinct keys", "same overlay twice"])
def test_check_scope_quiet_cases(inputs: list[tuple[findings.ObjectRef, dict[str, Any], int]]) -> None:
    assert dra.check_scope(inputs) == []


@pytest.mark.parametrize(("text", "ok"), [
    ("root-1", True), ("a", True), ("0", True), ("r" * 63, True),
    ("r" * 64, False), ("Root", False), ("-r", False), ("r-", False), ("r.1", False), ("", False),
])
def test_dns_label(text: str, ok: bool) -> None:
    assert dra.is_dns_label(text) is ok


@pytest.mark.parametrize(("text", "ok"), [
    (PCIE, True), ("numaNode", True), ("_x", True), ("x" * 32, True), (("d" * 63) + "/x", True),
    ("", False), ("x" * 33, False), ("a/b/c", False), ("a.b/", False), ("/x", False), ("a b", False),
])
def test_qualified_name(text: str, ok: bool) -> None:
    assert dra.is_qualified_name(text) is ok


def test_input_is_not_mutated() -> None:
    obj = _valid()
    before = copy.deepcopy(obj)
    dra.check_overlay(obj, ref(), None)
    dra.check_scope([(ref(), obj, None)])
    assert obj == before
