"""The instance-type catalog: what every NodePool can launch, with offerings and base prices."""

from __future__ import annotations

import dataclasses
import importlib.resources
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from simulation.semantics import quantity
from simulation.semantics import requirements as reqs

DEFAULT_DATA = "aws-us-east-1-instance-types.json"
CAPACITY_TYPES = ("on-demand", "spot")
PRICE_LABEL = "karpenter.sh/price"


class CatalogError(ValueError):
    """A catalog that cannot be used; the message names the offending entry."""


@dataclasses.dataclass(frozen=True)
class Offering:
    zone: str
    capacity_type: str
    price: float | None
    # True where the price was not read from the data (e.g. spot, which upstream does not publish).
    estimated: bool = False
    available: bool = True


@dataclasses.dataclass(frozen=True)
class InstanceType:
    name: str
    labels: Mapping[str, str]
    # resource -> quantity in canonical Kubernetes form
    capacity: Mapping[str, str]
    offerings: tuple[Offering, ...]

    def requirements(self) -> dict[str, reqs.Requirement]:
        """The type's own requirements: its labels plus zone and capacity type of its offerings."""
        out = reqs.from_labels(self.labels)
        extra = reqs.build([
            reqs.Requirement.new(reqs.ZONE, reqs.IN, {o.zone for o in self.offerings}),
            reqs.Requirement.new(reqs.CAPACITY_TYPE, reqs.IN, {o.capacity_type for o in self.offerings}),
        ])
        for key, req in extra.items():
            out[key] = req if key not in out else req.intersection(out[key])
        return out


@dataclasses.dataclass(frozen=True)
class Catalog:
    types: tuple[InstanceType, ...]
    description: str
    assumptions: tuple[str, ...] = ()


def default() -> Catalog:
    """The embedded AWS us-east-1 catalog (package data)."""
    text = importlib.resources.files("simulation").joinpath("data", DEFAULT_DATA).read_text("utf-8")
    return from_json(json.loads(text))


def from_json(data: Any) -> Catalog:
    """The JSON catalog format: {"region", "source", "instanceTypes": [{name, labels,
    allocatable, onDemandPrice, offerings?}]}. Without explicit offerings, each type is offered
    in zones <region>a/b/c for on-demand and spot."""
    if not isinstance(data, Mapping) or not isinstance(data.get("instanceTypes"), list):
        raise CatalogError("a JSON catalog is an object with an 'instanceTypes' list")
    region = str(data.get("region") or "us-east-1")
    zones = tuple(f"{region}{z}" for z in "abc")
    types = [_json_type(i, entry, region, zones) for i, entry in enumerate(data["instanceTypes"])]
    source = data.get("source")
    description = f"{len(types)} instance types, region {region}"
    if isinstance(source, Mapping):
        description += "; source: " + "; ".join(f"{k}: {v}" for k, v in source.items() if k != "notes")
    assumptions = (
        f"offerings in zones {', '.join(zones)} for {' and '.join(CAPACITY_TYPES)} "
        "(upstream publishes no zone availability)",
        "spot offerings carry the on-demand price as an estimate (upstream publishes no spot prices)",
        f"every type carries label {reqs.REGION}={region}, as the AWS provider's requirements do",
        "types without an upstream on-demand price have unavailable offerings with no price",
    )
    return _checked(Catalog(tuple(types), description, assumptions))


def _json_type(index: int, entry: Any, region: str, zones: Sequence[str]) -> InstanceType:
    where = f"instanceTypes[{index}]"
    if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
        raise CatalogError(f"{where}: an instance type needs a string 'name'")
    name = entry["name"]
    labels = _string_map(entry.get("labels", {}), f"{where} ({name}).labels")
    labels.setdefault(reqs.INSTANCE_TYPE, name)
    # The AWS provider gives every instance type a region requirement; the docs table omits it.
    labels.setdefault(reqs.REGION, region)
    capacity = _capacity(entry.get("allocatable", entry.get("resources", {})), f"{where} ({name})")
    if isinstance(entry.get("offerings"), list):
        offerings = tuple(_offering(o, f"{where} ({name}).offerings[{j}]")
                          for j, o in enumerate(entry["offerings"]))
    else:
        price = _price(entry.get("onDemandPrice"), f"{where} ({name}).onDemandPrice")
        offerings = tuple(
            Offering(zone, ct, price, estimated=(ct != "on-demand" and price is not None),
                     available=price is not None)
            for ct in CAPACITY_TYPES for zone in zones)
    return InstanceType(name, labels, capacity, offerings)


