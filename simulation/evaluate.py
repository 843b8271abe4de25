"""The one entry point both front ends call: documents in, a report out.

`prepare` digests what is already in the cluster (catalog index, NodePools, every existing
overlay's checks and cells, Karpenter's outcome) into an immutable snapshot; `evaluate` adds
candidates to it and answers with the findings that involve them. The linter calls both once
per run, the webhook prepares once per cache change and evaluates once per admission request.
A handful of overlay candidates takes the incremental path; anything else re-runs everything.
Both give the same findings (tests/test_incremental_property.py).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, cast

from simulation import findings, memo, once

# Report has a field named `findings`; this alias keeps the module reachable in its body.
from simulation import findings as finding_types
from simulation.analysis import checks, hints, hugepages, needed, traps, unknowable
from simulation.analysis import index as ix
from simulation.analysis import report as rp
from simulation.semantics import catalog as cat
from simulation.semantics import cells, cellset, clash, merge, model
from simulation.validation import crds, runtime, schema

# The entry point's value types, defined below it so that the analyses of a report need not import it.
Document = rp.Document
Checked = rp.Checked
Report = rp.Report

_V = TypeVar("_V")

# Beyond this many changed overlays a full run is cheaper than per-candidate neighbour scans.
INCREMENTAL_LIMIT = 32
# A snapshot for given candidates holds only the existing overlays they reach while those are at most this share of
# all (beyond it, telling them apart costs more than it saves), found within this many passes (_reach).
REACH_SHARE = 0.5
REACH_PASSES = 8


@dataclasses.dataclass(frozen=True)
class Baseline:
    """The findings of the existing objects alone, made on first need: what an UPDATE ratchets against, what a
    NodePool change is compared with, what `--against` counts. A one-shot check of a new overlay against many
    existing ones needs none of them (docs/design.md §3.3); a server's snapshot makes them in `warmed`."""

    make: Callable[[], tuple[findings.Finding, ...]] = tuple

    @once.Once
    def found(self) -> tuple[findings.Finding, ...]:
        return self.make()

    @once.Once
    def ratchet(self) -> frozenset[tuple[Any, ...]]:
        """Identities of the error findings."""
        return frozenset(_identity(f) for f in self.found if f.severity == finding_types.Severity.ERROR)


@dataclasses.dataclass(frozen=True)
class Prepared:
    """The snapshot of what is in the cluster, judged once, that candidates are evaluated against."""

    catalog: cat.Catalog
    grid: cells.Grid
    pools: tuple[model.NodePool, ...]
    overlays: Mapping[str, Checked]
    entries: Mapping[str, merge.Entry]
    # Per overlay: findings that depend on it and the grid only (unknown-label, no-match).
    local: Mapping[str, tuple[findings.Finding, ...]] = dataclasses.field(default_factory=dict)
    outcome: merge.Merged = dataclasses.field(default_factory=lambda: merge.Merged((), {}, {}, ()))
    # Findings of the existing objects alone, made on first need.
    judged: Baseline = dataclasses.field(default_factory=Baseline)
    # bindingKeys of the valid overlays that use any.
    keyed: Mapping[str, frozenset[str]] = dataclasses.field(default_factory=dict)
    index: ix.Index = dataclasses.field(default_factory=lambda: ix.Index({}))
    # The NodeOverlay CRD the schema layer checks against (None: Karpenter's own, embedded).
    crd: crds.Crd | None = None
    # The label keys the grid defines (checks.known_keys): asked once per grid, not per request.
    known: frozenset[str] = frozenset()
    # Valid overlays that match nothing because the catalog lacks a label they need (analysis/unknowable.py).
    unknowable: frozenset[str] = frozenset()
    # Every NodePool is among the objects (the webhook's cache, `--cluster`, `--all-nodepools`): a label key no
    # NodePool defines is then one none will (checks.unknown_labels).
    every_nodepool: bool = False

    @once.Once
    def preview_names(self) -> traps.PreviewNames:
        """traps.preview_names of the entries: a request reads the preview types its candidates name."""
        return traps.preview_names(self.grid, self.entries)

    @property
    def baseline(self) -> tuple[findings.Finding, ...]:
        """Findings of the existing objects alone."""
        return self.judged.found

    @property
    def ratchet(self) -> frozenset[tuple[Any, ...]]:
        """Identities of the baseline's error findings, for ratcheting."""
        return self.judged.ratchet


