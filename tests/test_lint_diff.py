"""`overlay-lint diff`: two revisions of git repositories built here (an edit, an addition, a deletion, renames,
an edit that makes another overlay Conflict, a NodePool change, a catalog change), two directories, and the
cluster as the base. Every price and capacity row is held to `simulate --format json` of each side: the rows
are exactly the offerings and resources whose simulated figures differ, with those figures."""

from __future__ import annotations

import io
import json
import pathlib
import shutil
import subprocess
from typing import Any

import jsonschema
import pytest

from lint import cli, diffview, kubectl, reference
from simulation import evaluate as ev
from tests import lint_support
from tests.lint_support import CATALOG, Cluster, nodepool, overlay

TYPES = "m5.large,g5.xlarge,c7g.large"
SCHEMA = jsonschema.Draft202012Validator(json.loads(reference.DIFF_SCHEMA.read_text(encoding="utf-8")))
Files = dict[str, list[dict[str, Any]]]


class Repo:
    """A git repository whose every commit is a set of files; each is also kept as a plain directory, where
    `simulate` reads that side."""

    def __init__(self, root: pathlib.Path) -> None:
        self.root = root
        self.work = root / "repo"
        self.work.mkdir(parents=True)
        self.commits: list[tuple[str, pathlib.Path]] = []
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=self.work,
                              check=True, capture_output=True, text=True, timeout=60).stdout.strip()

    def commit(self, files: Files, message: str = "change") -> str:
        for old in self.work.glob("**/*.yaml"):
            old.unlink()
        snapshot = self.root / f"side-{len(self.commits)}"
        for base in (self.work, snapshot):
            for name, objects in files.items():
                path = base / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text("\n---\n".join(json.dumps(o) for o in objects), encoding="utf-8")
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        sha = self.git("rev-parse", "HEAD")
        self.commits.append((sha, snapshot))
        return sha


def run(*args: str, cwd: pathlib.Path | None = None, monkeypatch: pytest.MonkeyPatch | None = None,
        catalog: bool = True) -> tuple[int, str, str]:
    if cwd is not None and monkeypatch is not None:
        monkeypatch.chdir(cwd)
    return lint_support.run(*args, catalog=catalog)


def diff_json(repo: Repo, monkeypatch: pytest.MonkeyPatch, *extra: str, status: int = 0,
              catalog: bool = True) -> dict[str, Any]:
    (base, _), (head, _) = repo.commits[-2], repo.commits[-1]
    code, out, err = run("diff", f"{base}..{head}", "--format", "json", *extra, cwd=repo.work,
                         monkeypatch=monkeypatch, catalog=catalog)
    assert code == status, err
    data: dict[str, Any] = json.loads(out)
    SCHEMA.validate(data)
    return data


def simulated(path: pathlib.Path, catalog: bool = True) -> dict[str, Any]:
    extra = ["--catalog", CATALOG] if catalog else []
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["simulate", str(path), "--instance-type", TYPES, "--format", "json", *extra],
                    stdout=out, stderr=err)
    assert code in (0, 1), err
    result: dict[str, Any] = json.loads(out.getvalue())
    return result


def _offerings(sim: dict[str, Any]) -> dict[tuple[str, str, str, str], tuple[float | None, str | None]]:
    out = {}
    for pool, types in sim["nodepools"].items():
        for name, cell in types.items():
            for o in cell["offerings"]:
                price = o["price"] if o["available"] else None
                out[pool, name, o["zone"], o["capacityType"]] = (price, o["priceOverlay"])
    return out


def _resources(sim: dict[str, Any], figure: str) -> dict[tuple[str, str, str], tuple[str, str | None]]:
    out = {}
    for pool, types in sim["nodepools"].items():
        for name, cell in types.items():
            for res, qty in cell[figure].items():
                by = cell["capacityOverlays"].get(res) if figure == "capacity" else None
                out[pool, name, res] = (qty, by)
    return out


