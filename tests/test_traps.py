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


CASES = pathlib.Path(__file__).parent / "cases"
FLIPS = str(CASES / "trap-price-metric-flips" / "input.yaml")


def test_a_nodepool_scoped_price_is_a_note_in_check_not_a_failure() -> None:
    code, out, err = ls.run("check", FLIPS, catalog=False)
    assert code == 0, err
    assert "price-metric-flips" in out and "1 note" in out


def test_a_nodepool_scoped_price_is_listed_in_the_report(tmp_path: pathlib.Path) -> None:
    page = tmp_path / "report.html"
    code, _, err = ls.run("report", FLIPS, "-o", str(page), catalog=False)
    assert code == 0, err
    assert 'data-code="price-metric-flips"' in page.read_text(encoding="utf-8")


def test_a_nodepool_scoped_price_is_a_normal_audit_event_on_the_overlay_and_its_nodepool() -> None:
    from ruamel.yaml import YAML

    from simulation import evaluate
    from simulation.semantics import catalog as cat
    from webhook import events

    objects = [o for o in YAML(typ="safe").load_all(pathlib.Path(FLIPS).read_text(encoding="utf-8")) if o]
    docs = [evaluate.Document(o, i) for i, o in enumerate(objects)]
    report = evaluate.evaluate(docs, evaluate.prepare([], cat.default()))
    notes = [n for n in events.notes(report.findings) if n.reason == events.PRICE_METRIC]
    assert {(str(n.regarding), n.warning) for n in notes} == {
        ("NodeOverlay/team-a-savings-plan", False), ("NodePool/team-a", False)}
