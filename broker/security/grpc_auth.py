"""Authentication on the gRPC listener: the ``Authentication`` service (SCRAM over two calls), the interceptors that
bind each call's principal (and refuse calls that have none), and :func:`principal_of` for the services.

The SASL state lives in :class:`~odradek.broker.security.grpc_sessions.GrpcSessions`; this is its thin shell. Who a
call is, by listener protocol:

- PLAINTEXT, and SSL without client certificates: ``User:ANONYMOUS`` (no interceptor). The Authentication service
  is still served, and answers ILLEGAL_SASL_STATE, so a client configured for SASL gets a clear error rather than
  UNIMPLEMENTED.
- SSL with ``ssl.client.auth=required``: the client certificate's principal (:class:`CertificateInterceptor`).
- SASL_PLAINTEXT: the SASL user of the call's session token; a call without a live one is UNAUTHENTICATED. (A node
  refuses it on its broker listener, which brokers call without SASL; the controller listener runs no SASL.)
- SASL_SSL (with required client certificates): the SASL user when the call carries a session token, else the
  certificate's principal. Nodes call each other this way: they have certificates, not SASL credentials.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import grpc

from odradek.broker.metrics import WrappingInterceptor
from odradek.broker.security.grpc_sessions import GrpcSessions
from odradek.broker.security.tls_identity import CertificatePrincipals
from odradek.client.common.call_context import principal_of, request_context_of
from odradek.client.common.request_context import RequestContext
from odradek.client.errors import ErrorCode
from odradek.proto import security_pb2, security_pb2_grpc

__all__ = [
    "SESSION_KEY",
    "AuthenticationService",
    "CertificateInterceptor",
    "SaslInterceptor",
    "certificate_principal",
    "grpc_request_context",
    "principal_of",
]

SESSION_KEY = "odradek-session"
"""The gRPC metadata key of the session token."""

PEM_CERT_KEY = "x509_pem_cert"
"""Where grpcio's auth context gives the verified peer certificate (PEM)."""


class CallContext:
    """A gRPC call's servicer context with what the node's interceptors established for the call: its principal,
    and whether quotas apply to it. Interceptors hand it inward in place of the context they were given, so the
    servicer reads who is calling from the context it takes, never from the task it runs in; everything else is the
    wrapped context's."""

    __slots__ = ("_context", "principal", "quotas_apply")

    def __init__(self, context: Any, principal: str | None = None, quotas_apply: bool | None = None) -> None:
        self._context = context
        self.principal: str = principal if principal is not None else principal_of(context)
        self.quotas_apply: bool = quotas_apply if quotas_apply is not None else getattr(context, "quotas_apply", True)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


def grpc_request_context(context: Any) -> RequestContext:
    """Who makes the gRPC call ``context`` serves, as the services take it: the principal the interceptors
    established, the peer, the client id of the call's metadata, and whether quotas apply to it
    (``client/common/call_context.py``, which the controller's adapters read too)."""
    return request_context_of(context)


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


def certificate_principal(certificates: CertificatePrincipals, context: grpc.aio.ServicerContext) -> str | None:
    """The principal of the call's verified client certificate; None when the connection presented none.
    Raises NoMatchingRule when no ``ssl.principal.mapping.rules`` rule maps its subject."""
    pem = next(iter(context.auth_context().get(PEM_CERT_KEY, ())), None)
    return None if pem is None else certificates.of_pem(pem)


async def _abort_unmapped(context: grpc.aio.ServicerContext, error: ValueError) -> None:
    await context.abort(grpc.StatusCode.UNAUTHENTICATED, f"SASL_AUTHENTICATION_FAILED: client certificate: {error}")


class CertificateInterceptor(WrappingInterceptor):
    """On an SSL listener that requires client certificates: each call is its certificate's principal."""

    def __init__(self, certificates: CertificatePrincipals) -> None:
        super().__init__()
        self.certificates = certificates

    def wrap(self, api: str, inner: Callable[..., Any]) -> Callable[..., Any] | None:
        certificates = self.certificates

        async def handle(request: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                who = certificate_principal(certificates, context)
            except ValueError as e:
                await _abort_unmapped(context, e)
            if who is None:  # the handshake requires a certificate; this guards a listener wired without
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, "a client certificate is required")
            return await inner(request, CallContext(context, principal=who))

        return handle


class SaslInterceptor(WrappingInterceptor):
    """On a SASL listener: every call but SaslAuthenticate needs the ``odradek-session`` token of a session issued
    on the same connection and still live, else it ends with UNAUTHENTICATED before any service sees it.

    With ``certificates`` (SASL_SSL requiring client certificates), a call without a token is its certificate's
    principal instead; a call with a token that is not live is still refused, so a client's session renewal works
    as on SASL_PLAINTEXT."""

    def __init__(
        self,
        sessions: GrpcSessions,
        clock: Callable[[], int] = _now_ms,
        certificates: CertificatePrincipals | None = None,
    ) -> None:
        super().__init__()
        self.sessions = sessions
        self._clock = clock
        self.certificates = certificates

    def wrap(self, api: str, inner: Callable[..., Any]) -> Callable[..., Any] | None:
        if api == "SaslAuthenticate":
            return None
        sessions, clock, certificates = self.sessions, self._clock, self.certificates

        async def handle(request: Any, context: grpc.aio.ServicerContext) -> Any:
            token = next((v for k, v in context.invocation_metadata() or () if k == SESSION_KEY), None)
            who = None if not isinstance(token, str) else sessions.principal(context.peer(), token, clock())
            if token is None and certificates is not None:
                try:
                    who = certificate_principal(certificates, context)
                except ValueError as e:
                    await _abort_unmapped(context, e)
            if who is None:
                reason = "no session" if token is None else "unknown or expired session"
                await context.abort(
                    grpc.StatusCode.UNAUTHENTICATED,
                    f"SASL_AUTHENTICATION_FAILED: {reason} on this connection: authenticate with SaslAuthenticate",
                )
            return await inner(request, CallContext(context, principal=who))

        return handle
