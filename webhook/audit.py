"""The audit: every cached overlay evaluated again, the result published as Events and gauges.

It runs after the cache settles on a new snapshot (debounced), every `interval` seconds, and
sooner while events wait for the per-audit bound. Only the Lease holder audits and writes; a
follower exports `overlay_guard_audit_leader 0` and nothing else, so the whole cluster's
figures come from one replica. With `--state` (no cluster, no Lease) the audit runs alone
and logs what it would have written.

The evaluation is the linter's `check --cluster`: every overlay a candidate against the
NodePools, through the one `evaluate` entry point, on the cache's immutable snapshot, in a
worker thread (admissions go on while it runs); each overlay's schema and runtime checks are
reused from the snapshot, only the merge and the analyses run again.

The leader also checks the prediction against Karpenter (webhook/prediction.py): each overlay's
status against the condition Karpenter wrote, and, given a source of Karpenter's published prices,
the effective prices. A disagreement that lasts `grace` seconds is an `OverlayPredictionMismatch`
event and counts in `overlay_guard_prediction_mismatches`; Karpenter's status writes (which do not
change the snapshot) and a disagreement's grace running out each cause an audit of their own.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from simulation import evaluate as ev
from simulation import findings
from simulation.analysis import report as rp
from simulation.semantics import model
from webhook import events, leader, prediction, state, store
from webhook.config import Config

log = logging.getLogger("overlay-guard.audit")
# Cells matched per overlay as a histogram: one series per bucket, whatever the overlay count
# (a per-overlay label would be one series per overlay, 10,000 in the large benchmark).
CELL_BUCKETS = (0, 1, 10, 100, 1_000, 10_000, 100_000)
DEFAULT_INTERVAL = 600.0
# How soon to audit again while events wait for the per-audit bound.
BACKLOG_RETRY = 10.0


@dataclasses.dataclass(frozen=True)
class Summary:
    generation: int
    findings: tuple[findings.Finding, ...]
    statuses: Mapping[str, rp.Status]
    cells: Mapping[str, int]
    seconds: float
    # What Karpenter's provider will publish (only computed when there is something to compare it with).
    prices: Mapping[prediction.PriceKey, tuple[prediction.Priced, ...]] | None = None

    @property
    def status(self) -> Mapping[str, str]:
        return {name: s.state for name, s in self.statuses.items()}


@dataclasses.dataclass(frozen=True)
class Mismatches:
    """The disagreements with Karpenter that outlasted the grace period, at the last audit, and how many overlays
    and offerings were compared at all (so that agreement is told apart from nothing to compare)."""

    status: Mapping[str, prediction.StatusMismatch] = dataclasses.field(default_factory=dict)
    price: Mapping[prediction.PriceKey, prediction.PriceMismatch] = dataclasses.field(default_factory=dict)
    status_compared: int = 0
    price_compared: int = 0
    # Offerings both sides price whose predicted figure rests on the published one (webhook/prediction.py).
    price_unverifiable: int = 0


def evaluate(prepared: ev.Prepared, objects: store.Store) -> ev.Report:
    """Every overlay as a candidate against the NodePools; pure, for a worker thread."""
    docs = store.documents(objects)
    pools = [d for d in docs if model.kind_of(d.obj) == model.NODEPOOL]
    overlays = [d for d in docs if model.kind_of(d.obj) == model.NODEOVERLAY]
    # The snapshot as `previous` lends its grid when the NodePools are the same.
    base = ev.prepare(pools, prepared.catalog, prepared, crd=prepared.crd)
    return ev.evaluate(overlays, base, full=True, checked=prepared.overlays)


def summarise(generation: int, report: ev.Report, seconds: float, prices: bool = False) -> Summary:
    cells = {name: e.type_cells.bit_count() for name, e in report.entries.items()}
    return Summary(generation, report.findings, dict(report.status.items()), cells, seconds,
                   prediction.predicted_prices(report) if prices else None)


def _evaluate_summary(prepared: ev.Prepared, objects: store.Store, generation: int, prices: bool) -> Summary:
    started = time.perf_counter()
    report = evaluate(prepared, objects)
    return summarise(generation, report, time.perf_counter() - started, prices)


def _generation(obj: Mapping[str, Any]) -> Any:
    meta = obj.get("metadata")
    return meta.get("generation") if isinstance(meta, Mapping) else None


def reconciled_overlays(snap: state.Snapshot, live: store.Store) -> dict[str, Mapping[str, Any]]:
    """The stored overlays whose spec the snapshot judged (a newer generation waits for its rebuild)."""
    out: dict[str, Mapping[str, Any]] = {}
    for (kind, name), s in live.items():
        judged = snap.basis.get((kind, name))
        if kind == model.NODEOVERLAY and judged is not None and _generation(judged.obj) == _generation(s.obj):
            out[name] = s.obj
    return out


class LogEvents:
    """EventApi for `--state`: the events it would write, as log lines."""

    async def create(self, body: Mapping[str, Any]) -> bool:
        log.info("audit event (not written: no cluster)", extra={"fields": {
            "reason": body["reason"], "regarding": f"{body['regarding']['kind']}/{body['regarding']['name']}",
            "note": body["note"]}})
        return True

    async def patch(self, name: str, body: Mapping[str, Any]) -> None:
        return None


class Auditor:
    def __init__(self, cache: state.Cache, api: events.EventApi, *, instance: str, interval: float = DEFAULT_INTERVAL,
                 debounce: float = 2.0, limit: int = events.DEFAULT_LIMIT, elector: leader.Elector | None = None,
                 poll: float = 0.25, clock: Callable[[], float] = time.monotonic,
                 grace: float = prediction.DEFAULT_GRACE, prices: prediction.PriceSource | None = None) -> None:
        self.cache = cache
        self.api = api
        self.instance = instance
        self.interval = interval
        self.debounce = debounce
        self.elector = elector
        self.poll = poll
        self.ledger = events.Ledger(limit)
        self._clock = clock
        self.result: Summary | None = None
        self.finished_at: float | None = None  # wall clock, for the timestamp gauge
        self.written: collections.Counter[str] = collections.Counter()
        self.deferred = 0
        self.audits = 0
        self.grace = grace
        # Karpenter's published prices (sources/karpenter.py); None: prices are not compared.
        self.prices = prices
        self.mismatches = Mismatches()
        self._timing: tuple[prediction.Grace[str, prediction.StatusMismatch],
                            prediction.Grace[prediction.PriceKey, prediction.PriceMismatch]] = self._graces()
        # When a disagreement's grace runs out, or a lasting one is to be checked again.
        self.recheck_at: float | None = None

    def _graces(self) -> tuple[prediction.Grace[str, prediction.StatusMismatch],
                               prediction.Grace[prediction.PriceKey, prediction.PriceMismatch]]:
        return prediction.Grace(self.grace), prediction.Grace(self.grace)

    @property
    def leading(self) -> bool:
        return self.elector is None or self.elector.leading

    async def run(self) -> None:
        seen_generation, seen_at = -1, self._clock()
        seen_updates, updated_at = -1, seen_at
        audited: int | None = None
        audited_updates = -1
        was_leading = False
        next_due = 0.0
        while True:
            await asyncio.sleep(self.poll)
            snap = self.cache.snapshot
            now = self._clock()
            if snap.generation != seen_generation:
                seen_generation, seen_at = snap.generation, now
            if self.cache.updates != seen_updates:
                seen_updates, updated_at = self.cache.updates, now
            if not self.leading:
                if was_leading:
                    # What a later leadership sees is timed afresh: this replica was not watching meanwhile.
                    self._timing, self.mismatches, self.recheck_at = self._graces(), Mismatches(), None
                was_leading, self.result = False, None
                continue
            if snap.prepared is None or not self.cache.synced:
                continue
            settled = now - seen_at >= self.debounce
            # Karpenter's status writes leave the snapshot as it is; they are compared once they settle.
            touched = seen_updates != audited_updates and now - updated_at >= self.debounce and settled
            recheck = self.recheck_at is not None and now >= self.recheck_at
            due = (not was_leading or now >= next_due or (settled and snap.generation != audited) or touched
                   or recheck)
            if not due:
                continue
            was_leading = True
            audited_updates = seen_updates
            try:
                await self.audit(snap)
            except Exception:
                log.exception("audit failed; retrying at the next change or interval")
            audited = snap.generation
            next_due = self._clock() + (BACKLOG_RETRY if self.deferred else self.interval)

    async def audit(self, snap: state.Snapshot) -> Summary:
        assert snap.prepared is not None
        result = self.result
        # Prices are predicted only when Karpenter's are at hand to compare with: the prediction costs more than
        # the evaluation itself at 10,000 overlays, and a webhook whose Karpenter never answers has none.
        published = await self._published() if self.prices is not None else None
        if result is None or result.generation != snap.generation or (published is not None and result.prices is None):
            result = await asyncio.to_thread(_evaluate_summary, snap.prepared, snap.basis, snap.generation,
                                             published is not None)
        # else: a periodic audit of an unchanged snapshot only retries what is left to write (and compares
        # Karpenter's statuses and prices again).
        exists = [findings.ObjectRef(kind, name) for kind, name in snap.basis]
        uids = {findings.ObjectRef(*k): uid for k, s in snap.basis.items()
                if (uid := store.uid_of(s.obj)) is not None}
        self.mismatches = self._compare(snap, result, published)
        current = events.notes(result.findings) + prediction.notes(self.mismatches.status, self.mismatches.price)
        plan = self.ledger.plan(current, exists)
        # Leadership can be lost while the evaluation runs: the new leader writes instead.
        written = await events.publish(self.api, plan, self.instance, uids, leader.microtime()) \
            if self.leading else []
        self.ledger.commit(current, written, exists)
        self.written.update(n.reason for n in written)
        self.deferred = plan.deferred + len(plan.emit) - len(written)
        self.result, self.finished_at, self.audits = result, time.time(), self.audits + 1
        by_status = collections.Counter(result.status.values())
        log.info("audit done", extra={"fields": {
            "generation": snap.generation, "seconds": round(result.seconds, 3), "overlays": len(result.status),
            **{s.lower(): n for s, n in sorted(by_status.items())}, "findings": len(result.findings),
            "eventsWritten": len(written), "eventsDeferred": self.deferred,
            "predictionMismatches": len(self.mismatches.status) + len(self.mismatches.price)}})
        return result

    def _compare(self, snap: state.Snapshot, result: Summary,
                 published: Mapping[prediction.PriceKey, float] | None) -> Mismatches:
        """The disagreements with Karpenter past their grace (`published`: Karpenter's prices of this audit, None
        when there are none to compare); sets when to look again."""
        status_timing, price_timing = self._timing
        now = self._clock()
        overlays = reconciled_overlays(snap, self.cache.live)
        status = status_timing.observe(prediction.status_mismatches(result.statuses, overlays), now)
        price, price_compared = self.mismatches.price, self.mismatches.price_compared
        unverifiable = self.mismatches.price_unverifiable
        if result.prices is not None and published is not None:
            price = price_timing.observe(prediction.price_mismatches(result.prices, published), now)
            price_compared = len(prediction.comparable(result.prices, published))
            unverifiable = prediction.unverifiable(result.prices, published)
        dues = [d for d in (status_timing.next_due(now), price_timing.next_due(now)) if d is not None]
        # A lasting price disagreement is looked at again a grace period later, so that it clears without a
        # watch event (a status disagreement clears at Karpenter's status write, which causes an audit).
        if price:
            dues.append(now + max(self.grace, BACKLOG_RETRY))
        self.recheck_at = min(dues, default=None)
        return Mismatches(status, price, len(prediction.judged(result.statuses, overlays)), price_compared,
                          unverifiable)

    async def _published(self) -> Mapping[prediction.PriceKey, float] | None:
        assert self.prices is not None
        try:
            return await self.prices()
        except Exception as exc:
            log.warning("cannot read Karpenter's published prices; comparing them at the next audit",
                        extra={"fields": {"error": f"{type(exc).__name__}: {exc}"[:300]}})
            return None


class AuditCollector(Collector):
    """The last audit's figures, read at scrape time."""

    def __init__(self, auditor: Auditor) -> None:
        self._auditor = auditor

    def collect(self) -> Iterator[Metric]:
        a = self._auditor
        yield GaugeMetricFamily("overlay_guard_audit_leader",
                                "1 when this replica holds the audit Lease (or runs alone with --state).",
                                value=int(a.leading))
        written = CounterMetricFamily("overlay_guard_audit_events_written",
                                      "Events written (or found already written) by this replica, by reason.",
                                      labels=["reason"])
        for reason in (events.CONFLICT, events.NO_MATCH, events.SHADOWED, events.INVALID, events.APPLIED,
                       events.MISMATCH):
            written.add_metric([reason], a.written[reason])
        yield written
        result = a.result
        if result is None or a.finished_at is None:
            return
        yield GaugeMetricFamily("overlay_guard_audit_events_deferred",
                                "Events the last audit left for the next one (over the per-audit bound).",
                                value=a.deferred)
        yield GaugeMetricFamily("overlay_guard_audit_duration_seconds", "How long the last audit's evaluation took.",
                                value=result.seconds)
        yield GaugeMetricFamily("overlay_guard_audit_last_timestamp_seconds",
                                "When the last audit finished (Unix time).", value=a.finished_at)
        by_code = GaugeMetricFamily("overlay_guard_audit_findings", "Findings of the last audit by code and severity.",
                                    labels=["code", "severity"])
        counts = collections.Counter((f.code, str(f.severity)) for f in result.findings)
        for (code, severity), n in sorted(counts.items()):
            by_code.add_metric([code, severity], n)
        yield by_code
        overlays = GaugeMetricFamily("overlay_guard_audit_overlays",
                                     "Overlays by the status Karpenter will give them.", labels=["status"])
        statuses = collections.Counter(result.status.values())
        for status in ("Applied", "Conflict", "Invalid"):
            overlays.add_metric([status], statuses[status])
        yield overlays
        mismatches = GaugeMetricFamily("overlay_guard_prediction_mismatches",
                                       "Disagreements with Karpenter lasting past the grace period: overlays whose "
                                       "status condition (status), offerings whose published price (price).",
                                       labels=["kind"])
        mismatches.add_metric(["status"], len(a.mismatches.status))
        mismatches.add_metric(["price"], len(a.mismatches.price))
        yield mismatches
        compared = GaugeMetricFamily("overlay_guard_prediction_compared",
                                     "What the last audit compared with Karpenter: overlays Karpenter has reconciled "
                                     "(status), offerings both sides price where the prediction does not rest on "
                                     "the published figure (price), offerings both sides price where it does and "
                                     "that are not compared (price_unverifiable).", labels=["kind"])
        compared.add_metric(["status"], a.mismatches.status_compared)
        compared.add_metric(["price"], a.mismatches.price_compared)
        compared.add_metric(["price_unverifiable"], a.mismatches.price_unverifiable)
        yield compared
        yield _cells_histogram(result.cells.values())


