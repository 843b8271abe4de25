"""Cluster discovery (sources/fleet.py), one source at a time: the config, Flux, Argo CD, kustomization roots, and
everything as one cluster; each discovery error names its file and line."""

from __future__ import annotations

import os
import pathlib
import shutil
import textwrap

import pytest

from sources import fleet

FIXTURES = pathlib.Path(__file__).resolve().parent / "fleet_fixtures"
OVERLAY = "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: o}\nspec: {requirements: []}\n"


def _tree(root: pathlib.Path, layout: dict[str, str]) -> pathlib.Path:
    for name, text in layout.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


def _copy(name: str, tmp_path: pathlib.Path) -> pathlib.Path:
    return pathlib.Path(shutil.copytree(FIXTURES / name, tmp_path / name))


def _discover(root: pathlib.Path, config: str | None = None) -> tuple[fleet.Fleet, dict[str, list[str]]]:
    found = fleet.discover([str(root)], config)
    return found, {c.name: sorted(os.path.relpath(p, root) for p in c.paths) for c in found.clusters}


def test_config_names_the_clusters_with_their_region_catalog_and_crd(tmp_path: pathlib.Path) -> None:
    root = _tree(tmp_path, {
        ".overlay-lint.yaml": """
            clusters:
              - name: eu
                paths: [eu, shared]
                region: eu-west-1
                catalog: catalogs/eu.json
                crd: dra
              - {name: us, paths: [us, shared], karpenterMetrics: http://karpenter:8080/metrics}
        """,
        "eu/o.yaml": OVERLAY, "us/o.yaml": OVERLAY, "shared/o.yaml": OVERLAY,
        # Flux objects are not read when a config names the clusters.
        "clusters/x/k.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: k}\n"
                             "spec: {path: ./nowhere, sourceRef: {kind: GitRepository, name: flux-system}}\n",
    })
    found, paths = _discover(root)
    assert found.how == fleet.CONFIG and found.split and not found.problems
    assert paths == {"eu": ["eu", "shared"], "us": ["shared", "us"]}
    eu, us = found.clusters
    assert (eu.region, eu.crd, os.path.relpath(eu.catalog or "", root)) == ("eu-west-1", "dra", "catalogs/eu.json")
    assert us.karpenter_metrics == "http://karpenter:8080/metrics" and us.region is None
    assert eu.origin == fleet.Origin(fleet.CONFIG, str(root / ".overlay-lint.yaml"), 2)
    # A file shared by both is read by both.
    assert [c.name for c, _ in found.holding(str(root / "shared" / "o.yaml"))] == ["eu", "us"]
    assert [c.name for c, _ in found.holding(str(root / "eu" / "o.yaml"))] == ["eu"]


def test_config_errors_name_file_and_line_and_keep_the_other_clusters(tmp_path: pathlib.Path) -> None:
    root = _tree(tmp_path, {
        "fleet.yaml": """
            clusters:
              - name: a
                paths: [a, missing]
              - name: b
                paths: [b]
              - name: a
                paths: [b]
        """,
        "a/o.yaml": OVERLAY, "b/o.yaml": OVERLAY,
    })
    found, paths = _discover(root, str(root / "fleet.yaml"))
    assert paths == {"a": ["a"], "b": ["b"]}
    assert [(os.path.basename(p.file), p.line, p.cluster) for p in found.problems] == [
        ("fleet.yaml", 3, "a"), ("fleet.yaml", 6, "a")]
    assert "missing" in found.problems[0].message and "second cluster named 'a'" in found.problems[1].message


@pytest.mark.parametrize(("text", "said"), [
    ("clusters: {a: b}\n", "clusters must be a list"),
    ("clusters:\n  - {paths: [a]}\n", "needs a name"),
    ("clusters:\n  - {name: a, paths: [a], zone: x}\n", "unknown field(s) zone"),
    ("clusters:\n  - {name: a, paths: a}\n", "paths must be a list"),
    ("clusters: [\n", ".overlay-lint.yaml:"),
])
def test_a_config_that_cannot_be_read_is_a_usage_error(tmp_path: pathlib.Path, text: str, said: str) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / ".overlay-lint.yaml").write_text(text)
    with pytest.raises(fleet.ConfigError, match=said.replace("(", r"\(").replace(")", r"\)")):
        fleet.discover([str(tmp_path)])


