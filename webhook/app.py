"""The HTTP surface: AdmissionReview endpoints, probes, and the metrics app.

Transport only: read and bound the body, time and count the request, ask the cache for the
report the policy needs, write the answer. What is allowed, denied, warned or patched is
decided in webhook/admission.py, without I/O.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from aiohttp import web

from simulation.semantics import model
from webhook import admission, judging, listener, logs, review
from webhook.config import Config
from webhook.metrics import CONTENT_TYPE, Metrics
from webhook.state import Cache, NotReady, Unanswerable, Unrecordable

log = logging.getLogger("overlay-guard.admission")


class Handlers:
    def __init__(self, config: Config, state: Cache, metrics: Metrics) -> None:
        self.config = config
        self.state = state
        self.metrics = metrics
        self._admits = admission.admits(config.enforce)
        self._malformed = listener.Throttle("malformed admission requests refused", config.limits.warn_interval,
                                            logging.INFO, log)
        self.inflight = 0
        metrics.in_flight.set_function(lambda: self.inflight)
        self.draining = False
        self._idle = asyncio.Event()
        self._idle.set()

    async def drain(self, timeout: float) -> bool:
        """Wait for every AdmissionReview in flight to be answered (SIGTERM).

        aiohttp's own shutdown stops reading from connections at once, which would cut off a
        request whose body is still arriving; so the server stops listening first, waits
        here with connections fully working, and only then lets aiohttp close them."""
        self.draining = True
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True

    # -- probes ---------------------------------------------------------------------------
    async def healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(self, request: web.Request) -> web.Response:
        catalog = self.state.catalog_detail()
        if self.state.ready:
            return web.json_response({"status": "ready", "catalog": catalog})
        ledger = {"ledger": self.state.ledger_problem} if self.state.ledger_problem else {}
        return web.json_response({"status": "not ready", "synced": self.state.synced, "catalog": catalog, **ledger},
                                 status=503)

    # -- AdmissionReview ------------------------------------------------------------------
    async def validate(self, request: web.Request) -> web.Response:
        return await self._serve(request, "validate")

    async def mutate(self, request: web.Request) -> web.Response:
        return await self._serve(request, "mutate")

    async def _body(self, request: web.Request) -> bytes:
        if request.content_type != "application/json":
            raise review.ReviewError(
                415, f"Content-Type must be application/json, not {request.content_type!r}")
        limit = self.config.max_body_bytes
        if request.content_length is not None and request.content_length > limit:
            raise review.ReviewError(413, f"the body exceeds {limit} bytes")
        try:
            if request.content.is_eof():
                # The whole body came with the headers (the usual case): nothing to wait for, so no timer.
                return await request.read()
            async with asyncio.timeout(self.config.read_timeout):
                return await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise review.ReviewError(413, f"the body exceeds {limit} bytes") from None
        except TimeoutError:
            raise review.ReviewError(
                408, f"the body did not arrive within {self.config.read_timeout:g}s") from None

    async def _serve(self, request: web.Request, endpoint: str) -> web.Response:
        self.inflight += 1
        self._idle.clear()
        try:
            response = await self._answer(request, endpoint)
        finally:
            self.inflight -= 1
            if not self.inflight:
                self._idle.set()
        if self.draining:
            # No further requests on this keep-alive connection: the API server reconnects
            # to a replica that is not shutting down.
            response.force_close()
        return response

    async def _answer(self, request: web.Request, endpoint: str) -> web.Response:
        started = time.perf_counter()
        fields: dict[str, Any] = {"endpoint": endpoint}
        label = "error"
        try:
            body = await self._body(request)
            req = review.parse(body)
            fields.update(uid=req.uid, operation=req.operation, kind=req.target, name=req.name,
                          dryRun=req.dry_run)
            step = admission.triage(req, endpoint)
            answer = step if isinstance(step, admission.Answer) else await self._work(step, judging.few_items(body))
            label = answer.label
            response = web.json_response(answer.body)
        except review.ReviewError as err:
            label = "bad_request"
            fields["error"] = err.message
            response = web.json_response({"error": err.message}, status=err.status)
        except Exception as err:
            log.exception("admission request failed", extra={"fields": fields})
            fields["error"] = f"{type(err).__name__}"
            response = web.json_response({"error": "internal error; see the webhook's log"}, status=500)
        seconds = time.perf_counter() - started
        kind = fields.get("kind", "")
        kind = kind if kind in (model.NODEOVERLAY, model.NODEPOOL, "") else "other"
        self.metrics.observe(endpoint, fields.get("operation", ""), kind, label, seconds)
        line = {**fields, "verdict": label, "durationMs": round(seconds * 1000, 3)}
        if label == "bad_request":
            # The API server never sends these: they come from whoever else reaches the port,
            # as fast as they like, so they are counted rather than logged one by one.
            self._malformed.hit(**line)
        else:
            logs.info(log, "admission", line)
        return response

    async def _work(self, work: admission.Work, small: bool) -> admission.Answer:
        """Have the cache judge `work` (waiting a little for the first sync); the policy answers. `small`: the
        body was small enough for judging.few_items."""
        enforce = self.config.enforce
        req = work.req
        in_flight: tuple[str, ...] = ()
        try:
            if not self.state.usable and not await self.state.wait_ready(self.config.ready_wait):
                raise NotReady("not synced")
            if work.action == admission.NODEPOOL:
                report = await asyncio.wait_for(self.state.assess(work.candidate), self.config.nodepool_timeout)
            elif work.action == admission.SIMULATE:
                report = await self.state.simulate(work.candidate, req.operation, req.old, small)
            else:
                decision = await self.state.decide(work.candidate, req.operation, req.old, dry_run=req.dry_run,
                                                   admits=self._admits, small=small)
                report, in_flight = decision.report, decision.in_flight
        except NotReady:
            return admission.unanswered(work, enforce=enforce)
        except TimeoutError:
            return admission.unanswered(work, enforce=enforce, timed_out=True)
        except Unrecordable as why:
            return admission.unanswered(work, enforce=enforce, why=str(why), lasting=True)
        except Unanswerable as why:
            log.warning("admission unanswered", extra={"fields": {"name": work.subject.name, "why": str(why)}})
            return admission.unanswered(work, enforce=enforce, timed_out=True, why=str(why))
        return admission.answer(work, report, enforce=enforce, in_flight=in_flight)

HANDLERS = web.AppKey("handlers", Handlers)


def create_app(config: Config, state: Cache, metrics: Metrics | None = None) -> web.Application:
    app = web.Application(client_max_size=config.max_body_bytes, middlewares=[listener.track])
    handlers = Handlers(config, state, metrics or Metrics(state))
    app[HANDLERS] = handlers
    app.router.add_post("/validate", handlers.validate)
    app.router.add_post("/mutate", handlers.mutate)
    app.router.add_get("/healthz", handlers.healthz)
    app.router.add_get("/readyz", handlers.readyz)
    return app


def create_metrics_app(metrics: Metrics, handlers: Handlers | None = None) -> web.Application:
    """Plain HTTP. It also answers the probes: with --client-ca the HTTPS port refuses the
    kubelet, which has no client certificate, so probes must come here instead."""
    async def serve(request: web.Request) -> web.Response:
        body = await asyncio.to_thread(metrics.render)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

    app = web.Application(middlewares=[listener.track])
    app.router.add_get("/metrics", serve)
    if handlers is not None:
        app.router.add_get("/healthz", handlers.healthz)
        app.router.add_get("/readyz", handlers.readyz)
    return app

