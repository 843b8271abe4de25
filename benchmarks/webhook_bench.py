"""Webhook figures on the core issue's workload (full default catalog, 20 NodePools, 2,000
overlays) loaded with `--state`: time to ready, admissions/s over HTTPS keep-alive with the
server pinned to one core, server-side p99 (from the webhook's own per-request log lines),
RSS, and the latency the webhook adds over an aiohttp handler that only echoes allowed:true,
both measured in the same run, rounds interleaved; and the same with 200 concurrent clients
(one keep-alive connection each), the p99 an API server under a burst of applies sees.
`run()` returns medians over the rounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks import workload
from certs import generate
from simulation.semantics import catalog as cat

ROOT = Path(__file__).resolve().parent.parent
ROUNDS = 3
ROUND_SECONDS = 8.0
CONCURRENCY = 8
MANY_CLIENTS = 200
WARMUP = 40
SEQUENTIAL_SECONDS = 3.0
# Distinct objects admitted for real (held): within the core's incremental limit of 8 changes.
HELD_OBJECTS = 8


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def _pin(cpu: int) -> Callable[[], None] | None:
    """Server on one core, load generator on another, when the machine has two."""
    if (os.cpu_count() or 1) < 2 or not hasattr(os, "sched_setaffinity"):
        return None
    return lambda: os.sched_setaffinity(0, {cpu})


def _rss_mb(pid: int) -> dict[str, float]:
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = round(int(value.split()[0]) / 1024, 1)
    except OSError:
        pass
    return out


def _reviews(count: int, prefix: str, dry_run: bool, broad: bool = False) -> list[bytes]:
    """Alternating new overlays and edits of existing ones, as admission traffic does; `broad`: new overlays
    with no NodePool requirement instead (family-wide and capacity-type-wide, clean and conflicting in turn)."""
    existing = workload.overlays()
    # Loaded once: workload.broad reads the families from it, and loading it per overlay takes minutes.
    catalog = cat.default() if broad else None
    out = []
    for i in range(count):
        if broad:
            obj, op, old = workload.broad(i // 2, conflicting=i % 2 == 1, catalog=catalog), "CREATE", None
        elif i % 2 == 0:
            obj, op, old = workload.candidate(i % 64), "CREATE", None
        else:
            old = existing[(i * 37) % len(existing)]
            obj = json.loads(json.dumps(old))
            obj["spec"]["weight"] = obj["spec"].get("weight", 0) + 1
            op = "UPDATE"
        gvk = {"group": "karpenter.sh", "version": "v1alpha1", "kind": "NodeOverlay"}
        out.append(
            json.dumps(
                {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "request": {
                        "uid": f"{prefix}-{i}",
                        "kind": gvk,
                        "requestKind": gvk,
                        "resource": {
                            "group": "karpenter.sh",
                            "version": "v1alpha1",
                            "resource": "nodeoverlays",
                        },
                        "name": obj["metadata"]["name"],
                        "operation": op,
                        "object": obj,
                        "oldObject": old,
                        "dryRun": dry_run,
                        "userInfo": {"username": "bench"},
                    },
                }
            ).encode()
        )
    return out


async def _load(url: str, ctx: ssl.SSLContext, bodies: list[bytes], seconds: float,
                concurrency: int = CONCURRENCY) -> dict[str, Any]:
    latencies: list[float] = []
    failures = 0
    deadline = time.perf_counter() + seconds
    connector = aiohttp.TCPConnector(limit=concurrency, ssl=ctx)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker(offset: int) -> None:
            nonlocal failures
            i = offset
            while time.perf_counter() < deadline:
                body = bodies[i % len(bodies)]
                i += concurrency
                t = time.perf_counter()
                async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as r:
                    payload = await r.read()
                if r.status != 200 or b'"response"' not in payload:
                    failures += 1
                latencies.append(time.perf_counter() - t)

        started = time.perf_counter()
        await asyncio.gather(*(worker(k) for k in range(concurrency)))
        elapsed = time.perf_counter() - started
    return {
        "requests": len(latencies),
        "failures": failures,
        "per_s": len(latencies) / elapsed,
        "median_ms": statistics.median(latencies) * 1000,
        "p99_ms": _percentile(latencies, 0.99) * 1000,
    }


def _server_side(log: Path, prefix: str) -> list[float]:
    out = []
    for line in log.read_text(errors="replace").splitlines():
        if f'"{prefix}-' not in line:
            continue
        try:
            out.append(float(json.loads(line)["durationMs"]))
        except (ValueError, KeyError):
            continue
    return out


async def _wait_ready(url: str, ctx: ssl.SSLContext, proc: subprocess.Popen[bytes], timeout: float) -> float:
    started = time.perf_counter()
    async with aiohttp.ClientSession() as session:
        while time.perf_counter() - started < timeout:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited with {proc.returncode}")
            try:
                async with session.get(url, ssl=ctx) as r:
                    if r.status == 200:
                        return time.perf_counter() - started
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.02)
    raise RuntimeError(f"not ready within {timeout}s")


def _start(args: list[str], log: Path) -> tuple[subprocess.Popen[bytes], int, float]:
    """Start a server; returns it, its HTTPS port, and the moment it was spawned."""
    spawned = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, *args],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
        preexec_fn=_pin(0),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    while time.perf_counter() - spawned < 60:
        for line in log.read_text(errors="replace").splitlines():
            if '"listening"' in line:
                return proc, int(json.loads(line)["port"]), spawned
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {log.read_text()[-2000:]}")
        time.sleep(0.01)
    proc.kill()
    raise RuntimeError("server did not start listening")


async def _measure(tmp: Path) -> dict[str, Any]:
    keys = tmp / "pki"
    generate.write_bundle(keys, "overlay-guard")
    ctx = ssl.create_default_context(cafile=str(keys / "ca.crt"))
    state = tmp / "state.json"
    state.write_text(
        json.dumps(
            {"apiVersion": "v1", "kind": "List", "items": [*workload.nodepools(), *workload.overlays()]}
        )
    )
    tls = [
        "--tls-cert-file",
        str(keys / "tls.crt"),
        "--tls-private-key-file",
        str(keys / "tls.key"),
        "--host",
        "127.0.0.1",
        "--port",
        "0",
    ]
    hook, hook_port, spawned = _start(
        ["-m", "webhook", *tls, "--metrics-port", "0", "--state", str(state)], tmp / "webhook.log"
    )
    await _wait_ready(f"https://127.0.0.1:{hook_port}/readyz", ctx, hook, 120)
    ready_s = time.perf_counter() - spawned
    # Started only now, so that it does not compete with the webhook's start on the same core.
    echo, echo_port, _ = _start(["-m", "benchmarks.webhook_bench", "echo", *tls], tmp / "echo.log")
    pinned = (os.cpu_count() or 1) >= 2 and hasattr(os, "sched_setaffinity")
    affinity = os.sched_getaffinity(0) if pinned else set()
    if pinned:
        os.sched_setaffinity(0, {1})
    try:
        hook_url = f"https://127.0.0.1:{hook_port}/validate"
        echo_url = f"https://127.0.0.1:{echo_port}/validate"
        await _load(hook_url, ctx, _reviews(WARMUP, "warm", True), 1.0)
        rounds: list[dict[str, Any]] = []
        for r in range(ROUNDS):
            prefix = f"bench{r}"
            hook_round = await _load(hook_url, ctx, _reviews(400, prefix, True), ROUND_SECONDS)
            server = _server_side(tmp / "webhook.log", prefix)
            echo_round = await _load(echo_url, ctx, _reviews(400, f"echo{r}", True), ROUND_SECONDS)
            # One request at a time: latency without queueing, what a single kubectl apply sees.
            hook_one = await _load(hook_url, ctx, _reviews(400, f"one{r}", True), SEQUENTIAL_SECONDS, 1)
            echo_one = await _load(echo_url, ctx, _reviews(400, f"eone{r}", True), SEQUENTIAL_SECONDS, 1)
            hook_broad = await _load(hook_url, ctx, _reviews(400, f"broad{r}", True, broad=True), ROUND_SECONDS)
            broad_server = _server_side(tmp / "webhook.log", f"broad{r}")
            echo_broad = await _load(echo_url, ctx, _reviews(400, f"ebroad{r}", True, broad=True), ROUND_SECONDS)
            hook_many = await _load(hook_url, ctx, _reviews(400, f"many{r}", True), ROUND_SECONDS, MANY_CLIENTS)
            echo_many = await _load(echo_url, ctx, _reviews(400, f"emany{r}", True), ROUND_SECONDS, MANY_CLIENTS)
            rounds.append(
                {
                    "webhook": hook_round,
                    "echo": echo_round,
                    "webhook_one": hook_one,
                    "echo_one": echo_one,
                    "webhook_broad": hook_broad,
                    "echo_broad": echo_broad,
                    "broad_server_p99_ms": _percentile(broad_server, 0.99),
                    "webhook_many": hook_many,
                    "echo_many": echo_many,
                    "server_median_ms": statistics.median(server) if server else float("nan"),
                    "server_p99_ms": _percentile(server, 0.99),
                }
            )
        # Not dry runs: every admission is held as pending. Without a watch (--state) nothing
        # confirms a hold, so all HELD_OBJECTS stay pending and join every evaluation as fellow
        # candidates, as admissions of the last few seconds do in a cluster.
        held = await _load(hook_url, ctx, _reviews(HELD_OBJECTS, "held", False), ROUND_SECONDS)
        held_server = _server_side(tmp / "webhook.log", "held")
        memory = _rss_mb(hook.pid)
    finally:
        if pinned:
            os.sched_setaffinity(0, affinity)
        for proc in (hook, echo):
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()

    def med(path: Callable[[dict[str, Any]], float]) -> float:
        return round(statistics.median(path(x) for x in rounds), 3)

    one_hook = med(lambda x: x["webhook_one"]["median_ms"])
    one_echo = med(lambda x: x["echo_one"]["median_ms"])
    hook_median = med(lambda x: x["webhook"]["median_ms"])
    echo_median = med(lambda x: x["echo"]["median_ms"])
    return {
        "workload": {
            "nodepools": workload.POOLS,
            "overlays": workload.OVERLAYS,
            "catalog": "embedded default",
        },
        "setup": {
            "rounds": ROUNDS,
            "round_s": ROUND_SECONDS,
            "concurrency": CONCURRENCY,
            "server_cores": 1 if (os.cpu_count() or 1) >= 2 else "shared",
            "dry_run": True,
        },
        "time_to_ready_s": round(ready_s, 3),
        "admissions_per_s": med(lambda x: x["webhook"]["per_s"]),
        "client_median_ms": hook_median,
        "client_p99_ms": med(lambda x: x["webhook"]["p99_ms"]),
        "server_median_ms": med(lambda x: x["server_median_ms"]),
        "server_p99_ms": med(lambda x: x["server_p99_ms"]),
        "echo_per_s": med(lambda x: x["echo"]["per_s"]),
        "echo_median_ms": echo_median,
        "added_latency_ms": round(hook_median - echo_median, 3),
        "latency_ratio_vs_echo": round(hook_median / echo_median, 2) if echo_median else None,
        "sequential_median_ms": one_hook,
        "sequential_echo_median_ms": one_echo,
        "sequential_added_ms": round(one_hook - one_echo, 3),
        "sequential_ratio_vs_echo": round(one_hook / one_echo, 2) if one_echo else None,
        "broad": {
            "load": "new overlays with no NodePool requirement, family-wide and capacity-type-wide, clean and "
                    "conflicting in turn",
            "admissions_per_s": med(lambda x: x["webhook_broad"]["per_s"]),
            "echo_per_s": med(lambda x: x["echo_broad"]["per_s"]),
            "ratio_vs_echo": med(lambda x: x["webhook_broad"]["per_s"] / x["echo_broad"]["per_s"]),
            "client_p99_ms": med(lambda x: x["webhook_broad"]["p99_ms"]),
            "server_p99_ms": med(lambda x: x["broad_server_p99_ms"]),
        },
        "clients_200": {
            "clients": MANY_CLIENTS,
            "per_s": med(lambda x: x["webhook_many"]["per_s"]),
            "median_ms": med(lambda x: x["webhook_many"]["median_ms"]),
            "p99_ms": med(lambda x: x["webhook_many"]["p99_ms"]),
            "echo_per_s": med(lambda x: x["echo_many"]["per_s"]),
            "echo_p99_ms": med(lambda x: x["echo_many"]["p99_ms"]),
            "p99_ratio_vs_echo": med(lambda x: x["webhook_many"]["p99_ms"] / x["echo_many"]["p99_ms"]),
        },
        "failures": sum(x[k]["failures"] for x in rounds
                        for k in ("webhook", "echo", "webhook_broad", "echo_broad", "webhook_many", "echo_many"))
        + held["failures"],
        "held_objects": HELD_OBJECTS,
        "held_admissions_per_s": round(held["per_s"], 1),
        "held_server_p99_ms": round(_percentile(held_server, 0.99), 3),
        "rss_mb": memory.get("VmRSS"),
        "peak_rss_mb": memory.get("VmHWM"),
        "rounds": [
            {
                "webhook_per_s": round(x["webhook"]["per_s"], 1),
                "echo_per_s": round(x["echo"]["per_s"], 1),
                "server_p99_ms": round(x["server_p99_ms"], 3),
            }
            for x in rounds
        ],
    }


def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="overlay-guard-bench-") as tmp:
        return asyncio.run(_measure(Path(tmp)))


def _echo(argv: list[str]) -> int:
    """The baseline: same TLS, same framework, a handler that only parses and echoes allowed."""
    import argparse

    from aiohttp import web

    p = argparse.ArgumentParser()
    p.add_argument("--tls-cert-file")
    p.add_argument("--tls-private-key-file")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args(argv)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(args.tls_cert_file, args.tls_private_key_file)

    async def validate(request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        return web.json_response(
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {"uid": body["request"]["uid"], "allowed": True},
            }
        )

    async def serve() -> None:
        app = web.Application(client_max_size=3 * 1024 * 1024)
        app.router.add_post("/validate", validate)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, args.host, args.port, ssl_context=ctx)
        await site.start()
        port = runner.addresses[0][1]
        print(json.dumps({"msg": "listening", "port": port}), file=sys.stderr, flush=True)
        await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["echo"]:
        raise SystemExit(_echo(sys.argv[2:]))
    print(json.dumps(run(), indent=2))
