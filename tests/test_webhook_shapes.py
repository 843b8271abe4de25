"""request.object of any shape: an AdmissionReview answer (a denial with a reason for a NodeOverlay
that is malformed or that the API server's schema refuses), never a 5xx; the server keeps serving."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from simulation.validation import crds
from tests.webhook_support import fixture_state, overlay, review, serving

BASE = overlay("shape", price="1")


def _with(path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    obj = copy.deepcopy(BASE)
    target: Any = obj
    for p in path[:-1]:
        target = target[p]
    target[path[-1]] = value
    return obj


# request.object -> (denied with code 400 as malformed, or by the schema check: words in the reason)
CASES: dict[str, tuple[dict[str, Any], int, tuple[str, ...]]] = {
    "kind a list": (_with(("kind",), ["NodeOverlay"]), 400, ("request.object.kind", "list")),
    "kind a mapping": (_with(("kind",), {"a": 1}), 400, ("request.object.kind", "object")),
    "apiVersion a number": (_with(("apiVersion",), 1), 400, ("request.object.apiVersion",)),
    "metadata a list": (_with(("metadata",), [1]), 400, ("request.object.metadata", "list")),
    "metadata a string": (_with(("metadata",), "x"), 400, ("request.object.metadata", "string")),
    "name a list": (_with(("metadata", "name"), ["x"]), 400, ("request.object.metadata.name", "list")),
    "name a number": (_with(("metadata", "name"), 5), 400, ("request.object.metadata.name",)),
    "name a boolean": (_with(("metadata", "name"), True), 400, ("request.object.metadata.name", "boolean")),
    "spec a list": (_with(("spec",), [1]), 403, ("spec",)),
    "spec a string": (_with(("spec",), "x"), 403, ("spec",)),
    "requirements a string": (_with(("spec", "requirements"), "x"), 403, ("spec.requirements",)),
    "requirement a list": (_with(("spec", "requirements"), [[1]]), 403, ("spec.requirements[0]",)),
    "values a mapping": (_with(("spec", "requirements", 0, "values"), {"a": 1}), 403,
                         ("spec.requirements[0].values",)),
    "value a boolean": (_with(("spec", "requirements", 0, "values"), [True]), 403,
                        ("spec.requirements[0].values[0]",)),
    "weight a string": (_with(("spec", "weight"), "10"), 403, ("spec.weight",)),
    "weight a float": (_with(("spec", "weight"), 1.5), 403, ("spec.weight",)),
    "weight huge": (_with(("spec", "weight"), 10**40), 403, ("spec.weight",)),
    "price a mapping": (_with(("spec", "price"), {"a": 1}), 403, ("spec.price",)),
    "capacity a list": (_with(("spec", "capacity"), [1]), 403, ("spec.capacity",)),
    "capacity value a list": (_with(("spec", "capacity"), {"example.com/r": [1]}), 403, ("spec.capacity",)),
    "labels a list": (_with(("metadata", "labels"), [1]), 403, ("metadata.labels",)),
    "dynamicResources a list": (_with(("spec", "dynamicResources"), [1]), 403, ("spec.dynamicResources",)),
    "templates a mapping": (_with(("spec", "dynamicResources"), {"resourceSliceTemplates": {"a": 1}}), 403,
                            ("resourceSliceTemplates",)),
}


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
async def test_every_shape_gets_an_answer(tmp_path: Path, operation: str) -> None:
    # The DRA-extended CRD, so that the shapes inside spec.dynamicResources are checked.
    async with serving(tmp_path, fixture_state(), crd=crds.dra()) as srv, aiohttp.ClientSession() as session:
        for label, (obj, code, words) in CASES.items():
            # An UPDATE from a well-formed version, so the ratchet does not excuse the new errors.
            body = review(BASE, operation, old=BASE if operation == "UPDATE" else None)
            body["request"]["object"] = obj
            status, out = await srv.post(session, "/validate", body)
            assert status == 200, (label, status, out)
            response = out["response"]
            assert response["uid"] == body["request"]["uid"], label
            assert response["allowed"] is False, (label, response)
            assert response["status"]["code"] == code, (label, response)
            for word in words:
                assert word in response["status"]["message"], (label, response)
            status, out = await srv.post(session, "/mutate", body)
            assert status == 200 and out["response"]["allowed"] is True, (label, status, out)
            if code == 400:
                assert "patch" not in out["response"], label
        async with session.get(srv.url + "/healthz", ssl=srv.ssl) as r:
            assert r.status == 200


async def test_a_malformed_old_object_is_no_5xx(tmp_path: Path) -> None:
    async with serving(tmp_path, fixture_state()) as srv, aiohttp.ClientSession() as session:
        for label, (obj, _, _) in CASES.items():
            body = review(BASE, "UPDATE", old=BASE)
            body["request"]["oldObject"] = obj
            for path in ("/validate", "/mutate"):
                status, out = await srv.post(session, path, body)
                assert status == 200 and out["response"]["uid"] == body["request"]["uid"], (label, path, out)
