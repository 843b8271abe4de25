"""The live catalog (simulation/live.py, `overlay-lint catalog`, `--karpenter-metrics`): Karpenter's published cells
made a catalog, base prices recovered by undoing the overlay in effect (never applied twice), captured as JSON
that `--catalog FILE` reads back. Karpenter is a local HTTP server serving a hand-made exposition."""

from __future__ import annotations

import contextlib
import datetime
import http.server
import json
import math
import os
import pathlib
import tempfile
import threading
import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulation import evaluate as ev
from simulation import live
from simulation.analysis import effects
from simulation.semantics import catalog as cat
from simulation.validation import crds
from sources import karpenter as metrics
from tests.lint_support import BASIC, Cluster, nodepool, run, write

FIXTURES = pathlib.Path(__file__).resolve().parent / "karpenter_fixtures"
EXPOSITION = (FIXTURES / "handmade-aws-us-east-1.prom").read_bytes()
GOLDEN = pathlib.Path(__file__).resolve().parent / "golden" / "catalog-live.json"
STABLE_URL = "http://karpenter.test/metrics"

_ADDITIVE = st.decimals(min_value=-5, max_value=5, places=4).map(lambda d: f"{d:+}")
_PERCENT = st.decimals(min_value=-150, max_value=300, places=2).map(lambda d: f"{d:+}%")
_CHANGES = st.one_of(_ADDITIVE, _PERCENT)
_PRICES = st.floats(min_value=0, max_value=100, allow_nan=False)


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


@settings(max_examples=500, deadline=None)
@given(_PRICES, _CHANGES)
def test_apply_after_invert_gives_the_published_price(published: float, change: str) -> None:
    base = effects.unadjusted(published, change)
    if base is not None:
        assert base >= 0
        assert close(effects.adjusted(base, change) or 0.0, published)


@settings(max_examples=500, deadline=None)
@given(_PRICES, _CHANGES)
def test_invert_after_apply_gives_the_base_unless_clamped(base: float, change: str) -> None:
    published = effects.adjusted(base, change)
    assert published is not None
    recovered = effects.unadjusted(published, change)
    if published > 0:
        # Only a clamp to 0 loses the base: any other result has exactly one base.
        assert recovered is not None and close(recovered, base)
    else:
        assert recovered is None or close(effects.adjusted(recovered, change) or 0.0, 0.0)


@pytest.mark.parametrize("change", ["0.5", "-100%", "-150%"])
def test_what_cannot_be_inverted(change: str) -> None:
    assert effects.unadjusted(0.25, change) is None


def test_a_clamped_additive_price_is_not_inverted() -> None:
    assert effects.adjusted(0.1, "-0.5") == 0
    assert effects.unadjusted(0.0, "-0.5") is None


def cell(name: str, ct: str, zone: str, price: float | None, available: bool = True) -> live.Cell:
    return live.Cell(name, ct, zone, available, price)


def price_overlay(name: str, change: str, *, pool: str | None = None, key: str = "priceAdjustment",
                  capacity_type: str = "on-demand") -> dict[str, Any]:
    reqs: list[dict[str, Any]] = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity_type]}]
    if pool:
        reqs.append({"key": "karpenter.sh/nodepool", "operator": "In", "values": [pool]})
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
            "spec": {"weight": 10, "requirements": reqs, key: change}}


def documents(*objects: dict[str, Any]) -> list[ev.Document]:
    return [ev.Document(obj, i) for i, obj in enumerate(objects)]


def recovered(cells: list[live.Cell], docs: list[ev.Document] | None) -> dict[tuple[str, str, str], cat.Offering]:
    built = live.build(cells, cat.default())
    out = live.recover(built.catalog, cells, docs).catalog
    return {(t.name, o.capacity_type, o.zone): o for t in out.types for o in t.offerings}


CELLS = [cell("m5.large", "on-demand", "us-east-1a", 0.1056), cell("m5.large", "spot", "us-east-1a", 0.04),
         cell("c5.large", "on-demand", "us-east-1a", 0.0935)]


