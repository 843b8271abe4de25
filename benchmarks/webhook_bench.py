"""Webhook figures on the core issue's workload (full default catalog, 20 NodePools, 2,000
overlays) loaded with `--state`: time to ready, admissions/s over HTTPS keep-alive with the
server pinned to one core, server-side p99 (from the webhook's own per-request log lines: the
handler's time; a request queued behind others, which run on the event loop, waits before its
handler starts, so only the clients' p99 counts that wait),
RSS, and the latency the webhook adds over an aiohttp handler that only echoes allowed:true,
both measured in the same run, rounds interleaved; and the same with 200 concurrent clients
(one keep-alive connection each), the p99 an API server under a burst of applies sees.
`run()` returns medians over the rounds; `quick()` (`python -m benchmarks.webhook_bench broad`)
only the broad load against the echo handler. The clients (benchmarks/https_load.py) make every
request distinct and report the servers' CPU time per request beside the rates.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks import https_load, workload
from certs import generate
from simulation.semantics import catalog as cat

ROOT = Path(__file__).resolve().parent.parent
ROUNDS = 3
ROUND_SECONDS = 8.0
CONCURRENCY = 8
MANY_CLIENTS = 200
WARMUP = 40
SEQUENTIAL_SECONDS = 3.0
# Templates of the scoped mixed load: an edit's object recurs after MIXED_SHAPES * https_load.RAISES requests.
MIXED_SHAPES = 1000
# Distinct objects admitted for real (held): within the core's incremental limit of 8 changes.
HELD_OBJECTS = 8
# Where only the time to ready and the memory are measured.
LARGE = workload.Size(10_000, 100)
# Objects per --state file.
STATE_FILE_OBJECTS = 10_000
# The same at distinct capacity fields (an extended resource per capacity overlay): what memory grows with.
DISTINCT = (workload.Size(2000, 20, distinct=True), workload.Size(10_000, 100, distinct=True))


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


def _reviews(count: int, dry_run: bool, broad: bool = False, fresh_names: bool = True) -> https_load.Shapes:
    """Alternating new overlays and edits of existing ones, as admission traffic does; `broad`: new overlays
    with no NodePool requirement instead (family-wide and capacity-type-wide, clean and conflicting in turn).
    `count` shapes, each request a distinct instance of one (https_load): a fresh uid, a fresh name for a
    create (unless not `fresh_names`), an edit's weight raised by 1 to https_load.RAISES."""
    existing = workload.overlays()
    # Loaded once: workload.broad reads the families from it, and loading it per overlay takes minutes.
    catalog = cat.default() if broad else None
    out, weights = [], []
    for i in range(count):
        if broad:
            obj, op, old = workload.broad(i // 2, conflicting=i % 2 == 1, catalog=catalog), "CREATE", None
        elif i % 2 == 0:
            obj, op, old = workload.candidate(i % 64), "CREATE", None
        else:
            old = existing[(i * 37) % len(existing)]
            obj = json.loads(json.dumps(old))
            obj["spec"]["weight"] = https_load.WEIGHT
            op = "UPDATE"
        weights.append(old["spec"].get("weight", 0) if op == "UPDATE" and old is not None else None)
        if op == "CREATE" and fresh_names:
            obj["metadata"]["name"] += "-" + https_load.MARK
        gvk = {"group": "karpenter.sh", "version": "v1alpha1", "kind": "NodeOverlay"}
        out.append(
            json.dumps(
                {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "request": {
                        "uid": https_load.MARK,
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
    return https_load.Shapes(tuple(out), tuple(weights))


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


def _start(args: list[str], log: Path, root: Path = ROOT) -> tuple[subprocess.Popen[bytes], int, float]:
    """Start a server of the tree at `root` (on this interpreter: the tree's modules come first on its path);
    returns it, its HTTPS port, and the moment it was spawned."""
    spawned = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, *args],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
        preexec_fn=_pin(0),
        env={**os.environ, "PYTHONPATH": str(root)},
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


@dataclasses.dataclass(frozen=True)
class _Servers:
    hook: subprocess.Popen[bytes]
    hook_port: int
    echo: subprocess.Popen[bytes]
    echo_port: int
    ctx: ssl.SSLContext
    ready_s: float
    log: Path


@contextlib.asynccontextmanager
async def _servers(tmp: Path, size: workload.Size = workload.DEFAULT) -> AsyncIterator[_Servers]:
    """The webhook on the workload of `size` (`--state`) and the echo handler, each pinned to core 0, this
    process (the clients) to core 1 while they run."""
    ctx, states, tls = _setup(tmp, size)
    hook, hook_port, spawned = _start(
        ["-m", "webhook", *tls, "--metrics-port", "0", "--state", *states], tmp / "webhook.log"
    )
    procs = [hook]
    pinned = (os.cpu_count() or 1) >= 2 and hasattr(os, "sched_setaffinity")
    affinity = os.sched_getaffinity(0) if pinned else set()
    try:
        # The first snapshot grows with the overlays: 100,000 take minutes on a loaded machine.
        await _wait_ready(f"https://127.0.0.1:{hook_port}/readyz", ctx, hook, max(120.0, size.overlays / 100))
        ready_s = time.perf_counter() - spawned
        # Started only now, so that it does not compete with the webhook's start on the same core.
        echo, echo_port, _ = _start(["-m", "benchmarks.echo", *tls], tmp / "echo.log")
        procs.append(echo)
        if pinned:
            os.sched_setaffinity(0, {1})
        yield _Servers(hook, hook_port, echo, echo_port, ctx, ready_s, tmp / "webhook.log")
    finally:
        if pinned:
            os.sched_setaffinity(0, affinity)
        _stop(procs)


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _setup(tmp: Path, size: workload.Size) -> tuple[ssl.SSLContext, list[str], list[str]]:
    """Keys, the client's TLS context, the `--state` files of `size` and the servers' TLS arguments."""
    keys = tmp / "pki"
    generate.write_bundle(keys, "overlay-guard")
    ctx = ssl.create_default_context(cafile=str(keys / "ca.crt"))
    documents = workload.documents(size)
    states = []
    # Files under the webhook's --max-file-size (10 MiB): 50,000 overlays are about 21 MB.
    for start in range(0, len(documents), STATE_FILE_OBJECTS):
        state = tmp / f"state-{start}.json"
        state.write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                     "items": documents[start:start + STATE_FILE_OBJECTS]}))
        states.append(str(state))
    return ctx, states, [
        "--tls-cert-file",
        str(keys / "tls.crt"),
        "--tls-private-key-file",
        str(keys / "tls.key"),
        "--host",
        "127.0.0.1",
        "--port",
        "0",
    ]


async def _broad_round(s: _Servers, r: int, seconds: float) -> dict[str, Any]:
    """The broad mixed load on the webhook, then on the echo handler; server CPU per request of each."""
    shapes = _reviews(400, True, broad=True)
    hook = await https_load.load(s.hook_port, s.ctx, shapes, f"broad{r}", seconds, CONCURRENCY, pid=s.hook.pid)
    server = _server_side(s.log, f"broad{r}")
    echo = await https_load.load(s.echo_port, s.ctx, shapes, f"ebroad{r}", seconds, CONCURRENCY, pid=s.echo.pid)
    return {"webhook_broad": hook, "echo_broad": echo, "broad_server_p99_ms": https_load.percentile(server, 0.99)}


def _broad_figures(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    def med(path: Callable[[dict[str, Any]], float]) -> float:
        return round(statistics.median(path(x) for x in rounds), 3)

    return {
        "load": "new overlays with no NodePool requirement, family-wide and capacity-type-wide, clean and "
                "conflicting in turn; every request a distinct object",
        "admissions_per_s": med(lambda x: x["webhook_broad"]["per_s"]),
        "echo_per_s": med(lambda x: x["echo_broad"]["per_s"]),
        "ratio_vs_echo": med(lambda x: x["webhook_broad"]["per_s"] / x["echo_broad"]["per_s"]),
        "client_p99_ms": med(lambda x: x["webhook_broad"]["p99_ms"]),
        "server_p99_ms": med(lambda x: x["broad_server_p99_ms"]),
        "server_cpu_ms_per_admission": med(lambda x: x["webhook_broad"]["server_cpu_ms"]),
        "echo_cpu_ms_per_request": med(lambda x: x["echo_broad"]["server_cpu_ms"]),
        "rounds_per_s": [round(x["webhook_broad"]["per_s"], 1) for x in rounds],
        "failures": sum(x[k]["failures"] for x in rounds for k in ("webhook_broad", "echo_broad")),
    }


async def _warm(s: _Servers) -> None:
    await https_load.load(s.hook_port, s.ctx, _reviews(WARMUP, True), "warm", 1.0, CONCURRENCY)
    await https_load.load(s.echo_port, s.ctx, _reviews(WARMUP, True), "ewarm", 1.0, CONCURRENCY)


async def _measure(tmp: Path) -> dict[str, Any]:
    async with _servers(tmp) as s:
        await _warm(s)
        rounds: list[dict[str, Any]] = []
        mixed = _reviews(MIXED_SHAPES, True)

        async def both(prefix: str, seconds: float, clients: int) -> tuple[dict[str, Any], dict[str, Any]]:
            hook = await https_load.load(s.hook_port, s.ctx, mixed, prefix, seconds, clients, pid=s.hook.pid)
            echo = await https_load.load(s.echo_port, s.ctx, mixed, "e" + prefix, seconds, clients)
            return hook, echo

        for r in range(ROUNDS):
            hook_round, echo_round = await both(f"bench{r}", ROUND_SECONDS, CONCURRENCY)
            server = _server_side(s.log, f"bench{r}")
            # One request at a time: latency without queueing, what a single kubectl apply sees.
            hook_one, echo_one = await both(f"one{r}", SEQUENTIAL_SECONDS, 1)
            broad = await _broad_round(s, r, ROUND_SECONDS)
            hook_many, echo_many = await both(f"many{r}", ROUND_SECONDS, MANY_CLIENTS)
            rounds.append(
                {
                    "webhook": hook_round,
                    "echo": echo_round,
                    "webhook_one": hook_one,
                    "echo_one": echo_one,
                    **broad,
                    "webhook_many": hook_many,
                    "echo_many": echo_many,
                    "server_median_ms": statistics.median(server) if server else float("nan"),
                    "server_p99_ms": https_load.percentile(server, 0.99),
                }
            )
        # Not dry runs: every admission is recorded in the ledger (in memory with --state). Without a
        # watch nothing settles a record before its deadline (3 s), so the HELD_OBJECTS records join
        # every evaluation as fellow candidates, as admissions of the last few seconds do in a cluster.
        # The same HELD_OBJECTS names on purpose (a fresh uid and weight each time): more would be more
        # records, not a different request.
        held = await https_load.load(s.hook_port, s.ctx, _reviews(HELD_OBJECTS, False, fresh_names=False),
                                     "held", ROUND_SECONDS, CONCURRENCY)
        held_server = _server_side(s.log, "held")
        memory = _rss_mb(s.hook.pid)
        ready_s = s.ready_s

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
            "client": "benchmarks/https_load.py (keep-alive HTTP/1.1 over TLS, every request distinct)",
            "load_average_at_end": os.getloadavg()[0],
        },
        "time_to_ready_s": round(ready_s, 3),
        "admissions_per_s": med(lambda x: x["webhook"]["per_s"]),
        "client_median_ms": hook_median,
        "client_p99_ms": med(lambda x: x["webhook"]["p99_ms"]),
        "server_median_ms": med(lambda x: x["server_median_ms"]),
        "server_p99_ms": med(lambda x: x["server_p99_ms"]),
        "server_cpu_ms_per_admission": med(lambda x: x["webhook"]["server_cpu_ms"]),
        "echo_per_s": med(lambda x: x["echo"]["per_s"]),
        "echo_median_ms": echo_median,
        "added_latency_ms": round(hook_median - echo_median, 3),
        "latency_ratio_vs_echo": round(hook_median / echo_median, 2) if echo_median else None,
        "sequential_median_ms": one_hook,
        "sequential_echo_median_ms": one_echo,
        "sequential_added_ms": round(one_hook - one_echo, 3),
        "sequential_ratio_vs_echo": round(one_hook / one_echo, 2) if one_echo else None,
        "broad": _broad_figures(rounds),
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
        "held_server_p99_ms": round(https_load.percentile(held_server, 0.99), 3),
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


async def _ready(tmp: Path, size: workload.Size) -> dict[str, Any]:
    async with _servers(tmp, size) as s:
        memory = _rss_mb(s.hook.pid)
        cpu = _cpu_s(s.hook.pid)
    return {"workload": size.label, "overlays": size.overlays, "nodepools": size.pools,
            "time_to_ready_s": round(s.ready_s, 3), "cpu_to_ready_s": cpu,
            "rss_mb": memory.get("VmRSS"), "peak_rss_mb": memory.get("VmHWM")}


def _cpu_s(pid: int) -> float | None:
    """User and system CPU seconds the process has used (on a shared machine, what to compare: its wall time also
    counts the waits for a core)."""
    try:
        # The fields after the command name, which is in parentheses and may hold spaces.
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 2)


