"""Karpenter's known traps that a price overlay walks into on its own: what its users hit in production
(issue 41), judged from the overlay's own selection and value against the catalog's base prices.

- `on-demand-below-spot`: an on-demand discount deep enough that on-demand becomes cheaper than spot for a type
  a NodePool can launch both ways. Karpenter ranks types by the discounted on-demand price, launches spot, and
  the NodeClaims fail with InsufficientCapacityError (aws/karpenter-provider-aws#8704). Only offerings whose
  two prices were read from data count (cells.Grid.spot_pairs): the embedded catalog's spot prices are
  estimates equal to on-demand, and any discount would "invert" them.
- `price-metric-flips`: a price overlay that selects an offering in some of the NodePools that launch it and not
  in others. Karpenter publishes one `karpenter_cloudprovider_instance_type_offering_price_estimate` per (type,
  zone, capacity type), written from each NodePool's instance types in turn, so the series swings between the
  NodePools' prices (kubernetes-sigs/karpenter#3070, aws/karpenter-provider-aws#9222).

Both read only the overlay and the grid, so both paths compute them once per overlay (evaluate._local).
"""

from __future__ import annotations

from simulation import findings
from simulation.analysis import effects
from simulation.semantics import cells, cellset, merge

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
    hint = (f"Scope the discount to NodePools that launch on-demand only, add karpenter.sh/capacity-type NotIn [spot] "
            f"to NodePool {nodepool}, or lower the discount so spot stays the cheaper (see "
            "aws/karpenter-provider-aws#8704).")
    detail = {"nodepool": nodepool, "onDemandBase": _money(base), "onDemand": _money(price),
              "spot": _money(spot_price), "types": str(len(types))}
    return findings.make(BELOW_SPOT, overlay.ref, overlay.price_path, message, witness=witness,
                         source=overlay.source, detail=detail, hint=hint)


def metric_flips(grid: cells.Grid, e: merge.Entry) -> findings.Finding | None:
    """Where `e` prices an offering in a NodePool that launches it and leaves it alone in another that does."""
    change, overlay = e.overlay.price_update, e.overlay
    if change is None or len(grid.pools) < 2 or not e.cells:
        return None
    selected = dict(_per_pool(grid, e.cells))
    launched = grid.launch_blocks
    # Offerings `e` prices in some NodePool that launches them.
    priced = 0
    for pool, block in selected.items():
        priced |= block & launched[pool]
    for other, pool_launches in enumerate(launched):
        left = priced & pool_launches & ~selected.get(other, 0)
        if not left:
            continue
        slot = cellset.low_bit(left)
        pool = next(p for p, block in sorted(selected.items()) if (block & launched[p]) >> slot & 1)
        witness = grid.witness_at(pool * grid.block + slot)
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
