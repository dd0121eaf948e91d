"""SaslHandshake (17) and SaslAuthenticate (36): Kafka's framing of the SCRAM exchange, over the connection's
SaslSession (broker/security/sasl_session.py), which decides every answer.

Registered only on a SASL listener, so a plaintext listener advertises neither. SaslHandshake is served at v1 only:
v0 would be followed by raw SASL tokens outside of Kafka's request framing, which no current client sends.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from odradek.broker.kafka.apis import ApiRegistry, schema_api
from odradek.broker.kafka.wire import KafkaContext, ProtocolError
from odradek.broker.security.sasl_session import SaslSession

HANDSHAKE_VERSION = 1
AUTHENTICATE_VERSIONS = (0, 2)


def _session(ctx: KafkaContext) -> SaslSession:
    session = ctx.connection.state.sasl
    if session is None:  # registered on a SASL listener only, whose dispatcher gives every connection a session
        raise ProtocolError("a SASL request on a connection without SASL")
    return session


async def _handshake(ctx: KafkaContext, version: int, request: Any) -> Any:
    answer = _session(ctx).handshake(request.mechanism)
    return SaslHandshakeResponse(version=version, error_code=answer.error_code, mechanisms=list(answer.mechanisms))


async def _authenticate(ctx: KafkaContext, version: int, request: Any) -> Any:
    answer = _session(ctx).authenticate(bytes(request.auth_bytes))
    return SaslAuthenticateResponse(
        version=version,
        error_code=answer.error_code,
        error_message=answer.error_message,
        auth_bytes=answer.auth_bytes,
        session_lifetime_ms=0,  # no re-authentication (KIP-368): the session lasts as long as the connection
    )


def register(registry: ApiRegistry) -> None:
    registry.add(*schema_api(SaslHandshakeRequest, HANDSHAKE_VERSION, HANDSHAKE_VERSION, _handshake))
    registry.add(*schema_api(SaslAuthenticateRequest, *AUTHENTICATE_VERSIONS, _authenticate))
