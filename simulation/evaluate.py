"""The one entry point both front ends call: documents in, a report out.

`prepare` digests what is already in the cluster (catalog index, NodePools, every existing
overlay's checks and cells) into an immutable snapshot; `evaluate` adds candidates to it and
answers with the findings that involve them. The linter calls both once per run, the webhook
prepares once per cache change and evaluates once per admission request.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from simulation import catalog as cat
from simulation import cells, checks, dra, findings, merge, model, runtime, schema


@dataclasses.dataclass(frozen=True)
class Document:
    """One parsed object. `source` is the adapter's handle (e.g. a document number) that
    findings carry back so it can point at a file and line."""

    obj: Any
    source: int
    candidate: bool = True


@dataclasses.dataclass(frozen=True)
class Checked:
    """An overlay with the findings that depend on it alone."""

    overlay: model.Overlay
    raw: Mapping[str, Any]
    findings: tuple[findings.Finding, ...]
    candidate: bool

    @property
    def invalid(self) -> bool:
        return any(f.code == "runtime-invalid" or dict(f.detail).get("layer") == "apiserver"
                   for f in self.findings)


@dataclasses.dataclass(frozen=True)
class Prepared:
    catalog: cat.Catalog
    grid: cells.Grid
    pools: tuple[model.NodePool, ...]
    overlays: Mapping[str, Checked]
    entries: Mapping[str, merge.Entry]
    # Findings of the existing objects alone: what an UPDATE ratchets against.
    baseline: tuple[findings.Finding, ...]


@dataclasses.dataclass(frozen=True)
class Report:
    findings: tuple[findings.Finding, ...]
    status: Mapping[str, tuple[str, str]]
    outcome: merge.Outcome
    entries: Mapping[str, merge.Entry]
    overlays: Mapping[str, Checked]
    grid: cells.Grid
    notes: tuple[str, ...]

    def errors(self) -> list[findings.Finding]:
        return [f for f in self.findings if f.severity == findings.Severity.ERROR]


def check_overlay(doc: Document) -> Checked:
    obj = doc.obj if isinstance(doc.obj, Mapping) else {}
    overlay = model.overlay(obj, doc.source)
    ref = overlay.ref
    found = [*schema.check(obj, ref, doc.source), *runtime.check(obj, ref, doc.source),
             *dra.check_overlay(obj, ref, doc.source)]
    return Checked(overlay, obj, tuple(found), doc.candidate)


def _pools(docs: Iterable[Document]) -> list[model.NodePool]:
    pools: dict[str, model.NodePool] = {}
    for doc in docs:
        if model.kind_of(doc.obj) == model.NODEPOOL and model.name_of(doc.obj):
            pool = model.nodepool(doc.obj, doc.source)
            pools.setdefault(pool.name, pool)
    return sorted(pools.values(), key=lambda p: p.name) or [model.IMPLICIT_NODEPOOL]


def _entries(grid: cells.Grid, overlays: Mapping[str, Checked],
             reuse: Mapping[str, merge.Entry]) -> dict[str, merge.Entry]:
    out = {}
    for name, c in overlays.items():
        if c.invalid:
            continue
        previous = reuse.get(name)
        out[name] = previous if previous is not None and previous.overlay == c.overlay else merge.entry(
            grid, c.overlay)
    return out


def prepare(existing: Sequence[Document], catalog: cat.Catalog) -> Prepared:
    docs = [dataclasses.replace(d, candidate=False) for d in existing]
    pools = _pools(docs)
    grid = cells.build(catalog, pools)
    overlays: dict[str, Checked] = {}
    for doc in docs:
        name = model.name_of(doc.obj)
        if model.kind_of(doc.obj) == model.NODEOVERLAY and name and name not in overlays:
            overlays[name] = check_overlay(doc)
    entries = _entries(grid, overlays, {})
    snapshot = Prepared(catalog, grid, tuple(pools), overlays, entries, ())
    report = _run(snapshot, [], notes=())
    return dataclasses.replace(snapshot, baseline=report.findings)


def evaluate(candidates: Sequence[Document], prepared: Prepared) -> Report:
    """Findings that involve the candidates (all findings when every object is a candidate),
    with an edit ratcheted against the version it replaces."""
    docs = [dataclasses.replace(d, candidate=True) for d in candidates]
    problems = _document_problems(docs)
    candidate_pools = [d for d in docs if model.kind_of(d.obj) == model.NODEPOOL and model.name_of(d.obj)]
    snapshot = prepared
    if candidate_pools:
        merged = {p.name: p for p in prepared.pools if not p.implicit}
        for pool in _pools(candidate_pools):
            merged[pool.name] = pool
        pools = sorted(merged.values(), key=lambda p: p.name) or [model.IMPLICIT_NODEPOOL]
        grid = cells.build(prepared.catalog, pools)
        snapshot = dataclasses.replace(prepared, grid=grid, pools=tuple(pools),
                                       entries=_entries(grid, prepared.overlays, {}))
    overlays = dict(snapshot.overlays)
    seen: set[str] = set()
    for doc in docs:
        name = model.name_of(doc.obj)
        if model.kind_of(doc.obj) != model.NODEOVERLAY or not name or name in seen:
            continue
        seen.add(name)
        overlays[name] = check_overlay(doc)
    snapshot = dataclasses.replace(snapshot, overlays=overlays,
                                   entries=_entries(snapshot.grid, overlays, snapshot.entries))
    notes = ()
    if snapshot.pools[0].implicit:
        notes = ("no NodePools given: assuming one NodePool named 'default' with no labels",)
    report = _run(snapshot, candidate_pools, notes)
    involved = {c.overlay.ref for c in overlays.values() if c.candidate}
    involved |= {model.nodepool(d.obj).ref for d in candidate_pools}
    kept = [f for f in report.findings if f.obj in involved or involved.intersection(f.related)]
    kept = _ratchet(kept, prepared.baseline, involved)
    return dataclasses.replace(report, findings=tuple(findings.ordered([*problems, *kept])))


def _run(snapshot: Prepared, candidate_pools: Sequence[Document], notes: tuple[str, ...]) -> Report:
    grid, entries = snapshot.grid, snapshot.entries
    found: list[findings.Finding] = []
    for c in snapshot.overlays.values():
        found.extend(c.findings)
    outcome = merge.karpenter(list(entries.values()))
    clashes = merge.same_weight(list(entries.values()))
    found += checks.conflicts(grid, entries, outcome, clashes)
    found += checks.shadowed(grid, entries, outcome, clashes)
    found += checks.clamped(grid, entries, outcome)
    for e in entries.values():
        found += checks.unknown_labels(grid, e.overlay)
        if not e.cells:
            found.append(checks.no_match(grid, e.overlay))
    found += dra.check_scope([(e.overlay.ref, snapshot.overlays[n].raw, e.overlay.source)
                              for n, e in sorted(entries.items())])
    if candidate_pools or not snapshot.baseline:
        found += checks.weight_ties(grid, [p for p in snapshot.pools if not p.implicit])
    status: dict[str, tuple[str, str]] = {}
    for name, c in snapshot.overlays.items():
        if c.invalid:
            first = next(f for f in c.findings if f.severity == findings.Severity.ERROR)
            status[name] = (merge.INVALID, first.message)
        elif outcome.status.get(name) == merge.CONFLICT:
            v = outcome.verdicts[name]
            w = grid.witness_at(v.bit, with_offering=v.field == merge.PRICE)
            status[name] = (merge.CONFLICT, f"conflicts with {v.other} on {v.field} at {w.describe()}")
        else:
            status[name] = (merge.APPLIED, "")
    return Report(tuple(findings.ordered(found)), status, outcome, entries, snapshot.overlays, grid, notes)


def _document_problems(docs: Sequence[Document]) -> list[findings.Finding]:
    """Two candidates with the same kind and name: the later one is reported and ignored."""
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
                f"{kind} {name} is defined twice (first in input {earlier.source}); this copy is ignored",
                related=[ref], source=doc.source))
    return out


def _ratchet(found: Sequence[findings.Finding], baseline: Sequence[findings.Finding],
             involved: set[findings.ObjectRef]) -> list[findings.Finding]:
    """Kubernetes-style validation ratcheting: an error the stored version already had is a
    warning, so a broken object can still be edited and fixed."""
    def key(f: findings.Finding) -> tuple[Any, ...]:
        return (f.code, f.obj, f.field, f.related)

    before = {key(f) for f in baseline if f.severity == findings.Severity.ERROR and f.obj in involved}
    return [f.with_severity(findings.Severity.WARNING, "already present before this change")
            if f.severity == findings.Severity.ERROR and key(f) in before else f for f in found]
