"""simulation.semantics.requirements against Karpenter's pkg/scheduling (requirement.go, requirements.go):
canonical forms, membership, intersection, Intersects and Compatible."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulation.semantics import requirements as reqs

R = reqs.Requirement.new
INT64_MAX = str(2**63 - 1)


@pytest.mark.parametrize(("operator", "values", "complement", "kept", "gte", "lte", "canonical"), [
    ("In", ["a", "b"], False, {"a", "b"}, None, None, "In"),
    ("NotIn", ["a"], True, {"a"}, None, None, "NotIn"),
    ("Exists", [], True, set(), None, None, "Exists"),
    ("DoesNotExist", [], False, set(), None, None, "DoesNotExist"),
    # Gt N is Gte N+1 and Lt N is Lte N-1: bounded complements, which read back as Exists.
    ("Gt", ["5"], True, set(), 6, None, "Exists"),
    ("Lt", ["5"], True, set(), None, 4, "Exists"),
    ("Gte", ["5"], True, set(), 5, None, "Exists"),
    ("Lte", ["5"], True, set(), None, 5, "Exists"),
    # Gt of the largest int64 matches nothing.
    ("Gt", [INT64_MAX], False, set(), None, None, "DoesNotExist"),
    # Karpenter ignores the parse error of a bound ("prevalidated"): it reads as 0.
    ("Gt", ["x"], True, set(), 1, None, "Exists"),
    # An operator Karpenter does not know builds a bare complement.
    ("Near", ["a"], True, set(), None, None, "Exists"),
])
def test_new_canonical_form(operator: str, values: list[str], complement: bool, kept: set[str],
                            gte: int | None, lte: int | None, canonical: str) -> None:
    r = R("k", operator, values)
    assert (r.complement, set(r.values), r.gte, r.lte, r.operator()) == (complement, kept, gte, lte, canonical)


def test_new_rewrites_deprecated_label_aliases() -> None:
    assert R("failure-domain.beta.kubernetes.io/zone", "In", ["z"]).key == reqs.ZONE
    assert R("beta.kubernetes.io/arch", "In", ["amd64"]).key == "kubernetes.io/arch"


@pytest.mark.parametrize(("operator", "values", "value", "has"), [
    ("In", ["a"], "a", True),
    ("In", ["a"], "b", False),
    ("NotIn", ["a"], "a", False),
    ("NotIn", ["a"], "b", True),
    ("Exists", [], "anything", True),
    ("DoesNotExist", [], "anything", False),
    ("Gt", ["5"], "6", True),
    ("Gt", ["5"], "5", False),
    ("Gte", ["5"], "5", True),
    ("Lt", ["5"], "4", True),
    ("Lt", ["5"], "5", False),
    ("Lte", ["5"], "5", True),
    ("Lte", ["5"], "-7", True),
    # With a bound, a value that is not a Go int is outside it.
    ("Gt", ["5"], "10x", False),
    ("Gt", ["5"], "6.5", False),
    ("Gt", ["5"], "+6", True),
    ("Lt", ["0"], "-9223372036854775809", False),
])
def test_has(operator: str, values: list[str], value: str, has: bool) -> None:
    assert R("k", operator, values).has(value) is has


@pytest.mark.parametrize(("a", "b", "operator", "kept", "gte", "lte"), [
    (("In", ["a", "b"]), ("In", ["b", "c"]), "In", {"b"}, None, None),
    (("In", ["a", "b"]), ("NotIn", ["b"]), "In", {"a"}, None, None),
    (("NotIn", ["a"]), ("NotIn", ["b"]), "NotIn", {"a", "b"}, None, None),
    (("NotIn", ["a"]), ("Exists", []), "NotIn", {"a"}, None, None),
    # Bounds filter a concrete set and are then dropped from it.
    (("In", ["1", "5", "x"]), ("Gt", ["2"]), "In", {"5"}, None, None),
    # Two bounds on one complement: both kept, the tighter of each side.
    (("Gt", ["2"]), ("Lt", ["10"]), "Exists", set(), 3, 9),
    (("Gte", ["2"]), ("Gte", ["7"]), "Exists", set(), 7, None),
    # Disjoint bounds leave nothing.
    (("Gte", ["3"]), ("Lte", ["2"]), "DoesNotExist", set(), None, None),
    (("DoesNotExist", []), ("Exists", []), "DoesNotExist", set(), None, None),
])
def test_intersection(a: tuple[str, list[str]], b: tuple[str, list[str]], operator: str, kept: set[str],
                      gte: int | None, lte: int | None) -> None:
    for left, right in ((a, b), (b, a)):
        r = R("k", *left).intersection(R("k", *right))
        assert (r.operator(), set(r.values), r.gte, r.lte) == (operator, kept, gte, lte)


def test_build_intersects_requirements_on_one_key() -> None:
    built = reqs.from_specs([("k", "In", ["a", "b"]), ("k", "In", ["b", "c"]), ("j", "Exists", [])])
    assert set(built) == {"k", "j"}
    assert set(built["k"].values) == {"b"}


_REQUIREMENT = st.builds(reqs.Requirement.new, st.sampled_from(["k", "beta.kubernetes.io/arch", "kubernetes.io/arch"]),
                         st.sampled_from(reqs.OPERATORS),
                         st.lists(st.sampled_from(["a", "b", "0", "3", "7", "12", "-1"]), max_size=3))


@settings(deadline=None)
@given(st.lists(_REQUIREMENT, max_size=8))
def test_build_is_intersecting_one_after_another(items: list[reqs.Requirement]) -> None:
    """Requirements.Add as Karpenter folds it: each requirement intersected with what its key holds so far."""
    folded: dict[str, reqs.Requirement] = {}
    for req in items:
        folded[req.key] = req if req.key not in folded else req.intersection(folded[req.key])
    assert reqs.build(items) == folded
    assert list(reqs.build(items)) == list(folded)


def test_intersections_are_kept_once_each_and_at_most_their_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Alike overlays share one intersection per distinct value, and however many distinct ones a stream brings,
    at most _REMEMBERED are kept."""
    monkeypatch.setattr(reqs, "_INTERSECTED", {})
    monkeypatch.setattr(reqs, "_REMEMBERED", 4)
    first = reqs.from_specs([("k", "NotIn", ["a"]), ("k", "NotIn", ["b"])])["k"]
    again = reqs.from_specs([("k", "NotIn", ["b"]), ("k", "NotIn", ["a"])])["k"]
    assert again is first
    for i in range(10):
        made = reqs.from_specs([("k", "NotIn", [str(i)]), ("k", "NotIn", ["z"])])["k"]
        assert set(made.values) == {str(i), "z"}
        assert 0 < len(reqs._INTERSECTED) <= 4