def check_overlay(doc: Document, crd: crds.Crd | None = None, overlay: model.Overlay | None = None) -> Checked:
    """`overlay`: the model of `doc` (model.overlay), when the caller has it."""
    obj = _mapping(doc)
    # Every layer asks about the requirement list (a hundred requirements, recurring across overlays): its memo key
    # is made once.
    with memo.pinned(model.requirements_of(obj)):
        overlay = model.overlay(obj, doc.source) if overlay is None else overlay
        ref = overlay.ref
        crd = crd or crds.karpenter()
        # Converted once for both layers: Karpenter sees what the API server stored, pruned by the CRD in use.
        validated = schema.as_validated(obj, crd)
        layer = schema.check(obj, ref, doc.source, crd, validated=validated)
        found = [*layer, *runtime.check(obj, ref, doc.source, apiserver=layer, validated=validated)]
    keys: frozenset[str] = frozenset()
    # Under a CRD without the DRA extension (Karpenter's own) the field is unknown, and no DRA rule applies: the
    # DRA analysis is imported by the runs that use the extension.
    if crd.extended:
        from simulation.analysis import dra

        found += dra.check_overlay(obj, ref, doc.source)
        keys = dra.binding_keys(obj)
    return Checked(overlay, obj, tuple(hints.attach(found, obj)) if found else (), doc.candidate, keys)


def _mapping(doc: Document) -> Mapping[str, Any]:
    return doc.obj if type(doc.obj) is dict or isinstance(doc.obj, Mapping) else {}


def _first_overlays(docs: Iterable[Document]) -> dict[str, Document]:
    """Each named NodeOverlay's first document, in their order: a later one of the same name is not read."""
    out: dict[str, Document] = {}
    for doc in docs:
        name = model.name_of(doc.obj)
        if model.kind_of(doc.obj) == model.NODEOVERLAY and name and name not in out:
            out[name] = doc
    return out


def _reach(docs: Mapping[str, Document], grid: cells.Grid, candidates: Sequence[Document],
           valid: Callable[[str], bool] | None = None) -> tuple[dict[str, merge.Entry], set[str] | None]:
    """Every existing overlay's entry (`docs`: _first_overlays) as if it were valid, and the names of
    those the candidates' findings can depend on, or None where that is all of them or cannot be told here.
    Karpenter decides a cell from the overlays on it alone, so an overlay that shares no NodePool and type with the
    candidates, nor with an overlay that does, and so on, changes none of their findings (docs/design.md §3.3).
    Of those, one new candidate reads fewer still (analysis/needed.py), given `valid(name)` to ask of some."""
    raw = {name: _mapping(doc) for name, doc in docs.items()}
    made = {name: merge.entry(grid, model.overlay(raw[name], doc.source)) for name, doc in docs.items()}
    overlays = [d for d in candidates if model.kind_of(d.obj) == model.NODEOVERLAY]
    # A NodePool changes the cells, and a request run whole reads everything; with no existing overlay there is
    # nothing to leave out (a one-file check).
    if not made or len(overlays) != len(candidates) or len(overlays) > INCREMENTAL_LIMIT:
        return made, None
    edited = {n for d in overlays if (n := model.name_of(d.obj)) in made}  # an edit reaches from its old version too
    seeds = [(merge.entry(grid, model.overlay(_mapping(d), d.source)), _mapping(d)) for d in overlays]
    seeds += [(made[n], raw[n]) for n in edited]
    if any(_across_cells(grid, e, obj) for e, obj in seeds):
        return made, None
    # Overlays without a cell: those the catalog cannot place may be a possible conflict of any candidate.
    reached = _closure(made, [e for e, _ in seeds], edited | {n for n, e in made.items() if not e.type_cells})
    if valid is None or edited or len(seeds) != 1:
        return made, reached
    fewer = needed.needed(made if reached is None else {n: made[n] for n in reached}, seeds[0][0], valid)
    return made, reached if fewer is None else fewer


