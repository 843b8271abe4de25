"""Property test: the bitset engine agrees with a plain port of Karpenter's nested loop."""

from __future__ import annotations

import ast
import math
import pathlib
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, example, given, settings

from simulation import evaluate as ev
from simulation.analysis import effects
from simulation.semantics import catalog as cat
from simulation.semantics import quantity
from tests import reference, reference_support
from tests.strategies import CLASH, PAIR, POOLS, examples, instance_types, mixed_overlay_docs, overlay_docs, pool_docs


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=instance_types(), overlays=mixed_overlay_docs(), pools=pool_docs())
@example(catalog=PAIR, overlays=CLASH, pools=POOLS)
def test_engine_matches_reference(catalog: cat.Catalog, overlays: list[dict[str, Any]],
                                  pools: list[dict[str, Any]]) -> None:
    docs = [ev.Document(o, i) for i, o in enumerate([*pools, *overlays])]
    report = ev.evaluate(docs, ev.prepare([], catalog))
    judged = reference.judge(overlays, pools, catalog)
    pool_models, expected = judged.pools, judged.result

    # Invalid included: the reference decides validity from the CRD and RuntimeValidate itself.
    assert {n: s.state for n, s in report.status.items()} == expected.status

    prices: dict[tuple[str, str, str, str], float | None] = {}
    capacity: dict[tuple[str, str], dict[str, str]] = {}
    memory: dict[tuple[str, str], Decimal] = {}
    for cell in effects.effects(report, [p.name for p in pool_models]):
        if any(r.startswith(reference.HUGEPAGES) for r in cell.capacity):
            memory[(cell.pool, cell.instance_type)] = quantity.parse(cell.allocatable["memory"])
        for o in cell.offerings:
            if o["priceOverlay"] is not None:
                prices[(cell.pool, cell.instance_type, o["zone"], o["capacityType"])] = o["price"]
        raw = {r: dict(report.entries[name].overlay.capacity)[r] for r, name in cell.capacity_overlays.items()}
        if raw:
            capacity[(cell.pool, cell.instance_type)] = raw
    assert prices.keys() == expected.prices.keys()
    for key, value in expected.prices.items():
        got = prices[key]
        assert (got is None and value is None) or (got is not None and value is not None
                                                   and math.isclose(got, value, rel_tol=1e-12))
    assert capacity == expected.capacity
    assert memory == expected.memory
    codes = {"hugepages-exhaust-memory", "hugepages-most-memory"}
    assert {(f.obj.name, f.code) for f in report.findings if f.code in codes} == expected.hugepages
    # The findings: codes, objects, fields, related objects, counts and witnesses.
    reference_support.assert_all(report, reference_support.expected(overlays, pools, catalog))


def _verdicts(report: ev.Report) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """Statuses and every listed cell's effect, without what says whether a NodePool launches it."""
    cells = []
    for cell in effects.effects(report):
        data = {**cell.to_json(), "pool": cell.pool, "type": cell.instance_type}
        del data["launchable"]
        data["offerings"] = [{k: v for k, v in o.items() if k != "launchable"} for o in data["offerings"]]
        cells.append(data)
    return {n: s.state for n, s in report.status.items()}, cells


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=instance_types(), overlays=overlay_docs(), pools=pool_docs())
def test_nodepool_requirements_change_no_verdict(catalog: cat.Catalog, overlays: list[dict[str, Any]],
                                                 pools: list[dict[str, Any]]) -> None:
    """Karpenter's overlay store ignores a NodePool's template requirements (SPEC §3 "Cells"): statuses,
    winners and prices are those of the same NodePools without them; only what is marked launchable moves."""
    bare = [{**p, "spec": {"template": {"metadata": p["spec"]["template"]["metadata"]}}} for p in pools]

    def run(with_pools: list[dict[str, Any]]) -> ev.Report:
        docs = [ev.Document(o, i) for i, o in enumerate([*with_pools, *overlays])]
        return ev.evaluate(docs, ev.prepare([], catalog))

    assert _verdicts(run(pools)) == _verdicts(run(bare))


def test_reference_imports_no_rule() -> None:
    """The reference shares only plain data types and the quantity parser with the engine: a rule it took from
    the engine would agree with the engine's mistakes."""
    tree = ast.parse(pathlib.Path(reference.__file__).read_text())
    imported = {f"{node.module}.{a.name}" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for a in node.names if node.module and node.module.startswith("simulation")}
    imported |= {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    assert {name for name in imported if name.startswith("simulation")} == {
        "simulation.semantics.catalog", "simulation.semantics.model", "simulation.semantics.quantity"}
