"""`overlay-lint report`: the HTML page's structure, escaping and bounds, and the page as headless
Chromium renders it: no console errors, the charts drawn, and the numbers in the DOM equal to
`overlay-lint simulate --format json` on the same input."""

from __future__ import annotations

import functools
import html.parser
import io
import json
import pathlib
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from lint import cli
from tests import lint_support as clusters
from tests import tools

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = str(ROOT / "examples")
EVIL = "<script>alert(1)</script>"
# A cold apt-get install of chromium on two cores; past this it is hung.
INSTALL_TIMEOUT = 20 * 60.0
RENDER_TIMEOUT = 120.0


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(args), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def report(tmp_path: pathlib.Path, *paths: str) -> str:
    target = tmp_path / "report.html"
    code, _, err = run("report", *paths, "-o", str(target))
    assert code == 0, err
    return target.read_text(encoding="utf-8")


def simulate(*paths: str) -> dict[str, Any]:
    code, out, err = run("simulate", *paths, "--format", "json")
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


class Elements(html.parser.HTMLParser):
    """Every start tag with its attributes, in document order."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str]]] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, {k: v or "" for k, v in attrs}))

    def with_attr(self, name: str, tag: str | None = None) -> Iterator[dict[str, str]]:
        return (a for t, a in self.found if name in a and (tag is None or t == tag))

    def tags(self, tag: str) -> int:
        return sum(1 for t, _ in self.found if t == tag)


def overlay(name: str, weight: int, reqs: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
            "spec": {"weight": weight, "requirements": reqs, **spec}}


def nodepool(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": {"metadata": {"labels": labels or {}}, "spec": {"requirements": []}}}}


def write(tmp_path: pathlib.Path, *objects: dict[str, Any]) -> str:
    path = tmp_path / "input.yaml"
    path.write_text("\n---\n".join(json.dumps(o) for o in objects), encoding="utf-8")
    return str(path)


def types(*names: str) -> dict[str, Any]:
    return {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(names)}


def pool_is(name: str) -> dict[str, Any]:
    return {"key": "karpenter.sh/nodepool", "operator": "In", "values": [name]}


def check_against_simulation(page: str, simulated: dict[str, Any]) -> int:
    """Every status and chart bar of the page equals the simulation's value; returns the bar count."""
    dom = Elements(page)
    statuses = {a["data-overlay"]: a["data-status"] for a in dom.with_attr("data-status", "tr")}
    assert statuses == {n: o["status"] for n, o in simulated["overlays"].items()}
    bars = list(dom.with_attr("data-price", "g"))
    pools = {a["data-nodepool"] for a in dom.with_attr("data-nodepool", "div")}
    assert pools == set(simulated["nodepools"]) or not simulated["nodepools"]
    for bar in bars:
        offerings = simulated["nodepools"][bar["data-nodepool"]][bar["data-type"]]["offerings"]
        match = [o for o in offerings
                 if (o["zone"], o["capacityType"]) == (bar["data-zone"], bar["data-capacity-type"])]
        assert len(match) == 1
        assert float(bar["data-base"]) == match[0]["basePrice"]
        assert float(bar["data-price"]) == match[0]["price"]
        assert bar["data-overlay"] == match[0]["priceOverlay"]
    return len(bars)


# The module fixture below is dear: one xdist worker runs every test here, so it is made once.
pytestmark = pytest.mark.xdist_group("test_lint_report")


