"""Plain helpers of the differential tests against Karpenter (no tests here): the oracle binary
(hack/karpenter-oracle), object directories it reads, this project's side of the comparison (what
`overlay-lint simulate` computes) and the field-by-field comparison itself."""

from __future__ import annotations

import importlib.resources
import json
import struct
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from lint import views
from simulation import evaluate as ev
from simulation import findings
from simulation.analysis import effects
from simulation.semantics import catalog as cat
from simulation.semantics import quantity, region
from simulation.validation import crds
from tests import casefmt, tools

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CATALOG = Path(str(importlib.resources.files("simulation").joinpath("data", cat.DEFAULT_DATA)))
BUILD_TIMEOUT = 1800
RUN_TIMEOUT = 900

Objects = Sequence[Mapping[str, Any]]


def oracle_binary() -> Path:
    """The cached binary; builds it on a machine where `make test` has not (never skips)."""
    return Path(tools.built("karpenter-oracle.sh", timeout=BUILD_TIMEOUT))


def run_oracle(dirs: Sequence[Path], catalog: Path | None, *extra: str) -> list[dict[str, Any]]:
    """One process for many directories: Karpenter's start-up is paid once."""
    argv = [str(oracle_binary()), *(["-catalog", str(catalog)] if catalog else []), *extra, *map(str, dirs)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False)
    assert proc.returncode == 0, f"karpenter-oracle exited {proc.returncode}:\n{proc.stderr}"
    results: list[dict[str, Any]] = json.loads(proc.stdout)["results"]
    assert [r["dir"] for r in results] == [str(d) for d in dirs]
    return results


def write_objects(directory: Path, objects: Objects) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    yaml = YAML(typ="safe", pure=True)
    with (directory / "objects.yaml").open("w", encoding="utf-8") as fh:
        yaml.dump_all([dict(o) for o in objects], fh)
    return directory


