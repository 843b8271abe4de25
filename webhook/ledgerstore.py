"""Where the ledger of admissions in flight lives (webhook/ledger.py): a Lease in the API server,
or, with `--state` (no API server, one process), memory with the same compare-and-swap."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any, Protocol

from webhook import ledger as lg
from webhook.leader import Conflict


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
                if status == 409:
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
