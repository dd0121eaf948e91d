"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): salted credentials and the server side of the exchange.

Sans-I/O: :class:`ScramServerExchange` takes the client's two messages and returns the server's two, so the Kafka
listener (SaslAuthenticate) and the gRPC handshake drive the same core. The exchange is written here from RFC 5802
(section 3's computations, section 7's grammar), server side only, with what a Kafka broker needs around it:

- Credentials hold the salt, the iteration count, StoredKey and ServerKey, never the password. Kafka's
  AlterUserScramCredentials (KIP-554) carries the client-computed SaltedPassword, from which
  :func:`credential_from_salted_password` derives the keys. As in Kafka, the password is not SASLprep-normalised:
  SaltedPassword is PBKDF2 over its UTF-8 bytes, which is what Kafka's clients compute. Any non-empty salt is
  taken, as Kafka takes it: the client that sets a credential chooses the salt's length.
- The user name is looked up as sent, after SCRAM's ``=2C``/``=3D`` unescaping and without SASLprep, as Kafka does:
  the name a credential was stored under is the name that logs in.
- An unknown user (or one without a credential for this mechanism) gets a server-first message like anyone's, with
  a salt derived from the name, and fails at the final message exactly as a wrong password does: the answer does not
  tell whether the user exists.
- Refused, each with a clear :class:`ScramAuthenticationError`: an authorization id (``a=``; one differing from the
  user name is refused with Kafka's message), channel binding (``p=``: no -PLUS mechanism is offered), Kafka's
  delegation-token extension (``tokenauth``) and any other SCRAM extension, malformed messages, a client-final whose
  nonce is not the exchange's, calls out of order.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from typing import NoReturn

__all__ = [
    "DEFAULT_ITERATIONS",
    "MAX_ITERATIONS",
    "MIN_ITERATIONS",
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
SALT_BYTES = 24
"""The length of the salts :func:`make_credential` draws (kafka-python's too)."""
SERVER_NONCE_BYTES = 24
"""Random bytes in the server's part of the nonce (32 characters once base64url-encoded)."""


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
        if not self.salt:
            raise ValueError("a SCRAM salt must not be empty")
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

    ``lookup`` returns the stored credential for a user name (as sent, after SCRAM's ``=2C``/``=3D`` unescaping) or
    None; an exception it raises propagates unchanged (a broker fault, not a failed login). Any failure raises
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
        self._client_first: _ClientFirst | None = None
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None
        self._known = False

    @property
    def complete(self) -> bool:
        return self._state == _DONE

    @property
    def username(self) -> str:
        """The authenticated user; only once :meth:`final` has succeeded."""
        if self._state != _DONE:
            raise ScramAuthenticationError("the SCRAM exchange has not completed")
        assert self._client_first is not None  # set with the AWAIT_FINAL state
        return self._client_first.username

    def first(self, client_first: bytes) -> bytes:
        """The server-first message for the client-first message: ``r=<client nonce><server nonce>,s=<salt>,i=<n>``."""
        with self._ending_on_error():
            if self._state != _START:
                raise ScramAuthenticationError(
                    "unexpected SCRAM client-first message: the exchange has already started"
                )
            parsed = _parse_client_first(_decode(client_first, "client-first"))
            credential = self._credential_for(parsed.username)
        server_nonce = secrets.token_urlsafe(SERVER_NONCE_BYTES) if self._server_nonce is None else self._server_nonce
        self._nonce = parsed.nonce + server_nonce
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        self._client_first, self._credential = parsed, credential
        self._state = _AWAIT_FINAL
        return self._server_first.encode("utf-8")

    def final(self, client_final: bytes) -> bytes:
        """The server-final message (``v=`` and the server's signature) once the client's proof checks out."""
        with self._ending_on_error():
            if self._state != _AWAIT_FINAL:
                what = "before the client-first message" if self._state == _START else "after the exchange ended"
                raise ScramAuthenticationError(f"unexpected SCRAM client-final message {what}")
            client_first, credential = self._client_first, self._credential
            assert client_first is not None and credential is not None  # set with the AWAIT_FINAL state
            parsed = _parse_client_final(_decode(client_final, "client-final"))
            if not hmac.compare_digest(parsed.nonce.encode("utf-8"), self._nonce.encode("utf-8")):
                raise ScramAuthenticationError("Authentication failed: invalid nonce in the SCRAM client-final message")
            if parsed.channel_binding != _b64(client_first.gs2_header.encode("utf-8")):
                _malformed("client-final", "the channel binding c= is not the base64 of the GS2 header")
            auth_message = f"{client_first.bare},{self._server_first},{parsed.without_proof}".encode()
            if not (_proof_holds(credential, auth_message, parsed.proof) and self._known):
                raise ScramAuthenticationError(self._invalid_credentials())
        self._state = _DONE
        signature = hmac.digest(credential.server_key, auth_message, self.mechanism.hash_name)
        return b"v=" + base64.b64encode(signature)

    # -- internals ------------------------------------------------------------------------------------------------

    @contextmanager
    def _ending_on_error(self) -> Iterator[None]:
        """Whatever goes wrong ends the exchange, a lookup fault included: a client gets one attempt per exchange."""
        try:
            yield
        except BaseException:
            self._state = _FAILED
            raise

    def _invalid_credentials(self) -> str:
        # Kafka's wording for a failed SCRAM login, the same for a wrong password and an unknown user.
        return (
            "Authentication failed during authentication due to invalid credentials with SASL mechanism "
            + self.mechanism.value
        )

    def _credential_for(self, username: str) -> ScramCredential:
        """The user's credential, or a made-up one that fails the proof like a wrong password."""
        credential = self._lookup(username)
        self._known = credential is not None and credential.mechanism is self.mechanism
        if credential is None or not self._known:
            return self._made_up(username)
        return credential

    def _made_up(self, username: str) -> ScramCredential:
        salt_seed = f"{self.mechanism.value}\0{username}".encode()
        salt = hmac.digest(_FAKE_SALT_KEY, salt_seed, "sha256")[:SALT_BYTES]
        size = self.mechanism.digest_size
        return ScramCredential(
            self.mechanism, salt, DEFAULT_ITERATIONS, secrets.token_bytes(size), secrets.token_bytes(size)
        )


# -- RFC 5802's messages ------------------------------------------------------------------------------------------

# saslname: UTF-8 without NUL, ',' and '=', the last two escaped as =2C and =3D.
_SASLNAME = re.compile(r"(?:[^\x00,=]|=2C|=3D)+")
# printable: the nonce's characters, ASCII 0x21-0x7E but ','.
_PRINTABLE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")


@dataclass(frozen=True)
class _ClientFirst:
    gs2_header: str
    bare: str
    """client-first-message-bare: the first part of the AuthMessage."""
    username: str
    nonce: str


@dataclass(frozen=True)
class _ClientFinal:
    channel_binding: str
    nonce: str
    proof: bytes
    without_proof: str
    """client-final-message-without-proof: the last part of the AuthMessage."""


def _parse_client_first(text: str) -> _ClientFirst:
    """``gs2-header client-first-message-bare``: ``n,,n=<saslname>,r=<nonce>`` (or ``y,,``), nothing more."""
    if text.startswith("p"):
        raise ScramAuthenticationError(
            "SCRAM channel binding is not supported: use SCRAM-SHA-256 or SCRAM-SHA-512 without -PLUS"
        )
    pieces = text.split(",", 2)
    if len(pieces) != 3 or pieces[0] not in ("n", "y"):
        _malformed("client-first", "expected a GS2 header 'n,,' or 'y,,'")
    flag, authzid, bare = pieces
    attributes = bare.split(",")
    if len(attributes) < 2 or not attributes[0].startswith("n=") or not attributes[1].startswith("r="):
        _malformed("client-first", "expected n=user,r=nonce")
    _refuse_extensions(attributes[2:])
    saslname, nonce = attributes[0][2:], attributes[1][2:]
    if authzid:
        _refuse_authzid(authzid, saslname)
    if not _SASLNAME.fullmatch(saslname):
        _malformed("client-first", "the user name must not be empty, and ',' and '=' in it must be sent as =2C and =3D")
    if not _PRINTABLE.fullmatch(nonce):
        _malformed("client-first", "the nonce must be printable ASCII")
    return _ClientFirst(f"{flag},{authzid},", bare, _unescape(saslname), nonce)


def _refuse_extensions(attributes: list[str]) -> None:
    if any("=" not in attr or attr.startswith("=") for attr in attributes):
        _malformed("client-first", "attributes must be name=value")
    extensions = [attr.split("=", 1)[0] for attr in attributes]
    if "tokenauth" in extensions:
        raise ScramAuthenticationError("SCRAM delegation-token authentication (tokenauth) is not supported")
    if extensions:
        raise ScramAuthenticationError(f"SCRAM extensions are not supported: {', '.join(extensions)}")


def _refuse_authzid(authzid: str, saslname: str) -> NoReturn:
    """Kafka refuses an authorization id other than the user with its own message; odradek refuses them all."""
    if not authzid.startswith("a="):
        _malformed("client-first", "the GS2 authzid must be a=name")
    if _unescape(authzid[2:]) != _unescape(saslname):
        raise ScramAuthenticationError(
            "Authentication failed: Client requested an authorization id that is different from username"
        )
    raise ScramAuthenticationError("SCRAM authorization ids are not supported: leave the GS2 authzid empty")


def _parse_client_final(text: str) -> _ClientFinal:
    """``c=<base64 GS2 header>,r=<nonce>[,extensions],p=<base64 proof>``; extensions are kept for the AuthMessage,
    as RFC 5802 has the server take them there."""
    attributes = text.split(",")
    if (
        len(attributes) < 3
        or not attributes[0].startswith("c=")
        or not attributes[1].startswith("r=")
        or not attributes[-1].startswith("p=")
    ):
        _malformed("client-final", "expected c=binding,r=nonce,p=proof")
    if any("=" not in attr or attr.startswith("=") for attr in attributes[2:-1]):
        _malformed("client-final", "attributes must be name=value")
    try:
        proof = base64.b64decode(attributes[-1][2:], validate=True)
    except ValueError:  # binascii.Error, or a character outside ASCII
        _malformed("client-final", "the proof p= is not base64")
    return _ClientFinal(attributes[0][2:], attributes[1][2:], proof, ",".join(attributes[:-1]))


def _proof_holds(credential: ScramCredential, auth_message: bytes, proof: bytes) -> bool:
    """RFC 5802 section 3: ClientKey = ClientProof XOR HMAC(StoredKey, AuthMessage), and the proof holds iff
    H(ClientKey) is StoredKey (compared in constant time: the StoredKey is the secret)."""
    hash_name = credential.mechanism.hash_name
    signature = hmac.digest(credential.stored_key, auth_message, hash_name)
    if len(proof) != len(signature):
        return False
    client_key = (int.from_bytes(proof) ^ int.from_bytes(signature)).to_bytes(len(signature))
    return hmac.compare_digest(hashlib.new(hash_name, client_key).digest(), credential.stored_key)


def _decode(message: bytes, what: str) -> str:
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        _malformed(what, "not UTF-8")


def _malformed(what: str, why: str) -> NoReturn:
    raise ScramAuthenticationError(f"malformed SCRAM {what} message: {why}")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unescape(saslname: str) -> str:
    """SCRAM's saslname escaping (RFC 5802 section 5.1): ``=2C`` is a comma, ``=3D`` an equals sign."""
    return saslname.replace("=2C", ",").replace("=3D", "=")
