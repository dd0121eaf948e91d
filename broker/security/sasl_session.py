"""One Kafka connection's SASL authentication, sans-I/O: which requests it may send, and the SaslHandshake and
SaslAuthenticate answers, as Kafka's broker gives them.

On a SASL listener a connection starts unauthenticated and may send only ApiVersions, SaslHandshake (v1: the
mechanism) and SaslAuthenticate (the SCRAM messages, two rounds). Anything else, or a request out of that order,
is an illegal SASL state and the connection is closed without an answer, as Kafka does. A mechanism the listener
does not enable is answered (UNSUPPORTED_SASL_MECHANISM and the enabled list) and the connection then closed; so is
a failed exchange (SASL_AUTHENTICATION_FAILED with the reason). Once authenticated, the connection's principal is
``User:<name>`` and a further SaslHandshake or SaslAuthenticate is answered ILLEGAL_SASL_STATE (no
re-authentication: the session lifetime is 0, "never expires").

A connection whose TLS handshake verified a client certificate (SASL_SSL with ``ssl.client.auth`` requested or
required) is already authenticated as the certificate's principal: it may send any request without SASL (that is
how a follower fetches over a leader's Kafka listener, nodes having no SASL credentials), and a client that starts
a SaslHandshake anyway goes through the exchange as above and becomes its SASL user.

SaslHandshake v0 (raw SASL tokens outside of Kafka's framing) is not served: every client that speaks SCRAM to a
Kafka broker of the last years (librdkafka, the Java client, kafka-python) uses v1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from odradek.client.common.scram import Mechanism, ScramAuthenticationError, ScramCredential, ScramServerExchange
from odradek.client.errors import ErrorCode

__all__ = [
    "ANONYMOUS",
    "API_VERSIONS_KEY",
    "SASL_AUTHENTICATE_KEY",
    "SASL_HANDSHAKE_KEY",
    "AuthenticateAnswer",
    "CredentialLookup",
    "HandshakeAnswer",
    "IllegalSaslState",
    "SaslSession",
    "principal",
]

API_VERSIONS_KEY = 18
SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36

ANONYMOUS = "User:ANONYMOUS"

CredentialLookup = Callable[[str, Mechanism], ScramCredential | None]
"""(user name, mechanism) -> the stored credential, or None: where the node keeps SCRAM credentials."""


def principal(user: str) -> str:
    return f"User:{user}"


class IllegalSaslState(Exception):
    """A request the connection may not send in its SASL state: the connection is closed without an answer."""


class _State(Enum):
    HANDSHAKE = "handshake"  # ApiVersions or SaslHandshake
    AUTHENTICATE = "authenticate"  # SaslAuthenticate only
    COMPLETE = "complete"
    FAILED = "failed"  # the answer is sent, then the connection closed


@dataclass(frozen=True, slots=True)
class HandshakeAnswer:
    error_code: int
    mechanisms: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AuthenticateAnswer:
    error_code: int
    error_message: str | None
    auth_bytes: bytes


class SaslSession:
    """The SASL state of one connection to a listener that requires SASL, over the enabled ``mechanisms``."""

    def __init__(
        self, mechanisms: Sequence[Mechanism], lookup: CredentialLookup, certificate_principal: str | None = None
    ) -> None:
        """``certificate_principal``: the connection's verified client certificate's principal, if it has one."""
        if not mechanisms:
            raise ValueError("a SASL listener needs at least one enabled mechanism")
        self.mechanisms = tuple(mechanisms)
        self.certificate_principal = certificate_principal
        self._lookup = lookup
        self._state = _State.HANDSHAKE
        self._exchange: ScramServerExchange | None = None
        self._first_done = False
        self._user: str | None = None
        self.close_reason: str | None = None
        """Set once an answer is to be the connection's last: the listener closes it after sending."""

    @property
    def authenticated(self) -> bool:
        return self._state is _State.COMPLETE

    @property
    def principal(self) -> str:
        """``User:<name>`` once authenticated; before, the certificate's principal, else ANONYMOUS (only the SASL
        APIs run then)."""
        if self._user is not None:
            return principal(self._user)
        return self.certificate_principal or ANONYMOUS

    def check(self, api_key: int, api_name: str) -> None:
        """Raise :class:`IllegalSaslState` unless a request of ``api_key`` may be served now."""
        state = self._state
        if state is _State.COMPLETE:
            return
        if state is _State.HANDSHAKE and (
            api_key in (API_VERSIONS_KEY, SASL_HANDSHAKE_KEY) or self.certificate_principal is not None
        ):
            return
        if state is _State.AUTHENTICATE and api_key == SASL_AUTHENTICATE_KEY:
            return
        if state is _State.FAILED:
            raise IllegalSaslState(f"ILLEGAL_SASL_STATE: {api_name} request after a failed SASL authentication")
        during = "handshake" if state is _State.HANDSHAKE else "authentication"
        raise IllegalSaslState(f"ILLEGAL_SASL_STATE: unexpected {api_name} request during the SASL {during}")

    def handshake(self, mechanism: str) -> HandshakeAnswer:
        """SaslHandshake v1: choose ``mechanism`` for the SaslAuthenticate requests that follow."""
        enabled = tuple(m.value for m in self.mechanisms)
        if self._state is _State.COMPLETE:
            return HandshakeAnswer(ErrorCode.ILLEGAL_SASL_STATE, enabled)
        self.check(SASL_HANDSHAKE_KEY, "SaslHandshake")
        chosen = next((m for m in self.mechanisms if m.value == mechanism), None)
        if chosen is None:
            self._fail(f"unsupported SASL mechanism {mechanism!r} (enabled: {', '.join(enabled)})")
            return HandshakeAnswer(ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled)
        self._exchange = ScramServerExchange(chosen, lambda user: self._lookup(user, chosen))
        self._state = _State.AUTHENTICATE
        return HandshakeAnswer(ErrorCode.NONE, enabled)

    def authenticate(self, auth_bytes: bytes) -> AuthenticateAnswer:
        """SaslAuthenticate: the next SCRAM message in, the server's next one out."""
        if self._state is _State.COMPLETE:
            return AuthenticateAnswer(
                ErrorCode.ILLEGAL_SASL_STATE, "SaslAuthenticate request received after successful authentication", b""
            )
        self.check(SASL_AUTHENTICATE_KEY, "SaslAuthenticate")
        exchange = self._exchange
        assert exchange is not None  # set with the AUTHENTICATE state
        try:
            if not self._first_done:
                server_first = exchange.first(auth_bytes)
                self._first_done = True
                return AuthenticateAnswer(ErrorCode.NONE, None, server_first)
            answer = exchange.final(auth_bytes)
        except ScramAuthenticationError as e:
            self._fail(f"SASL authentication failed: {e}")
            return AuthenticateAnswer(ErrorCode.SASL_AUTHENTICATION_FAILED, str(e), b"")
        self._user = exchange.username
        self._exchange = None
        self._state = _State.COMPLETE
        return AuthenticateAnswer(ErrorCode.NONE, None, answer)

    def _fail(self, reason: str) -> None:
        self._state = _State.FAILED
        self._exchange = None
        self.close_reason = reason
