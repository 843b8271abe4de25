"""Bad and unusual input for the overlay-lint loader: never a traceback, always a finding or exit 2."""

from __future__ import annotations

import builtins
import io
import json
import os
import pathlib
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lint import cli
from sources import files, tree
from sources.objects import Loader
from sources.positions import Origin, Table
from tests.input_support import CATALOG, OVERLAY, run, write
from tests.strategies import examples

ROOT = pathlib.Path(__file__).resolve().parent.parent
BOUND = 10.0  # seconds; generous, the point is "not minutes"

def timed(*args: str, stdin: bytes | None = None) -> tuple[int, dict[str, Any], str]:
    start = time.monotonic()
    result = run(*args, stdin=stdin)
    assert time.monotonic() - start < BOUND
    return result


def only(data: dict[str, Any], code: str = "parse-error") -> dict[str, Any]:
    assert [f["code"] for f in data["findings"]] == [code], data["findings"]
    finding: dict[str, Any] = data["findings"][0]
    return finding


def test_yaml_syntax_error_has_position(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, "bad.yaml", "apiVersion: v1\nkind: NodeOverlay\nspec: [unclosed\n")
    code, data, _ = timed(path)
    f = only(data)
    assert code == 1 and f["file"] == path and f["line"] == 4 and f["column"] >= 1
    assert f["object"] == {"kind": "File", "name": path}


def test_syntax_error_after_a_good_document_keeps_the_good_one(tmp_path: pathlib.Path) -> None:
    text = OVERLAY.format(name="good", weight=1) + "---\nkind: NodeOverlay\nx: [\n"
    code, data, _ = timed(write(tmp_path, "two.yaml", text))
    assert code == 1 and data["summary"]["objects"] == 1
    assert only(data)["line"] == 15


def test_non_utf8_file(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, "latin1.yaml", b"kind: NodeOverlay\nmetadata:\n  name: caf\xe9\n")
    f = only(timed(path)[1])
    assert "UTF-8" in f["message"] and (f["line"], f["column"]) == (3, 12)