def test_flux_clusters_are_the_directories_holding_their_kustomizations(tmp_path: pathlib.Path) -> None:
    root = _copy("flux", tmp_path)
    found, paths = _discover(root)
    assert found.how == fleet.FLUX and not found.problems
    assert paths == {
        "production": ["infrastructure/karpenter/nodepools/production", "infrastructure/karpenter/overlays/production"],
        "staging": ["infrastructure/karpenter/nodepools/staging", "infrastructure/karpenter/overlays/staging"]}
    production = found.clusters[0]
    assert [(os.path.relpath(o.file or "", root), o.line) for o in production.origins] == [
        ("clusters/production/karpenter.yaml", 1), ("clusters/production/karpenter.yaml", 14),
        ("clusters/production/flux-system/gotk-sync.yaml", 12)]
    # The base both environments include is read by both; a file under one environment only by it.
    base = root / "infrastructure/karpenter/overlays/base/overlays.yaml"
    assert [c.name for c, _ in found.holding(str(base))] == ["production", "staging"]
    patch = root / "infrastructure/karpenter/overlays/staging/kustomization.yaml"
    assert [c.name for c, _ in found.holding(str(patch))] == ["staging"]
    assert found.unclaimed == ()


def test_flux_paths_start_at_the_repository_the_sync_names(tmp_path: pathlib.Path) -> None:
    """A Flux repository inside the linted tree (a monorepo's subdirectory): its paths start at its own root,
    which its sync Kustomization's path (./clusters/production) leads back to."""
    _copy("flux", tmp_path / "deploy")
    found, paths = _discover(tmp_path)
    assert not found.problems
    assert paths["production"] == ["deploy/flux/infrastructure/karpenter/nodepools/production",
                                   "deploy/flux/infrastructure/karpenter/overlays/production"]


def test_flux_errors_and_other_sources(tmp_path: pathlib.Path) -> None:
    root = _copy("flux", tmp_path)
    sync = root / "clusters/staging/karpenter.yaml"
    sync.write_text(sync.read_text().replace("overlays/staging", "overlays/stagin"))
    # A Kustomization of another repository's GitRepository is not this repository's to judge.
    (root / "clusters/staging/other.yaml").write_text(
        "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: other}\n"
        "spec: {path: ./elsewhere, sourceRef: {kind: GitRepository, name: someone-else}}\n")
    found, paths = _discover(root)
    assert paths["staging"] == ["infrastructure/karpenter/nodepools/staging"]
    (problem,) = found.problems
    assert (os.path.relpath(problem.file, root), problem.line, problem.cluster) == (
        "clusters/staging/karpenter.yaml", 23, "staging")
    assert "./infrastructure/karpenter/overlays/stagin" in problem.message


def test_argocd_applications_and_list_generators(tmp_path: pathlib.Path) -> None:
    root = _copy("argocd", tmp_path)
    found, paths = _discover(root)
    assert found.how == fleet.ARGOCD and not found.problems and found.unclaimed == ()
    assert paths == {"dev": ["karpenter/dev"], "prod-eu": ["karpenter/prod-eu"], "prod-us": ["karpenter/prod-us"]}
    assert [(os.path.relpath(o.file or "", root), o.line) for c in found.clusters for o in c.origins] == [
        ("apps/dev.yaml", 1), ("apps/prod-eu.yaml", 1), ("apps/prod-us.yaml", 1)]


