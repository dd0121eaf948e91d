"""gRPC channels to odradek nodes: one shared channel per address, sized for large record payloads.

gRPC's default 4 MiB receive limit is raised on both ends, and both ends share one keepalive policy: every
channel pings an idle connection every ``keepalive_time_ms`` (to notice a dead peer), and every server accepts
such pings. With gRPC's default server policy (at most one ping per 5 minutes without calls) a client pinging
every 30 s earns three strikes and a ``GOAWAY ENHANCE_YOUR_CALM too_many_pings``, which drops the connection.
Every channel and server in odradek (clients, fetchers, Raft, broker to controller) takes its options from
``channel_options`` so the two sides cannot drift apart.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

import grpc

from odradek.client.authentication import ChannelAuthenticator, SaslCredentials
from odradek.client.tls import TlsFiles

Req = TypeVar("Req")
Resp = TypeVar("Resp")

DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
KEEPALIVE_TIME_MS = 30_000
# Overrides KEEPALIVE_TIME_MS for this process and the processes it starts (tests shrink it to see the policy at
# work in seconds; an operator may lengthen it behind a proxy that dislikes pings).
KEEPALIVE_ENV = "ODRADEK_GRPC_KEEPALIVE_TIME_MS"


def keepalive_time_ms() -> int:
    value = os.environ.get(KEEPALIVE_ENV, "")
    if not value:
        return KEEPALIVE_TIME_MS
    if not value.isdigit() or int(value) < 100:
        raise ValueError(f"{KEEPALIVE_ENV}={value!r} must be an integer number of milliseconds >= 100")
    return int(value)


def keepalive_options(time_ms: int | None = None) -> list[tuple[str, int]]:
    """Both halves of the keepalive policy; gRPC applies the client half to channels and the server half to
    servers, so one list serves both."""
    time_ms = time_ms or keepalive_time_ms()
    return [
        # Sending: ping an idle connection every time_ms, even with no call open, without a limit.
        ("grpc.keepalive_time_ms", time_ms),
        ("grpc.keepalive_timeout_ms", min(10_000, time_ms)),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
        # Receiving (servers): accept a ping every time_ms / 2 without data, so timer jitter earns no strike.
        ("grpc.http2.min_ping_interval_without_data_ms", time_ms // 2),
        ("grpc.http2.max_ping_strikes", 2),
    ]


def channel_options(
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, keepalive_ms: int | None = None
) -> list[tuple[str, int]]:
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        *keepalive_options(keepalive_ms),
        # Reconnect quickly after a node restarts: failover time matters more than connection churn here.
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.min_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 1000),
    ]


DEFAULT_PORT = 9092


def parse_servers(value: str | list[str]) -> list[str]:
    """``host:port,host`` -> ``["host:port", "host:9092"]``, validated. A missing port defaults to 9092, as Kafka's
    tools and librdkafka do; an IPv6 address takes brackets (``[::1]`` or ``[::1]:9092``)."""
    items = value if isinstance(value, list) else value.split(",")
    servers = [with_port(s.strip()) for s in items if s.strip()]
    if not servers:
        raise ValueError("bootstrap.servers is empty")
    return servers


def with_port(server: str) -> str:
    if server.startswith("["):
        end = server.find("]")
        rest = server[end + 1 :] if end > 0 else ""
        if end <= 1 or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            raise ValueError(f"bootstrap server '{server}' is not [ipv6]:port")
        return server if rest else f"{server}:{DEFAULT_PORT}"
    host, colon, port = server.partition(":")
    if not colon:
        return f"{server}:{DEFAULT_PORT}"
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bootstrap server '{server}' is not host:port")
    return server


CLIENT_ID_KEY = "client-id"  # the gRPC metadata key a client's ``client.id`` travels under (quotas key on it)
# Marks a broker's own calls to other brokers, which client quotas exempt when the caller may perform ClusterAction
# (a node's principal, under an authorizer): a client that sets it gains nothing there.
INTER_BROKER_KEY = "odradek-inter-broker"


SecurityFor = Callable[[str], TlsFiles | None]


def _plaintext(_address: str) -> TlsFiles | None:
    return None


_inter_node: SecurityFor = _plaintext


def set_inter_node_security(security_for: SecurityFor | None) -> None:
    """How this process's node reaches other nodes (TLS files per address, None for plaintext), for every pool made
    without an explicit ``security``: a node installs it once at start (one node per process) instead of handing
    it to each of the many components that call other nodes. ``None`` restores plaintext."""
    global _inter_node
    _inter_node = security_for or _plaintext


class _NodeDefault:
    """``ChannelPool``'s default security: the node's inter-node setting at the time a channel is made."""


NODE_DEFAULT = _NodeDefault()
# The hint a plaintext client adds to a connection closed during setup: what a TLS listener does to a plaintext
# HTTP/2 preface.
TLS_HINT = "the server closed the connection at once: if its listener uses TLS, set security.protocol=SSL"


def tls_hint(details: str, security: TlsFiles | None) -> str:
    """``details`` of a failed call, with a hint naming TLS when a plaintext channel was closed as it opened."""
    if security is None and ("Socket closed" in details or "Connection reset" in details):
        return f"{details} ({TLS_HINT})"
    return details


class ChannelPool:
    """Async channels keyed by address, created lazily and closed together.

    With a ``client_id`` every call on the pool's channels carries it as gRPC metadata (``client-id``), the way a
    Kafka request header carries it: brokers key their quotas on it. It is added by wrapping the channel's
    multicallables rather than by a gRPC interceptor: an intercepted call costs about 25 µs more client CPU per RPC
    than the metadata itself (measured with small unary calls), and the caller keeps gRPC's own call objects."""

    def __init__(
        self,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        client_id: str | None = None,
        inter_broker: bool = False,
        security: TlsFiles | _NodeDefault | None = NODE_DEFAULT,
        sasl: SaslCredentials | None = None,
    ) -> None:
        """``inter_broker``: the pool of a broker calling other brokers (see ``INTER_BROKER_KEY``). ``security``: TLS
        files for every channel (a client's ssl.* settings), None for plaintext; by default the node's inter-node
        setting (``set_inter_node_security``). ``sasl``: each channel logs in with these before its first call
        (client/authentication.py)."""
        self._sasl = sasl
        self._options = channel_options(max_message_bytes)
        self._security = security
        metadata: tuple[tuple[str, str], ...] = ((CLIENT_ID_KEY, client_id),) if client_id is not None else ()
        if inter_broker:
            metadata += ((INTER_BROKER_KEY, "1"),)
        self._metadata = metadata or None
        self._channels: dict[str, grpc.aio.Channel] = {}

    def get(self, address: str) -> grpc.aio.Channel:
        channel = self._channels.get(address)
        if channel is None:
            security = self.security_for(address)
            login = ChannelAuthenticator(self._sasl) if self._sasl is not None else None
            interceptors = [login] if login is not None else None
            if security is None:
                channel = grpc.aio.insecure_channel(address, options=self._options, interceptors=interceptors)
            else:
                credentials = security.channel_credentials()
                channel = grpc.aio.secure_channel(
                    address, credentials, options=self._options, interceptors=interceptors
                )
            if login is not None:
                login.attach(channel)
            if self._metadata is not None:
                channel = _MetadataChannel(channel, self._metadata)
            self._channels[address] = channel
        return channel

    def security_for(self, address: str) -> TlsFiles | None:
        """The TLS files a channel to ``address`` uses (None: plaintext)."""
        if isinstance(self._security, _NodeDefault):
            return _inter_node(address)
        return self._security

    async def drop(self, address: str) -> None:
        """Forget a channel (e.g. after the node at that address went away), closing it."""
        channel = self._channels.pop(address, None)
        if channel is not None:
            await channel.close()

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        await asyncio.gather(*(c.close() for c in channels), return_exceptions=True)


