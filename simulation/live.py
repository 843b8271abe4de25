"""The live catalog: the cells Karpenter's cloud provider publishes (sources/karpenter.py reads them), made a
catalog, with base prices recovered from the effective prices it publishes.

Karpenter's AWS provider publishes prices from the overlay-decorated cloud provider, looping over the NodePools it
lists: a cell's price is the effective price of the last NodePool offering it. Where the overlay in effect there is
an adjustment that can be undone (effects.unadjusted), the base is recovered; where no overlay is in effect, the
published price is the base; otherwise the embedded base is kept, estimated.
A published price is never taken as a base with an overlay on it, so no overlay is applied twice.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from simulation import evaluate as ev
from simulation.analysis import effects
from simulation.semantics import catalog as cat
from simulation.semantics import quantity
from simulation.semantics import requirements as reqs

INSTANCE_TYPE = reqs.INSTANCE_TYPE
RESERVED = "reserved"
# Labels of one Node, never of its instance type: dropped from what the Nodes of a type share.
_NODE_KEYS = frozenset({"kubernetes.io/hostname", reqs.ZONE, reqs.CAPACITY_TYPE, reqs.NODEPOOL,
                        "failure-domain.beta.kubernetes.io/zone", "topology.k8s.aws/zone-id",
                        "karpenter.sh/initialized", "karpenter.sh/registered", "karpenter.k8s.aws/ec2nodeclass",
                        "node.kubernetes.io/exclude-from-external-load-balancers"})


@dataclasses.dataclass(frozen=True)
class Cell:
    """One offering as Karpenter publishes it; `price` is effective (after overlays), None where unusable."""

    instance_type: str
    capacity_type: str
    zone: str
    available: bool
    price: float | None


@dataclasses.dataclass(frozen=True)
class NodeType:
    """What the cluster's Nodes say of one instance type Karpenter launched."""

    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, str]


@dataclasses.dataclass(frozen=True)
class Live:
    catalog: cat.Catalog
    notes: tuple[str, ...]


def build(cells: Sequence[Cell], embedded: cat.Catalog, nodes: Sequence[NodeType] = ()) -> Live:
    """The catalog of these cells, each offering priced with the embedded base (estimated) until `recover`.
    Labels and resources: the embedded table where the cluster is on the same cloud and it knows the type, else
    the Nodes of that type, else the metrics' own (type, zone, capacity type) and no resources."""
    notes: list[str] = []
    # The AWS provider publishes an unavailable reserved cell at price 0 in every zone it has no reservation in:
    # a placeholder, not an offering Karpenter's instance types hold.
    kept = [c for c in cells if not (c.capacity_type == RESERVED and not c.available and c.price == 0)]
    if len(kept) < len(cells):
        notes.append(f"{len(cells) - len(kept)} unavailable reserved cell(s) at price 0 are the provider's "
                     "placeholders for zones without a reservation: left out")
    zones = sorted({c.zone for c in kept})
    regions = {cat.zone_region(z) for z in zones}
    region = regions.pop() if len(regions) == 1 else None
    node_by_name = {n.name: n for n in nodes}
    provider = cat.provider_of(k for n in nodes for k in n.labels) or _shaped(zones)
    known = {t.name: t for t in embedded.types} if provider and provider == embedded.provider else {}
    by_type: dict[str, list[Cell]] = {}
    for c in kept:
        by_type.setdefault(c.instance_type, []).append(c)
    types: list[cat.InstanceType] = []
    unsized: list[str] = []
    for name, offered in sorted(by_type.items()):
        table = known.get(name)
        node = node_by_name.get(name)
        labels, capacity = _described(name, table, node, region)
        if not capacity:
            unsized.append(name)
        base = {o.capacity_type: o.price for o in table.offerings} if table else {}
        types.append(cat.InstanceType(name, labels, capacity, tuple(
            cat.Offering(c.zone, c.capacity_type, base.get(c.capacity_type), estimated=True, available=c.available,
                         origin="embedded")
            for c in offered)))
    if not types:
        raise cat.CatalogError("Karpenter's metrics name no usable offering: the catalog would be empty")
    idle = sum(1 for t in types if not any(o.available for o in t.offerings))
    if idle:
        notes.append(f"{idle} instance type(s) have no available offering in Karpenter's metrics")
    from_nodes = sum(1 for t in types if t.name not in known and t.name in node_by_name)
    bare = len(types) - sum(1 for t in types if t.name in known) - from_nodes
    if bare:
        notes.append(f"{bare} instance type(s) unknown to the {embedded.label} and to the cluster's Nodes carry "
                     "only the labels the metrics give (type, zone, capacity type)")
    if unsized:
        notes.append(f"{len(unsized)} instance type(s) have no known resources (e.g. {unsized[0]}): capacity "
                     "overlays on them cannot be judged")
    catalog = cat.Catalog(tuple(types), f"{len(types)} instance types from Karpenter's metrics",
                          tuple(notes), provider, region, zones=tuple(zones), source="Karpenter's metrics")
    return Live(catalog, tuple(notes))


