"""Where the ledger of admissions in flight lives (webhook/ledger.py): a Lease in the API server,
or, with `--state` (no API server, one process), memory with the same compare-and-swap; and whether
this replica can use the Lease at all (`follow_access`)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Callable
from typing import Any, Protocol

from webhook import ledger as lg
from webhook.leader import Conflict

log = logging.getLogger("overlay-guard.ledger")
# What the ledger needs on its Lease; the Role grants exactly these (manifests/base/rbac.yaml).
VERBS = ("get", "create", "update")
# Seconds between access checks while the Lease cannot be used, and while it can.
RECHECK_FAILING, RECHECK_OK = 5.0, 60.0


class LedgerStore(Protocol):
    where: str

    async def get(self, timeout: float) -> lg.Ledger: ...

    async def put(self, ledger: lg.Ledger, timeout: float) -> lg.Ledger:
        """Write `ledger` if the stored one is still at `ledger.version` (create it when that is
        None); raises leader.Conflict otherwise. Returns what was stored, with its new version."""
        ...


class MemoryLedger:
    """One process's ledger, for `--state` and tests: the API server's compare-and-swap, in memory."""

    where = "memory"

    def __init__(self) -> None:
        self.stored = lg.Ledger()
        self.writes = 0

    async def get(self, timeout: float) -> lg.Ledger:
        return self.stored

    async def put(self, ledger: lg.Ledger, timeout: float) -> lg.Ledger:
        if ledger.version != self.stored.version:
            raise Conflict(f"the ledger is at {self.stored.version}, not {ledger.version}")
        self.writes += 1
        self.stored = dataclasses.replace(ledger, version=str(self.writes))
        return self.stored


class KubeLedger:
    """The ledger in a Lease, over the `kubernetes` client's CoordinationV1Api (blocking calls in
    threads, each with a client-side timeout so that none outlives the decision that made it)."""

    def __init__(self, api_client: Any, namespace: str, name: str = lg.NAME) -> None:
        import kubernetes

        k8s: Any = kubernetes
        self._api: Any = k8s.client.CoordinationV1Api(api_client)
        self._auth: Any = k8s.client.AuthorizationV1Api(api_client)
        self.namespace = namespace
        self.name = name
        self.where = f"{namespace}/{name}"

    async def _call(self, method: str, timeout: float, *args: Any) -> lg.Ledger:
        def call() -> lg.Ledger:
            try:
                response = getattr(self._api, method)(*args, _preload_content=False,
                                                      _request_timeout=max(0.05, timeout))
            except Exception as exc:
                status = getattr(exc, "status", None)
                if status == 404 and method == "read_namespaced_lease":
                    return lg.Ledger()
                # 404 on replace: the Lease was deleted since it was read; the caller reads it again (and
                # creates it), as after any write that lost.
                if status == 409 or (status == 404 and method == "replace_namespaced_lease"):
                    raise Conflict(str(getattr(exc, "reason", "conflict"))) from exc
                raise
            return lg.decode(json.loads(response.data))

        return await asyncio.to_thread(call)

    async def get(self, timeout: float) -> lg.Ledger:
        return await self._call("read_namespaced_lease", timeout, self.name, self.namespace)

    async def put(self, ledger: lg.Ledger, timeout: float) -> lg.Ledger:
        body = lg.encode(ledger, self.namespace, self.name)
        if ledger.version is None:
            return await self._call("create_namespaced_lease", timeout, self.namespace, body)
        return await self._call("replace_namespaced_lease", timeout, self.name, self.namespace, body)

    def access(self, timeout: float) -> str | None:
        """Why this replica cannot use its Lease, None when it can (blocking): a verb RBAC does not grant
        (SelfSubjectAccessReview, which every authenticated user may create), else a namespace that does not
        exist or a create the API server refuses (a dry-run create: nothing is written)."""
        missing = []
        for verb in VERBS:
            review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                      "spec": {"resourceAttributes": {"namespace": self.namespace, "verb": verb, "name": self.name,
                                                      "group": "coordination.k8s.io", "resource": "leases"}}}
            answer = self._auth.create_self_subject_access_review(review, _preload_content=False,
                                                                  _request_timeout=timeout)
            if not (json.loads(answer.data).get("status") or {}).get("allowed"):
                missing.append(verb)
        if missing:
            return (f"RBAC does not grant {', '.join(missing)} on Lease {self.name} in namespace {self.namespace} "
                    "(coordination.k8s.io leases)")
        try:
            self._api.create_namespaced_lease(self.namespace, lg.encode(lg.Ledger(), self.namespace, self.name),
                                              dry_run="All", _preload_content=False, _request_timeout=timeout)
        except Exception as exc:
            status = getattr(exc, "status", None)
            if status == 409:
                return None  # it exists: the namespace does too
            if status == 404:
                return f"namespace {self.namespace} does not exist (the ledger's Lease {self.name} lives there)"
            raise
        return None


async def follow_access(ledger: KubeLedger, report: Callable[[str | None], None], timeout: float = 5.0) -> None:
    """Check at start, and again every RECHECK_* seconds, that the Lease can be used; `report` gets why not
    (None: it can). One log line per change."""
    last: str | None = ""
    while True:
        try:
            problem = await asyncio.to_thread(ledger.access, timeout)
        except Exception as exc:
            status = getattr(exc, "status", None)
            problem = (f"cannot check Lease {ledger.name} in namespace {ledger.namespace}: "
                       + (f"HTTP {status} {getattr(exc, 'reason', '')}" if status else type(exc).__name__))
        report(problem)
        if problem != last:
            fields = {"namespace": ledger.namespace, "lease": ledger.name}
            if problem is None:
                log.info("the admissions ledger can be read and written", extra={"fields": fields})
            else:
                log.error("the admissions ledger cannot be used; not ready until it can", extra={
                    "fields": {**fields, "problem": problem}})
            last = problem
        await asyncio.sleep(RECHECK_OK if problem is None else RECHECK_FAILING)