def _cells_histogram(values: Any) -> HistogramMetricFamily:
    counts = list(values)
    buckets = [(str(b), sum(1 for c in counts if c <= b)) for b in CELL_BUCKETS]
    buckets.append(("+Inf", len(counts)))
    return HistogramMetricFamily("overlay_guard_audit_cells_matched",
                                 "Valid overlays of the last audit by (NodePool, instance type) cells matched.",
                                 buckets=buckets, sum_value=sum(counts))


SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def pod_namespace(path: str = SERVICE_ACCOUNT_NAMESPACE, default: str = "overlay-guard") -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip() or default
    except OSError:
        return default


def start(config: Config, cache: state.Cache, registry: CollectorRegistry,
          api_client: Any | None, prices: prediction.PriceSource | None = None) -> list[asyncio.Task[None]]:
    """The audit's tasks (none with --audit-interval 0, or with --state unless an interval is given);
    `api_client`: the informers' configured `kubernetes` ApiClient of the cluster to elect in and write
    to (None with --state). The client's default configuration is never loaded, so it must be this one.
    `prices`: Karpenter's published prices to compare with (None: only statuses are compared)."""
    live = api_client is not None
    interval = config.audit_interval if config.audit_interval is not None else (DEFAULT_INTERVAL if live else 0.0)
    if interval <= 0:
        return []
    instance = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    elector = None
    api: events.EventApi = LogEvents()
    if live:
        leases = leader.KubeLeases(api_client, config.lease_name, config.lease_namespace or pod_namespace())
        elector = leader.Elector(leases, instance, lease_duration=config.lease_duration,
                                 renew_deadline=config.lease_renew_deadline, retry_period=config.lease_retry_period)
        api = events.KubeEvents(api_client)
    auditor = Auditor(cache, api, instance=instance, interval=interval, debounce=config.audit_debounce,
                      limit=config.audit_max_events, elector=elector, grace=config.prediction_grace, prices=prices)
    registry.register(AuditCollector(auditor))
    tasks = [asyncio.create_task(auditor.run(), name="overlay-guard-audit")]
    if elector is not None:
        tasks.append(asyncio.create_task(elector.run(), name="overlay-guard-leader"))
    return tasks
