"""Connection limits of a running webhook over real TLS: handshake and header timeouts, the idle
keep-alive timeout, the connection cap, the open-files limit, and client-CA rotation."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import socket
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from certs import generate
from tests.webhook_support import (
    ADMISSION,
    Pki,
    Process,
    client_context,
    fixture,
    fixture_state,
    make_pki,
    server_args,
    serving,
)

BODY = json.dumps(fixture("create-conflict-dryrun")).encode()
REQUEST = (
    b"POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    + f"Content-Length: {len(BODY)}\r\n\r\n".encode()
    + BODY
)


@contextlib.asynccontextmanager
async def webhook(tmp: Path, *flags: str) -> AsyncIterator[tuple[Process, Pki]]:
    keys = make_pki(tmp / "pki")
    proc = await Process(server_args(keys, "--state", str(ADMISSION), *flags), tmp / "log").start()
    try:
        await proc.wait_for("ready")
        yield proc, keys
    finally:
        assert proc.stop() == 0


async def _sample(proc: Process, needle: str) -> float:
    """The value of the metrics line starting with `needle`."""
    async with aiohttp.ClientSession() as session, session.get(
            f"http://127.0.0.1:{proc.metrics_port}/metrics") as resp:
        text = await resp.text()
    return float(next(line for line in text.splitlines() if line.startswith(needle)).split()[-1])


async def rejected(proc: Process, reason: str) -> float:
    """overlay_guard_connections_rejected_total of the webhook port for `reason`."""
    return await _sample(proc, f'overlay_guard_connections_rejected_total{{port="webhook",reason="{reason}"}} ')


async def open_connections(proc: Process, count: int, timeout: float = 10) -> None:
    """Returns once the webhook port counts `count` open connections (overlay_guard_connections): the server's own
    word that it has accepted (or dropped) them, not a guess of how long that takes."""
    deadline = time.monotonic() + timeout
    while (now := await _sample(proc, 'overlay_guard_connections{port="webhook"} ')) != count:
        assert time.monotonic() < deadline, f"{now:g} open connections, not {count}, after {timeout}s"
        await asyncio.sleep(0.02)


async def closed_after(reader: asyncio.StreamReader, limit: float, began: float | None = None) -> float:
    """Seconds from `began` (default now) until the server closes the connection (EOF or reset)."""
    began = time.monotonic() if began is None else began
    with contextlib.suppress(ConnectionError, ssl.SSLError):
        while await asyncio.wait_for(reader.read(65536), limit):
            pass
    return time.monotonic() - began


async def response(reader: asyncio.StreamReader) -> int:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    await reader.readexactly(length)
    return int(head.split(b" ", 2)[1])


async def test_silent_and_half_sent_requests_are_closed_after_the_header_timeout(tmp_path: Path) -> None:
    async with webhook(tmp_path, "--request-header-timeout", "1", "--tls-handshake-timeout", "1") as (proc, keys):
        ctx = client_context(keys.ca)
        began = time.monotonic()
        # The handshake completes, then nothing.
        # (Writers are kept: a collected StreamWriter closes its connection.)
        silent_r, silent_w = await asyncio.open_connection("127.0.0.1", proc.port, ssl=ctx)
        # Half the headers.
        half_r, half_w = await asyncio.open_connection("127.0.0.1", proc.port, ssl=ctx)
        half_w.write(REQUEST[:40])
        # Plain TCP that never says hello.
        raw_r, raw_w = await asyncio.open_connection("127.0.0.1", proc.port)
        opened = time.monotonic() - began
        # A complete request is served, and the connection stays usable past the header timeout.
        kept_r, kept_w = await asyncio.open_connection("127.0.0.1", proc.port, ssl=ctx)
        kept_w.write(REQUEST)
        assert await response(kept_r) == 200
        waits = await asyncio.gather(*(closed_after(r, 10, began) for r in (silent_r, half_r, raw_r)))
        assert all(1 <= w < 5 + opened for w in waits), (waits, opened)
        kept_w.write(REQUEST)
        assert await response(kept_r) == 200
        for w in (silent_w, half_w, raw_w, kept_w):
            w.close()
        assert await rejected(proc, "header_timeout") == 2 and await rejected(proc, "handshake") == 1
    messages = {line.get("msg") for line in proc.lines()}
    assert "connections closed: no complete request headers in time" in messages
    assert "TLS handshakes failed or timed out" in messages


async def test_a_second_request_has_the_header_timeout_and_idle_connections_the_idle_timeout(
        tmp_path: Path) -> None:
    async with webhook(tmp_path, "--request-header-timeout", "1", "--idle-timeout", "3") as (proc, keys):
        ctx = client_context(keys.ca)
        r, w = await asyncio.open_connection("127.0.0.1", proc.port, ssl=ctx)
        w.write(REQUEST)
        assert await response(r) == 200
        w.write(REQUEST[:40])  # the next request starts and stalls
        assert 0.5 < await closed_after(r, 10) < 5
        idle_r, idle_w = await asyncio.open_connection("127.0.0.1", proc.port, ssl=ctx)
        idle_w.write(REQUEST)
        assert await response(idle_r) == 200
        assert 2 < await closed_after(idle_r, 15) < 8


async def test_connections_over_the_cap_are_refused_at_once(tmp_path: Path) -> None:
    async with webhook(tmp_path, "--max-connections", "5", "--tls-handshake-timeout", "30") as (proc, keys):
        ctx = client_context(keys.ca)
        held = [socket.create_connection(("127.0.0.1", proc.port)) for _ in range(5)]
        await open_connections(proc, 5)
        began = time.monotonic()
        with pytest.raises((ConnectionError, ssl.SSLError, OSError)):
            await asyncio.wait_for(asyncio.open_connection("127.0.0.1", proc.port, ssl=ctx), 10)
        # Well short of the 30 s handshake timeout a queued connection would wait.
        assert time.monotonic() - began < 8, "refused, not left waiting"
        held.pop().close()
        await open_connections(proc, 4)
        r, w = await asyncio.open_connection("127.0.0.1", proc.port, ssl=ctx)
        w.write(REQUEST)
        assert await response(r) == 200
        for s in held:
            s.close()
        assert await rejected(proc, "at_limit") >= 1
    refused = [line for line in proc.lines() if line.get("msg") == "connection refused: at the connection limit"]
    assert refused and refused[0]["maxConnections"] == 5


@pytest.fixture
def _enough_file_descriptors() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 4096)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


@pytest.mark.usefixtures("_enough_file_descriptors")
async def test_at_the_open_files_limit_the_log_stays_small_and_service_resumes(tmp_path: Path) -> None:
    flags = ("--max-connections", "1000", "--tls-handshake-timeout", "2")
    async with webhook(tmp_path, *flags) as (proc, keys):
        resource.prlimit(proc.proc.pid, resource.RLIMIT_NOFILE, (128, 128))
        before = proc.log.stat().st_size
        began = time.monotonic()
        # More connections than descriptors, held open and never saying hello.
        flood = [socket.create_connection(("127.0.0.1", proc.port)) for _ in range(400)]
        await proc.wait_for("cannot accept connections: out of resources; retrying")
        ctx = client_context(keys.ca)
        served = False
        while not served and time.monotonic() - began < 30:
            with contextlib.suppress(OSError, ssl.SSLError, TimeoutError):
                r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", proc.port, ssl=ctx), 10)
                w.write(REQUEST)
                served = await response(r) == 200
                w.close()
        resumed = time.monotonic() - began
        for s in flood:
            s.close()
        logged = proc.log.stat().st_size - before
        elapsed = time.monotonic() - began
        async with aiohttp.ClientSession() as session, session.post(
                f"https://127.0.0.1:{proc.port}/validate", data=BODY, ssl=ctx,
                headers={"Content-Type": "application/json"}) as resp:
            assert resp.status == 200
    assert served, f"not served within {resumed:.1f}s"
    exhausted = [line for line in proc.lines()
                 if line.get("msg") == "cannot accept connections: out of resources; retrying"]
    assert exhausted and exhausted[0]["error"] == "EMFILE", proc.log.read_text()[-2000:]
    assert len(exhausted) <= elapsed / 10 + 2
    # The budget is 1 MB a minute; a traceback per attempt would be megabytes.
    assert logged < 1_000_000 * elapsed / 60, (logged, elapsed)
    assert all("exception" not in line for line in proc.lines())


async def test_a_flood_of_malformed_requests_is_counted_not_logged_one_by_one(tmp_path: Path) -> None:
    async with webhook(tmp_path) as (proc, keys):
        before = proc.log.stat().st_size
        began = time.monotonic()
        url = f"https://127.0.0.1:{proc.port}/validate"
        async with aiohttp.ClientSession() as session:
            for _ in range(300):
                async with session.post(url, data=b"{not json", ssl=client_context(keys.ca),
                                        headers={"Content-Type": "application/json"}) as resp:
                    assert resp.status == 400
            async with session.post(url, data=BODY, ssl=client_context(keys.ca),
                                    headers={"Content-Type": "application/json"}) as resp:
                assert resp.status == 200
        # The last request's own log line: everything before it is written.
        await proc.wait_for("admission")
        logged = proc.log.stat().st_size - before
        elapsed = time.monotonic() - began
    lines = proc.lines()
    counted = [line for line in lines if line.get("msg") == "malformed admission requests refused"]
    # The first at once, then one per 10 s interval with the count.
    assert 1 <= len(counted) <= elapsed / 10 + 1 and counted[0]["verdict"] == "bad_request", counted
    assert any(line.get("msg") == "admission" and line.get("verdict") == "denied" for line in lines)
    assert logged < 2000 + 1000 * len(counted), logged


async def test_a_rotated_client_ca_is_used_without_restart(tmp_path: Path) -> None:
    keys = make_pki(tmp_path / "server")
    bundle = tmp_path / "client-ca.crt"
    clients = {}
    for name in ("old", "new"):
        ca_cert, ca_key = generate.new_ca(f"{name}-client-ca")
        cert, key = generate.issue_client(ca_cert, ca_key, "kube-apiserver")
        (tmp_path / f"{name}-ca.crt").write_bytes(generate.cert_pem(ca_cert))
        (tmp_path / f"{name}.crt").write_bytes(generate.cert_pem(cert))
        (tmp_path / f"{name}.key").write_bytes(generate.key_pem(key))
        clients[name] = client_context(keys.ca, tmp_path / f"{name}.crt", tmp_path / f"{name}.key")
    bundle.write_bytes((tmp_path / "old-ca.crt").read_bytes())

    async def accepted(name: str) -> bool:
        async with aiohttp.ClientSession() as session:
            try:
                async with session.get(srv.url + "/healthz", ssl=clients[name]) as r:
                    return r.status == 200
            except aiohttp.ClientError:
                return False

    async with serving(tmp_path, fixture_state(), pki=keys, client_ca=bundle) as srv:
        assert [await accepted("old"), await accepted("new")] == [True, False]
        # Rotation with overlap: both CAs, then only the new one (written atomically, as a
        # mounted Secret changes).
        for content, expect in (("old-ca.crt new-ca.crt", [True, True]), ("new-ca.crt", [False, True])):
            await asyncio.sleep(0.02)  # a new mtime even on coarse-grained file systems
            staged = tmp_path / "staged.crt"
            staged.write_bytes(b"".join((tmp_path / n).read_bytes() for n in content.split()))
            os.replace(staged, bundle)
            assert [await accepted("old"), await accepted("new")] == expect, content
        # A broken file keeps the CA in use.
        bundle.write_bytes(b"-----BEGIN CERTIFICATE-----\nnot a certificate\n")
        assert [await accepted("old"), await accepted("new")] == [False, True]
        assert srv.tls.reloads == 2