def test_the_base_is_recovered_where_every_nodepools_overlay_undoes_to_it() -> None:
    found = recovered(CELLS, documents(nodepool("a"), nodepool("b"), price_overlay("up", "+10%")))
    on_demand = found[("m5.large", "on-demand", "us-east-1a")]
    assert (on_demand.origin, on_demand.estimated) == ("recovered", False)
    assert close(on_demand.price or 0, 0.096)
    assert close(found[("c5.large", "on-demand", "us-east-1a")].price or 0, 0.085)
    spot = found[("m5.large", "spot", "us-east-1a")]
    assert (spot.price, spot.origin, spot.estimated) == (0.04, "published", False)


@pytest.mark.parametrize("b_change", ["+50%", None], ids=["another-change", "none-in-b"])
def test_nodepools_that_disagree_keep_the_embedded_base(b_change: str | None) -> None:
    # Karpenter publishes whichever NodePool its informer cache lists last (a Go map's order): either could be it.
    objects = [nodepool("a"), nodepool("b"), price_overlay("up-a", "+10%", pool="a")]
    objects += [price_overlay("up-b", b_change, pool="b")] if b_change else []
    built = live.build(CELLS, cat.default())
    result = live.recover(built.catalog, CELLS, documents(*objects))
    offerings = {(t.name, o.capacity_type): o for t in result.catalog.types for o in t.offerings}
    assert (offerings[("m5.large", "on-demand")].origin, offerings[("m5.large", "on-demand")].estimated) == \
        ("embedded", True)
    assert offerings[("m5.large", "spot")].origin == "published"
    assert any("2 offering(s) have NodePools whose price overlays differ" in n for n in result.notes)


def test_an_absolute_price_keeps_the_embedded_base_estimated() -> None:
    found = recovered(CELLS, documents(price_overlay("fixed", "0.5", key="price")))
    on_demand = found[("m5.large", "on-demand", "us-east-1a")]
    assert (on_demand.price, on_demand.origin, on_demand.estimated) == (0.096, "embedded", True)


def test_a_clamped_price_keeps_the_embedded_base_estimated() -> None:
    cells = [cell("m5.large", "on-demand", "us-east-1a", 0.0)]
    found = recovered(cells, documents(price_overlay("free", "-1")))
    assert found[("m5.large", "on-demand", "us-east-1a")].origin == "embedded"


def test_unknown_overlays_keep_published_prices_but_estimated() -> None:
    found = recovered(CELLS, None)
    assert {(o.origin, o.estimated) for o in found.values()} == {("published", True)}


def _recovered_with(cells: list[live.Cell], docs: list[ev.Document], **options: Any
                    ) -> dict[tuple[str, str, str], cat.Offering]:
    built = live.build(cells, cat.default())
    out = live.recover(built.catalog, cells, docs, unplaced=built.unplaced, **options).catalog
    return {(t.name, o.capacity_type, o.zone): o for t in out.types for o in t.offerings}


UNKNOWN_TYPE = [cell("x9.weird", "on-demand", "us-east-1a", 0.45), *CELLS]


