"""One request reads the prepared snapshot through its change (evaluate layers the candidates over it
instead of copying 10,000 entries): what the report holds is what a full run over copies holds, and
the snapshot itself is left as it was."""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulation import evaluate as ev
from simulation.semantics import catalog as cat


def _catalog() -> cat.Catalog:
    offerings = (cat.Offering("z-a", "spot", 1.0), cat.Offering("z-a", "on-demand", 2.0))
    return cat.Catalog(tuple(cat.InstanceType(f"{f}.large", {"family": f}, {"cpu": "2"}, offerings)
                             for f in ("m5", "c5")), "generated")


def _overlay(name: str, adjustment: str, weight: int = 10) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
            "spec": {"requirements": [{"key": "family", "operator": "In", "values": ["m5"]}],
                     "priceAdjustment": adjustment, "weight": weight}}


def test_a_request_reads_its_change_over_the_snapshot() -> None:
    catalog = _catalog()
    existing = [_overlay("a", "-10%", 30), _overlay("b", "-20%", 20), _overlay("c", "-30%", 10)]
    prepared = ev.prepare([ev.Document(o, i, False) for i, o in enumerate(existing)], catalog)
    before = (dict(prepared.overlays), dict(prepared.entries), dict(prepared.local))
    # b is replaced by a version the API server rejects, d is new, c is changed.
    candidates = [ev.Document(_overlay("b", "ten percent off", 20), 10), ev.Document(_overlay("d", "-5%", 5), 11),
                  ev.Document(_overlay("c", "-35%", 10), 12)]

    report = ev.evaluate(candidates, prepared)
    full = ev.evaluate(candidates, prepared, full=True)

    assert report.overlays["b"].invalid and "b" not in report.entries and report.entries.get("b") is None
    # Order as the copies it stands for: overlays keep their places, recomputed entries follow in request order.
    assert list(report.overlays) == ["a", "b", "c", "d"] and len(report.overlays) == 4
    assert list(report.entries) == ["a", "d", "c"] and len(report.entries) == 3
    assert dict(report.entries) == dict(full.entries)
    assert {n: report.overlays[n].raw for n in report.overlays} == {n: full.overlays[n].raw for n in full.overlays}
    assert report.findings == full.findings
    assert (dict(prepared.overlays), dict(prepared.entries), dict(prepared.local)) == before
    assert list(prepared.entries) == ["a", "b", "c"]


_NAMES = st.sampled_from("abcdefgh")


@given(st.dictionaries(_NAMES, st.integers()), st.dictionaries(_NAMES, st.integers()), st.lists(_NAMES))
def test_the_changed_overlays_read_as_the_chain_map_they_stand_for(
        top: dict[str, int], base: dict[str, int], asked: list[str]) -> None:
    fast, plain = ev._Changed(top, base), collections.ChainMap(top, base)
    assert list(fast) == list(plain) and len(fast) == len(plain) and dict(fast) == dict(plain)
    for name in asked:
        assert (name in fast) == (name in plain)
        assert fast.get(name) == plain.get(name) and fast.get(name, -1) == plain.get(name, -1)
        if name in plain:
            assert fast[name] == plain[name]
        else:
            with pytest.raises(KeyError):
                fast[name]


def test_a_digested_snapshot_is_the_replace_it_stands_for() -> None:
    """evaluate._digested builds the snapshot by its constructor: every other field is the prepared one's (a
    field added to Prepared and not passed on would come back as its default here)."""
    catalog = _catalog()
    prepared = ev.prepare([ev.Document(_overlay("a", "-10%", 30), 0, False),
                           ev.Document(_overlay("b", "-10%", 30), 1, False)], catalog)
    overlays, entries, local = {"x": prepared.overlays["a"]}, dict(prepared.entries), {"x": ()}
    known = frozenset({"family"})
    built = ev._digested(prepared, overlays, entries, local, known)
    replaced = dataclasses.replace(prepared, overlays=overlays, entries=entries, local=local, known=known)
    for field in dataclasses.fields(ev.Prepared):
        assert getattr(built, field.name) is getattr(replaced, field.name), field.name
    assert prepared.baseline and prepared.ratchet and prepared.outcome.order  # not defaults: the test can fail
