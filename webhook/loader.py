"""Files the webhook reads at start: `--state` objects, the `--catalog` and the `--crd`, read by the
linter's reader (`sources`), so that the same file means the same objects to both front ends.

Any finding the reader makes about a `--state` file (a YAML error, `team: on` where a label value
belongs) refuses the file: a demo or test cluster built on objects the API server would refuse says
nothing about a real one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simulation.semantics import catalog as cat
from simulation.validation import crds
from sources import context, files, objects, positions

LoadError = files.InputError


def read_state(paths: Sequence[Path]) -> objects.Loaded:
    """The `--state` files, read once: their NodeOverlays and NodePools and their InstanceTypes."""
    table = positions.Table()
    loaded = objects.Loader(table).load([str(p) for p in paths], candidate=False)
    if loaded.problems:
        first = loaded.problems[0]
        where = table.locate(first)
        place = ":".join(str(p) for p in (where.file, where.line, where.column) if p is not None)
        more = f" (and {len(loaded.problems) - 1} more)" if len(loaded.problems) > 1 else ""
        raise LoadError(f"--state {place or first.obj.name}: {first.message}{more}")
    return loaded


def state_objects(paths: Sequence[Path]) -> list[Mapping[str, Any]]:
    """NodeOverlays and NodePools from files and directories; other kinds are ignored."""
    return [d.obj for d in read_state(paths).documents]


def load_crd(value: str | None) -> crds.Crd | None:
    """`--crd` (`dra` or a file): the NodeOverlay CRD to validate against (None: Karpenter's own, embedded)."""
    return None if value is None else context.read_crd(value)


def load_catalog(path: Path | None, state: Sequence[Path] = ()) -> cat.Catalog:
    """`--catalog`, else InstanceType objects among the `--state` files, else the embedded default."""
    return catalog_for(path, read_state(state) if state else None)


def catalog_for(path: Path | None, state: objects.Loaded | None) -> cat.Catalog:
    """`load_catalog` over `--state` files already read."""
    found = state.instance_types if state is not None else []
    return context.choose(None if path is None else str(path), [(obj, "--state") for obj, _ in found])
