"""The two sides of `overlay-lint diff` and `report --diff`: what they are read from and how.

- `BASE..HEAD [PATH...]` (or `BASE...HEAD`, from the merge base): the paths at two revisions of the git
  repository they are in, read with git's plumbing (sources/git.py), no checkout. A file with the same
  blob on both sides is parsed once and its documents shared.
- `OLD NEW`: two files or directories.
- `--cluster NEW...`: the cluster's objects as the base; the head is what applying NEW gives (its objects
  replace those of the same kind and name, as `kubectl apply` and `check --cluster` do).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

from simulation.semantics import model
from sources import files, git, kube
from sources.objects import Loaded, Loader


class UsageError(Exception):
    pass


@dataclasses.dataclass
class Sides:
    base: Loaded
    head: Loaded
    # What each side is, for people: "main (1a2b3c4d5e6f)", a path, "the cluster".
    base_label: str
    head_label: str
    notes: list[str]


def load(loader: Loader, paths: Sequence[str], cluster: bool, kubeconfig: str | None = None,
         context: str | None = None) -> Sides:
    if cluster:
        return _cluster(loader, paths, kubeconfig, context)
    if paths and not os.path.exists(paths[0]) and (span := git.parse_range(paths[0])) is not None:
        return _revisions(loader, span, paths[1:] or ["."])
    if len(paths) != 2:
        raise UsageError("diff takes BASE..HEAD [PATH...], two paths OLD NEW, or --cluster NEW...")
    return Sides(loader.load([paths[0]]), loader.load([paths[1]]), paths[0], paths[1], [])


def _revisions(loader: Loader, span: git.Range, paths: Sequence[str]) -> Sides:
    repos = {git.toplevel(p) for p in paths}
    if len(repos) != 1:
        raise UsageError(f"the paths are in {len(repos)} git repositories; give paths of one")
    repo = repos.pop()
    notes: list[str] = []
    parsed: dict[tuple[str, str], Loaded] = {}
    sides = []
    listed: list[set[str]] = []
    for revision in (span.base, span.head):
        sha = git.commit(repo, revision)
        blobs, unread = git.listing(repo, sha, paths)
        notes += unread
        listed.append({b.name for b in blobs})
        side = Loaded()
        fresh = [b for b in blobs if (b.name, b.oid) not in parsed]
        for blob, text in zip(fresh, git.read(repo, fresh, loader.max_bytes), strict=True):
            parsed[blob.name, blob.oid] = loader.load_text(text)
        for blob in blobs:
            side.extend(parsed[blob.name, blob.oid])
        sides.append((side, f"{revision} ({sha[:12]})"))
    for path in paths:
        prefix = os.path.normpath(os.path.relpath(os.path.abspath(path)))
        if prefix != "." and not any(_under(n, prefix) for names in listed for n in names):
            raise files.InputError(f"{path}: no YAML or JSON file there at {span.base} or {span.head}")
    (base, base_label), (head, head_label) = sides
    return Sides(base, head, base_label, head_label, notes)


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix.rstrip(os.sep) + os.sep)


def _cluster(loader: Loader, paths: Sequence[str], kubeconfig: str | None, context: str | None) -> Sides:
    if not paths:
        raise UsageError("diff --cluster takes the files to apply: diff --cluster NEW...")
    objects, notes = kube.read(kubeconfig, context)
    base = loader.add_objects(objects, candidate=True)
    applied = loader.load(paths)
    mine = {(model.kind_of(d.obj), model.name_of(d.obj)) for d in applied.documents}
    head = Loaded()
    head.extend(applied)
    head.documents += [d for d in base.documents if (model.kind_of(d.obj), model.name_of(d.obj)) not in mine]
    return Sides(base, head, "the cluster" + (f" ({context})" if context else ""),
                 "the cluster with " + ", ".join(paths) + " applied", list(notes))
