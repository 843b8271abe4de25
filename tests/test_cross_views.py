"""Cross-view properties over generated inputs (issue 40): every view reads one judgement, so a conflict names one
witness in check, simulate, the report and a denial; explain's winners are the plain loop's writers over the
loser's own cells; and diff's rows are exactly the launchable cells whose effect two simulate runs tell apart."""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from simulation import evaluate as ev
from simulation.analysis import diff, effects, explain
from simulation.semantics import catalog as cat
from simulation.semantics import clash, merge, model
from tests import core_support, reference
from tests.strategies import CLASH, PAIR, POOLS, SPLIT, examples, instance_types, overlay_docs, pool_docs
from webhook import verdict


def _report(catalog: cat.Catalog, pools: list[dict[str, Any]], overlays: list[dict[str, Any]]) -> ev.Report:
    docs = [ev.Document(o, i) for i, o in enumerate([*pools, *overlays])]
    return ev.evaluate(docs, ev.prepare([], catalog))


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=instance_types(), overlays=overlay_docs(), pools=pool_docs())
@example(catalog=PAIR, overlays=CLASH, pools=POOLS)
def test_a_conflict_names_one_witness_in_every_view(catalog: cat.Catalog, overlays: list[dict[str, Any]],
                                                    pools: list[dict[str, Any]]) -> None:
    """The dropped overlay's status (simulate's reason, the report's status column) names the witness of its
    same-weight-conflict finding with the overlay it met (check), and the denial message carries it."""
    report = _report(catalog, pools, overlays)
    for f in report.findings:
        detail = dict(f.detail)
        if f.code != "same-weight-conflict" or detail.get("karpenter") != merge.CONFLICT:
            continue
        dropped = detail["dropped"]
        pair = {f.obj.name, *(r.name for r in f.related)}
        reason = report.status[dropped].reason
        if f"conflicts with {(pair - {dropped}).pop()} on {detail['field']} " not in reason:
            continue  # Karpenter met another overlay first: that one's finding names the cell
        assert f.witness is not None
        where = f.witness.describe()
        assert reason.endswith(f"at {where}")
        assert where in f.message
        assert where in verdict.describe(f)


def _named(why: str) -> set[str]:
    found = re.fullmatch(r"already set by higher-precedence (.*)", why)
    assert found is not None, why
    return set(found.group(1).split(", "))


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=instance_types(), overlays=overlay_docs(), pools=pool_docs())
@example(catalog=PAIR, overlays=SPLIT, pools=[])
def test_explain_winners_set_the_field_on_the_losers_cells(catalog: cat.Catalog, overlays: list[dict[str, Any]],
                                                           pools: list[dict[str, Any]]) -> None:
    """Per instance type, a losing overlay's winners are exactly the overlays whose value the plain loop stores
    on one of the loser's cells of that type, and a winner wins on some of them."""
    report = _report(catalog, pools, overlays)
    judged = reference.judge(overlays, pools, catalog)
    cells = {o.name: reference._fields(o, judged.pools, catalog) for o in judged.overlays}
    for it in catalog.types:
        data = explain.explain(report, it.name)
        for field, rows in data["fields"].items():
            if field != "price" and not field.startswith("capacity/"):
                continue
            writers = judged.result.writers.get(field, {})
            for row in rows:
                mine = {c for c in cells.get(row["overlay"], {}).get(field, set()) if c[1] == it.name}
                theirs = {writers[c] for c in mine if c in writers}
                if row["outcome"] == "lost":
                    assert _named(row["why"]) == theirs - {row["overlay"]}
                elif row["outcome"] == "won":
                    assert row["overlay"] in theirs


def _offerings(report: ev.Report) -> dict[tuple[str, str, str, str], tuple[Any, Any, bool]]:
    """simulate's figures of every offering: (price, the overlay setting it, whether its NodePool launches it)."""
    return {(c.pool, c.instance_type, o["zone"], o["capacityType"]):
            (o["price"] if o.get("available", True) else None, o["priceOverlay"], bool(o["launchable"]))
            for c in effects.effects(report, [p.name for p in report.grid.pools]) for o in c.offerings}


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=instance_types(), overlays=overlay_docs(), pools=pool_docs(), data=st.data())
def test_diff_rows_are_the_launchable_cells_simulate_tells_apart(catalog: cat.Catalog, overlays: list[dict[str, Any]],
                                                                 pools: list[dict[str, Any]], data: Any) -> None:
    """Head: the same objects with some overlays dropped and others re-weighted. diff's price rows are exactly
    the offerings their NodePool launches (by the plain loop's reading of its requirements) whose price or setter
    differs between the two simulate runs; the others are counted apart."""
    keep = data.draw(st.lists(st.booleans(), min_size=len(overlays), max_size=len(overlays)))
    head = [o if k else {**o, "spec": {**o["spec"], "weight": 3}} for o, k in zip(overlays, keep, strict=True)]
    head = head[:data.draw(st.integers(0, len(head)))]
    before, after = _report(catalog, pools, overlays), _report(catalog, pools, head)
    old, new = _offerings(before), _offerings(after)
    differ = {k for k in old if old[k][:2] != new[k][:2]}
    # Which NodePool launches an offering, as the plain loop reads the NodePool's requirements (and the engine
    # marks it in simulate's output).
    pool_models = {p.name: p for p in reference.judge([], pools, catalog).pools}
    types = {it.name: it for it in catalog.types}
    launched = {(pool, t, z, c) for pool, t, z, c in old if reference.launches(
        pool_models[pool], types[t], next(o for o in types[t].offerings if (o.zone, o.capacity_type) == (z, c)))}
    assert launched == {k for k, v in old.items() if v[2]}
    got = diff.compare(before, after)
    assert {(p.pool, p.instance_type, p.zone, p.capacity_type) for p in got.prices} == differ & launched
    assert got.held.prices == len(differ - launched)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=instance_types(), overlays=overlay_docs(), pools=pool_docs())
def test_the_clash_test_of_a_pair_is_the_crowds(catalog: cat.Catalog, overlays: list[dict[str, Any]],
                                                pools: list[dict[str, Any]]) -> None:
    """clash.meets (a hint's free-weight test) pairs exactly the overlays clash.same_weight pairs when all have
    one weight: one rule, asked of a pair or of many."""
    grid = core_support.grid(catalog, *reference.judge([], pools, catalog).pools)
    entries = [merge.entry(grid, dataclasses.replace(model.overlay(o), weight=1)) for o in overlays]
    listed = {frozenset((c.later, c.earlier)) for c in clash.same_weight(entries, limit=len(entries))}
    assert listed == {frozenset((a.name, b.name)) for a, b in itertools.combinations(entries, 2)
                      if clash.meets(a, b)}
    assert all(clash.meets(a, b) == clash.meets(b, a) for a, b in itertools.combinations(entries, 2))
