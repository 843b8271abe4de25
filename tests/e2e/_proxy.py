"""A round-robin TLS proxy in front of several webhook processes, as a Service with kube-proxy spreads the
API server's requests over replicas: each request (not each connection) goes to the next one."""

from __future__ import annotations

import asyncio
import itertools
import ssl
import threading
from collections.abc import Sequence

import aiohttp
from aiohttp import web

from . import _cluster
from ._cluster import LOOPBACK
from ._guard import Certs, Webhook


class RoundRobin:
    """Listens on loopback with the webhooks' serving certificate; `name`, `url` and `admissions` let
    Guard register it like one webhook."""

    def __init__(self, hooks: Sequence[Webhook], certs: Certs, name: str = "replicas") -> None:
        self.hooks = list(hooks)
        self.name = name
        self.port = _cluster.free_port()
        self._certs = certs
        self._next = itertools.cycle(self.hooks)
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="round-robin", daemon=True)

    @property
    def url(self) -> str:
        return f"https://{LOOPBACK}:{self.port}"

    def admissions(self) -> float:
        return sum(h.admissions() for h in self.hooks)

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(30):
            raise _cluster.ControlPlaneError("the round-robin proxy did not start")

    def stop(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def _run(self) -> None:
        self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server_tls.load_cert_chain(str(self._certs.cert), str(self._certs.key))
        client_tls = ssl.create_default_context(cafile=str(self._certs.ca))
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_tls, limit=0)) as session:
            async def forward(request: web.Request) -> web.Response:
                hook = next(self._next)
                async with session.request(request.method, hook.url + request.path_qs, data=await request.read(),
                                           headers={"Content-Type": request.content_type},
                                           timeout=aiohttp.ClientTimeout(total=30)) as resp:
                    return web.Response(status=resp.status, body=await resp.read(),
                                        content_type=resp.content_type)

            app = web.Application(client_max_size=4 * 1024 * 1024)
            app.router.add_route("*", "/{tail:.*}", forward)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, LOOPBACK, self.port, ssl_context=server_tls).start()
            self._ready.set()
            await self._stop.wait()
            await runner.cleanup()
