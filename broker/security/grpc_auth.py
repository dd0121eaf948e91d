"""Authentication on the gRPC listener: the ``Authentication`` service (SCRAM over two calls), the interceptor that
refuses every other call without a live session token, and :func:`principal_of` for the services.

The state lives in :class:`~odradek.broker.security.grpc_sessions.GrpcSessions`; this is its thin shell. On a
listener without SASL there is no interceptor and every call is ``User:ANONYMOUS``; the service is still served, and
answers ILLEGAL_SASL_STATE, so a client configured for SASL gets a clear error rather than UNIMPLEMENTED.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import grpc

from odradek.broker.metrics import WrappingInterceptor
from odradek.broker.security.caller import bind_principal, current_principal
from odradek.broker.security.grpc_sessions import GrpcSessions
from odradek.client.errors import ErrorCode
from odradek.proto import security_pb2, security_pb2_grpc

__all__ = ["SESSION_KEY", "AuthenticationService", "SaslInterceptor", "principal_of"]

SESSION_KEY = "odradek-session"
"""The gRPC metadata key of the session token."""


def principal_of(context: grpc.aio.ServicerContext) -> str:
    """The principal of the call being served: ``User:<name>`` on a SASL listener (the interceptor has refused
    calls without a live session before they reach a service), ``User:ANONYMOUS`` on a listener without SASL."""
    del context  # the interceptor bound the principal to this call's task
    return current_principal()


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class AuthenticationService(security_pb2_grpc.AuthenticationServicer):
    """``sessions`` is None on a listener without SASL."""

    def __init__(self, sessions: GrpcSessions | None, clock: Callable[[], int] = _now_ms) -> None:
        self.sessions = sessions
        self._clock = clock

    async def SaslAuthenticate(
        self, request: security_pb2.SaslAuthenticateRequest, context: grpc.aio.ServicerContext
    ) -> security_pb2.SaslAuthenticateResponse:
        if self.sessions is None:
            return security_pb2.SaslAuthenticateResponse(
                error=ErrorCode.ILLEGAL_SASL_STATE, error_message="this listener does not use SASL authentication"
            )
        answer = self.sessions.authenticate(
            context.peer(), request.mechanism, request.auth_bytes, request.exchange, self._clock()
        )
        return security_pb2.SaslAuthenticateResponse(
            error=ErrorCode.ValueType(answer.error),
            error_message=answer.error_message,
            auth_bytes=answer.auth_bytes,
            exchange=answer.exchange,
            session_token=answer.session_token,
            session_lifetime_ms=answer.session_lifetime_ms,
            mechanisms=answer.mechanisms,
        )


class SaslInterceptor(WrappingInterceptor):
    """On a SASL listener: every call but SaslAuthenticate needs the ``odradek-session`` token of a session issued
    on the same connection and still live, else it ends with UNAUTHENTICATED before any service sees it."""

    def __init__(self, sessions: GrpcSessions, clock: Callable[[], int] = _now_ms) -> None:
        super().__init__()
        self.sessions = sessions
        self._clock = clock

    def wrap(self, api: str, inner: Callable[..., Any]) -> Callable[..., Any] | None:
        if api == "SaslAuthenticate":
            return None
        sessions, clock = self.sessions, self._clock

        async def handle(request: Any, context: grpc.aio.ServicerContext) -> Any:
            token = next((v for k, v in context.invocation_metadata() or () if k == SESSION_KEY), None)
            who = None if not isinstance(token, str) else sessions.principal(context.peer(), token, clock())
            if who is None:
                reason = "no session" if token is None else "unknown or expired session"
                await context.abort(
                    grpc.StatusCode.UNAUTHENTICATED,
                    f"SASL_AUTHENTICATION_FAILED: {reason} on this connection: authenticate with SaslAuthenticate",
                )
            bind_principal(who)
            return await inner(request, context)

        return handle
