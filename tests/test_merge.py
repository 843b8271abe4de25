"""simulation.semantics.merge: Karpenter's overlay loop (order, first writer wins, its conflict test with
its quirks) and the guard's stricter same-weight test."""

from __future__ import annotations

from typing import Any

import pytest

from simulation.semantics import catalog as cat
from simulation.semantics import clash, merge, model
from simulation.semantics import requirements as reqs
from tests import core_support as cs
from tests.core_support import FAMILY

M = (FAMILY, "In", ["m"])
SMALL = (reqs.INSTANCE_TYPE, "In", ["m.small"])
LARGE = (reqs.INSTANCE_TYPE, "In", ["m.large"])
X, Y = "example.com/x", "example.com/y"


def outcome(catalog: cat.Catalog, *overlays: model.Overlay) -> Any:
    return merge.karpenter(cs.entries(cs.grid(catalog), *overlays))


def price(name: str, weight: int, *requirements: cs.Requirement, value: str = "1.0") -> model.Overlay:
    return cs.overlay(name, *(requirements or (M,)), weight=weight, price=value)


def capacity(name: str, weight: int, *resources: str, **spec: Any) -> model.Overlay:
    return cs.overlay(name, M, weight=weight, capacity={r: "1" for r in resources}, **spec)


def test_order_is_weight_then_name_descending(small_catalog: cat.Catalog) -> None:
    g = cs.grid(small_catalog)
    named = [("a", 1), ("b", 1), ("c", 5), ("Z", 5), ("d", None)]
    ordered = merge.ordered(cs.entries(g, *(cs.overlay(n, M, weight=w) for n, w in named)))
    assert [e.name for e in ordered] == ["c", "Z", "b", "a", "d"]
    assert [e.name for e in ordered] == list(outcome(small_catalog, *(e.overlay for e in ordered)).order)


@pytest.mark.parametrize(("overlays", "expected"), [
    # Same weight, a common offering: the later in the order is dropped, even with an identical value.
    ([price("b", 10), price("a", 10)], {"b": merge.APPLIED, "a": merge.CONFLICT}),
    ([price("b", 10, value="2"), price("a", 10, value="2")], {"b": merge.APPLIED, "a": merge.CONFLICT}),
    # price and priceAdjustment are one field.
    ([price("b", 10), cs.overlay("a", M, weight=10, priceAdjustment="+1")],
     {"b": merge.APPLIED, "a": merge.CONFLICT}),
    # Disjoint offerings, or different weights: no conflict.
    ([price("b", 10, SMALL), price("a", 10, LARGE)], {"b": merge.APPLIED, "a": merge.APPLIED}),
    ([price("b", 20), price("a", 10)], {"b": merge.APPLIED, "a": merge.APPLIED}),
    # Alike but for the weight: each weight group applies its first (the loop's runs of alike overlays end
    # where the weight does).
    ([price("d", 20), price("c", 20), price("b", 10), price("a", 10)],
     {"d": merge.APPLIED, "c": merge.CONFLICT, "b": merge.APPLIED, "a": merge.CONFLICT}),
    # lowestWeight quirk: the weight-10 overlay stored after a weight-20 one sets the offering's lowest weight
    # to 10, so the next weight-10 overlay conflicts with it although its value never took effect.
    ([price("high", 20), price("b", 10), price("a", 10)],
     {"high": merge.APPLIED, "b": merge.APPLIED, "a": merge.CONFLICT}),
    # Capacity: a shared resource at one weight conflicts.
    ([capacity("b", 10, X), capacity("a", 10, X, Y)], {"b": merge.APPLIED, "a": merge.CONFLICT}),
    ([capacity("b", 10, X), capacity("a", 10, Y)], {"b": merge.APPLIED, "a": merge.APPLIED}),
    # Last-capacity-overlay quirk: only the last stored capacity overlay of the weight is compared, so c{x},
    # b{y}, a{x} all apply...
    ([capacity("c", 10, X), capacity("b", 10, Y), capacity("a", 10, X)],
     {"c": merge.APPLIED, "b": merge.APPLIED, "a": merge.APPLIED}),
    # ... and so does an empty `capacity: {}` in between, which still becomes the last one.
    ([capacity("c", 10, X), capacity("b", 10), capacity("a", 10, X)],
     {"c": merge.APPLIED, "b": merge.APPLIED, "a": merge.APPLIED}),
    # A conflicting overlay is dropped whole: b's capacity is never stored, so a meets only c's price.
    ([price("c", 10), cs.overlay("b", M, weight=10, price="2", capacity={X: "1"}), capacity("a", 10, X)],
     {"c": merge.APPLIED, "b": merge.CONFLICT, "a": merge.APPLIED}),
    # An overlay that selects nothing applies and conflicts with nothing.
    ([price("b", 10, (FAMILY, "In", ["none"])), price("a", 10, (FAMILY, "In", ["none"]))],
     {"b": merge.APPLIED, "a": merge.APPLIED}),
])
def test_karpenter_status(small_catalog: cat.Catalog, overlays: list[model.Overlay],
                          expected: dict[str, str]) -> None:
    assert dict(outcome(small_catalog, *overlays).status) == expected


