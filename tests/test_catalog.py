"""simulation.semantics.catalog: the embedded default catalog's facts, and the two catalog formats
(JSON, InstanceType documents) with their errors."""

from __future__ import annotations

from typing import Any

import pytest

from simulation.semantics import catalog as cat
from simulation.semantics import requirements as reqs
from tests import core_support as cs

ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")


def test_default_catalog_size_and_names(default_catalog: cat.Catalog) -> None:
    names = [t.name for t in default_catalog.types]
    assert len(names) == 1363
    assert len(set(names)) == len(names)
    assert default_catalog.description.startswith("1363 instance types, region us-east-1")


def test_default_offerings_are_three_zones_times_two_capacity_types(default_catalog: cat.Catalog) -> None:
    for t in default_catalog.types:
        assert sorted((o.capacity_type, o.zone) for o in t.offerings) == sorted(
            (ct, z) for ct in ("on-demand", "spot") for z in ZONES), t.name
        assert t.labels[reqs.REGION] == "us-east-1"
        assert t.labels[reqs.INSTANCE_TYPE] == t.name


def test_default_spot_prices_are_marked_estimated(default_catalog: cat.Catalog) -> None:
    """Upstream publishes no spot prices: spot carries the on-demand price, marked as an estimate."""
    for t in default_catalog.types:
        on_demand = {o.price for o in t.offerings if o.capacity_type == "on-demand"}
        for o in t.offerings:
            assert o.estimated is (o.capacity_type == "spot" and o.price is not None), (t.name, o)
            if o.capacity_type == "spot":
                assert {o.price} == on_demand, t.name
    assert any("spot" in a and "estimate" in a for a in default_catalog.assumptions)


def test_default_types_without_an_upstream_price_are_unavailable(default_catalog: cat.Catalog) -> None:
    unpriced = [t for t in default_catalog.types if any(o.price is None for o in t.offerings)]
    assert len(unpriced) == 18
    assert "p5e.48xlarge" in {t.name for t in unpriced}
    for t in unpriced:
        assert all(o.price is None and not o.available for o in t.offerings), t.name
    priced = [o for t in default_catalog.types for o in t.offerings if o.price is not None]
    assert all(o.available and o.price >= 0 for o in priced)


def test_default_known_type(default_catalog: cat.Catalog) -> None:
    m5 = next(t for t in default_catalog.types if t.name == "m5.large")
    assert m5.labels["karpenter.k8s.aws/instance-cpu"] == "2"
    assert m5.labels["karpenter.k8s.aws/instance-family"] == "m5"
    assert m5.capacity["cpu"] == "1930m"
    assert {o.price for o in m5.offerings} == {0.096}


def test_instance_type_requirements_add_zone_and_capacity_type(small_catalog: cat.Catalog) -> None:
    small = next(t for t in small_catalog.types if t.name == "m.small")
    own = small.requirements()
    assert set(own[reqs.ZONE].values) == {"z-a", "z-b"}
    assert set(own[reqs.CAPACITY_TYPE].values) == {"on-demand", "spot"}
    assert set(own[cs.FAMILY].values) == {"m"}
    assert set(own[reqs.INSTANCE_TYPE].values) == {"m.small"}


def test_json_catalog_without_offerings_uses_the_region() -> None:
    catalog = cat.from_json({"region": "eu-west-1", "instanceTypes": [
        {"name": "t.a", "labels": {"k": "v"}, "allocatable": {"cpu": "1000m"}, "onDemandPrice": 0.5}]})
    (t,) = catalog.types
    assert {o.zone for o in t.offerings} == {"eu-west-1a", "eu-west-1b", "eu-west-1c"}
    assert t.labels[reqs.REGION] == "eu-west-1"
    # Quantities are kept in canonical form.
    assert t.capacity == {"cpu": "1"}


def test_json_catalog_with_explicit_offerings() -> None:
    catalog = cat.from_json({"instanceTypes": [{"name": "t.a", "offerings": [
        {"zone": "z", "capacityType": "spot", "price": "0.25", "estimated": True, "available": False}]}]})
    assert catalog.types[0].offerings == (cat.Offering("z", "spot", 0.25, estimated=True, available=False),)


def test_documents_catalog(small_catalog: cat.Catalog) -> None:
    assert [t.name for t in small_catalog.types] == ["m.small", "m.large", "a.odd"]
    large = small_catalog.types[1]
    assert [(o.zone, o.capacity_type, o.price, o.estimated) for o in large.offerings] == [
        ("z-a", "on-demand", 4.0, False), ("z-a", "spot", 1.5, False)]
    assert large.capacity == {"cpu": "2", "memory": "4Gi"}


def with_type(**entry: Any) -> dict[str, Any]:
    return {"instanceTypes": [{"name": "t.a", **entry}]}


@pytest.mark.parametrize("data", [
    [],
    {"instanceTypes": {}},
    {"instanceTypes": [{"labels": {}}]},
    with_type(onDemandPrice="cheap"),
    with_type(onDemandPrice=-1),
    with_type(onDemandPrice="nan"),
    with_type(onDemandPrice=True),
    with_type(labels={"k": {"nested": 1}}),
    with_type(labels={"k": None}),
    with_type(allocatable={"cpu": "lots"}),
    with_type(allocatable=["cpu"]),
    with_type(offerings=[{"zone": "z"}]),
    with_type(offerings=["z"]),
    {"instanceTypes": [{"name": "t.a"}, {"name": "t.a"}]},
])
def test_json_catalog_errors(data: Any) -> None:
    with pytest.raises(cat.CatalogError):
        cat.from_json(data)


@pytest.mark.parametrize("doc", [
    {"kind": "InstanceType", "spec": {}},
    {"kind": "InstanceType", "metadata": {"name": "x"}},
    {"kind": "InstanceType", "metadata": {"name": "x"}, "spec": {"offerings": {"z": "a"}}},
    {"kind": "InstanceType", "metadata": {"name": "x"}, "spec": {"resources": {"memory": "1Q"}}},
])
def test_documents_catalog_errors(doc: dict[str, Any]) -> None:
    with pytest.raises(cat.CatalogError):
        cat.from_documents([doc])


def test_default_catalog_is_stored_canonical(default_catalog: cat.Catalog) -> None:
    """The embedded catalog is read without normalising its quantities (start-up cost): normalising them
    changes nothing."""
    import json

    from simulation import packagedata

    data = json.loads(packagedata.text(cat.DEFAULT_DATA))
    assert cat.from_json(data).types == cat.from_json(data, canonical=True).types == default_catalog.types
