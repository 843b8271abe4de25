"""The webhook benchmark's load generator: keep-alive HTTPS clients posting AdmissionReviews, every
request distinct, every answer checked.

Lean on purpose: aiohttp's client spent about 0.7 ms of CPU per request, so on this 2-core machine
the client's core ran out near 1,000 requests/s and the echo handler it compares against idled at a
third of its core: the figures measured the client. These clients write a prepared request in one
call and read the answer by its Content-Length over asyncio streams (HTTP/1.1, as the API server
speaks to webhooks).

Distinct requests: a review is a template whose marker becomes a serial per request (the uid, and
for a create the object's name), and an edit raises its overlay's weight by an amount that changes
with each pass over the templates, so no two measured requests carry the same object (an edit's
object recurs only after RAISES passes) and nothing can be answered from a memo of earlier bodies.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import os
import ssl
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MARK = "@SERIAL@"
WEIGHT = "@WEIGHT@"
# An edit raises its overlay's weight by 1 to RAISES, a different amount on each pass over the templates
# (the workload's stored weights are 0, 10, 50 and 100: a raise of under 10 never lands on one of them).
RAISES = 9


@dataclasses.dataclass(frozen=True)
class Shapes:
    """Review templates: JSON with MARK in the uid, and in the name of a create where fresh names
    were asked for; an edit's weight as the quoted placeholder WEIGHT, with the weight it had before
    in `weights` (None where there is none). Request `i` of a load with `prefix` is template
    `i % len` with the serial `{prefix}-{i}`."""

    templates: tuple[bytes, ...]
    weights: tuple[int | None, ...]

    def body(self, prefix: str, i: int) -> bytes:
        k = i % len(self.templates)
        out = self.templates[k].replace(MARK.encode(), f"{prefix}-{i}".encode())
        before = self.weights[k]
        if before is None:
            return out
        raised = before + 1 + (i // len(self.templates)) % RAISES
        return out.replace(f'"{WEIGHT}"'.encode(), str(raised).encode())


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (0.0 when it cannot be read)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class BadResponse(Exception):
    pass


async def _answer(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return status, await reader.readexactly(int(value))
    raise BadResponse("no Content-Length")


@dataclasses.dataclass
class _Tally:
    latencies: list[float] = dataclasses.field(default_factory=list)
    failures: int = 0


async def _client(port: int, ctx: ssl.SSLContext, path: str, shapes: Shapes, prefix: str,
                  serials: Iterator[int], deadline: float, tally: _Tally) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n".encode()
    try:
        while time.perf_counter() < deadline:
            i = next(serials)
            body = shapes.body(prefix, i)
            started = time.perf_counter()
            writer.write(b"%sContent-Length: %d\r\n\r\n%s" % (head, len(body), body))
            try:
                status, payload = await _answer(reader)
            except (BadResponse, ValueError, asyncio.IncompleteReadError, ConnectionError):
                tally.failures += 1
                return
            if status != 200 or b'"response"' not in payload or f'"{prefix}-{i}"'.encode() not in payload:
                tally.failures += 1
            tally.latencies.append(time.perf_counter() - started)
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer.wait_closed(), 1.0)


async def load(port: int, ctx: ssl.SSLContext, shapes: Shapes, prefix: str, seconds: float,
               concurrency: int, *, path: str = "/validate", pid: int | None = None) -> dict[str, Any]:
    """`concurrency` keep-alive connections posting for `seconds`; with `pid`, the server's CPU
    time per request over the same span (robust where wall time is not: a shared machine)."""
    tally = _Tally()
    serials = itertools.count()
    cpu = cpu_seconds(pid) if pid else 0.0
    started = time.perf_counter()
    deadline = started + seconds
    await asyncio.gather(*(_client(port, ctx, path, shapes, prefix, serials, deadline, tally)
                           for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    done = tally.latencies
    out = {
        "requests": len(done),
        "failures": tally.failures,
        "per_s": len(done) / elapsed,
        "median_ms": statistics.median(done) * 1000 if done else float("nan"),
        "p99_ms": percentile(done, 0.99) * 1000,
    }
    if pid:
        out["server_cpu_ms"] = (cpu_seconds(pid) - cpu) / max(1, len(done)) * 1000
    return out