def run() -> dict[str, Any]:
    """The figures of record on the 2,000 / 20 workload, and the time to ready and memory at 10,000 / 100."""
    with tempfile.TemporaryDirectory(prefix="overlay-guard-bench-") as tmp:
        out = asyncio.run(_measure(Path(tmp)))
    with tempfile.TemporaryDirectory(prefix="overlay-guard-bench-") as tmp:
        out["large"] = asyncio.run(_ready(Path(tmp), LARGE))
    out["distinct"] = ready(DISTINCT)
    return out


def ready(sizes: tuple[workload.Size, ...]) -> list[dict[str, Any]]:
    """Time to ready and memory at each size (`python -m benchmarks.webhook_bench ready`)."""
    out = []
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="overlay-guard-bench-") as tmp:
            out.append(asyncio.run(_ready(Path(tmp), size)))
    return out


async def _quick(tmp: Path, rounds: int, seconds: float) -> dict[str, Any]:
    async with _servers(tmp) as s:
        await _warm(s)
        measured = [await _broad_round(s, r, seconds) for r in range(rounds)]
    return {"load_average": os.getloadavg()[0], "rounds": rounds, "round_s": seconds, "broad": _broad_figures(measured)}


def quick(rounds: int = 3, seconds: float = 4.0) -> dict[str, Any]:
    """Only the broad load against the echo handler (`python -m benchmarks.webhook_bench broad`): about
    half a minute, for iterating on the webhook's overhead; run() is the figure of record."""
    with tempfile.TemporaryDirectory(prefix="overlay-guard-bench-") as tmp:
        return asyncio.run(_quick(Path(tmp), rounds, seconds))


