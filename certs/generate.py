"""A private CA and the webhook's serving certificate (cryptography, ECDSA P-256).

The CA signs the serving certificate and is what the API server trusts (the caBundle of the
webhook configurations). Keeping the CA key lets a later run re-issue the serving
certificate without touching the caBundle: that is a rotation the webhook picks up from its
files with no restart.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from certs import atomic

SERVICE = "overlay-guard"
CA_DAYS = 3650
SERVING_DAYS = 365
# Certificates start slightly in the past: nodes and the API server are rarely in perfect sync.
SKEW = datetime.timedelta(minutes=5)

Key = ec.EllipticCurvePrivateKey


def serving_names(namespace: str, service: str = SERVICE) -> list[str]:
    """The DNS names the API server may dial the Service by, plus localhost for `make run`."""
    return [f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local", "localhost"]


def _key() -> Key:
    return ec.generate_private_key(ec.SECP256R1())


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def new_ca(common_name: str = "overlay-guard-ca", days: int = CA_DAYS) -> tuple[x509.Certificate, Key]:
    key = _key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now() - SKEW)
        .not_valid_after(_now() + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, encipher_only=False,
                                     decipher_only=False),
                       critical=True)
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def issue(ca_cert: x509.Certificate, ca_key: Key, namespace: str, *, service: str = SERVICE,
          extra_names: Sequence[str] = (), days: int = SERVING_DAYS) -> tuple[x509.Certificate, Key]:
    """A serving certificate for the Service in `namespace`, 127.0.0.1 and any extra names
    (IP addresses in `extra_names` become IP SANs)."""
    key = _key()
    dns = [*serving_names(namespace, service)]
    ips: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = [ipaddress.IPv4Address("127.0.0.1")]
    for extra in extra_names:
        try:
            ip = ipaddress.ip_address(extra)
        except ValueError:
            if extra not in dns:
                dns.append(extra)
        else:
            if ip not in ips:
                ips.append(ip)
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    sans += [x509.IPAddress(ip) for ip in ips]
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns[0])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now() - SKEW)
        .not_valid_after(_now() + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False, key_cert_sign=False,
                                     crl_sign=False, content_commitment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False),
                       critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def issue_client(ca_cert: x509.Certificate, ca_key: Key, common_name: str,
                 days: int = SERVING_DAYS) -> tuple[x509.Certificate, Key]:
    """A client certificate (e.g. the API server's, for `--client-ca`)."""
    key = _key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now() - SKEW)
        .not_valid_after(_now() + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def key_pem(key: Key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


@dataclasses.dataclass(frozen=True)
class Bundle:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes
    new_ca: bool


def load_or_create_ca(out: Path, *, renew: bool = False) -> tuple[x509.Certificate, Key, bool]:
    """Reuse `out/ca.crt` + `out/ca.key` when both exist (so the caBundle stays valid)."""
    crt, key = out / "ca.crt", out / "ca.key"
    if not renew and crt.exists() and key.exists():
        ca_cert = x509.load_pem_x509_certificate(crt.read_bytes())
        ca_key = serialization.load_pem_private_key(key.read_bytes(), password=None)
        if isinstance(ca_key, ec.EllipticCurvePrivateKey) and ca_cert.not_valid_after_utc > _now() + SKEW:
            return ca_cert, ca_key, False
    ca_cert, ca_key = new_ca()
    return ca_cert, ca_key, True


def write_bundle(out: Path, namespace: str, *, extra_names: Sequence[str] = (), renew_ca: bool = False,
                 days: int = SERVING_DAYS) -> Bundle:
    """ca.crt, ca.key, tls.crt and tls.key in `out`. The key is written before the certificate
    so a webhook watching the files never pairs a new certificate with an old key for long
    (it retries on the next handshake either way)."""
    out.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key, fresh = load_or_create_ca(out, renew=renew_ca)
    cert, key = issue(ca_cert, ca_key, namespace, extra_names=extra_names, days=days)
    bundle = Bundle(cert_pem(ca_cert), cert_pem(cert), key_pem(key), fresh)
    if fresh:
        atomic.write_private(out / "ca.key", key_pem(ca_key))
        atomic.write_public(out / "ca.crt", bundle.ca_pem)
    atomic.write_private(out / "tls.key", bundle.key_pem)
    atomic.write_public(out / "tls.crt", bundle.cert_pem)
    return bundle