@pytest.mark.parametrize(("requirement", "origin", "estimated"), [
    ({"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["x9"]}, "embedded", True),
    ({"key": "karpenter.k8s.aws/instance-family", "operator": "NotIn", "values": ["m5"]}, "recovered", False),
    ({"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["x9.weird"]}, "recovered", False),
], ids=["a-label-the-metrics-lack", "notin-matches-it-anyway", "a-label-it-has"])
def test_a_type_the_guard_cannot_place_keeps_an_estimated_base(requirement: dict[str, Any], origin: str,
                                                               estimated: bool) -> None:
    """Row 5 of issue 39: a type neither the table nor the Nodes know carries only the metrics' labels, so an overlay
    selecting it by another label seems not to match: its overlay-decorated price must not become a published base."""
    overlay = price_overlay("x9-discount", "-10%")
    overlay["spec"]["requirements"].append(requirement)
    found = _recovered_with(UNKNOWN_TYPE, documents(overlay))[("x9.weird", "on-demand", "us-east-1a")]
    assert (found.origin, found.estimated) == (origin, estimated)
    if origin == "embedded":
        assert found.price is None  # the table has no base for it: none is made up
    known = _recovered_with(UNKNOWN_TYPE, documents(overlay))[("c5.large", "on-demand", "us-east-1a")]
    assert known.estimated is False


def _dra_overlay() -> dict[str, Any]:
    overlay = price_overlay("gpu-discount", "-10%")
    overlay["spec"]["dynamicResources"] = {"resourceSliceTemplates": [{"metadata": {"name": "s"}, "spec": {
        "driver": "gpu.example.com", "devices": [{"name": "gpu-0"}]}}]}
    return overlay


@pytest.mark.parametrize("run_crd", [crds.dra, crds.karpenter], ids=["dra", "karpenter"])
def test_an_overlay_whose_verdict_turns_on_the_crd_keeps_an_estimated_base(run_crd: Any) -> None:
    """Row 5 of issue 39: valid under one CRD, a schema error under the other; Karpenter applies what is stored
    whatever the CRD says now, so neither verdict may turn a published price into a base."""
    found = _recovered_with(CELLS, documents(_dra_overlay()), crd=run_crd())
    on_demand = found[("m5.large", "on-demand", "us-east-1a")]
    assert (on_demand.origin, on_demand.estimated) == ("embedded", True)
    assert found[("m5.large", "spot", "us-east-1a")].origin == "published"


def _written(obj: dict[str, Any], when: str, generation: int = 1, observed: int = 1) -> dict[str, Any]:
    obj = {**obj, "metadata": {**obj["metadata"], "generation": generation, "creationTimestamp": "2026-01-01T00:00:00Z",
                               "managedFields": [{"manager": "kubectl", "operation": "Update", "time": when}]},
           "status": {"conditions": [{"type": "ValidationSucceeded", "status": "True", "reason": "Valid", "message": "",
                                      "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": observed}]}}
    return obj


@pytest.mark.parametrize(("when", "generation", "observed", "fresh"), [
    ("2026-06-01T11:59:30Z", 1, 1, True), ("2026-06-01T11:00:00Z", 1, 1, False),
    ("2026-06-01T11:00:00Z", 3, 2, True), ("2026-06-01T11:58:00+00:00", 1, 1, False),
], ids=["written-30s-before", "written-an-hour-before", "generation-not-yet-observed", "at-the-republish-limit"])
def test_an_overlay_changed_after_karpenter_published_keeps_every_base_estimated(
        when: str, generation: int, observed: int, fresh: bool) -> None:
    """Row 5 of issue 39: Karpenter republishes every minute; figures scraped just after a change may predate it."""
    overlay = _written(price_overlay("up", "+10%"), when, generation, observed)
    found = _recovered_with(CELLS, documents(overlay), at="2026-06-01T12:00:00Z")
    on_demand = found[("m5.large", "on-demand", "us-east-1a")]
    assert (on_demand.origin, on_demand.estimated) == (("embedded", True) if fresh else ("recovered", False))
    spot = found[("m5.large", "spot", "us-east-1a")]
    assert spot.estimated is fresh


def test_labels_and_resources_come_from_the_table_then_the_nodes_then_the_metrics() -> None:
    nodes = [live.NodeType("z9.large", {"node.kubernetes.io/instance-type": "z9.large", "kubernetes.io/arch": "arm64",
                                        "kubernetes.io/hostname": "ip-1", "karpenter.sh/nodepool": "a"},
                           {"cpu": "3920m", "memory": "15Gi"})]
    cells = [cell("m5.large", "on-demand", "eu-west-1a", 0.1), cell("z9.large", "spot", "eu-west-1b", 0.2),
             cell("q1.small", "on-demand", "eu-west-1a", 0.3)]
    built = live.build(cells, cat.default(), nodes)
    types = {t.name: t for t in built.catalog.types}
    assert (built.catalog.provider, built.catalog.region, built.catalog.zones) == \
        ("AWS", "eu-west-1", ("eu-west-1a", "eu-west-1b"))
    assert types["m5.large"].labels["karpenter.k8s.aws/instance-family"] == "m5"
    assert types["m5.large"].labels["topology.kubernetes.io/region"] == "eu-west-1"
    assert types["m5.large"].capacity["pods"] == "29"
    assert types["z9.large"].labels == {"node.kubernetes.io/instance-type": "z9.large", "kubernetes.io/arch": "arm64"}
    assert types["z9.large"].capacity == {"cpu": "3920m", "memory": "15Gi"}
    assert types["q1.small"].labels == {"node.kubernetes.io/instance-type": "q1.small",
                                        "topology.kubernetes.io/region": "eu-west-1"}
    assert types["q1.small"].capacity == {}
    assert len(built.notes) == 2


def test_another_clouds_types_take_nothing_from_the_aws_table() -> None:
    built = live.build([cell("m5.large", "on-demand", "eastus-1", 0.1)], cat.default())
    (t,) = built.catalog.types
    assert built.catalog.provider == "Azure"
    assert t.capacity == {} and "karpenter.k8s.aws/instance-family" not in t.labels


def test_reserved_placeholders_are_left_out_and_real_reservations_kept() -> None:
    cells = [cell("m5.large", "reserved", "us-east-1a", 0.0, available=False),
             cell("m5.large", "reserved", "us-east-1b", 1e-8), cell("m5.large", "on-demand", "us-east-1a", 0.1)]
    built = live.build(cells, cat.default())
    assert [(o.capacity_type, o.zone) for o in built.catalog.types[0].offerings] == \
        [("reserved", "us-east-1b"), ("on-demand", "us-east-1a")]


def test_only_placeholders_make_no_catalog() -> None:
    with pytest.raises(cat.CatalogError, match="empty"):
        live.build([cell("m5.large", "reserved", "us-east-1a", 0.0, available=False)], cat.default())


class _Karpenter(http.server.BaseHTTPRequestHandler):
    body = EXPOSITION

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def karpenter(body: bytes = EXPOSITION) -> Iterator[str]:
    handler = type("Karpenter", (_Karpenter,), {"body": body})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/metrics"
    finally:
        server.shutdown()
        server.server_close()


def normalised(text: str, url: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(text.replace(url, STABLE_URL))
    data["capture"]["at"] = "<captured>"
    return data


def discount(tmp_path: pathlib.Path) -> str:
    overlay = price_overlay("od-discount", "-10%")
    overlay["spec"]["requirements"].append(
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]})
    return write(tmp_path, "overlays.yaml", overlay)


def test_catalog_command_writes_the_golden_json(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "catalog.json"
    with karpenter() as url:
        code, _, err = run("catalog", "--karpenter-metrics", url, discount(tmp_path), "-o", str(out), catalog=False)
    assert code == 0, err
    data = normalised(out.read_text(), url)
    if os.environ.get("OVERLAY_GUARD_UPDATE_GOLDENS"):
        GOLDEN.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    assert data == json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert data["capture"] | {"at": ""} == {"from": "karpenter-metrics", "where": STABLE_URL, "at": "",
                                           "published": "8", "recovered": "2", "embedded": "0"}
    m5 = next(t for t in data["instanceTypes"] if t["name"] == "m5.large")
    assert {o["priceOrigin"] for o in m5["offerings"] if o["capacityType"] == "on-demand"} == {"recovered"}


def test_the_captured_catalog_round_trips_through_catalog_file(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "catalog.json"
    overlays = discount(tmp_path)
    with karpenter() as url:
        assert run("catalog", "--karpenter-metrics", url, overlays, "-o", str(out), catalog=False)[0] == 0
        # The same overlays in effect (the base side of a diff): the same catalog as the captured one.
        live_code, live_json, _ = run("diff", overlays, overlays, "--karpenter-metrics", url, "--format", "json",
                                      catalog=False)
    read = cat.from_json(json.loads(out.read_text()))
    assert cat.to_json(read)["instanceTypes"] == json.loads(out.read_text())["instanceTypes"]
    assert dict(read.captured)["recovered"] == "2"
    code, file_json, err = run("diff", overlays, overlays, "--catalog", str(out), "--format", "json", catalog=False)
    assert code == live_code == 0, err
    assert json.loads(file_json) == json.loads(live_json)
    code, file_json, err = run("simulate", overlays, "--catalog", str(out), "--format", "json", catalog=False)
    assert code == 0, err
    offering = json.loads(file_json)["nodepools"]["default"]["m5.large"]["offerings"][0]
    # The overlay is applied once, to the recovered base: the effective price is what Karpenter published.
    assert close(offering["basePrice"], 0.096) and close(offering["price"], 0.0864)


def test_unreachable_karpenter_is_one_line_and_exit_2(tmp_path: pathlib.Path) -> None:
    code, out, err = run("catalog", "--karpenter-metrics", "http://127.0.0.1:9/metrics",
                         "-o", str(tmp_path / "c.json"), catalog=False)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "cannot reach Karpenter's metrics" in err
    assert not (tmp_path / "c.json").exists()
    code, _, err = run("check", discount(tmp_path), "--karpenter-metrics", "http://127.0.0.1:9/metrics",
                       catalog=False)
    assert code == 2 and err.count("\n") == 1


@pytest.mark.parametrize("body", [EXPOSITION[:-40], b"<html>oops</html>\n",
                                  EXPOSITION + EXPOSITION.replace(b"} 0.085\n", b"} 0.09\n")],
                         ids=["truncated", "garbage", "duplicate"])
def test_hostile_expositions_exit_2_with_one_line(tmp_path: pathlib.Path, body: bytes) -> None:
    with karpenter(body) as url:
        code, _, err = run("catalog", "--karpenter-metrics", url, "-o", str(tmp_path / "c.json"), catalog=False)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("argv,wording", [
    (["catalog", "-o", "x.json"], "one of --cluster"),
    (["catalog", "--cluster", "--karpenter-metrics", "http://x/", "-o", "x.json"], "one of --cluster"),
    (["catalog", "--karpenter-metrics", "http://x/", "--karpenter-service", "a/b", "-o", "x.json"], "only apply"),
    (["check", BASIC, "--karpenter-metrics", "http://x/", "--catalog", "c.json"], "not both"),
])
def test_usage_errors(argv: list[str], wording: str) -> None:
    code, _, err = run(*argv, catalog=False)
    assert code == 2 and wording in err


def test_cluster_finds_the_service_and_reads_through_the_proxy(tmp_path: pathlib.Path,
                                                               fake_cluster: Cluster) -> None:
    kubeconfig, api = fake_cluster
    proxy = "/api/v1/namespaces/kube-system/services/karpenter:http-metrics/proxy/metrics"
    api.pages = {
        "/apis/karpenter.sh/v1alpha1/nodeoverlays": [{"items": [json.loads(pathlib.Path(discount(tmp_path))
                                                                           .read_text())]}],
        "/apis/karpenter.sh/v1/nodepools": [{"items": [nodepool("default")]}],
        "/api/v1/services": [{"items": [{"metadata": {"name": "karpenter", "namespace": "kube-system"},
                                         "spec": {"ports": [{"name": "http-metrics", "port": 8080}]}}]}],
        "/api/v1/nodes": [{"items": [{"metadata": {"name": "n1", "labels": {
            "node.kubernetes.io/instance-type": "z9.large", "kubernetes.io/arch": "arm64"}},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi"}}}]}],
    }
    json_get = api.do_GET

    def do_get(self: Any) -> None:
        if urllib.parse.unquote(self.path) == proxy:
            self.requests.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(EXPOSITION)
        else:
            json_get(self)

    api.do_GET = do_get  # type: ignore[method-assign]
    out = tmp_path / "catalog.json"
    code, _, err = run("catalog", "--cluster", "--kubeconfig", kubeconfig, "--context", "fake", "-o", str(out),
                       catalog=False)
    assert code == 0, err
    data = json.loads(out.read_text())
    assert data["capture"]["where"] == "service kube-system/karpenter:http-metrics (API server proxy)"
    assert data["capture"]["recovered"] == "2"
    z9 = next(t for t in data["instanceTypes"] if t["name"] == "z9.large")
    assert z9["labels"]["kubernetes.io/arch"] == "arm64" and z9["allocatable"] == {"cpu": "2", "memory": "4Gi"}
    selectors = [urllib.parse.parse_qs(urllib.parse.urlparse(r).query).get("labelSelector")
                 for r in api.requests if r.startswith("/api/v1/services?")]
    assert selectors == [["app.kubernetes.io/name=karpenter"]]
    code, _, err = run("catalog", "--cluster", "--kubeconfig", kubeconfig, "--context", "fake",
                       "--karpenter-service", "karpenter/missing", "-o", str(out), catalog=False)
    assert code == 2 and err.count("\n") == 1 and "services/missing:http-metrics/proxy" in err


def test_cluster_without_karpenter_is_one_line_and_exit_2(tmp_path: pathlib.Path, fake_cluster: Cluster) -> None:
    kubeconfig, api = fake_cluster
    api.pages = {"/api/v1/services": [{"items": []}]}
    code, _, err = run("catalog", "--cluster", "--kubeconfig", kubeconfig, "--context", "fake",
                       "-o", str(tmp_path / "c.json"), catalog=False)
    assert code == 2 and err.strip().endswith("names it)") and "no Service labelled" in err


def test_completion_offers_the_command_and_its_flags() -> None:
    code, script, _ = run("completion", "bash", catalog=False)
    assert code == 0
    assert "catalog" in script and "--karpenter-metrics" in script and "--karpenter-service" in script


def test_a_type_with_no_available_offering_is_kept_and_noted() -> None:
    built = live.build([cell("m5.large", "spot", "us-east-1a", 0.04, available=False),
                        cell("c5.large", "on-demand", "us-east-1a", 0.085)], cat.default())
    assert [t.name for t in built.catalog.types] == ["c5.large", "m5.large"]
    assert any("1 instance type(s) have no available offering" in n for n in built.notes)


RECOVERED, UNKNOWN = "2 recovered by undoing the overlay in effect", "the overlays in effect are unknown"


@pytest.mark.parametrize(("command", "said"), [
    (["check", "--existing", "{overlays}"], RECOVERED), (["check", "--against", "{overlays}"], RECOVERED),
    (["check"], UNKNOWN), (["simulate"], UNKNOWN), (["explain", "--instance-type", "m5.large"], UNKNOWN),
    (["report", "-o", "{report}"], UNKNOWN), (["diff", "{overlays}"], RECOVERED),
])
def test_every_evaluating_command_takes_the_live_catalog_and_inverts_only_what_is_in_effect(
        tmp_path: pathlib.Path, command: list[str], said: str) -> None:
    """The candidates under review are never taken as in effect: only --existing, --against, the cluster or diff's
    base side are."""
    overlays = discount(tmp_path)
    (tmp_path / "new").mkdir()
    candidate = write(tmp_path / "new", "new.yaml", price_overlay("new", "-20%", capacity_type="spot"))
    argv = [a.format(overlays=overlays, report=tmp_path / "r.html") for a in command]
    with karpenter() as url:
        code, _, err = run(*argv, candidate, "--karpenter-metrics", url, catalog=False)
    assert code == 0, err
    assert said in err


def test_a_new_discount_under_review_changes_the_published_price() -> None:
    """Row 4 of issue 39: Karpenter publishes 0.096 (nothing in effect); a -10% candidate must show 0.0864 on a
    0.096 base, not "recover" 0.1067 from the candidate itself and change nothing."""
    body = EXPOSITION.replace(b'instance_type="m5.large",zone="us-east-1a"} 0.0864', b'instance_type="m5.large",'
                              b'zone="us-east-1a"} 0.096')
    assert body != EXPOSITION
    with tempfile.TemporaryDirectory() as folder, karpenter(body) as url:
        overlays = discount(pathlib.Path(folder))
        code, out, err = run("simulate", overlays, "--karpenter-metrics", url, "--format", "json",
                             "--instance-type", "m5.large", catalog=False)
    assert code == 0, err
    offering, = (o for o in json.loads(out)["nodepools"]["default"]["m5.large"]["offerings"]
                 if (o["zone"], o["capacityType"]) == ("us-east-1a", "on-demand"))
    assert close(offering["basePrice"], 0.096) and close(offering["price"], 0.0864)
    assert offering["priceOverlay"] == "od-discount" and offering["estimated"] is True


def test_metrics_from_a_file_and_from_stdin_make_the_catalog_the_url_does(tmp_path: pathlib.Path) -> None:
    """Row 7 of issue 39: a captured exposition (`curl .../metrics > metrics.txt`) or `-`."""
    captured = tmp_path / "metrics.txt"
    captured.write_bytes(EXPOSITION)
    overlays = discount(tmp_path)
    with karpenter() as url:
        assert run("catalog", "--karpenter-metrics", url, overlays, "-o", str(tmp_path / "u.json"),
                   catalog=False)[0] == 0
    code, _, err = run("catalog", "--karpenter-metrics", str(captured), overlays, "-o", str(tmp_path / "f.json"),
                       catalog=False)
    assert code == 0, err
    code, _, err = run("catalog", "--karpenter-metrics", "-", overlays, "-o", str(tmp_path / "s.json"),
                       stdin=EXPOSITION, catalog=False)
    assert code == 0, err

    def figures(name: str) -> Any:
        return json.loads((tmp_path / name).read_text())["instanceTypes"]

    assert figures("u.json") == figures("f.json") == figures("s.json")
    code, out, err = run("check", overlays, "--karpenter-metrics", "-", stdin=EXPOSITION, catalog=False)
    assert code == 0 and out.startswith("0 errors"), err


@pytest.mark.parametrize(("written", "recovered_count"), [("2026-06-01T11:59:30Z", "0"), ("2026-06-01T10:00:00Z", "2")],
                         ids=["changed-just-before-the-capture", "changed-long-before"])
def test_a_captured_files_time_is_its_scrape_time(tmp_path: pathlib.Path, written: str, recovered_count: str) -> None:
    """A file's modification time stands for when Karpenter's figures were scraped: an overlay changed just before
    may not be in them."""
    captured = tmp_path / "metrics.txt"
    captured.write_bytes(EXPOSITION)
    scraped = datetime.datetime(2026, 6, 1, 12, 0, tzinfo=datetime.UTC).timestamp()
    os.utime(captured, (scraped, scraped))
    overlay = json.loads(pathlib.Path(discount(tmp_path)).read_text())
    path = write(tmp_path, "in-effect.yaml", _written(overlay, written))
    code, _, err = run("catalog", "--karpenter-metrics", str(captured), path, "-o", str(tmp_path / "c.json"),
                       catalog=False)
    assert code == 0, err
    capture = json.loads((tmp_path / "c.json").read_text())["capture"]
    assert (capture["at"], capture["recovered"]) == ("2026-06-01T12:00:00Z", recovered_count)


@pytest.mark.parametrize(("argv", "wording"), [
    (["check", "-", "--karpenter-metrics", "-"], "not both"),
    (["catalog", "-", "--karpenter-metrics", "-", "-o", "x.json"], "not both"),
    (["catalog", "--karpenter-metrics", "/nonexistent/metrics.txt", "-o", "x.json"], "/nonexistent/metrics.txt"),
])
def test_metrics_file_errors_are_one_line_and_exit_2(argv: list[str], wording: str) -> None:
    code, _, err = run(*argv, stdin=b"", catalog=False)
    assert code == 2 and wording in err and err.count("\n") == 1


CAPTURED = next((pathlib.Path(__file__).resolve().parent / "fixtures" / "karpenter-metrics").glob("*.prom"))


def test_an_exposition_captured_from_karpenter_reads_back_its_instance_types_file() -> None:
    """The exposition hack/karpenter-kwok published (its header names the versions and the overlay in effect:
    c6i.large -25% in the one NodePool): the available cells are those it was given, the provider's reserved
    placeholders are left out, and c6i.large's base is recovered from its effective price."""
    cells, _ = metrics.parse(CAPTURED.read_bytes())
    discount = {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
                "metadata": {"name": "c6i-large-discount"}, "spec": {"priceAdjustment": "-25%", "requirements": [
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c6i.large"]}]}}
    found = recovered(list(cells), documents(nodepool("default"), discount))
    embedded = {t.name: t for t in cat.default().types}
    assert {k[0] for k in found} == {"c6i.large", "m5.large", "m7g.large"}
    assert {k[1] for k in found} == {"on-demand", "spot"}  # reserved: the provider's placeholders only
    for (name, _, _), offering in found.items():
        assert close(offering.price or 0.0, embedded[name].offerings[0].price or -1.0)
        assert offering.origin == ("recovered" if name == "c6i.large" else "published")
    assert {(c.instance_type, c.capacity_type, c.zone) for c in cells if c.available} == set(found)
