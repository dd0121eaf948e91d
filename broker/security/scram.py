"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): salted credentials and the server side of the exchange.

Sans-I/O: :class:`ScramServerExchange` takes the client's two messages and returns the server's two, so the Kafka
listener (SaslAuthenticate) and the gRPC handshake drive the same core. The protocol itself is scramp's (message
parsing, nonces, proof and signature checks); this module adds what a Kafka broker needs around it:

- Credentials hold the salt, the iteration count, StoredKey and ServerKey, never the password. Kafka's
  AlterUserScramCredentials (KIP-554) carries the client-computed SaltedPassword, from which
  :func:`credential_from_salted_password` derives the keys. As in Kafka, the password is not SASLprep-normalised:
  SaltedPassword is PBKDF2 over its UTF-8 bytes, which is what Kafka's clients compute.
- An unknown user (or one without a credential for this mechanism) gets a server-first message like anyone's, with
  a salt derived from the name, and fails at the final message exactly as a wrong password does: the answer does not
  tell whether the user exists.
- Refused, each with a clear :class:`ScramAuthenticationError`: an authorization id (``a=``; one differing from the
  user name is refused with Kafka's message), channel binding (``p=``: no -PLUS mechanism is offered), Kafka's
  delegation-token extension (``tokenauth``) and any other SCRAM extension, malformed messages, a client-final whose
  nonce is not the exchange's, calls out of order.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, NoReturn

__all__ = [
    "DEFAULT_ITERATIONS",
    "MAX_ITERATIONS",
    "MIN_ITERATIONS",
    "MIN_SALT_BYTES",
    "Mechanism",
    "ScramAuthenticationError",
    "ScramCredential",
    "ScramServerExchange",
    "credential_from_salted_password",
    "make_credential",
]

MIN_ITERATIONS = 4096
"""RFC 7677's floor and Kafka's minimum for both mechanisms."""
MAX_ITERATIONS = 16384
"""Kafka's maximum for both mechanisms: a higher count costs every client login and the broker nothing."""
DEFAULT_ITERATIONS = 4096
MIN_SALT_BYTES = 12
"""scramp refuses a shorter salt in the exchange, so a credential with one could never log in."""
SALT_BYTES = 24
"""The length of the salts :func:`make_credential` draws (kafka-python's too)."""


class Mechanism(Enum):
    """The SASL mechanisms, by their SASL names; :attr:`code` is Kafka's AlterUserScramCredentials mechanism."""

    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"

    @classmethod
    def parse(cls, name: str) -> Mechanism:
        try:
            return cls(name)
        except ValueError:
            known = ", ".join(m.value for m in cls)
            raise ValueError(f"unknown SCRAM mechanism {name!r}: expected one of {known}") from None

    @classmethod
    def from_code(cls, code: int) -> Mechanism:
        for mechanism in cls:
            if mechanism.code == code:
                return mechanism
        raise ValueError(f"unknown SCRAM mechanism code {code}: expected 1 (SCRAM-SHA-256) or 2 (SCRAM-SHA-512)")

    @property
    def code(self) -> int:
        return 1 if self is Mechanism.SCRAM_SHA_256 else 2

    @property
    def hash_name(self) -> str:
        return "sha256" if self is Mechanism.SCRAM_SHA_256 else "sha512"

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size


@dataclass(frozen=True)
class ScramCredential:
    """What the broker stores for one user and mechanism. The keys stay out of ``repr``: ServerKey lets its holder
    pose as the server, StoredKey with a captured exchange lets one log in."""

    mechanism: Mechanism
    salt: bytes
    iterations: int
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        _check_iterations(self.iterations)
        if len(self.salt) < MIN_SALT_BYTES:
            raise ValueError(f"a SCRAM salt must have at least {MIN_SALT_BYTES} bytes, not {len(self.salt)}")
        size = self.mechanism.digest_size
        if len(self.stored_key) != size or len(self.server_key) != size:
            raise ValueError(f"{self.mechanism.value} keys are {size} bytes long")


class ScramAuthenticationError(Exception):
    """The exchange failed; the message is safe to send to the client (SASL_AUTHENTICATION_FAILED)."""


def make_credential(
    mechanism: Mechanism, password: str, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """A credential for ``password`` with a fresh random salt unless one is given."""
    if not password:
        raise ValueError("a SCRAM password must not be empty")
    _check_iterations(iterations)
    if salt is None:
        salt = secrets.token_bytes(SALT_BYTES)
    salted = hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)
    return credential_from_salted_password(mechanism, salt, iterations, salted)


def credential_from_salted_password(
    mechanism: Mechanism, salt: bytes, iterations: int, salted_password: bytes
) -> ScramCredential:
    """The credential for a SaltedPassword (``Hi(password, salt, iterations)``), as AlterUserScramCredentials sends
    it: ClientKey = HMAC(SaltedPassword, "Client Key"), StoredKey = H(ClientKey), ServerKey = HMAC(SaltedPassword,
    "Server Key")."""
    if len(salted_password) != mechanism.digest_size:
        raise ValueError(
            f"a {mechanism.value} salted password is {mechanism.digest_size} bytes long, not {len(salted_password)}"
        )
    client_key = hmac.digest(salted_password, b"Client Key", mechanism.hash_name)
    stored_key = hashlib.new(mechanism.hash_name, client_key).digest()
    server_key = hmac.digest(salted_password, b"Server Key", mechanism.hash_name)
    return ScramCredential(mechanism, salt, iterations, stored_key, server_key)


def _check_iterations(iterations: int) -> None:
    if isinstance(iterations, bool) or not isinstance(iterations, int):
        raise ValueError(f"SCRAM iterations must be an integer, not {iterations!r}")
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"SCRAM iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, not {iterations}")


