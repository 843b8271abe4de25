"""`overlay-lint diff BASE..HEAD` in a repository of many clusters: each revision's clusters discovered as `check`
discovers them (docs/cli.md "Fleets"), and each cluster's two sides read apart.

Discovery and rendering read a directory tree (kustomize and Flux paths are rendered from files), so each revision
is written out with `git archive` into a temporary directory; the files found there are then named as the work tree
names them (relative to the working directory), as the one-cluster diff names its blobs.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import os
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator, Sequence

from lint import fleets
from sources import files, fleet, git
from sources.positions import Table

CHANGED, ADDED, REMOVED = "changed", "added", "removed"


@dataclasses.dataclass(frozen=True)
class Tree:
    """One revision written out: where, and the label people see ("main (1a2b3c4d5e6f)")."""

    root: str
    label: str
    # The user's paths (and --config), as they are in this tree.
    paths: tuple[str, ...]
    config: str | None


@dataclasses.dataclass(frozen=True)
class Pair:
    """One cluster's two sides: its discovery on each revision (None where it is not on that side)."""

    name: str
    base: fleet.Cluster | None
    head: fleet.Cluster | None

    @property
    def change(self) -> str:
        return ADDED if self.base is None else REMOVED if self.head is None else CHANGED


@dataclasses.dataclass(frozen=True)
class Revisions:
    repo: str
    base: Tree
    head: Tree
    found: tuple[fleet.Fleet, fleet.Fleet]

    @property
    def split(self) -> bool:
        return any(f.split for f in self.found)

    def pairs(self, only: Sequence[str]) -> list[Pair]:
        """Every cluster of either side, in the head's order then the base's; `only` limits them (a name on
        neither side is a usage error naming the clusters)."""
        base, head = ({c.name: c for c in f.clusters} for f in self.found)
        names = list(dict.fromkeys([*head, *base]))
        if only:
            both = dataclasses.replace(self.found[1], clusters=tuple(head.get(n) or base[n] for n in names))
            names = [c.name for c in fleets.chosen(both, only)]
        return [Pair(n, base.get(n), head.get(n)) for n in names]

    def problems(self) -> list[str]:
        """Discovery errors on the head side, as notes: they are the change's, and `check` reports them."""
        return [self.said(f"{p.file}:{p.line}: {fleets.DISCOVERY}: {p.message}") for p in self.found[1].problems]

    def shown(self, name: str) -> str:
        """A file of either tree as the work tree names it."""
        for tree in (self.base, self.head):
            if name == tree.root or name.startswith(tree.root + os.sep):
                return os.path.relpath(os.path.join(self.repo, os.path.relpath(name, tree.root)))
        return name

    def said(self, text: str) -> str:
        """A note with the files of either tree named as the work tree names them."""
        here = os.path.relpath(self.repo)
        for tree in (self.base, self.head):
            text = text.replace(tree.root + os.sep, "" if here == "." else here + os.sep)
        return text


def _archive(repo: str, sha: str, into: str) -> None:
    try:
        done = subprocess.run(["git", "archive", "--format=tar", sha], cwd=repo, capture_output=True,
                              timeout=git.GIT_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        raise files.InputError(f"git archive took longer than {git.GIT_TIMEOUT:.0f}s") from None
    if done.returncode != 0:
        raise files.InputError(f"git archive {sha[:12]}: {done.stderr.decode('utf-8', 'replace').strip()}")
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as archive:
        # Python versions with extraction filters refuse members that would land outside `into`; git's own
        # archive of a commit holds none, so older ones extract as they are.
        if hasattr(tarfile, "data_filter"):
            archive.extraction_filter = tarfile.data_filter
        archive.extractall(into)


def _inside(path: str, repo: str, root: str) -> str:
    return os.path.normpath(os.path.join(root, os.path.relpath(os.path.abspath(path), repo)))


@contextlib.contextmanager
def revisions(span: git.Range, paths: Sequence[str], config: str | None) -> Iterator[Revisions]:
    """Both revisions written out and discovered; the trees are removed on leaving."""
    repos = {git.toplevel(p) for p in paths}
    if len(repos) != 1:
        raise fleets.UsageError(f"the paths are in {len(repos)} git repositories; give paths of one")
    repo = repos.pop()
    with tempfile.TemporaryDirectory(prefix="overlay-lint-diff-") as scratch:
        trees = []
        for side, revision in (("base", span.base), ("head", span.head)):
            sha = git.commit(repo, revision)
            root = os.path.join(scratch, side)
            _archive(repo, sha, root)
            mine = config
            if config is not None and os.path.abspath(config).startswith(repo + os.sep):
                mine = _inside(config, repo, root)
            trees.append(Tree(root, f"{revision} ({sha[:12]})", tuple(_inside(p, repo, root) for p in paths), mine))
        base, head = trees
        found = tuple(_discover(t) for t in trees)
        yield Revisions(repo, base, head, (found[0], found[1]))


def _discover(tree: Tree) -> fleet.Fleet:
    try:
        return fleet.discover(list(tree.paths), tree.config)
    except fleet.ConfigError as err:
        raise fleets.UsageError(str(err)) from None


def side_args(args: argparse.Namespace, cluster: fleet.Cluster) -> argparse.Namespace:
    return fleets.for_cluster(args, cluster, paths=list(cluster.paths), against=[], changed_since=None)


def relabelled(table: Table, revisions: Revisions) -> Table:
    """The table with every file named as the work tree names it; handles are unchanged."""
    out = Table()
    for handle in range(len(table)):
        origin = table[handle]
        out.add(dataclasses.replace(
            origin, file=None if origin.file is None else revisions.shown(origin.file),
            patched={path: (revisions.shown(file), at) for path, (file, at) in origin.patched.items()}))
    return out

