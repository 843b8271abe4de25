"""The live catalog: the cells Karpenter's cloud provider publishes (sources/karpenter.py reads them), made a
catalog, with base prices recovered from the effective prices it publishes.

Karpenter's AWS provider publishes prices from the overlay-decorated cloud provider, looping over the NodePools it
lists: a cell's price is the effective price of the last NodePool offering it. Where the overlay in effect there is
an adjustment that can be undone (effects.unadjusted), the base is recovered; where no overlay is in effect, the
published price is the base; otherwise the embedded base is kept, estimated.
A published price is never taken as a base with an overlay on it, so no overlay is applied twice. Where the guard
cannot be sure which overlay is in effect on an offering (a type it cannot place, an overlay whose verdict turns on
the CRD, an overlay changed since Karpenter last published), the embedded base is kept, estimated.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Mapping, Sequence
from typing import Any

from simulation import evaluate as ev
from simulation.analysis import effects
from simulation.semantics import catalog as cat
from simulation.semantics import model, quantity
from simulation.semantics import requirements as reqs
from simulation.validation import crds

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


# Karpenter's AWS metrics controller republishes every minute (`RequeueAfter: time.Minute`, v1.15.0), from what its
# overlay controller stored: an overlay changed within two of those minutes of the scrape may not be in the figures.
REPUBLISH_SECONDS = 120.0
# Requirement operators an undefined label satisfies: an overlay with only these on a key a type lacks still matches.
_UNDEFINED_OK = frozenset({reqs.NOT_IN, reqs.DOES_NOT_EXIST})
# Keys every cell defines whatever the type's labels (reqs(P,T) adds them).
_CELL_KEYS = frozenset({reqs.ZONE, reqs.CAPACITY_TYPE, reqs.NODEPOOL})


@dataclasses.dataclass(frozen=True)
class Live:
    catalog: cat.Catalog
    notes: tuple[str, ...]
    # Types neither the embedded table nor the cluster's Nodes know: they carry only the labels the metrics give.
    unplaced: frozenset[str] = frozenset()


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
    unplaced = frozenset(t.name for t in types if t.name not in known and t.name not in node_by_name)
    return Live(catalog, tuple(notes), unplaced)


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


def recover(live: cat.Catalog, cells: Sequence[Cell], documents: Sequence[ev.Document] | None, *,
            crd: crds.Crd | None = None, at: str = "", unplaced: frozenset[str] = frozenset()) -> Recovered:
    """Base prices for the live catalog from the published (effective) ones. `documents`: the NodeOverlays and
    NodePools in effect in the cluster, judged under `crd` (the run's; default Karpenter's own); None where they are
    unknown, when a published price is kept as the base but marked estimated (an overlay on it would otherwise be
    applied twice unseen). `at`: when the metrics were read (RFC 3339), to tell overlays changed since Karpenter last
    published; `unplaced`: types the guard cannot place (build's).

    Which NodePool's price Karpenter published for a cell cannot be told: its metrics controller keeps the last
    NodePool of a list read from its informer cache, whose order is a Go map's. So a base is recovered only where
    every NodePool's price change on that offering undoes to the same base (none in effect: the published price)."""
    published = {(c.instance_type, c.capacity_type, c.zone): c.price for c in cells}
    run_crd = crd if crd is not None else crds.karpenter()
    changes = _price_changes(live, documents, run_crd) if documents is not None else {}
    doubts = _doubts(live, documents, run_crd, changes, at, unplaced) if documents is not None else _Doubts()
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
            if base is None or doubts.unsure(t.name, slot):
                new = o
                ambiguous += base is None and len(found) > 1 and None not in bases
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
    notes += doubts.notes
    if documents is None:
        notes.append("the overlays in effect are unknown (no --cluster, --existing, --against or base side): "
                     "published prices are taken as base prices and marked estimated; an overlay that sets a price "
                     "would count twice")
    return Recovered(dataclasses.replace(live, types=tuple(types)), counts, tuple(notes))


@dataclasses.dataclass(frozen=True)
class _Doubts:
    """Offerings whose overlay in effect the guard cannot be sure of: their base stays the embedded one."""

    types: frozenset[str] = frozenset()
    slots: frozenset[tuple[str, int]] = frozenset()
    every: bool = False
    notes: tuple[str, ...] = ()

    def unsure(self, name: str, slot: int) -> bool:
        return self.every or name in self.types or (name, slot) in self.slots


def _doubts(live: cat.Catalog, documents: Sequence[ev.Document], crd: crds.Crd,
            changes: Mapping[tuple[str, int], frozenset[str | None]], at: str, unplaced: frozenset[str]) -> _Doubts:
    overlays = [model.overlay(d.obj) for d in documents if model.kind_of(d.obj) == model.NODEOVERLAY]
    if not overlays:
        return _Doubts()
    notes: list[str] = []
    fresh = sorted(model.name_of(d.obj) or "" for d in documents
                   if model.kind_of(d.obj) == model.NODEOVERLAY and _changed_since_publish(d.obj, at))
    if fresh:
        notes.append(f"NodeOverlay(s) {', '.join(fresh[:3])}{' and more' if len(fresh) > 3 else ''} changed after "
                     "Karpenter last published its prices (or Karpenter has not yet seen the change): every base is "
                     "the embedded one (estimated); capture again in a few minutes")
    by_name = {t.name: t for t in live.types}
    blind = frozenset(name for name in unplaced if name in by_name and any(
        _may_select_unseen(o, by_name[name].labels) for o in overlays if o.price_update is not None))
    if blind:
        notes.append(f"{len(blind)} instance type(s) the guard cannot place (e.g. {min(blind)}) may be selected by a "
                     "price overlay on a label the metrics lack: their base is the embedded one (estimated)")
    slots: set[tuple[str, int]] = set()
    for other in (crds.karpenter(), crds.dra()):
        if other is not crd:
            judged = _price_changes(live, documents, other)
            slots |= {key for key in judged.keys() | changes.keys() if judged.get(key) != changes.get(key)}
    if slots:
        notes.append(f"{len(slots)} offering(s) have a price overlay in effect whose verdict turns on the NodeOverlay "
                     "CRD (Karpenter does not re-validate stored objects against a changed CRD): their base is the "
                     "embedded one (estimated)")
    return _Doubts(blind, frozenset(slots), bool(fresh), tuple(notes))


def _may_select_unseen(overlay: model.Overlay, labels: Mapping[str, str]) -> bool:
    """Whether the overlay requires a label the type does not show, which the real type may carry."""
    keys = ((reqs.NORMALIZED_LABELS.get(r.key, r.key), r.operator) for r in overlay.requirements)
    return any(key not in labels and key not in _CELL_KEYS and operator not in _UNDEFINED_OK for key, operator in keys)


def _changed_since_publish(obj: Mapping[str, Any], at: str) -> bool:
    """Karpenter has not yet seen this version (its ValidationSucceeded condition observed an older generation), or
    it was written less than REPUBLISH_SECONDS before the scrape at `at` (managedFields times, else its creation).
    Objects without either (files from a repository) are taken as seen."""
    meta, status = obj.get("metadata"), obj.get("status")
    meta = meta if isinstance(meta, Mapping) else {}
    status = status if isinstance(status, Mapping) else {}
    generation = meta.get("generation")
    for condition in status.get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == "ValidationSucceeded":
            observed = condition.get("observedGeneration")
            if isinstance(generation, int) and isinstance(observed, int) and observed < generation:
                return True
    scraped = _instant(at)
    if scraped is None:
        return False
    written = [_instant(f.get("time")) for f in meta.get("managedFields") or () if isinstance(f, Mapping)]
    written.append(_instant(meta.get("creationTimestamp")))
    latest = max((w for w in written if w is not None), default=None)
    return latest is not None and (scraped - latest).total_seconds() < REPUBLISH_SECONDS


def _instant(text: Any) -> datetime.datetime | None:
    if not isinstance(text, str):
        return None
    try:
        found = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    return found if found.tzinfo is not None else found.replace(tzinfo=datetime.UTC)


def _one_base(bases: set[float | None]) -> float | None:
    """The base all candidates agree on (floats within a relative 1e-9), else None."""
    if None in bases:
        return None
    found = sorted(b for b in bases if b is not None)
    return found[0] if found and math.isclose(found[0], found[-1], rel_tol=1e-9, abs_tol=1e-12) else None


def _price_changes(live: cat.Catalog, documents: Sequence[ev.Document],
                   crd: crds.Crd) -> dict[tuple[str, int], frozenset[str | None]]:
    """(type, offering slot) -> the price changes in effect there across the NodePools (None: none in effect), for
    the slots some overlay prices (the implicit NodePool stands in where there are none), judged under `crd`."""
    report = ev.evaluate(documents, ev.prepare([], live, crd=crd))
    pools = [p.name for p in report.grid.pools]
    seen: dict[tuple[str, int], set[str | None]] = {}
    for cell in effects.effects(report, pools=pools):
        for slot, offering in enumerate(cell.offerings):
            name = offering.get("priceOverlay")
            seen.setdefault((cell.instance_type, slot), set()).add(
                report.entries[name].overlay.price_update if name else None)
    return {key: frozenset(found) for key, found in seen.items() if found != {None}}
