"""Every field may hold any YAML type: the answer is a finding naming the file, line and field (or a
one-line error), never a traceback, and the rest of the input is still checked.

Each case is one document placed between two overlays that conflict; the conflict must still be
reported, so a bad document never hides the rest of the run."""

from __future__ import annotations

import io
import json
import pathlib
from typing import Any

import pytest

from lint import cli
from tests.input_support import CATALOG, OVERLAY, run, write

OVERLAY_HEAD = "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: bad}\n"
NODEPOOL_HEAD = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: pool}\n"
RS = "invalid-resource-slice-template"
REQ = "{key: karpenter.sh/capacity-type, operator: In, values: [spot]}"


def _overlay(spec: str) -> str:
    return OVERLAY_HEAD + f"spec: {{requirements: [{REQ}], {spec}}}\n"


def _template(spec: str) -> str:
    return _overlay("dynamicResources: {resourceSliceTemplates: [{metadata: {name: t}, spec: {driver: gpu.x.com, "
                    + spec + "}}]}")


def _pool(template: str) -> str:
    return NODEPOOL_HEAD + f"spec: {{template: {template}}}\n"


# (document, code, field, line of the finding within the document or None, words in the message)
CASES: dict[str, tuple[str, str, str | None, int | None, tuple[str, ...]]] = {
    # what the document is
    "kind a list": ("kind: [NodeOverlay]\nmetadata: {name: x}\n", "parse-error", "kind", 1, ("kind", "list")),
    "kind a mapping": ("kind: {a: 1}\n", "parse-error", "kind", 1, ("kind", "mapping")),
    "kind a number": ("kind: 5\n", "parse-error", "kind", 1, ("kind", "number")),
    "kind a boolean": ("kind: on\n", "parse-error", "kind", 1, ("kind", "boolean")),
    "apiVersion a list": ("apiVersion: [karpenter.sh/v1alpha1]\nkind: NodeOverlay\nmetadata: {name: x}\n",
                          "parse-error", "apiVersion", 1, ("apiVersion", "list")),
    "metadata a list": ("apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: [a]\n",
                        "parse-error", "metadata", 3, ("metadata", "list")),
    "metadata a string": ("apiVersion: karpenter.sh/v1alpha1\nkind: NodePool\nmetadata: x\n",
                          "parse-error", "metadata", 3, ("metadata",)),
    "name a list": ("apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: [a]}\n",
                    "parse-error", "metadata.name", 3, ("metadata.name", "list")),
    "name a mapping": ("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: {a: 1}}\n",
                       "parse-error", "metadata.name", 3, ("metadata.name", "mapping")),
    "name a number": ("apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: 5}\nspec: {}\n",
                      "parse-error", "metadata.name", 3, ("quote", '"5"')),
    "items a mapping": ("apiVersion: v1\nkind: List\nitems: {a: 1}\n", "parse-error", None, 3, ("items",)),
    "items a string": ("apiVersion: v1\nkind: NodeOverlayList\nitems: x\n", "parse-error", None, 3, ("items",)),
    "item a list": ("apiVersion: v1\nkind: List\nitems: [[1]]\n", "parse-error", None, 3, ("List item 0",)),
    "item with kind a list": ("apiVersion: v1\nkind: List\nitems: [{kind: [NodePool]}]\n",
                              "parse-error", "kind", 3, ("kind",)),
    # NodeOverlay fields: the API server's schema answers, as it would for kubectl apply
    "spec a list": (OVERLAY_HEAD + "spec: [1]\n", "schema", "spec", 4, ()),
    "spec a string": (OVERLAY_HEAD + "spec: x\n", "schema", "spec", 4, ()),
    "requirements a string": (OVERLAY_HEAD + "spec: {requirements: x}\n", "schema", "spec.requirements", 4, ()),
    "requirement a list": (OVERLAY_HEAD + "spec: {requirements: [[]]}\n", "schema", "spec.requirements[0]", 4, ()),
    "requirement key a list": (OVERLAY_HEAD + "spec: {requirements: [{key: [a], operator: In, values: [a]}]}\n",
                               "schema", "spec.requirements[0].key", 4, ()),
    "values a mapping": (OVERLAY_HEAD + "spec: {requirements: [{key: a.io/b, operator: In, values: {a: 1}}]}\n",
                         "schema", "spec.requirements[0].values", 4, ()),
    "value a list": (OVERLAY_HEAD + "spec: {requirements: [{key: a.io/b, operator: In, values: [[1]]}]}\n",
                     "schema", "spec.requirements[0].values[0]", 4, ()),
    "weight a string": (_overlay('weight: "10"'), "schema", "spec.weight", 4, ()),
    "weight a list": (_overlay("weight: [1]"), "schema", "spec.weight", 4, ()),
    "weight a float": (_overlay("weight: 1.5"), "schema", "spec.weight", 4, ()),
    "price a list": (_overlay("price: [1]"), "schema", "spec.price", 4, ()),
    "priceAdjustment a mapping": (_overlay("priceAdjustment: {a: 1}"), "schema", "spec.priceAdjustment", 4, ()),
    "capacity a list": (_overlay("capacity: [1]"), "schema", "spec.capacity", 4, ()),
    "capacity value a list": (_overlay("capacity: {example.com/r: [1]}"), "schema", "spec.capacity['example.com/r']",
                              4, ()),
    "capacity value a boolean": (_overlay("capacity: {example.com/r: true}"), "schema",
                                 "spec.capacity['example.com/r']", 4, ()),
    "dynamicResources a list": (_overlay("dynamicResources: [1]"), "schema", "spec.dynamicResources", 4, ()),
    "templates a mapping": (_overlay("dynamicResources: {resourceSliceTemplates: {a: 1}}"), RS,
                            "spec.dynamicResources.resourceSliceTemplates", 4, ()),
    "devices a string": (_template("devices: x"), RS,
                         "spec.dynamicResources.resourceSliceTemplates[0].spec.devices", 4, ()),
    "attributes a list": (_template("devices: [{name: d, attributes: [1]}]"), RS,
                          "spec.dynamicResources.resourceSliceTemplates[0].spec.devices[0].attributes", 4, ()),
    "device capacity a list": (_template("devices: [{name: d, capacity: {memory: [1]}}]"), RS,
                               "spec.dynamicResources.resourceSliceTemplates[0].spec.devices[0].capacity.memory",
                               4, ()),
    "attributeBindings a string": (_overlay("dynamicResources: {attributeBindings: x}"), "invalid-attribute-binding",
                                   "spec.dynamicResources.attributeBindings", 4, ()),
    # unquoted YAML 1.1 booleans and numbers where a string belongs: say to quote them
    "overlay value on": (OVERLAY_HEAD + "spec: {requirements: [{key: a.io/b, operator: In, values: [on]}]}\n",
                         "schema", "spec.requirements[0].values[0]", 4, ("string", "true")),
    # A NodeOverlay's spec is the API server's to refuse: `schema`, and the overlay is Invalid.
    "overlay price a number": (_overlay("price: 1.50"), "schema", "spec.price", 4, ("string", "1.5")),
    "overlay label yes": (OVERLAY_HEAD.replace("{name: bad}", "{name: bad, labels: {team: yes}}") + "spec: {}\n",
                          "parse-error", "metadata.labels.team", 3, ("quote", '"yes"')),
    # NodePool fields: context the API server's schema is not asked about here
    "pool label on": (_pool("{metadata: {labels: {team: on}}}"), "parse-error",
                      "spec.template.metadata.labels.team", 4, ("quote", '"on"', "boolean")),
    "pool label a number": (_pool("{metadata: {labels: {tier: 1.10}}}"), "parse-error",
                            "spec.template.metadata.labels.tier", 4, ("quote", '"1.10"', "number")),
    "pool spec a list": (NODEPOOL_HEAD + "spec: [1]\n", "parse-error", "spec", 4, ("mapping", "list")),
    "pool weight a string": (NODEPOOL_HEAD + "spec: {weight: x}\n", "parse-error", "spec.weight", 4, ("integer",)),
    "pool template a string": (_pool("x"), "parse-error", "spec.template", 4, ("mapping",)),
    "pool labels a list": (_pool("{metadata: {labels: [a]}}"), "parse-error", "spec.template.metadata.labels", 4,
                           ("mapping",)),
    "pool label a mapping": (_pool("{metadata: {labels: {a: {b: c}}}}"), "parse-error",
                             "spec.template.metadata.labels.a", 4, ("string",)),
    "pool requirements a mapping": (_pool("{spec: {requirements: {a: 1}}}"), "parse-error",
                                    "spec.template.spec.requirements", 4, ("list",)),
    "pool requirement a string": (_pool("{spec: {requirements: [x]}}"), "parse-error",
                                  "spec.template.spec.requirements[0]", 4, ("mapping",)),
    "pool requirement values a string": (_pool("{spec: {requirements: [{key: a, operator: In, values: x}]}}"),
                                         "parse-error", "spec.template.spec.requirements[0].values", 4, ("list",)),
    "pool minValues a string": (_pool("{spec: {requirements: [{key: a, operator: Exists, minValues: x}]}}"),
                                "parse-error", "spec.template.spec.requirements[0].minValues", 4, ("integer",)),
}


