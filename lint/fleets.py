"""A run over a fleet: which clusters it judges, each with which inputs (docs/cli.md "Fleets"), and the `clusters`
command that shows what discovery found."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from collections.abc import Sequence
from typing import Any, TextIO

from simulation import findings
from simulation.semantics import model
from sources import fleet, templates
from sources.objects import FILE_KIND, FluxPath, Loader
from sources.positions import Origin, Table

DISCOVERY = "cluster-discovery"


class UsageError(Exception):
    pass


@dataclasses.dataclass(frozen=True)
class Plan:
    """One judgement of a run: a cluster's (named), or the files no cluster claims (judged as before, unnamed)."""

    cluster: str | None
    args: argparse.Namespace
    notes: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Fleet:
    """A run's plan over a repository's clusters: what discovery found and each judgement to make."""

    found: fleet.Fleet
    plans: tuple[Plan, ...]
    # Discovery errors, by cluster (None: none of the judged ones).
    problems: tuple[fleet.Problem, ...]


def discover(args: argparse.Namespace, roots: Sequence[str]) -> fleet.Fleet:
    try:
        return fleet.discover(roots, getattr(args, "config", None))
    except fleet.ConfigError as err:
        raise UsageError(str(err)) from None


def applies(args: argparse.Namespace) -> bool:
    """Discovery reads a repository: not a live cluster, nor stdin."""
    return not args.cluster and "-" not in args.paths


