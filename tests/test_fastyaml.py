"""rapidyaml's reading (`fastyaml`) against libyaml's (`tree`): the same values, types included, the same text of
every typed plain scalar and the same positions, or no answer (the file is then tree's). Generated YAML holds
plain scalars of every kind YAML 1.1 and 1.2 type differently, quoted ones, block scalars, flow and block
collections, comments and several documents."""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from benchmarks import shapes
from fuzz import targets
from sources import fastyaml, scalars, tree

# Plain scalars whose meaning differs between YAML 1.1 (kubectl) and 1.2 (rapidyaml), or looks as if it might.
AMBIGUOUS = [
    *sorted(w for w in scalars.TABLE if w),
    "0755", "0x1F", "0o17", "0b101", "1_000", "1e3", "1E3", ".5", "1.0", "1.", "+1", "-0", "-1", "0", "10", "007",
    "12:30", "2026-01-01", "99999999999999999999", "9223372036854775808", "-9223372036854775809", "1e400",
    "inf", "-inf", "nan", "infinity", "Infinity", "-.inf", "1.5", "-1.5", "0.5", "1e-3", "-01",
]
WORDS = ["-1%", "1Gi", "100m", "c5", "amd64", "NotIn", "a b", "x.y/z", "team-a", "v1"]
PLAIN = [*AMBIGUOUS, *WORDS]
KEYS = ["key", "values", "a", "b", "metadata", "10", "-5", "yes", "on", "true", "1.0", "0x10", "null", "~", "inf"]


def _quoted(text: str, double: bool) -> str:
    return json.dumps(text) if double else "'" + text.replace("'", "''") + "'"


# Mostly what rapidyaml reads as kubectl does, so that most files are read by it; one in four scalars is unsure.
SURE = [*WORDS, "0", "10", "-1", "true", "false", "null"]
scalar_text = st.one_of(
    st.sampled_from(SURE), st.sampled_from(SURE), st.sampled_from(SURE),
    st.sampled_from(PLAIN),
    st.builds(_quoted, st.sampled_from([*PLAIN, "it's", 'say "hi"']), st.booleans()),
)
key_text = st.one_of(st.sampled_from(KEYS), st.builds(_quoted, st.sampled_from(KEYS), st.booleans()))
comment = st.sampled_from(["", "", " # note", " # on yes 0755"])


def _flow(depth: int) -> st.SearchStrategy[str]:
    leaf = scalar_text
    if depth <= 0:
        return leaf
    inner = _flow(depth - 1)
    return st.one_of(
        leaf,
        st.lists(inner, max_size=3).map(lambda items: "[" + ", ".join(items) + "]"),
        st.lists(st.tuples(key_text, inner), max_size=3, unique_by=lambda kv: kv[0]).map(
            lambda pairs: "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"),
    )


block_scalar = st.tuples(st.sampled_from(["|", "|-", ">", "|+", ">-"]),
                         st.lists(st.sampled_from([*PLAIN, "text here", ""]), min_size=1, max_size=3))


@st.composite
def _node(draw: st.DrawFn, indent: int, depth: int) -> str:
    """A value after `key:` or `-`: its text, starting with what follows the indicator."""
    kind = draw(st.sampled_from(["scalar", "scalar", "empty", "flow", "block", "map", "seq"] if depth > 0
                                else ["scalar", "empty", "flow", "block"]))
    pad = " " * (indent + 2)
    if kind == "scalar":
        return " " + draw(scalar_text) + draw(comment) + "\n"
    if kind == "empty":
        return "\n"
    if kind == "flow":
        return " " + draw(_flow(2)) + draw(comment) + "\n"
    if kind == "block":
        style, lines = draw(block_scalar)
        return f" {style}\n" + "".join(f"{pad}{line}\n" if line else "\n" for line in lines)
    if kind == "map":
        return "\n" + draw(_mapping(indent + 2, depth - 1))
    return "\n" + draw(_sequence(indent + 2, depth - 1))


