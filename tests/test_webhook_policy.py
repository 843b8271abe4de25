"""The admission policy on its own: an AdmissionReview and a snapshot of stored objects in, the
response out, with no server, no event loop and no clock (webhook/admission.py)."""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from simulation import evaluate as ev
from simulation import findings
from simulation.analysis import effects
from simulation.semantics import merge
from tests.webhook_support import default_catalog, nodepool, overlay, review
from webhook import admission, patch, store, verdict
from webhook import review as rv

NO, NP = "NodeOverlay", "NodePool"
TEAM = {"key": "team", "operator": "In", "values": ["x"]}


def respond(body: Mapping[str, Any], objects: Sequence[Mapping[str, Any]], *, endpoint: str = "validate",
            enforce: bool = True, held: Sequence[Mapping[str, Any]] = ()) -> admission.Answer:
    """What the webhook answers with `objects` stored and `held` admitted but not yet stored,
    taking the steps the cache takes (plan, snapshot, judge) without its ledger and reads."""
    req = rv.parse(json.dumps(body).encode())
    step = admission.triage(req, endpoint)
    if isinstance(step, admission.Answer):
        return step
    basis = store.build(objects)
    pending = store.build(held)
    if step.action == admission.NODEPOOL:
        docs = store.documents(store.including(basis, pending))
        report = admission.assess(ev.prepare(docs, default_catalog()), step.candidate)
    else:
        plan = store.plan(basis, pending, step.key, req.operation, req.old)
        prepared = admission.rebased(basis, step.key, plan, default_catalog(), None, None)
        report = admission.judge(prepared, step.candidate, plan.extras)
    return admission.answer(step, report, enforce=enforce)


def result(answer: admission.Answer) -> dict[str, Any]:
    out: dict[str, Any] = answer.body["response"]
    return out


def notes_of(answer: admission.Answer) -> dict[str, str]:
    ops = json.loads(base64.b64decode(result(answer)["patch"]))
    assert [o["path"] for o in ops] == ["/metadata/annotations"], ops
    value: dict[str, str] = ops[0]["value"]
    return value


POOL = nodepool("p")
A = overlay("a", weight=10, price="1")
B_SAME = overlay("b", weight=10, price="2")
B_ABOVE = overlay("b", weight=20, price="2")
# Two stored overlays that already conflict: an edit of one is ratcheted.
C1, C2 = overlay("c1", weight=5, family="m5", price="1"), overlay("c2", weight=5, family="m5", price="2")


# (id, review, stored, endpoint, enforce, held) -> (label, allowed, status code, warning markers)
CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], str, bool, list[dict[str, Any]],
                  tuple[str, bool, int | None, tuple[str, ...]]]] = [
    ("create-free", review(A), [POOL], "validate", True, [], ("allowed", True, None, ())),
    ("create-above-shadows", review(B_ABOVE), [POOL, A], "validate", True, [],
     ("warned", True, None, ("[shadowed] NodeOverlay a",))),
    ("create-conflict", review(B_SAME), [POOL, A], "validate", True, [], ("denied", False, 403, ())),
    ("create-conflict-dry-run", review(B_SAME, dry_run=True), [POOL, A], "validate", True, [],
     ("denied", False, 403, ())),
    ("create-conflict-warn-mode", review(B_SAME), [POOL, A], "validate", False, [],
     ("warned", True, None, ("not enforced",))),
    ("conflict-with-a-held-overlay", review(B_SAME), [POOL], "validate", True, [A], ("denied", False, 403, ())),
    ("held-conflicts-among-others-do-not-block",
     review(overlay("d", weight=10, family="c5", price="1")), [POOL, A], "validate", True, [B_SAME],
     ("allowed", True, None, ())),
    ("update-keeps-an-old-conflict", review(overlay("c2", weight=5, family="m5", price="3"), "UPDATE", old=C2),
     [POOL, C1, C2], "validate", True, [], ("warned", True, None, ("already present",))),
    ("update-introduces-a-conflict", review(overlay("b", weight=10, price="2"), "UPDATE", old=B_ABOVE),
     [POOL, A, B_ABOVE], "validate", True, [], ("denied", False, 403, ())),
    ("delete", review(None, "DELETE", old=A), [POOL, A], "validate", True, [], ("allowed", True, None, ())),
    ("nodepool-making-overlays-conflict", review(nodepool("q", {"team": "x"})),
     [POOL, overlay("t1", weight=3, price="1", extra=[TEAM]), overlay("t2", weight=3, price="2", extra=[TEAM])],
     "validate", True, [], ("warned", True, None, ("NodePool q changed: [same-weight-conflict]",))),
    ("nodepool-and-a-held-overlay", review(nodepool("q", {"team": "x"})),
     [POOL, overlay("t1", weight=3, price="1", extra=[TEAM])], "validate", True,
     [overlay("t2", weight=3, price="2", extra=[TEAM])],
     ("warned", True, None, ("NodePool q changed: [same-weight-conflict]",))),
    ("nodepool-harmless", review(nodepool("q", weight=5)), [POOL, A], "validate", True, [],
     ("allowed", True, None, ())),
]


