"""sources/flux.py: a Flux Kustomization's spec.path rendered as kustomize-controller renders it.

The oracle is Flux's own code (hack/flux-build: github.com/fluxcd/pkg/kustomize's generator and build, and its
variable substitution): for every Kustomization of the Flux-layout repositories in tests/fixtures/flux/, the objects
it renders are the objects the linter judges. The rest needs no kustomize: a stand-in renderer prints a rendered
stream, to pin the substitution and the errors."""

from __future__ import annotations

import json
import pathlib
import subprocess
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from sources import flux, objects, tree
from sources.positions import Origin, Table
from tests import tools
from tests.lint_support import ROOT

REPOS = ROOT / "tests" / "fixtures" / "flux"


def kustomizations(repo: pathlib.Path) -> Iterator[tuple[pathlib.Path, Origin, dict[str, Any]]]:
    for path in sorted((repo / "clusters").rglob("*.yaml")):
        for parsed in tree.documents(path.read_text(encoding="utf-8")):
            if isinstance(parsed.value, dict) and parsed.value.get("kind") == "Kustomization":
                yield path, Origin(str(path), parsed.index, parsed.positions), parsed.value


CASES = [(repo, path, origin, obj) for repo in sorted(REPOS.iterdir()) for path, origin, obj in kustomizations(repo)]


