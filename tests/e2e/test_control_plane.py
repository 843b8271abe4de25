"""Smoke tests proving the e2e control plane is a usable Kubernetes API."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from ._cluster import ControlPlane

pytestmark = pytest.mark.e2e

_GROUP = "smoke.overlay-guard.test"

_CRD = f"""\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.{_GROUP}
spec:
  group: {_GROUP}
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
  versions:
    - name: v1alpha1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size:
                  type: integer
                  minimum: 1
"""


def _unique(prefix: str) -> str:
    # The cluster is shared by the whole session, so names must not collide.
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _get_json(plane: ControlPlane, *args: str) -> dict[str, object]:
    result: dict[str, object] = json.loads(plane.kubectl("get", *args, "-o", "json").stdout)
    return result


def test_namespace_and_configmap_round_trip(control_plane: ControlPlane) -> None:
    namespace = _unique("smoke")
    control_plane.kubectl("create", "namespace", namespace)
    control_plane.kubectl(
        "create", "configmap", "greeting", "-n", namespace, "--from-literal=message=hello e2e"
    )

    configmap = _get_json(control_plane, "configmap", "greeting", "-n", namespace)

    assert configmap["data"] == {"message": "hello e2e"}


def test_crd_apply_becomes_established(control_plane: ControlPlane, tmp_path: Path) -> None:
    manifest = tmp_path / "crd.yaml"
    manifest.write_text(_CRD)

    control_plane.kubectl("apply", "-f", str(manifest))
    control_plane.kubectl("wait", "--for=condition=Established", f"crd/widgets.{_GROUP}", "--timeout=60s")

    # Established must also mean servable: the new schema admits and rejects.
    name = _unique("w")
    control_plane.kubectl(
        "apply",
        "-f",
        "-",
        input=f"apiVersion: {_GROUP}/v1alpha1\nkind: Widget\nmetadata:\n  name: {name}\n"
        "  namespace: default\nspec:\n  size: 3\n",
    )
    assert _get_json(control_plane, "widgets", name, "-n", "default")["spec"] == {"size": 3}
    rejected = control_plane.kubectl(
        "apply",
        "-f",
        "-",
        check=False,
        input=f"apiVersion: {_GROUP}/v1alpha1\nkind: Widget\nmetadata:\n  name: {name}-bad\n"
        "  namespace: default\nspec:\n  size: 0\n",
    )
    assert rejected.returncode != 0
    assert "spec.size" in rejected.stderr


def test_restart_apiserver_keeps_state_and_port(control_plane: ControlPlane) -> None:
    name = _unique("survivor")
    control_plane.kubectl("create", "configmap", name, "-n", "default", "--from-literal=k=v")
    server_before = control_plane.server

    control_plane.restart_apiserver()

    assert control_plane.server == server_before
    assert _get_json(control_plane, "configmap", name, "-n", "default")["data"] == {"k": "v"}
