"""What a run checks against: the catalog (`--catalog`, InstanceType documents among the inputs, or the
default) and the NodeOverlay CRD (`--crd`, the cluster's with `--cluster`, or Karpenter's own, embedded)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from simulation.semantics import catalog as cat
from simulation.validation import crds, syntax
from sources import files, tree
from sources.objects import Loader
from sources.positions import Table

# The catalog is trusted configuration rather than a file under review, and the embedded one
# alone is over 1 MiB, so it gets its own, larger limit.
CATALOG_MAX_BYTES = 256 * 1024 * 1024


def _read_config(path: str, option: str) -> tuple[files.Text, str]:
    """A file given to `option` (a catalog, a CRD) and its content, errors naming the option."""
    source = files.Source(path, None if path == files.STDIN else path)
    try:
        text = files.read(source, CATALOG_MAX_BYTES)
    except files.InputError as err:
        raise files.InputError(f"{option} {err}") from None
    if text.text is None:
        raise files.InputError(f"{option} {path}: {text.problem}")
    return text, text.text


def read_catalog(path: str) -> cat.Catalog:
    """A JSON catalog (the embedded format) or YAML/JSON InstanceType documents."""
    text, content = _read_config(path, "--catalog")
    try:
        data: Any = json.loads(content)
    except ValueError:
        data = None
    try:
        if isinstance(data, Mapping) and "instanceTypes" in data:
            return cat.from_json(data)
        return _from_documents(path, text)
    except cat.CatalogError as err:
        raise files.InputError(f"--catalog {path}: {err}") from None


def _from_documents(path: str, text: files.Text) -> cat.Catalog:
    loaded = Loader(Table()).load_text(text)
    if loaded.problems:
        first = loaded.problems[0]
        raise files.InputError(f"--catalog {path}: {first.message}")
    if not loaded.instance_types:
        raise files.InputError(f"--catalog {path}: neither a JSON catalog (an object with 'instanceTypes') "
                                "nor YAML with InstanceType documents")
    return cat.from_documents([obj for obj, _ in loaded.instance_types])


def choose(catalog_path: str | None, documents: Sequence[tuple[Mapping[str, Any], str]]) -> cat.Catalog:
    """`documents`: InstanceType objects found among the inputs, with where each came from."""
    if catalog_path is not None and documents:
        raise files.InputError(
            f"both --catalog {catalog_path} and InstanceType documents (first in {documents[0][1]}) were "
            "given; use one or the other")
    if catalog_path is not None:
        return read_catalog(catalog_path)
    if documents:
        try:
            return cat.from_documents([obj for obj, _ in documents])
        except cat.CatalogError as err:
            raise files.InputError(f"InstanceType documents: {err}") from None
    return cat.default()


# --- the NodeOverlay CRD: `--crd`, the cluster's, or Karpenter's own (embedded) --------------------------

# `--crd dra`: the embedded DRA-extended CRD (a file of that name is `--crd ./dra`).
DRA = "dra"


def read_crd(value: str) -> crds.Crd:
    """`--crd`: `dra`, or the NodeOverlay CRD in a YAML or JSON file, which may hold other CRDs too (all of
    Karpenter's)."""
    if value == DRA:
        return crds.dra()
    documents = []
    for parsed in tree.documents(_read_config(value, "--crd")[1]):
        if parsed.problem is not None:
            line, column = parsed.problem.position
            raise files.InputError(f"--crd {value}:{line}:{column}: {parsed.problem.message}")
        documents.append(syntax.plain_json(parsed.value))
    try:
        return crds.load_from(documents, f"--crd {value}")
    except crds.CrdError as err:
        raise files.InputError(str(err)) from None


def choose_crd(value: str | None, cluster_crd: Mapping[str, Any] | None) -> crds.Crd:
    """`--crd` first, then the cluster's (with `--cluster`), else Karpenter's own, embedded."""
    if value is not None:
        return read_crd(value)
    if cluster_crd is None:
        return crds.karpenter()
    try:
        return crds.load(syntax.plain_json(cluster_crd), f"the cluster's {crds.NAME}")
    except crds.CrdError as err:
        raise files.InputError(str(err)) from None


def crd_notes(crd: crds.Crd) -> list[str]:
    """What the run cannot check of the CRD it uses: the API server may still refuse what passes."""
    return [f"{crd.origin}: rule {rule!r} is not checked: it {why}" for rule, why in crd.unchecked()]
