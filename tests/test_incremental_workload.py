"""The incremental path against the full run on the cluster `make bench` generates: the real catalog, an
overlay per NodePool and instance family, broad candidates that meet hundreds of them. With 70 NodePools a set
of NodePools spans two 64-bit words, which the incremental property tests' clusters (up to three NodePools) never
have."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from benchmarks import workload
from simulation import evaluate as ev
from simulation.semantics import catalog as cat

SIZE = workload.Size(2000, 70)
# Eight kinds of candidate, in turn: scoped to one NodePool; broad and clean; broad and conflicting; an edit of a
# stored overlay's weight; a stored overlay applied again unchanged; a copy of one under a new name; an instance
# family in NodePools on both words; spot offerings of old generations in NodePools past the 64th alone (the last
# two mostly at the stored overlays' weight).
KINDS = 8
CANDIDATES = 6 * KINDS


# The module fixture below is dear: one xdist worker runs every test here, so it is made once.
pytestmark = pytest.mark.xdist_group("test_incremental_workload")


@pytest.fixture(scope="module")
def cluster() -> tuple[cat.Catalog, list[dict[str, Any]], ev.Prepared]:
    catalog = cat.default()
    raw = workload.documents(SIZE, catalog)
    prepared = ev.prepare([ev.Document(o, i, False) for i, o in enumerate(raw)], catalog)
    return catalog, [o for o in raw if o["kind"] == "NodeOverlay"], prepared


def _candidate(i: int, catalog: cat.Catalog, stored: list[dict[str, Any]]) -> dict[str, Any]:
    draw = random.Random(i)
    kind = i % KINDS
    if kind == 0:
        # NodePools past the 64th too: their bits lie in the second word.
        return workload.candidate(draw.randrange(SIZE.pools), SIZE.pools)
    if kind in (1, 2):
        return workload.broad(draw.randrange(1000), conflicting=kind == 2, catalog=catalog)
    if kind in (6, 7):
        # NodePools on both words, or only past the 64th (its first word empty).
        pools = (draw.sample(range(64), 8) + draw.sample(range(64, SIZE.pools), 4) if kind == 6
                 else draw.sample(range(64, SIZE.pools), 3))
        doc = workload.broad(2 * draw.randrange(500) + kind - 6, conflicting=draw.random() < 0.7, catalog=catalog)
        doc["spec"]["requirements"].append({"key": "karpenter.sh/nodepool", "operator": "In",
                                            "values": [f"pool-{p:03d}" for p in sorted(pools)]})
        return doc
    doc = copy.deepcopy(draw.choice(stored))
    if kind == 3:
        doc["spec"]["weight"] = draw.choice([0, 1, 7, 13, 50])
    elif kind == 5:
        doc["metadata"]["name"] += "-copy"
    return doc


def _key(report: ev.Report) -> list[tuple[Any, ...]]:
    return [(f.code, f.severity, f.obj, f.field, f.related, f.message, f.witness, f.detail, f.hint)
            for f in report.findings]


@pytest.mark.parametrize("i", range(CANDIDATES))
def test_incremental_equals_full_on_the_generated_cluster(
        cluster: tuple[cat.Catalog, list[dict[str, Any]], ev.Prepared], i: int) -> None:
    catalog, stored, prepared = cluster
    doc = [ev.Document(_candidate(i, catalog, stored), 10**6)]
    fast = ev.evaluate(doc, prepared)
    slow = ev.evaluate(doc, prepared, full=True)
    assert _key(fast) == _key(slow)
    # The request's report holds the statuses of the overlays its change touched; every other is the baseline's.
    name = doc[0].obj["metadata"]["name"]
    assert name in fast.status
    assert {n: fast.status[n] for n in fast.status} == {n: slow.status[n] for n in fast.status}
    assert {n: s.state for n, s in slow.status.items() if n not in fast.status} == {
        n: s for n, s in prepared.outcome.status.items() if n not in fast.status and n in slow.status}


def test_the_cluster_has_findings_on_both_words_of_its_nodepools(
        cluster: tuple[cat.Catalog, list[dict[str, Any]], ev.Prepared]) -> None:
    """The comparison above means something only if the candidates meet overlays in NodePools past the 64th."""
    catalog, stored, prepared = cluster
    pools = set()
    for i in range(CANDIDATES):
        report = ev.evaluate([ev.Document(_candidate(i, catalog, stored), 10**6)], prepared)
        pools |= {int(f.witness.nodepool.rsplit("-", 1)[1]) for f in report.findings if f.witness is not None}
    assert min(pools) < 64 <= max(pools)
