"""One reader of objects (sources/): every entry point reads the same files into the same objects, and
the JSON fast path reads what the YAML reader reads, with the same positions."""

from __future__ import annotations

import dataclasses
import functools
import json
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from simulation.semantics import model
from sources import files, jsontext, kube, objects, positions, tree
from tests.strategies import examples
from webhook import loader as state_loader

NO, NP = model.NODEOVERLAY, model.NODEPOOL

OVERLAY_YAML = """\
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata:
  name: a
spec:
  weight: 10
  price: "1.5"
  requirements:
  - key: team
    operator: In
    values: ["on", "yes"]
"""
NODEPOOL_YAML = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: p}
spec:
  template:
    metadata:
      labels: {team: "on"}
    spec:
      requirements: []
"""
FOREIGN = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: c}
data: {a: b}
---
apiVersion: example.com/v1
kind: NodePool
metadata: {name: someone-elses}
"""


def _obj(text: str) -> dict[str, Any]:
    (parsed,) = tree.documents(text)
    assert isinstance(parsed.value, dict)
    return parsed.value


def _items_list(kind: str, items: Sequence[dict[str, Any]], indent: int | None = None) -> str:
    return json.dumps({"apiVersion": "v1", "kind": kind, "items": list(items)}, indent=indent)


# name -> (files, the NodeOverlays and NodePools every reader must find)
CASES: dict[str, tuple[dict[str, str], set[tuple[str, str]]]] = {
    "yaml documents, other kinds and groups ignored": (
        {"a.yaml": f"{OVERLAY_YAML}---\n{NODEPOOL_YAML}---\n{FOREIGN}"}, {(NO, "a"), (NP, "p")}),
    "kind: List in YAML": (
        {"l.yaml": "apiVersion: v1\nkind: List\nitems:\n" + "".join(
            "- " + "\n  ".join(t.rstrip().splitlines()) + "\n" for t in (OVERLAY_YAML, NODEPOOL_YAML))},
        {(NO, "a"), (NP, "p")}),
    "typed NodeOverlayList in pretty JSON": (
        {"l.json": _items_list("NodeOverlayList", [_obj(OVERLAY_YAML)], indent=2)}, {(NO, "a")}),
    "a stream of JSON objects": (
        {"s.json": json.dumps(_obj(OVERLAY_YAML)) + "\n" + json.dumps(_obj(NODEPOOL_YAML))}, {(NO, "a"), (NP, "p")}),
    "a directory of YAML and JSON": (
        {"d/one.yml": OVERLAY_YAML, "d/sub/two.json": json.dumps(_obj(NODEPOOL_YAML)), "d/notes.md": OVERLAY_YAML},
        {(NO, "a"), (NP, "p")}),
}


def _write(tmp_path: pathlib.Path, found: Mapping[str, str]) -> list[str]:
    for name, text in found.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return sorted({str(tmp_path / name.split("/")[0]) for name in found})


def _keyed(objs: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], Mapping[str, Any]]:
    out = {(model.kind_of(o) or "", model.name_of(o) or ""): o for o in objs}
    assert len(out) == len(objs), "an object came out twice"
    return out


def _lint(paths: list[str], candidate: bool) -> list[Mapping[str, Any]]:
    loaded = objects.Loader(positions.Table()).load(paths, candidate=candidate)
    assert loaded.problems == []
    assert all(d.candidate is candidate for d in loaded.documents)
    return [d.obj for d in loaded.documents]


