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
from cryptography.exceptions import InvalidSignature
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


# ---- a deployment's certificates (``odradek deploy certs``) ----

CA_STEM = "ca"
ADMIN_STEM = "admin-client"
ADMIN_NAME = "admin"


class CertsError(ValueError):
    """A problem with a certificate directory, worded for the operator in one line."""


def node_stem(node_id: int) -> str:
    """``node-<id>``: the file names (``.crt``, ``.key``) of a node's certificate in a deployment's directory."""
    return f"node-{node_id}"


@dataclass(frozen=True)
class CertFiles:
    """One certificate and key in a deployment's directory, and what this run did to them."""

    cert: Path
    key: Path
    status: str  # "created", "kept" (already there and still right) or "replaced" (--force)

    def as_json(self) -> dict[str, str]:
        return {"cert": str(self.cert), "key": str(self.key), "status": self.status}


@dataclass(frozen=True)
class DeploymentCerts:
    ca: CertFiles
    nodes: dict[int, CertFiles]
    admin: CertFiles

    def as_json(self) -> dict[str, object]:
        return {
            "ca": self.ca.as_json(),
            "nodes": {str(node_id): files.as_json() for node_id, files in sorted(self.nodes.items())},
            "admin": self.admin.as_json(),
        }


def _sans(cert: x509.Certificate) -> list[str]:
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [str(n.value) for n in names if isinstance(n, (x509.DNSName, x509.IPAddress))]


def _same_key(cert: x509.Certificate, key: object) -> bool:
    spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    public = getattr(key, "public_key", None)
    return public is not None and cert.public_key().public_bytes(*spki) == public().public_bytes(*spki)


def _mismatch(ca: Issued, cert_path: Path, key_path: Path, names: list[str]) -> str | None:
    """Why the certificate and key already at these paths do not fit (None: they do and can stay)."""
    if not (cert_path.exists() and key_path.exists()):
        return "its key or certificate is missing"
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (ValueError, TypeError) as e:
        return f"it does not load ({e})"
    try:
        cert.verify_directly_issued_by(ca.cert)
    except (ValueError, TypeError, InvalidSignature):
        return "another CA signed it"
    if not _same_key(cert, key):
        return "its key is not the certificate's"
    if cert.not_valid_after_utc <= _now():
        return "it has expired"
    wanted = [str(_san(n).value) for n in dict.fromkeys(names)]
    if sorted(_sans(cert)) != sorted(wanted):
        return f"its names {sorted(_sans(cert))} are not {sorted(wanted)}"
    return None


def _leaf(
    ca: Issued, directory: Path, stem: str, common_name: str, names: list[str], days: int, force: bool
) -> CertFiles:
    """Make the certificate, keep the one there (checked to fit beforehand) or, with ``force``, replace it."""
    cert_path, key_path = directory / f"{stem}.crt", directory / f"{stem}.key"
    existed = cert_path.exists() or key_path.exists()
    if existed and not force:
        return CertFiles(cert_path, key_path, "kept")
    cert_path, key_path = make_leaf(ca, common_name, names, days=days).write(directory, stem)
    return CertFiles(cert_path, key_path, "replaced" if existed else "created")


def deployment_certs(
    directory: Path, nodes: dict[int, list[str]], *, days: int = DEFAULT_DAYS, force: bool = False
) -> DeploymentCerts:
    """The cluster CA (``ca.crt``, ``ca.key``; loaded when ``directory`` has one, else made), a certificate per node
    (``node-<id>.crt``/``.key``, ``CN=node-<id>``, its host names and addresses as subject alternative names) and
    an admin client certificate (``admin-client.crt``/``.key``, ``CN=admin``).

    Files already there are kept when they still fit (signed by this CA, the key matching, not expired, the same
    names), so a run after adding a node only adds that node's. Ones that do not fit are an error, never replaced
    silently; ``force`` replaces them, and renews the ones that fit too (new keys). Keys are mode 0600."""
    if days < 1:
        raise CertsError(f"--days must be at least 1, not {days}")
    if directory.exists() and not directory.is_dir():
        raise CertsError(f"{directory} is not a directory")
    ca_cert, ca_key = directory / f"{CA_STEM}.crt", directory / f"{CA_STEM}.key"
    if ca_cert.exists() and ca_key.exists():
        try:
            ca = load_ca(ca_cert, ca_key)
        except (ValueError, TypeError) as e:
            raise CertsError(f"the CA in {directory} does not load: {e}") from None
        if not _same_key(ca.cert, ca.key):
            raise CertsError(f"{ca_key} is not the key of {ca_cert}")
        if ca.cert.not_valid_after_utc <= _now():
            raise CertsError(f"the CA {ca_cert} has expired")
        ca_files = CertFiles(ca_cert, ca_key, "kept")
    elif ca_cert.exists() or ca_key.exists():
        missing = ca_key if ca_cert.exists() else ca_cert
        raise CertsError(f"{missing} is missing: the CA needs both {ca_cert.name} and {ca_key.name}")
    else:
        ca, ca_files = make_ca(), CertFiles(ca_cert, ca_key, "created")  # written once the checks pass
    # Check every existing file before writing any, so a refusal leaves the directory as it was.
    if not force:
        stems = {node_stem(node_id): names for node_id, names in nodes.items()} | {ADMIN_STEM: []}
        for stem, names in stems.items():
            cert_path, key_path = directory / f"{stem}.crt", directory / f"{stem}.key"
            if cert_path.exists() or key_path.exists():
                why = _mismatch(ca, cert_path, key_path, names)
                if why is not None:
                    raise CertsError(f"{key_path} exists but {why}: pass --force to replace it")
    if ca_files.status == "created":
        ca.write(directory, CA_STEM)
    node_files = {
        node_id: _leaf(ca, directory, node_stem(node_id), node_stem(node_id), names, days, force)
        for node_id, names in sorted(nodes.items())
    }
    admin = _leaf(ca, directory, ADMIN_STEM, ADMIN_NAME, [], days, force)
    return DeploymentCerts(ca_files, node_files, admin)