@st.composite
def _mapping(draw: st.DrawFn, indent: int, depth: int) -> str:
    keys = draw(st.lists(key_text, min_size=1, max_size=4, unique=True))
    out = ""
    for key in keys:
        if draw(st.integers(0, 9)) == 0:
            out += " " * indent + "# a comment: yes\n"
        out += " " * indent + key + ":" + draw(_node(indent, depth))
    return out


@st.composite
def _sequence(draw: st.DrawFn, indent: int, depth: int) -> str:
    count = draw(st.integers(1, 4))
    return "".join(" " * indent + "-" + draw(_node(indent, depth)) for _ in range(count))


@st.composite
def yaml_stream(draw: st.DrawFn) -> str:
    documents = draw(st.lists(st.one_of(_mapping(0, 3), _sequence(0, 3), scalar_text.map(lambda s: s + "\n")),
                              min_size=1, max_size=3))
    head = draw(st.sampled_from(["", "---\n", "# leading comment\n", "# c\n---\n"]))
    text = head + "---\n".join(documents)
    return text.rstrip("\n") if draw(st.booleans()) else text  # a file without its last line break


def _same(text: str) -> bool:
    """Whether rapidyaml read `text`; if it did, everything is as tree's reader has it (the fuzz target's check)."""
    return targets.read_as_tree_reads(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(yaml_stream())
def test_same_as_tree(text: str) -> None:
    event("read by rapidyaml" if _same(text) else "left to tree")


@pytest.mark.parametrize("text", [f"a: {s}\n" for s in PLAIN] + [f"{s}: x\n" for s in PLAIN] +
                         [f"- [{s}]\n" for s in PLAIN] + [f"a: {{k: {s}}}\n" for s in PLAIN])
def test_each_ambiguous_scalar(text: str) -> None:
    """Each scalar as a value, a key and in flow collections: read the same, or left to tree."""
    _same(text)


@pytest.mark.parametrize(("text", "fast"), [
    # Words and numbers whose meaning is sure: read here.
    ("a: 10\nb: true\nc: x\nd: '2'\ne: \"-1%\"\nf: '1.5'\n", True),
    # Quoted, but rapidyaml's JSON does not say so: a plain one would mean something else to kubectl.
    ("a: '0755'\n", False), ("a: 'yes'\n", False),
    # AWS's instance category: rapidyaml writes `.inf`, undone.
    ("values: [inf, c5]\nkey: karpenter.k8s.aws/instance-category\n", True),
    ("a: yes\n", False), ("a: 0755\n", False), ("a: 1e3\n", False), ("a: ~\n", False), ("on: x\n", False),
    ("a: inf\nb: .inf\n", False), ("a: 1.5\n", False), ("null: x\n", False), ("a: 1\na: 2\n", False),
    ("a: &x 1\nb: *x\n", False), ("a: !!str 5\n", False), ("%YAML 1.1\n---\na: 1\n", False),
    ("a:\tb\n", False), ("a: @x\n", False), ("? a\n: b\n", False), ("a: 1\n...\nb: 2\n", False),
    # What the fuzz target found rapidyaml reading where libyaml refuses the text.
    ("apiVersion: ]\n", False), (">2.\n", False), ("a: |2-\n   x\nb: >+ # c\n  y\n", True),
    ("a: [:g]\n", False), ("h: [g: %]\n", False), ("|\np\n", False), ("--- |\nx\n", False),
    ("a: >\n\n x", False), ("a: >\n\n x\n", True), ("s: [g:]\n", False), ("a: {b\n c: d}\n", False),
    ('- "" - ""\n', False), ("- '' - x\n", False), ("- [a] -\n", False), ("- {} - x\n", False),
    ('- "x"  -\n', False), ('a: "-1%"\nb: [x]\nc: {d: e}\n', True), ("- [a]\n- '-'\n", True),
    # go-yaml drops a number's underscores before parsing it: `-_1` is -1, `+_.5` 0.5.
    ("-_1\n", False), ("a: +_.5\n", False), ("a: -__0x1\n", False),
    # Each distinct string is judged wherever it is: a document, an item of the stream's or of a nested list, a key.
    ("yes\n", False), ("- yes\n", False), ("- [[yes]]\n", False), ("a: [[0755]]\n", False), ("- - - on\n", False),
    ("- a\n---\n- 0x1F\n", False), ("a: {b: {'y': 1}}\n", False), ("a:\n  10: x\n", True), ("- [[x, '2']]\n", True),
    ("a: ''\n", True), ("'': x\n", False), ("a: [inf, [inf]]\n", True), ("inf: x\n", True),
    ("a: [inf, .inf]\n", False), ("a: [inf, .Inf]\n", False),
    # A file's number-like strings are judged together: one unsure among many sure ones, first, last or alone.
    ("".join(f"p{i}: '0.{i}'\n" for i in range(50)), True),
    ("".join(f"p{i}: '0.{i}'\n" for i in range(50)) + "q: '0x1F'\n", False),
    ("q: '0755'\n" + "".join(f"p{i}: '{i}.5'\n" for i in range(50)), False),
    ("".join(f"p{i}: '-{i}'\n" for i in range(50)) + "q: '1e3'\nr: 7\n", True),
    # A string only ending like rapidyaml's spellings is no spelling of them; a special one, quoted, is.
    ("a: [x.inf, y.nan, infinity.x]\n", True), ("a: '.inf'\n", False), ("'.nan': x\nb: nan\n", False),
    # Where a `<` or a `:` is, not what follows it: read here.
    ("a: <b\nc: 'x:'\nd: [e:f, {g: h}]\n", True), ("a: <<\n", False), ("a: {b:}\n", False), ("a: [b:, c]\n", False),
])
def test_what_is_read_here(text: str, fast: bool) -> None:
    assert _same(text) is fast


# What `_unsure` looks for in one pass, each as Python's engine finds it.
_EACH = re.compile(r"[&*!@`\\\t\r\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\n%|\n\.\.\.|:[\]},]|[\"'\]}][ ]+-(?:[ \n]|$)")


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet="ab :,-'\"%.&\t[]{}\n", max_size=40))
def test_one_pass_finds_what_each_check_finds(text: str) -> None:
    """The one pass of RE2 finds what the checks it stands for find, and where it finds the brackets of every line
    flat, they pair up (`_flow_across_lines`)."""
    raw = text.encode()
    each = _EACH.search(text) is not None or text.startswith(("%", "...")) or fastyaml._flow_across_lines(raw)
    assert fastyaml._unsure(text, raw) is each


