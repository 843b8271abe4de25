"""Reporting stays bounded however many overlays collide: per overlay and field at most
clash.LIMIT same-weight-conflict findings, the last counting the rest; a candidate's report
names at most that many other overlays that clash with it; the incremental path reports exactly
what the full run does."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulation import evaluate as ev
from simulation.semantics import catalog as cat
from simulation.semantics import clash
from tests.strategies import examples

LIMIT = clash.LIMIT
FAMILIES = ["m5", "c5"]


def _catalog() -> cat.Catalog:
    offerings = tuple(cat.Offering(z, c, 1.0) for z in ("z-a", "z-b") for c in ("spot", "on-demand"))
    return cat.Catalog(tuple(cat.InstanceType(f"{f}.large", {"family": f}, {"cpu": "2"}, offerings)
                             for f in FAMILIES), "generated")


def _overlay(name: str, family: str | None, weight: int = 0) -> dict[str, Any]:
    reqs = [{"key": "family", "operator": "In", "values": [family]}] if family else []
    spec: dict[str, Any] = {"requirements": reqs, "priceAdjustment": "-10%"}
    if weight:
        spec["weight"] = weight
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name}, "spec": spec}


def _docs(objs: list[dict[str, Any]]) -> list[ev.Document]:
    return [ev.Document(o, i) for i, o in enumerate(objs)]


def _conflicts(report: ev.Report) -> list[Any]:
    return [f for f in report.findings if f.code == "same-weight-conflict"]


def test_identical_overlays_are_capped_per_object_with_a_count() -> None:
    n = 40
    objs = [_overlay(f"o{i:02d}", "m5") for i in range(n)]
    report = ev.evaluate(_docs(objs), ev.prepare([], _catalog()))
    per_object = Counter(f.obj.name for f in _conflicts(report))
    assert max(per_object.values()) == LIMIT
    # Karpenter's order is name descending: o39 is first and clashes with nothing earlier.
    assert "o39" not in per_object
    for i in range(n - 1):
        found = [f for f in _conflicts(report) if f.obj.name == f"o{i:02d}"]
        earlier = n - 1 - i
        assert len(found) == min(LIMIT, earlier)
        # The reported partners are the first in Karpenter's order; the rest are counted.
        assert {r.name for f in found for r in f.related} == {f"o{j:02d}" for j in range(n - 1, n - 1 - len(found), -1)}
        more = sum(int(dict(f.detail).get("more", "0")) for f in found)
        assert more == earlier - len(found)
        assert (more > 0) == any("more" in f.message for f in found)


def test_a_candidate_names_a_bounded_number_of_other_overlays() -> None:
    n = 30
    catalog = _catalog()
    prepared = ev.prepare(_docs([_overlay(f"o{i:02d}", "m5") for i in range(n)]), catalog)
    # "z..." sorts after every "o..": the candidate is first in Karpenter's order, so every stored
    # overlay clashes with it as the earlier one.
    candidate = ev.Document(_overlay("zz", "m5"), 1000)
    fast = ev.evaluate([candidate], prepared)
    slow = ev.evaluate([candidate], prepared, full=True)
    assert [f.to_json() for f in fast.findings] == [f.to_json() for f in slow.findings]
    others = [f for f in _conflicts(fast) if f.obj.name != "zz"]
    assert len(others) == LIMIT
    assert dict(others[-1].detail)["moreObjects"] == str(n - LIMIT)
    assert f"{n - LIMIT} more" in others[-1].message
    assert fast.errors()


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(existing=st.lists(st.tuples(st.sampled_from([None, *FAMILIES]), st.sampled_from([0, 0, 0, 5, 9])),
                         min_size=LIMIT + 2, max_size=LIMIT + 9),
       new=st.lists(st.tuples(st.sampled_from([None, *FAMILIES]), st.sampled_from([0, 5, 7]),
                              st.sampled_from(["a", "n", "zz", "o0"])), min_size=1, max_size=3))
def test_incremental_equals_full_beyond_the_cap(existing: list[tuple[str | None, int]],
                                                 new: list[tuple[str | None, int, str]]) -> None:
    catalog = _catalog()
    prepared = ev.prepare(_docs([_overlay(f"o{i:02d}", f, w) for i, (f, w) in enumerate(existing)]), catalog)
    # A candidate sorts before ("a"), among ("n"), or after ("zz") the stored ones, or replaces one ("o0").
    # Stored overlays above it (weight 9) or below it shadow or are shadowed, more than a report lists.
    candidates = [ev.Document(_overlay(f"{p}{i}", f, w), 100 + i) for i, (f, w, p) in enumerate(new)]
    fast = ev.evaluate(candidates, prepared)
    slow = ev.evaluate(candidates, prepared, full=True)
    assert [f.to_json() for f in fast.findings] == [f.to_json() for f in slow.findings]
    assert Counter((f.obj, f.field) for f in _conflicts(fast)).most_common(1)[0][1] <= LIMIT if _conflicts(fast) \
        else True


@pytest.mark.parametrize("name", ["a", "o05", "o99", "zz"])
def test_shadowed_overlays_beyond_the_cap_incremental_equals_full(name: str) -> None:
    """A broad candidate above a dozen stacked overlays: each is shadowed, by it and by those above it.
    The report keeps the findings naming it among the first winners by name ("a" is first everywhere,
    "zz" only where fewer than the cap precede it; "o05" replaces a stored one), the last counting the rest."""
    catalog = _catalog()
    prepared = ev.prepare(_docs([_overlay(f"o{i:02d}", "m5", 1 + i) for i in range(12)]), catalog)
    candidate_doc = ev.Document(_overlay(name, None, 50), 1000)
    fast = ev.evaluate([candidate_doc], prepared)
    slow = ev.evaluate([candidate_doc], prepared, full=True)
    assert [f.to_json() for f in fast.findings] == [f.to_json() for f in slow.findings]
    shadowed = [f for f in fast.findings if f.code == "shadowed" and f.obj.name != name]
    assert len(shadowed) == min(LIMIT, sum(1 for f in slow.findings if f.code == "shadowed"))
    if name == "a":
        assert dict(shadowed[-1].detail)["moreObjects"] == str(12 - LIMIT)