@pytest.mark.parametrize(("overlays", "dropped", "field", "met"), [
    ([price("b", 10), price("a", 10)], "a", merge.PRICE, "b"),
    ([price("high", 20), price("b", 10), price("a", 10)], "a", merge.PRICE, "b"),
    ([capacity("c", 10, Y), capacity("b", 10, X, Y), capacity("a", 10, X)], "b", merge.capacity_field(Y), "c"),
    # b, stored after c, is the last capacity overlay on the small type only: a meets c on the large one.
    ([capacity("c", 10, X), cs.overlay("b", SMALL, weight=10, capacity={Y: "1"}), capacity("a", 10, X)],
     "a", merge.capacity_field(X), "c"),
])
def test_karpenter_verdict_names_the_field_and_the_stored_overlay(
        small_catalog: cat.Catalog, overlays: list[model.Overlay], dropped: str, field: str, met: str) -> None:
    verdict = outcome(small_catalog, *overlays).verdicts[dropped]
    assert (verdict.field, verdict.other) == (field, met)


@pytest.mark.parametrize("overlays", [
    [price("b", 10), price("a", 10)],
    # The first price it meets names the verdict, not the first price stored.
    [price("c", 10, LARGE), price("b", 10, SMALL), price("a", 10, SMALL)],
    # A capacity stored before the price it meets: the price is tested first.
    [capacity("c", 10, X), price("b", 10), cs.overlay("a", M, weight=10, price="2", capacity={X: "1"})],
    [capacity("c", 10, X), capacity("a", 10, X)],
    # A price it does not meet, then a capacity it does.
    [price("c", 10, LARGE), capacity("b", 10, X), cs.overlay("a", SMALL, weight=10, price="2", capacity={X: "1"})],
    [price("b", 10, LARGE), price("a", 10, SMALL)],
    [price("b", 10), capacity("a", 10, X)],
    [price("a", 10)],
])
def test_tested_against_gives_the_loops_verdict(small_catalog: cat.Catalog, overlays: list[model.Overlay]) -> None:
    """The conflict test of a new overlay against the applied ones of its weight before it (incremental._settle)
    is the verdict of Karpenter's loop over them all."""
    *before, last = merge.ordered(cs.entries(cs.grid(small_catalog), *overlays))
    full = merge.karpenter([*before, last])
    stored = [e for e in before if full.status[e.name] == merge.APPLIED]
    assert merge.tested_against(iter(stored), last) == full.verdicts.get(last.name)


def test_first_writer_wins(small_catalog: cat.Catalog) -> None:
    g = cs.grid(small_catalog)
    # The weight-20 overlay holds m.large; the weight-10 one keeps only the m.small offerings it sets.
    done = merge.karpenter(cs.entries(g, price("low", 10), price("high", 20, LARGE), capacity("cap", 10, X)))
    assert {t for _, t, _, _ in cs.selected(g, done.claimed["high", merge.PRICE])} == {"m.large"}
    assert {t for _, t, _, _ in cs.selected(g, done.claimed["low", merge.PRICE])} == {"m.small"}
    assert {t for _, t, _, _ in cs.selected(g, done.claimed["cap", merge.capacity_field(X)])} == {"m.small", "m.large"}
    shadowed = merge.karpenter(cs.entries(g, price("low", 10), price("high", 20)))
    assert not shadowed.claimed["low", merge.PRICE]
    assert dict(shadowed.status) == {"high": merge.APPLIED, "low": merge.APPLIED}


def clashes(catalog: cat.Catalog, *overlays: model.Overlay, limit: int = clash.LIMIT) -> set[tuple[Any, ...]]:
    found = clash.same_weight(cs.entries(cs.grid(catalog), *overlays), limit)
    return {(c.later, c.earlier, c.field, c.more) for c in found}


@pytest.mark.parametrize(("overlays", "expected"), [
    ([price("b", 10), price("a", 10)], {("a", "b", merge.PRICE, 0)}),
    ([price("b", 20), price("a", 10)], set()),
    ([price("b", 10, SMALL), price("a", 10, LARGE)], set()),
    # What Karpenter's last-overlay comparison misses: a{x} and c{x} at one weight.
    ([capacity("c", 10, X), capacity("b", 10, Y), capacity("a", 10, X)], {("a", "c", merge.capacity_field(X), 0)}),
    # Price and capacity are different fields.
    ([price("b", 10), capacity("a", 10, X)], set()),
])
def test_same_weight(small_catalog: cat.Catalog, overlays: list[model.Overlay], expected: set[tuple[Any, ...]]) -> None:
    assert clashes(small_catalog, *overlays) == expected


def test_same_weight_lists_the_first_partners_and_counts_the_rest(small_catalog: cat.Catalog) -> None:
    overlays = [price(f"o{i}", 10) for i in range(5)]
    found = clashes(small_catalog, *overlays, limit=2)
    # o0 is last in the order (name descending): it meets o4 and o3 first, and 2 more.
    assert {c for c in found if c[0] == "o0"} == {("o0", "o4", merge.PRICE, 0), ("o0", "o3", merge.PRICE, 2)}
    assert {c for c in found if c[0] == "o3"} == {("o3", "o4", merge.PRICE, 0)}
    assert len(found) == 1 + 2 + 2 + 2


def test_clashes_with_agrees_with_same_weight(small_catalog: cat.Catalog) -> None:
    g = cs.grid(small_catalog)
    es = cs.entries(g, *(price(f"o{i}", 10) for i in range(4)), price("high", 20), capacity("cap", 10, X))
    every = {(c.later, c.earlier, c.field, c.more) for c in clash.same_weight(es, 2)}
    for target in es:
        own = {(c.later, c.earlier, c.field, c.more) for c in clash.clashes_with(target, [merge.Listed(es)], 2)}
        assert own == {c for c in every if c[0] == target.name}