def _across_cells(grid: cells.Grid, e: merge.Entry, obj: Mapping[str, Any]) -> bool:
    """Whether a finding of this overlay can name overlays it shares no cell with: bindingKeys, a preview type's
    price by name, a possible conflict of an overlay the catalog cannot place (analysis/unknowable.py)."""
    if crds.dig(obj, *crds.DRA_FIELD) is not None or traps.names_preview_type(grid, e.overlay):
        return True
    return not e.type_cells and unknowable.unmatched(e.overlay, frozenset(checks.known_keys(grid)))


def _closure(made: Mapping[str, merge.Entry], seeds: Sequence[merge.Entry], reached: set[str]) -> set[str] | None:
    """`reached` and every overlay of `made` that shares, through others, a NodePool and a type with a seed; told by
    the entries' coarse signature (NodePools, folded types), which holds every pair that shares cells. None past
    REACH_SHARE or REACH_PASSES."""
    pools = fold = 0
    for e in seeds:
        pools, fold = pools | e.pools, fold | e.fold
    pending = [e for n, e in made.items() if n not in reached]
    for _ in range(REACH_PASSES):
        rest = []
        for e in pending:
            if e.pools & pools and e.fold & fold:
                reached.add(e.name)
                pools, fold = pools | e.pools, fold | e.fold
            else:
                rest.append(e)
        if len(reached) > REACH_SHARE * len(made):
            return None
        if len(rest) == len(pending):
            return reached
        pending = rest
    return None


def _moved(checked: Checked, source: int) -> Checked:
    """An earlier result reused for the same object read from another place (the other side of a diff):
    it and its findings point at this copy."""
    was = checked.overlay.source
    if was == source:
        return checked
    return dataclasses.replace(
        checked, overlay=dataclasses.replace(checked.overlay, source=source),
        findings=tuple(dataclasses.replace(f, source=source) if f.source == was else f for f in checked.findings))


def _pools(docs: Iterable[Document]) -> list[model.NodePool]:
    pools: dict[str, model.NodePool] = {}
    for doc in docs:
        if model.kind_of(doc.obj) == model.NODEPOOL and model.name_of(doc.obj):
            pool = model.nodepool(doc.obj, doc.source)
            pools.setdefault(pool.name, pool)
    return sorted(pools.values(), key=lambda p: p.name) or [model.IMPLICIT_NODEPOOL]


def _local(grid: cells.Grid, keys: frozenset[str], e: merge.Entry,
           every_nodepool: bool) -> tuple[findings.Finding, ...]:
    found = checks.unknown_labels(grid, e.overlay, keys, every_nodepool)
    if not e.cells and (unmatched := checks.no_match(grid, e.overlay, keys)) is not None:
        found.append(unmatched)
    found += checks.fractional_resources(e.overlay)
    if (everywhere := checks.price_on_every_type(grid, e)) is not None:
        found.append(everywhere)
    found += [f for trap in (traps.below_spot, traps.metric_flips) if (f := trap(grid, e)) is not None]
    return tuple(found)


class _Layered(Mapping[str, _V]):
    """A few changes over an immutable snapshot's mapping, read through instead of copied (10,000 entries
    per request otherwise). It iterates as the copy it stands for would: the `hidden` names of `base`
    (changed or deleted) left out, then `top` in its order."""

    def __init__(self, base: Mapping[str, _V], top: dict[str, _V], hidden: set[str]) -> None:
        self._base, self._top, self._hidden = base, top, hidden

    def __getitem__(self, key: str) -> _V:
        if key in self._hidden:
            return self._top[key]
        return self._base[key]

    def __contains__(self, key: object) -> bool:
        return key in self._top if key in self._hidden else key in self._base

    def __iter__(self) -> Iterator[str]:
        yield from (k for k in self._base if k not in self._hidden)
        yield from self._top

    def __len__(self) -> int:
        return len(self._base) - sum(k in self._base for k in self._hidden) + len(self._top)


