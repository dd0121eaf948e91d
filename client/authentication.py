"""Client-side SCRAM on gRPC channels: each channel logs in before its first call and again when the broker no
longer knows its session.

A broker binds a session to the HTTP/2 connection it was made on, so a channel that reconnects (a new local port)
or outlives the session's lifetime gets UNAUTHENTICATED; the channel then logs in again and repeats the call once
(the broker refused it before serving it). A refused login raises
:class:`~odradek.client.errors.AuthenticationFailedError` at once: a wrong password is not retried. The exchange
itself is odradek's own (:mod:`odradek.client.scram_client`): no SASLprep, any salt, as the broker takes them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc

from odradek.client.errors import ConfigError, ErrorCode, error_for_code
from odradek.client.scram_client import ScramClientExchange
from odradek.proto import security_pb2, security_pb2_grpc

__all__ = ["SESSION_KEY", "ChannelAuthenticator", "SaslCredentials", "sasl_credentials"]

SESSION_KEY = "odradek-session"
_AUTH_METHOD = "/odradek.v1.Authentication/SaslAuthenticate"


@dataclass(frozen=True)
class SaslCredentials:
    mechanism: str
    username: str
    password: str = field(repr=False)


def sasl_credentials(config: Any) -> SaslCredentials | None:
    """The credentials a parsed client config asks to log in with, or None (security.protocol without SASL)."""
    if not config.security_protocol.startswith("SASL_"):
        return None
    if not config.sasl_username or not config.sasl_password:
        raise ConfigError(f"security.protocol {config.security_protocol} needs sasl.username and sasl.password")
    return SaslCredentials(config.sasl_mechanism, config.sasl_username, config.sasl_password)


def _method(details: grpc.aio.ClientCallDetails) -> str:
    method = details.method
    return method.decode() if isinstance(method, bytes) else str(method)


class ChannelAuthenticator(grpc.aio.UnaryUnaryClientInterceptor):
    """One channel's login: an interceptor of that channel (``attach`` it once the channel exists)."""

    def __init__(self, credentials: SaslCredentials) -> None:
        self.credentials = credentials
        self._stub: Any = None
        self._token: str | None = None
        self._lock = asyncio.Lock()

    def attach(self, channel: grpc.aio.Channel) -> None:
        self._stub = security_pb2_grpc.AuthenticationStub(channel)

    async def intercept_unary_unary(
        self,
        continuation: Callable[[grpc.aio.ClientCallDetails, Any], Any],
        client_call_details: grpc.aio.ClientCallDetails,
        request: Any,
    ) -> Any:
        if _method(client_call_details) == _AUTH_METHOD:
            return await continuation(client_call_details, request)
        token = await self._session(client_call_details.timeout)
        call = await continuation(_with_token(client_call_details, token), request)
        if await call.code() != grpc.StatusCode.UNAUTHENTICATED:
            return call
        if self._token == token:  # not already replaced by a concurrent call's login
            self._token = None
        token = await self._session(client_call_details.timeout)
        return await continuation(_with_token(client_call_details, token), request)

    async def _session(self, timeout: float | None) -> str:
        async with self._lock:
            if self._token is None:
                self._token = await self._login(timeout)
            return self._token

    async def _login(self, timeout: float | None) -> str:
        c, stub = self.credentials, self._stub
        if stub is None:
            raise RuntimeError("ChannelAuthenticator used before attach()")
        client = ScramClientExchange(c.mechanism, c.username, c.password)
        first = await stub.SaslAuthenticate(
            security_pb2.SaslAuthenticateRequest(mechanism=c.mechanism, auth_bytes=client.first()), timeout=timeout
        )
        _check(first)
        final = await stub.SaslAuthenticate(
            security_pb2.SaslAuthenticateRequest(exchange=first.exchange, auth_bytes=client.final(first.auth_bytes)),
            timeout=timeout,
        )
        _check(final)
        client.verify(final.auth_bytes)  # the broker proves it holds the credential too
        return str(final.session_token)


def _check(answer: security_pb2.SaslAuthenticateResponse) -> None:
    if answer.error != ErrorCode.NONE:
        raise error_for_code(answer.error, answer.error_message)


def _with_token(details: grpc.aio.ClientCallDetails, token: str) -> grpc.aio.ClientCallDetails:
    metadata = grpc.aio.Metadata(*(tuple(details.metadata) if details.metadata else ()), (SESSION_KEY, token))
    return grpc.aio.ClientCallDetails(
        details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
    )