def chosen(found: fleet.Fleet, only: Sequence[str]) -> list[fleet.Cluster]:
    import difflib

    names = [c.name for c in found.clusters]
    for name in only:
        if name not in names:
            near = difflib.get_close_matches(name, names, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else f" (clusters: {', '.join(names)})"
            raise UsageError(f"--only-cluster {name}: no such cluster{hint}")
    return [c for c in found.clusters if not only or c.name in only]


def for_cluster(args: argparse.Namespace, cluster: fleet.Cluster, **changes: Any) -> argparse.Namespace:
    """The run's arguments for one cluster: its own region, catalog, CRD and metrics where it names them."""
    out = argparse.Namespace(**vars(args))
    out.flux_paths = dict(cluster.flux_paths)
    for option, value in (("region", cluster.region), ("catalog", cluster.catalog), ("crd", cluster.crd),
                          ("karpenter_metrics", cluster.karpenter_metrics)):
        if value is not None:
            setattr(out, option, value)
    for option, value in changes.items():
        setattr(out, option, value)
    return out


def whole(args: argparse.Namespace, found: fleet.Fleet) -> Fleet:
    """Every chosen cluster judged on its own paths."""
    clusters = chosen(found, args.only_cluster)
    plans = tuple(Plan(c.name, for_cluster(args, c, paths=list(c.paths), against=[], changed_since=None))
                  for c in clusters if c.paths)
    return Fleet(found, plans, _problems(found, clusters))


def changed(args: argparse.Namespace, found: fleet.Fleet, paths: Sequence[str], roots: Sequence[str]) -> Fleet:
    """The hook and pull-request modes: each changed file judged in the clusters that read it, against the rest of
    that cluster; a file rendered through a kustomization is judged as its rendering (the cluster path that reads
    it), since a patch alone is not an object. Files no cluster reads are judged against the roots, as before."""
    clusters = chosen(found, args.only_cluster)
    candidates: dict[str, list[str]] = {c.name: [] for c in clusters}
    unclaimed = []
    for path in paths:
        real = os.path.realpath(path)
        declaring = [c for c in clusters if any(o.file is not None and os.path.realpath(o.file) == real
                                                for o in c.origins)]
        for cluster in declaring:
            # A changed Flux Kustomization or Argo CD Application changes what its cluster reads: all of it.
            candidates[cluster.name] += cluster.paths
        holding = [(c, held) for c, held in found.holding(path) if c.name in candidates]
        if not holding and not declaring:
            unclaimed.append(path)
        for cluster, held in holding:
            for holder in held:
                candidates[cluster.name].append(path if _read_alone(path, holder) else holder)
    plans = [Plan(c.name, for_cluster(args, c, paths=list(dict.fromkeys(candidates[c.name])), against=list(c.paths),
                                changed_since=None))
             for c in clusters if candidates[c.name]]
    if unclaimed and not args.only_cluster:
        # Files that cannot hold our kinds (a CI workflow) are read alone: the rest is not rendered for them.
        against = roots if any(fleet.may_matter(p) for p in unclaimed) else []
        how = f"judged against {' '.join(against)} as before" if against else \
            "read alone (none can hold a NodeOverlay, NodePool or InstanceType)"
        note = (f"{len(unclaimed)} file(s) no cluster reads, {how}: "
                f"{', '.join(unclaimed[:5])}{' ...' if len(unclaimed) > 5 else ''}")
        plans.append(Plan(None, _for_rest(args, unclaimed, against), (note,)))
    touched = [c for c in clusters if candidates[c.name]]
    return Fleet(found, tuple(plans), _problems(found, touched))


def render_ahead(plans: Sequence[Plan]) -> None:
    """Every Flux path the plans apply, rendered into the render cache before any cluster is judged: kustomize
    processes spend most of their time starting up rather than computing, so twice as many as cores run at once,
    where judging workers would each run one after another. Nothing is kept here (the workers read the cache), and
    nothing is done without a cache or a renderer; a failed render is left for its cluster's judgement to report."""
    from concurrent.futures import ThreadPoolExecutor

    from sources import flux, rendercache

    if rendercache.location() is None or templates.renderer() is None:
        return
    wanted: dict[str, FluxPath] = {}
    for plan in plans:
        applied = getattr(plan.args, "flux_paths", None) or {}
        for path in plan.args.paths:
            real = os.path.realpath(path)
            if real in applied:
                wanted.setdefault(real, applied[real])
    if len(wanted) < 2:
        return
    with ThreadPoolExecutor(max_workers=min(len(wanted), 2 * (os.cpu_count() or 1))) as pool:
        for _ in pool.map(lambda f: flux.render_kustomization(f.repo_root, f.kustomization, defined_at=f.defined_at),
                          wanted.values()):
            pass


def _for_rest(args: argparse.Namespace, paths: Sequence[str], roots: Sequence[str]) -> argparse.Namespace:
    out = argparse.Namespace(**vars(args))
    out.paths, out.against, out.changed_since = list(paths), list(roots), None
    return out


def _read_alone(path: str, holder: str) -> bool:
    """Whether the loader reads `path` itself when reading `holder`, rather than a kustomization's rendering."""
    if os.path.isfile(holder):
        return True
    real, top = os.path.realpath(os.path.dirname(path)), os.path.realpath(holder)
    if not (real == top or real.startswith(top + os.sep)):
        return False  # reached through a kustomization's resources outside the path
    while True:
        if templates.kustomization_file(real) is not None:
            return False
        if real == top or os.path.dirname(real) == real:
            return True
        real = os.path.dirname(real)


def _problems(found: fleet.Fleet, judged: Sequence[fleet.Cluster]) -> tuple[fleet.Problem, ...]:
    names = {c.name for c in judged}
    return tuple(p for p in found.problems if p.cluster is None or p.cluster in names)


def finding(problem: fleet.Problem, table: Table) -> findings.Finding:
    handle = table.add(Origin(problem.file, 0, {(): (problem.line, 1)}))
    return findings.make(DISCOVERY, findings.ObjectRef(FILE_KIND, problem.file), (), problem.message,
                         source=handle)


# --- `overlay-lint clusters` ----------------------------------------------------------------------------------


def _counts(cluster: fleet.Cluster, loader: Loader) -> tuple[dict[str, int], list[str]]:
    loaded = loader.load(list(cluster.paths), candidate=False) if cluster.paths else None
    kinds = {model.NODEOVERLAY: 0, model.NODEPOOL: 0}
    if loaded is None:
        return kinds, []
    for d in loaded.documents:
        kind = model.kind_of(d.obj)
        if kind in kinds:
            kinds[kind] += 1
    return kinds, [*loaded.notes, *(p.message for p in loaded.problems)]


def describe(found: fleet.Fleet, only: Sequence[str], loader: Loader) -> dict[str, Any]:
    clusters = []
    for cluster in chosen(found, only):
        counts, notes = _counts(cluster, loader)
        clusters.append({
            "name": cluster.name,
            "origin": cluster.origin.how,
            "declared": [str(o) for o in cluster.origins],
            "paths": list(cluster.paths),
            "region": cluster.region, "catalog": cluster.catalog, "crd": cluster.crd,
            "karpenterMetrics": cluster.karpenter_metrics,
            "nodeOverlays": counts[model.NODEOVERLAY], "nodePools": counts[model.NODEPOOL],
            "notes": notes,
        })
    return {"discovery": found.how, "clusters": clusters, "unclaimed": list(found.unclaimed),
            "errors": [{"file": p.file, "line": p.line, "cluster": p.cluster, "message": p.message}
                       for p in found.problems],
            "notes": list(found.notes)}


def write(data: dict[str, Any], fmt: str, out: TextIO) -> None:
    if fmt == "json":
        out.write(json.dumps(data, indent=2) + "\n")
        return
    out.write(f"{len(data['clusters'])} cluster(s), found by {data['discovery']}\n")
    for c in data["clusters"]:
        out.write(f"{c['name']}: {c['nodeOverlays']} NodeOverlay(s), {c['nodePools']} NodePool(s)\n")
        lines = [*(f"from {d}" for d in c["declared"]), *(f"path {p}" for p in c["paths"]),
                 *(f"{o} {c[o]}" for o in ("region", "catalog", "crd", "karpenterMetrics") if c[o] is not None),
                 *(f"note: {n}" for n in c["notes"])]
        out.writelines(f"  {line}\n" for line in lines)
    for path in data["unclaimed"]:
        out.write(f"unclaimed: {path} (no cluster reads it)\n")
    for e in data["errors"]:
        out.write(f"{e['file']}:{e['line']}: error {DISCOVERY}: {e['message']}\n")
    for note in data["notes"]:
        out.write(f"note: {note}\n")