class _Changed(collections.ChainMap[str, _V]):
    """The changed overlays over the snapshot's: a ChainMap (its order, its writes) whose lookups, a few per
    request, are one dict test each rather than a loop over the maps (and, for `get`, a generator)."""

    def __getitem__(self, key: str) -> _V:
        top = self.maps[0]
        return top[key] if key in top else self.maps[1][key]

    def get(self, key: str, default: Any = None) -> Any:
        top = self.maps[0]
        return top[key] if key in top else self.maps[1].get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self.maps[0] or key in self.maps[1]


def _digest(snapshot: Prepared, reuse: Prepared | None, changed: Sequence[str], layer: bool = False,
            overlays: Mapping[str, Checked] | None = None, made: Mapping[str, merge.Entry] | None = None) -> Prepared:
    """Entries and grid-local findings for every valid overlay; with `reuse` on the same grid
    only the `changed` overlays are recomputed, and with `layer` laid over its mappings, not copied
    into new ones (a request's snapshot lives for one answer; a prepared one is layered over again).
    `overlays`: the snapshot's overlays with the change in (default: its own); `made`: entries already made of
    their models (_reach)."""
    overlays = snapshot.overlays if overlays is None else overlays
    grid = snapshot.grid
    base = reuse if reuse is not None and reuse.grid is grid else None
    keys = base.known if base is not None and base.known else frozenset(checks.known_keys(grid))
    entries: dict[str, merge.Entry] = {}
    local: dict[str, tuple[findings.Finding, ...]] = {}
    names: Iterable[str] = overlays
    if base is not None:
        names = changed
        if not layer:
            entries, local = dict(base.entries), dict(base.local)
    for name in names:
        entries.pop(name, None)
        local.pop(name, None)
        c = overlays.get(name)
        if c is not None and not c.invalid:
            e = made.get(name) if made else None
            entries[name] = e if e is not None and e.overlay is c.overlay else merge.entry(grid, c.overlay)
            local[name] = _local(grid, keys, entries[name], snapshot.every_nodepool)
    if layer and base is not None:
        hidden = set(changed)
        return _digested(snapshot, overlays, _Layered(base.entries, entries, hidden),
                         _Layered(base.local, local, hidden), keys)
    return _digested(snapshot, overlays, entries, local, keys)


def _digested(snapshot: Prepared, overlays: Mapping[str, Checked], entries: Mapping[str, merge.Entry],
              local: Mapping[str, tuple[findings.Finding, ...]], known: frozenset[str]) -> Prepared:
    """dataclasses.replace(snapshot, overlays=..., entries=..., local=..., known=...), built by the
    constructor: replace's generic walk of thirteen fields costs more than the rest of _digest's glue on
    each request (tests/test_request_snapshot.py holds it to replace's answer)."""
    return Prepared(snapshot.catalog, snapshot.grid, snapshot.pools, overlays, entries, local, snapshot.outcome,
                    snapshot.judged, snapshot.keyed, snapshot.index, snapshot.crd, known,
                    snapshot.unknowable, snapshot.every_nodepool)


