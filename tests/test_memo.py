"""The memos that make a long requirement list cost one lookup per layer (simulation/memo.py and its users:
the API server's layer, Karpenter's runtime validation, the model and the cells): what a memo warmed by other
overlays answers must be what a fresh judgement gives, and a value changed after its judgement is judged anew."""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulation import evaluate as ev
from simulation import memo
from simulation.semantics import cells, model
from simulation.semantics import requirements as reqs
from simulation.validation import crds, runtime, schema
from tests import core_support


def test_keys_tell_json_types_apart_and_refuse_what_is_not_plain() -> None:
    assert memo.key([{"a": ["x"]}]) == memo.key([{"a": ["x"]}])
    assert memo.key([1]) != memo.key([True])
    assert memo.key([1]) != memo.key([1.0])
    assert memo.key({"a": [1]}) != memo.key({"a": (1,)})
    assert memo.key(("x", 1)) != memo.key(["x", 1])
    assert memo.key(1) != memo.key(True)

    class Named(str):
        pass

    assert memo.key([Named("x")]) is None  # a subclass may mean something else
    assert memo.key(["x" * memo.KEY_LIMIT]) is None  # too large to keep


def test_a_pin_ends_with_its_block_so_a_value_changed_afterwards_gets_its_own_key() -> None:
    listed = [{"key": "a", "operator": "In", "values": ["x"]}]
    with memo.pinned(listed):
        pinned = memo.key(listed)
        assert memo.key(listed) is pinned  # made once while pinned
    listed.append({"key": "b", "operator": "Exists"})
    assert memo.key(listed) != pinned
    assert memo.key(listed) == memo.key(copy.deepcopy(listed))


def test_a_lists_parts_are_one_key_per_equal_element() -> None:
    listed = [{"key": "a", "operator": "In", "values": ["x"]}, [1], "s", 1, True, 1.0]
    parts = memo.parts(listed)
    assert len(set(parts)) == len(listed)  # 1, True and 1.0 apart
    assert memo.parts(copy.deepcopy(listed)) is parts  # made once per distinct list
    assert memo.parts([*reversed(listed)]) == parts[::-1]
    listed[0]["values"] = ["y"]
    assert memo.parts(listed)[0] != parts[0]
    assert memo.parts(listed)[1:] == parts[1:]

    class Named(str):
        pass

    assert memo.parts([Named("x"), "x" * memo.KEY_LIMIT, "x"])[:2] == (None, None)  # not plain, too large


def test_an_elements_key_is_the_same_whoever_read_it() -> None:
    # The files' requirements (strings shared by the reader) and a webhook's candidate (strings of its own,
    # interned or not): equal elements, one key, so that the candidate's are found, not judged again.
    written = {"key": "example.com/team", "operator": "In", "values": ["x"]}
    made = {"key": "".join(["example.com/", "team"]), "operator": "".join(["I", "n"]), "values": ["".join(["x", ""])]}
    assert memo.parts([written, 1])[0] is memo.parts([made, 2])[0]
    assert memo.parts([written, 3])[0] is memo.parts(json.loads(json.dumps([written, 3])))[0]


def test_remembered_makes_once_per_equal_value() -> None:
    made: list[Any] = []
    store: memo.Memo[int] = memo.Memo()
    for value in ([1, 2], [1, 2], [2, 1], [1, 2]):
        memo.remembered(store, value, lambda v: made.append(v) or len(made))
    assert made == [[1, 2], [2, 1]]


def test_each_judges_each_distinct_element_once() -> None:
    made: list[Any] = []
    store: memo.Memo[bool] = memo.Memo()

    def judged(value: Any) -> bool:
        made.append(value)
        return len(value) > 1  # False, the answer of most: kept as any other

    for listed in (["a", "bc", "a"], ["bc", "d", "a"], [*map(str, "ad")]):
        assert memo.each(store, memo.parts(listed), listed, judged) == [len(v) > 1 for v in listed]
    assert made == ["a", "bc", "d"]
    unkeyed = ["x" * memo.KEY_LIMIT]
    for _ in range(2):
        assert memo.each(store, memo.parts(unkeyed), unkeyed, judged) == [True]
    assert made[3:] == unkeyed * 2  # too large to keep: judged each time


# Requirements that each layer judges differently: fine, a runtime problem, a schema problem (CEL and
# pattern), ignored values, a null the API server prunes, a wrong type.
_REQUIREMENTS = [
    {"key": "example.com/team", "operator": "In", "values": ["a"]},
    {"key": "example.com/team", "operator": "NotIn", "values": ["a", "b"]},
    {"key": "example.com/team", "operator": "In", "values": ["not ok!"]},
    {"key": "karpenter.sh/team", "operator": "In", "values": ["a"]},
    {"key": "-bad", "operator": "In", "values": ["a"]},
    {"key": "example.com/gen", "operator": "Gt", "values": ["3"]},
    {"key": "example.com/gen", "operator": "Gt", "values": ["-1"]},
    {"key": "example.com/team", "operator": "Exists", "values": ["a"]},
    {"key": "example.com/team", "operator": "In", "values": None},
    {"key": "example.com/team", "operator": "In", "values": [1]},
    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["cheap"]},
    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
]