def test_argocd_sources_servers_directories_and_errors(tmp_path: pathlib.Path) -> None:
    root = _tree(tmp_path, {
        "apps/multi.yaml": """
            apiVersion: argoproj.io/v1alpha1
            kind: Application
            metadata: {name: multi}
            spec:
              sources:
                - {repoURL: r, path: karpenter/a}
                - {repoURL: r, path: karpenter/gone}
                - {repoURL: r, chart: karpenter}
              destination: {server: "https://10.0.0.1"}
        """,
        "apps/set.yaml": """
            apiVersion: argoproj.io/v1alpha1
            kind: ApplicationSet
            metadata: {name: per-dir}
            spec:
              generators:
                - git: {repoURL: r, revision: HEAD, directories: [{path: "clusters/*"}, {path: clusters/skip,
                        exclude: true}]}
                - scmProvider: {github: {organization: x}}
              template:
                metadata: {name: "{{path.basename}}"}
                spec:
                  source: {repoURL: r, path: "{{path}}"}
                  destination: {name: "{{ .path.basename }}"}
        """,
        "karpenter/a/o.yaml": OVERLAY, "clusters/one/o.yaml": OVERLAY, "clusters/two/o.yaml": OVERLAY,
        "clusters/skip/o.yaml": OVERLAY,
    })
    found, paths = _discover(root)
    assert paths == {"https://10.0.0.1": ["karpenter/a"], "one": ["clusters/one"], "two": ["clusters/two"]}
    (problem,) = found.problems
    assert (os.path.relpath(problem.file, root), problem.line) == ("apps/multi.yaml", 7)
    (note,) = found.notes
    assert note.startswith(f"{root / 'apps/set.yaml'}:8: ApplicationSet per-dir: a scmProvider generator")
    assert found.unclaimed == (str(root / "clusters/skip/o.yaml"),)


def test_each_kustomization_root_is_a_cluster(tmp_path: pathlib.Path) -> None:
    root = _copy("kustomize", tmp_path)
    # A component is included, never applied alone; a root without our kinds is not a cluster of ours.
    _tree(root, {"components/c/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n",
                 "components/c/o.yaml": OVERLAY,
                 "webhook/kustomization.yaml": "resources: [deploy.yaml]\n",
                 "webhook/deploy.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n"})
    found, paths = _discover(root)
    assert found.how == fleet.KUSTOMIZATION
    assert paths == {"prod-eu": ["clusters/prod-eu"], "prod-us": ["clusters/prod-us"]}
    assert found.unclaimed == (str(root / "components/c/o.yaml"),)


def test_a_kustomization_cycle_is_an_error_at_each_file(tmp_path: pathlib.Path) -> None:
    root = _tree(tmp_path, {"a/kustomization.yaml": "resources: [../b, o.yaml]\n", "a/o.yaml": OVERLAY,
                            "b/kustomization.yaml": "resources: [../a]\n"})
    found, _ = _discover(root)
    assert sorted((os.path.relpath(p.file, root), p.line) for p in found.problems) == [
        ("a/kustomization.yaml", 1), ("b/kustomization.yaml", 1)]
    assert "a -> b -> a" in found.problems[0].message and found.split


@pytest.mark.parametrize("layout", [
    {"o.yaml": OVERLAY},
    {"one/kustomization.yaml": "resources: [o.yaml]\n", "one/o.yaml": OVERLAY, "loose.yaml": OVERLAY},
])
def test_otherwise_everything_is_one_cluster_as_before(tmp_path: pathlib.Path, layout: dict[str, str]) -> None:
    found, _ = _discover(_tree(tmp_path, layout))
    assert found.how == fleet.ALL and not found.split
    assert [c.paths for c in found.clusters] == [(str(tmp_path),)]


def test_the_benchmark_fleet_is_discovered_whole(tmp_path: pathlib.Path) -> None:
    from benchmarks import fleet_bench

    fleet_bench.generate(tmp_path, clusters=3, overlays=2, pools=1)
    found, paths = _discover(tmp_path)
    assert found.how == fleet.FLUX and not found.problems and found.unclaimed == ()
    assert paths == {f"c{n}": [f"infrastructure/karpenter/c{n}"] for n in range(3)}
    base = tmp_path / "infrastructure/karpenter/base/overlays.yaml"
    assert [c.name for c, _ in found.holding(str(base))] == ["c0", "c1", "c2"]


def test_several_paths_or_stdin_are_one_cluster(tmp_path: pathlib.Path) -> None:
    root = _copy("flux", tmp_path)
    assert fleet.discover([str(root), str(root)]).how == fleet.ALL
    assert fleet.discover(["-"]).how == fleet.ALL