def test_binary_file(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, "image.yaml", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    code, data, _ = timed(path)
    assert code == 1 and "binary" in only(data)["message"]


def test_utf16_and_bom_are_read(tmp_path: pathlib.Path) -> None:
    text = OVERLAY.format(name="utf16", weight=1)
    a = write(tmp_path, "a.yaml", text.encode("utf-16"))
    bom = OVERLAY.format(name="bom", weight=2)
    b = write(tmp_path, "b.yaml", b"\xef\xbb\xbf" + bom.encode())
    code, data, _ = timed(a, b)
    assert code == 0 and data["summary"]["objects"] == 2 and data["summary"]["errors"] == 0


def test_control_character_is_a_parse_error(tmp_path: pathlib.Path) -> None:
    f = only(timed(write(tmp_path, "ctl.yaml", "kind: NodeOverlay\nname: a\x07b\n"))[1])
    assert f["line"] == 2


@pytest.mark.parametrize("content", ["", "# only a comment\n", "---\n", "---\n...\n"])
def test_empty_input_is_nothing(tmp_path: pathlib.Path, content: str) -> None:
    code, data, _ = timed(write(tmp_path, "empty.yaml", content))
    assert code == 0 and data["findings"] == [] and data["summary"]["objects"] == 0


def test_billion_laughs_is_refused_quickly(tmp_path: pathlib.Path) -> None:
    lines = ["apiVersion: karpenter.sh/v1alpha1", "kind: NodeOverlay", "metadata: {name: lol}",
             "a0: &a0 [lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    lines += ["spec: {requirements: *a9}", "---", OVERLAY.format(name="after-the-bomb", weight=1)]
    code, data, _ = timed(write(tmp_path, "bomb.yaml", "\n".join(lines)))
    f = only(data)
    assert code == 1 and "alias" in f["message"] and f["line"] > 4
    # The refusal is per document: the next one is still read.
    assert data["summary"]["objects"] == 1


def test_alias_budget_counts_nested_expansion() -> None:
    text = "a: &a [" + ", ".join(["x"] * 1000) + "]\nb: &b [" + ", ".join(["*a"] * 99) + "]\n"
    assert next(tree.documents(text)).problem is None
    text += "c: [" + ", ".join(["*b"] * 2) + "]\n"
    problem = next(tree.documents(text)).problem
    assert problem is not None and "alias" in problem.message


@pytest.mark.parametrize("text", [
    "[" * 100_000 + "]" * 100_000,
    '{"a":' * 20_000 + "1" + "}" * 20_000,
    "- " * 50_000 + "x\n",
    "".join(" " * i + "a:\n" for i in range(300)) + " " * 300 + "a: 1\n",
])
def test_deep_nesting_is_refused(tmp_path: pathlib.Path, text: str) -> None:
    code, data, _ = timed(write(tmp_path, "deep.yaml", text))
    assert code == 1 and "nesting deeper than" in only(data)["message"]


def test_nesting_just_under_the_limit_is_fine() -> None:
    depth = tree.MAX_DEPTH
    parsed = next(tree.documents("[" * depth + "]" * depth))
    assert parsed.problem is None


def test_huge_file_is_refused_without_reading_it(tmp_path: pathlib.Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "huge.yaml"
    with open(path, "wb") as handle:
        handle.write(b"a: 1\n")
        handle.seek(50 * 1024 * 1024)
        handle.write(b"\n")
    reads: list[int] = []
    real_open = builtins.open

    class Spy:
        def __init__(self, handle: Any, name: str) -> None:
            self.handle, self.name = handle, name

        def __enter__(self) -> Spy:
            return self

        def __exit__(self, *exc: object) -> None:
            self.handle.close()

        def fileno(self) -> int:
            return int(self.handle.fileno())

        def read(self, n: int = -1) -> bytes:
            if self.name == str(path):
                reads.append(n)
            data: bytes = self.handle.read(n)
            return data

    monkeypatch.setattr(files, "open", lambda p, mode="r", **kw: Spy(real_open(p, mode, **kw), p), raising=False)
    code, data, _ = timed(str(path))
    assert code == 1 and "larger than 10485760 bytes" in only(data)["message"]
    assert reads == [], "the size is checked before reading"


def test_max_file_size_flag(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, "o.yaml", OVERLAY.format(name="o", weight=1))
    code, data, _ = timed(path, "--max-file-size", "100")
    assert code == 1 and "larger than 100 bytes" in only(data)["message"]
    code, data, _ = timed(path, "--max-file-size", "1Mi")
    assert code == 0 and data["summary"]["objects"] == 1


def test_stdin_over_the_limit_is_refused() -> None:
    code, data, _ = timed("-", "--max-file-size", "1Ki", stdin=b"a: " + b"x" * 5000)
    assert code == 1 and only(data)["file"] == "<stdin>"


def test_missing_name(tmp_path: pathlib.Path) -> None:
    text = "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata:\n  labels: {}\nspec: {}\n"
    path = write(tmp_path, "noname.yaml", text)
    f = only(timed(path)[1])
    assert f["object"] == {"kind": "NodeOverlay", "name": path}
    assert f["field"] == "metadata.name" and f["line"] == 3  # nearest existing ancestor


@pytest.mark.parametrize(("content", "what"), [("- a\n- b\n", "a list"), ("just text\n", "a string"),
                                               ("42\n", "a number")])
def test_document_that_is_not_a_mapping(tmp_path: pathlib.Path, content: str, what: str) -> None:
    f = only(timed(write(tmp_path, "x.yaml", content))[1])
    assert what in f["message"] and f["object"]["kind"] == "File"


@pytest.mark.parametrize(("content", "needle"), [
    ("a: 1\nb: 2\na: 3\n", "duplicate key 'a'"),
    ("a: *nowhere\n", "not defined"),
    ("a: &x [1, *x]\n", "recursive"),
    ("? [1, 2]\n: v\n", "keys must be scalars"),
    ("a: !!int twelve\n", "cannot decode !!str `twelve` as a !!int"),
    ("a: {<<: 5}\n", "merge key"),
])
def test_structural_problems(tmp_path: pathlib.Path, content: str, needle: str) -> None:
    assert needle in only(timed(write(tmp_path, "x.yaml", content))[1])["message"]


def test_many_files_in_one_pass(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "many"
    for i in range(10_000):
        sub = root / f"d{i // 1000}"
        sub.mkdir(parents=True, exist_ok=True)
        if i % 2500 == 0:
            (sub / f"f{i:05}.yaml").write_text(OVERLAY.format(name=f"o{i}", weight=1 + i // 2500))
        else:
            (sub / f"f{i:05}.yaml").write_text(f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}}}\n")
    start = time.monotonic()
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["check", str(root), "--catalog", CATALOG], stdout=out, stderr=err)
    assert time.monotonic() - start < 30  # 10,000 files; the shared test machine can be slow
    assert code == 0
    assert "in 4 objects" in out.getvalue() and "9996 files without" in out.getvalue()


def test_directory_walk_is_sorted_filtered_and_skips_vcs(tmp_path: pathlib.Path) -> None:
    write(tmp_path, "b/2.yml", OVERLAY.format(name="two", weight=2))
    write(tmp_path, "a/1.YAML", OVERLAY.format(name="one", weight=1))
    write(tmp_path, "c.json", json.dumps({"kind": "NodeOverlay", "apiVersion": "karpenter.sh/v1alpha1",
                                          "metadata": {"name": "three"}, "spec": {"requirements": []}}))
    write(tmp_path, "notes.txt", "kind: NodeOverlay\n{{{ broken")
    write(tmp_path, ".git/x.yaml", "kind: NodeOverlay\n{{{ broken")
    write(tmp_path, "chart/templates/d.yaml", "kind: Deployment\nreplicas: {{ .Values.n }}\n")
    found = [s.name for s in files.discover([str(tmp_path)])]
    assert [pathlib.Path(n).relative_to(tmp_path).as_posix() for n in found] == [
        "a/1.YAML", "b/2.yml", "c.json", "chart/templates/d.yaml"]
    code, data, _ = timed(str(tmp_path))
    # The Helm template cannot hold an overlay and is skipped unparsed; named explicitly, it is a template:
    # skipped with a note (tests/test_lint_context.py), never a parse error.
    assert code == 0 and data["summary"]["objects"] == 3
    code, data, _ = timed(str(tmp_path / "chart" / "templates" / "d.yaml"))
    assert code == 0 and data["findings"] == [] and any("a Go template" in n for n in data["notes"])


def test_escaped_kind_in_a_walked_file_is_still_parsed(tmp_path: pathlib.Path) -> None:
    text = OVERLAY.format(name="escaped", weight=1).replace("kind: NodeOverlay", 'kind: "Node\\x4Fverlay"')
    write(tmp_path, "d/o.yaml", text)
    assert timed(str(tmp_path))[1]["summary"]["objects"] == 1


def test_missing_file_is_exit_2(tmp_path: pathlib.Path) -> None:
    code, data, err = run(str(tmp_path / "nope.yaml"))
    assert code == 2 and data == {}
    assert err.count("\n") == 1 and "nope.yaml" in err and "Traceback" not in err


def test_permission_denied_is_exit_2(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Root reads anything, so the denial is injected rather than made with chmod.
    path = write(tmp_path, "secret.yaml", "a: 1\n")

    def deny(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(files, "open", deny, raising=False)
    code, _, err = run(path)
    assert code == 2 and err.strip() == f"overlay-lint: error: {path}: Permission denied"


def test_list_kinds_expand_with_positions(tmp_path: pathlib.Path) -> None:
    text = """\
apiVersion: v1
kind: List
items:
  - apiVersion: karpenter.sh/v1alpha1
    kind: NodeOverlay
    metadata: {name: first}
    spec: {requirements: []}
  - apiVersion: karpenter.sh/v1alpha1
    kind: NodeOverlay
    metadata: {name: second}
    spec:
      requirements:
        - {key: kubernetes.io/arch, operator: Nope, values: [amd64]}
  - 7
  - {apiVersion: v1, kind: Secret, metadata: {name: s}}
"""
    code, data, _ = timed(write(tmp_path, "list.yaml", text))
    by_code = {f["code"]: f for f in data["findings"]}
    assert by_code["schema"]["object"]["name"] == "second" and by_code["schema"]["line"] == 13
    assert by_code["parse-error"]["line"] == 14 and "List item 2" in by_code["parse-error"]["message"]
    assert data["summary"]["objects"] == 2 and code == 1


def test_typed_list_from_the_api(tmp_path: pathlib.Path) -> None:
    doc = {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlayList", "items": [
        {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "n"},
         "spec": {"requirements": []}}]}
    assert timed(write(tmp_path, "l.json", json.dumps(doc)))[1]["summary"]["objects"] == 1


def test_other_kinds_and_groups_are_ignored(tmp_path: pathlib.Path) -> None:
    text = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n"
            "apiVersion: containerservice.example.com/v1\nkind: NodePool\nmetadata: {name: b}\n---\n"
            "name: no kind at all\n")
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["check", write(tmp_path, "o.yaml", text), "--catalog", CATALOG], stdout=out, stderr=err)
    assert code == 0 and "in 0 objects (3 other documents ignored)" in out.getvalue()


def test_json_positions_and_tabs(tmp_path: pathlib.Path) -> None:
    text = ('{\n\t"apiVersion": "karpenter.sh/v1alpha1",\n\t"kind": "NodeOverlay",\n'
            '\t"metadata": {"name": "j"},\n\t"spec": {\n\t\t"weight": 100000,\n'
            '\t\t"requirements": []\n\t}\n}\n')
    f = only(timed(write(tmp_path, "o.json", text))[1], "schema")
    assert (f["line"], f["column"]) == (6, 3) and f["field"] == "spec.weight"


def test_yaml_typing_follows_kubectl() -> None:
    text = "a: yes\nb: 017\nc: 0x1F\nd: '5'\ne: 1.5\nf: ~\ng: !!str 7\nh: 2024-01-01\n"
    parsed = next(tree.documents(text))
    assert parsed.value == {"a": True, "b": 15, "c": 31, "d": "5", "e": 1.5, "f": None, "g": "7",
                            "h": "2024-01-01"}
    # go-yaml v2 reads YAML 1.1 only: kubectl refuses a 1.2 directive, and nothing after it is read.
    first, *rest = tree.documents("%YAML 1.2\n---\na: yes\nb: 017\n---\nc: 1\n")
    assert first.problem is not None and "incompatible YAML document" in first.problem.message and rest == []
    assert next(tree.documents("%YAML 1.1\n---\na: yes\n")).value == {"a": True}


def test_merge_keys_and_aliases() -> None:
    parsed = next(tree.documents("base: &b {x: 1, z: 2}\nover:\n  <<: *b\n  z: 3\nsame: *b\n"))
    assert parsed.value == {"base": {"x": 1, "z": 2}, "over": {"x": 1, "z": 3}, "same": {"x": 1, "z": 2}}
    assert parsed.positions[("over", "x")] == (3, 3)  # a merged key points at its `<<`
    assert parsed.positions[("over", "z")] == (4, 3)


def test_positions_fall_back_to_the_nearest_ancestor() -> None:
    parsed = next(tree.documents("spec:\n  requirements:\n    - key: a\n      operator: In\n"))
    origin = Origin("f.yaml", 0, parsed.positions)
    assert origin.locate(("spec", "requirements", 0, "operator")) == (4, 7)
    assert origin.locate(("spec", "requirements", 0, "values", 3)) == (3, 7)
    assert origin.locate(("spec", "price")) == (1, 1)
    assert origin.locate(()) == (1, 1)


def test_stdin_can_be_read_once(tmp_path: pathlib.Path) -> None:
    code, data, _ = run("-", stdin=OVERLAY.format(name="piped", weight=1).encode())
    assert code == 0 and data["summary"]["objects"] == 1
    code, _, err = run("-", "-", stdin=b"")
    assert code == 2 and "only once" in err


def test_loader_handles_are_in_load_order(tmp_path: pathlib.Path) -> None:
    a = write(tmp_path, "a.yaml", OVERLAY.format(name="a", weight=1))
    b = write(tmp_path, "b.yaml", "x: [\n")
    table = Table()
    loaded = Loader(table).load([a, b])
    assert [d.source for d in loaded.documents] == [0]
    assert [p.source for p in loaded.problems] == [1]
    assert table[0].file == a and table[1].file == b


_YAML_BITS = st.sampled_from(["a", ":", " ", "\n", "-", "[", "]", "{", "}", ",", "&x", "*x", "<<", "!!int",
                              "'", '"', "#", "?", "|", ">", "---", "...", "%YAML 1.2", "\t", "kind: List",
                              "items:", "kind: NodeOverlay", "metadata: {name: n}", "\\", "\x00", "é"])


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_YAML_BITS, max_size=60).map("".join) | st.text(max_size=200))
def test_loader_never_raises(text: str) -> None:
    loaded = Loader(Table()).load_text(files.Text(files.Source("f.yaml", "f.yaml"), text))
    for problem in loaded.problems:
        assert problem.code == "parse-error" and problem.source is not None


