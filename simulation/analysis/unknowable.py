"""Conflicts the catalog cannot tell: an overlay whose requirements name a label no NodePool and no instance type
of the catalog defines matches no cell here (another cloud's label, a label of the user's own nodes), so the cell
test of the guard (semantics/clash.py) can never see it meet another. Where such an overlay and another of the same
weight set the same field and their requirements can hold together, that is a possible conflict: a warning that
names the catalog, never a silent pass."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set

from simulation import findings
from simulation.semantics import cells, clash, merge, model, wellknown
from simulation.semantics import requirements as reqs


def needs_undefined(r: model.ReqSpec, keys: Set[str]) -> bool:
    """Whether the requirement needs a label no key of `keys` is (its operator does not accept an undefined one)."""
    return reqs.NORMALIZED_LABELS.get(r.key, r.key) not in keys \
        and not reqs.Requirement.new(r.key, r.operator, r.values).accepts_undefined()


def unmatched(overlay: model.Overlay, keys: Set[str]) -> bool:
    """Whether an undefined key leaves the overlay without a cell."""
    return any(needs_undefined(r, keys) for r in overlay.requirements)


def certain(grid: cells.Grid, key: str, every_nodepool: bool) -> bool:
    """Whether a key that no NodePool and no instance type of the catalog defines is certainly undefined, not just
    unknown here: every NodePool is known (`every_nodepool`) and the key is in the catalog's provider's own label
    domain without being one of its labels (wellknown.undefinable), which no NodePool may define either. The
    webhook denies on it, so anything less than certain (a custom key a NodePool may define later) stays a
    warning."""
    return every_nodepool and wellknown.undefinable(key, grid.provider)


def certainly_unmatched(grid: cells.Grid, overlay: model.Overlay, keys: Set[str], every_nodepool: bool) -> bool:
    """Whether a certainly undefined key leaves the overlay without a cell: nothing it could meet is unknown."""
    return every_nodepool and any(needs_undefined(r, keys) and certain(grid, reqs.NORMALIZED_LABELS.get(r.key, r.key),
                                                                      every_nodepool)
                                  for r in overlay.requirements)


def possible_conflicts(entries: Mapping[str, merge.Entry], unknowable: Set[str], subjects: Iterable[str] | None,
                       catalog: str) -> list[findings.Finding]:
    """The possible conflicts of `subjects` (None: of every overlay) among `entries`, each reported once, on
    the overlay the catalog cannot place (of two such, the later name), at most clash.LIMIT per overlay."""
    if not unknowable:
        return []
    pairs: dict[str, dict[str, tuple[merge.Field, ...]]] = {}
    # Only same-weight overlays can conflict: the entries grouped by weight once (when a subject needs them, not
    # on every request), not scanned per overlay.
    by_weight: dict[int, list[str]] = {}
    for name in sorted(unknowable) if subjects is None else subjects:
        if name not in entries:
            continue
        weight = entries[name].weight
        if name in unknowable:
            if not by_weight:
                for other, e in entries.items():
                    by_weight.setdefault(e.weight, []).append(other)
            _pair(entries, name, (o for o in by_weight[weight] if o != name), unknowable, pairs)
        else:
            for other in sorted(unknowable):
                if other in entries and entries[other].weight == weight:
                    _pair(entries, other, (name,), unknowable, pairs)
    out: list[findings.Finding] = []
    for name, partners in sorted(pairs.items()):
        made = [_finding(entries[name].overlay, entries[other].overlay, fields, catalog)
                for other, fields in sorted(partners.items())[:clash.LIMIT]]
        out += findings.first_few(made, len(partners))
    return out


def _pair(entries: Mapping[str, merge.Entry], name: str, others: Iterable[str], unknowable: Set[str],
          pairs: dict[str, dict[str, tuple[merge.Field, ...]]]) -> None:
    mine = entries[name].overlay
    fields = set(merge.declared(mine))
    if not fields:
        return
    wanted = mine.requirement_map()
    for other in others:
        theirs = entries[other].overlay
        shared = tuple(sorted((f for f in merge.declared(theirs) if f in fields), key=str))
        if not shared or not reqs.intersects(wanted, theirs.requirement_map()):
            continue
        # Two the catalog cannot place: one finding, on the later name.
        on, partner = (name, other) if other not in unknowable or other < name else (other, name)
        pairs.setdefault(on, {})[partner] = shared


def _finding(overlay: model.Overlay, other: model.Overlay, fields: tuple[merge.Field, ...],
             catalog: str) -> findings.Finding:
    named = ", ".join(map(str, fields))
    message = (f"NodeOverlay {overlay.name} and {other.name} both set {named} at weight {overlay.weight} and their "
               f"requirements can hold together, but the {catalog or 'catalog'} lacks a label one of them needs: "
               "whether they meet on a node (a same-weight conflict) cannot be told here")
    return findings.make("possible-conflict", overlay.ref, ("spec", "requirements"), message, related=[other.ref],
                         source=overlay.source, detail={"fields": named})
