"""Which region a run speaks of, and the zones it has: from `--region`, else from what the inputs name (zone
and region requirements and labels of NodePools and overlays), else the catalog's own. The catalog's offerings
are then laid out in that region (catalog.in_region). Both front ends ask `choose`, so a pipeline step and the
webhook judge one set of objects in one region."""

from __future__ import annotations

import collections
import dataclasses
import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from simulation.semantics import catalog as cat
from simulation.semantics import model
from simulation.semantics import requirements as reqs


@dataclasses.dataclass(frozen=True)
class Named:
    """Zones and regions the inputs name, NodePools' (the cluster's own) apart from overlays'."""

    pool_regions: tuple[str, ...] = ()
    overlay_regions: tuple[str, ...] = ()
    # Only NodePools' and Nodes' zones add zones: an overlay's zone selects among them (its region still counts).
    pool_zones: tuple[str, ...] = ()

    def regions(self) -> list[str]:
        """Every region named, most named first (NodePools count before overlays), then by name."""
        counts = collections.Counter(self.pool_regions)
        ranked = sorted(counts, key=lambda r: (-counts[r], r))
        later = collections.Counter(r for r in self.overlay_regions if r not in counts)
        return ranked + sorted(later, key=lambda r: (-later[r], r))


def named(objects: Iterable[Mapping[str, Any]], provider: str = "") -> Named:
    """Zones and regions in NodePools' template labels and requirements and overlays' requirements (values of
    `In`; NotIn names a place to avoid, not the one the cluster is in)."""
    pool_regions: list[str] = []
    overlay_regions: list[str] = []
    pool_zones: list[str] = []
    zones: list[str] | None
    for obj in objects:
        kind = model.kind_of(obj)
        if kind == model.NODEPOOL:
            pool = model.nodepool(obj)
            pairs = [*pool.labels.items(),
                     *((r.key, v) for r in pool.requirements if r.operator == reqs.IN for v in r.values)]
            sink, zones = pool_regions, pool_zones
        elif kind == model.NODEOVERLAY:
            pairs = [(r.key, v) for r in model.overlay_requirements(obj, reqs.IN) for v in r.values]
            sink, zones = overlay_regions, None
        else:
            continue
        for key, value in pairs:
            key = reqs.NORMALIZED_LABELS.get(key, key)
            # Only names shaped as the provider's count: `region In [test]` names no region.
            # Another cloud's names count where their shape is that cloud's alone (cat.zone_place).
            if key == reqs.REGION and cat.region_cloud(value, provider) is not None:
                sink.append(value)
            elif key == reqs.ZONE and (place := cat.zone_place(value, provider)) is not None:
                region = place[1]
                if zones is not None:
                    zones.append(value)
                sink.append(region)
    return Named(tuple(pool_regions), tuple(overlay_regions), tuple(pool_zones))


def from_labels(labels: Iterable[Mapping[str, Any]]) -> Named:
    """Where Nodes with these labels are: their region and zone labels count as the cluster's own."""
    regions: list[str] = []
    zones: list[str] = []
    for node in labels:
        zone, where = node.get(reqs.ZONE), node.get(reqs.REGION)
        if isinstance(zone, str):
            zones.append(zone)
        if isinstance(where, str):
            regions.append(where)
        elif isinstance(zone, str) and (guessed := cat.zone_region(zone)) is not None:
            regions.append(guessed)
    return Named(tuple(regions), (), tuple(zones))


@dataclasses.dataclass(frozen=True)
class Choice:
    """The catalog laid out in the chosen region, and the notes that say why there."""

    catalog: cat.Catalog
    notes: tuple[str, ...]


class RegionError(ValueError):
    """`--region` that the catalog cannot be laid out in; the message says why."""


# The regions of the clouds whose names a typo must not pass as a place (AWS's public, GovCloud, China, isolated and
# sovereign partitions as of 2026). A run would otherwise lay the catalog out in made-up zones, where every zone
# requirement becomes a `no-match` warning and a real conflict exits 0. A catalog that names the region defines it.
KNOWN_REGIONS: Mapping[str, frozenset[str]] = {"AWS": frozenset({
    "us-east-1", "us-east-2", "us-west-1", "us-west-2", "af-south-1", "ap-east-1", "ap-east-2", "ap-south-1",
    "ap-south-2", "ap-southeast-1", "ap-southeast-2", "ap-southeast-3", "ap-southeast-4", "ap-southeast-5",
    "ap-southeast-6", "ap-southeast-7", "ap-northeast-1", "ap-northeast-2", "ap-northeast-3", "ca-central-1",
    "ca-west-1", "eu-central-1", "eu-central-2", "eu-west-1", "eu-west-2", "eu-west-3", "eu-south-1", "eu-south-2",
    "eu-north-1", "il-central-1", "me-south-1", "me-central-1", "mx-central-1", "sa-east-1", "us-gov-east-1",
    "us-gov-west-1", "cn-north-1", "cn-northwest-1", "us-iso-east-1", "us-iso-west-1", "us-isob-east-1",
    "us-isof-south-1", "us-isof-east-1", "eu-isoe-west-1", "eusc-de-east-1"})}