def _input(tmp_path: pathlib.Path, document: str) -> str:
    text = "\n---\n".join([OVERLAY.format(name="first", weight=3), document, OVERLAY.format(name="last", weight=3)])
    return write(tmp_path, "input.yaml", text)


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_shape_is_a_finding_and_the_rest_is_checked(tmp_path: pathlib.Path, case: str) -> None:
    document, code, field, line, words = CASES[case]
    path = _input(tmp_path, document)
    # The DRA-extended CRD, so that the shapes inside spec.dynamicResources are checked.
    status, data, err = run(path, "--crd", "dra")
    assert status == 1 and err == "", err
    found = [f for f in data["findings"] if f["code"] == code and (field is None or f["field"] == field)]
    assert found, data["findings"]
    f = found[0]
    first_line = OVERLAY.count("\n") + 3  # the first overlay, a blank line, "---"
    assert f["file"] == path and f["line"] is not None and f["column"] is not None
    if line is not None:
        assert f["line"] == first_line + line - 1, f
    for word in words:
        assert word in f["message"], f
    assert "same-weight-conflict" in {g["code"] for g in data["findings"]}


@pytest.mark.parametrize("fmt", ["text", "sarif", "github", "junit"])
def test_bad_shapes_in_every_format(tmp_path: pathlib.Path, fmt: str) -> None:
    path = _input(tmp_path, "\n---\n".join(doc for doc, *_ in CASES.values()))
    out, err = io.StringIO(), io.StringIO()
    status = cli.main(["check", path, "--catalog", CATALOG, "--format", fmt], stdout=out, stderr=err)
    assert status == 1 and err.getvalue() == "" and "Traceback" not in out.getvalue()