def assert_matches_simulate(data: dict[str, Any], before: dict[str, Any], after: dict[str, Any]) -> None:
    """The rows are exactly the offerings and resources whose simulated figures differ, with those figures."""
    old, new = _offerings(before), _offerings(after)
    # A NodePool on one side only is listed as added or removed; its rows are those an overlay sets.
    one_sided = before["nodepools"].keys() ^ after["nodepools"].keys()
    expected = {k: (old.get(k, (None, None)), new.get(k, (None, None))) for k in old.keys() | new.keys()
                if old.get(k) != new.get(k)
                and (k[0] not in one_sided or (old.get(k) or new.get(k, (None, None)))[1] is not None)}
    rows = {(p["nodepool"], p["instanceType"], p["zone"], p["capacityType"]):
            ((p["before"], p["beforeOverlay"]), (p["after"], p["afterOverlay"])) for p in data["prices"]}
    assert rows == expected
    for p in data["prices"]:
        if p["percent"] is not None:
            assert p["percent"] == pytest.approx((p["after"] - p["before"]) / p["before"] * 100)
    old_cap, new_cap = _resources(before, "capacity"), _resources(after, "capacity")
    expected_cap = {k: (old_cap.get(k, (None, None)), new_cap.get(k, (None, None)))
                    for k in old_cap.keys() | new_cap.keys() if old_cap.get(k) != new_cap.get(k)
                    and (k[0] not in one_sided or (old_cap.get(k) or new_cap.get(k, (None, None)))[1] is not None)}
    cap_rows = {(r["nodepool"], r["instanceType"], r["resource"]):
                ((r["before"], r["beforeOverlay"]), (r["after"], r["afterOverlay"]))
                for r in data["resources"] if r["figure"] == "capacity"}
    assert cap_rows == expected_cap


def check_sides(repo: Repo, data: dict[str, Any], catalog: bool = True) -> None:
    (_, before), (_, after) = repo.commits[-2], repo.commits[-1]
    assert_matches_simulate(data, simulated(before, catalog), simulated(after, catalog))


POOLS = [nodepool("general"), {**nodepool("ml"), "spec": {"template": {"metadata": {"labels": {"team": "ml"}},
                                                                       "spec": {"requirements": []}}}}]


def gpu(name: str, weight: int = 20, resource: str = "example.com/widget", qty: str = "2") -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
            "spec": {"weight": weight, "requirements": [
                {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["g5"]}],
                "capacity": {resource: qty}}}


@pytest.fixture
def repo(tmp_path: pathlib.Path) -> Repo:
    repo = Repo(tmp_path)
    repo.commit({"pools.yaml": POOLS, "overlays/spot.yaml": [overlay("spot-discount", 10, adjustment="-20%")],
                 "overlays/gpu.yaml": [gpu("gpu-widgets")]}, "base")
    return repo


