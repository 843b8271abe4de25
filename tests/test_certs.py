"""certs/: the CA and serving certificate, their SANs, rotation from a kept CA, and the rendered
webhook configurations."""

from __future__ import annotations

import base64
import ipaddress
import os
import ssl
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from certs import atomic, generate, render
from certs.__main__ import main


def test_serving_certificate_names_and_chain(tmp_path: Path) -> None:
    bundle = generate.write_bundle(tmp_path, "guard-ns")
    cert = x509.load_pem_x509_certificate(bundle.cert_pem)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == [
        "overlay-guard.guard-ns.svc",
        "overlay-guard.guard-ns.svc.cluster.local",
        "localhost",
    ]
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.IPv4Address("127.0.0.1")]
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in eku
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    ca = x509.load_pem_x509_certificate(bundle.ca_pem)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    cert.verify_directly_issued_by(ca)
    # Python's own verification (what the tests' clients do) accepts it for every name.
    ctx = ssl.create_default_context(cadata=bundle.ca_pem.decode())
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    assert ctx.verify_mode == ssl.CERT_REQUIRED


def test_rerun_keeps_the_ca_and_rotates_the_serving_certificate(tmp_path: Path) -> None:
    first = generate.write_bundle(tmp_path, "ns")
    second = generate.write_bundle(tmp_path, "ns")
    assert first.new_ca and not second.new_ca
    assert first.ca_pem == second.ca_pem and first.cert_pem != second.cert_pem
    renewed = generate.write_bundle(tmp_path, "ns", renew_ca=True)
    assert renewed.new_ca and renewed.ca_pem != first.ca_pem
    assert (tmp_path / "tls.key").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "ca.key").stat().st_mode & 0o777 == 0o600


def test_extra_names(tmp_path: Path) -> None:
    bundle = generate.write_bundle(
        tmp_path, "ns", extra_names=["webhook.example.com", "10.0.0.7", "localhost"]
    )
    sans = (
        x509.load_pem_x509_certificate(bundle.cert_pem)
        .extensions.get_extension_for_class(x509.SubjectAlternativeName)
        .value
    )
    assert "webhook.example.com" in sans.get_values_for_type(x509.DNSName)
    assert sans.get_values_for_type(x509.DNSName).count("localhost") == 1
    assert ipaddress.IPv4Address("10.0.0.7") in sans.get_values_for_type(x509.IPAddress)


def test_rendered_configurations_carry_the_ca_bundle() -> None:
    docs = render.webhook_configurations("ns", b"PEM")
    assert [d["kind"] for d in docs] == ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"]
    for doc in docs:
        for hook in doc["webhooks"]:
            assert base64.b64decode(hook["clientConfig"]["caBundle"]) == b"PEM"
            assert hook["clientConfig"]["service"]["namespace"] == "ns"
    assert all(
        "caBundle" not in h["clientConfig"] for d in render.webhook_configurations() for h in d["webhooks"]
    )


def test_cli(tmp_path: Path, capsys: object) -> None:
    assert main(["--out", str(tmp_path / "o"), "--namespace", "x", "--base", str(tmp_path / "missing")]) == 0
    assert (tmp_path / "o" / "webhook-configurations.yaml").is_file()
    assert not (tmp_path / "o" / "kustomization.yaml").exists()  # no base to point at
    assert main(["--bogus"]) == 2
    assert main(["--print-base-webhooks"]) == 0
    assert main([]) == 2


PRIVATE_FILES = ("tls.key", "ca.key", "secret.yaml")


def _planted(tmp_path: Path) -> tuple[Path, Path]:
    """An output directory and, outside it, a file an attacker wants the key written into."""
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    return out, elsewhere


def _assert_private(out: Path) -> None:
    for name in PRIVATE_FILES:
        path = out / name
        assert not path.is_symlink() and path.is_file(), name
        assert path.stat().st_mode & 0o777 == 0o600, name


@pytest.mark.parametrize("name", PRIVATE_FILES)
def test_a_stale_world_readable_temporary_file_is_not_reused(tmp_path: Path, name: str) -> None:
    out, _ = _planted(tmp_path)
    stale = out / f".{name}.tmp"
    stale.write_bytes(b"stale")
    stale.chmod(0o644)
    assert main(["--out", str(out), "--base", str(tmp_path / "none")]) == 0
    _assert_private(out)
    assert stale.read_bytes() == b"stale" and stale.stat().st_mode & 0o777 == 0o644
    assert b"PRIVATE KEY" not in stale.read_bytes()


@pytest.mark.parametrize("name", PRIVATE_FILES)
def test_a_symlink_as_the_temporary_file_is_not_followed(tmp_path: Path, name: str) -> None:
    out, elsewhere = _planted(tmp_path)
    target = elsewhere / "loot"
    target.write_bytes(b"untouched")
    target.chmod(0o644)
    (out / f".{name}.tmp").symlink_to(target)
    dangling = elsewhere / "created-by-us"
    (out / f".{name}.tmp.tmp").symlink_to(dangling)
    assert main(["--out", str(out), "--base", str(tmp_path / "none")]) == 0
    _assert_private(out)
    assert target.read_bytes() == b"untouched" and target.stat().st_mode & 0o777 == 0o644
    assert not dangling.exists()


@pytest.mark.parametrize("name", PRIVATE_FILES)
def test_the_key_file_itself_as_a_symlink_is_replaced_not_followed(tmp_path: Path, name: str) -> None:
    out, elsewhere = _planted(tmp_path)
    target = elsewhere / "loot"
    target.write_bytes(b"untouched")
    target.chmod(0o644)
    (out / name).symlink_to(target)
    dangling = elsewhere / "missing"
    other = "ca.key" if name != "ca.key" else "tls.key"
    (out / other).symlink_to(dangling)
    assert main(["--out", str(out), "--base", str(tmp_path / "none")]) == 0
    _assert_private(out)
    assert target.read_bytes() == b"untouched" and target.stat().st_mode & 0o777 == 0o644
    assert not dangling.exists()


def test_keys_are_private_before_the_first_byte(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Checked at every write: a reader racing the writer never finds the key readable."""
    seen: list[tuple[int, bytes]] = []
    real_write = os.write

    def spy(fd: int, data: Any) -> int:
        seen.append((os.fstat(fd).st_mode & 0o777, bytes(data[:40])))
        return real_write(fd, data)

    monkeypatch.setattr(atomic.os, "write", spy)
    old = os.umask(0)  # the most permissive umask: the mode must not depend on it
    try:
        generate.write_bundle(tmp_path, "ns")
    finally:
        os.umask(old)
    keys = [mode for mode, head in seen if b"PRIVATE KEY" in head]
    assert len(keys) == 2 and all(mode == 0o600 for mode in keys)
    assert {mode for mode, head in seen if b"CERTIFICATE" in head} == {0o644}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tls.key").write_bytes(b"old")

    def full(fd: int, data: Any) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "write", full)
    with pytest.raises(OSError):
        atomic.write_private(tmp_path / "tls.key", b"new")
    assert (tmp_path / "tls.key").read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["tls.key"]
