"""Renders are cached by the content of what they read (sources/rendercache.py), and several run at once.

A stand-in kustomize counts its calls and prints a fixed stream: a second run over an unchanged tree renders
nothing; a change to any file the kustomization reaches (its own, a base it names, a patch) renders again; a
change elsewhere does not."""

from __future__ import annotations

import os
import pathlib
import stat

import pytest

from sources import kustomize, objects, rendercache
from sources.positions import Table

COUNTING = """#!/bin/sh
for last; do :; done
echo "$last" >> "$(dirname "$0")/calls"
cat "$(dirname "$0")/rendered.yaml"
"""
RENDERED = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: p}\nspec: {weight: 3}\n"


@pytest.fixture
def stand_in(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    tools = tmp_path / "bin"
    tools.mkdir()
    script = tools / "kustomize"
    script.write_text(COUNTING, encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    (tools / "rendered.yaml").write_text(RENDERED, encoding="utf-8")
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("OVERLAY_GUARD_RENDER_CACHE", str(tmp_path / "cache"))
    return tools


def layout(root: pathlib.Path) -> pathlib.Path:
    (root / "base").mkdir(parents=True)
    (root / "overlays" / "prod").mkdir(parents=True)
    (root / "unrelated").mkdir()
    (root / "base" / "kustomization.yaml").write_text("resources: [pool.yaml]\n")
    (root / "base" / "pool.yaml").write_text(RENDERED)
    (root / "overlays" / "prod" / "kustomization.yaml").write_text(
        "resources: [../../base]\npatches: [{path: weight.yaml}]\n")
    (root / "overlays" / "prod" / "weight.yaml").write_text("kind: NodePool\nmetadata: {name: p}\nspec: {weight: 4}\n")
    (root / "unrelated" / "other.yaml").write_text("kind: ConfigMap\n")
    return root


def renders(tools: pathlib.Path) -> int:
    calls = tools / "calls"
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def load(root: pathlib.Path) -> objects.Loaded:
    return objects.Loader(Table()).load([str(root / "overlays")])


@pytest.mark.parametrize(("changed", "renders_again"), [
    (None, False),
    ("overlays/prod/kustomization.yaml", True),
    ("overlays/prod/weight.yaml", True),           # a patch the kustomization names
    ("base/pool.yaml", True),                      # a resource of a base it names
    ("overlays/prod/new.yaml", True),              # anything new under the built directory
    ("unrelated/other.yaml", False),
])
def test_a_render_is_reused_until_what_it_read_changes(changed: str | None, renders_again: bool,
                                                        stand_in: pathlib.Path, tmp_path: pathlib.Path) -> None:
    root = layout(tmp_path / "repo")
    first = load(root)
    assert renders(stand_in) == 1 and [d.obj["spec"]["weight"] for d in first.documents] == [3]
    if changed is not None:
        with open(root / changed, "a", encoding="utf-8") as handle:
            handle.write("# edited\n")
    second = load(root)
    assert renders(stand_in) == (2 if renders_again else 1)
    assert [d.obj for d in second.documents] == [d.obj for d in first.documents]


def test_a_remote_base_is_never_cached(stand_in: pathlib.Path, tmp_path: pathlib.Path) -> None:
    root = layout(tmp_path / "repo")
    (root / "overlays" / "prod" / "kustomization.yaml").write_text(
        "resources: [../../base, https://github.com/example/fleet//base?ref=main]\n")
    load(root)
    load(root)
    assert renders(stand_in) == 2


def test_the_cache_can_be_turned_off(stand_in: pathlib.Path, tmp_path: pathlib.Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OVERLAY_GUARD_RENDER_CACHE", "off")
    root = layout(tmp_path / "repo")
    load(root)
    load(root)
    assert renders(stand_in) == 2 and not (tmp_path / "cache").exists()


def test_the_cache_keeps_the_most_recently_used(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rendercache, "MAX_ENTRIES", 2)
    where = tmp_path / "cache"
    for i, entry in enumerate(("a", "b", "c")):
        rendercache.put(where, entry, "x")
        os.utime(where / f"{entry}.json", ns=(i * 10**9, i * 10**9))
    rendercache.put(where, "d", "x")
    assert sorted(p.name for p in where.iterdir()) == ["c.json", "d.json"]
    assert rendercache.get(where, "c") == "x" and rendercache.get(where, "a") is None


WAITING = """#!/bin/sh
# Each render waits (a bounded poll) until the other one has started: run one after the other, the first
# gives up and says so.
for last; do :; done
here="$(dirname "$0")"
touch "$here/started.$(basename "$last")"
i=0
while [ "$(ls "$here" | grep -c '^started\\.')" -lt 2 ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
[ "$(ls "$here" | grep -c '^started\\.')" -ge 2 ] || echo alone >> "$here/alone"
cat "$here/rendered.yaml"
"""


def test_several_kustomizations_render_at_once(stand_in: pathlib.Path, tmp_path: pathlib.Path) -> None:
    (stand_in / "kustomize").write_text(WAITING, encoding="utf-8")
    for name in ("eu", "us"):
        (tmp_path / "repo" / name).mkdir(parents=True)
        (tmp_path / "repo" / name / "kustomization.yaml").write_text("resources: []\n")
    loaded = objects.Loader(Table()).load([str(tmp_path / "repo")])
    assert len(loaded.documents) == 2 and not (stand_in / "alone").exists()


def test_the_key_covers_the_amendment(tmp_path: pathlib.Path) -> None:
    files = [str(tmp_path)]
    plain = rendercache.key(["kustomize", "build"], kustomize.Amendment(), files)
    assert plain == rendercache.key(["kustomize", "build"], kustomize.Amendment(), files)
    assert plain != rendercache.key(["kustomize", "build"], kustomize.Amendment(namespace="x"), files)
    assert plain != rendercache.key(["kubectl", "kustomize"], kustomize.Amendment(), files)


def test_a_build_leaves_the_tree_as_it_was(stand_in: pathlib.Path, tmp_path: pathlib.Path) -> None:
    root = layout(tmp_path / "repo")
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    load(root)
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
