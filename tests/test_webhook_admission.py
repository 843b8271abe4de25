"""AdmissionReview decisions over real HTTPS (generated CA, verified certificates), with the
fixtures in tests/admission/ shaped as kube-apiserver sends them."""

from __future__ import annotations

import copy
import json
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from simulation import findings
from tests.webhook_support import (
    client_context,
    default_catalog,
    fixture,
    fixture_state,
    linter_verdict,
    make_pki,
    nodepool,
    overlay,
    review,
    serving,
)
from webhook.app import create_app
from webhook.config import Config
from webhook.state import Cache
from webhook.tls import ReloadingContext


def answer(body: Any) -> dict[str, Any]:
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    resp: dict[str, Any] = body["response"]
    return resp


def audit_rows(resp: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    rows = json.loads(resp["auditAnnotations"]["findings"])
    return sorted((r["code"], r["severity"], r["object"], r["field"]) for r in rows)


def linter_rows(report: Any) -> list[tuple[str, str, str, str]]:
    return sorted((f.code, str(f.severity), str(f.obj), f.field) for f in report.findings)


def assert_short(warnings: list[str]) -> None:
    for w in warnings:
        assert len(w.encode()) < 256 and "\n" not in w, w


async def test_create_conflict_is_denied_with_a_useful_message(tmp_path: Path) -> None:
    async with serving(tmp_path, fixture_state()) as srv, aiohttp.ClientSession() as session:
        body = fixture("create-conflict")
        status, out = await srv.post(session, "/validate", body)
        resp = answer(out)
        assert status == 200 and resp["uid"] == body["request"]["uid"]
        assert resp["allowed"] is False
        st = resp["status"]
        assert st["code"] == 403 and st["reason"] == "Forbidden" and st["status"] == "Failure"
        message = st["message"]
        for needle in ("same-weight-conflict", "gpu-discount", "gpu-price", "weight 10", "nodepool ", "p5."):
            assert needle in message, (needle, message)
        assert srv.cache.pending_count() == 0  # denied: nothing held


async def test_create_ok_is_allowed_and_held(tmp_path: Path) -> None:
    async with serving(tmp_path, fixture_state()) as srv, aiohttp.ClientSession() as session:
        _, out = await srv.post(session, "/validate", fixture("create-ok"))
        resp = answer(out)
        assert resp["allowed"] is True and "status" not in resp
        assert_short(resp.get("warnings", []))
        assert srv.cache.pending_count() == 1


async def test_dry_run_same_verdict_without_side_effects(tmp_path: Path) -> None:
    async with serving(tmp_path, fixture_state()) as srv, aiohttp.ClientSession() as session:
        _, dry = await srv.post(session, "/validate", fixture("create-conflict-dryrun"))
        _, real = await srv.post(session, "/validate", fixture("create-conflict"))
        assert answer(dry)["allowed"] is answer(real)["allowed"] is False
        assert answer(dry)["status"]["message"] == answer(real)["status"]["message"]
        _, ok = await srv.post(session, "/validate", fixture("create-dryrun"))
        assert answer(ok)["allowed"] is True
        assert srv.cache.pending_count() == 0


async def test_update_replaces_the_old_version(tmp_path: Path) -> None:
    async with serving(tmp_path, fixture_state()) as srv, aiohttp.ClientSession() as session:
        _, out = await srv.post(session, "/validate", fixture("update"))
        assert answer(out)["allowed"] is True
        _, out = await srv.post(session, "/validate", fixture("update-conflict"))
        resp = answer(out)
        assert resp["allowed"] is False and "gpu-discount" in resp["status"]["message"]


async def test_update_ratchets_errors_the_old_version_had(tmp_path: Path) -> None:
    a, b = overlay("a", weight=7, price="1"), overlay("b", weight=7, price="2")
    async with serving(tmp_path, [nodepool("p"), a, b]) as srv, aiohttp.ClientSession() as session:
        edited = copy.deepcopy(a)
        edited["metadata"]["labels"] = {"owner": "finance"}
        edited["spec"]["price"] = "1.5"
        _, out = await srv.post(session, "/validate", review(edited, "UPDATE", old=a))
        resp = answer(out)
        assert resp["allowed"] is True
        assert ("same-weight-conflict", "warning", "NodeOverlay/a", "spec.price") in audit_rows(resp)
        assert any("same-weight-conflict" in w for w in resp["warnings"])
        # A genuinely new error is still denied on UPDATE.
        moved = overlay("b", weight=9, price="3")
        c = overlay("c", weight=9, price="4")
        await srv.post(session, "/validate", review(c))
        _, out = await srv.post(session, "/validate", review(moved, "UPDATE", old=b))
        assert answer(out)["allowed"] is False


async def test_update_against_a_stale_cache_uses_old_object(tmp_path: Path) -> None:
    """The cache still has v1 of `a`; the API server says the stored version is v2."""
    v1, other = overlay("a", weight=7, price="1"), overlay("b", weight=7, price="2")
    v2 = overlay("a", weight=3, price="1")
    v3 = overlay("a", weight=7, price="5")
    async with serving(tmp_path, [nodepool("p"), v1, other]) as srv, aiohttp.ClientSession() as session:
        _, out = await srv.post(session, "/validate", review(v3, "UPDATE", old=v2, dry_run=True))
        resp = answer(out)
        expected = linter_verdict(v3, [nodepool("p"), v2, other], default_catalog())
        assert audit_rows(resp) == linter_rows(expected)
        # v2 had no conflict, so the one v3 brings back is new: denied, not ratcheted.
        assert resp["allowed"] is False


async def test_delete_is_allowed(tmp_path: Path) -> None:
    async with serving(tmp_path, fixture_state()) as srv, aiohttp.ClientSession() as session:
        _, out = await srv.post(session, "/validate", fixture("delete"))
        resp = answer(out)
        assert resp == {"uid": fixture("delete")["request"]["uid"], "allowed": True}


async def test_nodepool_changes_are_never_denied_but_warn(tmp_path: Path) -> None:
    async with serving(tmp_path, fixture_state()) as srv, aiohttp.ClientSession() as session:
        _, out = await srv.post(session, "/validate", fixture("nodepool-create"))
        resp = answer(out)
        assert resp["allowed"] is True
        warnings = resp["warnings"]
        assert_short(warnings)
        text = " ".join(warnings)
        assert "same-weight-conflict" in text and "gpu2-price" in text and "ml-price" in text
        _, out = await srv.post(session, "/validate", fixture("nodepool-update"))
        resp = answer(out)
        assert resp["allowed"] is True
        assert not any("same-weight-conflict" in w for w in resp.get("warnings", []))


async def test_warn_mode_allows_with_errors_as_warnings(tmp_path: Path) -> None:
    async with serving(tmp_path, fixture_state(), mode="warn") as srv, aiohttp.ClientSession() as session:
        _, out = await srv.post(session, "/validate", fixture("create-conflict"))
        resp = answer(out)
        assert resp["allowed"] is True and "status" not in resp
        assert any("same-weight-conflict" in w and "warn mode" in w for w in resp["warnings"])
        assert_short(resp["warnings"])
        assert srv.cache.pending_count() == 1  # it will be stored, so it is held


async def test_fixture_verdicts_equal_the_linter(tmp_path: Path) -> None:
    state = fixture_state()
    async with serving(tmp_path, state) as srv, aiohttp.ClientSession() as session:
        for name in ("create-conflict-dryrun", "create-dryrun"):
            body = fixture(name)
            _, out = await srv.post(session, "/validate", body)
            resp = answer(out)
            expected = linter_verdict(body["request"]["object"], state, default_catalog())
            assert audit_rows(resp) == linter_rows(expected)
            assert resp["allowed"] is (not expected.errors())


async def test_unknown_kinds_and_subresources_are_allowed(tmp_path: Path) -> None:
    async with serving(tmp_path, fixture_state()) as srv, aiohttp.ClientSession() as session:
        body = review(overlay("x"))
        body["request"]["kind"] = {"group": "apps", "version": "v1", "kind": "Deployment"}
        _, out = await srv.post(session, "/validate", body)
        resp = answer(out)
        assert resp["allowed"] is True and "not a kind overlay-guard checks" in resp["warnings"][0]
        body = review(overlay("x", weight=10, price="1"), "UPDATE", old=overlay("x"))
        body["request"]["subResource"] = "status"
        _, out = await srv.post(session, "/validate", body)
        assert answer(out) == {"uid": body["request"]["uid"], "allowed": True}


async def test_warnings_stay_under_256_bytes(tmp_path: Path) -> None:
    long = "x" * 60
    many = [overlay(f"{long}-{i:02d}", weight=3, price=str(i + 1)) for i in range(30)]
    candidate = overlay(f"{long}-candidate", weight=3, price="99")
    async with (
        serving(tmp_path, [nodepool("p"), *many], mode="warn") as srv,
        aiohttp.ClientSession() as session,
    ):
        _, out = await srv.post(session, "/validate", review(candidate, dry_run=True))
        resp = answer(out)
        assert resp["allowed"] is True and len(resp["warnings"]) <= 20
        assert_short(resp["warnings"])
        assert "more" in resp["warnings"][-1]


async def test_not_ready_denies_overlays_and_allows_the_rest(tmp_path: Path) -> None:
    keys = make_pki(tmp_path)
    cache = Cache()
    cache.expect(["NodeOverlay", "NodePool"])  # a source that never syncs
    config = Config(tls_cert_file=keys.cert, tls_private_key_file=keys.key, ready_wait=0.1)
    from aiohttp import web

    runner = web.AppRunner(create_app(config, cache), access_log=None)
    await runner.setup()
    tls = ReloadingContext(keys.cert, keys.key)
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls.context)
    await site.start()
    url = f"https://127.0.0.1:{runner.addresses[0][1]}"
    ctx = client_context(keys.ca)
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(url + "/readyz", ssl=ctx) as r:
                assert r.status == 503
            async with session.get(url + "/healthz", ssl=ctx) as r:
                assert r.status == 200
            async with session.post(url + "/validate", json=review(overlay("a", price="1")), ssl=ctx) as r:
                resp = answer(await r.json())
                assert resp["allowed"] is False and resp["status"]["code"] == 503
            async with session.post(url + "/validate", json=review(nodepool("p")), ssl=ctx) as r:
                assert answer(await r.json())["allowed"] is True
            async with session.post(url + "/mutate", json=review(overlay("a", price="1")), ssl=ctx) as r:
                resp = answer(await r.json())
                assert resp["allowed"] is True and "patch" not in resp
    finally:
        await runner.cleanup()


