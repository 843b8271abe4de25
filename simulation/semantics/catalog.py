"""The instance-type catalog: what every NodePool can launch, with offerings and base prices."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from simulation import packagedata
from simulation.semantics import quantity
from simulation.semantics import requirements as reqs

DEFAULT_DATA = "aws-us-east-1-instance-types.json"
CAPACITY_TYPES = ("on-demand", "spot")
PRICE_LABEL = "karpenter.sh/price"
# A live catalog's prices (simulation/live.py): published by Karpenter with no overlay in effect, recovered by
# inverting the overlay in effect, or the embedded base kept (estimated) where neither can be told.
PRICE_ORIGINS = ("published", "recovered", "embedded")


class CatalogError(ValueError):
    """A catalog that cannot be used; the message names the offending entry."""


@dataclasses.dataclass(frozen=True)
class Offering:
    """One zone and capacity type an instance type is offered in, and its price."""

    zone: str
    capacity_type: str
    price: float | None
    # True where the price was not read from the data (e.g. spot, which upstream does not publish).
    estimated: bool = False
    available: bool = True
    # Where a live catalog's price comes from (PRICE_ORIGINS); "" for a catalog read from data.
    origin: str = ""


@dataclasses.dataclass(frozen=True)
class InstanceType:
    """One instance type of a catalog: labels, capacity and offerings."""

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


# Zone and region names of the clouds Karpenter runs on (a zone, then the region it belongs to):
#   AWS   us-east-1a, us-gov-west-1b, us-east-1-bos-1a (Local Zones)  -> us-east-1
#   GCP   us-central1-a                                               -> us-central1
#   Azure westeurope-1 (AKS zone labels are <region>-<n>)             -> westeurope
#   OCI   US-ASHBURN-AD-1, CA-TORONTO-1-AD-1 (availability domains; OKE's zone labels drop the tenancy prefix
#         `Uocm:`, which no label value can hold)
#                                                                     -> us-ashburn-1, ca-toronto-1
@dataclasses.dataclass(frozen=True)
class _Naming:
    """How a cloud names its zones and regions."""

    zone: re.Pattern[str]
    region: re.Pattern[str]
    # Zone names from a region's: the region's usual zones where nothing names them.
    zones: Callable[[str], tuple[str, ...]]
    # The names are this cloud's alone, so they place a zone even under a catalog of another cloud. Azure's
    # `<word>-<n>` is not (`zone-1` is a test fixture's): only its published region names count there.
    distinct: bool = True

    def region_of(self, found: re.Match[str]) -> str:
        return found.group(1)


class _OciNaming(_Naming):
    def region_of(self, found: re.Match[str]) -> str:
        # Availability domains of the first regions omit the region's number: US-ASHBURN-AD-1 is us-ashburn-1's.
        name = found.group(1).lower()
        return name if name[-1].isdigit() else f"{name}-1"


# Azure's public regions (az account list-locations): where a catalog of another cloud meets `<region>-<n>`,
# only these are taken for Azure zones.
_AZURE_REGIONS = frozenset({
    "australiacentral", "australiacentral2", "australiaeast", "australiasoutheast", "austriaeast", "belgiumcentral",
    "brazilsouth", "brazilsoutheast", "canadacentral", "canadaeast", "centralindia", "centralus", "chilecentral",
    "denmarkeast", "eastasia", "eastus", "eastus2", "francecentral", "francesouth", "germanynorth",
    "germanywestcentral", "indonesiacentral", "israelcentral", "italynorth", "japaneast", "japanwest",
    "jioindiacentral", "jioindiawest", "koreacentral", "koreasouth", "malaysiawest", "mexicocentral",
    "newzealandnorth", "northcentralus", "northeurope", "norwayeast", "norwaywest", "polandcentral", "qatarcentral",
    "southafricanorth", "southafricawest", "southcentralus", "southeastasia", "southindia", "spaincentral",
    "swedencentral", "swedensouth", "switzerlandnorth", "switzerlandwest", "uaecentral", "uaenorth", "uksouth",
    "ukwest", "westcentralus", "westeurope", "westindia", "westus", "westus2", "westus3",
})

_NAMING: Mapping[str, _Naming] = {
    "AWS": _Naming(re.compile(r"([a-z]{2}(?:-[a-z]+)+-\d+)(?:-[a-z]+-\d+)?[a-z]"),
                   re.compile(r"[a-z]{2}(?:-[a-z]+)+-\d+"), lambda r: (f"{r}a", f"{r}b", f"{r}c")),
    "GCP": _Naming(re.compile(r"([a-z]+-[a-z]+\d+)-[a-z]"), re.compile(r"[a-z]+-[a-z]+\d+"),
                   lambda r: (f"{r}-a", f"{r}-b", f"{r}-c")),
    "Azure": _Naming(re.compile(r"([a-z][a-z0-9]+)-\d"), re.compile(r"[a-z][a-z0-9]+"),
                     lambda r: (f"{r}-1", f"{r}-2", f"{r}-3"), distinct=False),
    # OCI's region names are shaped as AWS's (us-ashburn-1): only its availability domains tell it apart.
    "OCI": _OciNaming(re.compile(r"([A-Z]{2}(?:-[A-Z]+)+(?:-\d+)?)-AD-\d"),
                      re.compile(r"[a-z]{2}(?:-[a-z]+)+-\d+"),
                      lambda r: tuple(f"{r.upper()}-AD-{n}" for n in (1, 2, 3))),
}


def _clouds(provider: str) -> list[str]:
    """The clouds whose names to try: the provider's first."""
    return sorted(_NAMING, key=lambda name: name != provider)


