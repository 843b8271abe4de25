"""benchmarks/echo.py: allowed at once on both paths, its /mutate annotation applicable whether or not the
object has annotations, and every review counted (tests/e2e/_echo.py registers it in the guard's place)."""

from __future__ import annotations

import base64
import json
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from benchmarks import echo
from tests.webhook_support import apply_patch, overlay, review


async def _post(client: TestClient[Any, Any], path: str, body: dict[str, Any]) -> dict[str, Any]:
    resp = await client.post(path, data=json.dumps(body), headers={"Content-Type": "application/json"})
    assert resp.status == 200
    answer = (await resp.json())["response"]
    assert answer["uid"] == body["request"]["uid"] and answer["allowed"] is True
    return dict(answer)


async def test_both_paths_allow_and_mutate_marks_the_object() -> None:
    bare = overlay("a")
    annotated = overlay("b")
    annotated["metadata"]["annotations"] = {"team.example.com/owner": "x"}
    async with TestClient(TestServer(echo.create_app())) as client:
        assert "patch" not in await _post(client, "/validate", review(bare))
        for obj in (bare, annotated):
            answer = await _post(client, "/mutate", review(obj))
            assert answer["patchType"] == "JSONPatch"
            out = apply_patch(obj, json.loads(base64.b64decode(answer["patch"])))
            assert out["metadata"]["annotations"] == {**(obj["metadata"].get("annotations") or {}),
                                                      echo.ANNOTATION: "allowed"}
        counted = await client.get("/admissions")
        assert (await counted.text()).strip() == "3"