class FakeApi:
    """The custom objects API of the `kubernetes` client, answering from `served` one item per page,
    with the client's own exception for a resource that is not served."""

    def __init__(self, served: Mapping[str, list[dict[str, Any]]]) -> None:
        self.served = served
        self.calls: list[dict[str, Any]] = []

    def list_cluster_custom_object(self, group: str, version: str, plural: str, **kwargs: Any) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException

        self.calls.append({"path": f"{group}/{version}/{plural}", **kwargs})
        items = self.served.get(f"{group}/{version}/{plural}")
        if items is None:
            raise ApiException(status=404, reason="Not Found")
        start = int(kwargs.get("_continue") or 0)
        end = start + kwargs["limit"]
        meta = {"resourceVersion": "7", **({"continue": str(end)} if end < len(items) else {})}
        return {"metadata": meta, "items": [dict(i) for i in items[start:end]]}

    def get_cluster_custom_object(self, group: str, version: str, plural: str, name: str,
                                  **_: Any) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException

        found = [i for i in self.served.get(f"{group}/{version}/{plural}", []) if model.name_of(i) == name]
        if not found:
            raise ApiException(status=404, reason="Not Found")
        return dict(found[0])


def _client(api: FakeApi) -> kube.Client:
    client = object.__new__(kube.Client)
    client._custom = api
    return client


def _cluster(found: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """What the cluster reader makes of the same objects served by an API server, one per page (so the
    continue token is followed) and without apiVersion/kind (list items may lack them)."""
    served = {f"{r.api_version}/{r.plural}": [{k: v for k, v in o.items() if k not in ("apiVersion", "kind")}
                                              for o in found if model.kind_of(o) == r.kind]
              for r in kube.RESOURCES.values()}
    api = FakeApi(served)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kube, "PAGE", 1)
        listed, notes = kube.read_all(_client(api))
    assert notes == []
    assert len(api.calls) == sum(max(1, len(v)) for v in served.values())
    loaded = objects.Loader(positions.Table()).add_objects(listed)
    assert loaded.problems == [] and loaded.ignored == 0
    return [d.obj for d in loaded.documents]


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_entry_point_reads_the_same_objects(case: str, tmp_path: pathlib.Path) -> None:
    found, expected = CASES[case]
    paths = _write(tmp_path, found)
    check = _lint(paths, candidate=True)
    readers = {
        "overlay-lint check": check,
        "overlay-lint --existing": _lint(paths, candidate=False),
        "overlay-webhook --state": state_loader.state_objects([pathlib.Path(p) for p in paths]),
        "overlay-lint --cluster": _cluster(check),
    }
    want = _keyed(check)
    assert set(want) == expected
    for name, objs in readers.items():
        assert _keyed(objs) == want, name
    overlay = want.get((NO, "a"))
    if overlay is not None:  # YAML 1.1 as kubectl: the quoted "on" stays a string, the weight an integer
        assert overlay["spec"]["requirements"][0]["values"] == ["on", "yes"]
        assert overlay["spec"]["weight"] == 10


def test_the_cluster_reader_pages_and_types_its_errors() -> None:
    pool = _obj(NODEPOOL_YAML)
    api = FakeApi({"karpenter.sh/v1/nodepools": [{**pool, "metadata": {"name": f"p{i}"}} for i in range(3)]})
    client = _client(api)
    listing = client.list(NP, page=2)
    assert [model.name_of(o) for o in listing.items] == ["p0", "p1", "p2"]
    assert all(o["kind"] == NP and o["apiVersion"] == "karpenter.sh/v1" for o in listing.items)
    assert listing.resource_version == "7"
    assert [(c["limit"], c.get("_continue")) for c in api.calls] == [(2, None), (2, "2")]
    with pytest.raises(kube.NotFound):
        client.list(NO)
    assert client.get(NP, "p1") is not None and client.get(NP, "missing") is None
    objs, notes = kube.read_all(client)
    assert len(objs) == 3 and len(notes) == 1 and "nodeoverlays" in notes[0]


def test_client_errors_become_typed_errors() -> None:
    from kubernetes.client.exceptions import ApiException

    assert isinstance(kube.error(ApiException(status=410, reason="Gone"), "watch"), kube.Gone)
    assert isinstance(kube.error(ApiException(status=404), "list"), kube.NotFound)
    forbidden = kube.error(ApiException(status=403, reason="Forbidden"), "list")
    assert type(forbidden) is kube.KubeError and forbidden.status == 403
    assert isinstance(kube.error(ConnectionRefusedError("refused"), "list"), kube.Unreachable)
    assert isinstance(forbidden, files.InputError)  # overlay-lint exits 2 with one line