def _takes(name: str, provider: str, region: str) -> bool:
    """Whether `name`'s naming may place a region under a catalog of `provider`."""
    return provider in ("", name) or _NAMING[name].distinct or region in _AZURE_REGIONS


def zone_place(zone: str, provider: str = "") -> tuple[str, str] | None:
    """The cloud and region a zone belongs to: by the provider's naming, else by another cloud's that is its
    alone (a catalog of AWS still hears that `westeurope-1` is Azure's)."""
    for name in _clouds(provider):
        found = _NAMING[name].zone.fullmatch(zone)
        if found and _takes(name, provider, region := _NAMING[name].region_of(found)):
            return name, region
    return None


def zone_region(zone: str, provider: str = "") -> str | None:
    """The region a zone belongs to, where its cloud's naming (the provider's, else any) says so."""
    for name in _clouds(provider):
        found = _NAMING[name].zone.fullmatch(zone) if provider in ("", name) else None
        if found:
            return _NAMING[name].region_of(found)
    return None


def region_cloud(region: str, provider: str = "") -> str | None:
    """The cloud whose region names `region` is shaped as: the provider's first."""
    return next((name for name in _clouds(provider)
                 if _NAMING[name].region.fullmatch(region) and _takes(name, provider, region)), None)


def is_region(name: str, provider: str = "") -> bool:
    """Whether `name` is shaped as a region of the provider (of any cloud where the provider is unknown)."""
    return any(n.region.fullmatch(name) for p, n in _NAMING.items() if provider in ("", p))


# Label domains of Karpenter's cloud providers: a key in one names the cloud a catalog (or an overlay) is for.
PROVIDER_DOMAINS: Mapping[str, str] = {
    "karpenter.k8s.aws": "AWS", "karpenter.azure.com": "Azure", "karpenter.k8s.gcp": "GCP",
    "karpenter.k8s.oracle": "OCI",
}
@dataclasses.dataclass(frozen=True)
class Catalog:
    """The instance types Karpenter chooses from, and where their figures come from."""

    types: tuple[InstanceType, ...]
    description: str
    assumptions: tuple[str, ...] = ()
    provider: str = ""
    region: str | None = None
    # The offerings were laid out by the catalog format (every type in every zone), not listed one by one:
    # the catalog can be laid out again in another region (in_region).
    regional: bool = False
    zones: tuple[str, ...] = ()
    # Where the figures come from, one line.
    source: str = ""
    # The region whose prices these are, where they were moved to another region (all marked estimated).
    priced_in: str | None = None
    # How a live catalog was captured (what, where, when), as written to and read from the JSON format.
    captured: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        """Names the catalog in findings: provider, region and source."""
        where = " ".join(p for p in (self.provider or "unknown provider", self.region or "") if p)
        return f"{where} catalog ({self.source or self.description})"


def provider_of(keys: Iterable[str]) -> str:
    """The cloud whose provider defines these label keys; "" where none does."""
    counts: dict[str, int] = {}
    for key in keys:
        provider = PROVIDER_DOMAINS.get(key.partition("/")[0]) if "/" in key else None
        if provider:
            counts[provider] = counts.get(provider, 0) + 1
    return max(sorted(counts), key=lambda p: counts[p]) if counts else ""


def usual_zones(provider: str, region: str) -> tuple[str, ...]:
    """The zones a region usually has, where nothing names them, in the naming of the cloud the region's name is
    shaped as (the provider's first): us-east-1a, us-central1-a, westeurope-1, US-ASHBURN-1-AD-1."""
    return _NAMING.get(region_cloud(region, provider) or provider, _NAMING["AWS"]).zones(region)