def _overlay(name: str, requirements: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
            "spec": {"requirements": requirements, "priceAdjustment": "-1%"}}


def _judged(obj: dict[str, Any], crd: crds.Crd) -> tuple[Any, ...]:
    checked = ev.check_overlay(ev.Document(obj, 1), crd)
    return (checked.overlay, checked.overlay.requirement_map(),
            [(f.code, f.field, f.message, f.severity) for f in checked.findings])


# The module memos of requirement lists; a fresh judgement runs with them empty and a CRD loaded anew.
_MEMOS = ((model, "_SPECS"), (model, "_MAPS"), (runtime, "_LISTS"), (schema, "_IGNORED"), (memo, "_PARTS"),
          (runtime, "_ONE"))


@contextlib.contextmanager
def _fresh() -> Iterator[crds.Crd]:
    saved = [(module, name, getattr(module, name)) for module, name in _MEMOS]
    for module, name, _ in saved:
        setattr(module, name, memo.Memo() if name != "_MAPS" else {})
    try:
        yield crds.load(copy.deepcopy(dict(crds.raw_dra())), "fresh")
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def _fresh_judged(obj: dict[str, Any]) -> tuple[Any, ...]:
    with _fresh() as crd:
        return _judged(copy.deepcopy(obj), crd)


_LISTS = st.lists(st.lists(st.sampled_from(range(len(_REQUIREMENTS))), max_size=5), min_size=2, max_size=6)


@settings(max_examples=60, deadline=None)
@given(_LISTS)
def test_judgements_with_warmed_memos_equal_fresh_ones(lists: list[list[int]]) -> None:
    # The lists repeat and overlap, in every order: each overlay is judged by memos warmed by those before it.
    crd = crds.load(copy.deepcopy(dict(crds.raw_dra())), "shared")
    for i, picked in enumerate(lists):
        obj = _overlay(f"o{i}", [copy.deepcopy(_REQUIREMENTS[j]) for j in picked])
        assert _judged(obj, crd) == _fresh_judged(obj)


def test_the_comparison_notices_a_memo_that_mixes_lists_up(monkeypatch: pytest.MonkeyPatch) -> None:
    # What the property above would see if the lists' memos mixed values up: not the fresh judgement.
    key = memo.key
    monkeypatch.setattr(memo, "key", lambda v: "one list" if isinstance(v, list) else key(v))
    crd = crds.load(copy.deepcopy(dict(crds.raw_dra())), "shared")
    _judged(_overlay("fine", [_REQUIREMENTS[0]]), crd)
    restricted = _overlay("restricted", [_REQUIREMENTS[3]])
    assert _judged(restricted, crd) != _fresh_judged(restricted)


def test_a_list_changed_after_its_judgement_is_judged_anew() -> None:
    crd = crds.load(copy.deepcopy(dict(crds.raw_dra())), "shared")
    obj = _overlay("o", [copy.deepcopy(_REQUIREMENTS[0])])
    assert _judged(obj, crd)[2] == []
    obj["spec"]["requirements"][0]["values"] = ["not ok!"]
    assert [(code, field) for code, field, _, _ in _judged(obj, crd)[2]] == [
        ("runtime-invalid", "spec.requirements[0].values[0]")]


def test_a_requirement_map_is_the_callers_to_change() -> None:
    overlay = model.overlay(_overlay("o", [_REQUIREMENTS[0], _REQUIREMENTS[1]]))
    first = overlay.requirement_map()
    first.clear()
    assert overlay.requirement_map() == reqs.from_specs((r.key, r.operator, r.values) for r in overlay.requirements)
    assert overlay.requirement_map()


def test_a_grid_of_other_nodepools_matches_afresh() -> None:
    catalog = core_support.small_catalog()
    labelled = core_support.nodepool("gpu", {"example.com/team": "ml"})
    plain = core_support.nodepool("plain")
    overlay = model.overlay(_overlay("o", [{"key": "example.com/team", "operator": "In", "values": ["ml"]}]))
    grid = cells.build(catalog, [plain])
    assert grid.selected(overlay) == _selected_afresh(grid, overlay)
    assert not grid.selected(overlay)[0]  # no type or NodePool defines the key
    other = cells.build(catalog, [labelled, plain], grid)
    assert other.selected(overlay) == _selected_afresh(other, overlay)
    assert other.selected(overlay)[0]  # the labelled NodePool's cells: not the first grid's answer
    again = model.overlay(_overlay("p", [{"key": "example.com/team", "operator": "In", "values": ["ml"]}]))
    assert other.selected(again) is other.selected(overlay)  # remembered per distinct list


@pytest.mark.parametrize("values", [["m"], ["m", *(f"x{i}" for i in range(cells.KEPT_VALUES))]],
                         ids=["short", "long"])
