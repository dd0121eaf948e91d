"""A cluster's certificate authority and the node and client certificates it signs, with ``cryptography``.

``odradek deploy certs``, ``DevCluster.create(..., tls=True)`` and the tests make their PEM files here: one CA per
cluster (a node whose certificate another CA signed cannot join it), a certificate per node whose subject
alternative names are the names and addresses other nodes and clients reach it by (it serves and, for mTLS
between nodes, presents the same certificate as a client), and client certificates (``CN=admin``).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_DAYS = 825  # the longest validity that browsers and most TLS stacks still accept for a leaf
CA_DAYS = 3650


@dataclass(frozen=True)
class Issued:
    """A key and its certificate, as PEM bytes."""

    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @property
    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def write(self, directory: Path, stem: str) -> tuple[Path, Path]:
        """``<stem>.crt`` and ``<stem>.key`` (the key readable by its owner only); returns (cert, key)."""
        directory.mkdir(parents=True, exist_ok=True)
        cert, key = directory / f"{stem}.crt", directory / f"{stem}.key"
        write_atomically(cert, self.cert_pem, 0o644)
        write_atomically(key, self.key_pem, 0o600)
        return cert, key


def write_atomically(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` beside ``path`` then rename it in place: a node reloading its certificate never reads a
    half-written file."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "odradek"), x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    )


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def make_ca(common_name: str = "odradek cluster CA", days: int = CA_DAYS) -> Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(common_name)
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Issued(key, cert)


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def make_leaf(
    ca: Issued,
    common_name: str,
    names: list[str] | tuple[str, ...] = (),
    *,
    days: int = DEFAULT_DAYS,
    not_before: dt.datetime | None = None,
    not_after: dt.datetime | None = None,
) -> Issued:
    """A certificate signed by ``ca`` for both TLS roles (server and client): nodes present it both ways. ``names``
    become subject alternative names (IP addresses as such); a client certificate may have none."""
    key = ec.generate_private_key(ec.SECP256R1())
    start = not_before or _now() - dt.timedelta(minutes=5)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(not_after or start + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False)
    )
    unique = list(dict.fromkeys(names))
    if unique:
        builder = builder.add_extension(x509.SubjectAlternativeName([_san(n) for n in unique]), critical=False)
    return Issued(key, builder.sign(ca.key, hashes.SHA256()))


def load_ca(cert_path: Path, key_path: Path) -> Issued:
    """An existing CA (``deploy certs`` signs new node certificates with the cluster's CA when it is there)."""
    key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{key_path}: expected an EC private key")
    return Issued(key, x509.load_pem_x509_certificate(cert_path.read_bytes()))
