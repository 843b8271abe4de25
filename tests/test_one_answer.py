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


def _sides(tmp_path: pathlib.Path, base: list[dict[str, Any]], head: list[dict[str, Any]]) -> tuple[str, str]:
    (tmp_path / "base").mkdir()
    (tmp_path / "head").mkdir()
    return (lint_support.write(tmp_path / "base", "all.yaml", *POOLS, *base),
            lint_support.write(tmp_path / "head", "all.yaml", *POOLS, *head))


SPOT = (CAPACITY_TYPE, "In", ["spot"])
C5_D2 = (FAMILY, "In", ["c5", "d2"])


def test_diff_rows_are_launched_offerings_and_the_rest_is_said_once(tmp_path: pathlib.Path) -> None:
    """Row 3: a spot overlay on c5 and d2 from -60% to -50%. batch and general launch c5 spot; no NodePool
    launches d2, and gpu launches no spot: those are counted apart, and the headline counts an offering once."""
    base, head = _sides(tmp_path, [_overlay("spot", 10, SPOT, C5_D2, priceAdjustment="-60%")],
                        [_overlay("spot", 10, SPOT, C5_D2, priceAdjustment="-50%")])
    data = json.loads(_run("diff", base, head, "--format", "json"))
    rows = {(p["nodepool"], p["instanceType"]) for p in data["prices"]}
    assert {pool for pool, _ in rows} == {"batch", "general"}
    assert all(t.startswith("c5") for _, t in rows)
    offerings = {(p["instanceType"], p["zone"], p["capacityType"]) for p in data["prices"]}
    assert len(data["prices"]) == 2 * len(offerings)
    assert data["summary"]["offeringsChanged"] == data["summary"]["dearer"] == len(offerings)
    c5 = len({t for _, t in rows})
    # d2 in every NodePool, c5 in gpu: 3 zones each.
    assert data["summary"]["heldPrices"] == 3 * (3 * 4 + c5)
    assert data["headline"].count(f"{len(offerings)} offerings change price") == 1


def test_pr_comment_shows_every_changed_overlay_and_folds_a_types_offerings(tmp_path: pathlib.Path) -> None:
    """Row 3b: a change that edits sp (m5, -20% -> -28%) and adds ri-c5 (c5, price 0.05): both are in the
    comment with their effect, and each type's offerings with one change are one row with a count."""
    m5 = (FAMILY, "In", ["m5"])
    c5 = (FAMILY, "In", ["c5"])
    base, head = _sides(tmp_path, [_overlay("sp", 10, m5, priceAdjustment="-20%")],
                        [_overlay("sp", 10, m5, priceAdjustment="-28%"), _overlay("ri-c5", 20, c5, price="0.05")])
    text = _run("diff", base, head, "--format", "markdown")
    overlays = {cells[1].strip("` "): cells for line in text.splitlines()
                if line.startswith("| `") and len(cells := line.split("|")) == 7}
    assert "prices" in overlays["sp"][5] and "median -10.0%" in overlays["sp"][5]
    assert "prices" in overlays["ri-c5"][5]
    section = text.split("#### NodePool `general`")[1].split("####")[0]
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| Instance type")]
    assert rows
    # general launches every zone of c5 and m5, on-demand and spot: a type's three zones of one capacity type
    # (one base price, one change) are one row.
    assert all(r[1] == "3 offerings" for r in rows)
    assert len({(r[0], r[2]) for r in rows}) == len(rows)


def test_report_memory_rows_are_launched_types_and_the_rest_is_counted(inputs: str, tmp_path: pathlib.Path) -> None:
    """Row 5: hugepages on the r category; general launches generation > 4 only, so r3/r4 are not among its
    rows, and the cells no NodePool launches are one count."""
    paged = lint_support.write(tmp_path, "pages.yaml", *POOLS, _overlay(
        "pages", 40, (CATEGORY, "In", ["r"]), capacity={"hugepages-2Mi": "1Gi"}))
    page = tmp_path / "report.html"
    _run("report", "-o", str(page), paged)
    section = page.read_text(encoding="utf-8").split('<section id="memory">')[1].split("</section>")[0]
    rows = re.findall(r'<tr data-nodepool="([^"]+)" data-instance-type="([^"]+)">', section)
    assert rows and {pool for pool, _ in rows} == {"general"}
    assert not [t for _, t in rows if t.startswith(("r3.", "r4."))]
    held = re.search(r'data-held="(\d+)"', section)
    assert held is not None and int(held.group(1)) > 0