def test_json_surrogate_escapes(tmp_path: pathlib.Path) -> None:
    text = ('{"kind": "NodeOverlay", "apiVersion": "karpenter.sh/v1alpha1", '
            '"metadata": {"name": "\\ud83d\\ude00"}}')
    parsed = next(tree.documents(text))
    assert parsed.value["metadata"]["name"] == "\U0001f600"
    lone = next(tree.documents('{"a": "\\ud83dx"}'))
    assert lone.value == {"a": "\ufffdx"}
    out, err = io.StringIO(), io.StringIO()
    path = write(tmp_path, "s.json", text)
    assert cli.main(["check", path, "--catalog", CATALOG], stdout=out, stderr=err) == 1
    out.getvalue().encode("utf-8")  # printable: no lone surrogates reach the output


# --- paths inside a directory that cannot be read --------------------------------------------------

def _dangling(d: pathlib.Path) -> pathlib.Path:
    (d / "gone.yaml").symlink_to(d / "deleted.yaml")
    return d / "gone.yaml"


def _loop(d: pathlib.Path) -> pathlib.Path:
    (d / "loop.yaml").symlink_to("loop.yaml")
    return d / "loop.yaml"


def _fifo(d: pathlib.Path) -> pathlib.Path:
    os.mkfifo(d / "pipe.yaml")  # nobody ever writes: opening it for reading would block
    return d / "pipe.yaml"


