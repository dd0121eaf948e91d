"""The Kafka listener's shared vocabulary: request headers, answers made of bytes and file ranges, and who sent a
request. Sans-I/O: nothing here touches a socket; answers may hold ``FileSlice`` ranges of segment files for
the sender."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from odradek.client.common.file_slice import Chunk
from odradek.client.common.request_context import KAFKA, RequestContext

if TYPE_CHECKING:
    from odradek.broker.security.sasl_session import SaslSession

ANONYMOUS_PRINCIPAL = "User:ANONYMOUS"

# Kafka's "never" for flexible versions and the like: an int16 no version reaches.
NO_VERSION = 32767


class ProtocolError(Exception):
    """A request the listener cannot parse or will not serve (malformed, unknown API key, unsupported version):
    its connection is closed with a log line, as Kafka does, and no other connection is affected."""


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """Request header v0-v2. ``size`` is the header's length in the frame: the body starts there."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    size: int


@dataclass(slots=True)
class Response:
    """What the listener writes for one request: the response header then the body (the listener adds the size
    prefix), and how long to hold this connection's next requests (KIP-219 muting of a throttled client)."""

    chunks: list[Chunk]
    throttle_ms: int = 0
    close_reason: str | None = None  # set: the listener closes the connection once this answer is sent


@dataclass(slots=True, eq=False)
class ConnectionState:
    """What a connection establishes while it lives (mutable, unlike ConnectionInfo): the principal of the client
    certificate the TLS handshake verified, and its SASL session on a SASL listener, created by the dispatcher at
    the connection's first request."""

    sasl: SaslSession | None = None
    certificate_principal: str | None = None


@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    """One client connection, as the listener accepted it."""

    connection_id: int
    listener: str
    peer_host: str
    peer_port: int
    state: ConnectionState = field(default_factory=ConnectionState, compare=False, repr=False)

    @property
    def certificate_principal(self) -> str | None:
        """The verified client certificate's principal (``User:<mapped DN>``); None without one."""
        return self.state.certificate_principal

    @property
    def principal(self) -> str:
        """``User:<name>`` once SASL authenticated the connection, else the client certificate's principal, else
        ``User:ANONYMOUS``."""
        session = self.state.sasl
        if session is not None and session.authenticated:
            return session.principal
        return self.state.certificate_principal or ANONYMOUS_PRINCIPAL


@dataclass(frozen=True, slots=True)
class KafkaContext:
    """Who sent a request: its connection and the header's client id, and whether quotas apply to it (not to a
    broker's replication or markers, as the dispatcher decides)."""

    connection: ConnectionInfo
    client_id: str
    quotas_apply: bool = True
    # The listener's Release for this request; None where later requests must wait for its answer (quotas apply).
    release: Release | None = None

    @property
    def principal(self) -> str:
        """The connection's authenticated principal (see ``ConnectionInfo.principal``)."""
        return self.connection.principal

    @property
    def peer(self) -> str:
        """The peer as gRPC names it (``ipv4:host:port``), the key quota muting and group members use."""
        host = self.connection.peer_host
        kind = "ipv6" if ":" in host else "ipv4"
        return (
            f"{kind}:[{host}]:{self.connection.peer_port}"
            if kind == "ipv6"
            else f"{kind}:{host}:{self.connection.peer_port}"
        )

    @property
    def request_context(self) -> RequestContext:
        """Who sent the request as the services take it: the connection's principal and peer, the header's client
        id, on the Kafka listener."""
        return RequestContext(
            principal=self.principal,
            client_id=self.client_id,
            peer=self.peer,
            listener=KAFKA,
            quotas_apply=self.quotas_apply,
            appended=self.release,
        )


class Reply(Protocol):
    """A handler's answer before encoding: the request quota's throttle is decided after the handler ran, and goes
    into the body's ``throttle_time_ms``."""

    @property
    def throttle_ms(self) -> int:
        """The throttle the handler itself decided (produce and fetch byte quotas), 0 if none."""
        ...

    def encode(self, throttle_ms: int) -> list[Chunk]:
        """The response body, with ``throttle_time_ms`` = ``throttle_ms`` where the version has the field."""
        ...


@dataclass(frozen=True, slots=True)
class NoResponse:
    """A request served without an answer (Produce with acks=0). It keeps the handler's throttle: such a client
    reads no ``throttle_time_ms``, so muting it (holding its next request) is all that holds it to its quota."""

    throttle_ms: int = 0

    def encode(self, throttle_ms: int) -> list[Chunk]:
        return []


Handler = Callable[[KafkaContext, RequestHeader, memoryview], Coroutine[Any, Any, Reply]]
"""Serves one API: the request body (after the header) to a reply, a NoResponse when no response is sent (Produce
with acks=0). Raises ProtocolError for a body it cannot parse."""

Release = Callable[[], None]
"""Called by a request's handler once the part of its work that must follow the connection's earlier requests and
precede its later ones is done (a produce's appends, before it waits for replication): the listener may then start
the connection's next request, and still writes the answers in request order."""

Dispatch = Callable[[ConnectionInfo, memoryview, Release], Awaitable[Response | None]]
"""The listener's view of the APIs: one request frame (without its size prefix) to what to write back, or None."""
