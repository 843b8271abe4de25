"""Random overlay sets through Karpenter's own controller and through the core (see
tests/test_oracle.py for what is compared and which differences are deliberate).

Each hypothesis example is a batch of sets, so one oracle process serves the whole batch; a
failure shrinks to the smallest batch and set that still disagree. The generator keeps to
overlays the API server accepts and leans on what makes Karpenter's store interesting: few
weights (ties), every requirement operator on instance type, family, capacity type, zone,
NodePool, NodePool template labels, integer labels and undefined keys, and every effect form in
many spellings; keys only some types define (GPU labels), a label whose value is empty on metal
types, template labels on instance-type keys, NodePool requirements, keys Karpenter's runtime
validation refuses (restricted domains, a name part over 63 characters, bad label values), names
that Karpenter's byte-wise name order tells apart, and crowds (one spec under several names).
"""

from __future__ import annotations

import collections
import copy
import functools
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulation.semantics import catalog as cat
from tests import oracle_support as oracle

# m4: the Xen hypervisor; the metal types of each: an empty instance-hypervisor label.
FAMILIES = ("m5", "c6i", "r7g", "p5", "g5", "t3", "m4")
SETS_PER_BATCH = 40
# A soak: OVERLAY_GUARD_ORACLE_SOAK=N runs N batches of new sets (not derandomized) instead of the fixed 8.
SOAK = os.environ.get("OVERLAY_GUARD_ORACLE_SOAK", "")
if SOAK and not SOAK.isdigit():
    raise pytest.UsageError(f"OVERLAY_GUARD_ORACLE_SOAK must be a number of batches, not {SOAK!r}")
BATCHES = int(SOAK) if SOAK else 8

INSTANCE_TYPE = "node.kubernetes.io/instance-type"
FAMILY = "karpenter.k8s.aws/instance-family"
CPU = "karpenter.k8s.aws/instance-cpu"
GENERATION = "karpenter.k8s.aws/instance-generation"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
ZONE = "topology.kubernetes.io/zone"
NODEPOOL = "karpenter.sh/nodepool"
POOLS = ("general", "gpu", "batch")
# The last four are instance-type keys too: a NodePool's value narrows (or empties) what its types define.
TEMPLATE_LABELS = {"team": ("ml", "web"), "example.com/tier": ("1", "2", "3"), FAMILY: ("m5", "g5"),
                   "karpenter.k8s.aws/instance-gpu-count": ("1", "8"), "kubernetes.io/arch": ("arm64",),
                   "karpenter.k8s.aws/instance-category": ("g", "m")}


def _catalog_data() -> dict[str, Any]:
    data = json.loads(oracle.DEFAULT_CATALOG.read_text(encoding="utf-8"))
    data["instanceTypes"] = [t for t in data["instanceTypes"]
                             if t["labels"].get(FAMILY) in FAMILIES]
    return dict(data)


CATALOG_DATA = _catalog_data()
TYPE_NAMES = tuple(t["name"] for t in CATALOG_DATA["instanceTypes"])

# key -> values to pick from (In/NotIn); integer keys also take Gt/Lt/Gte/Lte.
VALUES: dict[str, tuple[str, ...]] = {
    INSTANCE_TYPE: (*TYPE_NAMES[:12], "x9.huge", "m5.metal", "c6i.metal", "m4.large"),
    FAMILY: (*FAMILIES, "z1d"),
    # "dedicated" alone is no capacity type Karpenter knows: RuntimeValidation fails.
    CAPACITY_TYPE: ("on-demand", "spot", "reserved", "dedicated"),
    ZONE: ("us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"),
    NODEPOOL: (*POOLS, "default", "other"),
    "team": TEMPLATE_LABELS["team"] + ("ops",),
    "example.com/tier": TEMPLATE_LABELS["example.com/tier"],
    CPU: ("2", "4", "8", "96", "192"),
    GENERATION: ("5", "6", "7"),
    "example.com/undefined": ("a",),
    "karpenter.k8s.aws/instance-category": ("g", "m", "p"),
    "karpenter.k8s.aws/instance-memory": ("1024", "131072"),
    "kubernetes.io/arch": ("arm64", "amd64"),
    # Defined on the GPU and NVMe types only.
    "karpenter.k8s.aws/instance-gpu-count": ("1", "8", "4"),
    "karpenter.k8s.aws/instance-gpu-name": ("h100", "a10g"),
    "karpenter.k8s.aws/instance-local-nvme": ("250", "1900"),
    # "" is a label value: the metal types'.
    "karpenter.k8s.aws/instance-hypervisor": ("nitro", "", "xen"),
    # The API server accepts these; Karpenter's runtime validation does not (restricted domains, a name part
    # over 63 characters, values that are no label values). No YAML 1.1 boolean among them ("y", "on"): the
    # oracle reads its objects as YAML 1.1.
    "kubernetes.io/foo": ("x",),
    "k8s.io/bar": ("yy",),
    "node-restriction.kubernetes.io/z": ("z",),
    "example.com/" + "n" * 64: ("a",),
    "example.com/bad": ("bad value", "-x", "ok"),
}
BOUND_OPERATORS = ("Gt", "Lt", "Gte", "Lte")