def test_an_unreachable_cluster_is_a_typed_error(tmp_path: pathlib.Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "dead",
        "clusters": [{"name": "dead", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "dead", "context": {"cluster": "dead", "user": "u"}}]}))
    with pytest.raises(kube.Unreachable):
        kube.read(str(config))
    with pytest.raises(kube.ConfigError):
        kube.read(str(config), "no-such-context")


# --- the YAML dialect: `team: on` is a boolean, and where a string belongs that is an error ---------

SLIPPED = NODEPOOL_YAML.replace('{team: "on"}', "{team: on}")
OVERLAYS = "".join(f"---\n{OVERLAY_YAML.replace('name: a', f'name: {n}')}" for n in ("a", "b"))


def test_an_unquoted_on_is_the_same_error_for_the_linter_and_the_state(tmp_path: pathlib.Path) -> None:
    state = tmp_path / "state.yaml"
    state.write_text(SLIPPED + OVERLAYS)
    table = positions.Table()
    loaded = objects.Loader(table).load([str(state)])
    (problem,) = loaded.problems
    where = table.locate(problem)
    assert (problem.code, problem.severity.name.lower(), problem.obj.kind, problem.field) == (
        "parse-error", "error", NP, "spec.template.metadata.labels.team")
    assert (where.file, where.line) == (str(state), 7)
    assert '"on"' in problem.message  # the text to write instead
    with pytest.raises(state_loader.LoadError) as refused:
        state_loader.state_objects([state])
    assert f"{state}:7:" in str(refused.value) and '"on"' in str(refused.value)


def test_one_size_limit(tmp_path: pathlib.Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text(OVERLAY_YAML + "#" * files.DEFAULT_MAX_BYTES)
    loaded = objects.Loader(positions.Table()).load([str(big)])
    assert [p.code for p in loaded.problems] == ["parse-error"] and loaded.documents == []
    with pytest.raises(state_loader.LoadError):
        state_loader.state_objects([big])


def test_instance_types_in_the_state_are_the_catalog(tmp_path: pathlib.Path) -> None:
    state = tmp_path / "state.yaml"
    state.write_text(OVERLAY_YAML + "---\n" + json.dumps({
        "apiVersion": "karpenter.sh/v1alpha1", "kind": "InstanceType", "metadata": {"name": "tiny.small"},
        "spec": {"resources": {"cpu": "2", "memory": "4Gi", "pods": "10"},
                 "offerings": [{"karpenter.sh/price": "0.1", "topology.kubernetes.io/zone": "z1",
                                "karpenter.sh/capacity-type": "on-demand"}]}}))
    catalog = state_loader.load_catalog(None, [state])
    assert [t.name for t in catalog.types] == ["tiny.small"]
    assert len(state_loader.load_catalog(None).types) > 100  # the embedded default


# --- JSON read by the C decoder equals JSON read as YAML -----------------------------------------------

def _both(text: str) -> tuple[list[tree.Parsed], list[tree.Parsed]]:
    fast = jsontext.documents(text, tree.MAX_DEPTH)
    assert fast is not None, "expected the JSON path"
    return list(tree.documents(text)), list(tree._yaml(text))


def _same(fast: tree.Parsed, slow: tree.Parsed) -> None:
    assert fast.problem is None and slow.problem is None
    assert fast.value == slow.value
    assert dict(fast.positions) == dict(slow.positions)
    assert dict(fast.plain) == dict(slow.plain)


@pytest.mark.parametrize("text", [
    json.dumps(_obj(OVERLAY_YAML)),
    json.dumps(_obj(OVERLAY_YAML), indent=2),
    _items_list("List", [_obj(OVERLAY_YAML), _obj(NODEPOOL_YAML)], indent=1),
    '{"a": [1, 1.10, -0, 2e3, true, false, null, "x\\"]", {"b": []}], "é\\n": "\\u00e9\\\\"}\n  ',
])
def test_json_fast_path_reads_what_yaml_reads(text: str) -> None:
    fast, slow = _both(text)
    assert len(fast) == len(slow)
    for f, s in zip(fast, slow, strict=True):
        _same(f, s)


def test_a_stream_of_json_objects_is_read_as_kubectl_reads_it() -> None:
    """YAML needs `---` between documents; kubectl's decoder reads concatenated JSON objects too."""
    one, two = json.dumps(_obj(OVERLAY_YAML), indent=1), json.dumps(_obj(NODEPOOL_YAML))
    first, second = tree.documents(f"{one}\n{two}\n")
    (yaml_second,) = tree._yaml("\n" * one.count("\n") + "\n" + two)
    _same(first, next(tree._yaml(one)))
    assert (first.index, second.index) == (0, 1)
    _same(dataclasses.replace(second, index=0), yaml_second)


def test_list_items_keep_their_positions() -> None:
    text = _items_list("List", [_obj(OVERLAY_YAML), _obj(NODEPOOL_YAML)], indent=2)
    (fast,), (slow,) = _both(text)
    split = positions.split_items(slow.positions, "items")
    assert isinstance(fast.positions, jsontext.Located)
    for i in range(2):
        assert dict(fast.positions.within(("items", i))) == split[i]


# YAML refuses control characters and noncharacters, and breaks lines at U+2028/9, where JSON (and
# kubectl reading JSON) takes them as text: only text both read alike is compared.
_TEXT = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Cn", "Zl", "Zp")), max_size=8)


@settings(max_examples=examples(150), deadline=None)
@given(st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=20), st.sampled_from([None, 1]))
def test_json_fast_path_agrees_on_any_object(value: Any, indent: int | None) -> None:
    text = json.dumps({"v": value}, indent=indent, ensure_ascii=False)
    fast = jsontext.documents(text, tree.MAX_DEPTH)
    if fast is None:  # surrogates and the like are left to the YAML reader
        return
    (f,), (s,) = list(tree.documents(text)), list(tree._yaml(text))
    _same(f, s)


