"""simulation.semantics.cells: which (NodePool, instance type, offering) cells an overlay selects
(Karpenter's getOverlaidOfferings), what a NodePool can launch, and the grid's bookkeeping."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulation import findings
from simulation.semantics import catalog as cat
from simulation.semantics import cells, cellset, model
from simulation.semantics import requirements as reqs
from tests import core_support as cs
from tests.core_support import ARCH, CPU, FAMILY

SMALL = {("m.small", "z-a", "on-demand"), ("m.small", "z-b", "spot"),
         ("m.large", "z-a", "on-demand"), ("m.large", "z-a", "spot")}
LARGE = {c for c in SMALL if c[0] == "m.large"}
ODD = {("a.odd", "z-b", "on-demand")}
EVERY = SMALL | ODD


def offerings(g: cells.Grid, requirements: list[cs.Requirement]) -> set[tuple[str, str, str]]:
    """(type, zone, capacity type) selected in the implicit NodePool."""
    chosen = g.match(reqs.from_specs(requirements))
    return {(t, z, ct) for _, t, z, ct in cs.selected(g, chosen)}


@pytest.mark.parametrize(("requirements", "expected"), [
    ([], EVERY),
    ([(FAMILY, "In", ["m"])], SMALL),
    ([(FAMILY, "NotIn", ["m"])], ODD),
    ([(reqs.INSTANCE_TYPE, "In", ["m.large", "nope"])], LARGE),
    # Offering-level keys pick offerings, not whole types.
    ([(reqs.ZONE, "In", ["z-b"])], {("m.small", "z-b", "spot"), ("a.odd", "z-b", "on-demand")}),
    ([(reqs.CAPACITY_TYPE, "NotIn", ["spot"]), (FAMILY, "In", ["m"])],
     {("m.small", "z-a", "on-demand"), ("m.large", "z-a", "on-demand")}),
    # Integer bounds: a value that is not an integer ("many") never satisfies one.
    ([(CPU, "Gt", ["4"])], LARGE),
    ([(CPU, "Lte", ["8"])], SMALL),
    ([(CPU, "Gte", ["3"]), (CPU, "Lt", ["8"])], set()),
    ([(CPU, "NotIn", ["2"])], LARGE | ODD),
    # A key only some types define: In needs it, NotIn/DoesNotExist accept its absence.
    (([("example.com/gpu", "In", ["true"])]), LARGE),
    (([("example.com/gpu", "NotIn", ["true"])]), (SMALL - LARGE) | ODD),
    (([("example.com/gpu", "DoesNotExist", [])]), (SMALL - LARGE) | ODD),
    (([("example.com/gpu", "Exists", [])]), LARGE),
    # A key no type defines.
    ([("example.com/team", "In", ["a"])], set()),
    ([("example.com/team", "Exists", [])], set()),
    ([("example.com/team", "NotIn", ["a"])], EVERY),
    ([("example.com/team", "DoesNotExist", [])], EVERY),
    # Deprecated aliases are the same key.
    ([("beta.kubernetes.io/arch", "In", ["arm64"])], ODD),
])
def test_match_in_one_nodepool(small_catalog: cat.Catalog, requirements: list[cs.Requirement],
                               expected: set[tuple[str, str, str]]) -> None:
    assert offerings(cs.grid(small_catalog), requirements) == expected


def pools_and_types(small_catalog: cat.Catalog, labels: Mapping[str, Mapping[str, str]],
                    requirements: list[cs.Requirement]) -> set[tuple[str, str]]:
    g = cs.grid(small_catalog, *(cs.nodepool(name, lab) for name, lab in labels.items()))
    return {(p, t) for p, t, _, _ in cs.selected(g, g.match(reqs.from_specs(requirements)))}


@pytest.mark.parametrize(("requirements", "expected"), [
    ([(reqs.NODEPOOL, "In", ["blue"])], {("blue", "m.small"), ("blue", "m.large"), ("blue", "a.odd")}),
    ([(reqs.NODEPOOL, "NotIn", ["blue", "plain"])], {("red", "m.small"), ("red", "m.large"), ("red", "a.odd")}),
    # A NodePool's template label defines the key for every type it launches.
    ([("team", "In", ["b"])], {("blue", "m.small"), ("blue", "m.large"), ("blue", "a.odd")}),
    ([("team", "NotIn", ["b"])], {(p, t) for p in ("red", "plain") for t in ("m.small", "m.large", "a.odd")}),
    ([("team", "DoesNotExist", [])], {("plain", t) for t in ("m.small", "m.large", "a.odd")}),
    # A template label that disagrees with a type's own label leaves Karpenter an empty In {}: only
    # NotIn/DoesNotExist accept it. The red pool says arm64 and so is silent about the amd64 types.
    ([(ARCH, "In", ["amd64"])], {("blue", "m.small"), ("blue", "m.large"),
                                 ("plain", "m.small"), ("plain", "m.large")}),
    ([(ARCH, "In", ["arm64"])], {("red", "a.odd"), ("plain", "a.odd"), ("blue", "a.odd")}),
    ([(ARCH, "NotIn", ["amd64"]), (reqs.NODEPOOL, "In", ["red"])],
     {("red", "m.small"), ("red", "m.large"), ("red", "a.odd")}),
])
def test_match_across_nodepools(small_catalog: cat.Catalog, requirements: list[cs.Requirement],
                                expected: set[tuple[str, str]]) -> None:
    labels = {"blue": {"team": "b"}, "red": {"team": "r", ARCH: "arm64"}, "plain": {}}
    assert pools_and_types(small_catalog, labels, requirements) == expected


@pytest.mark.parametrize(("requirements", "expected"), [
    ([], EVERY),
    ([(FAMILY, "In", ["a"])], ODD),
    # Unlike an overlay match, a NodePool's requirement on a key the type does not define passes
    # (Requirements.Intersects).
    ([("example.com/team", "In", ["a"])], EVERY),
    ([("example.com/gpu", "In", ["true"])], EVERY),
    ([("example.com/gpu", "In", ["false"])], (SMALL - LARGE) | ODD),
    ([(reqs.ZONE, "In", ["z-a"]), (reqs.CAPACITY_TYPE, "In", ["spot"])], {("m.large", "z-a", "spot")}),
])
def test_launchable(small_catalog: cat.Catalog, requirements: list[cs.Requirement],
                    expected: set[tuple[str, str, str]]) -> None:
    g = cs.grid(small_catalog)
    block = g.launchable(reqs.from_specs(requirements))
    assert {(t, z, ct) for _, t, z, ct in cs.selected(g, g.at(0, block))} == expected


def test_type_cells_keep_one_cell_per_nodepool_and_type(small_catalog: cat.Catalog) -> None:
    g = cs.grid(small_catalog, cs.nodepool("a"), cs.nodepool("b"))
    by_type = g.type_cells(g.match(reqs.from_specs([(FAMILY, "In", ["m"])])))
    assert sorted((p, t) for p, t, _, _ in cs.selected(g, by_type)) == [
        ("a", "m.large"), ("a", "m.small"), ("b", "m.large"), ("b", "m.small")]
    assert by_type.bit_count() == 4


def test_below_price_is_strict_and_per_offering(small_catalog: cat.Catalog) -> None:
    g = cs.grid(small_catalog)
    assert {(t, z, ct) for _, t, z, ct in cs.selected(g, g.below_price(1.5))} == {
        ("m.small", "z-a", "on-demand"), ("m.small", "z-b", "spot")}
    assert not g.below_price(0.4)


def test_witness_names_the_lowest_cell(small_catalog: cat.Catalog) -> None:
    g = cs.grid(small_catalog, cs.nodepool("a"), cs.nodepool("b"))
    chosen = g.match(reqs.from_specs([(reqs.NODEPOOL, "In", ["b"]), (FAMILY, "In", ["a"])]))
    witness = g.witness(chosen)
    assert witness is not None
    assert (witness.nodepool, witness.instance_type) == ("b", "a.odd")
    assert witness.offering is not None
    assert (witness.offering.zone, witness.offering.capacity_type) == ("z-b", "on-demand")
    without = g.witness(chosen, with_offering=False)
    assert without is not None and without.offering is None
    assert g.witness(g.match(reqs.from_specs([(FAMILY, "In", ["none"])]))) is None


def _launch_pools() -> tuple[model.NodePool, ...]:
    return (cs.nodepool("spot-m", None, (reqs.CAPACITY_TYPE, "In", ["spot"]), (FAMILY, "In", ["m"])),
            cs.nodepool("arm", {ARCH: "arm64"}),
            cs.nodepool("any"))


def test_launched_cells_follow_requirements_and_template_labels(small_catalog: cat.Catalog) -> None:
    g = cs.grid(small_catalog, *_launch_pools())
    assert cs.selected(g, g.launched) == {
        ("spot-m", "m.small", "z-b", "spot"), ("spot-m", "m.large", "z-a", "spot"),
        ("arm", "a.odd", "z-b", "on-demand"),
        *(("any", *c) for c in EVERY)}
    assert g.launches(g.launched.lowest()) and not g.launches(g.all_cells().lowest())
    # The requirements narrow what the NodePool launches, never what an overlay matches.
    assert g.match({}) == g.all_cells()


def test_witness_prefers_a_cell_its_nodepool_launches(small_catalog: cat.Catalog) -> None:
    g = cs.grid(small_catalog, *_launch_pools())
    spot_m, arm = g.at(0, g.present), g.at(1, g.present)
    assert g.witness(spot_m) == findings.Witness("spot-m", "m.small", findings.Offering("z-b", "spot"))
    assert g.witness(spot_m | arm) == g.witness(spot_m)
    # Without the offering: a type the NodePool launches some offering of, named by its first cell.
    assert g.witness(g.type_cells(arm), with_offering=False) == findings.Witness("arm", "a.odd")
    assert g.witness(g.type_cells(spot_m), with_offering=False) == findings.Witness("spot-m", "m.small")
    # No launched cell in the set: the lowest, as before.
    odd = g.match(reqs.from_specs([(reqs.NODEPOOL, "In", ["spot-m"]), (FAMILY, "In", ["a"])]))
    assert g.witness(odd) == findings.Witness("spot-m", "a.odd", findings.Offering("z-b", "on-demand"))


def test_types_without_offerings_hold_no_cells() -> None:
    catalog = cat.from_documents([
        cs.instance_type("has", {FAMILY: "x"}, [("z", "on-demand", "1")]),
        cs.instance_type("none", {FAMILY: "x"}, []),
    ])
    g = cs.grid(catalog)
    assert {t for _, t, _, _ in cs.selected(g, g.all_cells())} == {"has"}


@given(st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=7), st.data())
def test_type_cells_agree_with_a_pass_per_slot(counts: list[int], data: st.DataObject) -> None:
    """type_cells' one carry per type against the first slot of each type that has one, slot by slot,
    whatever the block's bits (types of every offering count, some with none, bits past the last type)."""
    catalog = cat.from_documents([
        cs.instance_type(f"t{i}", {FAMILY: "x"}, [(f"z{j}", "on-demand", "1") for j in range(n)])
        for i, n in enumerate(counts)])
    g = cs.grid(catalog, cs.nodepool("a"), cs.nodepool("b"))
    bits = data.draw(st.integers(min_value=0, max_value=(1 << g.block) - 1))
    expected = 0
    for t, it in enumerate(g.types):
        if it.offerings and bits >> (t * g.slots) & ((1 << g.slots) - 1):
            expected |= 1 << (t * g.slots)
    assert g.type_cells(cellset.Cells.product(0b11, bits, g.block)) == cellset.Cells.product(0b11, expected, g.block)


@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 10**6), st.booleans()), min_size=1, max_size=30),
       st.integers(1, 4))
def test_a_kept_witness_is_the_one_a_fresh_grid_names(small_catalog: cat.Catalog,
                                                      asked: list[tuple[int, int, bool]], bound: int) -> None:
    # Cells asked over and over, with and without their offering, past the memo's bound (it forgets all at once).
    g = cs.grid(small_catalog, cs.nodepool("a"), cs.nodepool("b"), cs.nodepool("c"))
    slots = [b for b in range(g.block) if g.present >> b & 1]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cells, "WITNESSES", bound)
        for pool, k, with_offering in asked:
            bit = pool * g.block + slots[k % len(slots)]
            fresh = cs.grid(small_catalog, cs.nodepool("a"), cs.nodepool("b"), cs.nodepool("c"))
            assert g.witness_at(bit, with_offering) == fresh.witness_at(bit, with_offering)
            assert len(g._at) <= bound