def kind_name(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata")
    return str(obj.get("kind")), str(meta.get("name") if isinstance(meta, Mapping) else None)


def placed(objects: Objects, catalog: cat.Catalog | None, where: str | None = None) -> cat.Catalog:
    """The catalog `overlay-lint` uses for these objects: their InstanceTypes or `catalog`, laid out in the region
    they name (or `where`, as --region)."""
    types = [o for o in objects if o.get("kind") == "InstanceType"]
    chosen = cat.from_documents(types) if types else catalog or cat.default()
    return region.choose(chosen, objects, where).catalog


def project(objects: Objects, catalog: cat.Catalog | None, where: str | None = None,
            crd: crds.Crd | None = None) -> tuple[dict[str, Any], set[str]]:
    """What `overlay-lint simulate [--region] [--crd] --format json` prints for these objects (every touched cell),
    and the overlays the API server would refuse (schema findings)."""
    chosen = placed(objects, catalog, where)
    docs = [ev.Document(o, i) for i, o in enumerate(objects) if o.get("kind") != "InstanceType"]
    report = ev.evaluate(docs, ev.prepare([], chosen, crd=crd))
    refused = {f.obj.name for f in report.findings
               if f.obj.kind == "NodeOverlay" and dict(f.detail).get("layer") == "apiserver"
               and f.severity == findings.Severity.ERROR}
    return views.simulation_json(report.status, effects.effects(report)), refused


def price_bits(value: float) -> str:
    return struct.pack(">d", value).hex()


def _offerings(cell: Mapping[str, Any]) -> dict[tuple[str, str], Mapping[str, Any]]:
    return {(str(o["zone"]), str(o["capacityType"])): o for o in cell.get("offerings") or ()}


def compare(ours: Mapping[str, Any], theirs: Mapping[str, Any], refused: Iterable[str] = ()) -> list[str]:
    """Every disagreement between the core's simulation and Karpenter's, as readable lines."""
    problems: list[str] = []
    if theirs.get("error"):
        return [f"karpenter-oracle: {theirs['error']}"]
    statuses = {n: o["status"] for n, o in (ours.get("overlays") or {}).items()}
    for name in refused:
        if statuses.pop(name, None) != "Invalid":
            problems.append(f"overlay {name}: the API server refuses it, the core does not call it Invalid")
    karpenter = {n: o["status"] for n, o in (theirs.get("overlays") or {}).items()}
    for name in sorted(set(statuses) | set(karpenter)):
        if statuses.get(name) != karpenter.get(name):
            why = (theirs.get("overlays") or {}).get(name, {}).get("message", "")
            problems.append(f"overlay {name}: core {statuses.get(name)}, Karpenter {karpenter.get(name)} {why}")
    our_pools = ours.get("nodepools") or {}
    their_pools = theirs.get("nodepools") or {}
    for pool in sorted(set(our_pools) | set(their_pools)):
        our_cells, their_cells = our_pools.get(pool) or {}, their_pools.get(pool) or {}
        for it in sorted(set(our_cells) | set(their_cells)):
            where = f"{pool}/{it}"
            problems += compare_cell(where, our_cells.get(it), their_cells.get(it))
    return problems


def compare_cell(where: str, ours: Mapping[str, Any] | None, theirs: Mapping[str, Any] | None) -> list[str]:
    """A cell only one side lists must be unchanged on the other; the harness lists the cells
    Karpenter's store touched, the core those an overlay wins a field of."""
    if ours is None:
        assert theirs is not None
        unchanged = all(o["priceBits"] == o["basePriceBits"] for o in theirs["offerings"])
        same_capacity = theirs["capacity"] == theirs["baseCapacity"]
        return [] if unchanged and same_capacity else [f"{where}: only Karpenter changes it: {theirs}"]
    if theirs is None:
        changed = [o for o in ours.get("offerings") or () if o.get("priceOverlay")]
        return [f"{where}: only the core changes it: {ours}"] if changed or ours.get("capacityOverlays") else []
    problems = []
    their_offerings = _offerings(theirs)
    for key, mine in _offerings(ours).items():
        other = their_offerings.pop(key, None)
        if other is None:
            problems.append(f"{where} {key}: offering missing in Karpenter")
            continue
        if mine.get("price") is None:
            # Unknown base price: a relative change stays unknown here, Karpenter starts from 0.
            if mine.get("basePrice") is not None:
                problems.append(f"{where} {key}: core price unknown, Karpenter {other['price']}")
            continue
        if price_bits(float(mine["price"])) != other["priceBits"]:
            problems.append(f"{where} {key}: price core {mine['price']!r} ({price_bits(float(mine['price']))}), "
                            f"Karpenter {other['price']!r} ({other['priceBits']})")
    problems += [f"{where} {key}: offering missing in the core" for key in their_offerings]
    return problems + _figures(where, "capacity", ours, theirs) + _figures(where, "allocatable", ours, theirs)


def _figures(where: str, key: str, ours: Mapping[str, Any], theirs: Mapping[str, Any]) -> list[str]:
    """The resource lists under `key` (capacity, allocatable): the same quantities in the same text."""
    problems = []
    our_figures, their_figures = dict(ours.get(key) or {}), dict(theirs.get(key) or {})
    for res in sorted(set(our_figures) | set(their_figures)):
        a, b = our_figures.get(res), their_figures.get(res)
        exact = a is not None and b is not None and quantity.parse(a) == quantity.parse(b)
        if not exact or a != b:
            problems.append(f"{where} {key} {res}: core {a!r}, Karpenter {b!r}")
    return problems


def cluster_after_admission(case: casefmt.Case) -> list[Mapping[str, Any]]:
    """Existing objects with the candidates replacing those of the same kind and name; of two
    candidates with one name the first counts (the second is reported as a duplicate)."""
    merged: dict[tuple[str, str], Mapping[str, Any]] = {}
    for obj in case.input_documents():
        if isinstance(obj, Mapping):
            merged.setdefault(kind_name(obj), obj)
    for obj in case.existing_documents():
        if isinstance(obj, Mapping):
            merged.setdefault(kind_name(obj), obj)
    return list(merged.values())


def _readable(case: casefmt.Case) -> bool:
    try:
        case.input_documents()
        case.existing_documents()
    except YAMLError:  # the parse-error cases are unreadable on purpose
        return False
    return True


CASES = [c for c in casefmt.discover() if _readable(c)]


def tempdir() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="oracle-")