# Salts for users that do not exist: keyed by a per-process secret, so that asking twice for the same unknown name
# gives the same salt, as asking twice for a real user does.
_FAKE_SALT_KEY = secrets.token_bytes(32)

_START, _AWAIT_FINAL, _DONE, _FAILED = "start", "await-final", "done", "failed"


class ScramServerExchange:
    """One SCRAM authentication, server side: :meth:`first`, then :meth:`final`, then :attr:`username`.

    ``lookup`` returns the stored credential for a user name (after SCRAM's ``=2C``/``=3D`` unescaping and SASLprep)
    or None; an exception it raises propagates unchanged (a broker fault, not a failed login). Any failure raises
    :class:`ScramAuthenticationError` and ends the exchange. ``server_nonce`` fixes the server's nonce part, for
    test vectors only.
    """

    def __init__(
        self,
        mechanism: Mechanism,
        lookup: Callable[[str], ScramCredential | None],
        *,
        server_nonce: str | None = None,
    ) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._server_nonce = server_nonce
        self._state = _START
        self._server: Any = None
        self._nonce = ""
        self._user = ""
        self._known = False
        self._lookup_error: Exception | None = None

    @property
    def complete(self) -> bool:
        return self._state == _DONE

    @property
    def username(self) -> str:
        """The authenticated user; only once :meth:`final` has succeeded."""
        if self._state != _DONE:
            raise ScramAuthenticationError("the SCRAM exchange has not completed")
        return self._user

    def first(self, client_first: bytes) -> bytes:
        """The server-first message for the client-first message."""
        if self._state != _START:
            self._fail("unexpected SCRAM client-first message: the exchange has already started")
        text = self._decode(client_first, "client-first")
        self._check_client_first(text)
        import scramp  # here, not at the top: a node without SCRAM users never needs it, and it is slow to import

        try:
            server = scramp.ScramMechanism(self.mechanism.value).make_server(
                self._credential_for, s_nonce=self._server_nonce
            )
            server.set_client_first(text)
            server_first: str = server.get_server_first()
        except scramp.ScramException as exc:
            if self._lookup_error is not None:
                self._state = _FAILED
                raise self._lookup_error from None
            self._fail(f"malformed SCRAM client-first message: {exc}")
        self._server = server
        self._nonce = server_first.split(",", 1)[0].removeprefix("r=")
        self._state = _AWAIT_FINAL
        return server_first.encode("utf-8")

    def final(self, client_final: bytes) -> bytes:
        """The server-final message (the server's signature) once the client's proof checks out."""
        if self._state != _AWAIT_FINAL:
            what = "before the client-first message" if self._state == _START else "after the exchange ended"
            self._fail(f"unexpected SCRAM client-final message {what}")
        text = self._decode(client_final, "client-final")
        nonce = next((attr[2:] for attr in text.split(",") if attr.startswith("r=")), None)
        if nonce is None:
            self._fail("malformed SCRAM client-final message: no nonce")
        if not hmac.compare_digest(nonce.encode("utf-8"), self._nonce.encode("utf-8")):
            self._fail("Authentication failed: invalid nonce in the SCRAM client-final message")
        import scramp
        from scramp.utils import ServerError

        try:
            self._server.set_client_final(text)
            server_final: str = self._server.get_server_final()
        except scramp.ScramException as exc:
            if exc.server_error is ServerError.INVALID_PROOF:
                self._fail(self._invalid_credentials())
            self._fail(f"malformed SCRAM client-final message: {exc}")
        if not self._known:  # a made-up credential's StoredKey is random: no proof matches it
            self._fail(self._invalid_credentials())
        self._server = None
        self._state = _DONE
        return server_final.encode("utf-8")

    # -- internals ------------------------------------------------------------------------------------------------

    def _invalid_credentials(self) -> str:
        # Kafka's wording for a failed SCRAM login, the same for a wrong password and an unknown user.
        return (
            "Authentication failed during authentication due to invalid credentials with SASL mechanism "
            + self.mechanism.value
        )

    def _fail(self, message: str) -> NoReturn:
        self._state = _FAILED
        self._server = None
        raise ScramAuthenticationError(message)

    def _decode(self, message: bytes, what: str) -> str:
        try:
            return message.decode("utf-8")
        except UnicodeDecodeError:
            self._fail(f"malformed SCRAM {what} message: not UTF-8")

    def _check_client_first(self, text: str) -> None:
        """What scramp would misreport or cannot take: the GS2 header's authzid and channel binding, extensions."""
        if text.startswith("p"):
            self._fail("SCRAM channel binding is not supported: use SCRAM-SHA-256 or SCRAM-SHA-512 without -PLUS")
        pieces = text.split(",", 2)
        if len(pieces) != 3 or pieces[0] not in ("n", "y"):
            self._fail("malformed SCRAM client-first message: expected a GS2 header 'n,,' or 'y,,'")
        _, authzid, bare = pieces
        attributes = bare.split(",")
        if len(attributes) < 2 or not attributes[0].startswith("n=") or not attributes[1].startswith("r="):
            self._fail("malformed SCRAM client-first message: expected n=user,r=nonce")
        if any(len(attr.split("=", 1)[0]) == 0 or "=" not in attr for attr in attributes[2:]):
            self._fail("malformed SCRAM client-first message: attributes must be name=value")
        extensions = [attr.split("=", 1)[0] for attr in attributes[2:]]
        if "tokenauth" in extensions:
            self._fail("SCRAM delegation-token authentication (tokenauth) is not supported")
        if extensions:
            self._fail(f"SCRAM extensions are not supported: {', '.join(extensions)}")
        if authzid:
            if not authzid.startswith("a="):
                self._fail("malformed SCRAM client-first message: the GS2 authzid must be a=name")
            if _unescape(authzid[2:]) != _unescape(attributes[0][2:]):
                self._fail(
                    "Authentication failed: Client requested an authorization id that is different from username"
                )
            self._fail("SCRAM authorization ids are not supported: leave the GS2 authzid empty")

    def _credential_for(self, username: str) -> tuple[bytes, bytes, bytes, int]:
        """scramp's auth_fn: the user's credential, or a made-up one that fails the proof like a wrong password."""
        try:
            credential = self._lookup(username)
        except Exception as exc:
            self._lookup_error = exc
            raise
        self._user = username
        self._known = credential is not None and credential.mechanism is self.mechanism
        if credential is None or credential.mechanism is not self.mechanism:
            credential = self._made_up(username)
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def _made_up(self, username: str) -> ScramCredential:
        salt_seed = f"{self.mechanism.value}\0{username}".encode()
        salt = hmac.digest(_FAKE_SALT_KEY, salt_seed, "sha256")[:SALT_BYTES]
        size = self.mechanism.digest_size
        return ScramCredential(
            self.mechanism, salt, DEFAULT_ITERATIONS, secrets.token_bytes(size), secrets.token_bytes(size)
        )


def _unescape(saslname: str) -> str:
    """SCRAM's saslname escaping (RFC 5802 section 5.1): ``=2C`` is a comma, ``=3D`` an equals sign."""
    return saslname.replace("=2C", ",").replace("=3D", "=")