Metadata = tuple[tuple[str, str], ...]


class _WithMetadata(grpc.aio.UnaryUnaryMultiCallable[Req, Resp]):
    """A unary method whose calls carry the pool's metadata after any the caller passes."""

    __slots__ = ("_inner", "_metadata")

    def __init__(self, inner: grpc.aio.UnaryUnaryMultiCallable[Req, Resp], metadata: Metadata) -> None:
        self._inner = inner
        self._metadata = metadata

    def __call__(
        self,
        request: Req,
        *,
        timeout: float | None = None,
        metadata: Any = None,
        credentials: grpc.CallCredentials | None = None,
        wait_for_ready: bool | None = None,
        compression: grpc.Compression | None = None,
    ) -> grpc.aio.UnaryUnaryCall[Req, Resp]:
        return self._inner(
            request,
            timeout=timeout,
            metadata=self._metadata if metadata is None else (*metadata, *self._metadata),
            credentials=credentials,
            wait_for_ready=wait_for_ready,
            compression=compression,
        )


def _unary_only(method: str) -> TypeError:
    return TypeError(f"{method}: odradek clients make unary calls only, and only those carry the pool's metadata")


class _MetadataChannel(grpc.aio.Channel):
    """A channel whose unary calls (every odradek RPC is unary) carry ``metadata``; the rest is delegated."""

    def __init__(self, channel: grpc.aio.Channel, metadata: Metadata) -> None:
        self._channel = channel
        self._metadata = metadata

    def unary_unary(
        self,
        method: str,
        request_serializer: Callable[[Req], bytes] | None = None,
        response_deserializer: Callable[[bytes], Resp] | None = None,
        **kwargs: Any,
    ) -> grpc.aio.UnaryUnaryMultiCallable[Req, Resp]:
        inner: grpc.aio.UnaryUnaryMultiCallable[Req, Resp] = self._channel.unary_unary(
            method, request_serializer, response_deserializer, **kwargs
        )
        return _WithMetadata(inner, self._metadata)

    def unary_stream(
        self,
        method: str,
        request_serializer: Callable[[Req], bytes] | None = None,
        response_deserializer: Callable[[bytes], Resp] | None = None,
        **kwargs: Any,
    ) -> grpc.aio.UnaryStreamMultiCallable[Req, Resp]:
        raise _unary_only(method)

    def stream_unary(
        self,
        method: str,
        request_serializer: Callable[[Req], bytes] | None = None,
        response_deserializer: Callable[[bytes], Resp] | None = None,
        **kwargs: Any,
    ) -> grpc.aio.StreamUnaryMultiCallable[Req, Resp]:
        raise _unary_only(method)

    def stream_stream(
        self,
        method: str,
        request_serializer: Callable[[Req], bytes] | None = None,
        response_deserializer: Callable[[bytes], Resp] | None = None,
        **kwargs: Any,
    ) -> grpc.aio.StreamStreamMultiCallable[Req, Resp]:
        raise _unary_only(method)

    async def close(self, grace: float | None = None) -> None:
        await self._channel.close(grace)

    def get_state(self, try_to_connect: bool = False) -> grpc.ChannelConnectivity:
        return self._channel.get_state(try_to_connect)

    async def wait_for_state_change(self, last_observed_state: grpc.ChannelConnectivity) -> None:
        await self._channel.wait_for_state_change(last_observed_state)

    async def channel_ready(self) -> None:
        await self._channel.channel_ready()

    async def __aenter__(self) -> _MetadataChannel:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: TracebackType | None
    ) -> None:
        await self.close()