def in_region(catalog: Catalog, region: str, zones: Sequence[str]) -> Catalog:
    """A regional catalog laid out in `region` with `zones`: the same types and base prices, offered there.
    Prices of another region are Karpenter's own starting point (the AWS provider starts every region on
    us-east-1's table), so they are kept and marked estimated."""
    if not catalog.regional or (region == catalog.region and tuple(zones) == catalog.zones):
        return catalog
    moved = region != (catalog.priced_in or catalog.region)
    types = []
    for t in catalog.types:
        labels = {**t.labels, reqs.REGION: region} if reqs.REGION in t.labels else dict(t.labels)
        by_type = {o.capacity_type: o for o in t.offerings}
        offerings = tuple(dataclasses.replace(o, zone=zone, estimated=o.estimated or (moved and o.price is not None))
                          for o in by_type.values() for zone in zones)
        types.append(InstanceType(t.name, labels, t.capacity, offerings))
    priced_in = catalog.priced_in or catalog.region
    return dataclasses.replace(
        catalog, types=tuple(types), region=region, zones=tuple(zones),
        priced_in=priced_in if moved else None,
        description=f"{len(types)} instance types, region {region}"
                    + (f" (prices of {priced_in}, estimated)" if moved else ""),
        assumptions=(*catalog.assumptions,
                     *((f"prices are {priced_in}'s, as Karpenter starts in a region before it reads that "
                        "region's prices: every one is marked estimated",) if moved else ())))


def default() -> Catalog:
    """The embedded AWS us-east-1 catalog (package data). Its quantities are stored in canonical form and its
    labels as strings (tests/test_catalog.py): they are taken as they are, as normalising 7,040 quantities took a
    one-file check a fifth of a second, and checking 23,000 labels a twentieth."""
    catalog = from_json(json.loads(packagedata.text(DEFAULT_DATA)), canonical=True)
    return dataclasses.replace(catalog, source=f"embedded default, {catalog.source}")


def from_json(data: Any, *, canonical: bool = False) -> Catalog:
    """The JSON catalog format: {"region", "source", "instanceTypes": [{name, labels,
    allocatable, onDemandPrice, offerings?}], "provider"?}. Without explicit offerings, each type is offered
    in the region's usual zones (usual_zones: <region>a/b/c on AWS) for on-demand and spot. `canonical`: every
    quantity is a string already in Kubernetes' canonical form and every label value a string (the embedded data,
    which tests/test_catalog.py reads both ways)."""
    if not isinstance(data, Mapping) or not isinstance(data.get("instanceTypes"), list):
        raise CatalogError("a JSON catalog is an object with an 'instanceTypes' list")
    region = str(data.get("region") or "us-east-1")
    provider = data.get("provider")
    if not isinstance(provider, str):
        provider = provider_of(k for e in data["instanceTypes"][:50] if isinstance(e, Mapping)
                               and isinstance(e.get("labels"), Mapping) for k in e["labels"])
    zones = usual_zones(provider, region)
    # Offerings laid out in the usual zones differ by price alone: types of one price share them (the embedded
    # catalog's 1,363 types have 1,029 prices). Keyed by the price's hex, which tells -0.0 from 0.0.
    laid_out: dict[str | None, tuple[Offering, ...]] = {}
    types = [_json_type(i, entry, region, zones, canonical, laid_out) for i, entry in enumerate(data["instanceTypes"])]
    source = data.get("source")
    description = f"{len(types)} instance types, region {region}"
    if isinstance(source, Mapping):
        description += "; source: " + "; ".join(f"{k}: {v}" for k, v in source.items() if k != "notes")
    short = f"{len(types)} instance types" + (
        f", {str(source['instanceTypes']).split(' ')[0]}"
        if isinstance(source, Mapping) and source.get("instanceTypes") else "")
    regional = not any(isinstance(e, Mapping) and isinstance(e.get("offerings"), list)
                       for e in data["instanceTypes"])
    assumptions: tuple[str, ...] = (
        f"offerings in zones {', '.join(zones)} for {' and '.join(CAPACITY_TYPES)} "
        "(upstream publishes no zone availability)",
        "spot offerings carry the on-demand price as an estimate (upstream publishes no spot prices)",
        f"every type carries label {reqs.REGION}={region}, as the AWS provider's requirements do",
        "types without an upstream on-demand price have unavailable offerings with no price",
    )
    captured = _captured(data.get("capture"))
    if captured:
        description += "; captured: " + ", ".join(f"{k} {v}" for k, v in captured)
        fields = dict(captured)
        short = f"{len(types)} instance types from Karpenter's metrics at {fields.get('where', '?')}, " \
                f"captured {fields.get('at', '?')}"
        assumptions = tuple(str(n) for n in data.get("assumptions") or () if isinstance(n, str))
    return _checked(Catalog(tuple(types), description, assumptions, provider, region, regional,
                            zones if regional else (), short, captured=captured))


