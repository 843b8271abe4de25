"""AdmissionReview admission.k8s.io/v1 in and out.

A body that is not a usable AdmissionReview (not JSON, wrong apiVersion/kind, no request, no
uid) gets an HTTP 400: without a uid there is no response the API server could match, and
the API server treats the failed call by the webhook's failurePolicy.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from simulation.semantics import model
from simulation.validation import crds

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")
GROUP = crds.GROUP


class ReviewError(Exception):
    """The request cannot be answered with an AdmissionReview response."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclasses.dataclass(frozen=True)
class Request:
    uid: str
    group: str
    version: str
    kind: str
    resource: str
    sub_resource: str
    operation: str
    name: str
    obj: Mapping[str, Any] | None
    old: Mapping[str, Any] | None
    dry_run: bool

    @property
    def target(self) -> str:
        """NodeOverlay, NodePool, or the kind we do not guard."""
        if self.group == GROUP and self.kind in (model.NODEOVERLAY, model.NODEPOOL):
            return self.kind
        return f"{self.group}/{self.kind}" if self.group else self.kind or "unknown"


def _is_object(value: Any) -> TypeGuard[Mapping[str, Any]]:
    # Decoded JSON objects are dicts: the exact type is tested first, the Mapping ABC (an isinstance of an
    # ABC costs several times as much) only for anything else.
    return type(value) is dict or isinstance(value, Mapping)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if _is_object(value) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def parse(body: bytes) -> Request:
    try:
        review = json.loads(body)
    except (ValueError, RecursionError) as err:
        # UnicodeDecodeError is a ValueError too.
        raise ReviewError(400, f"the body is not JSON: {str(err)[:200]}") from None
    if not _is_object(review):
        raise ReviewError(400, "the body is not a JSON object")
    if review.get("apiVersion") != API_VERSION or review.get("kind") != KIND:
        got = f"{str(review.get('apiVersion'))[:60]!r}, {str(review.get('kind'))[:60]!r}"
        raise ReviewError(400, f"expected apiVersion {API_VERSION} and kind {KIND} (got {got})")
    req = review.get("request")
    if not _is_object(req):
        raise ReviewError(400, "the AdmissionReview has no request")
    uid = req.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ReviewError(400, "request.uid is missing")
    operation = req.get("operation")
    if operation not in OPERATIONS:
        raise ReviewError(400, f"request.operation {str(operation)[:40]!r} is not one of "
                               f"{', '.join(OPERATIONS)}")
    gvk = _mapping(req.get("kind"))
    obj, old = req.get("object"), req.get("oldObject")
    return Request(
        uid=uid, group=_text(gvk.get("group")), version=_text(gvk.get("version")),
        kind=_text(gvk.get("kind")), resource=_text(_mapping(req.get("resource")).get("resource")),
        sub_resource=_text(req.get("subResource")),
        operation=str(operation), name=_text(req.get("name")),
        obj=obj if _is_object(obj) else None, old=old if _is_object(old) else None,
        dry_run=req.get("dryRun") is True)


def malformed(obj: Mapping[str, Any]) -> str | None:
    """Why request.object cannot be the object it is sent as, or None. The API server decodes
    every object before admission, so only a forged or broken review carries one such; it is
    denied with this reason rather than judged as something it is not."""
    for field in ("apiVersion", "kind"):
        if field in obj and not isinstance(obj[field], str):
            return f"request.object.{field} must be a string, not {_type(obj[field])}"
    meta = obj.get("metadata")
    if meta is not None and not _is_object(meta):
        return f"request.object.metadata must be an object, not {_type(meta)}"
    name = meta.get("name") if _is_object(meta) else None
    if name is not None and not isinstance(name, str):
        return f"request.object.metadata.name must be a string, not {_type(name)}"
    return None


def _type(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(type(value), "a number")


def candidate(req: Request) -> Mapping[str, Any]:
    """request.object as the core expects it: apiVersion, kind and a name.

    Mutating admission of a `generateName` create runs before the name exists, so the
    candidate is named prefix + "generated" (a valid name, so the schema check does not mark
    it Invalid for the stand-in); validating admission sees the generated name."""
    obj = dict(req.obj or {})
    if not isinstance(obj.get("kind"), str):
        obj["kind"] = req.kind
    if not isinstance(obj.get("apiVersion"), str):
        obj["apiVersion"] = f"{req.group}/{req.version}" if req.group else req.version
    if model.name_of(obj) is None:
        meta = dict(_mapping(obj.get("metadata")))
        meta["name"] = req.name or _text(meta.get("generateName")) + "generated"
        obj["metadata"] = meta
    return obj


def response(uid: str, allowed: bool, *, code: int | None = None, reason: str = "", message: str = "",
             warnings: Sequence[str] = (), patch: Sequence[Mapping[str, Any]] | None = None,
             audit: Mapping[str, str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"uid": uid, "allowed": allowed}
    if not allowed or message:
        status: dict[str, Any] = {"status": "Success" if allowed else "Failure"}
        if code is not None:
            status["code"] = code
        if reason:
            status["reason"] = reason
        if message:
            status["message"] = message
        out["status"] = status
    if warnings:
        out["warnings"] = list(warnings)
    if audit:
        # The API server prefixes each key with the webhook's name in the audit log.
        out["auditAnnotations"] = dict(audit)
    if patch:
        out["patchType"] = "JSONPatch"
        out["patch"] = base64.b64encode(json.dumps(list(patch), separators=(",", ":")).encode()).decode()
    return {"apiVersion": API_VERSION, "kind": KIND, "response": out}