def prepare(existing: Sequence[Document], catalog: cat.Catalog, previous: Prepared | None = None, *,
            crd: crds.Crd | None = None, every_nodepool: bool | None = None,
            candidates: Sequence[Document] | None = None) -> Prepared:
    """The snapshot of what is in the cluster. With `previous` (the snapshot this one replaces),
    unchanged overlays keep their checks, and their cells too while the NodePools are the same.
    `crd`: the NodeOverlay CRD to validate against (default: Karpenter's own, crds.karpenter()).
    `every_nodepool`: the existing objects and the candidates hold every NodePool of the cluster (default: as
    `previous` says, else not). `candidates`: the only ones this snapshot will judge (a one-shot check): the
    existing overlays they cannot reach are left out (_reach), and the snapshot answers for these candidates only."""
    every = every_nodepool if every_nodepool is not None else previous is not None and previous.every_nodepool
    docs = [dataclasses.replace(d, candidate=False) if d.candidate else d for d in existing]
    pools = _pools(docs)
    if previous is not None and previous.catalog is catalog and list(previous.pools) == pools:
        grid = previous.grid
    else:
        grid = cells.build(catalog, pools, previous.grid if previous is not None else None)
    comparable = previous is not None and previous.catalog is catalog and previous.crd is crd
    known = previous.overlays if comparable and previous is not None else {}
    firsts = _first_overlays(docs)
    made: dict[str, merge.Entry] = {}
    done: dict[str, Checked] = {}

    def judge(name: str) -> Checked:
        found = done.get(name)
        if found is None:
            doc, before, mine = firsts[name], known.get(name), made.get(name)
            same = before is not None and before.raw == doc.obj and before.overlay.source == doc.source
            found = done[name] = before if same and before is not None \
                else check_overlay(doc, crd, mine.overlay if mine is not None else None)
        return found

    reached = None
    if candidates is not None:
        made, reached = _reach(firsts, grid, candidates, lambda name: not judge(name).invalid)
    overlays = {name: judge(name) for name in firsts if reached is None or name in reached}
    reusable = previous if previous is not None and previous.grid is grid and previous.every_nodepool == every \
        else None
    changed = [n for n in overlays if reusable is None or overlays[n] is not reusable.overlays.get(n)]
    changed += [n for n in (reusable.overlays if reusable is not None else ()) if n not in overlays]
    snapshot = Prepared(catalog, grid, tuple(pools), overlays, {}, crd=crd, every_nodepool=every)
    snapshot = _digest(snapshot, reusable, changed, made=made)
    snapshot = dataclasses.replace(snapshot, unknowable=_unknowable(snapshot, snapshot.entries))
    outcome, index = _merged(snapshot, ix.Index.build(list(snapshot.entries.values()), len(pools)))
    keyed = {n: c.keys for n, c in overlays.items() if c.keys and n in snapshot.entries}
    judged = Baseline(lambda: _judged(snapshot, index, outcome, ties=True, notes=()).findings)
    return dataclasses.replace(snapshot, outcome=outcome, judged=judged, keyed=keyed, index=index)


def warmed(prepared: Prepared) -> Prepared:
    """The snapshot with what a request makes on first need already made (a server's snapshots; a one-shot
    check leaves them to the requests that need them): the index's tables, the baseline an UPDATE ratchets
    against, and the request path's modules (importing them was most of a first request)."""
    from simulation.analysis import incremental  # noqa: F401 - imported for the requests to come

    prepared.index.warm()
    prepared.preview_names  # noqa: B018 - made now, as the index's tables are
    _ = prepared.ratchet
    return prepared


