"""Files the webhook reads at start: `--state` objects, the `--catalog` and the `--crd`.

Deliberately small and separate from the linter's loader: the webhook needs plain objects,
not source positions, and these files come from the operator, not from a pull request.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from simulation.semantics import catalog as cat
from simulation.semantics import model
from simulation.validation import crds
from webhook import store

SUFFIXES = (".yaml", ".yml", ".json")
MAX_FILE_BYTES = 64 * 1024 * 1024


class LoadError(Exception):
    """A file that cannot be used; the message names it."""


def plain(value: Any) -> Any:
    """YAML timestamps become strings, so every object is what the API server would send."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    return value


def files(paths: Iterable[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in SUFFIXES)
        elif path.exists():
            yield path
        else:
            raise LoadError(f"{path}: no such file or directory")


def documents(path: Path) -> list[Any]:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise LoadError(f"{path}: larger than {MAX_FILE_BYTES} bytes")
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise LoadError(f"{path}: {err}") from None
    try:
        if path.suffix == ".json":
            return [json.loads(text)]
        return [plain(d) for d in YAML(typ="safe", pure=True).load_all(text) if d is not None]
    except (ValueError, YAMLError, RecursionError) as err:
        raise LoadError(f"{path}: {str(err).splitlines()[0] if str(err) else type(err).__name__}") from None


def expand(doc: Any) -> Iterator[Any]:
    """`kind: List` (what `kubectl get -o yaml` writes) and bare JSON arrays hold objects."""
    if isinstance(doc, list):
        for item in doc:
            yield from expand(item)
    elif isinstance(doc, Mapping) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
        for item in doc["items"]:
            yield from expand(item)
    else:
        yield doc


def state_objects(paths: Sequence[Path]) -> list[Mapping[str, Any]]:
    """NodeOverlays and NodePools from files and directories; other kinds are ignored."""
    out: list[Mapping[str, Any]] = []
    for path in files(paths):
        for doc in documents(path):
            out.extend(o for o in expand(doc) if isinstance(o, Mapping) and model.kind_of(o) in store.KINDS)
    return out


def load_crd(path: Path | None) -> crds.Crd | None:
    """The NodeOverlay CRD to validate against (None: the embedded DRA-extended one)."""
    if path is None:
        return None
    try:
        return crds.load_from(documents(path), str(path))
    except crds.CrdError as err:
        raise LoadError(str(err)) from None


def load_catalog(path: Path | None) -> cat.Catalog:
    """The embedded default, the JSON catalog format, or InstanceType documents."""
    if path is None:
        return cat.default()
    docs = [d for doc in documents(path) for d in expand(doc)]
    try:
        if len(docs) == 1 and isinstance(docs[0], Mapping) and "instanceTypes" in docs[0]:
            return cat.from_json(docs[0])
        types = [d for d in docs if isinstance(d, Mapping) and d.get("kind") == model.INSTANCETYPE]
        if not types:
            raise LoadError(f"{path}: neither a JSON catalog nor InstanceType documents")
        return cat.from_documents(types)
    except cat.CatalogError as err:
        raise LoadError(f"{path}: {err}") from None
