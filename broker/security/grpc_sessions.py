"""The gRPC listener's authenticated sessions, sans-I/O: SCRAM exchanges in progress and the tokens they issue.

A gRPC call carries no connection state, so the principal is bound to the client's HTTP/2 connection by its peer
(``ipv4:host:port``, one per connection): an exchange started from a peer can only be finished from it, and the
session token it issues is accepted only from it and only for ``lifetime_ms``. A token copied to another
connection, or kept past its lifetime, is refused, and the client authenticates again (a reconnect has a new port).
Times are milliseconds the caller passes (``now_ms``), so tests drive expiry without waiting.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from odradek.broker.security.sasl_session import CredentialLookup, principal
from odradek.client.common.scram import Mechanism, ScramAuthenticationError, ScramServerExchange
from odradek.client.errors import ErrorCode

__all__ = [
    "DEFAULT_EXCHANGE_TIMEOUT_MS",
    "DEFAULT_LIFETIME_MS",
    "GrpcAuthAnswer",
    "GrpcSessions",
]

DEFAULT_LIFETIME_MS = 3_600_000
"""How long a session token is accepted; then the client authenticates again (its connection stays up)."""
DEFAULT_EXCHANGE_TIMEOUT_MS = 30_000
"""How long a started exchange waits for its client-final message."""
MAX_PENDING_EXCHANGES = 1024
"""Exchanges in progress at most: past it the oldest is dropped, so unfinished exchanges cannot fill memory."""


@dataclass(frozen=True, slots=True)
class GrpcAuthAnswer:
    error: int = ErrorCode.NONE
    error_message: str = ""
    auth_bytes: bytes = b""
    exchange: bytes = b""
    session_token: str = ""
    session_lifetime_ms: int = 0
    mechanisms: tuple[str, ...] = ()


@dataclass(slots=True)
class _Pending:
    peer: str
    exchange: ScramServerExchange
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class _Session:
    peer: str
    principal: str
    expires_ms: int


class GrpcSessions:
    """SCRAM over two SaslAuthenticate calls, then ``principal(peer, token, now_ms)`` for every later call."""

    def __init__(
        self,
        mechanisms: Sequence[Mechanism],
        lookup: CredentialLookup,
        *,
        lifetime_ms: int = DEFAULT_LIFETIME_MS,
        exchange_timeout_ms: int = DEFAULT_EXCHANGE_TIMEOUT_MS,
        token: Callable[[int], str] = secrets.token_urlsafe,
    ) -> None:
        if not mechanisms:
            raise ValueError("a SASL listener needs at least one enabled mechanism")
        if lifetime_ms < 1 or exchange_timeout_ms < 1:
            raise ValueError("session lifetime and exchange timeout must be positive")
        self.mechanisms = tuple(mechanisms)
        self._lookup = lookup
        self.lifetime_ms = lifetime_ms
        self.exchange_timeout_ms = exchange_timeout_ms
        self._token = token
        # Both in creation order, which is expiry order (one lifetime, one timeout): expired ones leave from the front.
        self._pending: dict[str, _Pending] = {}
        self._sessions: dict[str, _Session] = {}

    @property
    def session_count(self) -> int:
        return len(self._sessions)

    def authenticate(
        self, peer: str, mechanism: str, auth_bytes: bytes, exchange: bytes, now_ms: int
    ) -> GrpcAuthAnswer:
        """One SaslAuthenticate call from ``peer``: the first SCRAM round without ``exchange``, the second with it."""
        self._expire(now_ms)
        if not exchange:
            return self._first(peer, mechanism, auth_bytes, now_ms)
        handle = exchange.decode("ascii", "replace")
        pending = self._pending.pop(handle, None)
        if pending is None or pending.peer != peer:
            return _failed("unknown or expired SASL exchange: start again with the client-first message")
        try:
            server_final = pending.exchange.final(auth_bytes)
        except ScramAuthenticationError as e:
            return _failed(str(e))
        token = self._token(32)
        expires = now_ms + self.lifetime_ms
        self._sessions[token] = _Session(peer, principal(pending.exchange.username), expires)
        return GrpcAuthAnswer(auth_bytes=server_final, session_token=token, session_lifetime_ms=self.lifetime_ms)

    def principal(self, peer: str, token: str, now_ms: int) -> str | None:
        """The principal ``token`` was issued to, if it is live and was issued on ``peer``'s connection."""
        session = self._sessions.get(token)
        if session is None or session.peer != peer or session.expires_ms <= now_ms:
            return None
        return session.principal

    def _first(self, peer: str, mechanism: str, auth_bytes: bytes, now_ms: int) -> GrpcAuthAnswer:
        enabled = tuple(m.value for m in self.mechanisms)
        chosen = next((m for m in self.mechanisms if m.value == mechanism), None)
        if chosen is None:
            return GrpcAuthAnswer(
                ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                f"unsupported SASL mechanism {mechanism!r} (enabled: {', '.join(enabled)})",
                mechanisms=enabled,
            )
        lookup = self._lookup
        exchange = ScramServerExchange(chosen, lambda user: lookup(user, chosen))
        try:
            server_first = exchange.first(auth_bytes)
        except ScramAuthenticationError as e:
            return _failed(str(e))
        while len(self._pending) >= MAX_PENDING_EXCHANGES:
            del self._pending[next(iter(self._pending))]
        handle = self._token(16)
        self._pending[handle] = _Pending(peer, exchange, now_ms + self.exchange_timeout_ms)
        return GrpcAuthAnswer(auth_bytes=server_first, exchange=handle.encode("ascii"))

    def _expire(self, now_ms: int) -> None:
        pending, sessions = self._pending, self._sessions
        while pending:
            handle = next(iter(pending))
            if pending[handle].deadline_ms > now_ms:
                break
            del pending[handle]
        while sessions:
            token = next(iter(sessions))
            if sessions[token].expires_ms > now_ms:
                break
            del sessions[token]


def _failed(message: str) -> GrpcAuthAnswer:
    return GrpcAuthAnswer(ErrorCode.SASL_AUTHENTICATION_FAILED, message)
