"""The client side of SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), sans-I/O, with the broker's rules.

Written from RFC 5802 (section 3's computations, section 7's grammar) to log in as Kafka's Java client does, so that
every credential odradek's broker accepts can log in here:

- No SASLprep: the password is PBKDF2'd over its UTF-8 bytes and the user name is sent as given (``,`` and ``=``
  escaped as ``=2C`` and ``=3D``), which is what the broker looks up and what odradek's admin hashes.
- Any non-empty salt is taken: the tool that set the credential chose its length.
- The iteration count must lie within the broker's bounds (Kafka's): fewer than RFC 7677's 4096 would weaken the
  proof sent, more than any broker stores would only make a hostile server cost this client time.
- The server's nonce must extend ours, and its final signature must prove it holds the credential (compared in
  constant time); an ``e=`` error from the server is refused with its text.

Every failure raises :class:`~odradek.client.errors.AuthenticationFailedError` and ends the exchange.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

from odradek.client.errors import AuthenticationFailedError

__all__ = ["MAX_ITERATIONS", "MIN_ITERATIONS", "ScramClientExchange"]

HASHES: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
"""The SCRAM mechanisms and their hash functions."""
MIN_ITERATIONS = 4096
"""RFC 7677's floor and Kafka's minimum: Kafka's client refuses a server asking for fewer."""
MAX_ITERATIONS = 16384
"""Kafka's maximum, which the broker enforces on every credential it stores."""
NONCE_BYTES = 24
"""Random bytes in the client's nonce (32 characters once base64url-encoded)."""
GS2_HEADER = "n,,"
"""No channel binding, no authorization id; the client-final's ``c=biws`` is its base64."""

# printable (RFC 5802 section 7): the nonce's characters, ASCII 0x21-0x7E but ','.
_PRINTABLE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")
_DIGITS = re.compile(r"[0-9]+")

_START, _AWAIT_SERVER_FIRST, _AWAIT_SERVER_FINAL, _DONE, _FAILED = (
    "start",
    "await-server-first",
    "await-server-final",
    "done",
    "failed",
)


class ScramClientExchange:
    """One SCRAM login, client side: :meth:`first`, then :meth:`final` with the server-first message, then
    :meth:`verify` with the server-final message. ``nonce`` fixes the client nonce, for test vectors only."""

    def __init__(self, mechanism: str, username: str, password: str, *, nonce: str | None = None) -> None:
        if mechanism not in HASHES:
            raise ValueError(f"unknown SCRAM mechanism {mechanism!r}: expected one of {', '.join(HASHES)}")
        self.mechanism = mechanism
        self._hash = HASHES[mechanism]
        self._password = password.encode("utf-8")
        self._nonce = secrets.token_urlsafe(NONCE_BYTES) if nonce is None else nonce
        self._first_bare = f"n={_escape(username)},r={self._nonce}"
        self._server_signature = b""
        self._state = _START

    @property
    def complete(self) -> bool:
        """True once the server has proved it holds the credential."""
        return self._state == _DONE

    def first(self) -> bytes:
        """The client-first message: ``n,,n=<user>,r=<nonce>``."""
        with self._step(_START, _AWAIT_SERVER_FIRST, "client-first"):
            return (GS2_HEADER + self._first_bare).encode("utf-8")

    def final(self, server_first: bytes) -> bytes:
        """The client-final message, ``c=biws,r=<nonce>,p=<proof>``, for the server-first message."""
        with self._step(_AWAIT_SERVER_FIRST, _AWAIT_SERVER_FINAL, "client-final"):
            text = _decode(server_first, "server-first")
            nonce, salt, iterations = _parse_server_first(text, self._nonce)
            salted = hashlib.pbkdf2_hmac(self._hash, self._password, salt, iterations)
            without_proof = f"c={_b64(GS2_HEADER.encode())},r={nonce}"
            auth_message = f"{self._first_bare},{text},{without_proof}".encode()
            client_key = self._hmac(salted, b"Client Key")
            signature = self._hmac(hashlib.new(self._hash, client_key).digest(), auth_message)
            self._server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
            return f"{without_proof},p={_b64(_xor(client_key, signature))}".encode()

    def verify(self, server_final: bytes) -> None:
        """Check the server-final message's ``v=`` signature: only a holder of the credential could compute it."""
        with self._step(_AWAIT_SERVER_FINAL, _DONE, "server-final"):
            signature = _parse_server_final(_decode(server_final, "server-final"))
            if not hmac.compare_digest(signature, self._server_signature):
                raise AuthenticationFailedError(
                    "invalid SCRAM server signature: the broker does not hold this user's credential"
                )

    # -- internals ------------------------------------------------------------------------------------------------

    @contextmanager
    def _step(self, expected: str, then: str, what: str) -> Iterator[None]:
        """Runs one step in order; any failure ends the exchange, a step's success moves it on."""
        if self._state != expected:
            raise AuthenticationFailedError(f"unexpected SCRAM {what} step: the exchange is {self._state}")
        try:
            yield
        except BaseException:
            self._state = _FAILED
            raise
        self._state = then

    def _hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.digest(key, message, self._hash)


