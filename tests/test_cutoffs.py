"""Every size cutoff's far side held to tests/reference.py: crowds drawn above the cutoffs (`overlaps.FEW`,
`kinds.FEW`, `evaluate.INCREMENTAL_LIMIT`), and the small draws again with every cutoff lowered to nothing, so
that the paths a cluster of thousands takes (arrays, kinds, the full run for a large request) are compared with
the plain loop as the one-by-one paths are."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulation import evaluate as ev
from simulation.analysis import checks, incremental, index, kinds, overlaps
from simulation.semantics import catalog as cat
from tests import reference_support
from tests.strategies import crowds, examples, instance_types, overlay_docs, pool_docs

# The largest cutoff: a crowd drawn above it is above every one.
ABOVE = max(overlaps.FEW, kinds.FEW, ev.INCREMENTAL_LIMIT)


@contextlib.contextmanager
def _lowered() -> Iterator[None]:
    """The array cutoffs at nothing: each question of the incremental path is asked of arrays and kinds (the
    incremental limit's far side is a request of more candidates, below), and each shadowed overlay's winners read
    of `checks.Above`'s overlays by name (as where more groups of equal cells are near it than it tests one by
    one)."""
    with mock.patch.object(overlaps, "FEW", 0), mock.patch.object(kinds, "FEW", 0), \
            mock.patch.object(index, "FEW", 0), mock.patch.object(index, "UNPACKED", 0), \
            mock.patch.object(checks, "_GROUPS", 0):
        yield


def _full_run(catalog: cat.Catalog, overlays: list[dict[str, Any]], pools: list[dict[str, Any]]) -> None:
    report = ev.evaluate([ev.Document(o, i) for i, o in enumerate([*pools, *overlays])], ev.prepare([], catalog))
    reference_support.assert_all(report, reference_support.expected(overlays, pools, catalog))


def _request(catalog: cat.Catalog, existing: list[dict[str, Any]], pools: list[dict[str, Any]],
             candidates: list[dict[str, Any]]) -> None:
    """Candidates against the prepared rest, warmed as the webhook's snapshots are (its packed cells made, so that
    a crowd past the cutoffs is asked of them, not one by one as a one-shot run's first questions are): the report
    on them is the full run's and the reference's."""
    prepared = ev.warmed(ev.prepare([ev.Document(d, i) for i, d in enumerate([*pools, *existing])], catalog))
    docs = [ev.Document(d, 1000 + i) for i, d in enumerate(candidates)]
    fast = ev.evaluate(docs, prepared)
    slow = ev.evaluate(docs, prepared, full=True)
    assert [(f.code, f.obj, f.field, f.related, f.message) for f in fast.findings] == \
        [(f.code, f.obj, f.field, f.related, f.message) for f in slow.findings]
    names = {d["metadata"]["name"] for d in candidates}
    assert all(fast.status[n] == slow.status[n] for n in names)
    overlays = [*(d for d in existing if d["metadata"]["name"] not in names), *candidates]
    reference_support.assert_involving(fast, reference_support.expected(overlays, pools, catalog), names)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=instance_types(), overlays=crowds(ABOVE), pools=pool_docs())
def test_a_crowd_above_every_cutoff_matches_the_reference(catalog: cat.Catalog, overlays: list[dict[str, Any]],
                                                           pools: list[dict[str, Any]]) -> None:
    _full_run(catalog, overlays, pools)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=instance_types(), existing=crowds(ABOVE), pools=pool_docs(), new=overlay_docs(),
       edit=st.integers(-1, ABOVE), name=st.sampled_from(["a0", "c0105", "z0"]),
       copy=st.sampled_from([None, 0, 1, 2, 3]))
def test_one_candidate_in_a_crowd_above_every_cutoff(catalog: cat.Catalog, existing: list[dict[str, Any]],
                                                     pools: list[dict[str, Any]], new: list[dict[str, Any]],
                                                     edit: int, name: str, copy: int | None) -> None:
    """One candidate, new (named before, among or after the crowd) or an edit of a member; its own spec, or a
    member's at some weight (it meets the whole crowd: the arrays' side of each cutoff)."""
    doc = new[0]
    if copy is not None:
        spec = dict(existing[edit % len(existing)]["spec"])
        doc = {**doc, "spec": {**spec, "weight": copy} if copy else spec, "metadata": {}}
    doc["metadata"] = {"name": existing[edit]["metadata"]["name"] if 0 <= edit < len(existing) else name}
    _request(catalog, existing, pools, [doc])


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=instance_types(), existing=overlay_docs(), pools=pool_docs(), new=crowds(ev.INCREMENTAL_LIMIT))
def test_more_candidates_than_the_incremental_limit(catalog: cat.Catalog, existing: list[dict[str, Any]],
                                                    pools: list[dict[str, Any]], new: list[dict[str, Any]]) -> None:
    """A request past INCREMENTAL_LIMIT runs whole: its report on the candidates is still the reference's."""
    _request(catalog, existing, pools, new)


