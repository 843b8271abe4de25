"""Findings in objects kustomize renders point at the file a user edits: the resource file, or the patch that set
the field (tests/lint_fixtures/kustomize: a base, and an overlay with a patch file and an inline JSON patch).
Goldens as in test_lint_golden.py (`OVERLAY_GUARD_UPDATE_GOLDENS=1` rewrites them)."""

from __future__ import annotations

import json
import os
import pathlib
import shutil

import pytest

from sources import objects
from sources.positions import Table
from tests import tools
from tests.lint_support import GOLDEN, ROOT, matches_golden, run

pytestmark = pytest.mark.tools

TREE = "tests/lint_fixtures/kustomize"
CASES = {"kustomize.github": "github", "kustomize.sarif": "sarif", "kustomize.json": "json"}


@pytest.fixture
def kubectl_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{pathlib.Path(tools.kubectl()).parent}{os.pathsep}{os.environ['PATH']}")


def check(monkeypatch: pytest.MonkeyPatch, tree: str, output: str) -> tuple[int, str]:
    # Paths in the output are relative to the working directory.
    monkeypatch.chdir(ROOT)
    code, out, _ = run("check", tree, "--format", output)
    return code, out


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str, kubectl_on_path: None, monkeypatch: pytest.MonkeyPatch) -> None:
    code, output = check(monkeypatch, TREE, CASES[name])
    assert code == 1
    assert matches_golden(name, output), f"{name} differs from its golden file"


def test_each_finding_is_at_the_line_that_set_it(kubectl_on_path: None, monkeypatch: pytest.MonkeyPatch) -> None:
    _, output = check(monkeypatch, TREE, "json")
    where = {(f["code"], f["object"]["name"]): (f["file"], f["line"], f["column"])
             for f in json.loads(output)["findings"]}
    assert where == {
        # The price the conflict is about, in the resource file.
        ("same-weight-conflict", "gpu-spot-risk"): (f"{TREE}/base/pricing.yaml", 27, 3),
        ("schema", "reserved"): (f"{TREE}/base/pricing.yaml", 37, 7),
        # A value the inline JSON patch of the overlay's kustomization.yaml wrote.
        ("ignored-values", "spot-discount"): (f"{TREE}/overlays/prod/kustomization.yaml", 16, 11),
    }


def test_a_field_a_patch_file_sets_is_reported_in_the_patch(kubectl_on_path: None, tmp_path: pathlib.Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(ROOT / TREE, tmp_path / "tree")
    patch = tmp_path / "tree" / "overlays" / "prod" / "weight.yaml"
    patch.write_text(patch.read_text().replace("weight: 10", "weight: 0"))
    monkeypatch.chdir(tmp_path)
    _, out, _ = run("check", "tree", "--format", "json")
    found = [f for f in json.loads(out)["findings"] if f["object"]["name"] == "gpu-spot-risk"]
    assert [(f["code"], f["field"], f["file"], f["line"]) for f in found] == \
        [("schema", "spec.weight", "tree/overlays/prod/weight.yaml", 6)]


def test_no_location_names_a_build() -> None:
    for name in CASES:
        text = (GOLDEN / name).read_text()
        assert "kustomize build" not in text and "%20%28kustomize" not in text


def test_patches_of_one_kustomization_are_told_apart_by_what_they_wrote(kubectl_on_path: None,
                                                                         tmp_path: pathlib.Path) -> None:
    """Two patches selecting by label (which this side does not evaluate): each object's weight is at the patch
    that wrote the value it holds."""
    overlays = "\n---\n".join(
        f"apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {{name: {team}, labels: {{team: {team}}}}}\n"
        f"spec: {{weight: 1, priceAdjustment: '-1%', requirements: []}}" for team in ("a", "b"))
    (tmp_path / "overlays.yaml").write_text(overlays)
    patches = "".join(f"  - target: {{kind: NodeOverlay, labelSelector: team={team}}}\n"
                      f"    patch: |-\n      - op: replace\n        path: /spec/weight\n        value: {weight}\n"
                      for team, weight in (("a", 11), ("b", 12)))
    (tmp_path / "kustomization.yaml").write_text(f"resources: [overlays.yaml]\npatches:\n{patches}")
    table = Table()
    loaded = objects.Loader(table).load([str(tmp_path)])
    where = {d.obj["metadata"]["name"]: table[d.source].where(("spec", "weight")) for d in loaded.documents}
    kustomization = str(tmp_path / "kustomization.yaml")
    assert where == {"a": (kustomization, (7, 9)), "b": (kustomization, (12, 9))}


def test_a_kustomization_kustomize_refuses_is_reported_with_the_users_paths(kubectl_on_path: None,
                                                                            tmp_path: pathlib.Path) -> None:
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "kustomization.yaml").write_text("resources: [missing.yaml]\n")
    table = Table()
    loaded = objects.Loader(table).load([str(tmp_path / "k")])
    [problem] = loaded.problems
    assert problem.code == "parse-error" and table.locate(problem).file == str(tmp_path / "k" / "kustomization.yaml")
    assert "overlay-lint-build-" not in problem.message and str(tmp_path / "k") in problem.message


@pytest.mark.parametrize("name", ["kustomization.yaml", "kustomization.yml", "Kustomization"])
def test_every_kustomization_file_name_is_traced(name: str, kubectl_on_path: None, tmp_path: pathlib.Path) -> None:
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / name).write_text("resources: [pool.yaml]\n")
    (tmp_path / "base" / "pool.yaml").write_text(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: p\nspec:\n  weight: 0\n")
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / name).write_text("resources: [../base]\ncomponents: [../component]\n")
    (tmp_path / "component").mkdir()
    (tmp_path / "component" / name).write_text(
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\npatches:\n  - target: {kind: NodePool}\n"
        "    patch: |-\n      - op: add\n        path: /spec/limits\n        value: {cpu: 100}\n")
    table = Table()
    [pool] = objects.Loader(table).load([str(tmp_path / "env")]).documents
    origin = table[pool.source]
    assert origin.where(("spec", "weight")) == (str(tmp_path / "base" / "pool.yaml"), (6, 3))
    assert origin.where(("spec", "limits", "cpu")) == (str(tmp_path / "component" / name), (8, 17))