def check_known(explicit: str, catalog: cat.Catalog) -> None:
    """`--region` must be one of the catalog's provider's regions, unless the catalog itself is laid out there
    (a `--catalog` of a region this list lacks). Raises RegionError naming the nearest real ones."""
    # A name shaped as another cloud's region (westeurope under the AWS catalog) is checked against that cloud's.
    cloud = cat.region_cloud(explicit, catalog.provider) or catalog.provider
    known = KNOWN_REGIONS.get(cloud)
    if known is None or explicit in known or explicit == catalog.region \
            or any(cat.zone_region(z, catalog.provider) == explicit for z in catalog.zones):
        return
    near = difflib.get_close_matches(explicit, sorted(known), n=3)
    hint = f" (did you mean {' or '.join(near)}?)" if near else ""
    raise RegionError(f"--region {explicit}: {cloud} has no region of that name{hint}; a --catalog laid "
                      "out in that region defines it")


def choose(catalog: cat.Catalog, objects: Sequence[Mapping[str, Any]], explicit: str | None = None,
           cluster: Named | None = None) -> Choice:
    """The catalog in the region of the run: `explicit` (--region), else the cluster's (its Nodes), else the one
    the objects name, else the catalog's own (said in a note). Zones: the region's usual ones and those the
    NodePools (or Nodes) name there (_zones)."""
    seen = named(objects, catalog.provider)
    if cluster is not None:
        seen = Named(cluster.pool_regions + seen.pool_regions, seen.overlay_regions,
                     cluster.pool_zones + seen.pool_zones)
    ranked = seen.regions()
    notes: list[str] = []
    if explicit is not None:
        check_known(explicit, catalog)
        region, why = explicit, "--region"
    elif ranked:
        region = ranked[0]
        why = "the region the cluster's Nodes are in" if cluster and cluster.pool_regions else \
            "the region the inputs name"
    else:
        region, why = catalog.region or "", ""
    others = [r for r in ranked if r != region]
    if others:
        notes.append(f"inputs also name region(s) {', '.join(others)}; checking in {region} ({why}); "
                     "use --region to choose")
    if not catalog.regional:
        if explicit is not None and catalog.region and explicit != catalog.region:
            raise RegionError(f"--region {explicit}: the catalog ({catalog.label}) lists its own offerings "
                              f"in {catalog.region}; give a catalog of {explicit}")
        if ranked and catalog.region and region != catalog.region:
            notes.append(f"inputs name region {region}, but the catalog ({catalog.label}) lists offerings in "
                         f"{catalog.region} only")
        return Choice(catalog, tuple(notes))
    zones = _zones(seen, region, catalog)
    chosen = cat.in_region(catalog, region, zones) if region else catalog
    if not why:
        notes.append(f"region {catalog.region}, zones {', '.join(chosen.zones)}, as in the {catalog.label}: "
                     "no input names a region or zone (--region chooses)")
    elif region != catalog.region:
        notes.append(f"region {region} ({why}), zones {', '.join(chosen.zones)}; prices are "
                     f"{catalog.region}'s, marked estimated (~), as Karpenter itself starts before it reads "
                     "the region's prices")
    return Choice(chosen, tuple(notes))


def _zones(seen: Named, region: str, catalog: cat.Catalog) -> tuple[str, ...]:
    """The region's usual zones (the catalog's, in its own region) and the zones of the region the NodePools (or
    Nodes) name: more zones than the cluster has only add witnesses, fewer would hide a conflict. An overlay's
    zone selects among them; it says nothing of where the cluster launches."""
    places = {z: cat.zone_place(z, catalog.provider) for z in seen.pool_zones}
    named = [z for z, place in places.items() if place is not None and place[1] == region]
    # The usual zones are named as the cloud of the zones the NodePools name there (OCI's us-ashburn-1 is shaped
    # as an AWS region), else as the region's name is shaped.
    clouds = {place[0] for z in named if (place := places[z]) is not None}
    cloud = clouds.pop() if len(clouds) == 1 else catalog.provider
    usual = catalog.zones if region == catalog.region else cat.usual_zones(cloud, region)
    return tuple(sorted({*usual, *named}))
