"""Prometheus metrics on their own registry (nothing global, so tests can build many apps)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from webhook import ledger as lg
from webhook.listener import Listener
from webhook.state import Cache

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# The API server gives up after timeoutSeconds: 5, so the buckets must reach it.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class _CacheCollector(Collector):
    """Read at scrape time, so the gauges never lag the cache."""

    def __init__(self, cache: Cache, clock: Callable[[], float]) -> None:
        self._cache = cache
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        objects = GaugeMetricFamily("overlay_guard_cached_objects", "Objects in the cluster-state cache.",
                                    labels=["kind"])
        for kind, n in sorted(self._cache.live_counts().items()):
            objects.add_metric([kind], n)
        yield objects
        yield GaugeMetricFamily("overlay_guard_pending_admissions",
                                "Records in the admissions ledger (admitted, not known to be stored yet), as this "
                                "replica last read or wrote it.", value=self._cache.pending_count())
        writes = CounterMetricFamily("overlay_guard_ledger_writes",
                                     "Writes to the admissions ledger by result: written (a record added), conflict "
                                     "(409: another write landed first; judged again), swept (records taken out), "
                                     "repaired (a write that also repaired the ledger).", labels=["result"])
        for result, n in sorted(self._cache.ledger_writes.items()):
            writes.add_metric([result], n)
        yield writes
        repairs = CounterMetricFamily("overlay_guard_ledger_repairs",
                                      "Ledger reads that held what cannot be true, by problem: "
                                      + "; ".join(f"{k} ({v})" for k, v in lg.PROBLEMS.items())
                                      + "; deleted (the Lease was gone). Each is rewritten by the next write.",
                                      labels=["problem"])
        for problem in (*lg.PROBLEMS, "deleted"):
            repairs.add_metric([problem], self._cache.ledger_repairs.get(problem, 0))
        yield repairs
        yield GaugeMetricFamily("overlay_guard_ledger_usable",
                                "1 when the ledger's Lease can be read and written (its namespace exists and RBAC "
                                "grants get, create and update); /readyz fails otherwise.",
                                value=int(self._cache.ledger_problem is None))
        refused = CounterMetricFamily("overlay_guard_admissions_unanswered",
                                      "NodeOverlay decisions refused with 503 by reason: budget (not within the "
                                      "decision budget), busy (the ledger full, or the name being admitted by another "
                                      "request), ledger (the ledger could not be read or written).", labels=["reason"])
        for reason, n in sorted(self._cache.unanswered.items()):
            refused.add_metric([reason], n)
        yield refused
        last = self._cache.last_sync
        since = GaugeMetricFamily("overlay_guard_seconds_since_last_sync",
                                  "Seconds since the cache last heard from its source (list, event or "
                                  "bookmark); NaN before the first sync.",
                                  value=float("nan") if last is None else max(0.0, self._clock() - last))
        yield since
        age = GaugeMetricFamily("overlay_guard_catalog_age_seconds",
                                "Seconds since the catalog in use was read, by where it came from (embedded, file, "
                                "karpenter: the live catalog; a failed read keeps it and it ages).", labels=["source"])
        age.add_metric([self._cache.catalog_source], max(0.0, self._clock() - self._cache.catalog_read_at))
        yield age
        yield GaugeMetricFamily("overlay_guard_ready", "1 when /readyz succeeds.",
                                value=int(self._cache.ready))
        yield GaugeMetricFamily("overlay_guard_snapshot_generation", "Snapshots built so far.",
                                value=self._cache.snapshot.generation)
        yield CounterMetricFamily("overlay_guard_denial_confirmations",
                                  "Rounds of reading the objects a denial rests on from the API server.",
                                  value=self._cache.confirmations)
        yield CounterMetricFamily(
            "overlay_guard_denial_objects_missing",
            "Cached objects a denial rested on that the API server did not have (deleted, the watch not there yet).",
            value=self._cache.stale_objects)


class _ConnectionCollector(Collector):
    def __init__(self, listeners: Sequence[Listener]) -> None:
        self._listeners = listeners

    def collect(self) -> Iterator[Metric]:
        open_now = GaugeMetricFamily("overlay_guard_connections",
                                     "Open connections, TLS handshakes included, by port.", labels=["port"])
        rejected = CounterMetricFamily(
            "overlay_guard_connections_rejected",
            "Connections refused or cut off, by port and reason: at_limit (over --max-connections), "
            "out_of_files (accept failed, e.g. EMFILE), handshake (TLS handshake failed or timed out), "
            "header_timeout (no complete request headers in time).", labels=["port", "reason"])
        for site in self._listeners:
            open_now.add_metric([site.name], site.active)
            for reason, throttle in (("at_limit", site.refused), ("out_of_files", site.exhausted),
                                     ("handshake", site.failed), ("header_timeout", site.slow)):
                rejected.add_metric([site.name, reason], throttle.total)
        yield open_now
        yield rejected


class Metrics:
    def __init__(self, cache: Cache, clock: Callable[[], float] = time.monotonic) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "overlay_guard_admission_requests",
            "AdmissionReview requests by endpoint, operation, kind and verdict (allowed, warned, patched, denied, "
            "denied_in_flight: resting only on overlays being admitted and not stored yet, bad_request, error).",
            ["endpoint", "operation", "kind", "verdict"], registry=self.registry)
        self.latency = Histogram(
            "overlay_guard_admission_duration_seconds", "Time from request received to response ready.",
            ["endpoint"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.rebuild = Histogram(
            "overlay_guard_snapshot_rebuild_seconds", "Time to rebuild the prepared snapshot.",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0), registry=self.registry)
        # Set to the handlers' count (Handlers): what a SIGTERM waits for before the process exits.
        self.in_flight = Gauge("overlay_guard_admissions_in_flight",
                               "AdmissionReviews being read or judged now.", registry=self.registry)
        self.registry.register(_CacheCollector(cache, clock))
        cache.on_rebuild = self.rebuild.observe
        # Each request's two series, looked up once per label set (labels() costs more than the update);
        # bounded, as the label values are: the callers pass only known endpoints, operations, kinds, verdicts.
        self._series: dict[tuple[str, str, str, str], tuple[Any, Any]] = {}

    def watch_connections(self, listeners: Sequence[Listener]) -> None:
        self.registry.register(_ConnectionCollector(listeners))

    def observe(self, endpoint: str, operation: str, kind: str, verdict: str, seconds: float) -> None:
        key = (endpoint, operation, kind, verdict)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = (self.requests.labels(endpoint, operation or "-", kind or "-", verdict),
                                          self.latency.labels(endpoint))
        series[0].inc()
        series[1].observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