@pytest.mark.parametrize(("body", "stored", "endpoint", "enforce", "held", "expected"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_review_and_snapshot_to_response(body: dict[str, Any], stored: list[dict[str, Any]], endpoint: str,
                                         enforce: bool, held: list[dict[str, Any]],
                                         expected: tuple[str, bool, int | None, tuple[str, ...]]) -> None:
    label, allowed, code, markers = expected
    answer = respond(body, stored, endpoint=endpoint, enforce=enforce, held=held)
    out = result(answer)
    assert out["uid"] == body["request"]["uid"]
    assert (answer.label, out["allowed"]) == (label, allowed), out
    assert out.get("status", {}).get("code") == code
    warnings = out.get("warnings", [])
    for marker in markers:
        assert any(marker in w for w in warnings), warnings
    assert all(len(w.encode()) < 256 for w in warnings)
    if not allowed and code == 403:
        # The denial names the object it conflicts with and the field.
        assert "[same-weight-conflict]" in out["status"]["message"] and "price" in out["status"]["message"], out
        assert json.loads(out["auditAnnotations"]["findings"])


def test_a_denial_names_the_other_overlay_and_the_dry_run_gets_the_same_verdict() -> None:
    wet = result(respond(review(B_SAME), [POOL, A]))
    dry = result(respond(review(B_SAME, dry_run=True), [POOL, A]))
    assert "NodeOverlay a" in wet["status"]["message"]
    assert wet["status"] == dry["status"]


SUBRESOURCE = review(B_SAME, "UPDATE", old=A)
SUBRESOURCE["request"]["subResource"] = "status"
UNKNOWN = review(A)
UNKNOWN["request"]["kind"] = {"group": "apps", "version": "v1", "kind": "Deployment"}
NO_OBJECT = review(A)
NO_OBJECT["request"]["object"] = None
MALFORMED = review(A)
MALFORMED["request"]["object"]["kind"] = ["NodeOverlay"]


@pytest.mark.parametrize(("body", "endpoint", "label", "code"), [
    (SUBRESOURCE, "validate", "allowed", None),
    (review(None, "DELETE", old=A), "validate", "allowed", None),
    (UNKNOWN, "validate", "warned", None),
    (NO_OBJECT, "validate", "denied", 400),
    (MALFORMED, "validate", "denied", 400),
    (review(None, "DELETE", old=A), "mutate", "allowed", None),
    (MALFORMED, "mutate", "allowed", None),
    (UNKNOWN, "mutate", "allowed", None),
], ids=["status-subresource", "delete", "unknown-kind", "no-object", "malformed", "mutate-delete",
        "mutate-malformed", "mutate-unknown-kind"])
def test_requests_answered_without_the_simulation(body: dict[str, Any], endpoint: str, label: str,
                                                  code: int | None) -> None:
    step = admission.triage(rv.parse(json.dumps(body).encode()), endpoint)
    assert isinstance(step, admission.Answer)
    out = result(step)
    assert (step.label, out["allowed"], out.get("status", {}).get("code")) == (label, code is None, code)
    assert "patch" not in out


def test_mutate_patches_the_core_effects_and_is_idempotent() -> None:
    notes = notes_of(respond(review(A), [POOL], endpoint="mutate"))
    assert notes[patch.STATUS] == merge.APPLIED and notes[patch.IN_EFFECT] == "price"
    assert notes[patch.SHADOWED] == "" and int(notes[patch.CELLS]) > 0
    again = {**A, "metadata": {**A["metadata"], "annotations": notes}}
    out = respond(review(again), [POOL], endpoint="mutate")
    assert (out.label, "patch" in result(out)) == ("allowed", False)
    # Below an overlay that sets the same field everywhere it matches: shadowed, and a conflict never denies here.
    low = notes_of(respond(review(overlay("low", weight=1, price="3")), [POOL, B_ABOVE], endpoint="mutate"))
    assert (low[patch.IN_EFFECT], low[patch.SHADOWED]) == ("", "price")
    same = respond(review(B_SAME), [POOL, A], endpoint="mutate")
    assert result(same)["allowed"] is True


def test_the_patch_is_the_core_effect() -> None:
    """patch.summary only formats what simulation/analysis/effects computes."""
    effect = effects.OverlayEffect(merge.APPLIED, 3, 7, "p/x", ("price",), ("capacity/y",))
    assert patch.summary(effect) == {patch.STATUS: "Applied", patch.CELLS: "3", patch.OFFERINGS: "7",
                                     patch.IN_EFFECT: "price", patch.SHADOWED: "capacity/y", patch.EXAMPLE: "p/x"}
    assert patch.summary(effects.OverlayEffect(merge.INVALID))[patch.CELLS] == "0"


@pytest.mark.parametrize(("action", "enforce", "timed_out", "label", "allowed", "code"), [
    (admission.OVERLAY, True, False, "denied", False, 503),
    (admission.OVERLAY, False, False, "warned", True, None),
    (admission.NODEPOOL, True, False, "warned", True, None),
    (admission.NODEPOOL, True, True, "warned", True, None),
    (admission.SIMULATE, True, False, "allowed", True, None),
])
def test_when_the_simulation_cannot_run(action: str, enforce: bool, timed_out: bool, label: str,
                                        allowed: bool, code: int | None) -> None:
    req = rv.parse(json.dumps(review(A)).encode())
    answer = admission.unanswered(admission.Work(action, req, A), enforce=enforce, timed_out=timed_out)
    out = result(answer)
    assert (answer.label, out["allowed"], out.get("status", {}).get("code")) == (label, allowed, code)
    if action == admission.NODEPOOL:
        assert ("in time" in out["warnings"][0]) is timed_out


def test_admits_follows_the_mode() -> None:
    denied = respond(review(B_SAME), [POOL, A])
    assert denied.label == "denied"
    step = admission.triage(rv.parse(json.dumps(review(B_SAME)).encode()), "validate")
    assert isinstance(step, admission.Work)
    basis = store.build([POOL, A])
    plan = store.plan(basis, {}, step.key, "CREATE", None)
    report = admission.judge(admission.rebased(basis, step.key, plan, default_catalog(), None, None), step.candidate)
    assert report.errors()
    assert admission.admits(True)(report) is False and admission.admits(False)(report) is True


def test_the_audit_annotation_is_the_findings_as_json_writes_them() -> None:
    """Written row by row around json's string encoder: the same text as json.dumps of the rows."""
    report = admission.judge(ev.prepare(store.documents(store.build([POOL, A])), default_catalog()), B_SAME)
    odd = findings.ObjectRef(NO, 'quote" back\\slash \u00e9 \u2026 tab\t nul\x00 \U0001f600')
    made = [findings.make("same-weight-conflict", odd, ("spec", "price"), "m", related=[odd]),
            findings.make("no-match", findings.ObjectRef(NP, "p"), ("spec", "requirements", 0, "key"), "m")]
    for found in (report.findings, tuple(made), ()):
        rows = [{"code": f.code, "severity": str(f.severity), "object": str(f.obj), "field": f.field} for f in found]
        audit = verdict.audit(dataclasses.replace(report, findings=found), "denied")
        assert audit["findings"] == json.dumps(rows, separators=(",", ":"))
    assert report.findings, "the conflict is found"