@st.composite
def requirement(draw: st.DrawFn) -> dict[str, Any]:
    key = draw(st.sampled_from(sorted(VALUES)))
    op = draw(st.sampled_from(("In", "In", "NotIn", "Exists", "DoesNotExist", *BOUND_OPERATORS)))
    if op in ("Exists", "DoesNotExist"):
        return {"key": key, "operator": op}
    if op in BOUND_OPERATORS:
        # Bounds on non-integer labels (zone, family) are legal too and match nothing there.
        bound = draw(st.sampled_from((0, 1, 4, 6, 8, 100, 250, 1024, 131072)))
        return {"key": key, "operator": op, "values": [str(bound)]}
    values = draw(st.lists(st.sampled_from(VALUES[key]), min_size=1, max_size=3, unique=True))
    return {"key": key, "operator": op, "values": values}


# Spellings the CRD's patterns allow, decimals with no exact double among them: both sides must round alike.
PRICES = ("0", "0.5", "1.25", "3", "0.0421", "10.123456789", "00.5", "1.0", "0.1", "0.30000000000000004",
          "123456789.123456789", "0.000000001", "9999999999999999999999",
          "0.1000000000000000055511151231257827021181583404541015625")
ADJUSTMENTS = ("+0.1", "-0.05", "-1", "+10%", "-25%", "-100%", "+0.5%", "-33.3%", "+.7", "-99%", "+0", "+.5%",
               "-0%", "+1000%", "-99.9999%", "-00.1", "+999999999", "-.1", "-0.3", "+33.333333333333333%",
               "-0.000000001", "-9.99%")
CAPACITIES = ({"example.com/widget": "2"}, {"example.com/widget": "500m"}, {"example.com/gadget": "1Gi"},
              {"example.com/widget": "3", "example.com/gadget": "1k"}, {"nvidia.com/gpu": "8"},
              {"hugepages-2Mi": "64Mi"}, {"example.com/widget": "1.5Gi"}, {"example.com/gadget": "1024Ki"},
              {"example.com/widget": "0.5"}, {"example.com/widget": "12e-3"}, {"example.com/gadget": "2E"},
              # Spellings Go's String() echoes rather than canonicalizes ("1000001u", "3", "1500m"): Karpenter
              # holds the overlay's parsed quantity, so its capacity prints as written.
              {"example.com/widget": "1.000001"}, {"example.com/gadget": "+3"}, {"example.com/widget": "1.500"})


@st.composite
def overlay(draw: st.DrawFn, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    weight = draw(st.sampled_from((None, 1, 1, 10, 10000)))
    if weight is not None:
        spec["weight"] = weight
    # The CRD requires the field; an empty list is allowed and matches everything.
    spec["requirements"] = draw(st.lists(requirement(), max_size=3))
    price = draw(st.sampled_from(("none", "price", "adjustment", "adjustment")))
    if price == "price":
        spec["price"] = draw(st.sampled_from(PRICES))
    elif price == "adjustment":
        spec["priceAdjustment"] = draw(st.sampled_from(ADJUSTMENTS))
    if draw(st.booleans()):
        spec["capacity"] = dict(draw(st.sampled_from(CAPACITIES)))
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
            "spec": spec}


NODEPOOL_REQUIREMENTS: tuple[dict[str, Any], ...] = (
    {"key": CAPACITY_TYPE, "operator": "In", "values": ["spot"]},
    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
    {"key": FAMILY, "operator": "In", "values": ["m5", "c6i"], "minValues": 2},
    {"key": ZONE, "operator": "NotIn", "values": ["us-east-1a"]},
    {"key": "team", "operator": "In", "values": ["ml"]},
    {"key": CPU, "operator": "Gt", "values": ["4"]},
)


