"""Accepting connections with every resource bounded.

aiohttp's TCPSite leaves accepting to asyncio's create_server, which caps nothing: a TLS
handshake may take 60 s, a client may take forever to send its request headers, there is no
limit on concurrent connections, and at the open-files limit Python 3.11 logs a traceback for
every failed accept, retrying up to `backlog` times per wake-up. This listener accepts itself:

- at most `max_connections` at once (those still in their handshake included); one more is
  closed at once, before any TLS work, so a flood costs a syscall per connection, not a
  handshake;
- the TLS handshake must finish within `handshake_timeout`;
- a request's headers must arrive within `header_timeout` of its first byte (of the connection
  itself for the first request); between requests aiohttp's keep-alive timeout applies;
- EMFILE and friends on accept: stop accepting for a moment, then resume by itself;
- each of these is counted and logged at most once per `warn_interval`, with the count.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import logging
import resource
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

log = logging.getLogger("overlay-guard.listener")

# Accepts per wake-up of the listening socket: enough to drain a burst, small enough that a
# flood of connections cannot starve requests already being served.
ACCEPT_BATCH = 64
# After EMFILE/ENFILE/ENOBUFS/ENOMEM: descriptors free up as connections end or time out.
ACCEPT_RETRY = 0.25
# Descriptors the process needs besides client connections (listeners, log, certificates,
# the informers' connections, the event loop's own).
RESERVED_FILES = 64


@dataclasses.dataclass(frozen=True)
class Limits:
    max_connections: int = 1024
    handshake_timeout: float = 10.0
    header_timeout: float = 10.0
    # Above the API server's: Go's http.Transport closes idle connections after 90 s, so the
    # webhook never closes one the API server is about to reuse (which would fail that call).
    idle_timeout: float = 120.0
    warn_interval: float = 10.0


class Throttle:
    """A log line for a recurring event: the first at once, then at most one per interval,
    each with the number of events since the previous line."""

    def __init__(self, message: str, interval: float, level: int = logging.WARNING,
                 logger: logging.Logger = log) -> None:
        self.message, self.interval, self.level, self._log = message, interval, level, logger
        self.total = 0
        self._count = 0
        self._fields: dict[str, Any] = {}
        self._timer: asyncio.TimerHandle | None = None

    def hit(self, **fields: Any) -> None:
        self.total += 1
        self._count += 1
        self._fields = fields
        if self._timer is None:
            self._flush()

    def _flush(self) -> None:
        self._timer = None
        if not self._count:
            return
        self._log.log(self.level, self.message, extra={"fields": {
            **self._fields, "count": self._count, "total": self.total, "intervalSeconds": self.interval}})
        self._count = 0
        self._timer = asyncio.get_running_loop().call_later(self.interval, self._flush)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class Connection(asyncio.Protocol):
    """Sits between the (TLS) transport and aiohttp's handler and enforces the header deadline."""

    def __init__(self, listener: Listener) -> None:
        self._listener = listener
        self._handler: asyncio.Protocol | None = None
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        # When the request whose headers are awaited began (None: none is awaited), and the timer that
        # checks it. The timer is not moved per request (a new timer and a cancelled one per request cost
        # more than the rest of this class): when it fires early for a later request, it waits on.
        self._since: float | None = None
        self._deadline: asyncio.TimerHandle | None = None
        self._busy = False
        self._released = False

    # -- asyncio.Protocol -----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._handler = self._listener.factory()
        self._handler.connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if not self._busy and self._since is None:
            self._arm()
        if self._handler is not None:
            self._handler.data_received(data)

    def eof_received(self) -> bool | None:
        return self._handler.eof_received() if self._handler is not None else None

    def pause_writing(self) -> None:
        if self._handler is not None:
            self._handler.pause_writing()

    def resume_writing(self) -> None:
        if self._handler is not None:
            self._handler.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._handler is not None:
            self._handler.connection_lost(exc)
        self.release()

    # -- request phases (from the middleware) ---------------------------------------------
    def request_started(self) -> None:
        self._busy = True
        self._since = None

    def request_finished(self) -> None:
        self._busy = False

    # -- internals ------------------------------------------------------------------------
    def _arm(self) -> None:
        self._since = self._loop.time()
        if self._deadline is None:
            self._deadline = self._loop.call_at(self._since + self._listener.limits.header_timeout, self._expire)

    def _disarm(self) -> None:
        self._since = None
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if self._since is None:
            return
        due = self._since + self._listener.limits.header_timeout
        if self._loop.time() < due:
            self._deadline = self._loop.call_at(due, self._expire)
            return
        self._listener.slow.hit(port=self._listener.name, timeoutSeconds=self._listener.limits.header_timeout)
        if self._transport is not None:
            self._transport.abort()

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._listener.active -= 1


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def track(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The request's headers are in: stop the header deadline until the response is ready."""
    transport = request.transport
    conn = transport.get_protocol() if transport is not None else None
    if not isinstance(conn, Connection):
        return await handler(request)
    conn.request_started()
    try:
        return await handler(request)
    finally:
        conn.request_finished()


class Listener:
    def __init__(self, factory: Callable[[], asyncio.Protocol], limits: Limits, *,
                 ssl_context: ssl.SSLContext | None = None, name: str = "webhook") -> None:
        self.factory, self.limits, self._ssl, self.name = factory, limits, ssl_context, name
        self.active = 0
        every = limits.warn_interval
        self.refused = Throttle("connection refused: at the connection limit", every)
        self.exhausted = Throttle("cannot accept connections: out of resources; retrying", every)
        self.failed = Throttle("TLS handshakes failed or timed out", every, logging.INFO)
        self.slow = Throttle("connections closed: no complete request headers in time", every, logging.INFO)
        self._sock: socket.socket | None = None
        self._retry: asyncio.TimerHandle | None = None
        self._handshakes: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        assert self._sock is not None
        return int(self._sock.getsockname()[1])

    async def start(self, host: str, port: int, backlog: int) -> None:
        loop = asyncio.get_running_loop()
        family = (await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE))[0][0]
        sock = socket.create_server((host, port), family=family, backlog=backlog)
        sock.setblocking(False)
        self._sock = sock
        loop.add_reader(sock.fileno(), self._accept)

    async def stop(self) -> None:
        """Stop listening and drop connections still in their handshake; established ones
        are aiohttp's to finish (AppRunner.cleanup)."""
        loop = asyncio.get_running_loop()
        if self._retry is not None:
            self._retry.cancel()
        if self._sock is not None:
            loop.remove_reader(self._sock.fileno())
            self._sock.close()
        for task in list(self._handshakes):
            task.cancel()
        if self._handshakes:
            await asyncio.wait(self._handshakes)
        for throttle in (self.refused, self.exhausted, self.failed, self.slow):
            throttle.cancel()

    def _accept(self) -> None:
        assert self._sock is not None
        for _ in range(ACCEPT_BATCH):
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:  # the client gave up while queued
                continue
            except OSError as err:
                self._pause(err)
                return
            if self.active >= self.limits.max_connections:
                conn.close()
                self.refused.hit(port=self.name, maxConnections=self.limits.max_connections)
                continue
            self._open(conn)

    def _pause(self, err: OSError) -> None:
        """Linux keeps the listening socket readable while accept fails, so stop watching it."""
        assert self._sock is not None
        loop = asyncio.get_running_loop()
        loop.remove_reader(self._sock.fileno())
        self._retry = loop.call_later(ACCEPT_RETRY, self._resume)
        self.exhausted.hit(port=self.name, error=errno.errorcode.get(err.errno or 0, str(err)),
                           connections=self.active)

    def _resume(self) -> None:
        self._retry = None
        if self._sock is not None and self._sock.fileno() >= 0:
            asyncio.get_running_loop().add_reader(self._sock.fileno(), self._accept)

    def _open(self, conn: socket.socket) -> None:
        conn.setblocking(False)
        self.active += 1
        proto = Connection(self)
        task = asyncio.get_running_loop().create_task(self._establish(conn, proto))
        self._handshakes.add(task)
        task.add_done_callback(self._handshakes.discard)

    async def _establish(self, conn: socket.socket, proto: Connection) -> None:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.limits.handshake_timeout):
                if self._ssl is not None:
                    # No TLS state (buffers, an SSL object) for a client that has not said hello.
                    await self._readable(conn)
                await loop.connect_accepted_socket(lambda: proto, conn, ssl=self._ssl)
        except asyncio.CancelledError:
            conn.close()
            proto.release()
            raise
        except Exception as err:  # handshake refused, timed out, or the client went away
            conn.close()
            proto.release()
            detail = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
            self.failed.hit(port=self.name, error=detail[:200])

    @staticmethod
    async def _readable(conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_reader(conn.fileno(), wake)
        try:
            await ready
        finally:
            loop.remove_reader(conn.fileno())


def raise_open_files_limit() -> int:
    """Raise the soft open-files limit to the hard one (as Go programs do at start) and return
    the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < want:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]
