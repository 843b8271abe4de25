"""Process lifecycle: listen first (so /healthz answers at once), then load the catalog and
the cluster state off the loop, become ready, and on SIGTERM stop accepting, answer every
request in flight and return 0."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging
import signal
import ssl
import time
from collections.abc import Sequence
from typing import Any, cast

from aiohttp import web

from simulation.semantics import catalog as cat
from simulation.semantics import model, region
from sources import karpenter
from webhook import audit, chain, crdwatch, listener, livecatalog, loader
from webhook.app import HANDLERS, create_app, create_metrics_app
from webhook.config import Config
from webhook.ledgerstore import KubeLedger, follow_access
from webhook.metrics import Metrics
from webhook.state import Cache
from webhook.tls import ReloadingContext

log = logging.getLogger("overlay-guard.server")
BACKLOG = 1024
# Start-up allocates about a million long-lived objects and hardly any cycles: at the default threshold
# (700) the collector would rescan the growing heap thousands of times before the first snapshot.
LOADING_GC_THRESHOLD = 100_000


async def _load(config: Config, cache: Cache, in_use: crdwatch.InUse, chain_tasks: list[asyncio.Task[None]]) -> Any:
    """Returns the live source to stop at shutdown (None for --state). On a cluster without --crd, the
    cluster's NodeOverlay CRD is followed (webhook/crdwatch.py)."""
    # One read of the --state files gives both the catalog's InstanceTypes and the objects.
    state = await asyncio.to_thread(loader.read_state, list(config.state)) if config.state else None
    source = None
    places = None
    if state is None:
        from webhook.informer import KubeSource

        source = await asyncio.to_thread(KubeSource, config.kubeconfig)
        if config.region is None:
            places = await asyncio.to_thread(_places, source)
    catalog = await asyncio.to_thread(loader.catalog_for, config.catalog, state)
    chosen = await asyncio.to_thread(region.choose, catalog, [d.obj for d in state.documents] if state else [],
                                     config.region, places)
    catalog = chosen.catalog
    crd = await asyncio.to_thread(loader.load_crd, config.crd)
    cache.set_catalog(catalog, crd, "file" if config.catalog is not None else "embedded")
    refresher = _refresher(config, cache, source)
    if refresher is not None:
        # The first read waits for the first sync; until it lands (or when it never does) the catalog above serves.
        chain_tasks.append(asyncio.create_task(refresher.run()))
    log.info("catalog loaded", extra={"fields": {"instanceTypes": len(catalog.types),
                                                 "catalog": catalog.description, "region": catalog.region,
                                                 "zones": list(catalog.zones), "notes": list(chosen.notes)}})
    if crd is not None and config.crd is not None:
        in_use.pin(crd, crdwatch.pinned(config.crd))
        # A rule the guard cannot evaluate is one the API server may still refuse an overlay for.
        log.info("CRD loaded", extra={"fields": {"crd": crd.origin, "unchecked": crd.unchecked()}})
    if state is not None:
        cache.load([d.obj for d in state.documents])
        log.info("state loaded from files", extra={"fields": {
            "paths": [str(p) for p in config.state], **cache.live_counts()}})
        return None
    if source is None:
        return None

    _use_cluster(config, cache, source, chain_tasks)
    if config.decision_budget is None or config.admission_chain is None:
        # Kept by the caller (tasks the loop only references weakly can vanish).
        chain_tasks.append(asyncio.create_task(chain.follow(source.client.api_client, cache.follow_chain)))
    if config.crd is None:
        in_use.follow(source, asyncio.get_running_loop())
    source.start(asyncio.get_running_loop(), cache)
    return source


def _use_cluster(config: Config, cache: Cache, source: Any, tasks: list[asyncio.Task[None]]) -> None:
    """The cache's live reads and its ledger in a Lease, which /readyz waits for until the Lease is known usable."""
    async def read(kind: str, name: str) -> Any:
        return await asyncio.to_thread(source.read, kind, name)

    async def list_overlays() -> tuple[list[Any], str | None]:
        return await asyncio.to_thread(source.list, model.NODEOVERLAY)

    cache.reader = read
    cache.lister = list_overlays
    ledger = KubeLedger(source.client.api_client, config.lease_namespace or audit.pod_namespace(), config.ledger_name)
    cache.ledger = ledger
    cache.report_ledger("not checked yet")
    tasks.append(asyncio.create_task(follow_access(ledger, cache.report_ledger)))


def _reads_karpenter(config: Config, source: Any) -> bool:
    return config.karpenter_metrics is not None or (config.karpenter_service is not None and source is not None)


def _refresher(config: Config, cache: Cache, source: Any) -> livecatalog.Refresher | None:
    """The live catalog's reader: --karpenter-metrics URL, else --karpenter-service through the cluster's API server
    (the chart names Karpenter's Service; no Service is searched for, so RBAC grants only that one by name)."""
    if not _reads_karpenter(config, source):
        return None
    if config.karpenter_metrics is not None:
        where = karpenter.Where(url=config.karpenter_metrics)
    else:
        assert config.karpenter_service is not None
        where = karpenter.Where(service=karpenter.parse_service(config.karpenter_service))
    return livecatalog.Refresher(cache, where, cat.default(), config.karpenter_metrics_interval,
                                 None if source is None else source.client)


