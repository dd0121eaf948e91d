"""Drive a registered Kafka API handler as the listener does: a request encoded by kafka-python at one version, the
body handed to the handler, and the reply decoded by kafka-python at the same version (both directions go through
the real codec)."""

from __future__ import annotations

from typing import Any

from odradek.broker.kafka.apis import ApiRegistry
from odradek.broker.kafka.wire import ConnectionInfo, ConnectionState, KafkaContext, RequestHeader

CONTEXT = KafkaContext(ConnectionInfo(1, "KAFKA", "127.0.0.1", 50000), "test-client")


async def call(
    registry: ApiRegistry, request: Any, version: int, throttle_ms: int = 0, principal: str | None = None
) -> Any:
    """``request`` (a kafka-python request object) through its registered handler at ``version``: the decoded
    response. ``principal``: the connection's (as a verified client certificate's), else anonymous."""
    key = int(request.API_KEY)
    found = registry.get(key)
    assert found is not None, f"API {key} is not registered"
    spec, handler = found
    assert spec.serves(version), f"{spec.name} v{version} is not served"
    body = request.encode(version=version)
    ctx = CONTEXT
    if principal is not None:
        connection = ConnectionInfo(1, "KAFKA", "127.0.0.1", 50000, ConnectionState(certificate_principal=principal))
        ctx = KafkaContext(connection, CONTEXT.client_id)
    reply = await handler(ctx, RequestHeader(key, version, 7, ctx.client_id, 0), memoryview(body))
    assert reply is not None
    chunks = reply.encode(throttle_ms)
    response_cls = type(request).__name__.removesuffix("Request") + "Response"
    module = __import__(type(request).__module__, fromlist=[response_cls])
    return getattr(module, response_cls).decode(b"".join(bytes(c) for c in chunks), version=version)


def served(registry: ApiRegistry, request_cls: Any) -> range:
    """The versions the registry serves ``request_cls`` at."""
    found = registry.get(int(request_cls.API_KEY))
    assert found is not None
    return range(found[0].min_version, found[0].max_version + 1)


# Inputs that break careless decoders: lengths and counts at their extremes, and over-long varints.
HOSTILE = [
    b"\x7f\xff\xff\xff",  # huge length or count
    b"\xff\xff\xff\xfe",  # -2
    b"\x80\x00\x00\x00",  # most negative
    b"\xff\xff",
    b"\xff" * 9 + b"\x01",  # a 10-byte varint
    b"\x80\x80\x80\x80\x80\x00",  # a 6-byte varint
]


def mangle(body: bytes, data: Any) -> bytes:
    """``body`` with one to four byte flips, hostile insertions or cuts drawn from hypothesis ``data``."""
    from hypothesis import strategies as st

    mangled = bytearray(body)
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(mangled)))
        kind = data.draw(st.sampled_from(["flip", "hostile", "cut"]))
        if kind == "flip" and at < len(mangled):
            mangled[at] ^= data.draw(st.integers(1, 255))
        elif kind == "hostile":
            mangled[at : at + data.draw(st.integers(0, 10))] = data.draw(st.sampled_from(HOSTILE))
        else:
            del mangled[at:]
    return bytes(mangled)


class Recorder:
    """A stand-in service whose methods record (request, context) and return the answer chosen for that method (a
    value, or a function of the request)."""

    def __init__(self, **answers: Any) -> None:
        self.answers = answers
        self.calls: list[tuple[str, Any, Any]] = []

    def __getattr__(self, name: str) -> Any:
        if name not in self.answers:
            raise AttributeError(name)

        async def method(request: Any, context: Any) -> Any:
            self.calls.append((name, request, context))
            answer = self.answers[name]
            return answer(request) if callable(answer) else answer

        return method

    def requests(self, name: str) -> list[Any]:
        return [r for n, r, _ in self.calls if n == name]
