"""Differential tests against Karpenter itself: the fixture corpus through Karpenter's own
NodeOverlay controller (hack/karpenter-oracle, built from sigs.k8s.io/karpenter by
hack/karpenter-oracle.sh, which `make test` runs first) and through this project's core, the way
``overlay-lint simulate`` drives it, compared field by field.

Compared: each overlay's status (Applied / Conflict / Invalid); per NodePool and instance type,
every offering's effective price to the last bit (both sides compute in IEEE-754 doubles with
correctly rounded parsing, so there is no excuse for a difference) and every capacity resource
as an exact quantity in the same canonical text.

Deliberate differences, each asserted rather than skipped (see README, "Karpenter as the oracle"):

- Overlays the API server would refuse (``schema`` findings) never reach Karpenter; the cluster
  given to the oracle leaves them out, and the core must call them Invalid.
- A relative price change of an offering with no known base price: the core reports the price as
  unknown (null); Karpenter starts from 0.0, the price field's zero value.
- DRA (``spec.dynamicResources``) is not part of Karpenter's NodeOverlay type: the controller
  decodes and ignores it. Cases that only test DRA rules are compared on statuses and prices like
  any other; their template expectations are checked by hack/karpenter-oracle's DRA conversion
  (tests/test_oracle_dra.py).
"""

from __future__ import annotations

import importlib.resources
import json
import struct
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from lint import views
from simulation import evaluate as ev
from simulation import findings
from simulation.analysis import effects
from simulation.semantics import catalog as cat
from simulation.semantics import quantity
from tests import casefmt

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "hack" / "karpenter-oracle.sh"
DEFAULT_CATALOG = Path(str(importlib.resources.files("simulation").joinpath("data", cat.DEFAULT_DATA)))
BUILD_TIMEOUT = 1800
RUN_TIMEOUT = 900

Objects = Sequence[Mapping[str, Any]]


def oracle_binary() -> Path:
    """The cached binary; builds it on a machine where `make test` has not (never skips)."""
    proc = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=BUILD_TIMEOUT,
                          check=False)
    if proc.returncode != 0:
        pytest.fail(f"hack/karpenter-oracle.sh failed ({proc.returncode}):\n{proc.stderr}")
    return Path(proc.stdout.strip())


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


def project(objects: Objects, catalog: cat.Catalog | None) -> tuple[dict[str, Any], set[str]]:
    """What `overlay-lint simulate --format json` prints for these objects (every touched cell),
    and the overlays the API server would refuse (schema findings)."""
    types = [o for o in objects if o.get("kind") == "InstanceType"]
    chosen = cat.from_documents(types) if types else catalog or cat.default()
    docs = [ev.Document(o, i) for i, o in enumerate(objects) if o.get("kind") != "InstanceType"]
    report = ev.evaluate(docs, ev.prepare([], chosen))
    refused = {f.obj.name for f in report.findings
               if f.obj.kind == "NodeOverlay" and dict(f.detail).get("layer") == "apiserver"
               and f.severity == findings.Severity.ERROR}
    return views.simulation_json(report.status, effects.effects(report)), refused


def _bits(value: float) -> str:
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
            problems += _compare_cell(where, our_cells.get(it), their_cells.get(it))
    return problems


def _compare_cell(where: str, ours: Mapping[str, Any] | None, theirs: Mapping[str, Any] | None) -> list[str]:
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
        if _bits(float(mine["price"])) != other["priceBits"]:
            problems.append(f"{where} {key}: price core {mine['price']!r} ({_bits(float(mine['price']))}), "
                            f"Karpenter {other['price']!r} ({other['priceBits']})")
    problems += [f"{where} {key}: offering missing in the core" for key in their_offerings]
    our_capacity = dict(ours.get("capacity") or {})
    their_capacity = dict(theirs.get("capacity") or {})
    for res in sorted(set(our_capacity) | set(their_capacity)):
        a, b = our_capacity.get(res), their_capacity.get(res)
        exact = a is not None and b is not None and quantity.parse(a) == quantity.parse(b)
        if not exact or a != b:
            problems.append(f"{where} capacity {res}: core {a!r}, Karpenter {b!r}")
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


@pytest.fixture(scope="module")
def case_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Any, Any, set[str]]]:
    """All cases through both sides: one oracle process for the whole corpus."""
    base = tmp_path_factory.mktemp("oracle-cases")
    catalog = cat.default()
    dirs, ours = [], {}
    for case in CASES:
        objects = cluster_after_admission(case)
        ours[case.name] = project(objects, catalog)
        _, refused = ours[case.name]
        admitted = [o for o in objects if not (o.get("kind") == "NodeOverlay" and kind_name(o)[1] in refused)]
        dirs.append(write_objects(base / case.name, admitted))
    theirs = run_oracle(dirs, DEFAULT_CATALOG)
    return {c.name: (ours[c.name][0], t, ours[c.name][1]) for c, t in zip(CASES, theirs, strict=True)}


def test_corpus_reaches_the_oracle() -> None:
    assert len(CASES) >= 40


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_agrees_with_karpenter(case: casefmt.Case, case_results: Mapping[str, Any]) -> None:
    ours, theirs, refused = case_results[case.name]
    problems = compare(ours, theirs, refused)
    assert not problems, f"{case.name}: {case.description}\n  " + "\n  ".join(problems)


def test_comparison_catches_a_one_ulp_price_difference() -> None:
    price = 0.1 + 0.2
    cell = {"offerings": [{"zone": "z", "capacityType": "spot", "price": price, "basePrice": 1.0,
                           "priceOverlay": "a"}], "capacity": {"cpu": "1"}, "capacityOverlays": {}}
    nudged = struct.unpack(">d", struct.pack(">Q", struct.unpack(">Q", struct.pack(">d", price))[0] + 1))[0]
    offering = {"zone": "z", "capacityType": "spot", "price": nudged, "priceBits": _bits(nudged),
                "basePriceBits": _bits(1.0)}
    oracle: dict[str, Any] = {"offerings": [offering], "capacity": {"cpu": "1"}, "baseCapacity": {"cpu": "1"}}
    assert _compare_cell("p/t", cell, oracle)
    oracle["offerings"][0]["priceBits"] = _bits(price)
    assert not _compare_cell("p/t", cell, oracle)
    oracle["capacity"] = {"cpu": "1000m"}
    assert _compare_cell("p/t", cell, oracle), "the same quantity in another form is a difference"


def test_oracle_reports_karpenter_conflict(tmp_path: Path) -> None:
    """The harness itself: two equal-weight price overlays on one offering, Karpenter's own
    conflict (the later name in the alphabet goes first and wins)."""
    overlays = [{"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": n},
                 "spec": {"weight": 5, "price": p, "requirements": [
                     {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}]}}
                for n, p in (("a", "1.5"), ("b", "2.5"))]
    [result] = run_oracle([write_objects(tmp_path / "set", overlays)], DEFAULT_CATALOG)
    assert result["implicitDefaultNodePool"] is True
    assert {n: o["status"] for n, o in result["overlays"].items()} == {"a": "Conflict", "b": "Applied"}
    cell = result["nodepools"]["default"]["m5.large"]
    assert {o["price"] for o in cell["offerings"]} == {2.5}


def tempdir() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="oracle-")