def evaluate(candidates: Sequence[Document], prepared: Prepared, *, full: bool = False,
             checked: Mapping[str, Checked] | None = None, context: Sequence[Document] = ()) -> Report:
    """Findings that involve the candidates, with an edit ratcheted against the version it
    replaces (Kubernetes-style validation ratcheting). `checked` offers earlier per-object
    results (e.g. of objects admitted moments ago) to reuse for identical candidates.
    `context`: overlays that join as changes `prepared` lacks (the webhook's admitted, not yet
    stored ones) but are not judged: their findings count only where they involve a candidate."""
    docs = [d if d.candidate else dataclasses.replace(d, candidate=True) for d in (*candidates, *context)]
    judged = {model.name_of(d.obj) for d in candidates}
    problems = hints.attach(_duplicates(docs))
    pool_docs = [d for d in docs if model.kind_of(d.obj) == model.NODEPOOL and model.name_of(d.obj)]
    snapshot = prepared
    if pool_docs:
        merged = {p.name: p for p in prepared.pools if not p.implicit}
        merged.update({p.name: p for p in _pools(pool_docs)})
        pools = sorted(merged.values(), key=lambda p: p.name) or [model.IMPLICIT_NODEPOOL]
        snapshot = dataclasses.replace(prepared, grid=cells.build(prepared.catalog, pools, prepared.grid),
                                       pools=tuple(pools))
    # The full run reads every overlay: a plain dict. One request reads a few: the change over the snapshot.
    whole = full or bool(pool_docs) or not prepared.overlays
    fresh: dict[str, Checked] = {}
    firsts = _first_overlays(docs)
    changed = list(firsts)
    for name, doc in firsts.items():
        earlier = (checked or {}).get(name)
        reuse = earlier is not None and earlier.raw == doc.obj
        fresh[name] = _moved(earlier, doc.source) if reuse and earlier is not None \
            else check_overlay(doc, prepared.crd)
    whole = whole or len(changed) > INCREMENTAL_LIMIT
    overlays: Mapping[str, Checked] = ({**snapshot.overlays, **fresh} if whole
                                       # ChainMap writes to its first map only: the snapshot's is read.
                                       else _Changed(fresh, cast(dict[str, Checked], snapshot.overlays)))
    snapshot = _digest(snapshot, prepared, changed, layer=not whole, overlays=overlays)
    if whole or snapshot.grid is not prepared.grid:
        unknown = _unknowable(snapshot, snapshot.entries)
    else:
        unknown = prepared.unknowable.difference(changed) | _unknowable(snapshot, changed)
    if unknown != snapshot.unknowable:
        snapshot = dataclasses.replace(snapshot, unknowable=unknown)
    notes: tuple[str, ...] = ()
    if snapshot.pools[0].implicit:
        notes = ("no NodePools given: assuming one NodePool named 'default' with no labels",)
    if whole:
        index = ix.Index.build(list(snapshot.entries.values()), len(snapshot.pools))
        outcome, index = _merged(snapshot, index)
        report = _judged(snapshot, index, outcome, ties=bool(pool_docs), notes=notes, subjects=changed)
    else:
        report = _incremental(snapshot, prepared, changed, notes)
    involved = {overlays[n].overlay.ref for n in changed if n in judged}
    involved |= {model.nodepool(d.obj).ref for d in pool_docs}
    # Only an edit can have findings the baseline already had: new objects are named by none of them.
    edited = any(n in prepared.overlays for n in changed)
    kept = _ratchet(_bounded(report.findings, involved), prepared.ratchet if edited else frozenset())
    if pool_docs:
        kept += _caused_by_pools(report.findings, prepared.baseline, involved)
    # The report with these findings, built as dataclasses.replace would, without its generic field walk.
    return Report(tuple(findings.ordered([*problems, *kept])), report.status, report.outcome, report.entries,
                  report.overlays, report.grid, report.notes)


def _bounded(found: Sequence[finding_types.Finding],
             involved: set[finding_types.ObjectRef]) -> list[finding_types.Finding]:
    """The findings that involve a candidate: those on one, and those on other objects that only name one
    as related (every overlay that clashes with it, say), at most clash.LIMIT of these per code and
    candidate, the last saying how many more."""
    # Compared as (kind, name) pairs, hashed in C: a reference's dataclass hash is a Python call.
    named = {(r.kind, r.name) for r in involved}
    out: list[finding_types.Finding] = []
    groups: dict[tuple[str, tuple[tuple[str, str], ...]], list[finding_types.Finding]] = {}
    for f in found:
        if (f.obj.kind, f.obj.name) in named:
            out.append(f)
        elif naming := tuple(pair for r in f.related if (pair := (r.kind, r.name)) in named):
            groups.setdefault((f.code, naming), []).append(f)
    for group in groups.values():
        out += finding_types.first_few(group[:clash.LIMIT], len(group))
    return out


def _caused_by_pools(found: Sequence[finding_types.Finding], baseline: Sequence[finding_types.Finding],
                     involved: set[finding_types.ObjectRef]) -> list[finding_types.Finding]:
    """Problems among existing overlays that a NodePool change creates. They are warnings: a
    NodePool is Karpenter's own object and is never refused on an overlay's account."""
    before = {_identity(f) for f in baseline}
    return [f.with_severity(finding_types.Severity.WARNING, "caused by this NodePool change")
            for f in found
            if not (f.obj in involved or involved.intersection(f.related))
            and _identity(f) not in before]


