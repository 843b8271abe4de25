"""Shared helpers of the webhook tests (no tests here): PKI from certs/, AdmissionReviews
shaped as kube-apiserver sends them, an in-process HTTPS server and a subprocess server."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import functools
import json
import os
import signal
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from certs import generate
from simulation import evaluate as ev
from simulation.semantics import catalog as cat
from simulation.semantics import model
from simulation.validation import crds
from webhook import loader
from webhook.app import create_app
from webhook.config import Config, Mode
from webhook.state import Cache
from webhook.tls import ReloadingContext

ROOT = Path(__file__).resolve().parent.parent
ADMISSION = Path(__file__).resolve().parent / "admission"
PLURALS = {model.NODEOVERLAY: ("v1alpha1", "nodeoverlays"), model.NODEPOOL: ("v1", "nodepools")}


@functools.cache
def default_catalog() -> cat.Catalog:
    return cat.default()


def fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ADMISSION / f"{name}.json").read_text())
    return data


def fixture_state() -> list[Mapping[str, Any]]:
    return loader.state_objects([ADMISSION / "state.yaml"])


@dataclasses.dataclass(frozen=True)
class Pki:
    dir: Path
    ca: Path
    cert: Path
    key: Path


def make_pki(directory: Path) -> Pki:
    generate.write_bundle(directory, "overlay-guard")
    return Pki(directory, directory / "ca.crt", directory / "tls.crt", directory / "tls.key")


def client_context(ca: Path, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    """Verifies the server against the generated CA, as the API server does with caBundle."""
    ctx = ssl.create_default_context(cafile=str(ca))
    if cert is not None and key is not None:
        ctx.load_cert_chain(str(cert), str(key))
    return ctx


def overlay(
    name: str,
    *,
    weight: int | None = None,
    family: str = "p5",
    price: str | None = None,
    adjustment: str | None = None,
    extra: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "requirements": [
            {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": [family]},
            *extra,
        ]
    }
    if weight is not None:
        spec["weight"] = weight
    if price is not None:
        spec["price"] = price
    if adjustment is not None:
        spec["priceAdjustment"] = adjustment
    return {
        "apiVersion": model.OVERLAY_API,
        "kind": model.NODEOVERLAY,
        "metadata": {"name": name},
        "spec": spec,
    }


def nodepool(name: str, labels: Mapping[str, str] | None = None, weight: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "template": {"metadata": {"labels": dict(labels or {})}, "spec": {"requirements": []}}
    }
    if weight is not None:
        spec["weight"] = weight
    return {
        "apiVersion": model.NODEPOOL_API,
        "kind": model.NODEPOOL,
        "metadata": {"name": name},
        "spec": spec,
    }


def review(
    obj: Mapping[str, Any] | None,
    operation: str = "CREATE",
    *,
    old: Mapping[str, Any] | None = None,
    uid: str | None = None,
    dry_run: bool = False,
) -> dict[str, Any]:
    """An AdmissionReview as kube-apiserver builds it for a cluster-scoped custom resource."""
    subject = obj if obj is not None else old
    assert subject is not None
    kind = str(subject["kind"])
    version, plural = PLURALS.get(kind, ("v1", kind.lower() + "s"))
    gvk = {"group": "karpenter.sh", "version": version, "kind": kind}
    gvr = {"group": "karpenter.sh", "version": version, "resource": plural}
    options = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}[operation]
    return {
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": uid or str(uuid.uuid4()),
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": subject["metadata"]["name"],
            "operation": operation,
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:authenticated"]},
            "object": copy.deepcopy(obj),
            "oldObject": copy.deepcopy(old),
            "dryRun": dry_run,
            "options": {"kind": options, "apiVersion": "meta.k8s.io/v1"},
        },
    }


def linter_verdict(
    candidate: Mapping[str, Any], state: Sequence[Mapping[str, Any]], catalog: cat.Catalog,
    crd: crds.Crd | None = None,
) -> ev.Report:
    """What `overlay-lint check C --existing S --all-nodepools [--crd]` computes: the webhook's cache holds every
    NodePool."""
    prepared = ev.prepare([ev.Document(o, i, False) for i, o in enumerate(state)], catalog, crd=crd,
                          every_nodepool=True)
    return ev.evaluate([ev.Document(candidate, 0)], prepared)


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def apply_patch(doc: dict[str, Any], ops: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """RFC 6902 add/remove on objects: all the webhook ever emits. Strict: a path whose parent
    is missing fails, as it would in the API server."""
    out = copy.deepcopy(doc)
    for op in ops:
        assert op["op"] in ("add", "remove"), op
        parts = [_unescape(p) for p in op["path"].split("/")[1:]]
        target: Any = out
        for p in parts[:-1]:
            assert isinstance(target, dict) and p in target, f"missing parent for {op['path']}"
            target = target[p]
        assert isinstance(target, dict)
        if op["op"] == "add":
            target[parts[-1]] = copy.deepcopy(op["value"])
        else:
            assert parts[-1] in target, f"remove of a missing member {op['path']}"
            del target[parts[-1]]
    return out


@dataclasses.dataclass
class Server:
    url: str
    cache: Cache
    pki: Pki
    tls: ReloadingContext
    ssl: ssl.SSLContext

    async def post(
        self, session: aiohttp.ClientSession, path: str, body: Any, headers: Mapping[str, str] | None = None
    ) -> tuple[int, Any]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        async with session.post(
            self.url + path,
            data=data,
            ssl=self.ssl,
            headers=headers if headers is not None else {"Content-Type": "application/json"},
        ) as resp:
            text = await resp.text()
            try:
                return resp.status, json.loads(text)
            except ValueError:
                return resp.status, text


@contextlib.asynccontextmanager
async def serving(
    tmp: Path,
    objects: Sequence[Mapping[str, Any]],
    *,
    catalog: cat.Catalog | None = None,
    mode: Mode = "enforce",
    after: float | None = None,
    client_ca: Path | None = None,
    pki: Pki | None = None,
    crd: crds.Crd | None = None,
    wall: Callable[[], float] = time.time,
) -> AsyncIterator[Server]:
    """The real app over real TLS on 127.0.0.1, state loaded as `--state` would (`crd`: as `--crd` pins; `wall`:
    the clock the ledger's deadlines are read on, which a test may move instead of sleeping)."""
    keys = pki or make_pki(tmp / "pki")
    cache = Cache(debounce=0.01, after=after, wall=wall)
    cache.set_catalog(catalog or default_catalog(), crd)
    cache.load(objects)
    await cache.start()
    assert await cache.wait_ready(30), "the cache did not become ready"
    config = Config(
        tls_cert_file=keys.cert,
        tls_private_key_file=keys.key,
        host="127.0.0.1",
        port=0,
        mode=mode,
        client_ca=client_ca,
    )
    tls = ReloadingContext(keys.cert, keys.key, client_ca)
    runner = web.AppRunner(create_app(config, cache), access_log=None, shutdown_timeout=5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls.context, backlog=2048)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield Server(f"https://127.0.0.1:{port}", cache, keys, tls, client_context(keys.ca))
    finally:
        await runner.cleanup()
        await cache.close()


class Process:
    """`python -m webhook` as a subprocess, for signals and the real CLI."""

    def __init__(self, args: Sequence[str], log: Path) -> None:
        self.log = log
        self._fh = log.open("wb")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "webhook", *args],
            cwd=ROOT,
            env=env,
            stdout=self._fh,
            stderr=subprocess.STDOUT,
        )
        self.port = 0
        self.metrics_port = 0

    def lines(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                out.append({"unparsed": line})
        return out

    async def wait_for(self, message: str, timeout: float = 20.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.lines():
                if line.get("msg") == message:
                    return line
            if self.proc.poll() is not None:
                raise AssertionError(f"webhook exited {self.proc.returncode}:\n{self.log.read_text()}")
            await asyncio.sleep(0.05)
        raise AssertionError(f"no {message!r} log line within {timeout}s:\n{self.log.read_text()}")

    async def start(self) -> Process:
        listening = await self.wait_for("listening")
        self.port, self.metrics_port = int(listening["port"]), int(listening["metricsPort"])
        return self

    def signal(self, sig: int = signal.SIGTERM) -> None:
        self.proc.send_signal(sig)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._fh.close()
        return self.proc.returncode


def server_args(pki: Pki, *extra: str) -> list[str]:
    return [
        "--tls-cert-file",
        str(pki.cert),
        "--tls-private-key-file",
        str(pki.key),
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--metrics-port",
        "0",
        *extra,
    ]


# --- the audit without a cluster (tests/test_audit.py, tests/test_monitoring.py) ---------------------------

P5 = [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["gpu"]}]


class FakeEvents:
    def __init__(self) -> None:
        self.created: dict[str, Mapping[str, Any]] = {}
        self.patched: list[tuple[str, Mapping[str, Any]]] = []
        self.fail = False

    async def create(self, body: Mapping[str, Any]) -> bool:
        if self.fail:
            raise RuntimeError("API server unavailable")
        name = body["metadata"]["name"]
        if name in self.created:
            return False
        self.created[name] = body
        return True

    async def patch(self, name: str, body: Mapping[str, Any]) -> None:
        self.patched.append((name, body))


async def cache_of(*objects: Mapping[str, Any]) -> Cache:
    cache = Cache(debounce=0)
    cache.set_catalog(default_catalog())
    cache.load(objects)
    await cache.rebuild()
    return cache


CONFLICTING = (nodepool("gpu"), overlay("a", price="1", extra=P5), overlay("b", price="2", extra=P5))
