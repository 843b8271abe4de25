"""Issue 40's rows on its own setup (the embedded catalog; NodePools general (m/c/r, generation > 4), gpu
(on-demand g5 only), batch (spot c only)): every view gives one answer to one question."""

from __future__ import annotations

import html
import json
import pathlib
import re
from typing import Any

import pytest

from tests import lint_support


def _pool(name: str, *requirements: tuple[str, str, list[str]]) -> dict[str, Any]:
    reqs = [{"key": k, "operator": op, "values": v} for k, op, v in requirements]
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": {"spec": {"requirements": reqs}}}}


def _overlay(name: str, weight: int, *requirements: tuple[str, str, list[str]], **spec: Any) -> dict[str, Any]:
    reqs = [{"key": k, "operator": op, "values": v} for k, op, v in requirements]
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
            "spec": {"weight": weight, "requirements": reqs, **spec}}


CATEGORY, GENERATION = "karpenter.k8s.aws/instance-category", "karpenter.k8s.aws/instance-generation"
FAMILY, CAPACITY_TYPE = "karpenter.k8s.aws/instance-family", "karpenter.sh/capacity-type"
POOLS = (
    _pool("general", (CATEGORY, "In", ["m", "c", "r"]), (GENERATION, "Gt", ["4"])),
    _pool("gpu", (FAMILY, "In", ["g5"]), (CAPACITY_TYPE, "In", ["on-demand"])),
    _pool("batch", (CATEGORY, "In", ["c"]), (CAPACITY_TYPE, "In", ["spot"])),
)
OVERLAYS = (
    _overlay("ri-m5", 20, ("node.kubernetes.io/instance-type", "In", ["m5.xlarge"]),
             (CAPACITY_TYPE, "In", ["on-demand"]), price="0.121"),
    _overlay("spot-cut", 10, (CAPACITY_TYPE, "In", ["spot"]), priceAdjustment="-60%"),
    _overlay("savings", 5, (CAPACITY_TYPE, "In", ["on-demand"]), priceAdjustment="-20%"),
    _overlay("gpu-a", 30, (FAMILY, "In", ["g5"]), capacity={"example.com/gpu-slice": "4"}),
    _overlay("gpu-b", 30, (FAMILY, "In", ["g5"]), capacity={"example.com/gpu-slice": "8"}),
)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> str:
    return lint_support.write(tmp_path_factory.mktemp("one-answer"), "setup.yaml", *POOLS, *OVERLAYS)


def _run(*args: str) -> str:
    code, out, err = lint_support.run(*args, catalog=False)
    assert code in (0, 1), err
    return out


def test_explain_names_only_the_winners_over_the_losers_cells(inputs: str) -> None:
    """Row 1: spot-cut sets only spot prices and savings matches only on-demand ones, so only ri-m5 takes
    savings' cells of m5.xlarge."""
    text = _run("explain", "--instance-type", "m5.xlarge", inputs)
    rows = {cells[1]: cells for line in text.split("\nprice:\n")[1].splitlines()[1:]
            if len(cells := re.split(r"\s{2,}", line.strip())) == 8}
    assert rows["savings"][0] == "lost"
    assert rows["savings"][7] == "already set by higher-precedence ri-m5"


def test_a_conflict_has_one_witness_in_every_view(inputs: str, tmp_path: pathlib.Path) -> None:
    """Row 2: check's finding, simulate's reason and the report's status name one cell, one the gpu NodePool
    launches (batch never launches g5)."""
    finding = next(f for f in json.loads(_run("check", "--format", "json", inputs))["findings"]
                   if f["code"] == "same-weight-conflict")
    assert finding["witness"] == {"nodepool": "gpu", "instanceType": "g5.xlarge"}
    where = "nodepool gpu, instance type g5.xlarge"
    assert where in finding["message"]
    reason = json.loads(_run("simulate", "--format", "json", inputs))["overlays"][finding["object"]["name"]]["reason"]
    assert reason == f"conflicts with gpu-b on capacity/example.com/gpu-slice at {where}"
    page = tmp_path / "report.html"
    _run("report", "-o", str(page), inputs)
    text = html.unescape(page.read_text(encoding="utf-8"))
    assert reason in text
    assert "at nodepool batch" not in text


def test_simulate_nodepool_figures_are_each_nodepools_own(inputs: str) -> None:
    """Row 4: a NodePool's row counts what it launches; the rest of what the store holds there is one count."""
    rows = {}
    for line in _run("simulate", inputs).splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells[0] in ("general", "gpu", "batch") and len(cells) == 5:
            rows[cells[0]] = [int(c) for c in cells[1:]]
    # gpu launches the 8 g5 types, on-demand only: 3 zones each, priced by savings; gpu-b's capacity on all 8.
    assert rows["gpu"][:3] == [8, 24, 8]
    # batch launches spot c only: one offering per zone, three per type, and no g5.
    types, prices, capacity, _ = rows["batch"]
    assert prices == 3 * types and capacity == 0
    assert rows["general"][2] == 0
    # Every view counts the same cells: what a NodePool launches and what it never launches add up.
    assert len({sum((r[0], r[3])) for r in rows.values()}) == 1
