"""Admission policy: a parsed AdmissionReview and the simulation's report in, the response out.

No I/O, no clock, no event loop. `app` reads the body and writes the answer; `state` owns the
cache, its lock and the live reads. This module decides everything in between:
- which requests need the simulation at all (`triage`): status subresources, DELETE and
  CONNECT are allowed unevaluated; kinds the guard does not know are allowed with a warning
  (a misrouted webhook configuration must not block anything); a NodeOverlay without an
  object, or with one the API server could never have decoded, is denied as a bad request;
- how a report becomes a verdict (`answer`): errors deny in enforce mode and come back as
  warnings in warn mode; a NodePool is never denied; /mutate never denies and patches;
- what happens when the simulation cannot run (`unanswered`): a NodeOverlay is denied with
  503 in enforce mode (what failurePolicy Fail would do, with a clearer message);
- the evaluation itself (`judge`, `assess`), with UPDATE ratcheted by the core;
- which objects a denial rests on and must be confirmed by a live read (`to_confirm`), and
  what a read says about them (`read`); `state` does the reading.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from simulation import evaluate as ev
from simulation import findings
from simulation.analysis import effects
from simulation.semantics import catalog as cat
from simulation.semantics import model
from simulation.validation import crds
from webhook import patch, review, store, verdict

VALIDATE = "validate"
MUTATE = "mutate"
# What `Work` asks of the cache.
OVERLAY, NODEPOOL, SIMULATE = "overlay", "nodepool", "simulate"
# Cached objects confirmed per round of a denial (every hold is confirmed at once).
MAX_CONFIRM = 10


@dataclasses.dataclass(frozen=True)
class Answer:
    """The AdmissionReview to send back, and its label for metrics and logs (allowed, warned,
    denied, patched)."""

    label: str
    body: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Work:
    """A request the simulation has to judge. `action`: OVERLAY (validate and hold), NODEPOOL
    (what a NodePool change does to the overlays) or SIMULATE (/mutate: judge, never hold)."""

    action: str
    req: review.Request
    candidate: Mapping[str, Any]

    @property
    def subject(self) -> findings.ObjectRef:
        kind = model.NODEPOOL if self.action == NODEPOOL else model.NODEOVERLAY
        return findings.ObjectRef(kind, model.name_of(self.candidate) or "")

    @property
    def key(self) -> store.Key:
        return (self.subject.kind, self.subject.name)


def _allowed(req: review.Request, warnings: Sequence[str] = ()) -> Answer:
    return Answer("warned" if warnings else "allowed", review.response(req.uid, True, warnings=warnings))


def _bad_request(req: review.Request, problem: str) -> Answer:
    return Answer("denied", review.response(req.uid, False, code=400, reason="BadRequest",
                                            message=f"overlay-guard: {problem}"))


def triage(req: review.Request, endpoint: str) -> Answer | Work:
    """The answer when no simulation is needed, else the work to do."""
    if endpoint == MUTATE:
        return _mutating(req)
    if req.sub_resource or req.operation in ("DELETE", "CONNECT"):
        return _allowed(req)
    if req.target == model.NODEPOOL:
        return _allowed(req) if req.obj is None else Work(NODEPOOL, req, review.candidate(req))
    if req.target != model.NODEOVERLAY:
        note = (f"{verdict.PREFIX}{req.target} is not a kind overlay-guard checks; allowed unchecked "
                "(check the webhook configuration's rules)")
        return _allowed(req, [verdict.clip(note)])
    if req.obj is None:
        return _bad_request(req, f"{req.operation} without request.object")
    problem = review.malformed(req.obj)
    if problem is not None:
        return _bad_request(req, problem)
    return Work(OVERLAY, req, review.candidate(req))


def _mutating(req: review.Request) -> Answer | Work:
    if (req.sub_resource or req.operation not in ("CREATE", "UPDATE") or req.obj is None
            or req.target != model.NODEOVERLAY or review.malformed(req.obj) is not None):
        return _allowed(req)
    return Work(SIMULATE, req, review.candidate(req))


def admits(enforce: bool) -> Callable[[ev.Report], bool]:
    """Whether a NodeOverlay passes: the predicate the cache applies under its lock, since what
    it admits (and is not a dry run) it holds."""
    def check(report: ev.Report) -> bool:
        return not enforce or not report.errors()
    return check


def answer(work: Work, report: ev.Report, *, enforce: bool) -> Answer:
    if work.action == NODEPOOL:
        v = verdict.nodepool(report.findings, work.subject)
        return Answer(v.label, review.response(work.req.uid, True, warnings=v.warnings))
    if work.action == SIMULATE:
        assert work.req.obj is not None  # triage only simulates requests with an object
        wanted = patch.summary(effects.overlay_effect(report, work.subject.name))
        ops = patch.operations(work.req.obj, wanted)
        return Answer("patched" if ops else "allowed", review.response(work.req.uid, True, patch=ops))
    v = verdict.overlay(report, work.subject, enforce=enforce)
    body = review.response(work.req.uid, v.allowed, code=None if v.allowed else 403,
                           reason="" if v.allowed else "Forbidden", message=v.message,
                           warnings=v.warnings, audit=verdict.audit(report, v.label))
    return Answer(v.label, body)


def unanswered(work: Work, *, enforce: bool, timed_out: bool = False) -> Answer:
    """The simulation could not run: not synced yet, or (a NodePool) not in time."""
    subject = work.subject
    if work.action == SIMULATE:
        return _allowed(work.req)
    if work.action == NODEPOOL:
        why = "did not finish in time" if timed_out else "has not synced yet"
        note = f"{verdict.PREFIX}NodePool {subject.name} was not checked (the simulation {why})"
        return _allowed(work.req, [verdict.clip(note)])
    message = (f"overlay-guard has not synced the cluster state yet, so {subject.kind} {subject.name} "
               "cannot be checked; retry in a few seconds")
    if enforce:
        return Answer("denied", review.response(work.req.uid, False, code=503, reason="ServiceUnavailable",
                                                message=message))
    return _allowed(work.req, [verdict.clip(verdict.PREFIX + message)])


# -- the evaluation -------------------------------------------------------------------------
def judge(prepared: ev.Prepared, candidate: Mapping[str, Any], extras: Sequence[Mapping[str, Any]] = (),
          checked: Mapping[str, ev.Checked] | None = None) -> ev.Report:
    """The candidate on a snapshot. `extras`: held overlays the snapshot lacks; they take part,
    but only findings that involve the candidate decide. `checked`: their own checks, done
    when they were admitted."""
    return ev.evaluate([ev.Document(candidate, 0)], prepared, checked=checked,
                       context=[ev.Document(x, i + 1) for i, x in enumerate(extras)])


def assess(prepared: ev.Prepared, pool: Mapping[str, Any]) -> ev.Report:
    """What a NodePool change does: findings about the pool itself, plus the problems among
    overlays that its new cells create (the core reports those as warnings)."""
    return ev.evaluate([ev.Document(pool, 0)], prepared)


def rebased(basis: store.Store, key: store.Key, plan: store.Plan, catalog: cat.Catalog,
            previous: ev.Prepared | None, crd: crds.Crd | None) -> ev.Prepared:
    """The snapshot to judge against when the cache holds another version of the candidate
    than the request says it replaces (`plan.rebase`): the request's version takes its place,
    so an UPDATE is ratcheted against what it really replaces."""
    objects = store.rebased(basis, key, plan.previous) if plan.rebase else basis
    return ev.prepare(store.documents(objects), catalog, previous, crd=crd)


# -- confirming a denial ---------------------------------------------------------------------
def to_confirm(report: ev.Report, subject: findings.ObjectRef, pending: store.Holds,
               checked: set[store.Key], now: float) -> list[store.Key]:
    """The objects a denial rests on that this request has not read yet."""
    keys = [k for k in ((r.kind, r.name) for r in verdict.grounds(report, subject))
            if k not in checked and k[0] in store.KINDS][:MAX_CONFIRM]
    if any(k in pending for k in keys):
        # Every hold at once: held objects are what anyone can invent, and a batch of them
        # must not outlast the rounds by being confirmed ten at a time.
        own = (subject.kind, subject.name)
        keys += [k for k, p in pending.items()
                 if p.expires > now and k != own and k not in checked and k not in keys]
    return keys


@dataclasses.dataclass(frozen=True)
class Read:
    """What a live read says about an object a denial rests on: drop its hold (the API server
    does not have the held version), and whether the API server has no such object at all."""

    drop_hold: bool
    absent: bool


def settled(held: store.Pending | None, live: Mapping[str, Any] | None) -> bool:
    """No need to read again: a cached object is read once; a held one until it shows up."""
    return held is None or store.confirms(held, live)


def read(key: store.Key, held: store.Pending | None, live: Mapping[str, Any] | None,
         basis: store.Store) -> Read:
    """The last read's verdict. An absent object that is not held is missing, even when the
    watch has meanwhile taken it out of a newer snapshot than `basis` (then the denial came from
    the older one and must be judged again)."""
    return Read(held is not None and not store.confirms(held, live),
                live is None and (held is None or key in basis))
