"""Leader election over a `coordination.k8s.io/v1` Lease, on the event loop.

The `kubernetes` client's own elector runs in a thread with blocking callbacks; the audit it
guards lives on the event loop, so this one is a small asyncio task over three calls (get,
create, replace), with the API server's resourceVersion check as the only arbiter: whoever's
replace lands first holds the Lease, the other gets 409 and stays a follower.

Expiry is judged as client-go judges it: by when *this* process last saw the record change
(monotonic clock), never by comparing the holder's renewTime with the local clock, so skewed
clocks cannot make two leaders. A leader that cannot renew for `renew_deadline` steps down
before its Lease can expire elsewhere; a leader that stops releases the Lease so a follower
takes over at its next retry instead of after a whole Lease duration.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

log = logging.getLogger("overlay-guard.leader")


@dataclasses.dataclass(frozen=True)
class Record:
    """The parts of a Lease the election reads and writes."""

    holder: str
    duration: int
    transitions: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    resource_version: str | None = None

    @classmethod
    def from_lease(cls, lease: Mapping[str, Any]) -> Record:
        spec = lease.get("spec") or {}
        meta = lease.get("metadata") or {}
        return cls(holder=str(spec.get("holderIdentity") or ""),
                   duration=int(spec.get("leaseDurationSeconds") or 0),
                   transitions=int(spec.get("leaseTransitions") or 0),
                   acquire_time=spec.get("acquireTime"), renew_time=spec.get("renewTime"),
                   resource_version=meta.get("resourceVersion"))

    def to_lease(self, name: str, namespace: str) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "namespace": namespace}
        if self.resource_version:
            meta["resourceVersion"] = self.resource_version
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                "spec": {"holderIdentity": self.holder, "leaseDurationSeconds": self.duration,
                         "leaseTransitions": self.transitions, "acquireTime": self.acquire_time,
                         "renewTime": self.renew_time}}

    def same_claim(self, other: Record) -> bool:
        """Whether nothing was renewed or taken over between the two reads."""
        return (self.holder, self.renew_time, self.transitions) == (other.holder, other.renew_time,
                                                                     other.transitions)


class Conflict(Exception):
    """409: the Lease changed (or appeared) since it was read."""


class LeaseApi(Protocol):
    where: str

    async def get(self) -> Record | None: ...

    async def create(self, record: Record) -> Record: ...

    async def replace(self, record: Record) -> Record: ...


def microtime(now: datetime.datetime | None = None) -> str:
    stamp = now or datetime.datetime.now(datetime.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Elector:
    def __init__(self, api: LeaseApi, identity: str, *, lease_duration: float = 15.0,
                 renew_deadline: float = 10.0, retry_period: float = 2.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not 0 < retry_period < renew_deadline < lease_duration:
            raise ValueError("need 0 < retry period < renew deadline < lease duration")
        self.api = api
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._clock = clock
        self._observed: Record | None = None
        self._observed_at = 0.0
        self._renewed_at: float | None = None
        self.leading = False
        self._last_error = ""

    def _set_leading(self, leading: bool) -> None:
        if leading != self.leading:
            self.leading = leading
            log.info("leadership changed", extra={"fields": {"identity": self.identity, "leading": leading}})

    def _observe(self, record: Record) -> None:
        if self._observed is None or not self._observed.same_claim(record):
            self._observed_at = self._clock()
        self._observed = record

    async def step(self) -> bool:
        """One round: acquire or renew. Returns whether this process leads afterwards."""
        now = self._clock()
        try:
            current = await self.api.get()
            stamp = microtime()
            mine = Record(self.identity, max(1, round(self.lease_duration)), acquire_time=stamp, renew_time=stamp)
            if current is None:
                self._observe(await self.api.create(mine))
                self._renewed_at = now
                self._set_leading(True)
                return True
            self._observe(current)
            if current.holder == self.identity:
                renewed = dataclasses.replace(current, renew_time=stamp, duration=mine.duration)
            elif current.holder and self._clock() - self._observed_at < current.duration:
                self._set_leading(False)
                return False
            else:
                renewed = dataclasses.replace(mine, transitions=current.transitions + 1,
                                              resource_version=current.resource_version)
            self._observe(await self.api.replace(renewed))
            self._renewed_at, self._last_error = now, ""
            self._set_leading(True)
            return True
        except Conflict:
            # Someone else wrote first; their record is read on the next round.
            self._set_leading(False)
            return False
        except Exception as exc:
            # Every retry period while it lasts (e.g. the namespace does not exist): once is enough.
            # Keyed by type and status, the message carries per-request headers.
            kind = f"{type(exc).__name__}/{getattr(exc, 'status', '')}"
            level = logging.DEBUG if kind == self._last_error else logging.WARNING
            self._last_error = kind
            log.log(level, "lease round failed", extra={"fields": {
                "error": f"{type(exc).__name__}: {exc}"[:300], "lease": self.api.where}})
            if self.leading and (self._renewed_at is None or now - self._renewed_at >= self.renew_deadline):
                self._set_leading(False)
            return self.leading

    async def run(self) -> None:
        try:
            while True:
                await self.step()
                await asyncio.sleep(self.retry_period)
        finally:
            if self.leading:
                self._set_leading(False)
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.release())

    async def release(self) -> None:
        """Hand the Lease back (an empty holder) so a follower need not wait for it to expire."""
        current = await self.api.get()
        if current is not None and current.holder == self.identity:
            await self.api.replace(dataclasses.replace(current, holder="", duration=1, renew_time=microtime()))
            log.info("lease released", extra={"fields": {"identity": self.identity}})


class KubeLeases:
    """LeaseApi over the `kubernetes` client's CoordinationV1Api (blocking calls in threads)."""

    def __init__(self, api_client: Any, name: str, namespace: str, timeout: float = 5.0) -> None:
        import kubernetes

        k8s: Any = kubernetes
        self._api: Any = k8s.client.CoordinationV1Api(api_client)
        self.name = name
        self.namespace = namespace
        self.where = f"{namespace}/{name}"
        self._timeout = timeout

    async def _call(self, method: str, *args: Any) -> Record | None:
        import json

        def call() -> Any:
            try:
                response = getattr(self._api, method)(*args, _preload_content=False,
                                                      _request_timeout=self._timeout)
            except Exception as exc:
                status = getattr(exc, "status", None)
                if status == 404 and method == "read_namespaced_lease":
                    return None
                if status == 409:
                    raise Conflict(str(getattr(exc, "reason", "conflict"))) from exc
                raise
            return json.loads(response.data)

        body = await asyncio.to_thread(call)
        return None if body is None else Record.from_lease(body)

    async def get(self) -> Record | None:
        return await self._call("read_namespaced_lease", self.name, self.namespace)

    async def create(self, record: Record) -> Record:
        out = await self._call("create_namespaced_lease", self.namespace, record.to_lease(self.name, self.namespace))
        assert out is not None
        return out

    async def replace(self, record: Record) -> Record:
        out = await self._call("replace_namespaced_lease", self.name, self.namespace,
                               record.to_lease(self.name, self.namespace))
        assert out is not None
        return out
