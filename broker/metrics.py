"""Prometheus metrics of a node, served on ``metrics.port`` (0 = off).

Request counts and latencies come from a gRPC server interceptor (per API method); byte counters are bumped by
the data plane per request and topic; everything that is state (partitions, leaders, log end offsets, purgatory,
Raft) is read at scrape time by a collector, so the hot paths pay nothing for it.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator

import grpc
from prometheus_client import CollectorRegistry, Counter, Histogram, Info, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from odradek.client.record import codec

LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class NodeMetrics:
    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "odradek_requests", "RPCs handled, by API and outcome", ["api", "outcome"], registry=self.registry
        )
        self.latency = Histogram(
            "odradek_request_latency_seconds",
            "RPC handling time by API",
            ["api"],
            registry=self.registry,
            buckets=LATENCY_BUCKETS,
        )
        self.bytes_in = Counter(
            "odradek_bytes_in", "record bytes appended, by topic", ["topic"], registry=self.registry
        )
        self.bytes_out = Counter(
            "odradek_bytes_out", "record bytes fetched, by topic", ["topic"], registry=self.registry
        )
        self.messages_in = Counter(
            "odradek_messages_in", "records appended, by topic", ["topic"], registry=self.registry
        )
        self.isr_shrinks = Counter(
            "odradek_isr_shrinks", "committed ISR shrinks of partitions this broker leads", registry=self.registry
        )
        self.isr_expands = Counter(
            "odradek_isr_expands", "committed ISR expansions of partitions this broker leads", registry=self.registry
        )
        # odradek_record_codec_info{implementation="native"|"python"} 1: which record codec this process runs.
        Info("odradek_record_codec", "the record codec in use", registry=self.registry).info(
            {"implementation": codec.IMPLEMENTATION}
        )

    def add_collector(self, collect: Callable[[], Iterator[Metric]]) -> None:
        self.registry.register(_FunctionCollector(collect))

    def serve(self, port: int, host: str = "0.0.0.0") -> None:
        if port > 0:
            start_http_server(port, host, registry=self.registry)

    def interceptor(self) -> grpc.aio.ServerInterceptor:
        return _MetricsInterceptor(self)


class _FunctionCollector(Collector):
    def __init__(self, collect: Callable[[], Iterator[Metric]]) -> None:
        self._collect = collect

    def collect(self) -> Iterator[Metric]:
        yield from self._collect()


class WrappingInterceptor(grpc.aio.ServerInterceptor, ABC):
    """An interceptor that wraps each unary method's behaviour once and caches the wrapped handler.

    grpc.aio runs the interceptor chain on every RPC; building the wrapper once per method makes the per-RPC cost
    one dict lookup plus the wrapper itself, not the continuation, a new closure, a new method handler and any
    label look-ups per call (small RPCs are dominated by fixed per-RPC CPU). The handlers are registered before
    the server starts and never change, so a method's handler is the same for every call.
    """

    def __init__(self) -> None:
        self._handlers: dict[str, grpc.RpcMethodHandler] = {}

    async def intercept_service(self, continuation, handler_call_details):
        method = handler_call_details.method
        cached = self._handlers.get(method)
        if cached is not None:
            return cached
        handler = await continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        wrapped = self.wrap(method.rsplit("/", 1)[-1], handler.unary_unary)
        if wrapped is None:
            cached = handler
        else:
            cached = grpc.unary_unary_rpc_method_handler(
                wrapped,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        self._handlers[method] = cached
        return cached

    @abstractmethod
    def wrap(self, api: str, inner: Callable) -> Callable | None:
        """The behaviour of method ``api`` wrapping ``inner``, or None to leave the method alone."""


class _MetricsInterceptor(WrappingInterceptor):
    """Counts and times every unary RPC by API method."""

    def __init__(self, metrics: NodeMetrics) -> None:
        super().__init__()
        self.metrics = metrics

    def wrap(self, api: str, inner: Callable) -> Callable:
        observe = self.metrics.latency.labels(api).observe
        ok = self.metrics.requests.labels(api, "ok").inc
        failed = self.metrics.requests.labels(api, "error").inc
        clock = time.perf_counter

        async def timed(request, context):
            start = clock()
            try:
                response = await inner(request, context)
            except BaseException:
                failed()
                raise
            finally:
                observe(clock() - start)
            ok()
            return response

        return timed


def gauge(name: str, documentation: str, labels: list[str] | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, labels=labels)