def identity(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = obj.get("metadata", {})
    return obj.get("kind", ""), meta.get("namespace", ""), meta.get("name", "")


def kubectl_kustomize() -> list[str]:
    return [tools.kubectl(), "kustomize"]


@pytest.mark.tools
@pytest.mark.parametrize(("repo", "path", "origin", "obj"), CASES,
                         ids=[f"{c[0].name}:{c[3]['metadata']['name']}@{c[1].parent.name}" for c in CASES])
def test_flux_renders_the_objects_the_linter_judges(repo: pathlib.Path, path: pathlib.Path, origin: Origin,
                                                    obj: dict[str, Any], tmp_path: pathlib.Path) -> None:
    (tmp_path / "kustomization.json").write_text(json.dumps(obj), encoding="utf-8")
    done = subprocess.run([tools.flux_build(), str(repo), str(tmp_path / "kustomization.json")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    theirs = [p.value for p in tree.documents(done.stdout) if p.value is not None]
    rendered = flux.render_kustomization(repo, obj, defined_at=origin, command=kubectl_kustomize())
    assert rendered.errors == ()
    # kubectl's kustomize orders objects its own way; Flux applies them as a set.
    assert sorted(map(dict, (d.obj for d in rendered.documents)), key=identity) == sorted(theirs, key=identity)
    assert theirs, "a fixture Kustomization that renders nothing proves nothing"


@pytest.mark.tools
def test_objects_point_at_their_files_and_at_the_kustomizations_patch() -> None:
    repo = REPOS / "layout"
    path, origin, obj = next(c for c in kustomizations(repo) if c[2]["metadata"]["name"] == "karpenter-overlays")
    assert path.parent.name == "production"
    rendered = flux.render_kustomization(repo, obj, defined_at=origin, command=kubectl_kustomize())
    table = Table()
    loaded = objects.Loader(table).load_rendered(rendered)
    where = {d.obj["metadata"]["name"]: table[d.source] for d in loaded.documents}
    base = str(repo / "infrastructure" / "karpenter" / "base" / "overlays.yaml")
    # The weight of spot-discount comes from the Kustomization's own inline patch; its price from the base.
    assert where["spot-discount"].where(("spec", "weight")) == (str(path), (34, 11))
    assert where["spot-discount"].where(("spec", "priceAdjustment")) == (base, (11, 3))
    # savings-plan's weight from the overlay's patch file.
    patch = str(repo / "infrastructure" / "karpenter" / "overlays" / "production" / "savings-plan.yaml")
    assert where["savings-plan"].where(("spec", "weight")) == (patch, (6, 3))
    # What the render read, for a caller that re-renders only when one of them changes.
    assert {str(pathlib.Path(base).resolve()), str(pathlib.Path(patch).resolve())} <= set(rendered.files)


@pytest.mark.tools
def test_substitute_from_is_a_note_and_its_variables_stay(tmp_path: pathlib.Path) -> None:
    (tmp_path / "pools").mkdir()
    (tmp_path / "pools" / "pool.yaml").write_text(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: p\n"
        "  labels: {cluster: '${cluster}', zone: '${zone}'}\nspec: {template: {spec: {requirements: []}}}\n")
    obj = {"metadata": {"name": "k"}, "spec": {"path": "./pools", "postBuild": {
        "substitute": {"cluster": "eu"}, "substituteFrom": [{"kind": "ConfigMap", "name": "vars"}]}}}
    rendered = flux.render_kustomization(tmp_path, obj, command=kubectl_kustomize())
    assert [d.obj["metadata"]["labels"] for d in rendered.documents] == [{"cluster": "eu", "zone": "${zone}"}]
    assert len(rendered.notes) == 1 and "substituteFrom" in rendered.notes[0]


# A stand-in for kustomize: prints the rendered.yaml of the directory it is asked to build (a scratch copy of it).
STAND_IN = ["sh", "-c", 'for last; do :; done; cat "$last/rendered.yaml"', "kustomize"]
POOL = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: p\n  labels:\n    x: {value}\n"


@pytest.mark.parametrize(("written", "substitute", "expected"), [
    ("${a}", {"a": "one"}, "one"),
    ("${missing}", {"a": "one"}, None),            # unknown and lenient: empty, so YAML null
    ("'${missing}'", {"a": "one"}, ""),
    ("${missing:-fallback}", {}, "fallback"),
    ("${a:=fallback}", {"a": "one"}, "one"),
    ("${empty:-fallback}", {"empty": ""}, "fallback"),
    ("${empty-fallback}", {"empty": ""}, None),    # set (to nothing): no default
    ("$${a}", {"a": "one"}, "${a}"),               # escaped
    ("$a", {"a": "one"}, "$a"),                    # only the braced form is a variable
    ("${a}", {"a": "line\none"}, "lineone"),       # newlines dropped from values
])
def test_post_build_substitution(written: str, substitute: dict[str, str], expected: str | None,
                                 tmp_path: pathlib.Path) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "rendered.yaml").write_text(POOL.format(value=written))
    obj = {"spec": {"path": "p", "postBuild": {"substitute": substitute}}}
    rendered = flux.render_kustomization(tmp_path, obj, command=STAND_IN)
    assert rendered.errors == ()
    assert [d.obj["metadata"]["labels"]["x"] for d in rendered.documents] == [expected]


def test_substitution_is_skipped_where_disabled_and_without_post_build(tmp_path: pathlib.Path) -> None:
    (tmp_path / "p").mkdir()
    disabled = POOL.format(value="${a}") + "  annotations:\n    kustomize.toolkit.fluxcd.io/substitute: disabled\n"
    (tmp_path / "p" / "rendered.yaml").write_text(f"{disabled}---\n{POOL.format(value='${a}')}")
    with_vars = flux.render_kustomization(tmp_path, {"spec": {"path": "p", "postBuild": {"substitute": {"a": "1"}}}},
                                          command=STAND_IN)
    assert [d.obj["metadata"]["labels"]["x"] for d in with_vars.documents] == ["${a}", 1]
    without = flux.render_kustomization(tmp_path, {"spec": {"path": "p"}}, command=STAND_IN)
    assert [d.obj["metadata"]["labels"]["x"] for d in without.documents] == ["${a}", "${a}"]


def test_an_invalid_variable_name_is_an_error_at_post_build(tmp_path: pathlib.Path) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "rendered.yaml").write_text(POOL.format(value="${a}"))
    rendered = flux.render_kustomization(tmp_path, {"spec": {"path": "p", "postBuild": {"substitute": {"a-b": "1"}}}},
                                         command=STAND_IN)
    assert rendered.documents == () and len(rendered.errors) == 1 and "'a-b'" in rendered.errors[0].message


KUSTOMIZATION = """apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: apps
  namespace: flux-system
spec:
  interval: 10m
  path: {path}
"""


@pytest.mark.parametrize(("path", "says"), [
    ("./nowhere", "is not a directory"),
    ("../outside", "leads out of the repository"),
    ("https://example.com/repo", "must be a path in the repository"),
    ("/etc", "must be a path in the repository"),
])
def test_a_bad_path_is_one_error_at_spec_path(path: str, says: str, tmp_path: pathlib.Path) -> None:
    (tmp_path / "repo").mkdir()
    (tmp_path / "outside").mkdir()
    file = tmp_path / "repo" / "ks.yaml"
    file.write_text(KUSTOMIZATION.format(path=path))
    parsed = next(iter(tree.documents(file.read_text())))
    rendered = flux.render_kustomization(tmp_path / "repo", parsed.value,
                                         defined_at=Origin(str(file), 0, parsed.positions), command=STAND_IN)
    assert rendered.documents == ()
    assert [(e.file, e.line) for e in rendered.errors] == [(str(file), 8)]
    assert says in rendered.errors[0].message and "Kustomization flux-system/apps" in rendered.errors[0].message


def test_a_render_failure_is_an_error_and_the_loader_reports_it_at_the_kustomization(tmp_path: pathlib.Path) -> None:
    (tmp_path / "p").mkdir()
    file = tmp_path / "ks.yaml"
    file.write_text(KUSTOMIZATION.format(path="./p"))
    parsed = next(iter(tree.documents(file.read_text())))
    rendered = flux.render_kustomization(tmp_path, parsed.value, defined_at=Origin(str(file), 0, parsed.positions),
                                         command=["sh", "-c", "echo 'Error: accumulating resources' >&2; exit 1"])
    assert len(rendered.errors) == 1 and "accumulating resources" in rendered.errors[0].message
    table = Table()
    loaded = objects.Loader(table).load_rendered(rendered)
    assert [(f.code, table.locate(f).file, table.locate(f).line) for f in loaded.problems] == \
        [("parse-error", str(file), 8)]


def test_a_cached_render_is_substituted_with_the_kustomizations_own_variables(tmp_path: pathlib.Path) -> None:
    """Two Kustomizations of one path with different variables: the cached build serves both, each its own."""
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "rendered.yaml").write_text(POOL.format(value="${a}"))
    values = [flux.render_kustomization(tmp_path, {"spec": {"path": "p", "postBuild": {"substitute": {"a": a}}}},
                                        command=STAND_IN).documents[0].obj["metadata"]["labels"]["x"]
              for a in ("one", "two", "one")]
    assert values == ["one", "two", "one"]