@settings(max_examples=examples(100), deadline=None)
@given(st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=20), st.randoms(use_true_random=False))
def test_json_positions_asked_one_at_a_time_in_any_order_equal_yaml_ones(value: Any, order: Any) -> None:
    # Members are scanned only as far as a path asks (jsontext._Members): what is found must not depend on
    # what was asked before.
    text = json.dumps({"v": value, "w": [value]}, indent=1, ensure_ascii=False)
    if jsontext.documents(text, tree.MAX_DEPTH) is None:
        return
    expected = dict(next(tree._yaml(text)).positions)
    paths = [*expected, ("v", "not there"), ("w", 5)]
    order.shuffle(paths)
    found = next(tree.documents(text)).positions
    assert {p: found[p] for p in paths if p in expected} == expected
    assert all(p in expected or p not in found for p in paths)


@pytest.mark.parametrize(("text", "depth"), [
    ('{"a": [1, {"b": "]]}}"}]}', 3), ('{"a": "\\\\"}', 1), ('{"é": ["\\"[[", []]}', 3)])
def test_json_depth_counts_brackets_outside_strings_only(text: str, depth: int) -> None:
    assert not jsontext.too_deep(text, depth)
    assert jsontext.too_deep(text, depth - 1)
    # rapidyaml's JSON is judged as the bytes it was written in.
    assert not jsontext.too_deep(bytearray(text.encode()), depth)
    assert jsontext.too_deep(bytearray(text.encode()), depth - 1)


def _nesting(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_nesting, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_nesting, value), default=0)
    return 0


_BRACKETY = st.text(alphabet='[]{}"\\ab', max_size=4)


@settings(max_examples=examples(300), deadline=None)
@given(st.recursive(st.one_of(_BRACKETY, st.integers()),
                    lambda inner: st.one_of(st.lists(inner, max_size=3),
                                            st.dictionaries(_BRACKETY, inner, max_size=3)), max_leaves=40),
       st.integers(1, 40), st.integers(0, 3))