@st.composite
def nodepool(draw: st.DrawFn, name: str) -> dict[str, Any]:
    labels = {k: draw(st.sampled_from(v)) for k, v in TEMPLATE_LABELS.items() if draw(st.booleans())}
    template: dict[str, Any] = {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                          "name": "default"}}}
    if labels:
        template["metadata"] = {"labels": labels}
    # A NodePool's own requirements do not narrow the types its overlays apply to.
    requirements = draw(st.lists(st.sampled_from(NODEPOOL_REQUIREMENTS), max_size=3, unique_by=lambda r: r["key"]))
    if requirements:
        template["spec"]["requirements"] = requirements
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": template}}


# Karpenter orders a weight's overlays by name, descending, byte by byte: names that differ in `-`, `.`, digits
# and length.
NAMES = ("a", "a-b", "a.b", "a0", "ab", "b", "a.0", "z9", "0a", "a--b", "aa.b", "9", "a-0", "ov-a")


@st.composite
def overlay_set(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(min_value=2, max_value=10))
    names = draw(st.permutations(NAMES))[:count]
    pools = draw(st.lists(st.sampled_from(POOLS), max_size=3, unique=True))
    overlays = [draw(overlay(n)) for n in names]
    if draw(st.booleans()):
        # Crowds: copies of an earlier overlay's spec under other names, which Karpenter's loop meets in runs.
        for i in range(1, len(overlays)):
            if draw(st.booleans()):
                overlays[i]["spec"] = copy.deepcopy(overlays[draw(st.integers(0, i - 1))]["spec"])
    return [*(draw(nodepool(p)) for p in pools), *overlays]


@functools.cache
def core_catalog() -> cat.Catalog:
    return cat.from_json(CATALOG_DATA)


@pytest.fixture(scope="module")
def catalog_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("oracle-catalog") / "catalog.json"
    path.write_text(json.dumps(CATALOG_DATA), encoding="utf-8")
    return path


def test_generator_covers_the_catalog() -> None:
    assert len(TYPE_NAMES) >= 30
    assert any(t.startswith("p5.") for t in TYPE_NAMES) and any(t.startswith("r7g.") for t in TYPE_NAMES)
    hypervisors = {t["labels"].get("karpenter.k8s.aws/instance-hypervisor") for t in CATALOG_DATA["instanceTypes"]}
    assert {"", "nitro", "xen"} <= hypervisors
    assert set(VALUES[INSTANCE_TYPE]) - {"x9.huge"} <= set(TYPE_NAMES)


@pytest.mark.tools
def test_random_sets_agree_with_karpenter(catalog_file: Path) -> None:
    catalog = core_catalog()
    seen: collections.Counter[str] = collections.Counter()

    @settings(max_examples=BATCHES, deadline=None, derandomize=not SOAK, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(batch=st.lists(overlay_set(), min_size=SETS_PER_BATCH // 2, max_size=SETS_PER_BATCH))
    def agree(batch: list[list[dict[str, Any]]]) -> None:
        with oracle.tempdir() as tmp:
            ours, dirs = [], []
            for i, objects in enumerate(batch):
                simulated, refused = oracle.project(objects, catalog)
                assert not refused, f"the generator made an overlay the API server refuses: {sorted(refused)}"
                ours.append(simulated)
                dirs.append(oracle.write_objects(Path(tmp) / f"set-{i}", objects))
            theirs = oracle.run_oracle(dirs, catalog_file)
        for objects, mine, other in zip(batch, ours, theirs, strict=True):
            problems = oracle.compare(mine, other)
            assert not problems, "\n  ".join(["disagreement:", *problems, "set:", _dump(objects)])
            seen.update(o["status"] for o in other["overlays"].values())
            seen.update(_changes(other))
        seen["sets"] += len(batch)

    agree()
    # The comparison is only worth as much as what the sets make Karpenter do.
    assert seen["sets"] >= BATCHES * SETS_PER_BATCH // 2, seen
    for outcome in ("Applied", "Conflict", "Invalid", "price", "capacity"):
        assert seen[outcome] > 0, f"no random set produced {outcome}: {seen}"
    print(f"random sets compared with Karpenter: {seen['sets']} ({dict(seen)})")


def _changes(result: Mapping[str, Any]) -> set[str]:
    out = set()
    for cells in (result.get("nodepools") or {}).values():
        for cell in cells.values():
            if any(o["priceBits"] != o["basePriceBits"] for o in cell["offerings"]):
                out.add("price")
            if cell["capacity"] != cell["baseCapacity"]:
                out.add("capacity")
    return out


def _dump(objects: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(json.dumps(o, sort_keys=True) for o in objects)
