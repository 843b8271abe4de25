"""A webhook that answers at once (`python -m benchmarks.echo`): the same TLS and framework as the
webhook, handlers that only parse the AdmissionReview and answer allowed: true. The webhook benchmark's
baseline, and the e2e latency test's (tests/e2e/test_latency.py), registered with the deployable
configurations in the webhook's place: so it serves both of their paths, /validate and /mutate.

/mutate adds one constant annotation under the webhook's prefix, so that a dry-run apply shows which
of the two answered; GET /admissions counts the reviews answered (plain text, for the e2e tests)."""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import ssl
import sys
from typing import Any

from aiohttp import web

from webhook.patch import escape

ANNOTATION = "overlay-guard.io/echo"


def _patch(ops: list[dict[str, Any]]) -> str:
    return base64.b64encode(json.dumps(ops).encode()).decode()


# A JSON Patch cannot add a member to a map that is absent: the whole map then (kubectl's applies
# always carry one, for last-applied-configuration; a bare POST may not).
_ADD_KEY = _patch([{"op": "add", "path": "/metadata/annotations/" + escape(ANNOTATION),
                    "value": "allowed"}])
_ADD_MAP = _patch([{"op": "add", "path": "/metadata/annotations", "value": {ANNOTATION: "allowed"}}])


def create_app() -> web.Application:
    answered = 0

    def review(uid: str, **answer: Any) -> web.Response:
        nonlocal answered
        answered += 1
        return web.json_response({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                  "response": {"uid": uid, "allowed": True, **answer}})

    async def validate(request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        return review(body["request"]["uid"])

    async def mutate(request: web.Request) -> web.Response:
        req = json.loads(await request.read())["request"]
        meta = (req.get("object") or {}).get("metadata") or {}
        patch = _ADD_KEY if isinstance(meta.get("annotations"), dict) else _ADD_MAP
        return review(req["uid"], patchType="JSONPatch", patch=patch)

    async def admissions(request: web.Request) -> web.Response:
        return web.Response(text=f"{answered}\n")

    app = web.Application(client_max_size=3 * 1024 * 1024)
    app.router.add_post("/validate", validate)
    app.router.add_post("/mutate", mutate)
    app.router.add_get("/admissions", admissions)
    return app


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--tls-cert-file")
    p.add_argument("--tls-private-key-file")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args(argv)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(args.tls_cert_file, args.tls_private_key_file)

    async def serve() -> None:
        runner = web.AppRunner(create_app(), access_log=None)
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
    raise SystemExit(main(sys.argv[1:]))