def test_from_labels_is_one_in_per_label() -> None:
    built = reqs.from_labels({"a": "1", "b": "2"})
    assert {k: (r.operator(), set(r.values)) for k, r in built.items()} == {"a": ("In", {"1"}), "b": ("In", {"2"})}


Spec = tuple[str, Sequence[str]]


@pytest.mark.parametrize(("existing", "incoming", "intersects"), [
    (("In", ["a"]), ("In", ["a", "b"]), True),
    (("In", ["a"]), ("In", ["b"]), False),
    (("In", ["a"]), ("NotIn", ["a"]), False),
    (("In", ["a"]), ("NotIn", ["b"]), True),
    (("NotIn", ["a"]), ("NotIn", ["b"]), True),
    # An empty overlap passes only when both sides are NotIn or DoesNotExist.
    (("DoesNotExist", []), ("DoesNotExist", []), True),
    (("DoesNotExist", []), ("NotIn", ["a"]), True),
    (("NotIn", ["a"]), ("DoesNotExist", []), True),
    (("DoesNotExist", []), ("In", ["a"]), False),
    (("DoesNotExist", []), ("Exists", []), False),
    (("Exists", []), ("DoesNotExist", []), False),
    (("Gt", ["5"]), ("In", ["3"]), False),
    (("Gt", ["5"]), ("In", ["7"]), True),
    (("Gt", ["5"]), ("In", ["seven"]), False),
    (("Gt", ["5"]), ("Lt", ["6"]), False),
    (("Gte", ["5"]), ("Lte", ["5"]), True),
    (("Gt", ["5"]), ("NotIn", ["6"]), True),
    (("Gt", [INT64_MAX]), ("Exists", []), False),
])
def test_intersects(existing: Spec, incoming: Spec, intersects: bool) -> None:
    a, b = {"k": R("k", *existing)}, {"k": R("k", *incoming)}
    assert reqs.intersects(a, b) is intersects


def test_intersects_ignores_keys_only_one_side_defines() -> None:
    assert reqs.intersects({"a": R("a", "In", ["x"])}, {"b": R("b", "In", ["y"])})


@pytest.mark.parametrize(("operator", "values", "compatible"), [
    # A key `existing` does not define: only NotIn and DoesNotExist may ask for it.
    ("In", ["x"], False),
    ("Exists", [], False),
    ("Gt", ["1"], False),
    ("NotIn", ["x"], True),
    ("DoesNotExist", [], True),
])
def test_compatible_with_an_undefined_key(operator: str, values: list[str], compatible: bool) -> None:
    existing = {"defined": R("defined", "In", ["v"])}
    incoming = {"defined": R("defined", "In", ["v"]), "missing": R("missing", operator, values)}
    assert reqs.compatible(existing, incoming) is compatible
    # Keys allowed undefined (the well-known labels, for Karpenter) pass whatever the operator.
    assert reqs.compatible(existing, incoming, allow_undefined=frozenset({"missing"}))


def test_compatible_still_needs_shared_keys_to_intersect() -> None:
    existing = {"k": R("k", "In", ["a"])}
    assert reqs.compatible(existing, {"k": R("k", "In", ["a"])})
    assert not reqs.compatible(existing, {"k": R("k", "In", ["b"])})
    assert not reqs.compatible(existing, {"k": R("k", "In", ["b"])}, allow_undefined=frozenset({"k"}))


def test_describe_names_operator_values_and_bounds() -> None:
    assert R("k", "In", ["b", "a"]).describe() == "k In [a, b]"
    assert R("k", "Gt", ["2"]).intersection(R("k", "Lt", ["9"])).describe() == "k Exists >=3 <=8"


@pytest.mark.parametrize(("text", "value"), [
    ("42", 42), ("+42", 42), ("-42", -42), ("007", 7),
    ("4 2", None), ("", None), ("0x1f", None), ("1e3", None), ("9223372036854775807", 2**63 - 1),
    ("9223372036854775808", None), ("-9223372036854775808", -(2**63)),
])
def test_atoi_is_go_strconv_atoi(text: str, value: int | None) -> None:
    assert reqs.atoi(text) == value
