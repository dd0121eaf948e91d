"""A gRPC proxy for tests that holds one request back and delivers it later, as a slow network would, or
throws away the answers of requests the broker has carried out, as a connection lost at that instant would.

One proxy port per broker on 127.0.0.1, served from its own event loop thread. Every method of every service is
forwarded byte for byte to the port's broker, and each answer that names a broker's address (Metadata,
FindCoordinator for groups and transactions, DescribeCluster) is rewritten to name that broker's proxy: a client
bootstrapped to the proxies never reaches a broker directly.

``hold(method, predicate)`` arms the proxy: the first call of ``method`` whose request matches is not forwarded,
and the client's call fails at once with UNAVAILABLE, as a lost connection would, so the client goes on (it may
retry). ``release()`` later sends the held request's bytes to the broker it was addressed to and returns the
broker's answer, for the test to check what a request delayed that long gets.

``drop_answers(method name, raw request)``, when given, is asked about every call as it arrives; for a call it
says True to, the request is forwarded and carried out but the broker's answer is thrown away, and the client's call
fails UNAVAILABLE instead (``answers_dropped`` counts them).
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import message_factory
from google.protobuf.message import Message

from odradek.client.background import BackgroundLoop
from odradek.client.connection import channel_options
from odradek.client.record.batch import RecordBatch, read_batches
from odradek.proto import admin_pb2, broker_pb2, group_pb2, transaction_pb2

SERVICES = (broker_pb2, group_pb2, transaction_pb2, admin_pb2)


def _method_types() -> dict[str, tuple[str, type[Message], type[Message]]]:
    """gRPC path ("/odradek.v1.Broker/Produce") -> (method name, request class, response class) of every service
    a broker serves."""
    out = {}
    for module in SERVICES:
        for service in module.DESCRIPTOR.services_by_name.values():
            for m in service.methods:
                out[f"/{service.full_name}/{m.name}"] = (
                    m.name,
                    message_factory.GetMessageClass(m.input_type),
                    message_factory.GetMessageClass(m.output_type),
                )
    return out


METHODS = _method_types()


def produce_batches(request: broker_pb2.ProduceRequest) -> list[RecordBatch]:
    """Every record batch of a Produce request."""
    return [batch for t in request.topics for p in t.partitions for batch in read_batches(p.records)]


def produce_values(request: broker_pb2.ProduceRequest) -> list[bytes | None]:
    """The values of every record of a Produce request (for predicates)."""
    return [r.value for batch in produce_batches(request) for r in batch.records()]


@dataclass
class Held:
    """A request the proxy kept from its broker."""

    node_id: int
    path: str
    request: Message
    raw: bytes


@dataclass
class _Hold:
    method: str
    predicate: Callable[[Any], bool]
    drop_repeats: bool


class _Forwarder(grpc.GenericRpcHandler):
    """Every unary method of one proxy port, as raw bytes (no (de)serializers), to one broker."""

    def __init__(self, proxy: HoldingProxy, node_id: int) -> None:
        self._proxy = proxy
        self._node_id = node_id

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        path = handler_call_details.method
        proxy, node_id = self._proxy, self._node_id

        async def handle(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
            return await proxy.forward(node_id, path, request, context)

        return grpc.unary_unary_rpc_method_handler(handle)


class HoldingProxy:
    def __init__(self, brokers: dict[int, int], drop_answers: Callable[[str, bytes], bool] | None = None) -> None:
        """``brokers``: broker node id -> its broker port on 127.0.0.1."""
        self._upstream = brokers
        self._drop_answers = drop_answers
        self.answers_dropped = 0
        self.ports: dict[int, int] = {}
        self.calls: Counter[str] = Counter()  # method name -> calls forwarded to a broker
        self.dropped = 0  # matching calls failed after the held one (drop_repeats)
        self._hold: _Hold | None = None
        self._held: Held | None = None
        self._held_event = threading.Event()
        self._lock = threading.Lock()
        self._channels: dict[int, grpc.aio.Channel] = {}
        self._servers: list[grpc.aio.Server] = []
        self._loop = BackgroundLoop("test-holding-proxy")
        try:
            self._loop.run(self._start(), timeout=10)
        except BaseException:
            self._loop.stop()
            raise

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.ports.values())

    # ---- the test's side ----

    def hold(self, method: str, predicate: Callable[[Any], bool] = lambda _: True, drop_repeats: bool = False) -> None:
        """Hold the next call of ``method`` (e.g. "Produce", "EndTxn") whose parsed request matches ``predicate``.
        With ``drop_repeats`` every later matching call fails UNAVAILABLE too, unforwarded, until ``release()``: the
        client's retries never get through."""
        if not any(name == method for name, _, _ in METHODS.values()):
            raise ValueError(f"no such method: {method}")
        with self._lock:
            if self._hold is not None or self._held is not None:
                raise RuntimeError("the proxy already holds a request")
            self._hold = _Hold(method, predicate, drop_repeats)

    def wait_held(self, timeout: float = 30) -> Held:
        """The held request, once there is one."""
        if not self._held_event.wait(timeout):
            raise TimeoutError(f"no matching request to hold in {timeout}s")
        assert self._held is not None
        return self._held

    def release(self, timeout: float = 15) -> Any:
        """Send the held request to its broker now; the broker's answer, parsed."""
        held = self.wait_held(0)
        with self._lock:
            self._hold = None
        _, _, response_type = METHODS[held.path]
        raw = self._loop.run(self._call(held.node_id, held.path, held.raw, timeout), timeout=timeout + 5)
        with self._lock:
            self._held = None
            self._held_event.clear()
        return response_type.FromString(raw)

    def close(self) -> None:
        try:
            self._loop.run(self._stop(), timeout=10)
        finally:
            self._loop.stop()

    def __enter__(self) -> HoldingProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- on the proxy's loop ----

    async def _start(self) -> None:
        for node_id, port in self._upstream.items():
            self._channels[node_id] = grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=channel_options())
            server = grpc.aio.server(options=channel_options())
            server.add_generic_rpc_handlers((_Forwarder(self, node_id),))
            self.ports[node_id] = server.add_insecure_port("127.0.0.1:0")
            await server.start()
            self._servers.append(server)

    async def _stop(self) -> None:
        await asyncio.gather(*(s.stop(grace=0) for s in self._servers), return_exceptions=True)
        await asyncio.gather(*(c.close() for c in self._channels.values()), return_exceptions=True)

    async def _call(self, node_id: int, path: str, request: bytes, timeout: float | None) -> bytes:
        call = self._channels[node_id].unary_unary(path, request_serializer=None, response_deserializer=None)
        return await call(request, timeout=timeout)

    def _take(self, node_id: int, path: str, request: bytes) -> bool:
        """Whether to keep this call from its broker (holding it if it is the first match)."""
        with self._lock:
            hold = self._hold
            if hold is None or path not in METHODS:
                return False
            name, request_type, _ = METHODS[path]
            if name != hold.method:
                return False
            parsed = request_type.FromString(request)
            if not hold.predicate(parsed):
                return False
            if self._held is None:
                self._held = Held(node_id, path, parsed, request)
                if not hold.drop_repeats:
                    self._hold = None
                self._held_event.set()
            else:
                self.dropped += 1
            return True

    async def forward(self, node_id: int, path: str, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        if self._take(node_id, path, request):
            await context.abort(grpc.StatusCode.UNAVAILABLE, "the test proxy holds this request back")
        name = METHODS[path][0] if path in METHODS else path
        drop = self._drop_answers is not None and self._drop_answers(name, request)
        try:
            response = await self._call(node_id, path, request, context.time_remaining())
        except grpc.aio.AioRpcError as e:
            await context.abort(e.code(), e.details() or "")
        self.calls[name] += 1
        if drop:
            self.answers_dropped += 1
            await context.abort(grpc.StatusCode.UNAVAILABLE, "the test proxy dropped the broker's answer")
        return self._rewrite(name, response)

    def _rewrite(self, name: str, response: bytes) -> bytes:
        """Answers naming brokers name their proxies instead."""
        message: Any
        if name == "Metadata":
            message = broker_pb2.MetadataResponse.FromString(response)
            nodes = list(message.brokers)
        elif name == "FindCoordinator":
            message = group_pb2.FindCoordinatorResponse.FromString(response)
            nodes = [c for c in message.coordinators if c.port]
        elif name == "DescribeCluster":
            message = admin_pb2.DescribeClusterResponse.FromString(response)
            nodes = list(message.brokers)  # controllers are not proxied
        else:
            return response
        for n in nodes:
            if n.node_id in self.ports:
                n.host, n.port = "127.0.0.1", self.ports[n.node_id]
        return message.SerializeToString()
