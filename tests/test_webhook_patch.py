"""/mutate: the overlay-guard.io/ annotations as a JSON Patch, idempotent."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import aiohttp

from tests.webhook_support import apply_patch, fixture, fixture_state, overlay, review, serving
from webhook import patch

WANTED = {patch.STATUS: "Applied", patch.CELLS: "3", patch.IN_EFFECT: "price", patch.SHADOWED: ""}


def test_creates_annotations_when_absent() -> None:
    obj = overlay("a")
    ops = patch.operations(obj, WANTED)
    assert ops == [{"op": "add", "path": "/metadata/annotations", "value": WANTED}]
    assert patch.operations(apply_patch(obj, ops), WANTED) == []


def test_escapes_slashes_and_keeps_foreign_annotations() -> None:
    obj = overlay("a")
    obj["metadata"]["annotations"] = {
        "team.example.com/owner": "x",
        "overlay-guard.io/stale-key": "y",
        patch.STATUS: "Conflict",
    }
    ops = patch.operations(obj, WANTED)
    paths = [o["path"] for o in ops]
    assert "/metadata/annotations/overlay-guard.io~1stale-key" in paths
    assert "/metadata/annotations/overlay-guard.io~1status" in paths
    assert all(not p.endswith("owner") for p in paths)
    out = apply_patch(obj, ops)
    assert out["metadata"]["annotations"]["team.example.com/owner"] == "x"
    assert "overlay-guard.io/stale-key" not in out["metadata"]["annotations"]
    assert patch.operations(out, WANTED) == []


def test_tilde_and_missing_metadata() -> None:
    assert patch.escape("a~b/c") == "a~0b~1c"
    ops = patch.operations({"kind": "NodeOverlay"}, WANTED)
    assert apply_patch({"kind": "NodeOverlay"}, ops)["metadata"]["annotations"] == WANTED
    null_annotations = overlay("a")
    null_annotations["metadata"]["annotations"] = None
    assert (
        apply_patch(null_annotations, patch.operations(null_annotations, WANTED))["metadata"]["annotations"]
        == WANTED
    )


async def test_mutate_is_idempotent_over_https(tmp_path: Path) -> None:
    async with serving(tmp_path, fixture_state()) as srv, aiohttp.ClientSession() as session:
        body = fixture("mutate-create")
        _, out = await srv.post(session, "/mutate", body)
        resp = out["response"]
        assert resp["uid"] == body["request"]["uid"] and resp["allowed"] is True
        assert resp["patchType"] == "JSONPatch"
        ops = json.loads(base64.b64decode(resp["patch"]))
        once = apply_patch(body["request"]["object"], ops)
        notes = once["metadata"]["annotations"]
        assert notes[patch.STATUS] == "Applied"
        assert int(notes[patch.CELLS]) > 0 and int(notes[patch.OFFERINGS]) >= int(notes[patch.CELLS])
        assert notes[patch.IN_EFFECT] == "price" and notes[patch.SHADOWED] == ""
        # Reinvocation on its own output: nothing more to do.
        again = review(once, uid="second")
        _, out = await srv.post(session, "/mutate", again)
        assert "patch" not in out["response"] and out["response"]["allowed"] is True
        # /mutate never holds: a later validate of the same object is judged afresh.
        assert srv.cache.pending_count() == 0


async def test_mutate_reports_shadowed_and_conflict(tmp_path: Path) -> None:
    strong = overlay("strong", weight=50, price="1")
    async with serving(tmp_path, [strong]) as srv, aiohttp.ClientSession() as session:
        weak = overlay("weak", weight=5, price="2")
        _, out = await srv.post(session, "/mutate", review(weak))
        notes = apply_patch(weak, json.loads(base64.b64decode(out["response"]["patch"])))["metadata"][
            "annotations"
        ]
        assert notes[patch.STATUS] == "Applied" and notes[patch.SHADOWED] == "price"
        assert notes[patch.IN_EFFECT] == ""
        tie = overlay("tie", weight=50, price="3")
        _, out = await srv.post(session, "/mutate", review(tie))
        notes = apply_patch(tie, json.loads(base64.b64decode(out["response"]["patch"])))["metadata"][
            "annotations"
        ]
        assert notes[patch.STATUS] in ("Applied", "Conflict")
        assert out["response"]["allowed"] is True  # /mutate annotates, /validate decides


async def test_mutate_of_a_generate_name_create(tmp_path: Path) -> None:
    """Mutating admission runs before the API server picks the name."""
    async with serving(tmp_path, fixture_state()) as srv, aiohttp.ClientSession() as session:
        obj = overlay("placeholder", weight=30, price="1")
        body = review(obj)
        obj["metadata"] = {"generateName": "gpu-"}
        body["request"]["object"] = obj
        body["request"]["name"] = ""
        _, out = await srv.post(session, "/mutate", body)
        resp = out["response"]
        assert resp["allowed"] is True and resp["patchType"] == "JSONPatch"
        notes = apply_patch(obj, json.loads(base64.b64decode(resp["patch"])))["metadata"]["annotations"]
        assert notes[patch.STATUS] == "Applied"


async def test_mutate_names_the_least_allocatable_memory(tmp_path: Path) -> None:
    """The annotation's figures are the whole effective capacity's: a stored overlay's hugepages count too."""
    stored = overlay("stored-1gi", family="c5")
    stored["spec"]["capacity"] = {"hugepages-1Gi": "1Gi"}
    async with serving(tmp_path, [stored]) as srv, aiohttp.ClientSession() as session:
        added = overlay("added-2mi", family="c5")
        added["spec"]["capacity"] = {"hugepages-2Mi": "1Gi"}
        _, out = await srv.post(session, "/mutate", review(added))
        notes = apply_patch(added, json.loads(base64.b64decode(out["response"]["patch"])))["metadata"][
            "annotations"
        ]
        # c5.large: 3114Mi less 2Gi of hugepages.
        assert notes[patch.MEMORY] == ("1066Mi allocatable of 3114Mi capacity less 2Gi hugepages on "
                                       "nodepool default, instance type c5.large")
        priced = overlay("priced", family="c5", price="1")
        _, out = await srv.post(session, "/mutate", review(priced))
        notes = apply_patch(priced, json.loads(base64.b64decode(out["response"]["patch"])))["metadata"][
            "annotations"
        ]
        assert patch.MEMORY not in notes