def _statuses(snapshot: Prepared, status: Mapping[str, merge.State], verdicts: Mapping[str, merge.Dropped],
              names: Iterable[str] | None = None) -> dict[str, rp.Status]:
    out: dict[str, rp.Status] = {}
    # Verdicts repeat (a thousand alike overlays dropped for meeting one): each is worded once.
    said: dict[object, rp.Status] = {}
    grid = snapshot.grid
    for name in snapshot.overlays if names is None else names:
        c = snapshot.overlays[name]
        if c.invalid:
            first = next(f for f in c.findings if f.severity == findings.Severity.ERROR)
            out[name] = rp.Status(merge.INVALID, first.message)
        elif status.get(name) == merge.CONFLICT:
            v = verdicts[name]
            # Named by the witness of the two overlays' same-weight-conflict finding (clash.witness), so `check`,
            # `simulate`, the report and a denial name one cell. Alike overlays dropped for meeting one share
            # cells and so the wording.
            other = snapshot.entries.get(v.other)
            mine = snapshot.entries[name].fields().get(v.field, merge.EMPTY)
            key: object = (v, mine)
            known = said.get(key)
            if known is None:
                common = mine & other.fields().get(v.field, merge.EMPTY) if other is not None else merge.EMPTY
                w = (clash.witness(grid, common, v.field) if common
                     else grid.witness_at(v.bit, with_offering=v.field == merge.PRICE))
                where = w.describe() if w is not None else "-"
                known = said[key] = rp.Status(merge.CONFLICT, f"conflicts with {v.other} on {v.field} at {where}")
            out[name] = known
        else:
            out[name] = rp.Status(merge.APPLIED)
    return out


def _unknowable(snapshot: Prepared, names: Iterable[str]) -> frozenset[str]:
    entries = snapshot.entries
    # An overlay a certainly undefined key leaves without a cell can meet nothing: it is an error, not a doubt.
    return frozenset(n for n in names if n in entries and not entries[n].cells
                     and unknowable.unmatched(entries[n].overlay, snapshot.known)
                     and not unknowable.certainly_unmatched(snapshot.grid, entries[n].overlay, snapshot.known,
                                                            snapshot.every_nodepool))


def _merged(snapshot: Prepared, index: ix.Index) -> tuple[merge.Merged, ix.Index]:
    """Karpenter's loop over every entry, and the index settled by its outcome."""
    outcome = merge.karpenter(list(snapshot.entries.values()))
    return outcome, index.settled(outcome)


def _judged(snapshot: Prepared, index: ix.Index, outcome: merge.Merged, ties: bool, notes: tuple[str, ...],
            subjects: Sequence[str] | None = None) -> Report:
    """The whole run's report on the loop's outcome (`_merged`)."""
    grid, entries = snapshot.grid, snapshot.entries
    found: list[findings.Finding] = []
    for name, c in snapshot.overlays.items():
        found += c.findings
        found += snapshot.local.get(name, ())
    found += checks.conflicts(grid, entries, outcome.status, outcome.verdicts, index.clashes,
                              index.taken.changed((), (), index.crowd(set())))
    pages: dict[str, dict[merge.Field, cellset.Cells]] = {}
    # Every entry as one crowd with the applied ones: the shadow test's questions are a few masks each.
    around = [(index.crowd(set()), index.applied_bits or 0)]
    for claim in outcome.claims:
        e = entries[claim.overlay]
        if not claim.cells:
            # The winners it names: the settled index's (checks.first_higher).
            shadow = checks.shadowed(grid, e, claim.field, around, outcome.status, claim.cells, index)
            found += [shadow] if shadow is not None else []
        elif claim.field == merge.PRICE:
            clamp = checks.clamped(grid, e, claim.cells)
            found += [clamp] if clamp is not None else []
        elif hugepages.is_field(claim.field):
            pages.setdefault(claim.overlay, {})[claim.field] = claim.cells
    for name, mine in pages.items():
        e = entries[name]
        found += hugepages.check(grid, e, mine, index.near(e, set(), ()), outcome.status)
    keyed = [(e.overlay.ref, snapshot.overlays[n].raw, e.overlay.source)
             for n, e in sorted(entries.items()) if snapshot.overlays[n].keys]
    if keyed:  # bindingKeys: only under the DRA extension
        from simulation.analysis import dra

        found += dra.check_scope(keyed)
    found += unknowable.possible_conflicts(entries, snapshot.unknowable, subjects, grid.catalog)
    found += traps.preview_prices(grid, entries, outcome.status, subjects)
    if ties:
        found += checks.weight_ties(grid, [p for p in snapshot.pools if not p.implicit])
    status = _statuses(snapshot, outcome.status, outcome.verdicts)
    return Report(tuple(findings.ordered(found)), status, outcome, entries, snapshot.overlays, grid, notes)