@pytest.fixture(scope="module")
def examples_page(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    target = tmp_path_factory.mktemp("report") / "report.html"
    code, _, err = run("report", EXAMPLES, "-o", str(target))
    assert code == 0, err
    return target


@pytest.fixture(scope="module")
def examples_simulated() -> dict[str, Any]:
    return simulate(EXAMPLES)


# --- the page, read as text ----------------------------------------------------------------------

def test_examples_page_matches_simulate(examples_page: pathlib.Path, examples_simulated: dict[str, Any]) -> None:
    page = examples_page.read_text(encoding="utf-8")
    assert check_against_simulation(page, examples_simulated) > 0
    dom = Elements(page)
    conflicts = list(dom.with_attr("class", "tr"))
    assert any(a["class"] == "conflict" and a["data-overlay"] == "finops-spot-gpu-risk" for a in conflicts)
    witness = next(dom.with_attr("data-witness-nodepool"))
    assert (witness["data-witness-nodepool"], witness["data-witness-type"]) == ("batch-spot", "g5.xlarge")
    assert witness["data-witness-offering"] == "us-east-1a/spot"
    assert [a["data-dropped"] for a in dom.with_attr("data-dropped")] == ["finops-spot-gpu-risk"]
    assert dom.tags("svg") == 3  # one chart per NodePool of examples/nodepools.yaml


def test_page_is_self_contained(examples_page: pathlib.Path) -> None:
    page = examples_page.read_text(encoding="utf-8")
    dom = Elements(page)
    assert dom.tags("script") == dom.tags("link") == dom.tags("img") == dom.tags("iframe") == 0
    assert not [a for _, a in dom.found if "src" in a or "href" in a]
    assert "url(" not in page and "@import" not in page


def test_matrix_counts_matched_cells(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, nodepool("a"), nodepool("b"),
                 overlay("two-in-a", 5, [pool_is("a"), types("m5.large", "m5.xlarge")], priceAdjustment="-10%"),
                 overlay("one-everywhere", 6, [types("c5.large")], price="0.01"),
                 overlay("nothing", 7, [types("no-such-type")], priceAdjustment="+1"),
                 overlay("broken", 8, [types("m5.large")], priceAdjustment="-150%"))
    target = tmp_path / "report.html"
    code, _, err = run("report", path, "-o", str(target))
    assert code == 0, err
    page = target.read_text(encoding="utf-8")
    dom = Elements(page)
    cells = {(a["data-nodepool"], row): int(a["data-cells"])
             for row, a in _matrix_cells(dom)}
    assert cells == {("a", "two-in-a"): 2, ("b", "two-in-a"): 0, ("a", "one-everywhere"): 1,
                     ("b", "one-everywhere"): 1, ("a", "nothing"): 0, ("b", "nothing"): 0}
    assert "no-match" in {a["data-code"] for a in dom.with_attr("data-code", "tr")}  # "nothing", a warning
    simulated = simulate(path)
    assert simulated["overlays"]["broken"]["status"] == "Invalid"
    assert check_against_simulation(page, simulated) == 4  # m5.large and m5.xlarge in a, c5.large in a and b


def test_what_a_nodepool_never_launches_is_marked(tmp_path: pathlib.Path) -> None:
    spot_r6i = nodepool("spot-r6i")
    spot_r6i["spec"]["template"]["spec"]["requirements"] = [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
        {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["r6i"]}]
    path = write(tmp_path, spot_r6i,
                 overlay("cheaper", 5, [types("r6i.large", "g5.xlarge", "p5.48xlarge")], priceAdjustment="-10%"))
    page = report(tmp_path, path)
    dom = Elements(page)
    bars = list(dom.with_attr("data-price", "g"))
    assert [(b["data-type"], b["data-capacity-type"]) for b in bars] == [("r6i.large", "spot")]
    assert [a["data-held"] for a in dom.with_attr("data-held")] == ["2"]  # g5.xlarge and p5.48xlarge
    cell, = (a for _, a in _matrix_cells(dom))
    assert (cell["data-cells"], cell["data-launched"]) == ("3", "1")
    assert check_against_simulation(page, simulate(path)) == 1


def _matrix_cells(dom: Elements) -> Iterator[tuple[str, dict[str, str]]]:
    row = ""
    for tag, attrs in dom.found:
        if tag == "tr" and "data-overlay" in attrs:
            row = attrs["data-overlay"]
        if tag == "td" and "data-cells" in attrs:
            yield row, attrs


def test_names_are_escaped(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, nodepool(EVIL, {"example.com/team": EVIL}),
                 overlay(EVIL, 5, [types("m5.large")], priceAdjustment="-10%"),
                 overlay('x" onmouseover="alert(1)', 5, [types("m5.large")], priceAdjustment="-20%"))
    target = tmp_path / "evil.html"
    code, _, _ = run("report", path, "-o", str(target))
    assert code in (0, 1)
    page = target.read_text(encoding="utf-8")
    dom = Elements(page)
    assert dom.tags("script") == 0
    assert not [a for _, a in dom.found if "onmouseover" in a]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert {a["data-overlay"] for a in dom.with_attr("data-status", "tr")} == {EVIL, 'x" onmouseover="alert(1)'}


def test_huge_input_is_capped(tmp_path: pathlib.Path) -> None:
    catalog = json.loads((ROOT / "simulation" / "data" / "aws-us-east-1-instance-types.json").read_text())
    # One instance type each: a page this size, not the core's neighbour scans, is under test.
    names = sorted(t["name"] for t in catalog["instanceTypes"])[:600]
    pools = [nodepool(f"pool-{i:03}") for i in range(40)]
    overlays = [overlay(f"o-{i:04}", i + 1, [types(name)], priceAdjustment=f"-{i % 90}%")
                for i, name in enumerate(names)]
    page = report(tmp_path, write(tmp_path, *pools, *overlays))
    dom = Elements(page)
    more = {int(a["data-more"]) for a in dom.with_attr("data-more")}
    assert 600 - 200 in more  # Applied overlays and matrix rows
    assert 40 - 30 in more  # charts and matrix columns
    assert sum(1 for _ in dom.with_attr("data-status", "tr")) == 200
    assert dom.tags("svg") == 30
    assert len(page) < 2_000_000


def test_report_needs_an_output_file() -> None:
    code, out, err = run("report", EXAMPLES)
    assert code == 2 and out == ""
    assert "-o" in err


def test_report_of_unreadable_input_exits_2(tmp_path: pathlib.Path) -> None:
    code, _, err = run("report", str(tmp_path / "missing.yaml"), "-o", str(tmp_path / "r.html"))
    assert code == 2 and err


def test_kubectl_plugin_reports_the_cluster(tmp_path: pathlib.Path, fake_cluster: clusters.Cluster) -> None:
    kubeconfig, api = fake_cluster
    api.pages = {"/apis/karpenter.sh/v1alpha1/nodeoverlays": [{"items": [clusters.overlay("a", 20),
                                                                           clusters.overlay("b", 20)]}],
                 "/apis/karpenter.sh/v1/nodepools": [{"items": [nodepool("p1")]}]}
    target = tmp_path / "cluster.html"
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "kubectl-overlay"), "report", "-o", str(target),
                           "--kubeconfig", kubeconfig, "--context", "fake", "--catalog", clusters.CATALOG],
                          capture_output=True, text=True, timeout=RENDER_TIMEOUT)
    assert done.returncode == 0, done.stderr
    dom = Elements(target.read_text(encoding="utf-8"))
    assert {a["data-overlay"]: a["data-status"] for a in dom.with_attr("data-status", "tr")} == {
        "a": "Conflict", "b": "Applied"}
    assert [a["data-dropped"] for a in dom.with_attr("data-dropped")] == ["a"]


