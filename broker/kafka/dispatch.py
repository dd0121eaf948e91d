"""From a request frame to its response: parse the header, find the API, run its handler under client quotas,
encode the answer behind the response header.

A frame that cannot be served (an unknown API key, a version outside the served range, a malformed header or
body) raises ProtocolError, and the listener closes that connection, as Kafka does; the one exception is
ApiVersions at an unknown version, which is answered (KIP-511) so clients can negotiate.

On a SASL listener each connection gets a SaslSession at its first request: until it has authenticated, a request
other than the SASL exchange's closes the connection (ILLEGAL_SASL_STATE), and a failed exchange's answer is the
connection's last."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from odradek.broker.kafka.apis import API_VERSIONS_KEY, ApiRegistry
from odradek.broker.kafka.header import encode_response_header, read_request_header
from odradek.broker.kafka.produce_codec import PRODUCE_KEY
from odradek.broker.kafka.wire import (
    ConnectionInfo,
    KafkaContext,
    NoResponse,
    ProtocolError,
    Release,
    Reply,
    Response,
)
from odradek.broker.security.sasl_session import IllegalSaslState, SaslSession
from odradek.broker.throttling import BrokerQuotas, ClientIdentity, exempt_caller, handle_under_quotas, quota_user
from odradek.client.common.access import OPEN, AccessControl
from odradek.client.common.caller import Caller

_PRODUCE_FRAME = PRODUCE_KEY.to_bytes(2, "big")  # a request header starts with its API key


def may_release(frame: bytearray) -> bool:
    """Whether a request may release its connection before it is answered: Produce alone (an acks=all produce,
    once its batches are appended); the listener serves the others without a task of their own."""
    return frame[:2] == _PRODUCE_FRAME


def _reply_throttle(reply: Reply) -> int:
    return reply.throttle_ms


class KafkaDispatcher:
    """The listener's ``Dispatch``: one frame (without its size prefix) to a Response, or None (acks=0)."""

    def __init__(
        self,
        registry: ApiRegistry | Callable[[], ApiRegistry],
        quotas: BrokerQuotas | None = None,
        sasl: Callable[[str | None], SaslSession] | None = None,
        access: AccessControl = OPEN,
    ) -> None:
        # A callable builds the registry at the first request: the API modules load kafka-python's message
        # definitions of every version, a fifth of a node's start, which a node no Kafka client talks to never needs.
        self._registry = registry
        self.quotas = quotas
        self.access = access  # who may claim a broker's exemption from quotas (``exempt_caller``)
        # A new connection's SASL session on a SASL listener, given its client certificate's principal if it has
        # one; None: no SASL.
        self.sasl = sasl

    @property
    def registry(self) -> ApiRegistry:
        if not isinstance(self._registry, ApiRegistry):
            self._registry = self._registry()
        return self._registry

    def _flexible(self, key: int, version: int) -> bool:
        found = self.registry.get(key)
        return found is not None and found[0].flexible(version)

    async def __call__(
        self, connection: ConnectionInfo, frame: memoryview, release: Release | None = None
    ) -> Response | None:
        """``release`` (the listener's) goes to the handler only where no quota applies: a throttled client is muted
        after its answer, so its next request must wait for it."""
        header = read_request_header(frame, self._flexible)
        found = self.registry.get(header.api_key)
        if found is None:
            raise ProtocolError(f"unknown API key {header.api_key}")
        spec, handler = found
        session = connection.state.sasl
        if session is None and self.sasl is not None:
            session = connection.state.sasl = self.sasl(connection.certificate_principal)
        if session is not None:
            try:
                session.check(spec.key, spec.name)
            except IllegalSaslState as e:
                raise ProtocolError(str(e)) from None
        version = header.api_version
        reply: Reply
        throttle = 0
        if not spec.serves(version):
            if spec.key != API_VERSIONS_KEY:
                raise ProtocolError(
                    f"{spec.name} v{version} is not supported (v{spec.min_version} to v{spec.max_version})"
                )
            from odradek.broker.kafka import api_versions  # loaded with the registry, as every API module

            reply = api_versions.unsupported_version(spec)
            version = 0
        else:
            ctx = KafkaContext(connection, header.client_id or "")
            body = frame[header.size :]
            quotas = self.quotas
            if quotas is not None and not quotas.refresh():
                quotas = None
            if (
                quotas is not None
                and spec.inter_broker is not None
                and spec.inter_broker(version, body)
                and exempt_caller(self.access, Caller(ctx.principal, ctx.connection.peer_host))
            ):
                quotas = None  # replication is not a client's request: no mute, no request quota
                ctx = KafkaContext(connection, ctx.client_id, quotas_apply=False)  # nor byte quotas
            if quotas is None and release is not None:
                ctx = KafkaContext(connection, ctx.client_id, ctx.quotas_apply, release)
            call: Coroutine[Any, Any, Reply] = handler(ctx, header, body)
            if quotas is not None:
                who = ClientIdentity(ctx.peer, quota_user(ctx.principal), ctx.client_id)
                reply, throttle = await handle_under_quotas(quotas, who, call, _reply_throttle)
            else:
                reply = await call
            if isinstance(reply, NoResponse):  # any throttle has muted the client by now
                return None
            throttle = max(throttle, reply.throttle_ms)
        head = encode_response_header(header.correlation_id, spec.response_header_version(version))
        close = session.close_reason if session is not None else None
        return Response([head, *reply.encode(throttle)], throttle, close)
