"""YAML scalars mean for the guard what they mean for `kubectl apply` and the API server (issue 38).

Every scalar of tests/kubectl_scalars.py is sent by kubectl (`create --dry-run=server -o json`) in three places,
every key in one: a field of a probe CRD that keeps any value (`x-kubernetes-preserve-unknown-fields`), so what is
stored is exactly what kubectl sent; a NodeOverlay's `spec.weight`; and a NodePool's template label. Each time the
guard's reader must give the stored value, and its findings on the field must be empty exactly when the API server
accepts the object (for a NodePool label, where it is the value's type that is refused).
"""

from __future__ import annotations

import decimal
import io
import json
import time
from typing import Any

import pytest

from lint import cli
from simulation.validation import syntax
from sources import tree
from tests.kubectl_scalars import CASES, KEY_CASES, REFUSED

from . import _crds
from ._cluster import ControlPlane, ControlPlaneError

pytestmark = pytest.mark.e2e

_PROBE_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "scalarprobes.e2e.overlay-guard.io"},
    "spec": {"group": "e2e.overlay-guard.io", "scope": "Cluster",
             "names": {"plural": "scalarprobes", "singular": "scalarprobe", "kind": "ScalarProbe"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object",
                 "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]}}
_SERVED_TIMEOUT = 60.0
_INT64 = 2**63
_IDS = [c[0] or "empty" for c in CASES]


@pytest.fixture(scope="module")
def probes(control_plane: ControlPlane) -> ControlPlane:
    control_plane.kubectl("apply", "-f", "-", input=json.dumps(_PROBE_CRD))
    control_plane.kubectl("wait", "--for=condition=Established", "crd/scalarprobes.e2e.overlay-guard.io",
                          "--timeout=60s")
    deadline = time.monotonic() + _SERVED_TIMEOUT
    while _create(control_plane, _probe("spec: {v: 1}")) is None:
        if time.monotonic() > deadline:
            raise ControlPlaneError("the probe CRD was never served")
        time.sleep(0.2)
    return control_plane


def _probe(spec: str) -> str:
    return f"apiVersion: e2e.overlay-guard.io/v1\nkind: ScalarProbe\nmetadata: {{name: probe}}\n{spec}\n"


def _create(plane: ControlPlane, text: str) -> dict[str, Any] | None:
    """What the API server would store for `text` as kubectl sends it, or None when either refuses it."""
    done = plane.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=text, check=False)
    return json.loads(done.stdout) if done.returncode == 0 else None


def _as_stored(value: Any) -> Any:
    """The API server decodes a JSON integer past int64 as a float, and writes that float back as Go does."""
    if isinstance(value, int) and not isinstance(value, bool) and not -_INT64 <= value < _INT64:
        return int(decimal.Decimal(repr(float(value))))
    return value


def _read(text: str) -> Any:
    (parsed,) = tree.documents(text)
    return REFUSED if parsed.problem is not None else parsed.value


def _field_findings(text: str, field: str) -> list[str]:
    out, err = io.StringIO(), io.StringIO()
    cli.main(["check", "-", "--format", "json"], stdin=io.BytesIO(text.encode()), stdout=out, stderr=err)
    data = json.loads(out.getvalue())
    return [f["code"] for f in data["findings"] if f["severity"] == "error" and f.get("field") in (field, "")]


@pytest.mark.parametrize(("scalar", "want"), CASES, ids=_IDS)
def test_the_reader_gives_what_the_api_server_stores(probes: ControlPlane, scalar: str, want: object) -> None:
    text = _probe(f"spec:\n  v: {scalar}")
    stored = _create(probes, text)
    read = _read(text)
    if stored is None:
        assert read is REFUSED and want is REFUSED
        return
    assert read is not REFUSED
    assert json.dumps(_as_stored(read["spec"].get("v"))) == json.dumps(stored["spec"].get("v"))
    assert want is not REFUSED and _as_stored(want) == stored["spec"].get("v")


@pytest.mark.parametrize(("key", "want"), KEY_CASES, ids=[c[0] for c in KEY_CASES])
def test_keys_are_named_as_the_api_server_stores_them(probes: ControlPlane, key: str, want: object) -> None:
    text = _probe(f"spec:\n  {key}: x")
    stored = _create(probes, text)
    read = _read(text)
    if stored is None:
        assert read is REFUSED and want is REFUSED
        return
    assert list(read["spec"]) == list(stored["spec"]) == [want]


@pytest.mark.parametrize(("scalar", "want"), CASES, ids=_IDS)
def test_a_nodeoverlay_weight_is_refused_exactly_where_the_api_server_refuses_it(
        control_plane: ControlPlane, crds: _crds.Crds, scalar: str, want: object) -> None:
    crds.use(_crds.KARPENTER)
    text = ("apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: e2e-scalar-weight}\n"
            f"spec:\n  weight: {scalar}\n  requirements: []\n  priceAdjustment: '-1%'\n")
    stored = _create(control_plane, text)
    assert (stored is not None) == (_field_findings(text, "spec.weight") == [])
    if stored is not None:
        assert _read(text)["spec"].get("weight") == stored["spec"].get("weight")


@pytest.mark.parametrize(("scalar", "want"), CASES, ids=_IDS)
def test_a_nodepool_label_is_refused_exactly_where_the_api_server_refuses_it(
        control_plane: ControlPlane, crds: _crds.Crds, scalar: str, want: object) -> None:
    crds.use(_crds.KARPENTER)
    text = ("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: e2e-scalar-label}\nspec:\n  template:\n"
            f"    metadata:\n      labels:\n        team: {scalar}\n    spec:\n      requirements: []\n"
            "      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n")
    stored = _create(control_plane, text)
    field = "spec.template.metadata.labels.team"
    if isinstance(want, str) and syntax.label_value_errors(want):
        # A string, but no label value (`1:30`): the API server refuses its syntax, which the guard leaves to it
        # in a NodePool (context, read leniently). The type is what is compared here.
        assert stored is None and _field_findings(text, field) == []
        return
    assert (stored is not None) == (_field_findings(text, field) == [])
    if stored is not None:
        labels = stored["spec"]["template"].get("metadata", {}).get("labels", {})
        assert _read(text)["spec"]["template"]["metadata"]["labels"].get("team") == labels.get("team")