def _device(d: pathlib.Path) -> pathlib.Path:
    (d / "zero.yaml").symlink_to("/dev/zero")  # endless
    return d / "zero.yaml"


def _socket(d: pathlib.Path) -> pathlib.Path:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(d / "s.yaml"))
    sock.close()
    return d / "s.yaml"


UNREADABLE: dict[str, tuple[Callable[[pathlib.Path], pathlib.Path], str]] = {
    "dangling symlink": (_dangling, "dangling symbolic link"),
    "symlink loop": (_loop, "symbolic link loop"),
    "fifo": (_fifo, "FIFO"),
    "device": (_device, "device"),
    "socket": (_socket, "socket"),
}


def _conflicting_pair(d: pathlib.Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    write(d, "a.yaml", OVERLAY.format(name="a", weight=7))
    write(d, "sub/b.yaml", OVERLAY.format(name="b", weight=7))


def _run_bounded(*args: str) -> tuple[int, dict[str, Any], str]:
    """`run`, failing (instead of hanging the suite) if a read blocks."""
    box: list[tuple[int, dict[str, Any], str]] = []
    worker = threading.Thread(target=lambda: box.append(run(*args)), daemon=True)
    worker.start()
    worker.join(BOUND)
    assert box, "overlay-lint blocked on an input"
    return box[0]


def _assert_unreadable_reported(data: dict[str, Any], path: pathlib.Path, needle: str) -> None:
    unreadable = [f for f in data["findings"] if f["code"] == "unreadable-input"]
    assert [f["file"] for f in unreadable] == [str(path)], data["findings"]
    assert needle in unreadable[0]["message"] and unreadable[0]["severity"] == "error"
    # The rest of the directory was read and checked.
    assert "same-weight-conflict" in {f["code"] for f in data["findings"]}
    assert data["summary"]["objects"] == 2


@pytest.mark.parametrize("case", sorted(UNREADABLE))
def test_unreadable_path_in_a_directory(tmp_path: pathlib.Path, case: str) -> None:
    make, needle = UNREADABLE[case]
    root = tmp_path / "repo"
    _conflicting_pair(root)
    bad = make(root / "sub")
    code, data, err = _run_bounded(str(root))
    assert code == 2, err
    _assert_unreadable_reported(data, bad, needle)


def test_permission_denied_in_a_directory(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Root reads anything, so the denial is injected rather than made with chmod.
    root = tmp_path / "repo"
    _conflicting_pair(root)
    secret = pathlib.Path(write(root, "secret.yaml", OVERLAY.format(name="s", weight=1)))
    real_open = builtins.open

    def deny(file: Any, *args: Any, **kwargs: Any) -> Any:
        if str(file) == str(secret):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(files, "open", deny, raising=False)
    code, data, _ = run(str(root))
    assert code == 2
    _assert_unreadable_reported(data, secret, "Permission denied")


def test_unlistable_subdirectory(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "repo"
    _conflicting_pair(root)
    locked = root / "locked"
    locked.mkdir()
    write(locked, "hidden.yaml", OVERLAY.format(name="h", weight=1))
    real_scandir = os.scandir

    def scandir(path: Any = ".") -> Any:
        if str(path) == str(locked):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    code, data, _ = run(str(root))
    assert code == 2
    _assert_unreadable_reported(data, locked, "Permission denied")


@pytest.mark.parametrize("fmt", ["text", "sarif", "github", "junit"])
def test_unreadable_input_in_every_format(tmp_path: pathlib.Path, fmt: str) -> None:
    root = tmp_path / "repo"
    _conflicting_pair(root)
    bad = _dangling(root)
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["check", str(root), "--catalog", CATALOG, "--format", fmt], stdout=out, stderr=err)
    assert code == 2 and "unreadable-input" in out.getvalue() and str(bad) in out.getvalue()


def test_simulate_exits_2_on_an_unreadable_input(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "repo"
    _conflicting_pair(root)
    _fifo(root)
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["simulate", str(root), "--catalog", CATALOG], stdout=out, stderr=err)
    assert code == 2 and "unreadable-input" in err.getvalue() and "pipe.yaml" in err.getvalue()


def test_a_fifo_named_on_the_command_line_is_read(tmp_path: pathlib.Path) -> None:
    """`overlay-lint check <(kustomize build)`: a pipe given by name is input, not a problem."""
    pipe = tmp_path / "named.yaml"
    os.mkfifo(pipe)

    def feed() -> None:
        with pipe.open("w") as fh:
            fh.write(OVERLAY.format(name="piped", weight=1))

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    code, data, _ = _run_bounded(str(pipe))
    writer.join(BOUND)
    assert code == 0 and data["summary"]["objects"] == 1
