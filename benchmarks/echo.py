"""The webhook benchmark's baseline (`python -m benchmarks.echo`): the same TLS and framework as the
webhook, a handler that only parses the AdmissionReview and echoes allowed: true."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import ssl
import sys

from aiohttp import web


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
    raise SystemExit(main(sys.argv[1:]))