# Issue 38's row 5: the broad load at 2,000 / 20 with a distinct capacity field per capacity overlay, at this
# concurrency, against the tree before the rule consolidation.
VERSUS = workload.Size(2000, 20, distinct=True)
VERSUS_CONCURRENCY = 16


async def _versus(tmp: Path, trees: dict[str, Path], rounds: int, seconds: float) -> dict[str, Any]:
    """Each tree's webhook on VERSUS, all started before any load and pinned to core 0, loaded in turn
    within each round (the order rotating by round, so that drift in the machine's load falls on both):
    the broad load (a conflicting and a clean candidate alternating) and its conflicting candidates alone."""
    ctx, states, tls = _setup(tmp, VERSUS)
    mixed = _reviews(400, True, broad=True)
    conflicting = https_load.Shapes(mixed.templates[1::2], mixed.weights[1::2])
    servers: dict[str, tuple[subprocess.Popen[bytes], int, float]] = {}
    pinned = (os.cpu_count() or 1) >= 2 and hasattr(os, "sched_setaffinity")
    affinity = os.sched_getaffinity(0) if pinned else set()
    try:
        for name, root in trees.items():
            proc, port, spawned = _start(["-m", "webhook", *tls, "--metrics-port", "0", "--state", *states],
                                         tmp / f"{name}.log", root)
            servers[name] = (proc, port, spawned)
            await _wait_ready(f"https://127.0.0.1:{port}/readyz", ctx, proc, 300)
        if pinned:
            os.sched_setaffinity(0, {1})
        for name, (_, port, _) in servers.items():
            await https_load.load(port, ctx, mixed, f"warm{name}", 2.0, VERSUS_CONCURRENCY)
        measured: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
        names = list(trees)
        for r in range(rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                proc, port, _ = servers[name]
                load_before = os.getloadavg()[0]
                both = await https_load.load(port, ctx, mixed, f"m{name}{r}", seconds, VERSUS_CONCURRENCY,
                                             pid=proc.pid)
                alone = await https_load.load(port, ctx, conflicting, f"c{name}{r}", seconds, VERSUS_CONCURRENCY,
                                              pid=proc.pid)
                measured[name].append({"mixed": both, "conflicting": alone, "load": load_before})
    finally:
        if pinned:
            os.sched_setaffinity(0, affinity)
        _stop([proc for proc, _, _ in servers.values()])

    def med(xs: list[dict[str, Any]], key: str, field: str, digits: int = 1) -> float:
        return round(float(statistics.median(x[key][field] for x in xs)), digits)

    return {
        "workload": VERSUS.label, "concurrency": VERSUS_CONCURRENCY, "rounds": rounds, "round_s": seconds,
        "trees": {name: str(root) for name, root in trees.items()},
        "load_average": [round(x["load"], 1) for xs in measured.values() for x in xs],
        **{name: {
            "mixed_per_s": med(xs, "mixed", "per_s"), "mixed_p99_ms": med(xs, "mixed", "p99_ms"),
            "conflicting_per_s": med(xs, "conflicting", "per_s"),
            "conflicting_p50_ms": med(xs, "conflicting", "median_ms"),
            "conflicting_p99_ms": med(xs, "conflicting", "p99_ms"),
            # To the microsecond: the trees differ by a tenth of a millisecond, which tenths would hide.
            "mixed_cpu_ms": med(xs, "mixed", "server_cpu_ms", 3),
            "conflicting_cpu_ms": med(xs, "conflicting", "server_cpu_ms", 3),
            "rounds": [{"mixed_per_s": round(x["mixed"]["per_s"], 1), "mixed_p99_ms": round(x["mixed"]["p99_ms"], 1),
                        "mixed_cpu_ms": round(x["mixed"]["server_cpu_ms"], 3),
                        "conflicting_p99_ms": round(x["conflicting"]["p99_ms"], 1)} for x in xs],
            "failures": sum(x[k]["failures"] for x in xs for k in ("mixed", "conflicting")),
        } for name, xs in measured.items()},
    }


def versus(old: Path, rounds: int = 4, seconds: float = 6.0) -> dict[str, Any]:
    """This tree's webhook against the tree at `old` (e.g. an export of 26a1135^) on issue 38's row 5
    (`python -m benchmarks.webhook_bench versus OLD_TREE`)."""
    with tempfile.TemporaryDirectory(prefix="overlay-guard-bench-") as tmp:
        return asyncio.run(_versus(Path(tmp), {"this": ROOT, "old": old.resolve()}, rounds, seconds))


if __name__ == "__main__":
    if sys.argv[1:2] == ["broad"]:
        print(json.dumps(quick(), indent=2))
    elif sys.argv[1:2] == ["versus"] and len(sys.argv) == 3:
        print(json.dumps(versus(Path(sys.argv[2])), indent=2))
    elif sys.argv[1:2] == ["ready"]:
        print(json.dumps(ready(tuple(workload.Size.parse(a) for a in sys.argv[2:]) or DISTINCT), indent=2))
    else:
        print(json.dumps(run(), indent=2))