def _captured(raw: Any) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise CatalogError("'capture' must be a mapping")
    return tuple((str(k), str(v)) for k, v in raw.items())


def _json_type(index: int, entry: Any, region: str, zones: Sequence[str], canonical: bool,
               laid_out: dict[str | None, tuple[Offering, ...]]) -> InstanceType:
    where = f"instanceTypes[{index}]"
    if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
        raise CatalogError(f"{where}: an instance type needs a string 'name'")
    name = entry["name"]
    raw_labels = entry.get("labels", {})
    labels = dict(raw_labels) if canonical and isinstance(raw_labels, dict) else \
        _string_map(raw_labels, f"{where} ({name}).labels")
    labels.setdefault(reqs.INSTANCE_TYPE, name)
    # The AWS provider gives every instance type a region requirement; the docs table omits it.
    labels.setdefault(reqs.REGION, region)
    raw_capacity = entry.get("allocatable", entry.get("resources", {}))
    capacity = (dict(raw_capacity) if canonical and isinstance(raw_capacity, Mapping)
                else _capacity(raw_capacity, f"{where} ({name})"))
    if isinstance(entry.get("offerings"), list):
        offerings = tuple(_offering(o, f"{where} ({name}).offerings[{j}]")
                          for j, o in enumerate(entry["offerings"]))
    else:
        price = _price(entry.get("onDemandPrice"), f"{where} ({name}).onDemandPrice")
        key = None if price is None else price.hex()
        offerings = laid_out.get(key, ())
        if not offerings:
            offerings = laid_out[key] = tuple(
                Offering(zone, ct, price, estimated=(ct != "on-demand" and price is not None),
                         available=price is not None)
                for ct in CAPACITY_TYPES for zone in zones)
    return InstanceType(name, labels, capacity, offerings)


def to_json(catalog: Catalog) -> dict[str, Any]:
    """The JSON catalog format with every offering listed: what from_json reads back as the same catalog."""
    out: dict[str, Any] = {
        "region": catalog.region, "provider": catalog.provider,
        "source": {"catalog": catalog.label, "notes": "; ".join(catalog.assumptions)},
        "instanceTypes": [
            {"name": t.name, "labels": dict(t.labels), "allocatable": dict(t.capacity),
             "offerings": [{"zone": o.zone, "capacityType": o.capacity_type, "price": o.price,
                            "available": o.available, "estimated": o.estimated,
                            **({"priceOrigin": o.origin} if o.origin else {})} for o in t.offerings]}
            for t in catalog.types],
    }
    if catalog.captured:
        out["capture"] = dict(catalog.captured)
        out["assumptions"] = list(catalog.assumptions)
    return out


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
    regions = {t.labels.get(reqs.REGION) for t in types} - {None}
    zones = tuple(sorted({o.zone for t in types for o in t.offerings}))
    return _checked(Catalog(tuple(types), f"{len(types)} instance types from InstanceType documents",
                            provider=provider_of(k for t in types for k in t.labels),
                            region=_one(regions or {zone_region(z) for z in zones}), zones=zones,
                            source=f"{len(types)} InstanceType documents"))


def _one(values: Iterable[str | None]) -> str | None:
    found = set(values)
    return found.pop() if len(found) == 1 else None


def _offering(raw: Any, where: str) -> Offering:
    if not isinstance(raw, Mapping):
        raise CatalogError(f"{where}: an offering is a mapping")
    zone = raw.get(reqs.ZONE, raw.get("zone"))
    ct = raw.get(reqs.CAPACITY_TYPE, raw.get("capacityType"))
    if not isinstance(zone, str) or not isinstance(ct, str):
        raise CatalogError(f"{where}: an offering needs a zone and a capacity type")
    price = _price(raw.get(PRICE_LABEL, raw.get("price")), f"{where} price")
    available = raw.get("available", True)
    origin = raw.get("priceOrigin", "")
    if origin not in ("", *PRICE_ORIGINS):
        raise CatalogError(f"{where}: priceOrigin {origin!r} is not one of {', '.join(PRICE_ORIGINS)}")
    return Offering(zone, ct, price, bool(raw.get("estimated", False)), bool(available), origin)


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
