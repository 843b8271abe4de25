"""simulation.analysis.checks: the findings that need the whole picture (same-weight conflicts with
Karpenter's own verdict, shadowed fields, clamped prices, unknown labels, no-match, NodePool weight ties)."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from simulation import findings
from simulation.analysis import checks
from simulation.semantics import catalog as cat
from simulation.semantics import clash, merge, model
from simulation.semantics import requirements as reqs
from tests import core_support as cs
from tests.core_support import FAMILY

M = (FAMILY, "In", ["m"])
LARGE = (reqs.INSTANCE_TYPE, "In", ["m.large"])


def conflict_findings(catalog: cat.Catalog, *overlays: model.Overlay) -> list[Any]:
    g = cs.grid(catalog)
    es = cs.entries(g, *overlays)
    done = merge.karpenter(es)
    return checks.conflicts(g, {e.name: e for e in es}, done.status, done.verdicts, clash.same_weight(es))


@pytest.mark.parametrize(("overlays", "karpenter", "detail_key", "detail_value", "path"), [
    # Karpenter drops the later overlay itself.
    ([cs.overlay("b", M, weight=10, price="1"), cs.overlay("a", M, weight=10, price="2")],
     "Conflict", "dropped", "a", ("spec", "price")),
    # Karpenter's last-overlay comparison misses c vs a: it silently applies c's value.
    ([cs.overlay("c", M, weight=10, capacity={"example.com/x": "1"}),
      cs.overlay("b", M, weight=10, capacity={"example.com/y": "1"}),
      cs.overlay("a", M, weight=10, capacity={"example.com/x": "2"})],
     "silent", "applied", "c", ("spec", "capacity", "example.com/x")),
    ([cs.overlay("b", M, weight=10, price="1"), cs.overlay("a", M, weight=10, priceAdjustment="-5%")],
     "Conflict", "dropped", "a", ("spec", "priceAdjustment")),
])
def test_conflict_says_what_karpenter_does(small_catalog: cat.Catalog, overlays: list[model.Overlay],
                                           karpenter: str, detail_key: str, detail_value: str,
                                           path: tuple[str, ...]) -> None:
    (finding,) = conflict_findings(small_catalog, *overlays)
    detail = dict(finding.detail)
    assert finding.code == "same-weight-conflict"
    assert (finding.obj.name, [r.name for r in finding.related]) == ("a", [overlays[0].name])
    assert (detail["karpenter"], detail[detail_key], detail["weight"]) == (karpenter, detail_value, "10")
    assert finding.path == path
    assert finding.witness is not None and finding.witness.instance_type in {"m.small", "m.large"}
    assert finding.hint


def test_conflict_counts_the_partners_beyond_the_limit(small_catalog: cat.Catalog) -> None:
    # o0 is last in the order: it meets clash.LIMIT + 2 earlier overlays.
    overlays = [cs.overlay(f"o{i}", M, weight=10, price="1") for i in range(clash.LIMIT + 3)]
    found = [f for f in conflict_findings(small_catalog, *overlays) if f.obj.name == "o0"]
    assert len(found) == clash.LIMIT
    assert sorted(dict(f.detail).get("more", "0") for f in found) == ["0"] * (clash.LIMIT - 1) + ["2"]


def shadow(catalog: cat.Catalog, target: model.Overlay, *others: model.Overlay) -> Any:
    g = cs.grid(catalog)
    es = cs.entries(g, target, *others)
    status = merge.karpenter(es).status
    (field,) = es[0].fields()
    return checks.shadowed(g, es[0], field, [checks.listed(es[1:], status)], status)


@pytest.mark.parametrize(("others", "shadowed_by"), [
    # Every cell is set by a higher weight: no effect.
    ([cs.overlay("high", M, weight=20, price="1")], ["high"]),
    ([cs.overlay("h1", LARGE, weight=20, price="1"),
      cs.overlay("h2", (reqs.INSTANCE_TYPE, "In", ["m.small"]), weight=30, price="1")], ["h1", "h2"]),
    # Part of the cells are left: it still takes effect there.
    ([cs.overlay("high", LARGE, weight=20, price="1")], None),
    # Lower weight never shadows.
    ([cs.overlay("low", M, weight=5, price="1")], None),
    # Equal weight is a conflict, not shadowing.
    ([cs.overlay("same", M, weight=10, price="1")], None),
    # Another field does not count.
    ([cs.overlay("high", M, weight=20, capacity={"example.com/x": "1"})], None),
])
def test_shadowed(small_catalog: cat.Catalog, others: list[model.Overlay], shadowed_by: list[str] | None) -> None:
    finding = shadow(small_catalog, cs.overlay("target", M, weight=10, price="2"), *others)
    if shadowed_by is None:
        assert finding is None
    else:
        assert finding is not None and finding.code == "shadowed"
        assert [r.name for r in finding.related] == shadowed_by
        assert finding.path == ("spec", "price")


@pytest.mark.parametrize(("spec", "clamped_at"), [
    # m.small spot costs 0.4, m.small on-demand 1.0, m.large spot 1.5.
    ({"priceAdjustment": "-0.5"}, ("m.small", "spot")),
    ({"priceAdjustment": "-1.2"}, ("m.small", "on-demand")),
    ({"priceAdjustment": "-0.4"}, None),
    ({"priceAdjustment": "-90%"}, None),
    ({"priceAdjustment": "+5"}, None),
    ({"price": "0", "priceAdjustment": "-9"}, None),
])
def test_clamped(small_catalog: cat.Catalog, spec: dict[str, str], clamped_at: tuple[str, str] | None) -> None:
    g = cs.grid(small_catalog)
    (e,) = cs.entries(g, cs.overlay("cut", M, weight=1, **spec))
    finding = checks.clamped(g, e, e.cells)
    if clamped_at is None:
        assert finding is None
        return
    assert finding is not None and finding.code == "price-clamped"
    assert finding.path == ("spec", "priceAdjustment")
    assert finding.witness is not None and finding.witness.offering is not None
    assert (finding.witness.instance_type, finding.witness.offering.capacity_type) == clamped_at


def test_clamped_only_where_the_price_is_in_effect(small_catalog: cat.Catalog) -> None:
    g = cs.grid(small_catalog)
    (e,) = cs.entries(g, cs.overlay("cut", M, weight=1, priceAdjustment="-0.5"))
    assert checks.clamped(g, e, g.match(reqs.from_specs([LARGE]))) is None


def test_known_keys_and_unknown_labels(small_catalog: cat.Catalog) -> None:
    pool = cs.nodepool("p", {"team": "a"}, ("example.com/zone-group", "In", ["g"]))
    g = cs.grid(small_catalog, pool)
    keys = checks.known_keys(g)
    assert {FAMILY, "team", "example.com/zone-group", reqs.NODEPOOL, reqs.ZONE, reqs.CAPACITY_TYPE} <= keys
    overlay = cs.overlay("o", (FAMILY, "In", ["m"]), ("example.com/zone-grup", "In", ["a"]),
                         ("beta.kubernetes.io/arch", "In", ["x"]), ("example.com/nowhere", "Exists", []))
    found = checks.unknown_labels(g, overlay, keys)
    assert [(f.code, f.path) for f in found] == [
        ("unknown-label", ("spec", "requirements", 1, "key")), ("unknown-label", ("spec", "requirements", 3, "key"))]
    assert "'example.com/zone-group'" in found[0].message and "did you mean" in found[0].message


@pytest.mark.parametrize(("requirements", "path"), [
    # The first requirement that alone selects nothing is named.
    ([M, (FAMILY, "In", ["q"])], ("spec", "requirements", 1)),
    ([(FAMILY, "In", ["q"]), M], ("spec", "requirements", 0)),
    # Each selects something, together nothing: the requirements as a whole.
    ([M, (cs.ARCH, "In", ["arm64"])], ("spec", "requirements")),
    # A key the catalog does not define: unknown-label says it, not a second no-match.
    ([("example.com/nowhere", "In", ["x"]), M], None),
])
def test_no_match_points_at_the_requirement(small_catalog: cat.Catalog, requirements: list[cs.Requirement],
                                            path: tuple[Any, ...] | None) -> None:
    g = cs.grid(small_catalog)
    finding = checks.no_match(g, cs.overlay("o", *requirements), checks.known_keys(g))
    assert (finding.code, finding.path) == ("no-match", path) if path is not None else finding is None


@pytest.mark.parametrize(("pools", "ties"), [
    ([cs.nodepool("a"), cs.nodepool("b")], [("b", "a")]),
    ([cs.nodepool("a"), cs.nodepool("b", weight=5)], []),
    # Disjoint reach: no tie.
    ([cs.nodepool("a", None, (FAMILY, "In", ["m"])), cs.nodepool("b", None, (FAMILY, "In", ["a"]))], []),
    ([cs.nodepool("a", {cs.ARCH: "arm64"}), cs.nodepool("b", None, (FAMILY, "In", ["m"]))], []),
    ([cs.nodepool("a"), cs.nodepool("b"), cs.nodepool("c")], [("b", "a"), ("c", "a"), ("c", "b")]),
])
def test_weight_ties(small_catalog: cat.Catalog, pools: list[model.NodePool], ties: list[tuple[str, str]]) -> None:
    found = checks.weight_ties(cs.grid(small_catalog, *pools), pools)
    assert [(f.obj.name, f.related[0].name) for f in found] == ties
    assert all(f.code == "nodepool-weight-tie" and f.path == ("spec", "weight") for f in found)
    # Karpenter's OrderByWeight: of equal weights, the name later in the alphabet is tried first.
    assert [(dict(f.detail)["first"], dict(f.detail)["then"]) for f in found] == ties
    assert all(f.hint and dict(f.detail)["tieBreak"] == "name" for f in found)


def test_weight_tie_witness_is_an_offering_both_launch_in_the_first(small_catalog: cat.Catalog) -> None:
    pools = [cs.nodepool("a-on-demand", None, (reqs.CAPACITY_TYPE, "In", ["on-demand"])),
             cs.nodepool("b-family-m", None, (FAMILY, "In", ["m"]))]
    found, = checks.weight_ties(cs.grid(small_catalog, *pools), pools)
    assert (found.obj.name, dict(found.detail)["first"], dict(found.detail)["weight"]) == ("b-family-m",) * 2 + ("0",)
    assert found.witness == findings.Witness("b-family-m", "m.small", findings.Offering("z-a", "on-demand"))


# --- fractional-extended-resource, price-on-every-type ---------------------------------------------------

def _lint(tmp_path: pathlib.Path, *objects: dict[str, Any], catalog: bool = True) -> list[tuple[str, str]]:
    """The findings of `check` on the objects, with the fixture catalog or (catalog=False) the embedded one."""
    from tests.lint_support import run, write

    code, out, err = run("check", write(tmp_path, "o.yaml", *objects), "--format", "json", catalog=catalog)
    assert code in (0, 1), err
    return [(f["code"], f["field"]) for f in json.loads(out)["findings"]]


def _overlay(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
            "spec": {"weight": 10, **spec}}


@pytest.mark.parametrize(("capacity", "found"), [
    ({"nvidia.com/gpu": "500m"}, [("fractional-extended-resource", "spec.capacity['nvidia.com/gpu']")]),
    ({"nvidia.com/gpu": "1.5"}, [("fractional-extended-resource", "spec.capacity['nvidia.com/gpu']")]),
    ({"nvidia.com/gpu": "2"}, []),
    ({"example.com/fuse": "1k"}, []),
    ({"hugepages-2Mi": "1Gi"}, []),
])
def test_fractional_extended_resource(tmp_path: pathlib.Path, capacity: dict[str, str],
                                      found: list[tuple[str, str]]) -> None:
    requirements = [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["g5"]}]
    assert _lint(tmp_path, _overlay("o", {"requirements": requirements, "capacity": capacity})) == found


@pytest.mark.parametrize(("requirements", "found"), [
    ([], [("price-on-every-type", "spec.price")]),
    ([{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
     [("price-on-every-type", "spec.price")]),
    # Types without an upstream price have unavailable offerings, still offerings: arm64 is not every type.
    ([{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}], []),
    ([{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["g5"]}], []),
])
def test_price_on_every_type(tmp_path: pathlib.Path, requirements: list[Any], found: list[tuple[str, str]]) -> None:
    overlay = _overlay("o", {"requirements": requirements, "price": "0.1"})
    assert _lint(tmp_path, overlay, catalog=False) == found
    # An adjustment keeps the types' order: no warning.
    adjusted = _overlay("o", {"requirements": requirements, "priceAdjustment": "-10%"})
    assert _lint(tmp_path, adjusted, catalog=False) == []
    # A catalog of a few types (the fixture's three) may well be priced alike on purpose.
    assert ("price-on-every-type", "spec.price") not in _lint(tmp_path, overlay)
