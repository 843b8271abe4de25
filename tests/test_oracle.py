"""Differential tests against Karpenter itself: the fixture corpus through Karpenter's own
NodeOverlay controller (hack/karpenter-oracle, built from sigs.k8s.io/karpenter by
hack/karpenter-oracle.sh, which `make test` runs first) and through this project's core, the way
``overlay-lint simulate`` drives it, compared field by field.

Compared: each overlay's status (Applied / Conflict / Invalid); per NodePool and instance type,
every offering's effective price to the last bit (both sides compute in IEEE-754 doubles with
correctly rounded parsing, so there is no excuse for a difference) and every capacity and
allocatable resource (Karpenter's ``InstanceType.Allocatable()``: hugepages off the memory) as an
exact quantity in the same canonical text.

Deliberate differences, each asserted rather than skipped (see docs/development.md, "Karpenter as the oracle"):

- Overlays the API server would refuse (``schema`` findings) never reach Karpenter; the cluster
  given to the oracle leaves them out, and the core must call them Invalid.
- A relative price change of an offering with no known base price: the core reports the price as
  unknown (null); Karpenter starts from 0.0, the price field's zero value.
- DRA (``spec.dynamicResources``) is not part of Karpenter's NodeOverlay type: the controller
  decodes and ignores it. Cases that only test DRA rules are compared on statuses and prices like
  any other; their template expectations are checked by hack/karpenter-oracle's DRA conversion
  (tests/test_oracle_dra.py).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from simulation.semantics import catalog as cat
from tests import casefmt
from tests.oracle_support import (
    CASES,
    DEFAULT_CATALOG,
    cluster_after_admission,
    compare,
    compare_cell,
    kind_name,
    placed,
    price_bits,
    project,
    run_oracle,
    write_objects,
)

# The module fixture below is dear: one xdist worker runs every test here, so it is made once.
pytestmark = pytest.mark.xdist_group("test_oracle")


@pytest.fixture(scope="module")
def case_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, Any, set[str]]]:
    """All cases through both sides: one oracle process for the whole corpus."""
    base = tmp_path_factory.mktemp("oracle-cases")
    catalog = cat.default()
    # One oracle process per catalog: the embedded one, and each region the cases are checked in.
    groups: dict[str, tuple[Path, list[tuple[str, Path]]]] = {}
    ours = {}
    for case in CASES:
        objects = cluster_after_admission(case)
        ours[case.name] = project(objects, catalog, case.region, case.compiled_crd())
        _, refused = ours[case.name]
        admitted = [o for o in objects if not (o.get("kind") == "NodeOverlay" and kind_name(o)[1] in refused)]
        used = placed(objects, catalog, case.region)
        # InstanceType documents among the objects are the oracle's catalog too: only a moved one needs a file.
        moved = used.regional and (used.region, used.zones) != (catalog.region, catalog.zones)
        key = f"{used.region}:{','.join(used.zones)}" if moved else ""
        if key not in groups:
            path = DEFAULT_CATALOG if not key else base / f"catalog-{len(groups)}.json"
            if key:
                path.write_text(json.dumps(cat.to_json(used)), encoding="utf-8")
            groups[key] = (path, [])
        groups[key][1].append((case.name, write_objects(base / case.name, admitted)))
    theirs = {}
    for path, named in groups.values():
        for (name, _), result in zip(named, run_oracle([d for _, d in named], path), strict=True):
            theirs[name] = result
    return {c.name: (ours[c.name][0], theirs[c.name], ours[c.name][1]) for c in CASES}


def test_corpus_reaches_the_oracle() -> None:
    assert len(CASES) >= 40


@pytest.mark.tools
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_agrees_with_karpenter(case: casefmt.Case, case_results: Mapping[str, Any]) -> None:
    ours, theirs, refused = case_results[case.name]
    problems = compare(ours, theirs, refused)
    assert not problems, f"{case.name}: {case.description}\n  " + "\n  ".join(problems)


def test_comparison_catches_a_one_ulp_price_difference() -> None:
    price = 0.1 + 0.2
    cell = {"offerings": [{"zone": "z", "capacityType": "spot", "price": price, "basePrice": 1.0,
                           "priceOverlay": "a"}], "capacity": {"cpu": "1"}, "capacityOverlays": {}}
    nudged = struct.unpack(">d", struct.pack(">Q", struct.unpack(">Q", struct.pack(">d", price))[0] + 1))[0]
    offering = {"zone": "z", "capacityType": "spot", "price": nudged, "priceBits": price_bits(nudged),
                "basePriceBits": price_bits(1.0)}
    oracle: dict[str, Any] = {"offerings": [offering], "capacity": {"cpu": "1"}, "baseCapacity": {"cpu": "1"}}
    assert compare_cell("p/t", cell, oracle)
    oracle["offerings"][0]["priceBits"] = price_bits(price)
    assert not compare_cell("p/t", cell, oracle)
    oracle["capacity"] = {"cpu": "1000m"}
    assert compare_cell("p/t", cell, oracle), "the same quantity in another form is a difference"


def test_comparison_catches_an_allocatable_memory_difference() -> None:
    capacity = {"memory": "14162Mi", "hugepages-2Mi": "4Gi"}
    allocatable = {"memory": "10066Mi", "hugepages-2Mi": "4Gi"}
    cell = {"offerings": [], "capacity": capacity, "allocatable": allocatable, "capacityOverlays": {}}
    oracle: dict[str, Any] = {"offerings": [], "capacity": dict(capacity), "baseCapacity": {"memory": "14162Mi"},
                              "allocatable": dict(allocatable)}
    assert not compare_cell("p/t", cell, oracle)
    oracle["allocatable"] = {**oracle["allocatable"], "memory": "14162Mi"}
    assert compare_cell("p/t", cell, oracle)


@pytest.mark.tools
def test_oracle_reports_karpenter_conflict(tmp_path: Path) -> None:
    """The harness itself: two equal-weight price overlays on one offering, Karpenter's own
    conflict (the later name in the alphabet goes first and wins)."""
    overlays = [{"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": n},
                 "spec": {"weight": 5, "price": p, "requirements": [
                     {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}]}}
                for n, p in (("a", "1.5"), ("b", "2.5"))]
    [result] = run_oracle([write_objects(tmp_path / "set", overlays)], DEFAULT_CATALOG)
    assert result["implicitDefaultNodePool"] is True
    assert {n: o["status"] for n, o in result["overlays"].items()} == {"a": "Conflict", "b": "Applied"}
    cell = result["nodepools"]["default"]["m5.large"]
    assert {o["price"] for o in cell["offerings"]} == {2.5}

