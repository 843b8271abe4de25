"""Hypothesis strategies shared by the property tests: small catalogs, NodeOverlays and NodePools over
a few labels, where keys are defined on one level or on two (NodePool template and instance type)."""

from __future__ import annotations

from typing import Any

from hypothesis import settings
from hypothesis import strategies as st

from simulation.semantics import catalog as cat
from simulation.semantics import cellset

ZONES = ["z-a", "z-b"]
CAPACITY_TYPES = ["on-demand", "spot"]
KEYS = ["family", "cpu", "team", "custom", "karpenter.sh/nodepool", "topology.kubernetes.io/zone",
        "karpenter.sh/capacity-type", "node.kubernetes.io/instance-type", "missing"]
VALUES = ["a", "b", "1", "2", "4", "16", "t1", "t2", "p0", "p1", "z-a", "z-b", "spot", "on-demand", "it0", "it1"]

# What a test's own number of examples is worth against Hypothesis' default, under the loaded profile.
DEFAULT_EXAMPLES = 100
FEWEST_EXAMPLES = 10


def examples(wanted: int) -> int:
    """`wanted` examples (written against Hypothesis' default of 100) scaled by the loaded profile
    (tests/conftest.py): a quarter of them under `ci`, ten times as many under `soak`."""
    return max(FEWEST_EXAMPLES, wanted * settings().max_examples // DEFAULT_EXAMPLES)


@st.composite
def instance_types(draw: Any) -> cat.Catalog:
    count = draw(st.integers(1, 4))
    types = []
    for i in range(count):
        labels = {"family": draw(st.sampled_from(["a", "b"])), "cpu": draw(st.sampled_from(["1", "2", "4", "16"])),
                  "node.kubernetes.io/instance-type": f"it{i}"}
        if draw(st.booleans()):
            labels["custom"] = draw(st.sampled_from(["a", "t1"]))
        pairs = draw(st.lists(st.tuples(st.sampled_from(ZONES), st.sampled_from(CAPACITY_TYPES)),
                              min_size=0, max_size=4, unique=True))
        offerings = tuple(cat.Offering(z, c, draw(st.sampled_from([0.5, 1.25, 3.0]))) for z, c in pairs)
        # Memory the hugepages below can take some of, most of, or all of; a few types have their own.
        resources = {"cpu": "2", "memory": draw(st.sampled_from(["2Gi", "3Gi"]))}
        resources.update(draw(st.sampled_from([{}, {}, {"hugepages-1Gi": "1Gi"}])))
        types.append(cat.InstanceType(f"it{i}", labels, resources, offerings))
    return cat.Catalog(tuple(types), "generated")


@st.composite
def requirement(draw: Any) -> dict[str, Any]:
    op = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"]))
    key = draw(st.sampled_from(KEYS))
    if op in ("In", "NotIn"):
        values = draw(st.lists(st.sampled_from(VALUES), min_size=1, max_size=3))
    elif op in ("Gt", "Lt", "Gte", "Lte"):
        values = [str(draw(st.integers(0, 20)))]
    else:
        values = []
    out: dict[str, Any] = {"key": key, "operator": op}
    if values:
        out["values"] = values
    return out


@st.composite
def overlay_docs(draw: Any) -> list[dict[str, Any]]:
    docs = []
    for i in range(draw(st.integers(1, 6))):
        spec: dict[str, Any] = {"requirements": draw(st.lists(requirement(), max_size=3))}
        weight = draw(st.sampled_from([None, 1, 2]))
        if weight is not None:
            spec["weight"] = weight
        price = draw(st.sampled_from([None, "price", "up", "down", "pct", "-100%"]))
        if price == "price":
            spec["price"] = draw(st.sampled_from(["0.5", "7"]))
        elif price == "up":
            spec["priceAdjustment"] = "+1.5"
        elif price == "down":
            spec["priceAdjustment"] = "-2"
        elif price == "pct":
            spec["priceAdjustment"] = draw(st.sampled_from(["+10%", "-25%"]))
        elif price is not None:
            spec["priceAdjustment"] = price
        capacity = draw(st.sampled_from([None, {}, {"r1": "1"}, {"r2": "2"}, {"r1": "3", "r2": "1"},
                                         {"hugepages-2Mi": "1Gi"}, {"hugepages-1Gi": "2Gi", "r1": "1"}]))
        if capacity is not None:
            spec["capacity"] = capacity
        docs.append({"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
                     "metadata": {"name": f"o{i}"}, "spec": spec})
    return docs


@st.composite
def pool_docs(draw: Any) -> list[dict[str, Any]]:
    docs = []
    for i in range(draw(st.integers(0, 3))):
        # "family", "custom" and "cpu" are instance-type labels too: keys defined on two levels.
        labels = draw(st.dictionaries(st.sampled_from(["team", "family", "custom", "cpu"]),
                                      st.sampled_from(["t1", "t2", "a", "2", "16"]), max_size=3))
        # Template requirements narrow what the NodePool launches, never the cells (SPEC §3 "Cells").
        template: dict[str, Any] = {"metadata": {"labels": labels}}
        requirements = draw(st.lists(requirement(), max_size=2))
        if requirements:
            template["spec"] = {"requirements": requirements}
        docs.append({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": f"p{i}"},
                     "spec": {"template": template}})
    return docs


def products(pools: st.SearchStrategy[int], slots: st.SearchStrategy[int], block: int,
             parts: int) -> st.SearchStrategy[cellset.Cells]:
    """A union of up to `parts` products (NodePools x slots of one block), as overlays' cells are."""
    def union(pairs: list[tuple[int, int]]) -> cellset.Cells:
        out = cellset.Cells((), block)
        for pools_mask, bits in pairs:
            out |= cellset.Cells.product(pools_mask, bits, block)
        return out

    return st.lists(st.tuples(pools, slots), max_size=parts).map(union)


# Shapes the API server or Karpenter's RuntimeValidate refuses (and a few near misses it accepts): each replaces
# one field of a drawn overlay, so a run mixes Invalid overlays with the ones the loop takes.
BREAKAGES: tuple[tuple[str, Any], ...] = (
    ("weight", 0), ("weight", 10001), ("weight", 10000), ("priceAdjustment", "-150%"), ("priceAdjustment", "-100%"),
    ("priceAdjustment", "+5%"), ("price", "-1"), ("price", "1.5"), ("capacity", {"cpu": "1"}),
    ("capacity", {"r1": "1x"}), ("capacity", {"example.com/r": "500m"}),
    ("requirement", {"key": "karpenter.sh/other", "operator": "Exists"}),
    ("requirement", {"key": "x.karpenter.sh/a", "operator": "Exists"}),
    ("requirement", {"key": "kubernetes.io/hostname", "operator": "Exists"}),
    ("requirement", {"key": "family", "operator": "Gt", "values": ["-1"]}),
    ("requirement", {"key": "family", "operator": "Lt", "values": ["x"]}),
    ("requirement", {"key": "family", "operator": "Gte", "values": ["1", "2"]}),
    ("requirement", {"key": "family", "operator": "In", "values": ["bad value"]}),
    ("requirement", {"key": "family", "operator": "NotIn"}),
    ("requirement", {"key": "family", "operator": "In"}),
    ("requirement", {"key": "family", "operator": "Near", "values": ["a"]}),
    ("requirement", {"key": "Bad_Key/x", "operator": "Exists"}),
    ("requirement", {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["cheap"]}),
    ("requirement", {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["cheap", "spot"]}),
    ("requirement", {"key": "failure-domain.beta.kubernetes.io/zone", "operator": "In", "values": ["z-a"]}),
)


@st.composite
def mixed_overlay_docs(draw: Any) -> list[dict[str, Any]]:
    """overlay_docs with some of them broken one field at a time (BREAKAGES)."""
    docs: list[dict[str, Any]] = draw(overlay_docs())
    for doc in docs:
        if not draw(st.booleans()):
            continue
        field, value = draw(st.sampled_from(BREAKAGES))
        spec = doc["spec"]
        if field == "requirement":
            spec["requirements"] = [*spec["requirements"], value]
        else:
            spec[field] = value
    return docs


def _priced(name: str, weight: int, *requirements: tuple[str, str, list[str]], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
            "spec": {"weight": weight, "requirements": [{"key": k, "operator": op, "values": v}
                                                        for k, op, v in requirements], **spec}}


def _pool(name: str, *requirements: tuple[str, str, list[str]]) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": {"metadata": {"labels": {}}, "spec": {"requirements": [
                {"key": k, "operator": op, "values": v} for k, op, v in requirements]}}}}


