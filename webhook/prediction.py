"""The audit's prediction against what Karpenter says: each overlay's status against the
`ValidationSucceeded` condition Karpenter wrote, and the effective prices against the ones its
provider publishes. Pure (the time is an argument), so the rules are tested without a cluster.

Karpenter v1.15.0's nodeoverlay controller sets the condition True, or False with reason
`RuntimeValidation` (the overlay is ignored whole) or `Conflict`; a condition of an older
generation, or none, has not judged the overlay's current spec yet. The AWS provider's metrics
controller lists the NodePools and, for each, writes every offering's price after overlays into one
map per (instance type, capacity type, zone): the published figure is the last NodePool's in the order
its informer cache lists them, which is a map's, so any NodePool's figure may be the one published.

A predicted price is a check of the guard's model only where it does not rest on the published figure itself: a
base recovered from Karpenter's figure by undoing the overlay the guard believes in effect gives back that figure
whatever the truth, and so does a published figure taken as the base where the guard sees no overlay. So a figure is
verifiable where the winning overlay sets an absolute price, or the base comes from a table independent of the
publication (a catalog read from data, its figure not estimated); every other offering is counted unverifiable.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from simulation import findings
from simulation.analysis import effects
from simulation.analysis import report as rp
from simulation.semantics import catalog as cat
from simulation.semantics import merge, model
from webhook import events

CONDITION = "ValidationSucceeded"
# Karpenter's reasons for a False condition, as the guard's statuses: the one place they are mapped.
KARPENTER_REASONS = {"RuntimeValidation": merge.INVALID, "Conflict": merge.CONFLICT}
# Karpenter reconciles overlays on every change and its provider republishes prices every minute:
# a disagreement younger than two of those is a race, not a finding.
DEFAULT_GRACE = 120.0
# Published and predicted prices agree within this (the exposition prints floats in shortest form,
# a reader may round; no price is this precise).
REL_TOL, ABS_TOL = 1e-6, 1e-9
# Disagreements remembered at once (per kind): their first-seen times, beyond it the newest wait.
MEMORY = 10_000

PriceKey = tuple[str, str, str]  # (instance type, capacity type, zone), the metric's labels
# Returns Karpenter's published effective prices, None when they cannot be read now.
PriceSource = Callable[[], Awaitable[Mapping[PriceKey, float] | None]]


@dataclasses.dataclass(frozen=True)
class Said:
    """Karpenter's verdict on one overlay: a guard status, or the raw reason of a False condition
    the guard does not know (a Karpenter version it does not model)."""

    state: str
    message: str = ""


def karpenter_says(obj: Mapping[str, Any]) -> Said | None:
    """The overlay's ValidationSucceeded condition as a status; None while Karpenter has not
    reconciled this generation (no condition, Unknown, or an older observedGeneration)."""
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    found = next((c for c in conditions if isinstance(c, Mapping) and c.get("type") == CONDITION), None) \
        if isinstance(conditions, list) else None
    if found is None:
        return None
    meta = obj.get("metadata")
    generation = meta.get("generation") if isinstance(meta, Mapping) else None
    observed = found.get("observedGeneration")
    if isinstance(generation, int) and isinstance(observed, int) and observed < generation:
        return None
    message = str(found.get("message") or "")
    if found.get("status") == "True":
        return Said(merge.APPLIED, message)
    if found.get("status") != "False":
        return None
    reason = str(found.get("reason") or "")
    known = KARPENTER_REASONS.get(reason)
    return Said(known if known is not None else reason or "False", message)


@dataclasses.dataclass(frozen=True)
class StatusMismatch:
    overlay: str
    predicted: rp.Status
    said: Said

    def describe(self) -> str:
        why = f" ({self.predicted.reason})" if self.predicted.reason else ""
        theirs = f" ({self.said.message})" if self.said.message and self.said.state != merge.APPLIED else ""
        return f"guard predicts {self.predicted.state}{why}, Karpenter says {self.said.state}{theirs}"


def judged(predicted: Mapping[str, rp.Status],
           overlays: Mapping[str, Mapping[str, Any]]) -> dict[str, tuple[rp.Status, Said]]:
    """The overlays both sides have judged, each with the predicted status and Karpenter's; `overlays`: the
    objects as stored now, by name (one the prediction does not hold yet, or Karpenter has not reconciled,
    is left out)."""
    out: dict[str, tuple[rp.Status, Said]] = {}
    for name, obj in overlays.items():
        mine = predicted.get(name)
        said = karpenter_says(obj)
        if mine is not None and said is not None:
            out[name] = (mine, said)
    return out


def status_mismatches(predicted: Mapping[str, rp.Status],
                      overlays: Mapping[str, Mapping[str, Any]]) -> dict[str, StatusMismatch]:
    """The judged overlays (see `judged`) whose reconciled condition differs from the predicted status."""
    return {name: StatusMismatch(name, mine, said) for name, (mine, said) in judged(predicted, overlays).items()
            if said.state != mine.state}


@dataclasses.dataclass(frozen=True)
class Priced:
    """A predicted published price: the NodePool it comes from and the overlay setting it (None: the
    catalog's base price); `verifiable`: the figure does not rest on Karpenter's published one (module doc)."""

    price: float
    pool: str
    overlay: str | None
    verifiable: bool = True


def independent_base(offering: cat.Offering) -> bool:
    """A base price read from a table (the embedded one, a --catalog file), not estimated, and not derived from
    Karpenter's published figures (a live catalog's `published`, `recovered` and `embedded` origins)."""
    return offering.origin == "" and not offering.estimated and offering.price is not None


def predicted_prices(report: rp.Report) -> dict[PriceKey, tuple[Priced, ...]]:
    """What the provider may publish: each offering's effective price in every NodePool, one `Priced` per
    distinct figure (NodePools by name). The provider keeps the last NodePool it lists, and it lists them from
    its informer's cache, whose order is a map's: any NodePool's figure may be the one published. Every
    NodePool offers every type of the one catalog the guard models, so an offering no price overlay touches in
    some NodePool has its base price there. Unknown prices (a relative overlay on an unpriced offering) are left
    out."""
    grid = report.grid
    pools = [p.name for p in grid.pools]
    winners = effects.price_winners(report)
    out: dict[PriceKey, tuple[Priced, ...]] = {}
    for t, it in enumerate(grid.types):
        for slot, o in enumerate(it.offerings):
            by_pool = winners.get((t, slot), {})
            figures: list[tuple[str, float | None, str | None]] = [
                (pools[i], effects.price_of(report, o.price, name), name) for i, name in by_pool.items()]
            unclaimed = [pool for i, pool in enumerate(pools) if i not in by_pool] if by_pool else pools
            if unclaimed:
                figures.append((min(unclaimed), o.price, None))
            independent = independent_base(o)
            distinct: dict[float, Priced] = {}
            for pool, price, name in sorted(figures, key=lambda f: f[0]):
                if price is None:
                    continue
                absolute = name is not None and report.entries[name].overlay.price is not None
                first = distinct.setdefault(float(price), Priced(float(price), pool, name, independent or absolute))
                if first.verifiable and not (independent or absolute):
                    distinct[float(price)] = dataclasses.replace(first, verifiable=False)
            if distinct:
                out[(it.name, o.capacity_type, o.zone)] = tuple(distinct.values())
    return out


@dataclasses.dataclass(frozen=True)
class PriceMismatch:
    key: PriceKey
    predicted: Priced  # the first NodePool's figure; `others` more figures were as possible
    published: float
    others: int = 0

    def describe(self) -> str:
        it, capacity, zone = self.key
        by = f"overlay {self.predicted.overlay}" if self.predicted.overlay else "base price"
        alternatives = f" or one of {self.others} other NodePools' figures" if self.others else ""
        return (f"guard predicts {self.predicted.price:g} for {it} {capacity} in {zone} (NodePool "
                f"{self.predicted.pool}, {by}){alternatives}, Karpenter publishes {self.published:g}")


def priced_by_both(predicted: Mapping[PriceKey, Sequence[Priced]],
                   published: Mapping[PriceKey, float]) -> dict[PriceKey, tuple[Sequence[Priced], float]]:
    """The cells both sides price, each with the predicted figures and the published one. A cell only one side has
    is the catalog's business (which offerings exist), not the prediction's: the provider also publishes 0 for
    reserved offerings nobody holds. A published NaN is no figure."""
    return {key: (mine, theirs) for key, theirs in published.items()
            if (mine := predicted.get(key)) and math.isfinite(theirs)}


def comparable(predicted: Mapping[PriceKey, Sequence[Priced]],
               published: Mapping[PriceKey, float]) -> dict[PriceKey, tuple[Sequence[Priced], float]]:
    """The cells both sides price where every figure the guard predicts is verifiable: any NodePool's may be the
    one published, and a figure that rests on the published one would agree with it by construction."""
    return {key: both for key, both in priced_by_both(predicted, published).items()
            if all(m.verifiable for m in both[0])}


def unverifiable(predicted: Mapping[PriceKey, Sequence[Priced]], published: Mapping[PriceKey, float]) -> int:
    """How many cells both sides price cannot be compared (see `comparable`)."""
    both = priced_by_both(predicted, published)
    return len(both) - len(comparable(predicted, published))


def price_mismatches(predicted: Mapping[PriceKey, Sequence[Priced]], published: Mapping[PriceKey, float],
                     rel_tol: float = REL_TOL, abs_tol: float = ABS_TOL) -> dict[PriceKey, PriceMismatch]:
    """The comparable cells (see `comparable`) where the published figure is none of the NodePools' predicted ones
    (beyond float printing)."""
    return {key: PriceMismatch(key, mine[0], theirs, len(mine) - 1)
            for key, (mine, theirs) in comparable(predicted, published).items()
            if not any(math.isclose(m.price, theirs, rel_tol=rel_tol, abs_tol=abs_tol) for m in mine)}


def notes(status: Mapping[str, StatusMismatch], prices: Mapping[PriceKey, PriceMismatch]) -> list[events.Note]:
    """The events of lasting disagreements: each overlay's status on it (a new pair of sides is a new event);
    prices on the overlay in effect, else on the NodePool the figure comes from, one event per object
    naming the first offering and how many disagree (bounded however many cells do)."""
    out = [events.Note(findings.ObjectRef(model.NODEOVERLAY, name), events.MISMATCH,
                       f"status|{m.predicted.state}|{m.said.state}", m.describe()[:events.NOTE_LIMIT])
           for name, m in sorted(status.items())]
    by_object: dict[findings.ObjectRef, list[PriceMismatch]] = {}
    for _, m in sorted(prices.items()):
        regarding = findings.ObjectRef(model.NODEOVERLAY, m.predicted.overlay) if m.predicted.overlay \
            else findings.ObjectRef(model.NODEPOOL, m.predicted.pool)
        by_object.setdefault(regarding, []).append(m)
    for regarding, found in sorted(by_object.items()):
        more = f" (and {len(found) - 1} more offerings)" if len(found) > 1 else ""
        out.append(events.Note(regarding, events.MISMATCH, "price",
                               f"{found[0].describe()}{more}"[:events.NOTE_LIMIT]))
    return out


K = TypeVar("K")
V = TypeVar("V")


class Grace(Generic[K, V]):
    """When each current disagreement was first seen; only those older than `grace` are reported. A
    disagreement that goes away is forgotten (coming back starts its grace again). At most `memory`
    are timed at once: the newest beyond it wait for room, unreported."""

    def __init__(self, grace: float, memory: int = MEMORY) -> None:
        self.grace = grace
        self.memory = memory
        self._since: dict[K, float] = {}

    def observe(self, current: Mapping[K, V], now: float) -> dict[K, V]:
        self._since = {k: t for k, t in self._since.items() if k in current}
        for key in current:
            if key not in self._since and len(self._since) < self.memory:
                self._since[key] = now
        return {k: v for k, v in current.items() if k in self._since and now - self._since[k] >= self.grace}

    def next_due(self, now: float) -> float | None:
        """When the next timed disagreement passes its grace (None: none is waiting for it)."""
        return min((t + self.grace for t in self._since.values() if now - t < self.grace), default=None)