def _incremental(snapshot: Prepared, prepared: Prepared, changed: Sequence[str],
                 notes: tuple[str, ...]) -> Report:
    from simulation.analysis import incremental  # a request's path: a one-shot check judges everything at once

    entries = snapshot.entries
    old = [prepared.entries[n] for n in changed if n in prepared.entries]
    fresh = [entries[n] for n in changed if n in entries]
    result = incremental.evaluate(
        snapshot.grid, prepared.index, entries, prepared.outcome, changed, old, fresh,
        lambda n: snapshot.overlays[n].raw, _keyed(snapshot, prepared, changed))
    found: list[findings.Finding] = list(result.findings)
    found += unknowable.possible_conflicts(entries, snapshot.unknowable, changed, snapshot.grid.catalog)
    found += traps.preview_prices(snapshot.grid, entries, result.status, changed, prepared.preview_names)
    for name in changed:
        found += snapshot.overlays[name].findings
        found += snapshot.local.get(name, ())
    outcome = merge.Merged(prepared.outcome.order, result.status, result.verdicts, result.claims)
    # The changed overlays are among the touched, but for deleted ones: a crowd's thousands are not copied.
    named = result.touched if all(n in result.touched for n in changed) else {*result.touched, *changed}
    # Each worded when first read: one request's report holds the statuses of every overlay its change touched (the
    # thousand copies a new overlay displaces); the webhook reads one.
    status = once.Each(named, lambda n: _statuses(snapshot, result.status, result.verdicts, (n,))[n])
    return Report(tuple(findings.ordered(found)), status, outcome, entries, snapshot.overlays,
                  snapshot.grid, notes)


def _keyed(snapshot: Prepared, prepared: Prepared, changed: Sequence[str]) -> Mapping[str, frozenset[str]]:
    """bindingKeys per overlay, for overlays that have any (kept in the prepared snapshot): copied only
    when the change adds or drops some."""
    mine = {n: snapshot.overlays[n].keys for n in changed if snapshot.overlays[n].keys and n in snapshot.entries}
    if not mine and not any(n in prepared.keyed for n in changed):
        return prepared.keyed
    gone = set(changed)
    keyed = {n: k for n, k in prepared.keyed.items() if n not in gone}
    keyed.update(mine)
    return keyed


def _duplicates(docs: Sequence[Document]) -> list[findings.Finding]:
    """Two candidates with the same kind and name: the later one is reported and ignored. `detail.first` is the
    first copy's source handle (the linter turns it into its file and line)."""
    out = []
    first: dict[tuple[str, str], Document] = {}
    for doc in docs:
        kind, name = model.kind_of(doc.obj), model.name_of(doc.obj)
        if kind is None or name is None:
            continue
        earlier = first.setdefault((kind, name), doc)
        if earlier is not doc:
            ref = findings.ObjectRef(kind, name)
            out.append(findings.make(
                "duplicate-object", ref, ("metadata", "name"),
                f"{kind} {name} is defined twice; the checks read the first copy and ignore this one, but "
                f"`kubectl apply -f` keeps the copy it applies last (this one, in a directory's order)",
                related=[ref], source=doc.source, detail={"first": str(earlier.source)}))
    return out


def _identity(f: finding_types.Finding) -> tuple[Any, ...]:
    """What makes two findings the same problem, whatever their wording or witness."""
    return f.identity()


def _ratchet(found: Sequence[finding_types.Finding], before: frozenset[tuple[Any, ...]]) -> list[finding_types.Finding]:
    """An error the stored version already had comes back as a warning, so a broken object
    can still be edited and fixed."""
    return [f.with_severity(finding_types.Severity.WARNING, "already present before this change")
            if f.severity == finding_types.Severity.ERROR and _identity(f) in before else f
            for f in found]