def test_the_slots_a_grid_keeps_for_a_requirement_are_a_fresh_grids(values: list[str]) -> None:
    # Kept only for a long requirement (a family's NotIn of ninety values, repeated across lists): a short one costs
    # less to work out again than to keep. In and NotIn of the same values on one grid: each its own answer.
    catalog, pools = core_support.small_catalog(), [core_support.nodepool("plain")]
    grid = cells.build(catalog, pools)
    for operator in (reqs.IN, reqs.NOT_IN, reqs.IN):
        requirements = reqs.from_specs([(core_support.FAMILY, operator, values),
                                        (core_support.ARCH, reqs.IN, ["amd64", "arm64"])])
        found = grid.match(requirements)
        assert found == cells.build(catalog, pools).match(requirements)
        assert found  # m.small and m.large, or (the NotIn) a.odd
    assert len(grid._bits) == (2 if len(values) > cells.KEPT_VALUES else 0)


def _selected_afresh(grid: cells.Grid, overlay: model.Overlay) -> tuple[Any, Any]:
    chosen = grid.match(reqs.from_specs((r.key, r.operator, r.values) for r in overlay.requirements))
    return chosen, grid.type_cells(chosen)


@settings(max_examples=40, deadline=None)
@given(_LISTS)
def test_the_cells_of_a_list_are_those_of_its_requirements(lists: list[list[int]]) -> None:
    # Lists repeat and overlap across overlays: each overlay's cells, found by its list, are its own requirements'.
    grid = cells.build(core_support.small_catalog(), [core_support.nodepool("gpu", {"example.com/team": "a"})])
    for i, picked in enumerate(lists):
        overlay = model.overlay(_overlay(f"o{i}", [copy.deepcopy(_REQUIREMENTS[j]) for j in picked]))
        assert grid.selected(overlay) == _selected_afresh(grid, overlay)


@settings(max_examples=30, deadline=None)
@given(_LISTS)
def test_a_witness_from_the_grids_memo_is_a_fresh_one(lists: list[list[int]]) -> None:
    pools = [core_support.nodepool("gpu", {"example.com/team": "a"}), core_support.nodepool("plain")]
    grid = cells.build(core_support.small_catalog(), pools[1:])
    other = cells.build(core_support.small_catalog(), pools, grid)
    for i, picked in enumerate(lists):
        overlay = model.overlay(_overlay(f"o{i}", [copy.deepcopy(_REQUIREMENTS[j]) for j in picked]))
        for g in (grid, other, grid):
            for chosen in g.selected(overlay):
                for offering in (True, False):
                    assert g.witness(chosen, offering) == g._witness(chosen, offering)


def test_label_keys_are_those_of_the_overlay_at_hand() -> None:
    zone = {"key": "failure-domain.beta.kubernetes.io/zone", "operator": "In", "values": ["a"]}
    first = model.overlay(_overlay("a", [_REQUIREMENTS[0], zone]))
    again = model.overlay(_overlay("b", [copy.deepcopy(_REQUIREMENTS[0]), copy.deepcopy(zone)]))
    other = model.overlay(_overlay("c", [_REQUIREMENTS[11]]))
    assert first.label_keys() == again.label_keys() == {"example.com/team", "topology.kubernetes.io/zone"}
    assert other.label_keys() == {"kubernetes.io/arch"}


def _held_by_memos() -> int:
    """The bytes of the distinct key objects every memo holds now (what the bound is about)."""
    seen: dict[int, int] = {}
    for store in list(memo._MEMOS.values()):
        for made in list(store):
            size = len(made) if isinstance(made, bytes) else len(made[1]) if isinstance(made[1], str) else 0
            seen[id(made)] = size
    return sum(seen.values())


def test_the_memos_hold_at_most_their_bytes_of_keys_whatever_the_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    # Distinct long lists (a hostile input, or a webhook's stream of them) would fill each memo up to its entry
    # limit, some 16 KiB a key: past memo.BYTES of keys every memo starts over, and the answers stay fresh ones.
    memo.clear_all()
    monkeypatch.setattr(memo, "BYTES", 256 << 10)
    crd = crds.load(copy.deepcopy(dict(crds.raw_dra())), "bounded")
    peak = 0
    for i in range(60):
        requirements = [{"key": f"example.com/k{j}", "operator": "In", "values": [f"v{i}-{j}-{'x' * 40}"]}
                         for j in range(80)]
        obj = _overlay(f"o{i}", requirements)
        assert _judged(obj, crd) == _fresh_judged(obj)
        peak = max(peak, _held_by_memos())
        assert memo.held_bytes() <= memo.BYTES
    # 60 distinct lists of some 7 KiB, each kept by several memos and its 80 requirements by others: 440 KiB
    # held once each, without the bound.
    assert memo.BYTES // 2 < peak <= memo.BYTES


def test_equal_keys_are_one_object_across_memos() -> None:
    listed = [{"key": "example.com/team", "operator": "In", "values": ["a"]}]
    assert memo.key(listed) is memo.key(copy.deepcopy(listed))
    assert memo.key("a" * 10) is memo.key("".join(["a"] * 10))