def test_a_generated_kustomization_lists_what_flux_would(tmp_path: pathlib.Path) -> None:
    """Every .yaml/.yml under the path, a subdirectory with a kustomization as itself, nothing source-controller
    leaves out of an artifact; a .sourceignore is noted, not read."""
    for name in ("a.yaml", "b.yml", "c.json", "sub/d.yaml", "kust/kustomization.yaml", "kust/e.yaml",
                 ".github/workflows/ci.yaml", ".sops.yaml", "deep/.gitlab-ci.yml", ".sourceignore"):
        (tmp_path / "p" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "p" / name).write_text("kind: ConfigMap\n")
    # The stand-in "renders" the kustomization it was given: the generated one.
    shows_kustomization = ["sh", "-c", 'for last; do :; done; cat "$last/kustomization.yaml"']
    rendered = flux.render_kustomization(tmp_path, {"spec": {"path": "p"}}, command=shows_kustomization)
    assert rendered.documents[0].obj["resources"] == ["./a.yaml", "./b.yml", "./kust", "./sub/d.yaml"]
    assert len(rendered.notes) == 1 and ".sourceignore" in rendered.notes[0]


@pytest.mark.tools
@pytest.mark.parametrize(("staged", "candidates"), [
    ("infrastructure/karpenter/overlays/production/savings-plan.yaml", ["savings-plan"]),   # a patch of it
    ("infrastructure/karpenter/base/overlays.yaml", ["savings-plan", "spot-discount"]),     # their resource file
    ("clusters/production/karpenter.yaml", ["spot-discount"]),                              # its inline patch
    ("infrastructure/karpenter/nodepools/production/default.yaml", []),
])
def test_the_objects_a_staged_file_makes_are_the_candidates(staged: str, candidates: list[str]) -> None:
    repo = REPOS / "layout"
    _, origin, obj = next(c for c in kustomizations(repo) if c[2]["metadata"]["name"] == "karpenter-overlays"
                          and c[0].parent.name == "production")
    rendered = flux.render_kustomization(repo, obj, defined_at=origin, command=kubectl_kustomize())
    loaded = objects.Loader(Table()).load_rendered(rendered, candidate=[str(repo / staged)])
    assert sorted(d.obj["metadata"]["name"] for d in loaded.documents if d.candidate) == candidates
    assert len(loaded.documents) == 2
