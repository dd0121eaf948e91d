"""The client side of TLS: PEM files (Kafka's ``ssl.*.location`` names) turned into gRPC channel credentials or an
``ssl.SSLContext``.

The files are read each time credentials are made, that is for each new channel or connection: a node whose
certificate was renewed presents the new one on its next connections without restarting.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import grpc


class TlsFileError(ValueError):
    """A certificate, key or CA file that cannot be read or does not hold what its setting says."""


def read_pem(path: str, what: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise TlsFileError(f"{what} {path}: {e.strerror or e}") from None
    if b"-----BEGIN " not in data:
        raise TlsFileError(f"{what} {path} is not a PEM file")
    return data


def read_key(path: str, password: str = "") -> bytes:
    """The private key at ``path`` as unencrypted PEM (gRPC takes no password: an encrypted key is decrypted here
    with ``password``, Kafka's ssl.key.password)."""
    data = read_pem(path, "ssl.key.location")
    if not password and b"ENCRYPTED" not in data:
        return data
    from cryptography.hazmat.primitives import serialization  # only for an encrypted key: slow to import

    try:
        key = serialization.load_pem_private_key(data, password.encode() or None)
    except (ValueError, TypeError) as e:
        raise TlsFileError(f"ssl.key.location {path}: cannot load the key ({e}); check ssl.key.password") from None
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """Where one side's TLS material is. ``ca_location`` "" trusts the system's CAs; a certificate (with its key)
    is presented to servers that ask for one (mTLS)."""

    ca_location: str = ""
    certificate_location: str = ""
    key_location: str = ""
    key_password: str = ""

    def __post_init__(self) -> None:
        if bool(self.certificate_location) != bool(self.key_location):
            raise TlsFileError("ssl.certificate.location and ssl.key.location go together: set both or neither")

    def root_pem(self) -> bytes | None:
        return read_pem(self.ca_location, "ssl.ca.location") if self.ca_location else None

    def identity(self) -> tuple[bytes, bytes] | None:
        """(key, certificate chain) as PEM, or None without a certificate."""
        if not self.certificate_location:
            return None
        chain = read_pem(self.certificate_location, "ssl.certificate.location")
        return read_key(self.key_location, self.key_password), chain

    def channel_credentials(self) -> grpc.ChannelCredentials:
        identity = self.identity()
        key, chain = identity if identity is not None else (None, None)
        return grpc.ssl_channel_credentials(self.root_pem(), key, chain)

    def client_context(self) -> ssl.SSLContext:
        """For a TLS client connection (a follower fetching over a leader's Kafka listener): verifies the server
        against the CA and its name, presents the certificate if there is one."""
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        root = self.root_pem()
        if root is not None:
            context.load_verify_locations(cadata=root.decode())
        if self.certificate_location:
            load_identity(context, self)
        return context


def load_identity(context: ssl.SSLContext, files: TlsFiles) -> None:
    """Load the certificate chain and key into ``context`` (ssl reads files only: the password goes to it)."""
    read_pem(files.certificate_location, "ssl.certificate.location")
    read_pem(files.key_location, "ssl.key.location")
    try:
        # The password always goes to ssl (even empty): without one, OpenSSL would prompt on the terminal for an
        # encrypted key and the process would hang instead of failing.
        context.load_cert_chain(files.certificate_location, files.key_location, files.key_password)
    except (ssl.SSLError, OSError) as e:
        raise TlsFileError(
            f"ssl.certificate.location {files.certificate_location} / ssl.key.location {files.key_location}: {e}"
        ) from None