def _places(source: Any) -> region.Named | None:
    """Where the cluster's Nodes are; None (the region then comes from the catalog) where they cannot be listed."""
    places, unread = cast(tuple[region.Named | None, Sequence[str]], source.client.node_places())
    for note in unread:
        log.warning(note)
    return places


async def _announce_ready(cache: Cache, started: float, collecting: tuple[int, int, int]) -> None:
    while not await cache.wait_ready(3600) or not cache.ready:
        await asyncio.sleep(0.05)
    # What is loaded now lives as long as the process: later collections need not scan it.
    gc.freeze()
    gc.set_threshold(*collecting)
    log.info("ready", extra={"fields": {"secondsSinceStart": round(time.monotonic() - started, 3)}})


def _check_open_files(limits: listener.Limits) -> None:
    soft = listener.raise_open_files_limit()
    # Two listeners, each with its own cap.
    wanted = 2 * limits.max_connections + listener.RESERVED_FILES
    if soft < wanted:
        log.warning("the open-files limit is below what the connection limit needs; accepts will fail "
                    "(and be retried) when descriptors run out", extra={"fields": {
                        "openFilesLimit": soft, "maxConnections": limits.max_connections, "needed": wanted}})


async def serve(config: Config, stop: asyncio.Event | None = None) -> int:
    started = time.monotonic()
    stop = stop or asyncio.Event()
    try:
        tls = ReloadingContext(config.tls_cert_file, config.tls_private_key_file, config.client_ca)
    except (OSError, ssl.SSLError, ValueError) as err:
        log.error("cannot load the TLS certificate and key", extra={"fields": {"error": str(err)}})
        return 2
    cache = Cache(debounce=config.debounce, max_pending=config.max_pending, budget=config.decision_budget,
                  after=config.admission_chain)
    metrics = Metrics(cache)
    in_use = crdwatch.InUse(cache)
    metrics.registry.register(in_use)
    app = create_app(config, cache, metrics)
    limits = config.limits
    _check_open_files(limits)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=config.shutdown_timeout,
                           keepalive_timeout=limits.idle_timeout)
    metrics_runner = web.AppRunner(create_metrics_app(metrics, app[HANDLERS]), access_log=None,
                                   shutdown_timeout=1.0, keepalive_timeout=limits.idle_timeout)
    await runner.setup()
    await metrics_runner.setup()
    assert runner.server is not None and metrics_runner.server is not None
    site = listener.Listener(runner.server, limits, ssl_context=tls.context, name="webhook")
    metrics_site = listener.Listener(metrics_runner.server, limits, name="metrics")
    metrics.watch_connections([site, metrics_site])
    try:
        await site.start(config.host, config.port, BACKLOG)
        await metrics_site.start(config.host, config.metrics_port, BACKLOG)
    except OSError as err:
        log.error("cannot listen", extra={"fields": {"error": str(err), "host": config.host}})
        await site.stop()
        await runner.cleanup()
        await metrics_runner.cleanup()
        return 2
    log.info("listening", extra={"fields": {"host": config.host, "port": site.port,
                                            "metricsPort": metrics_site.port, "mode": config.mode,
                                            "clientCA": config.client_ca is not None,
                                            **dataclasses.asdict(limits)}})
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await cache.start()
    code = 0
    source: Any = None
    collecting = gc.get_threshold()
    gc.set_threshold(LOADING_GC_THRESHOLD, *collecting[1:])
    chain_tasks: list[asyncio.Task[None]] = []
    loading = asyncio.create_task(_load(config, cache, in_use, chain_tasks))
    announcing = asyncio.create_task(_announce_ready(cache, started, collecting))
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({loading, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if loading.done():
        failure = loading.exception()
        if failure is not None:
            log.error("cannot load the catalog or the cluster state",
                      extra={"fields": {"error": f"{type(failure).__name__}: {failure}"}})
            code = 2
            stop.set()
        else:
            source = loading.result()
    # Karpenter's published prices are compared where the live catalog reads them.
    live_prices = cache.published_prices if _reads_karpenter(config, source) else None
    auditing = audit.start(config, cache, metrics.registry, None if source is None else source.client.api_client,
                           live_prices) if loading.done() and code == 0 else []
    await stop.wait()
    log.info("shutting down: no new connections, finishing requests in flight")
    cache.stop_serving()
    for task in (loading, announcing, *auditing, *chain_tasks):
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
    await site.stop()
    drained = await app[HANDLERS].drain(config.shutdown_timeout)
    if not drained:
        log.warning("requests still in flight at the shutdown timeout", extra={"fields": {
            "inflight": app[HANDLERS].inflight}})
    await runner.cleanup()
    await metrics_site.stop()
    await metrics_runner.cleanup()
    if source is not None:
        source.stop()
    await cache.close()
    log.info("stopped", extra={"fields": {"exitCode": code}})
    return code
