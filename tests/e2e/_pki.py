"""Throwaway certificates and keys for a loopback-only test control plane."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Backdating absorbs small clock differences between this process and the
# binaries; a day is far longer than any test session needs.
_BACKDATE = dt.timedelta(hours=1)
_LIFETIME = dt.timedelta(days=1)

PrivateKey: TypeAlias = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


@dataclass(frozen=True)
class Pki:
    """Paths of the PEM files one control plane is started with."""

    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    service_account_key: Path
    service_account_pub: Path


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization is not None:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


def _new_ec_key() -> ec.EllipticCurvePrivateKey:
    # P-256 keeps generation instantaneous; every component accepts it.
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: PrivateKey) -> None:
    data = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    # Created 0600 from the start so the key is never briefly world-readable.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _issue(
    subject: x509.Name,
    key: PrivateKey,
    issuer: x509.Certificate | None,
    issuer_key: PrivateKey,
    *,
    dns_names: Sequence[str] = (),
    ip_addresses: Sequence[str] = (),
    usages: Sequence[x509.ObjectIdentifier] = (),
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    is_ca = issuer is None
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject if issuer is None else issuer.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + _LIFETIME)
        .add_extension(x509.BasicConstraints(ca=is_ca, path_length=0 if is_ca else None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=not is_ca,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=is_ca,
                crl_sign=is_ca,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    if issuer is not None:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False
        )
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
    alt_names: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    alt_names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    if alt_names:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def issue_serving_cert(
    pki: Pki, directory: Path, name: str, *, dns_names: Sequence[str], ip_addresses: Sequence[str]
) -> tuple[Path, Path]:
    """Issue a server certificate from the cluster CA (e.g. for a webhook); returns (cert, key)."""
    ca_cert = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise TypeError(f"unexpected CA key type {type(ca_key).__name__}")
    key = _new_ec_key()
    cert = _issue(
        _name(name),
        key,
        ca_cert,
        ca_key,
        dns_names=dns_names,
        ip_addresses=ip_addresses,
        usages=[ExtendedKeyUsageOID.SERVER_AUTH],
    )
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    _write_cert(cert_path, cert)
    _write_key(key_path, key)
    return cert_path, key_path


def generate(directory: Path) -> Pki:
    """Create a CA, an apiserver serving pair, an admin client pair and a token signing key."""
    directory.mkdir(parents=True, exist_ok=True)

    ca_key = _new_ec_key()
    ca_cert = _issue(_name("overlay-guard-e2e-ca"), ca_key, None, ca_key)

    serving_key = _new_ec_key()
    serving_cert = _issue(
        _name("kube-apiserver"),
        serving_key,
        ca_cert,
        ca_key,
        # The in-cluster names are listed too, since the apiserver's own
        # loopback client and later scenarios may address it by them.
        dns_names=["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"],
        ip_addresses=["127.0.0.1"],
        usages=[ExtendedKeyUsageOID.SERVER_AUTH],
    )

    # Membership in system:masters is what makes this identity cluster-admin
    # without depending on any RBAC objects existing yet.
    admin_key = _new_ec_key()
    admin_cert = _issue(
        _name("overlay-guard-e2e-admin", "system:masters"),
        admin_key,
        ca_cert,
        ca_key,
        usages=[ExtendedKeyUsageOID.CLIENT_AUTH],
    )

    # RSA because RS256 is the one token algorithm every consumer of
    # service-account tokens is guaranteed to verify.
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    pki = Pki(
        ca_cert=directory / "ca.crt",
        ca_key=directory / "ca.key",
        serving_cert=directory / "apiserver.crt",
        serving_key=directory / "apiserver.key",
        admin_cert=directory / "admin.crt",
        admin_key=directory / "admin.key",
        service_account_key=directory / "sa.key",
        service_account_pub=directory / "sa.pub",
    )
    _write_cert(pki.ca_cert, ca_cert)
    _write_key(pki.ca_key, ca_key)
    _write_cert(pki.serving_cert, serving_cert)
    _write_key(pki.serving_key, serving_key)
    _write_cert(pki.admin_cert, admin_cert)
    _write_key(pki.admin_key, admin_key)
    _write_key(pki.service_account_key, sa_key)
    pki.service_account_pub.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return pki