@pytest.mark.parametrize("test", ["full", "incremental"])
def test_small_draws_with_every_cutoff_lowered(test: str) -> None:
    with _lowered():
        (_lowered_full if test == "full" else _lowered_incremental)()


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=instance_types(), overlays=overlay_docs(), pools=pool_docs())
def _lowered_full(catalog: cat.Catalog, overlays: list[dict[str, Any]], pools: list[dict[str, Any]]) -> None:
    _full_run(catalog, overlays, pools)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalog=instance_types(), existing=overlay_docs(), pools=pool_docs(), new=overlay_docs(),
       replace=st.booleans())
def _lowered_incremental(catalog: cat.Catalog, existing: list[dict[str, Any]], pools: list[dict[str, Any]],
                         new: list[dict[str, Any]], replace: bool) -> None:
    for i, doc in enumerate(new[:1]):
        doc["metadata"]["name"] = f"o{i}" if replace else f"n{i}"
    _request(catalog, existing, pools, new[:1])


def test_the_crowds_drawn_are_above_the_cutoffs() -> None:
    """The strategy keeps its promise (a test that cannot reach the far side proves nothing there)."""
    @settings(max_examples=examples(20), deadline=None)
    @given(drawn=crowds(ABOVE))
    def sizes(drawn: list[dict[str, Any]]) -> None:
        assert len(drawn) > ABOVE
        assert len({d["metadata"]["name"] for d in drawn}) == len(drawn)

    sizes()


def test_a_crowd_above_the_cutoffs_takes_the_array_paths() -> None:
    """What the draws above are for: a candidate meeting a crowd past the cutoffs is answered from the packed
    cells (overlaps) and its component taken by kinds from the index's arrays."""
    offering = cat.Offering("z-a", "spot", 1.0)
    catalog = cat.Catalog((cat.InstanceType("it0", {"family": "a"}, {"cpu": "2"}, (offering,)),), "one")
    spec = {"requirements": [{"key": "family", "operator": "In", "values": ["a"]}], "capacity": {"r1": "1"}}
    existing = [{"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": f"c{i:03d}"},
                 "spec": spec} for i in range(ABOVE + 8)]
    # Every array path reads the blocks' answer: per_block for the rows asked, every_block when it reads them all.
    with mock.patch.object(overlaps.Packed, "per_block", autospec=True,
                           side_effect=overlaps.Packed.per_block) as packed, \
            mock.patch.object(overlaps.Packed, "every_block", autospec=True,
                              side_effect=overlaps.Packed.every_block) as whole, \
            mock.patch.object(incremental, "prepared_runs", side_effect=incremental.prepared_runs) as runs:
        # Named last, it comes first in Karpenter's order: every verdict of the crowd moves.
        _request(catalog, existing, [], [{**existing[0], "metadata": {"name": "z0"}}])
    assert packed.called or whole.called
    assert any(reached.bit_count() > kinds.FEW for _, reached in (c.args for c in runs.call_args_list))
