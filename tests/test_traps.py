"""Karpenter's known traps (issue 41): what each finding says, beyond the code and field the cases in
tests/cases/ hold."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from tests import lint_support as ls

ZONE = "topology.kubernetes.io/zone"


def _overlay(name: str, *requirements: tuple[str, str, list[str]], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
            "spec": {"requirements": [{"key": k, "operator": o, "values": v} for k, o, v in requirements], **spec}}


def _check(tmp_path: pathlib.Path, *objects: dict[str, Any], args: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    code, out, err = ls.run("check", ls.write(tmp_path, "in.yaml", *objects), "--format", "json", *args,
                            catalog=False)
    assert code in (0, 1), err
    found: list[dict[str, Any]] = json.loads(out)["findings"]
    return found


@pytest.mark.parametrize(("region", "zone", "proposed"), [
    ("westeurope", "westeurope-4", "westeurope-3"), ("us-central1", "us-central1-d", "us-central1-c"),
])
def test_a_zone_hint_proposes_a_zone_of_the_regions_own_cloud(tmp_path: pathlib.Path, region: str, zone: str,
                                                             proposed: str) -> None:
    found = _check(tmp_path, _overlay("z", (ZONE, "In", [zone]), price="1"), args=("--region", region))
    [miss] = [f for f in found if f["code"] == "no-match"]
    assert f"did you mean {proposed!r}" in miss["message"]