def _shaped(zones: Sequence[str]) -> str:
    """The cloud whose zone naming every zone follows (AWS first: its zones match no other's pattern)."""
    for provider in ("AWS", "GCP", "Azure"):
        if zones and all(cat.zone_region(z, provider) for z in zones):
            return provider
    return ""


def _described(name: str, table: cat.InstanceType | None, node: NodeType | None,
               region: str | None) -> tuple[dict[str, str], dict[str, str]]:
    if table is not None:
        labels = dict(table.labels)
        if region and reqs.REGION in labels:
            labels[reqs.REGION] = region
    elif node is not None:
        labels = {k: v for k, v in node.labels.items() if k not in _NODE_KEYS}
    else:
        labels = {INSTANCE_TYPE: name, **({reqs.REGION: region} if region else {})}
    labels[INSTANCE_TYPE] = name
    if table is not None:
        return labels, dict(table.capacity)
    capacity = {}
    for resource, value in (node.allocatable if node is not None else {}).items():
        try:
            capacity[resource] = quantity.normalize(value)
        except quantity.QuantityError:
            continue
    return labels, capacity


@dataclasses.dataclass(frozen=True)
class Recovered:
    catalog: cat.Catalog
    # origin -> how many offerings' base prices came that way (catalog.PRICE_ORIGINS)
    counts: Mapping[str, int]
    notes: tuple[str, ...]


def recover(live: cat.Catalog, cells: Sequence[Cell], documents: Sequence[ev.Document] | None) -> Recovered:
    """Base prices for the live catalog from the published (effective) ones. `documents`: the NodeOverlays and
    NodePools in effect in the cluster; None where they are unknown, when a published price is kept as the base
    but marked estimated (an overlay on it would otherwise be applied twice unseen).

    Which NodePool's price Karpenter published for a cell cannot be told: its metrics controller keeps the last
    NodePool of a list read from its informer cache, whose order is a Go map's. So a base is recovered only where
    every NodePool's price change on that offering undoes to the same base (none in effect: the published price)."""
    published = {(c.instance_type, c.capacity_type, c.zone): c.price for c in cells}
    changes = _price_changes(live, documents) if documents is not None else {}
    counts = dict.fromkeys(cat.PRICE_ORIGINS, 0)
    ambiguous = 0
    types = []
    for t in live.types:
        offerings = []
        for slot, o in enumerate(t.offerings):
            price = published.get((t.name, o.capacity_type, o.zone))
            found = changes.get((t.name, slot), frozenset({None}))
            bases: set[float | None] = {None} if price is None else {
                price if change is None else effects.unadjusted(price, change) for change in found}
            base = _one_base(bases)
            if base is None:
                new = o
                ambiguous += len(found) > 1 and None not in bases
            elif found == {None}:
                new = dataclasses.replace(o, price=base, estimated=documents is None, origin="published")
            else:
                new = dataclasses.replace(o, price=base, estimated=False, origin="recovered")
            counts[new.origin] += 1
            offerings.append(new)
        types.append(dataclasses.replace(t, offerings=tuple(offerings)))
    notes = [f"base prices: {counts['published']} published with no overlay in effect, {counts['recovered']} "
             f"recovered by undoing the overlay in effect, {counts['embedded']} the embedded base (estimated)"]
    if ambiguous:
        notes.append(f"{ambiguous} offering(s) have NodePools whose price overlays differ there: which one Karpenter "
                     "published cannot be told, so their base is the embedded one (estimated)")
    if documents is None:
        notes.append("the overlays in effect are unknown (no --cluster or PATH): published prices are taken as "
                     "base prices and marked estimated; an overlay that sets a price would count twice")
    return Recovered(dataclasses.replace(live, types=tuple(types)), counts, tuple(notes))


def _one_base(bases: set[float | None]) -> float | None:
    """The base all candidates agree on (floats within a relative 1e-9), else None."""
    if None in bases:
        return None
    found = sorted(b for b in bases if b is not None)
    return found[0] if found and math.isclose(found[0], found[-1], rel_tol=1e-9, abs_tol=1e-12) else None


def _price_changes(live: cat.Catalog, documents: Sequence[ev.Document]) -> dict[tuple[str, int], frozenset[str | None]]:
    """(type, offering slot) -> the price changes in effect there across the NodePools (None: none in effect), for
    the slots some overlay prices (the implicit NodePool stands in where there are none)."""
    report = ev.evaluate(documents, ev.prepare([], live))
    pools = [p.name for p in report.grid.pools]
    seen: dict[tuple[str, int], set[str | None]] = {}
    for cell in effects.effects(report, pools=pools):
        for slot, offering in enumerate(cell.offerings):
            name = offering.get("priceOverlay")
            seen.setdefault((cell.instance_type, slot), set()).add(
                report.entries[name].overlay.price_update if name else None)
    return {key: frozenset(found) for key, found in seen.items() if found != {None}}