def test_json_depth_is_the_nesting_of_the_value(value: Any, wrap: int, short: int) -> None:
    # Deep enough to be judged past the rounds of innermost pairs deleted, strings holding brackets and quotes.
    value = functools.reduce(lambda inner, i: [inner] if i % 2 else {"k": inner}, range(wrap), value)
    depth = _nesting(value)
    text = json.dumps(value)
    assert jsontext.too_deep(text, depth - 1 - short)
    assert not jsontext.too_deep(text, depth + short)


@pytest.mark.parametrize(("text", "at"), [
    ("a: " + "[ {\n\t" * 51 + "x", (1, 4)),  # 102 opening brackets, whitespace between
    ('a: "' + "[" * 101 + '"\n', (1, 5)),  # in a string: refused before any reader runs, as ever
    ("x\n" + "[" * 100 + "x" + "[" * 100 + "x\n" + "{" * 101, (3, 1)),  # only the last run is too long
])
def test_a_run_of_opening_brackets_deeper_than_the_limit_is_refused_where_it_starts(
        text: str, at: tuple[int, int]) -> None:
    (parsed,) = tree.documents(text)
    assert parsed.problem is not None and parsed.problem.position == at and "deeper" in parsed.problem.message


def test_the_decoder_collects_every_distinct_string_and_key_and_shares_values() -> None:
    decoder = jsontext.Decoder()
    text = json.dumps([["a", ["b"]], "c", {"k": "a", "l": [["d"], "e"], "m": {"k": 1}}, "a" + ""])
    value = decoder.decode(text)
    assert value == json.loads(text)
    assert set(decoder.strings) == {"a", "b", "c", "d", "e"} and decoder.keys == {"k", "l", "m"}
    assert value[0][0] is value[2]["k"] is value[3]
    assert jsontext.Decoder().decode(' "x" ') == "x"
    with pytest.raises(ValueError, match="extra data"):
        jsontext.Decoder().decode('{"a": 1} {}')
    with pytest.raises(jsontext.NotPlain):
        jsontext.Decoder().decode('[{"a": 1, "a": 2}]')


@pytest.mark.parametrize("text", [
    '{"a": 1, "a": 2}',  # duplicate keys: refused by the YAML reader
    '{"a": NaN}',
    '{"a": 1',  # a syntax error, reported with a position
    '{"a": 1} # a comment',
    "[" * 5 + "{}" + "]" * 5,  # not an object: YAML reads it
    '{"a": "]]]]", "b": ' + '{"c": ' * 120 + "1" + "}" * 120 + "}",  # too deep, behind brackets in a string
])
def test_json_the_fast_path_is_unsure_of_goes_to_the_yaml_reader(text: str) -> None:
    assert jsontext.documents(text, tree.MAX_DEPTH) is None
    assert [(p.value, p.problem) for p in tree.documents(text)] == [(p.value, p.problem) for p in tree._yaml(text)]


def test_too_deep_json_is_refused_with_a_position() -> None:
    text = '{"a": ' + '{"b": ' * 120 + "1" + "}" * 121
    (parsed,) = tree.documents(text)
    assert parsed.problem is not None and parsed.value is None and "deeper" in parsed.problem.message


# A comment that names an anchor, an alias and a merge key sends a text to the general reader (`_Builder`)
# and moves nothing in it: the in-order reader (`_InOrder`, positions packed as `Marks`) must read the same.
_GENERAL = "\n# & * <<\n"


def _in_order_and_general(text: str) -> None:
    in_order, general = list(tree._yaml(text)), list(tree._yaml(text + _GENERAL))
    assert all(isinstance(p.positions, tree.Marks) for p in in_order if p.problem is None)
    assert not any(isinstance(p.positions, tree.Marks) for p in general)
    assert [(p.index, p.value, dict(p.positions), dict(p.plain), p.problem) for p in in_order] == \
        [(p.index, p.value, dict(p.positions), dict(p.plain), p.problem) for p in general]