# --- the page, rendered by headless Chromium -----------------------------------------------------

@functools.cache
def chromium() -> str:
    """Debian's chromium, installed by hack/chromium.sh when missing (`make test` runs it first)."""
    return tools.built("chromium.sh", timeout=INSTALL_TIMEOUT)


def browse(page: pathlib.Path, profile: pathlib.Path, *mode: str) -> subprocess.CompletedProcess[str]:
    argv = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *mode, page.as_uri()]
    return subprocess.run(argv, capture_output=True, text=True, timeout=RENDER_TIMEOUT, check=True)


def console_errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "Uncaught" in line or "CONSOLE" in line]


@pytest.mark.tools
def test_chromium_renders_examples_without_errors(examples_page: pathlib.Path, examples_simulated: dict[str, Any],
                                                  tmp_path: pathlib.Path) -> None:
    done = browse(examples_page, tmp_path / "profile", "--dump-dom")
    assert console_errors(done.stderr) == []
    dom = Elements(done.stdout)
    assert dom.tags("svg") == 3 and dom.tags("rect") > 0
    assert check_against_simulation(done.stdout, examples_simulated) > 0
    rendered = {(row, a["data-nodepool"]) for row, a in _matrix_cells(dom)}
    assert ("m5-xlarge-reserved", "general-purpose") in rendered


@pytest.mark.tools
def test_chromium_runs_no_injected_markup(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, nodepool(EVIL), overlay(EVIL, 5, [types("m5.large")], priceAdjustment="-10%"),
                 overlay("<img src=x onerror=alert(2)>", 6, [types("m5.large")], price="1"))
    target = tmp_path / "evil.html"
    run("report", path, "-o", str(target))
    done = browse(target, tmp_path / "profile", "--dump-dom")
    assert console_errors(done.stderr) == []
    dom = Elements(done.stdout)
    assert dom.tags("script") == dom.tags("img") == 0
    assert EVIL in {a["data-overlay"] for a in dom.with_attr("data-status", "tr")}


