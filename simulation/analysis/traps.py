"""Karpenter's known price traps: what its users hit in production (issue 41).

- `on-demand-below-spot`: an on-demand discount deep enough that on-demand becomes cheaper than spot for a type
  a NodePool can launch both ways. Karpenter ranks types by the discounted on-demand price, launches spot, and
  the NodeClaims fail with InsufficientCapacityError (aws/karpenter-provider-aws#8704). Only offerings whose
  two prices were read from data count (cells.Grid.spot_pairs): the embedded catalog's spot prices are
  estimates equal to on-demand, and any discount would "invert" them.
- `price-metric-flips`: a price overlay that selects an offering in some of the NodePools that launch it and not
  in others. Karpenter publishes one `karpenter_cloudprovider_instance_type_offering_price_estimate` per (type,
  zone, capacity type), written from each NodePool's instance types in turn, so the series swings between the
  NodePools' prices (kubernetes-sigs/karpenter#3070, aws/karpenter-provider-aws#9222).

These two read only the overlay and the grid (its own selection and value against the catalog's base prices), so
both paths compute them once per overlay (evaluate._local).

- `preview-price-by-name`: for a type without a published price, the AWS provider takes the base price from the
  overlays with only a `node.kubernetes.io/instance-type In` requirement and an absolute price, the last by name
  winning whatever the weights (aws/karpenter-provider-aws#9249, in the pinned v1.15.0). It reads several
  overlays, so both paths ask it with the statuses (evaluate._judged, evaluate._incremental); a request whose
  candidates are no such overlay skips it.
- `stacked`: the text of a `shadowed` price field (checks.shadow): overlays never stack
  (kubernetes-sigs/karpenter#2616), and the one overlay that charges both.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Collection, Mapping
from decimal import Decimal

from simulation import findings
from simulation.analysis import effects
from simulation.semantics import cells, cellset, merge, model
from simulation.semantics import requirements as reqs

BELOW_SPOT = "on-demand-below-spot"
METRIC_FLIPS = "price-metric-flips"


def below_spot(grid: cells.Grid, e: merge.Entry) -> findings.Finding | None:
    """Where `e` turns an on-demand offering that cost at least its spot twin into one that costs less, in a
    NodePool that launches both."""
    change, overlay = e.overlay.price_update, e.overlay
    pairs = grid.spot_pairs
    if change is None or not pairs or not e.cells:
        return None
    hits: list[tuple[int, int, float, float, float]] = []  # (pool, on-demand slot, base, price, spot price)
    types: set[int] = set()
    for pool, selected in _per_pool(grid, e.cells):
        launched = grid.launch_blocks[pool]
        for slot in cellset.ones(selected & launched):
            spot = pairs.get(slot)
            if spot is None or not launched >> spot & 1:
                continue
            it = grid.types[slot // grid.slots]
            base = it.offerings[slot % grid.slots].price
            spot_base = it.offerings[spot % grid.slots].price
            assert base is not None and spot_base is not None  # spot_pairs holds priced offerings only
            price = effects.adjusted(base, change)
            spot_price = effects.adjusted(spot_base, change) if selected >> spot & 1 else spot_base
            if price is None or spot_price is None or base < spot_base or price >= spot_price:
                continue
            hits.append((pool, slot, base, price, spot_price))
            types.add(slot // grid.slots)
    if not hits:
        return None
    pool, slot, base, price, spot_price = min(hits, key=lambda h: (h[0], h[1]))
    witness = grid.witness_at(pool * grid.block + slot)
    more = len(types) - 1
    others = f" (and {more} more instance types)" if more else ""
    nodepool = grid.pools[pool].name
    message = (f"NodeOverlay {overlay.name}: {_field(e)} {change} makes on-demand {witness.instance_type} "
               f"{_money(price)} (from {_money(base)}), below its spot price {_money(spot_price)}, in NodePool "
               f"{nodepool}, which launches both: Karpenter ranks it by the on-demand price but launches spot, and "
               f"the NodeClaims can fail with InsufficientCapacityError{others}")
    limit = _keeps_spot_cheaper(change, base, spot_price)
    hint = (f"Scope the discount to NodePools that launch on-demand only, add karpenter.sh/capacity-type NotIn [spot] "
            f"to NodePool {nodepool}, or lower the discount so that spot stays the cheaper ({limit} on "
            f"{witness.instance_type}; aws/karpenter-provider-aws#8704).")
    detail = {"nodepool": nodepool, "onDemandBase": _money(base), "onDemand": _money(price),
              "spot": _money(spot_price), "types": str(len(types))}
    return findings.make(BELOW_SPOT, overlay.ref, overlay.price_path, message, witness=witness,
                         source=overlay.source, detail=detail, hint=hint)


def _keeps_spot_cheaper(change: str, base: float, spot: float) -> str:
    """The change at which on-demand no longer goes below `spot` from `base`."""
    if change.endswith("%"):
        return f"a discount of at most {_money((1 - spot / base) * 100)}%"
    if change.startswith("-"):
        return f"a discount of at most {_money(base - spot)}"
    return f"a price of at least {_money(spot)}"


def metric_flips(grid: cells.Grid, e: merge.Entry) -> findings.Finding | None:
    """Where `e` prices an offering in a NodePool that launches it and leaves it alone in another that does."""
    change, overlay = e.overlay.price_update, e.overlay
    if change is None or len(grid.pools) < 2 or not e.cells:
        return None
    parts = e.cells.parts
    if len(parts) == 1 and parts[0][0] == grid.pool_mask:
        return None  # the same offerings in every NodePool: all publish one price
    per_pool = _per_pool(grid, e.cells)
    launched = grid.launch_blocks
    # Per NodePool, the offerings `e` prices there that it launches; `priced`: all of them.
    mine = [(pool, block & launched[pool]) for pool, block in per_pool]
    priced = 0
    for _, bits in mine:
        priced |= bits
    selected = dict(per_pool)
    for other, pool_launches in enumerate(launched):
        left = priced & pool_launches
        if other in selected:
            left &= ~selected[other]
        if not left:
            continue
        lowest = left & -left
        pool = next(p for p, bits in mine if bits & lowest)
        witness = grid.witness_at(pool * grid.block + lowest.bit_length() - 1)
        unpriced = grid.pools[other].name
        message = (f"NodeOverlay {overlay.name}: {_field(e)} {change} applies to {witness.describe()} but not to "
                   f"the same offering in NodePool {unpriced}: Karpenter's "
                   "karpenter_cloudprovider_instance_type_offering_price_estimate for it swings between the two "
                   "NodePools' prices")
        hint = ("Dashboards and cost tools reading the metric see both prices in turn; select the offering in every "
                "NodePool that launches it, or read prices per NodePool (kubernetes-sigs/karpenter#3070).")
        detail = {"nodepool": witness.nodepool, "other": unpriced}
        return findings.make(METRIC_FLIPS, overlay.ref, overlay.price_path, message, witness=witness,
                             source=overlay.source, detail=detail, hint=hint)
    return None


def _per_pool(grid: cells.Grid, selected: cellset.Cells) -> list[tuple[int, int]]:
    """(NodePool, its block of `selected`), in pool order."""
    blocks: dict[int, int] = {}
    for pools, block in selected.parts:
        for pool in cellset.ones(pools):
            blocks[pool] = blocks.get(pool, 0) | block
    return sorted(blocks.items())


def _field(e: merge.Entry) -> str:
    return "price" if e.overlay.price is not None else "priceAdjustment"


def _money(value: float) -> str:
    return f"{value:.6g}"


def stacked(shadowed: model.Overlay, winner: model.Overlay, base: float | None) -> tuple[str, str] | None:
    """What the `shadowed` finding says of two price overlays meant to stack (kubernetes-sigs/karpenter#2616):
    that overlays never do, and the one overlay at the winner's weight that charges both, where the two changes
    make one (both percentages, both additive, an absolute price and an adjustment); else the combined figure on
    the witness offering (`base`, its catalog price). The lower-precedence change is read as applied first."""
    first, then = shadowed.price_update, winner.price_update
    if first is None or then is None:
        return None
    said = (f"; price overlays never stack: only {winner.name}'s {then} applies, not {first} as well "
            "(kubernetes-sigs/karpenter#2616)")
    return said, _stack_fix(first, then, winner.weight, base)


def _stack_fix(first: str, then: str, weight: int, base: float | None) -> str:
    """`stacked`'s hint: the one overlay at `weight` that charges both changes, or what else to do."""
    combined = _stack_combined(first, then, base)
    how = (f"to charge both, replace them with one overlay at weight {weight} setting {combined}"
           if combined is not None else "keep one of the two absolute prices")
    return (f"Overlays never stack: {how}, or follow the priceExpression RFC "
            "(kubernetes-sigs/karpenter#3004) for a price built from several terms.")


# Kept per distinct (changes, base price), not per weight: a ladder's shadowed overlays each have a winner of its own
# weight and the same few changes and prices, and the combined figure is Decimal arithmetic (a pure function of
# these three).
@functools.lru_cache(maxsize=4096)
def _stack_combined(first: str, then: str, base: float | None) -> str | None:
    """The one change that charges both, as the hint words it (on the witness offering's `base` where the two
    combine only there), or None."""
    combined = _combined(first, then)
    if combined is None and base is not None and _absolute(first) is None and _absolute(then) is None:
        figure = effects.adjusted(effects.adjusted(base, first), then)
        combined = None if figure is None else \
            f'price: "{_money(figure)}" for this offering (from its {_money(base)}; one overlay per instance type)'
    return combined


def base_price(grid: cells.Grid, witness: findings.Witness) -> float | None:
    """The catalog's price of the witness's offering."""
    it = grid.types_by_name.get(witness.instance_type)
    offering = witness.offering
    if it is None or offering is None:
        return None
    return next((o.price for o in it.offerings
                 if (o.zone, o.capacity_type) == (offering.zone, offering.capacity_type)), None)


def _combined(first: str, then: str) -> str | None:
    """The one change that does what `first` then `then` do, where there is one."""
    a, b = _absolute(first), _absolute(then)
    if a is not None and b is not None:
        return None
    if a is not None or b is not None:
        # The absolute price is what the adjustment is meant to go on, whichever of the two wins.
        absolute, change = (a, then) if a is not None else (b, first)
        price = effects.adjusted(float(str(absolute)), change)
        return None if price is None else f"price: \"{_money(price)}\""
    if first.endswith("%") and then.endswith("%"):
        factor = (1 + Decimal(first[:-1]) / 100) * (1 + Decimal(then[:-1]) / 100)
        return f"priceAdjustment: \"{_signed((factor - 1) * 100)}%\""
    if not first.endswith("%") and not then.endswith("%"):
        return f"priceAdjustment: \"{_signed(Decimal(first) + Decimal(then))}\""
    return None


def _absolute(change: str) -> str | None:
    return None if change.startswith(("+", "-")) else change


def _signed(value: Decimal) -> str:
    text = format(value.quantize(Decimal("0.000001")).normalize(), "f")
    return text if text.startswith("-") else f"+{text}"


PREVIEW = "preview-price-by-name"


def _unpriced(grid: cells.Grid) -> set[str]:
    return {it.name for it in grid.types if it.offerings and all(o.price is None for o in it.offerings)}


def names_preview_type(grid: cells.Grid, overlay: model.Overlay) -> bool:
    """Whether `preview_prices` can pair this overlay with others whatever cells they share: it is provider-priced
    and names a type without a price."""
    if not provider_priced(overlay):
        return False
    unpriced = _unpriced(grid)
    return any(v in unpriced for v in overlay.requirements[0].values)


def provider_priced(overlay: model.Overlay) -> bool:
    """An overlay the AWS provider reads for the price of a type it has no price for: a single
    `node.kubernetes.io/instance-type In` requirement and an absolute price (offering.go GetOverlayPrice, v1.14 on,
    pinned v1.15.0 in hack/karpenter-kwok/go.mod)."""
    if overlay.price is None or len(overlay.requirements) != 1:
        return False
    only = overlay.requirements[0]
    return only.key == reqs.INSTANCE_TYPE and only.operator == reqs.IN


@dataclasses.dataclass(frozen=True)
class PreviewNames:
    """The types without a price in the catalog (preview types), and each one's provider-priced overlays, whatever
    their status: a snapshot keeps them, so that a request reads the few types its candidates name, not every
    overlay and type (preview_prices' `named`)."""

    unpriced: frozenset[str]
    by_type: Mapping[str, tuple[str, ...]]


def preview_names(grid: cells.Grid, entries: Mapping[str, merge.Entry],
                  unpriced: frozenset[str] | None = None) -> PreviewNames:
    """`unpriced`: the grid's preview types, when known."""
    if unpriced is None:
        unpriced = frozenset(_unpriced(grid))
    out: dict[str, list[str]] = {}
    if unpriced:
        for name, e in entries.items():
            if provider_priced(e.overlay):
                for value in e.overlay.requirements[0].values:
                    if value in unpriced:
                        out.setdefault(value, []).append(name)
    return PreviewNames(unpriced, {t: tuple(names) for t, names in out.items()})


def preview_prices(grid: cells.Grid, entries: Mapping[str, merge.Entry], status: Mapping[str, merge.State],
                   subjects: Collection[str] | None = None,
                   named: PreviewNames | None = None) -> list[findings.Finding]:
    """For each type without a price in the catalog (a preview type), the provider-priced overlays Karpenter
    validated that name it: the provider lists them by name and keeps the last one's price as the type's base,
    whatever their weights. A finding on that overlay where a higher-weight one names the type at another
    price. `subjects`: only groups holding one of these overlays (None: all). `named`: preview_names of the
    entries before the subjects changed, which then name only the subjects' types."""
    if subjects is not None and not any(n in entries and provider_priced(entries[n].overlay) for n in subjects):
        return []
    if named is None or subjects is None:
        names = preview_names(grid, entries).by_type
    else:
        mine = preview_names(grid, {n: entries[n] for n in subjects if n in entries}, named.unpriced).by_type
        changed = set(subjects)
        names = {t: (*(n for n in named.by_type.get(t, ()) if n not in changed), *own) for t, own in mine.items()}
    naming: dict[str, list[model.Overlay]] = {}
    for t, found in names.items():
        validated = [entries[n].overlay for n in found if status.get(n) != merge.CONFLICT]
        if validated:
            naming[t] = validated
    pairs, by_name = _taken_over_weight(naming, subjects)
    out = []
    for (taken_name, top_name), types in sorted(pairs.items()):
        taken, top = by_name[taken_name], by_name[top_name]
        more = f" (and {len(types) - 1} more preview types)" if len(types) > 1 else ""
        message = (f"NodeOverlay {taken.name}: instance type {types[0]} has no published price, and the AWS provider "
                   f"takes its base price from the overlay last by name, {taken.name} ({taken.price}), not from "
                   f"{top.name} ({top.price}) of higher weight {top.weight}; any priceAdjustment in effect starts from "
                   f"{taken.price}{more}")
        hint = (f"Price {types[0]} with one overlay, or rename {top.name} to sort after {taken.name} "
                "(aws/karpenter-provider-aws#9249).")
        out.append(findings.make(PREVIEW, taken.ref, ("spec", "price"), message, related=[top.ref],
                                 witness=findings.Witness(grid.pools[0].name, types[0]), source=taken.source,
                                 detail={"instanceType": types[0], "types": str(len(types)), "taken": taken.name,
                                         "weighted": top.name}, hint=hint))
    return out


def _taken_over_weight(naming: Mapping[str, list[model.Overlay]], subjects: Collection[str] | None) \
        -> tuple[dict[tuple[str, str], list[str]], dict[str, model.Overlay]]:
    """(taken, top) -> the types where the provider takes `taken` (last by name) over the higher-weight `top`
    at another price, and the overlays by name."""
    pairs: dict[tuple[str, str], list[str]] = {}
    by_name: dict[str, model.Overlay] = {}
    for type_name, overlays in sorted(naming.items()):
        taken = max(overlays, key=lambda o: o.name)
        top = max(overlays, key=lambda o: (o.weight, o.name))
        if top.weight == taken.weight or _absolute_value(top) == _absolute_value(taken):
            continue
        if subjects is not None and not {taken.name, top.name} & set(subjects):
            continue
        pairs.setdefault((taken.name, top.name), []).append(type_name)
        by_name.update({taken.name: taken, top.name: top})
    return pairs, by_name


def _absolute_value(overlay: model.Overlay) -> float:
    return float(str(overlay.price))