@pytest.mark.parametrize("text", [
    OVERLAY_YAML,
    f"{OVERLAY_YAML}---\n{NODEPOOL_YAML}",
    "a: 1\nb:\n  c: [1, 2, {d: e}]\n  c: 3\n",  # a duplicate key after a nested mapping and list
    "a:\n  x: 1\na:\n  - y\n",  # a duplicate whose value is a list
    "a:\n  b: x\n  c:\n    - 1\n    - k: on\n      k: off\n",  # a duplicate deep in a list
    'a: 1\n"a": 2\n',  # the same key, one quoted
    "just a scalar\n---\n- 1\n- [2, 3]\n---\n? [a]\n: b\n---\nx: 1\n---\n---\nkey: !!str 5\nother: !!int '7'\n",
    "x: .nan\n---\nn: ~\nz: 0755\ny: yes\n",
    "apiVersion: v1\nkind: List\nitems:\n- kind: NodeOverlay\n  metadata: {name: a}\n  spec: {weight: 3}\n"
    "- kind: NodeOverlay\n  metadata:\n    name: b\n  spec:\n    weight: yes\n",
    "a: " + "[" * 120 + "]" * 120 + "\n",  # too deep
    "a:\n" + "".join(f"{'  ' * i}- b{i}:\n" for i in range(1, 105)),  # too deep, block style
])
def test_the_in_order_reader_reads_what_the_general_one_reads(text: str) -> None:
    _in_order_and_general(text)


@settings(max_examples=examples(150), deadline=None)
@given(st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.sampled_from(["on", "0755", "1e3", "~", "", "a b"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from("abcde"), inner, max_size=4),
    max_leaves=30), st.sampled_from([None, True, False]), st.integers(1, 3))
def test_the_in_order_reader_agrees_on_any_tree(value: Any, flow: bool | None, copies: int) -> None:
    _in_order_and_general(yaml.safe_dump_all([{"v": value}] * copies, default_flow_style=flow))


def test_yaml_list_items_keep_their_positions() -> None:
    text = "kind: List\nitems:\n- kind: NodeOverlay\n  spec: {weight: 1}\n- [a, {b: c}]\n- x\n"
    (parsed,) = tree._yaml(text)
    assert isinstance(parsed.positions, tree.Marks)
    split = positions.split_items(dict(parsed.positions), "items")
    for i in range(3):
        assert dict(parsed.positions.within(("items", i))) == split[i]
    assert parsed.positions.within(("items", 3)) == {}
    assert parsed.positions.get(("items", 1, 1, "b")) == (5, 8)
    assert ("items", 1, 2) not in parsed.positions and ("items", "x") not in parsed.positions


def test_json_positions_of_a_lists_items_asked_after_positions_inside_the_ones_before() -> None:
    # A finding inside each item of a `kind: List`, in turn: an item already scanned into is skipped by finishing
    # that scan (jsontext._Members.ended), not decoded again; a path through a scalar leaves nothing to finish.
    items = [{"kind": "NodeOverlay", "metadata": {"name": f"o{i}", "labels": {"a": "b"}},
              "spec": {"requirements": [{"key": "k", "operator": "In", "values": ["v", str(i)]}] * 3,
                       "weight": i, "priceAdjustment": "-1%"}} for i in range(4)]
    for text in (json.dumps({"kind": "List", "items": items}, indent=1),
                 json.dumps({"kind": "List", "items": items}, separators=(",", ":"))):
        expected = dict(next(tree._yaml(text)).positions)
        asked = [("items", i, *path) for i in (0, 1, 3, 2) for path in
                 (("spec", "priceAdjustment"), ("metadata", "name", "x"), ("spec", "weight"), ("metadata", "labels"))]
        found = next(tree.documents(text)).positions
        for path in asked:  # in this order: each scan goes on from where the paths before left it
            assert (found[path] == expected[path]) if path in expected else path not in found
        assert {p: found[p] for p in expected} == expected
