"""`overlay-lint check --cluster` against a fake API server speaking the list API."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
from typing import Any

import pytest

from tests.lint_support import CATALOG, VENV_BIN, Cluster, FakeApi, nodepool, overlay, run, write


def test_cluster_objects_are_existing(tmp_path: pathlib.Path, fake_cluster: Cluster) -> None:
    kubeconfig, api = fake_cluster
    live = overlay("live")
    del live["apiVersion"], live["kind"]  # list items may come without them
    api.pages = {"/apis/karpenter.sh/v1alpha1/nodeoverlays": [{"items": [live]}],
                 "/apis/karpenter.sh/v1/nodepools": [{"items": [nodepool("p1")]},
                                                     {"items": [nodepool("p2", 5)]}],
                 "/api/v1/nodes": [{"items": [{"metadata": {"name": "n1", "labels": {
                     "topology.kubernetes.io/region": "us-east-1", "topology.kubernetes.io/zone": "us-east-1d"}}}]}]}
    path = write(tmp_path, "new.yaml", overlay("new"))
    code, out, err = run("check", path, "--cluster", "--kubeconfig", kubeconfig, "--context", "fake",
                         "--format", "json")
    data = json.loads(out)
    assert code == 1, err
    assert [f["code"] for f in data["findings"]] == ["same-weight-conflict"]
    finding = data["findings"][0]
    # Karpenter's order puts `new` first, so the finding is about the cluster's `live`: no position.
    assert finding["object"]["name"] == "live"
    assert finding["related"] == [{"kind": "NodeOverlay", "name": "new"}]
    assert finding["file"] is None and finding["line"] is None
    # overlays, then NodePools in two pages (the continue token was followed), the NodeOverlay CRD (which a live
    # catalog's overlays in effect are judged under), then the Nodes (the cluster's region and zones, a zone beyond the
    # catalog's three among them)
    assert len(api.requests) == 5 and "continue=1" in api.requests[2] and api.requests[4].startswith("/api/v1/nodes")
    assert "customresourcedefinitions" in api.requests[3]
    # The cluster's NodePools replace the implicit default; its Nodes say the region: nothing to note.
    assert data["notes"] == []
    code, out, _ = run("check", path, "--cluster", "--kubeconfig", kubeconfig, "--context", "fake")
    assert out.startswith("<cluster>: error same-weight-conflict NodeOverlay/live: ")


def test_cluster_without_nodeoverlay_crd(tmp_path: pathlib.Path, fake_cluster: Cluster) -> None:
    kubeconfig, api = fake_cluster
    api.pages = {"/apis/karpenter.sh/v1/nodepools": [{"items": []}]}
    path = write(tmp_path, "o.yaml", overlay("a"))
    code, out, _ = run("check", path, "--cluster", "--kubeconfig", kubeconfig, "--context", "fake",
                       "--format", "json")
    assert code == 0 and any("does not serve nodeoverlays" in n for n in json.loads(out)["notes"])


def test_cluster_unreachable_or_misconfigured_exits_2(tmp_path: pathlib.Path,
                                                      fake_cluster: Cluster) -> None:
    kubeconfig, _ = fake_cluster
    path = write(tmp_path, "o.yaml", overlay("a"))
    code, _, err = run("check", path, "--cluster", "--kubeconfig", kubeconfig)  # current context: dead
    assert code == 2 and "cannot reach the cluster" in err and err.count("\n") == 1
    code, _, err = run("check", path, "--cluster", "--kubeconfig", kubeconfig, "--context", "nope")
    assert code == 2 and "Kubernetes configuration" in err
    code, _, err = run("check", path, "--cluster", "--kubeconfig", str(tmp_path / "missing"))
    assert code == 2 and "Traceback" not in err


def test_cluster_api_error_exits_2(tmp_path: pathlib.Path, fake_cluster: Cluster,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    kubeconfig, api = fake_cluster
    api.pages = {"/apis/karpenter.sh/v1alpha1/nodeoverlays": [{"items": []}]}

    def forbidden(self: FakeApi) -> None:
        self._send(403, {"kind": "Status", "code": 403, "reason": "Forbidden"})

    monkeypatch.setattr(api, "do_GET", forbidden)
    code, _, err = run("check", write(tmp_path, "o.yaml", overlay("a")), "--cluster", "--kubeconfig",
                       kubeconfig, "--context", "fake")
    assert code == 2 and "403" in err


def _serve(api: type[FakeApi], overlays: list[dict[str, Any]], pools: list[dict[str, Any]]) -> None:
    api.pages = {"/apis/karpenter.sh/v1alpha1/nodeoverlays": [{"items": overlays}],
                 "/apis/karpenter.sh/v1/nodepools": [{"items": pools}]}


def test_simulate_cluster_shows_what_the_cluster_does(fake_cluster: Cluster) -> None:
    kubeconfig, api = fake_cluster
    _serve(api, [overlay("a", 20), overlay("b", 20), overlay("c", 5)], [nodepool("p1")])
    code, out, err = run("simulate", "--cluster", "--kubeconfig", kubeconfig, "--context", "fake",
                         "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    # Karpenter's order: weight, then the name later in the alphabet first; c is lower and never wins.
    assert {n: s["status"] for n, s in data["overlays"].items()} == {
        "a": "Conflict", "b": "Applied", "c": "Applied"}
    assert list(data["nodepools"]) == ["p1"]
    spot = [o for cell in data["nodepools"]["p1"].values() for o in cell["offerings"]
            if o["capacityType"] == "spot"]
    assert spot and {o["priceOverlay"] for o in spot} == {"b"}


def test_simulate_cluster_with_a_change_on_top(tmp_path: pathlib.Path, fake_cluster: Cluster) -> None:
    """Paths with --cluster: what the cluster does once these are applied (they replace their
    namesakes)."""
    kubeconfig, api = fake_cluster
    _serve(api, [overlay("a", 20), overlay("b", 20)], [nodepool("p1")])
    edit = write(tmp_path, "a.yaml", overlay("a", 30))
    code, out, err = run("simulate", edit, "--cluster", "--kubeconfig", kubeconfig, "--context", "fake",
                         "--format", "json")
    assert code == 0, err
    assert {n: s["status"] for n, s in json.loads(out)["overlays"].items()} == {"a": "Applied", "b": "Applied"}


def test_explain_cluster(fake_cluster: Cluster) -> None:
    kubeconfig, api = fake_cluster
    _serve(api, [overlay("a", 20), overlay("b", 20)], [nodepool("p1")])
    code, out, err = run("explain", "--instance-type", "m5.large", "--cluster", "--kubeconfig", kubeconfig,
                         "--context", "fake")
    assert code == 0, err
    assert out.startswith("instance type m5.large in NodePool(s) p1")
    rows = [line.split() for line in out.splitlines() if line.startswith("  ") and " a " in f" {line} "]
    assert rows and any("Conflict" in row for row in rows)


def test_check_cluster_without_paths_audits_the_cluster(fake_cluster: Cluster) -> None:
    kubeconfig, api = fake_cluster
    _serve(api, [overlay("a", 20), overlay("b", 20), overlay("c", 5)], [nodepool("p1")])
    code, out, err = run("check", "--cluster", "--kubeconfig", kubeconfig, "--context", "fake", "--format", "json")
    data = json.loads(out)
    assert code == 1, err
    assert "same-weight-conflict" in [f["code"] for f in data["findings"]]
    assert data["summary"]["objects"] == 4  # every object in the cluster is under audit


def test_paths_or_cluster_is_required() -> None:
    code, out, err = run("simulate")
    assert code == 2 and out == "" and "--cluster" in err


def _kubectl_overlay(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(VENV_BIN / "kubectl-overlay"), *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_kubectl_plugin_uses_the_current_context(tmp_path: pathlib.Path, fake_cluster: Cluster) -> None:
    kubeconfig, api = fake_cluster
    _serve(api, [overlay("live")], [nodepool("p1")])
    # As kubectl runs plugins: KUBECONFIG in the environment, its current context selected.
    current = tmp_path / "current"
    current.write_text(pathlib.Path(kubeconfig).read_text().replace('"current-context": "dead"',
                                                                    '"current-context": "fake"'))
    env = {**os.environ, "KUBECONFIG": str(current)}
    new = write(tmp_path, "new.yaml", overlay("new"))
    done = _kubectl_overlay(["check", new, "--catalog", CATALOG, "--format", "json"], env)
    assert done.returncode == 1, done.stderr
    (finding,) = json.loads(done.stdout)["findings"]
    assert {finding["object"]["name"], *(r["name"] for r in finding["related"])} == {"live", "new"}
    # kubectl's --context and --kubeconfig, before or after the command's own options.
    env_dead = {**os.environ, "KUBECONFIG": kubeconfig}
    assert _kubectl_overlay(["check", new, "--catalog", CATALOG], env_dead).returncode == 2  # context "dead"
    done = _kubectl_overlay(["check", "--context", "fake", new, "--catalog", CATALOG], env_dead)
    assert done.returncode == 1 and "same-weight-conflict" in done.stdout
    done = _kubectl_overlay(["simulate", "--catalog", CATALOG, "--format", "json", "--kubeconfig", str(current)],
                            {k: v for k, v in os.environ.items() if k != "KUBECONFIG"})
    assert done.returncode == 0 and json.loads(done.stdout)["overlays"] == {
        "live": {"status": "Applied", "reason": ""}}
    done = _kubectl_overlay(["explain", "--instance-type", "m5.large", "--catalog", CATALOG], env)
    assert done.returncode == 0 and "live" in done.stdout


def test_kubectl_plugin_usage() -> None:
    shown = _kubectl_overlay(["--help"], dict(os.environ))
    assert shown.returncode == 0 and shown.stdout.startswith("usage: kubectl overlay")
    for args in ([], ["lint"], ["completion", "bash"]):
        done = _kubectl_overlay(args, dict(os.environ))
        assert done.returncode == 2 and "usage: kubectl overlay" in done.stderr and done.stdout == ""
    helped = _kubectl_overlay(["check", "--help"], dict(os.environ))
    assert helped.returncode == 0 and helped.stdout.startswith("usage: kubectl overlay check")


def test_with_cluster_every_nodepool_is_known_so_a_misspelt_provider_key_is_an_error(
        tmp_path: pathlib.Path, fake_cluster: Cluster) -> None:
    """--cluster reads every NodePool, as --all-nodepools says of files: a key in the AWS provider's domain that is
    none of its well-known labels is then certainly undefined (docs/cli.md); from files alone, a warning."""
    kubeconfig, api = fake_cluster
    _serve(api, [], [nodepool("p1")])
    typo = overlay("typo")
    typo["spec"]["requirements"] = [{"key": "karpenter.k8s.aws/instance-familly", "operator": "In", "values": ["m5"]}]
    path = write(tmp_path, "typo.yaml", typo)
    code, out, err = run("check", path, "--cluster", "--kubeconfig", kubeconfig, "--context", "fake",
                         "--format", "json")
    found = [(f["code"], f["severity"], f["detail"].get("certain")) for f in json.loads(out)["findings"]]
    assert (code, found) == (1, [("unknown-label", "error", "true")]), err
    code, out, err = run("check", path, write(tmp_path, "pool.yaml", nodepool("p1")), "--format", "json")
    found = [(f["code"], f["severity"], f["detail"].get("certain")) for f in json.loads(out)["findings"]]
    assert (code, found) == (0, [("unknown-label", "warning", None)]), err