async def test_client_ca_is_required_when_configured(tmp_path: Path) -> None:
    keys = make_pki(tmp_path / "server")
    from certs import generate

    ca_cert, ca_key = generate.new_ca("apiserver-client-ca")
    cert, key = generate.issue_client(ca_cert, ca_key, "kube-apiserver")
    (tmp_path / "client-ca.crt").write_bytes(generate.cert_pem(ca_cert))
    (tmp_path / "client.crt").write_bytes(generate.cert_pem(cert))
    (tmp_path / "client.key").write_bytes(generate.key_pem(key))
    async with serving(tmp_path, fixture_state(), pki=keys, client_ca=tmp_path / "client-ca.crt") as srv:
        good = client_context(keys.ca, tmp_path / "client.crt", tmp_path / "client.key")
        async with aiohttp.ClientSession() as session:
            async with session.get(srv.url + "/healthz", ssl=good) as r:
                assert r.status == 200
            with pytest.raises(aiohttp.ClientError):
                async with session.get(srv.url + "/healthz", ssl=srv.ssl) as r:
                    await r.read()


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion:DeprecationWarning")
async def test_tls_below_1_2_is_refused(tmp_path: Path) -> None:
    async with serving(tmp_path, fixture_state()) as srv:
        old = client_context(srv.pki.ca)
        old.minimum_version = ssl.TLSVersion.TLSv1
        old.maximum_version = ssl.TLSVersion.TLSv1_1
        async with aiohttp.ClientSession() as session:
            with pytest.raises(aiohttp.ClientError):
                async with session.get(srv.url + "/healthz", ssl=old) as r:
                    await r.read()
            async with session.get(srv.url + "/healthz", ssl=srv.ssl) as r:
                assert r.status == 200