@pytest.mark.tools
def test_console_errors_are_detected(tmp_path: pathlib.Path) -> None:
    # The check above must be able to fail: a page that throws is caught by the same filter.
    broken = tmp_path / "broken.html"
    broken.write_text("<!DOCTYPE html><html><body><script>throw new Error('boom')</script></body></html>")
    done = browse(broken, tmp_path / "profile", "--dump-dom")
    assert any("boom" in line for line in console_errors(done.stderr))


@pytest.mark.tools
def test_chromium_screenshot(examples_page: pathlib.Path, tmp_path: pathlib.Path) -> None:
    shot = tmp_path / "report.png"
    browse(examples_page, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1200,1600",
           "--hide-scrollbars")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


# --- the page of a change (report --diff) --------------------------------------------------------

BEFORE, AFTER = str(ROOT / "tests" / "lint_fixtures" / "basic"), str(ROOT / "tests" / "lint_fixtures" / "changed")
FIXTURE_CATALOG = str(ROOT / "tests" / "lint_fixtures" / "catalog.yaml")


@pytest.fixture(scope="module")
def diff_page(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    target = tmp_path_factory.mktemp("diff") / "diff.html"
    code, _, err = run("report", "--diff", BEFORE, AFTER, "--catalog", FIXTURE_CATALOG, "-o", str(target))
    assert code == 0, err
    return target


def check_against_diff(page: str) -> None:
    """Every number on the page is the one `diff --format json` gives (which tests/test_lint_diff.py holds
    to `simulate` of each side)."""
    code, out, err = run("diff", BEFORE, AFTER, "--catalog", FIXTURE_CATALOG, "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    dom = Elements(page)
    prices = {(a["data-nodepool"], a["data-type"], a["data-zone"], a["data-capacity-type"]):
              (a["data-before"], a["data-after"]) for a in dom.with_attr("data-before", "tr") if "data-zone" in a}
    assert prices == {(p["nodepool"], p["instanceType"], p["zone"], p["capacityType"]):
                      (repr(p["before"]), repr(p["after"])) for p in data["prices"]}
    resources = {(a["data-nodepool"], a["data-type"], a["data-resource"], a["data-figure"]):
                 (a["data-before"], a["data-after"]) for a in dom.with_attr("data-resource", "tr")}
    assert resources == {(r["nodepool"], r["instanceType"], r["resource"], r["figure"]):
                         (r["before"] or "", r["after"] or "") for r in data["resources"]}
    overlays = {a["data-overlay"]: (a["data-before"], a["data-after"]) for a in dom.with_attr("data-change", "tr")}
    assert overlays == {o["name"]: ((o["before"] or {}).get("status", "-"), (o["after"] or {}).get("status", "-"))
                        for o in data["overlays"]}
    assert {a["data-code"] for a in dom.with_attr("data-resolved", "tr")} == {f["code"] for f in data["resolved"]}


def test_diff_page_matches_diff(diff_page: pathlib.Path) -> None:
    page = diff_page.read_text(encoding="utf-8")
    check_against_diff(page)
    dom = Elements(page)
    assert dom.tags("script") == dom.tags("link") == dom.tags("img") == dom.tags("iframe") == 0
    assert not [a for _, a in dom.found if "src" in a or "href" in a]
    assert "url(" not in page and "@import" not in page
    headline = next(dom.with_attr("data-offerings", "p"))
    # Offerings counted once whatever the NodePools; rows and counts only where a NodePool launches the cell.
    assert (headline["data-offerings"], headline["data-resources"], headline["data-resolved"]) == ("2", "2", "2")


@pytest.mark.tools
def test_chromium_renders_the_diff_page(diff_page: pathlib.Path, tmp_path: pathlib.Path) -> None:
    done = browse(diff_page, tmp_path / "profile", "--dump-dom")
    assert console_errors(done.stderr) == []
    dom = Elements(done.stdout)
    assert dom.tags("svg") == 2 and dom.tags("rect") > 0
    check_against_diff(done.stdout)
