"""certs/: the CA and serving certificate, their SANs, rotation from a kept CA, and the rendered
webhook configurations."""

from __future__ import annotations

import base64
import ipaddress
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from certs import generate, render
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