def test_a_quoting_slip_is_reported_once_and_checked_as_meant(tmp_path: pathlib.Path) -> None:
    """`team: on` in a NodePool is what the overlay selects on once quoted: besides the
    parse-error, the overlay matches (no no-match warning) and no second finding repeats it."""
    pool = _pool("{metadata: {labels: {example.com/team: on}}}")
    overlay = (OVERLAY_HEAD + "spec:\n  requirements: [{key: example.com/team, operator: In, values: [\"on\"]}]\n"
               "  price: \"1\"\n")
    status, data, _ = run(write(tmp_path, "x.yaml", pool + "---\n" + overlay))
    assert status == 1
    assert [(f["code"], f["field"]) for f in data["findings"] if f["severity"] == "error"] == [
        ("parse-error", "spec.template.metadata.labels['example.com/team']")]
    assert "no-match" not in {f["code"] for f in data["findings"]}


def test_instance_type_of_the_wrong_shape_is_left_out_of_the_catalog(tmp_path: pathlib.Path) -> None:
    catalog = pathlib.Path(CATALOG).read_text(encoding="utf-8")
    broken = catalog.replace("resources: {cpu: \"2\", memory: 8Gi, pods: \"29\"}", "resources: [cpu]", 1)
    assert broken != catalog
    path = write(tmp_path, "types.yaml", broken + "\n---\n" + OVERLAY.format(name="o", weight=1))
    out, err = io.StringIO(), io.StringIO()
    status = cli.main(["check", path, "--format", "json"], stdout=out, stderr=err)
    data: dict[str, Any] = json.loads(out.getvalue())
    assert status == 1, err.getvalue()
    [f] = [f for f in data["findings"] if f["code"] == "parse-error"]
    assert f["object"] == {"kind": "InstanceType", "name": "m5.large"} and f["field"] == "spec.resources"


@pytest.mark.parametrize("command", ["check", "simulate"])
def test_an_unexpected_exception_exits_2_with_one_line(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
                                                       command: str) -> None:
    """Exit 1 means findings: a crash must never look like one, nor print a traceback."""
    from simulation import evaluate as ev

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("injected\nover two lines")

    monkeypatch.setattr(ev, "evaluate", broken)
    out, err = io.StringIO(), io.StringIO()
    path = write(tmp_path, "o.yaml", OVERLAY.format(name="o", weight=1))
    status = cli.main([command, path, "--catalog", CATALOG], stdout=out, stderr=err)
    assert status == 2 and out.getvalue() == ""
    assert err.getvalue() == "overlay-lint: internal error: RuntimeError: injected over two lines\n"