def _parse_server_first(text: str, client_nonce: str) -> tuple[str, bytes, int]:
    """``r=<nonce>,s=<base64 salt>,i=<iterations>[,extensions]``: the nonce, the salt and the iteration count."""
    attributes = text.split(",")
    if attributes[0].startswith("m="):
        raise AuthenticationFailedError("the broker asked for a mandatory SCRAM extension (m=), which is not supported")
    if len(attributes) < 3 or [a[:2] for a in attributes[:3]] != ["r=", "s=", "i="]:
        _malformed("server-first", "expected r=nonce,s=salt,i=iterations")
    nonce, salt_text, iterations_text = (a[2:] for a in attributes[:3])
    if not nonce.startswith(client_nonce):
        raise AuthenticationFailedError("invalid SCRAM server nonce: it does not start with the client's nonce")
    if not _PRINTABLE.fullmatch(nonce):
        _malformed("server-first", "the nonce r= must be printable ASCII")
    try:
        salt = base64.b64decode(salt_text, validate=True)
    except ValueError:  # binascii.Error, or a character outside ASCII
        _malformed("server-first", "the salt s= is not base64")
    if not salt:
        _malformed("server-first", "the salt s= is empty")
    if not _DIGITS.fullmatch(iterations_text):
        _malformed("server-first", "the iteration count i= is not a number")
    return nonce, salt, _checked_iterations(int(iterations_text))


def _checked_iterations(iterations: int) -> int:
    if iterations < MIN_ITERATIONS:
        raise AuthenticationFailedError(
            f"the broker asked for {iterations} SCRAM iterations, fewer than the minimum {MIN_ITERATIONS}"
        )
    if iterations > MAX_ITERATIONS:
        raise AuthenticationFailedError(
            f"the broker asked for {iterations} SCRAM iterations, more than the maximum {MAX_ITERATIONS}"
        )
    return iterations


def _parse_server_final(text: str) -> bytes:
    """``e=<error>`` or ``v=<base64 signature>``, either maybe followed by extensions: the signature."""
    attribute = text.split(",", 1)[0]
    if attribute.startswith("e="):
        raise AuthenticationFailedError(f"the broker refused the SCRAM login: {attribute[2:]}")
    if not attribute.startswith("v="):
        _malformed("server-final", "expected v=signature or e=error")
    try:
        return base64.b64decode(attribute[2:], validate=True)
    except ValueError:  # binascii.Error, or a character outside ASCII
        _malformed("server-final", "the signature v= is not base64")


def _decode(message: bytes, what: str) -> str:
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        _malformed(what, "not UTF-8")


def _malformed(what: str, why: str) -> NoReturn:
    raise AuthenticationFailedError(f"malformed SCRAM {what} message: {why}")


def _escape(username: str) -> str:
    """SCRAM's saslname escaping (RFC 5802 section 5.1): ``=`` as ``=3D``, then ``,`` as ``=2C``."""
    return username.replace("=", "=3D").replace(",", "=2C")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _xor(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a) ^ int.from_bytes(b)).to_bytes(len(a))
