"""The HTTP surface: AdmissionReview endpoints, probes, and the metrics app.

Decisions per SPEC section 6. What the handlers do not cover:
- kinds other than NodeOverlay/NodePool (a misrouted webhook configuration): allowed, with
  a warning saying they were not checked; the guard never blocks what it does not understand;
- subresources (status) and DELETE/CONNECT: allowed without evaluation;
- a NodeOverlay request before the first sync: denied with code 503 in enforce mode (the
  same outcome failurePolicy Fail would give, with a clearer message), allowed with a
  warning in warn mode.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from aiohttp import web

from simulation import findings
from simulation.semantics import model
from webhook import listener, patch, review, verdict
from webhook.config import Config
from webhook.metrics import CONTENT_TYPE, Metrics
from webhook.state import Cache, NotReady

log = logging.getLogger("overlay-guard.admission")

Answer = tuple[str, dict[str, Any]]


class Handlers:
    def __init__(self, config: Config, state: Cache, metrics: Metrics) -> None:
        self.config = config
        self.state = state
        self.metrics = metrics
        self._admits = verdict.admits(config.enforce)
        self._malformed = listener.Throttle("malformed admission requests refused", config.limits.warn_interval,
                                            logging.INFO, log)
        self.inflight = 0
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
        if self.state.ready:
            return web.json_response({"status": "ready"})
        return web.json_response({"status": "not ready", "synced": self.state.synced}, status=503)

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
            req = review.parse(await self._body(request))
            fields.update(uid=req.uid, operation=req.operation, kind=req.target, name=req.name,
                          dryRun=req.dry_run)
            label, payload = await (self._validate(req) if endpoint == "validate" else self._mutate(req))
            response = web.json_response(payload)
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
            log.info("admission", extra={"fields": line})
        return response

    async def _validate(self, req: review.Request) -> Answer:
        if req.sub_resource or req.operation in ("DELETE", "CONNECT"):
            return "allowed", review.response(req.uid, True)
        if req.target == model.NODEPOOL:
            return await self._nodepool(req)
        if req.target != model.NODEOVERLAY:
            note = (f"overlay-guard: {req.target} is not a kind overlay-guard checks; allowed unchecked "
                    "(check the webhook configuration's rules)")
            return "warned", review.response(req.uid, True, warnings=[verdict.clip(note)])
        if req.obj is None:
            return "denied", review.response(req.uid, False, code=400, reason="BadRequest",
                                             message=f"overlay-guard: {req.operation} without request.object")
        problem = review.malformed(req.obj)
        if problem is not None:
            return "denied", review.response(req.uid, False, code=400, reason="BadRequest",
                                             message=f"overlay-guard: {problem}")
        candidate = review.candidate(req)
        subject = findings.ObjectRef(model.NODEOVERLAY, model.name_of(candidate) or "")
        try:
            if not await self.state.wait_ready(self.config.ready_wait):
                raise NotReady("not synced")
            decision = await self.state.decide(candidate, req.operation, req.old, uid=req.uid,
                                               dry_run=req.dry_run, admits=self._admits)
        except NotReady:
            return self._unready(req, subject)
        v = verdict.overlay(decision.report, subject, enforce=self.config.enforce)
        body = review.response(req.uid, v.allowed, code=None if v.allowed else 403,
                               reason="" if v.allowed else "Forbidden", message=v.message,
                               warnings=v.warnings, audit=verdict.audit(decision.report, v.label))
        return v.label, body

    def _unready(self, req: review.Request, subject: findings.ObjectRef) -> Answer:
        message = (f"overlay-guard has not synced the cluster state yet, so {subject.kind} {subject.name} "
                   "cannot be checked; "
                   "retry in a few seconds")
        if self.config.enforce:
            return "denied", review.response(req.uid, False, code=503, reason="ServiceUnavailable",
                                             message=message)
        return "warned", review.response(req.uid, True, warnings=[verdict.clip("overlay-guard: " + message)])

    async def _nodepool(self, req: review.Request) -> Answer:
        if req.obj is None:
            return "allowed", review.response(req.uid, True)
        candidate = review.candidate(req)
        subject = findings.ObjectRef(model.NODEPOOL, model.name_of(candidate) or "")
        try:
            if not await self.state.wait_ready(self.config.ready_wait):
                raise NotReady("not synced")
            found = await asyncio.wait_for(self.state.nodepool_findings(candidate),
                                           self.config.nodepool_timeout)
        except (NotReady, TimeoutError) as err:
            why = "has not synced yet" if isinstance(err, NotReady) else "did not finish in time"
            note = f"overlay-guard: NodePool {subject.name} was not checked (the simulation {why})"
            return "warned", review.response(req.uid, True, warnings=[verdict.clip(note)])
        v = verdict.nodepool(found, subject)
        return v.label, review.response(req.uid, True, warnings=v.warnings)

    async def _mutate(self, req: review.Request) -> Answer:
        plain = "allowed", review.response(req.uid, True)
        if (req.sub_resource or req.operation not in ("CREATE", "UPDATE") or req.obj is None
                or req.target != model.NODEOVERLAY or review.malformed(req.obj) is not None):
            return plain
        candidate = review.candidate(req)
        try:
            if not await self.state.wait_ready(self.config.ready_wait):
                return plain
            report = await self.state.simulate(candidate, req.operation, req.old)
        except NotReady:
            return plain
        ops = patch.operations(req.obj, patch.summary(report, model.name_of(candidate) or ""))
        return ("patched" if ops else "allowed"), review.response(req.uid, True, patch=ops)


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

