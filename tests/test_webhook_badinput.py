"""Bad requests get a clear HTTP error or denial, never a crash; the server keeps serving."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.webhook_support import Server, fixture_state, overlay, review, serving

JSON = {"Content-Type": "application/json"}
MIB = 1024 * 1024


def _without_uid() -> dict[str, Any]:
    body = review(overlay("a"))
    del body["request"]["uid"]
    return body


def _with(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    body = review(overlay("a"))
    target: Any = body
    for p in path[:-1]:
        target = target[p]
    target[path[-1]] = value
    return body


BAD: list[tuple[str, bytes, dict[str, str], int]] = [
    ("wrong content type", json.dumps(review(overlay("a"))).encode(), {"Content-Type": "text/plain"}, 415),
    ("no content type", json.dumps(review(overlay("a"))).encode(), {}, 415),
    ("empty body", b"", JSON, 400),
    ("malformed JSON", b'{"apiVersion": "admission.k8s.io/v1", "kind": ', JSON, 400),
    ("not UTF-8", b"\xff\xfe{}", JSON, 400),
    ("JSON array", b"[]", JSON, 400),
    ("deeply nested", b"[" * 100_000 + b"]" * 100_000, JSON, 400),
    ("missing uid", json.dumps(_without_uid()).encode(), JSON, 400),
    ("empty uid", json.dumps(_with(("request", "uid"), "")).encode(), JSON, 400),
    (
        "no request",
        json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
        JSON,
        400,
    ),
    ("v1beta1", json.dumps(_with(("apiVersion",), "admission.k8s.io/v1beta1")).encode(), JSON, 400),
    ("unknown operation", json.dumps(_with(("request", "operation"), "PATCH")).encode(), JSON, 400),
]


async def _alive(srv: Server, session: aiohttp.ClientSession) -> None:
    async with session.get(srv.url + "/healthz", ssl=srv.ssl) as r:
        assert r.status == 200


@pytest.mark.parametrize("endpoint", ["/validate", "/mutate"])
async def test_bad_requests(tmp_path: Path, endpoint: str) -> None:
    async with serving(tmp_path, fixture_state()) as srv, aiohttp.ClientSession() as session:
        for label, body, headers, want in BAD:
            status, out = await srv.post(session, endpoint, body, headers=headers)
            assert status == want, (label, status, out)
            assert isinstance(out, dict) and out.get("error"), (label, out)
        await _alive(srv, session)


async def test_oversized_body_is_refused(tmp_path: Path) -> None:
    async with serving(tmp_path, fixture_state()) as srv, aiohttp.ClientSession() as session:
        big = review(overlay("a"))
        big["request"]["object"]["metadata"]["annotations"] = {"x": "y" * (3 * MIB)}
        status, out = await srv.post(session, "/validate", json.dumps(big).encode())
        assert status == 413 and "exceeds" in out["error"]

        async def chunks() -> Any:  # no Content-Length: the limit must hold while streaming
            for _ in range(4):
                yield b" " * MIB

        async with session.post(srv.url + "/validate", data=chunks(), headers=JSON, ssl=srv.ssl) as r:
            assert r.status == 413
        # Just under the limit is read and judged.
        fits = review(overlay("a", price="1"))
        fits["request"]["object"]["metadata"]["annotations"] = {"x": "y" * (3 * MIB - 4096)}
        status, out = await srv.post(session, "/validate", json.dumps(fits).encode())
        assert status == 200 and out["response"]["allowed"] in (True, False)
        await _alive(srv, session)


async def test_shape_errors_inside_a_valid_review_are_denials(tmp_path: Path) -> None:
    async with serving(tmp_path, fixture_state()) as srv, aiohttp.ClientSession() as session:
        body = review(overlay("a"))
        body["request"]["object"] = None
        status, out = await srv.post(session, "/validate", body)
        assert status == 200 and out["response"]["allowed"] is False
        assert out["response"]["status"]["code"] == 400
        # A garbage object is the core's problem, and the core reports it (no 500).
        body = review(overlay("a"))
        body["request"]["object"] = {
            "kind": "NodeOverlay",
            "metadata": {"name": "a"},
            "spec": [1, {"x": None}],
        }
        status, out = await srv.post(session, "/validate", body)
        assert status == 200 and out["response"]["uid"] == body["request"]["uid"]
        status, out = await srv.post(session, "/mutate", body)
        assert status == 200 and out["response"]["allowed"] is True


async def test_wrong_methods_and_paths(tmp_path: Path) -> None:
    async with serving(tmp_path, fixture_state()) as srv, aiohttp.ClientSession() as session:
        async with session.get(srv.url + "/validate", ssl=srv.ssl) as r:
            assert r.status == 405
        async with session.post(srv.url + "/nope", data=b"{}", headers=JSON, ssl=srv.ssl) as r:
            assert r.status == 404
        await _alive(srv, session)