def test_denial_message_names_the_other_object() -> None:
    from webhook import verdict

    me, other = findings.ObjectRef("NodeOverlay", "a"), findings.ObjectRef("NodeOverlay", "b")
    f = findings.make(
        "same-weight-conflict",
        other,
        ("spec", "price"),
        "NodeOverlay b and a both set price",
        related=[me],
        witness=findings.Witness("default", "m5.large"),
    )
    text = verdict.denial(me, [f])
    assert "NodeOverlay/b spec.price" in text and "m5.large" in text
    assert verdict.clip("é" * 300).endswith("…") and len(verdict.clip("é" * 300).encode()) <= 255


async def test_update_of_a_pending_object(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """kubectl apply, edit, apply again before the watch delivered the first version."""
    import webhook.state

    async with serving(tmp_path, fixture_state()) as srv, aiohttp.ClientSession() as session:
        v1 = overlay("fresh", weight=33, price="1")
        _, out = await srv.post(session, "/validate", review(v1))
        assert answer(out)["allowed"] is True and srv.cache.pending_count() == 1
        v2 = overlay("fresh", weight=33, price="2")
        _, out = await srv.post(session, "/validate", review(v2, "UPDATE", old=v1))
        resp = answer(out)
        assert resp["allowed"] is True and not any("ratcheted" in w for w in resp.get("warnings", []))
        # A rebuild slower than the wait: judged as a create (stricter), and said so.
        monkeypatch.setattr(webhook.state, "REBASE_WAIT", 0.0)
        v3 = overlay("fresh", weight=33, price="3")
        _, out = await srv.post(session, "/validate", review(v3, "UPDATE", old=v2))
        resp = answer(out)
        assert resp["allowed"] is True
        assert any("not ratcheted" in w for w in resp["warnings"]), resp