def test_edit_changes_prices_as_simulate_says(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    repo.commit({"pools.yaml": POOLS, "overlays/spot.yaml": [overlay("spot-discount", 10, adjustment="-30%")],
                 "overlays/gpu.yaml": [gpu("gpu-widgets")]})
    data = diff_json(repo, monkeypatch)
    assert [(o["name"], o["change"], o["before"]["status"], o["after"]["status"]) for o in data["overlays"]] == [
        ("spot-discount", "changed", "Applied", "Applied")]
    assert data["summary"]["overlaysUnchanged"] == 1
    # m5.large and g5.xlarge spot in both NodePools: -20% -> -30% of the base is -12.5%
    assert len(data["prices"]) == 4
    assert [p["percent"] for p in data["prices"]] == pytest.approx([-12.5] * 4)
    # Two offerings, each counted once however many NodePools launch it.
    assert data["summary"]["cheaper"] == 2 and data["summary"]["dearer"] == 0
    check_sides(repo, data)


def test_add_and_delete(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    repo.commit({"pools.yaml": POOLS, "overlays/spot.yaml": [overlay("spot-discount", 10, adjustment="-20%")],
                 "overlays/hugepages.yaml": [gpu("gpu-pages", 30, "hugepages-2Mi", "4Gi")]})
    data = diff_json(repo, monkeypatch)
    assert {(o["name"], o["change"]) for o in data["overlays"]} == {("gpu-pages", "added"),
                                                                      ("gpu-widgets", "removed")}
    removed = next(o for o in data["overlays"] if o["change"] == "removed")
    assert removed["before"]["status"] == "Applied" and removed["after"] is None
    figures = {(r["nodepool"], r["resource"], r["figure"]): (r["before"], r["after"]) for r in data["resources"]}
    # The widgets go, hugepages come, and the allocatable memory (16Gi less 4Gi) with them.
    assert figures[("general", "example.com/widget", "capacity")] == ("2", None)
    assert figures[("general", "hugepages-2Mi", "capacity")] == (None, "4Gi")
    assert figures[("general", "memory", "allocatable")] == ("16Gi", "12Gi")
    assert not data["prices"]
    check_sides(repo, data)


def test_renames(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    # A file renamed: nothing changes. An overlay renamed: one row, the status on both sides.
    repo.commit({"pools.yaml": POOLS, "overlays/spot-pricing.yaml": [overlay("spot-discount", 10, adjustment="-20%")],
                 "overlays/gpu.yaml": [gpu("gpu-widgets")]})
    data = diff_json(repo, monkeypatch)
    assert data["overlays"] == [] and data["prices"] == [] and data["headline"].startswith("no change")
    repo.commit({"pools.yaml": POOLS, "overlays/spot-pricing.yaml": [overlay("spot-discount", 10, adjustment="-20%")],
                 "overlays/gpu.yaml": [gpu("gpu-capacity")]})
    data = diff_json(repo, monkeypatch)
    assert [(o["name"], o["change"], o["renamedFrom"]) for o in data["overlays"]] == [
        ("gpu-capacity", "renamed", "gpu-widgets")]
    # The same value, now set by the new name.
    assert {(r["beforeOverlay"], r["afterOverlay"]) for r in data["resources"]} == {("gpu-widgets", "gpu-capacity")}
    check_sides(repo, data)


def test_edit_that_makes_another_overlay_conflict(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = Repo(tmp_path)
    repo.commit({"pools.yaml": POOLS, "a.yaml": [overlay("aa-spot", 10, adjustment="-20%")],
                 "z.yaml": [overlay("zz-gpu-spot", 20, adjustment="+10%", family="g5")]})
    # zz-gpu-spot moves to weight 10: processed before aa-spot (name descending), which Karpenter now drops.
    repo.commit({"pools.yaml": POOLS, "a.yaml": [overlay("aa-spot", 10, adjustment="-20%")],
                 "z.yaml": [overlay("zz-gpu-spot", 10, adjustment="+10%", family="g5")]})
    data = diff_json(repo, monkeypatch, status=1)
    first = data["overlays"][0]
    assert (first["name"], first["change"], first["before"]["status"], first["after"]["status"]) == (
        "aa-spot", "unchanged", "Applied", "Conflict")
    assert data["summary"]["stopsApplying"] == 1
    assert "same-weight-conflict" in {f["code"] for f in data["introduced"]}
    assert data["summary"]["errorsIntroduced"] >= 1
    check_sides(repo, data)
    (base, _), (head, _) = repo.commits
    code, out, _ = run("diff", f"{base}..{head}", "--format", "markdown", cwd=repo.work, monkeypatch=monkeypatch)
    assert code == 1
    assert out.startswith(diffview.MARKER)
    warning = out.index("[!WARNING]")
    assert out.index("aa-spot", warning) < out.index("| Overlay |"), "Applied -> Conflict comes first"
    code, _, _ = run("diff", f"{base}..{head}", "--fail-on", "warning", cwd=repo.work, monkeypatch=monkeypatch)
    assert code == 1
    # Back again: the conflict is resolved, nothing new fails.
    code, out, _ = run("diff", f"{head}..{base}", "--format", "json", cwd=repo.work, monkeypatch=monkeypatch)
    assert code == 0 and "same-weight-conflict" in {f["code"] for f in json.loads(out)["resolved"]}


def test_nodepool_change(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    team = overlay("ml-spot", 30, adjustment="-50%")
    team["spec"]["requirements"].append({"key": "team", "operator": "In", "values": ["ml"]})
    repo.commit({"pools.yaml": POOLS, "overlays/spot.yaml": [overlay("spot-discount", 10, adjustment="-20%")],
                 "overlays/gpu.yaml": [gpu("gpu-widgets")], "overlays/ml.yaml": [team]})
    labelled = {**nodepool("general"), "spec": {"template": {"metadata": {"labels": {"team": "ml"}},
                                                             "spec": {"requirements": []}}}}
    repo.commit({"pools.yaml": [labelled, POOLS[1], nodepool("batch")],
                 "overlays/spot.yaml": [overlay("spot-discount", 10, adjustment="-20%")],
                 "overlays/gpu.yaml": [gpu("gpu-widgets")], "overlays/ml.yaml": [team]})
    data = diff_json(repo, monkeypatch)
    assert data["nodepools"] == {"added": ["batch"], "removed": [], "changed": ["general"]}
    general = {(p["instanceType"], p["afterOverlay"]) for p in data["prices"] if p["nodepool"] == "general"}
    assert general == {("m5.large", "ml-spot"), ("g5.xlarge", "ml-spot")}
    check_sides(repo, data)


def test_catalog_change(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = pathlib.Path(CATALOG).read_text(encoding="utf-8")
    repo = Repo(tmp_path)
    repo.commit({"pools.yaml": POOLS, "spot.yaml": [overlay("spot-discount", 10, adjustment="-20%")]})
    for sha_index, text in enumerate((catalog, catalog.replace('karpenter.sh/price: "0.04"',
                                                                'karpenter.sh/price: "0.05"'))):
        for side in (repo.work, repo.root / f"side-{sha_index}"):
            if not side.exists():
                shutil.copytree(repo.root / "side-0", side)
            (side / "catalog.yaml").write_text(text, encoding="utf-8")
        repo.git("add", "-A")
        repo.git("commit", "-q", "-m", f"catalog {sha_index}")
    repo.commits = [(repo.git("rev-parse", "HEAD~1"), repo.root / "side-0"),
                    (repo.git("rev-parse", "HEAD"), repo.root / "side-1")]
    data = diff_json(repo, monkeypatch, catalog=False)
    # m5.large spot: 0.04 -> 0.05 base, -20% on both sides, in both NodePools
    assert sorted((p["nodepool"], p["instanceType"], p["zone"], p["capacityType"]) for p in data["prices"]) == [
        (pool, "m5.large", "us-east-1a", "spot") for pool in ("general", "ml")]
    assert [(p["before"], p["after"]) for p in data["prices"]] == [(pytest.approx(0.032), pytest.approx(0.04))] * 2
    check_sides(repo, data, catalog=False)


def test_two_directories_and_fail_on_increase(tmp_path: pathlib.Path) -> None:
    old = tmp_path / "old"
    new = tmp_path / "new"
    lint_support.write(old.mkdir() or old, "o.yaml", *POOLS, overlay("spot", 10, adjustment="-20%"))
    lint_support.write(new.mkdir() or new, "o.yaml", *POOLS, overlay("spot", 10, adjustment="-10%"))
    code, out, err = lint_support.run("diff", str(old), str(new), "--format", "json")
    assert code == 0, err
    assert {round(p["percent"], 3) for p in json.loads(out)["prices"]} == {12.5}
    assert_matches_simulate(json.loads(out), simulated(old), simulated(new))
    assert lint_support.run("diff", str(old), str(new), "--fail-on-increase", "12")[0] == 1
    assert lint_support.run("diff", str(old), str(new), "--fail-on-increase", "13%")[0] == 0
    code, _, err = lint_support.run("diff", str(old), str(new), "--fail-on-increase", "lots")
    assert code == 2 and "not a percentage" in err


def test_cluster_as_the_base(tmp_path: pathlib.Path, fake_cluster: Cluster) -> None:
    kubeconfig, api = fake_cluster
    live = overlay("live", 10, adjustment="-20%")
    api.pages = {"/apis/karpenter.sh/v1alpha1/nodeoverlays": [{"items": [live, overlay("other", 50, family="m5")]}],
                 "/apis/karpenter.sh/v1/nodepools": [{"items": [nodepool("p1")]}]}
    path = lint_support.write(tmp_path, "live.yaml", overlay("live", 10, adjustment="-40%"))
    code, out, err = lint_support.run("diff", "--cluster", path, "--kubeconfig", kubeconfig, "--context", "fake",
                                      "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    # `other` stays (apply, not a sync), and keeps m5.large spot: only g5.xlarge spot moves.
    assert [(o["name"], o["change"]) for o in data["overlays"]] == [("live", "changed")]
    assert {(p["instanceType"], p["capacityType"]) for p in data["prices"]} == {("g5.xlarge", "spot")}
    assert data["base"].startswith("the cluster")


@pytest.mark.parametrize("args, message", [
    (["main..nope"], "not a commit"),
    (["one-path"], "diff takes"),
    (["main..main", "missing-dir"], "no YAML or JSON file"),
])
def test_bad_arguments_exit_2(repo: Repo, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str) -> None:
    (repo.work / "missing-dir").mkdir()
    code, _, err = run("diff", *args, cwd=repo.work, monkeypatch=monkeypatch)
    assert code == 2 and message in err and "Traceback" not in err


def test_outside_a_git_repository_exit_2(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    code, _, err = run("diff", "HEAD~1..HEAD", str(tmp_path), cwd=tmp_path, monkeypatch=monkeypatch)
    assert code == 2 and "git rev-parse" in err


def test_markdown_stays_within_the_comment_limit(tmp_path: pathlib.Path) -> None:
    """Many NodePools: the table per NodePool is cut in the middle, with a count, under the limit."""
    pools = [nodepool(f"pool-{i:03d}") for i in range(60)]
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    lint_support.write(old, "o.yaml", *pools, overlay("spot", 10, adjustment="-20%"))
    lint_support.write(new, "o.yaml", *pools, overlay("spot", 10, adjustment="-21%"))
    code, whole, _ = lint_support.run("diff", str(old), str(new), "--format", "markdown")
    assert code == 0 and len(whole) > 8000
    args = cli.parse(cli.build_parser(), ["diff", str(old), str(new), "--catalog", CATALOG])
    page = diffview.Page(*_page(args))
    short = diffview.markdown(page, limit=8000)
    assert len(short) <= 8000 and short.startswith(diffview.MARKER)
    assert "sections left out" in short and short.count("<details>") == short.count("</details>")
    assert "pool-000" in short and "and 10 more NodePools" in short, "the head and the tail are kept"


def _page(args: Any) -> tuple[Any, ...]:
    run_ = cli._Run(args, None, io.StringIO(), io.StringIO())
    result, two, notes = cli._compared(run_)
    return result, run_.table, two.base_label, two.head_label, notes


def test_a_diff_reads_one_side_once(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files whose blob is the same on both sides are parsed once; their overlays are checked once."""
    repo.commit({"pools.yaml": POOLS, "overlays/spot.yaml": [overlay("spot-discount", 10, adjustment="-30%")],
                 "overlays/gpu.yaml": [gpu("gpu-widgets")]})
    calls: list[str] = []
    real = ev.check_overlay

    def counted(doc: ev.Document, crd: Any = None) -> ev.Checked:
        calls.append(doc.obj["metadata"]["name"])
        return real(doc, crd)

    monkeypatch.setattr(ev, "check_overlay", counted)
    diff_json(repo, monkeypatch)
    assert sorted(calls) == ["gpu-widgets", "spot-discount", "spot-discount"]


def test_kubectl_plugin_diffs_against_the_cluster(tmp_path: pathlib.Path, fake_cluster: Cluster) -> None:
    kubeconfig, api = fake_cluster
    api.pages = {"/apis/karpenter.sh/v1alpha1/nodeoverlays": [{"items": [overlay("live", 10, adjustment="-20%")]}],
                 "/apis/karpenter.sh/v1/nodepools": [{"items": [nodepool("p1")]}]}
    path = lint_support.write(tmp_path, "new.yaml", overlay("new", 10, adjustment="-5%", family="m5"))
    out, err = io.StringIO(), io.StringIO()
    code = kubectl.main(["diff", path, "--kubeconfig", kubeconfig, "--context", "fake", "--catalog", CATALOG,
                         "--format", "json"], stdout=out, stderr=err)
    data = json.loads(out.getvalue())
    # `new` takes m5.large spot first (name descending at weight 10): `live` is now Conflict.
    assert code == 1, err.getvalue()
    assert [(o["name"], o["change"], (o["after"] or {}).get("status")) for o in data["overlays"]] == [
        ("live", "unchanged", "Conflict"), ("new", "added", "Applied")]