def test_empty_and_comments_only() -> None:
    assert fastyaml.documents("") == [] == list(tree._yaml(""))
    assert fastyaml.documents("# nothing\n\n") == [] == list(tree._yaml("# nothing\n\n"))


def _deep(levels: int) -> str:
    return "".join(" " * i + f"k{i}:\n" for i in range(levels)) + " " * levels + "leaf: 1\n"


def _nested(levels: int) -> str:
    return "a: " + "[" * (levels - 1) + "]" * (levels - 1) + "\n"


@pytest.mark.parametrize("text", [
    *(_deep(n) for n in (64, 65, tree.MAX_DEPTH - 1, tree.MAX_DEPTH, tree.MAX_DEPTH + 5)),
    *(_nested(n) for n in (65, 66, tree.MAX_DEPTH, tree.MAX_DEPTH + 1)), "a: 1\n---\n" + _deep(tree.MAX_DEPTH),
])
def test_depth_refused_the_same_way(text: str, monkeypatch: pytest.MonkeyPatch,
                                    capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(tree, "FAST_FROM", 0)
    assert [(p.value, p.problem) for p in tree.documents(text)] == [(p.value, p.problem) for p in tree._yaml(text)]
    assert capfd.readouterr().err == ""


def test_rapidyaml_writes_nothing_as_deep_as_the_limit() -> None:
    """The depth of rapidyaml's JSON is not counted: it writes no tree deeper than 65 levels (deeper, tree reads the
    file, and refuses it past tree.MAX_DEPTH). A rapidyaml that wrote deeper ones would fail this."""
    assert tree.MAX_DEPTH > 65
    assert fastyaml.documents(_nested(65)) is not None
    assert fastyaml.documents(_deep(63)) is not None
    assert fastyaml.documents(_nested(66)) is None
    assert fastyaml.documents(_deep(65)) is None
    assert fastyaml.documents("a: 1\n---\n" + _nested(66)) is None


@pytest.mark.parametrize("text", ["a: b: c\n", "a: [b, c\n", "a: 'x\n", "- a\nb: c\n", "x: 1\n---\n{a: 1}}\n"])
def test_bad_yaml_is_tree_s_to_report(text: str, monkeypatch: pytest.MonkeyPatch,
                                      capfd: pytest.CaptureFixture[str]) -> None:
    """A parse error is reported with its position by tree, and rapidyaml prints nothing of it."""
    monkeypatch.setattr(tree, "FAST_FROM", 0)
    got = list(tree.documents(text))
    assert got[-1].problem is not None
    assert [(p.value, p.problem) for p in got] == [(p.value, p.problem) for p in tree._yaml(text)]
    assert capfd.readouterr().err == ""


@pytest.mark.skipif(fastyaml._STDERR is None, reason="C's stderr stream cannot be set here")
def test_a_line_another_writer_prints_meanwhile_is_not_lost(capfd: pytest.CaptureFixture[str]) -> None:
    """rapidyaml's parse error goes nowhere; what Python writes to stderr at the same time still gets there."""
    with fastyaml._quiet():
        os.write(2, b"logged meanwhile\n")
        with pytest.raises(fastyaml.ryml.ExceptionParse):
            fastyaml.ryml.parse_in_arena(b"a: [b\n")
    assert capfd.readouterr().err == "logged meanwhile\n"


def _unnamed(name: str) -> str:
    raise ValueError(f"unrecognized configuration name {name}")  # what macOS answers


@pytest.mark.parametrize("confstr", [lambda name: "musl libc 1.2", lambda name: None, _unnamed])
def test_the_c_stream_is_set_only_under_the_gnu_c_library(confstr: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another C library's `stderr` may be constant (musl's is); where the library is another or cannot be named,
    the descriptor is silenced instead."""
    monkeypatch.setattr(os, "confstr", confstr)
    assert fastyaml._c_stderr() is None


@pytest.mark.parametrize("stream", ["C", "descriptor"])
def test_quiet_readers_in_several_threads_take_turns_and_leave_stderr_as_it_was(
        stream: str, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """Readers silencing and restoring stderr at once, one saving what another silenced, would leave it silenced
    for good: each parse (here one that gives the other threads the interpreter before failing) runs alone, and
    after them a parse error prints again."""
    if stream == "descriptor":
        monkeypatch.setattr(fastyaml, "_STDERR", None)
    inside, most = [0], [0]
    real = fastyaml.ryml.parse_in_arena

    def parse(raw: bytes, tree: Any) -> None:
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        time.sleep(0.001)  # not to wait for anything: to let another thread run here if it can
        inside[0] -= 1
        raise RuntimeError("no")

    monkeypatch.setattr(fastyaml.ryml, "parse_in_arena", parse)
    text = "apiVersion: v1\nkind: ConfigMap\n" + "# padding\n" * 8_000
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        assert list(pool.map(fastyaml.documents, [text] * 20)) == [None] * 20
    assert most == [1]
    assert capfd.readouterr().err == ""
    with pytest.raises(fastyaml.ryml.ExceptionParse):
        real(b"a: [b\n")
    assert "missing terminating" in capfd.readouterr().err


def test_large_files_are_read_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """tree.documents sends a large file here, and a finding's position is found in its document alone, once."""
    one = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: n{}\ndata:\n  weight: {}\n"
    text = "---\n".join(one.format(i, i) for i in range(tree.FAST_FROM // len(one) + 10))
    calls: list[str] = []
    real = tree.located
    monkeypatch.setattr(tree, "located", lambda t, path: calls.append(t) or real(t, path))
    documents = list(tree.documents(text))
    assert calls == []
    assert isinstance(documents[7].positions, fastyaml.Positions)
    assert documents[7].positions[("data", "weight")] == (6 * 7 + 7 + 6, 3)
    assert documents[7].positions[("data",)] == (6 * 7 + 7 + 5, 1)
    assert documents[7].plain[("data", "weight")] == "7"
    assert len(calls) == 1 and calls[0].count("---") == 1


def test_json_longer_than_the_guess_is_written_again() -> None:
    """rapidyaml's JSON is written into a buffer twice the text's size: a list of empty items (`-` is `null,`)
    outgrows it, and the JSON is written again at the size rapidyaml asked for."""
    text = "-\n" * 40_000
    assert len(fastyaml._json(fastyaml.ryml.parse_in_arena(text.encode()), 0)) > 2 * len(text) + 4096
    (read,) = fastyaml.documents(text) or [None]
    assert read is not None and read.value == next(tree._yaml(text)).value == [None] * 40_000


def test_a_document_listed_whole_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Copying a document's positions (a render cache's entry) reads it once, and every path is then answered from
    that reading, not by one reading per path."""
    one = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: n{}\ndata:\n  weight: {}\n"
    text = "---\n".join(one.format(i, i) for i in range(tree.FAST_FROM // len(one) + 10))
    located: list[str] = []
    read: list[str] = []
    real_located, real_yaml = tree.located, tree._yaml
    monkeypatch.setattr(tree, "located", lambda t, path: located.append(t) or real_located(t, path))
    monkeypatch.setattr(tree, "_yaml", lambda t: read.append(t) or real_yaml(t))
    positions = list(tree.documents(text))[7].positions
    assert isinstance(positions, fastyaml.Positions)
    copied = dict(positions)
    assert copied[("data", "weight")] == (6 * 7 + 7 + 6, 3) == positions[("data", "weight")]
    assert len(read) == 1 and located == []
    assert copied == dict(list(real_yaml(text))[7].positions)


def test_the_comparison_can_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """Break the reader (take every JSON string of a number for a quoted one) and watch the check fail."""
    monkeypatch.setattr(fastyaml, "_unsure_numbers", lambda texts, is_key: False)
    with pytest.raises(targets.Defect, match="value"):
        targets.fastyaml_target(b"a: 0755\n")


def _resident_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_reading_a_file_again_and_again_holds_no_memory() -> None:
    """rapidyaml's own JSON writer never frees its buffer (twice the JSON's size per call): a run over many large
    files grew by hundreds of MB."""
    text = "".join(f"---\nkind: NodeOverlay\nmetadata: {{name: o{i}}}\nspec:\n  requirements:\n"
                   + "".join(f"  - key: k{k}\n    operator: NotIn\n    values: [v{k}]\n" for k in range(40))
                   for i in range(600))
    assert len(text) > 1_000_000 and fastyaml.documents(text) is not None
    before = _resident_mb()
    for _ in range(10):
        fastyaml.documents(text)
    assert _resident_mb() - before < 15


def _counted_trees(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every parse tree rapidyaml is asked to make from here on."""
    made: list[object] = []
    real = fastyaml.ryml.Tree

    def make() -> object:
        made.append(real())
        return made[-1]

    monkeypatch.setattr(fastyaml.ryml, "Tree", make)
    return made


def _large(name: str) -> str:
    one = "kind: ConfigMap\nmetadata:\n  name: {}-{}\ndata: {{weight: '{}', list: [a, {}]}}\n"
    return "---\n".join(one.format(name, i, i, i) for i in range(tree.FAST_FROM // len(one) + 10))


def test_files_of_one_reading_share_a_parse_tree_let_go_when_it_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh tree's node array costs half the parse in page faults: the files of a reading share one, each read as
    alone, a file rapidyaml refuses included; after the reading, none is kept (its memory goes back)."""
    made = _counted_trees(monkeypatch)
    texts = [_large("a"), "a: [b\n" + "# padding\n" * 8_000, _large("b"), _large("c")]
    with tree.reading():
        with tree.reading():  # a reading within another: the trees are kept until the outer one ends
            read = [fastyaml.documents(text) for text in texts[:2]]
        read += [fastyaml.documents(text) for text in texts[2:]]
    assert len(made) == 1 and read[1] is None
    for text, documents in zip(texts[::2], read[::2], strict=True):
        assert documents is not None
        assert [d.value for d in documents] == [p.value for p in tree._yaml(text)]
    fastyaml.documents(texts[0])
    fastyaml.documents(texts[0])
    assert len(made) == 3


@pytest.mark.parametrize("name", ["long-requirements", "resources", "windows", "ladder", "tiers", "grid"])
def test_a_tree_kept_for_a_reading_is_sized_once_for_its_text(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a reading, a fresh tree's node array is reserved for the text, not grown by doubling as the parse goes: a
    file of the benchmark's families fits the reserve. A file read alone leaves its tree to grow."""
    made = _counted_trees(monkeypatch)
    text = shapes.text_of(shapes.FAMILIES[name](300), "yaml")
    with tree.reading():
        assert fastyaml.documents(text) is not None
    assert fastyaml.documents(text) is not None
    kept, alone = made
    assert kept.capacity() == len(text.encode()) // fastyaml._BYTES_PER_NODE >= kept.size()  # type: ignore[attr-defined]
    assert alone.capacity() & (alone.capacity() - 1) == 0  # type: ignore[attr-defined]


def test_threads_reading_at_once_take_a_tree_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two threads never parse into the same tree: each file is read as it is read alone."""
    made = _counted_trees(monkeypatch)
    texts = [_large(name) for name in "abcdefgh"]
    expected = [[p.value for p in tree._yaml(text)] for text in texts]
    with tree.reading(), concurrent.futures.ThreadPoolExecutor(4) as pool:
        read = list(pool.map(fastyaml.documents, texts * 3))
    assert [[d.value for d in documents or []] for documents in read] == expected * 3
    assert 1 <= len(made) <= 4


def test_small_files_are_read_here_once_the_yaml_read_has_paid_for_the_import(monkeypatch: pytest.MonkeyPatch) -> None:
    """A repository of one object a file: the files after the first FAST_FROM characters are read by rapidyaml too,
    those too small to be worth its fixed cost never; the values are the same either way."""
    monkeypatch.setattr(tree, "_VOLUME", tree._Volume())
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n" + "".join(
        f"  key{i}: value-{i}\n" for i in range(40))
    tiny = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: t}\n"
    assert tree.FAST_SMALL <= len(text) < tree.FAST_FROM and len(tiny) < tree.FAST_SMALL
    before = tree.FAST_FROM // len(text)
    read = [list(tree.documents(t)) for t in [text] * (before + 3) + [tiny]]
    fast = [isinstance(r[0].positions, fastyaml.Positions) for r in read]
    assert fast == [False] * before + [True] * 3 + [False]
    assert all(r[0].value == read[0][0].value for r in read[:-1])
    assert dict(read[-2][0].positions) == dict(read[0][0].positions)