def from_documents(docs: Sequence[Mapping[str, Any]]) -> Catalog:
    """InstanceType documents (karpenter.sh/v1alpha1, the "Instance Type Settings" RFC shape)."""
    types = []
    for i, doc in enumerate(docs):
        meta = doc.get("metadata")
        spec = doc.get("spec")
        if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
            raise CatalogError(f"InstanceType document {i + 1}: metadata.name is required")
        name = meta["name"]
        if not isinstance(spec, Mapping):
            raise CatalogError(f"InstanceType {name}: spec is required")
        labels = _string_map(meta.get("labels", {}) or {}, f"InstanceType {name} metadata.labels")
        labels.setdefault(reqs.INSTANCE_TYPE, name)
        capacity = _capacity(spec.get("resources", {}) or {}, f"InstanceType {name}")
        raw_offerings = spec.get("offerings", []) or []
        if not isinstance(raw_offerings, list):
            raise CatalogError(f"InstanceType {name}: spec.offerings must be a list")
        offerings = tuple(_offering(o, f"InstanceType {name} spec.offerings[{j}]")
                          for j, o in enumerate(raw_offerings))
        types.append(InstanceType(name, labels, capacity, offerings))
    return _checked(Catalog(tuple(types), f"{len(types)} instance types from InstanceType documents"))


def _offering(raw: Any, where: str) -> Offering:
    if not isinstance(raw, Mapping):
        raise CatalogError(f"{where}: an offering is a mapping")
    zone = raw.get(reqs.ZONE, raw.get("zone"))
    ct = raw.get(reqs.CAPACITY_TYPE, raw.get("capacityType"))
    if not isinstance(zone, str) or not isinstance(ct, str):
        raise CatalogError(f"{where}: an offering needs a zone and a capacity type")
    price = _price(raw.get(PRICE_LABEL, raw.get("price")), f"{where} price")
    available = raw.get("available", True)
    return Offering(zone, ct, price, bool(raw.get("estimated", False)), bool(available))


def _price(raw: Any, where: str) -> float | None:
    if raw is None:
        return None
    try:
        value = float(raw) if not isinstance(raw, bool) else math.nan
    except (TypeError, ValueError):
        raise CatalogError(f"{where}: {raw!r} is not a price") from None
    if not math.isfinite(value) or value < 0:
        raise CatalogError(f"{where}: {raw!r} is not a finite, non-negative price")
    return value


def _string_map(raw: Any, where: str) -> dict[str, str]:
    if not isinstance(raw, Mapping):
        raise CatalogError(f"{where}: expected a mapping of strings")
    out = {}
    for k, v in raw.items():
        if not isinstance(k, str) or isinstance(v, (dict, list)) or v is None:
            raise CatalogError(f"{where}: {k!r} must map to a string")
        out[k] = v if isinstance(v, str) else json.dumps(v)
    return out


def _capacity(raw: Any, where: str) -> dict[str, str]:
    if not isinstance(raw, Mapping):
        raise CatalogError(f"{where}: resources must be a mapping")
    out = {}
    for k, v in raw.items():
        try:
            out[str(k)] = quantity.normalize(v if isinstance(v, (str, int)) else str(v))
        except quantity.QuantityError as err:
            raise CatalogError(f"{where}: resource {k}: {err}") from None
    return out


def _checked(catalog: Catalog) -> Catalog:
    seen: set[str] = set()
    for t in catalog.types:
        if t.name in seen:
            raise CatalogError(f"instance type {t.name} is listed twice")
        seen.add(t.name)
    return catalog
