"""YAML scalars mean what `kubectl apply` makes of them, in NodeOverlay and NodePool fields: the table of
tests/kubectl_scalars.py (held to a real API server by tests/e2e/test_yaml_scalars.py)."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from sources import files, tree
from sources.objects import Loaded, Loader
from sources.positions import Table
from tests.input_support import run, write
from tests.kubectl_scalars import CASES, KEY_CASES, REFUSED

NODEOVERLAY = """\
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {{name: o}}
spec:
  requirements: []
  capacity:
    example.com/widget: {scalar}
"""
NODEPOOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: p}}
spec:
  weight: {scalar}
  template:
    metadata:
      labels:
        team: {scalar}
"""


def _load(text: str) -> Loaded:
    return Loader(Table()).load_text(files.Text(files.Source("f.yaml", "f.yaml"), text))


def _same(got: Any, want: Any) -> bool:
    return got == want and type(got) is type(want)


@pytest.mark.parametrize(("scalar", "want"), CASES, ids=[c[0] or "empty" for c in CASES])
def test_a_nodeoverlay_capacity_gets_the_value_kubectl_sends(scalar: str, want: object) -> None:
    loaded = _load(NODEOVERLAY.format(scalar=scalar))
    if want is REFUSED:
        assert [(p.code, p.obj.kind) for p in loaded.problems] == [("parse-error", "File")]
        assert loaded.documents == []
        return
    assert loaded.problems == []
    (document,) = loaded.documents
    assert _same(document.obj["spec"]["capacity"]["example.com/widget"], want)


@pytest.mark.parametrize(("scalar", "want"), CASES, ids=[c[0] or "empty" for c in CASES])
def test_a_nodepool_weight_and_label_get_the_value_kubectl_sends(scalar: str, want: object) -> None:
    loaded = _load(NODEPOOL.format(scalar=scalar))
    if want is REFUSED:
        assert [p.code for p in loaded.problems] == ["parse-error"] and loaded.documents == []
        return
    (document,) = loaded.documents
    spec = document.obj["spec"]
    label = spec["template"]["metadata"]["labels"]["team"]
    # A label is a string: an unquoted boolean or number there is a slip of quoting, reported with the text
    # to quote, and the object is checked on as quoted. An explicit tag is no slip: the value stays.
    slips = [p.message for p in loaded.problems if p.path == ("spec", "template", "metadata", "labels", "team")]
    if isinstance(want, bool | int | float):
        assert [("quote it" in m) for m in slips] == [not scalar.startswith("!!")]
        assert _same(label, want) if scalar.startswith("!!") else label == scalar
    else:
        assert _same(label, want) and slips == []
    weight_problems = [p for p in loaded.problems if p.path == ("spec", "weight")]
    if want is None or (isinstance(want, int) and not isinstance(want, bool)):
        assert _same(spec["weight"], want) and weight_problems == []
    else:
        assert [p.code for p in weight_problems] == ["parse-error"]


@pytest.mark.parametrize(("key", "want"), KEY_CASES, ids=[c[0] for c in KEY_CASES])
def test_mapping_keys_are_named_as_kubectl_names_them(key: str, want: object) -> None:
    (parsed,) = tree.documents(f"metadata:\n  labels:\n    {key}: x\n")
    if want is REFUSED:
        assert parsed.problem is not None and parsed.value is None
        return
    assert parsed.problem is None and list(parsed.value["metadata"]["labels"]) == [want]
    assert parsed.positions[("metadata", "labels", want)] == (3, 5)


@pytest.mark.parametrize(("weight", "codes"), [
    ("1e3", []), ("0x1F", []), ("+1", []), ("1_000", []), ("010", []),
    ("yes", ["schema"]), (".5", ["schema"]), ("2e4", ["schema"]), ("'7'", ["schema"]),
])
def test_a_nodeoverlay_weight_is_judged_on_the_value_kubectl_sends(tmp_path: pathlib.Path, weight: str,
                                                                   codes: list[str]) -> None:
    text = ("apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: w}\n"
            f"spec:\n  weight: {weight}\n  requirements: []\n  priceAdjustment: '-1%'\n")
    _, data, _ = run(write(tmp_path, "w.yaml", text))
    found = [(f["code"], f["field"], f["line"]) for f in data["findings"] if f["severity"] == "error"]
    assert found == [(code, "spec.weight", 5) for code in codes]


def test_a_value_kubectl_cannot_send_is_refused_where_it_stands(tmp_path: pathlib.Path) -> None:
    text = "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: i}\nspec:\n  weight: .inf\n"
    _, data, _ = run(write(tmp_path, "i.yaml", text))
    ((code, line, column, message),) = [(f["code"], f["line"], f["column"], f["message"]) for f in data["findings"]]
    assert (code, line, column) == ("parse-error", 5, 11) and ".inf" in message


def test_without_libyaml_the_pure_python_parser_gives_the_same_trees(monkeypatch: pytest.MonkeyPatch) -> None:
    import yaml

    text = "".join(f"k{i}: {scalar}\n" for i, (scalar, want) in enumerate(CASES) if want is not REFUSED)
    text += "---\nbase: &b {x: 1}\nover: {<<: *b, z: 2}\nlist:\n- a\n- {b: c}\n---\nbroken: [1\n"

    def read() -> list[tuple[Any, ...]]:
        return [(p.value, dict(p.positions), dict(p.plain), p.problem and p.problem.position)
                for p in tree.documents(text)]

    fast = read()
    monkeypatch.setattr(tree, "_LOADER", yaml.BaseLoader)
    assert read() == fast and fast[-1][-1] == (text.count("\n") + 1, 1)


@pytest.mark.parametrize(("key", "want"), [("1e39", ".inf"), ("-6.5e62", "-.inf"), ("3.4e38", "3.4e+38")])
def test_a_float_key_past_float32_is_named_an_infinity(key: str, want: str) -> None:
    """sigs.k8s.io/yaml names a float key by FormatFloat(key, 'g', -1, 32), then `+Inf` as `.inf` (found by the
    fastyaml fuzz target: the reader raised on it)."""
    (parsed,) = tree.documents(f"metadata:\n  labels:\n    {key}: x\n")
    assert parsed.problem is None and list(parsed.value["metadata"]["labels"]) == [want]