# Explicit examples of issue 40's rows for the property tests, over one type offered on-demand and spot in one zone.
CT = "karpenter.sh/capacity-type"
PAIR = cat.Catalog((cat.InstanceType("it0", {"family": "a"}, {"cpu": "2", "memory": "2Gi"},
                                     (cat.Offering("z-a", "on-demand", 1.0), cat.Offering("z-a", "spot", 1.0))),),
                   "example")
# Issue 40 row 1: `l` loses its spot offering to `a`; `b` sets only the on-demand one.
SPLIT = [_priced("a", 2, (CT, "In", ["spot"]), price="0.5"), _priced("b", 2, (CT, "In", ["on-demand"]), price="0.5"),
         _priced("l", 1, (CT, "In", ["spot"]), price="0.5")]
# Issue 40 row 2: Karpenter meets the capacity clash first in NodePool `p0`, which never launches the type.
CLASH = [_priced("o0", 2, ("family", "In", ["a"]), capacity={"r1": "1"}),
         _priced("o1", 2, ("family", "In", ["a"]), capacity={"r1": "2"})]
POOLS = [_pool("p0", ("family", "In", ["b"])), _pool("p1")]


@st.composite
def crowds(draw: Any, above: int) -> list[dict[str, Any]]:
    """More than `above` overlays (a size cutoff of the core: past it a crowd is taken in arrays, not one by one):
    a few drawn specs, each under many names, some copies at another weight, the names interleaving the copies in
    Karpenter's order. Named `c000`, `c001`, ..."""
    # One or two specs: each copied past the cutoff, so that one candidate meets more than it of one weight.
    specs = [d["spec"] for d in draw(overlay_docs())][:draw(st.integers(1, 2))]
    count = draw(st.integers(above + 1, above + 24))
    copies = [dict(specs[i % len(specs)]) for i in range(count * len(specs))]
    for spec in copies:
        if draw(st.integers(0, 7)) == 0:
            spec["weight"] = draw(st.sampled_from([1, 2, 3]))
    slots = draw(st.permutations(range(len(copies))))
    return [{"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": f"c{slot:03d}"},
             "spec": spec} for slot, spec in zip(slots, copies, strict=True)]
