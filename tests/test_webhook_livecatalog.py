"""The webhook's live catalog (webhook/livecatalog.py): a good read of Karpenter's metrics is swapped in whole, a
failed one keeps the catalog in use (the last good one, else the embedded one) and says why; the catalog's source
and age are a gauge and /readyz detail."""

from __future__ import annotations

import contextlib
import http.server
import pathlib
import threading
from collections.abc import Iterator

from prometheus_client.parser import text_string_to_metric_families

from simulation.semantics import catalog as cat
from sources import karpenter
from webhook import cli, livecatalog
from webhook.metrics import Metrics
from webhook.state import Cache

FIXTURE = pathlib.Path(__file__).resolve().parent / "karpenter_fixtures" / "handmade-aws-us-east-1.prom"
EXPOSITION = FIXTURE.read_bytes()
PUBLISHED_M5 = float(next(line.split()[-1] for line in EXPOSITION.decode().splitlines() if line.startswith(
    'karpenter_cloudprovider_instance_type_offering_price_estimate{capacity_type="on-demand",'
    'instance_type="m5.large",zone="us-east-1a"}')))


class _Karpenter(http.server.BaseHTTPRequestHandler):
    body = EXPOSITION

    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def karpenter_at() -> Iterator[tuple[str, type[_Karpenter]]]:
    handler = type("Karpenter", (_Karpenter,), {})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/metrics", handler
    finally:
        server.shutdown()
        server.server_close()


def discount() -> dict[str, object]:
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "od"},
            "spec": {"weight": 10, "priceAdjustment": "-10%", "requirements": [
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}]}}


async def ready_cache(clock: list[float]) -> Cache:
    cache = Cache(debounce=0.01, clock=lambda: clock[0])
    cache.set_catalog(cat.default())
    cache.load([discount()])
    await cache.start()
    assert await cache.wait_ready(30)
    return cache


def catalog_age(metrics: Metrics) -> dict[str, float]:
    family = next(f for f in text_string_to_metric_families(metrics.render().decode())
                  if f.name == "overlay_guard_catalog_age_seconds")
    return {s.labels["source"]: s.value for s in family.samples}


async def test_a_good_read_is_swapped_in_and_a_failed_one_keeps_it() -> None:
    clock = [1000.0]
    cache = await ready_cache(clock)
    try:
        metrics = Metrics(cache, clock=lambda: clock[0])
        assert catalog_age(metrics) == {"embedded": 0.0}
        with karpenter_at() as (url, handler):
            refresher = livecatalog.Refresher(cache, karpenter.Where(url=url), cat.default(), 60)
            clock[0] += 5
            assert await refresher.refresh()
            live = cache.catalog
            assert live is not None and [t.name for t in live.types] == ["c5.large", "m5.large", "z9.large"]
            m5 = next(t for t in live.types if t.name == "m5.large")
            # The cached overlay's -10% undone: the base, not the published effective price.
            assert {o.origin for o in m5.offerings if o.capacity_type == "on-demand"} == {"recovered"}
            assert cache.catalog_detail() == {"source": "karpenter", "ageSeconds": 0.0}
            # The figures as published stay with the read, for the audit to compare with its prediction.
            published = await cache.published_prices()
            assert published is not None and published[("m5.large", "on-demand", "us-east-1a")] == PUBLISHED_M5
            handler.body = EXPOSITION[:-30]  # truncated
            clock[0] += 60
            assert not await refresher.refresh()
        assert cache.catalog is live
        detail = cache.catalog_detail()
        assert detail["source"] == "karpenter" and detail["ageSeconds"] == 60.0 and "truncated" in detail["lastError"]
        assert catalog_age(metrics) == {"karpenter": 60.0}
        assert await cache.published_prices() is None  # stale figures are not compared
        assert not await refresher.refresh()  # nobody answers now
        assert cache.catalog is live and refresher.failures == 2
        assert "cannot reach" in cache.catalog_detail()["lastError"]
    finally:
        await cache.close()


async def test_no_karpenter_keeps_the_embedded_catalog() -> None:
    clock = [0.0]
    cache = await ready_cache(clock)
    try:
        embedded = cache.catalog
        refresher = livecatalog.Refresher(cache, karpenter.Where(url="http://127.0.0.1:9/metrics"), cat.default(), 60)
        assert not await refresher.refresh()
        assert cache.catalog is embedded and cache.catalog_source == "embedded"
        assert [d.obj for d in cache.documents()] == [discount()]
    finally:
        await cache.close()


def test_the_flags_are_checked() -> None:
    base = ["--tls-cert-file", "c", "--tls-private-key-file", "k"]
    for extra in (["--karpenter-metrics-interval", "0"], ["--catalog", "x.json", "--karpenter-metrics", "http://k/"],
                  ["--karpenter-metrics", "http://k/", "--karpenter-service", "a/b"],
                  ["--karpenter-service", "nonsense"]):
        assert cli.main([*base, *extra]) == 2
