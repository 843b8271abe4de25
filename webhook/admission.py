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
- the evaluation itself (`judge`, `assess`), with UPDATE ratcheted by the core.
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
# The label of a denial that rests only on admissions in flight (webhook/ledger.py).
DENIED_IN_FLIGHT = "denied_in_flight"


@dataclasses.dataclass(frozen=True)
class Answer:
    """The AdmissionReview to send back, and its label for metrics and logs (allowed, warned,
    denied, patched)."""

    label: str
    body: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Work:
    """A request the simulation has to judge. `action`: OVERLAY (validate and record), NODEPOOL
    (what a NodePool change does to the overlays) or SIMULATE (/mutate: judge, never record)."""

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
    """Whether a NodeOverlay passes: the predicate the cache applies before it records what it
    admits (and is not a dry run) in the ledger."""
    def check(report: ev.Report) -> bool:
        return not enforce or not report.errors()
    return check


def answer(work: Work, report: ev.Report, *, enforce: bool, in_flight: Sequence[str] = ()) -> Answer:
    """`in_flight`: the denial rests only on these overlays, admitted and not stored yet."""
    if work.action == NODEPOOL:
        v = verdict.nodepool(report.findings, work.subject)
        return Answer(v.label, review.response(work.req.uid, True, warnings=v.warnings))
    if work.action == SIMULATE:
        assert work.req.obj is not None  # triage only simulates requests with an object
        wanted = patch.summary(effects.overlay_effect(report, work.subject.name))
        ops = patch.operations(work.req.obj, wanted)
        return Answer("patched" if ops else "allowed", review.response(work.req.uid, True, patch=ops))
    v = verdict.overlay(report, work.subject, enforce=enforce, in_flight=in_flight)
    label = DENIED_IN_FLIGHT if in_flight and not v.allowed else v.label
    body = review.response(work.req.uid, v.allowed, code=None if v.allowed else 403,
                           reason="" if v.allowed else "Forbidden", message=v.message,
                           warnings=v.warnings, audit=verdict.audit(report, label))
    return Answer(label, body)


def unanswered(work: Work, *, enforce: bool, timed_out: bool = False, why: str = "", lasting: bool = False) -> Answer:
    """The simulation could not run: not synced yet, or not in time; `why`: what stopped a NodeOverlay's
    decision (webhook/state.py's Unanswerable); `lasting`: a retry cannot help (403, not 503)."""
    subject = work.subject
    if work.action == SIMULATE:
        return _allowed(work.req)
    if work.action == NODEPOOL:
        why = "did not finish in time" if timed_out else "has not synced yet"
        note = f"{verdict.PREFIX}NodePool {subject.name} was not checked (the simulation {why})"
        return _allowed(work.req, [verdict.clip(note)])
    message = (f"overlay-guard cannot admit {subject.kind} {subject.name} now: {why}" if why else
               f"overlay-guard has not synced the cluster state yet, so {subject.kind} {subject.name} "
               "cannot be checked; retry in a few seconds")
    if enforce:
        return Answer("denied", review.response(work.req.uid, False, code=403 if lasting else 503,
                                                reason="Forbidden" if lasting else "ServiceUnavailable",
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
    return ev.prepare(store.documents(objects), catalog, previous, crd=crd, every_nodepool=True)
