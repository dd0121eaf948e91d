"""Client quotas on the broker listener: who is asking, how long their requests take, and holding muted clients.

The decisions (rates, throttle times, who shares a quota, mutes) are the sans-I/O core in ``broker/quotas``; this
module is its gRPC shell:

- ``BrokerQuotas`` holds the produce, fetch and request quota managers and the mutes, and hands them the
  metadata image's quotas whenever those change (quotas are records in the metadata log, so a change reaches
  every broker without a restart).
- ``QuotaInterceptor`` wraps every client RPC of the broker listener. It names the client (the user: the name of
  the call's authenticated principal, ``ANONYMOUS`` on a listener without authentication; and the ``client-id``
  call metadata, or the request's ``client_id`` field), holds the call while that client is muted, times the
  event-loop steps of the handler for the request quota, and after the handler puts the largest throttle (byte or
  request) into the response's ``throttle_time_ms`` and mutes the client for that long. The response itself is
  sent at once (KIP-219): a client that honours the throttle waits before its next request; one that does not
  finds that request held.
- Produce and consumer Fetch charge bytes to the client their request context names (broker/api/data.py): produce
  after the append, fetch checked before the read (a throttled fetch reads nothing and is not charged).

Exempt: replication (Fetch from a follower), transaction markers and replica log queries between brokers, and
calls marked inter-broker by a broker's own channels, when the caller may perform ClusterAction on the cluster
(``exempt_caller``): with an authorizer, only the nodes (super users, or principals granted ClusterAction) escape
the quotas; a client that dresses its calls as a broker's is throttled like any other. Without an authorizer any
caller may do anything, this included. The controller listener has no quotas at all.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Generator, Iterator
from typing import Any, NamedTuple

import grpc
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from odradek.broker.metrics import WrappingInterceptor
from odradek.broker.quotas.manager import QuotaConfig, QuotaKind, QuotaManager
from odradek.broker.quotas.mutes import Mutes
from odradek.broker.security.grpc_auth import CallContext, principal_of
from odradek.client.common.access import AccessControl
from odradek.client.common.acls import AclOperation
from odradek.client.common.caller import Caller, peer_host
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.connection import CLIENT_ID_KEY, INTER_BROKER_KEY
from odradek.client.quotas import ANONYMOUS

# Called between brokers, never by clients: not subject to client quotas.
EXEMPT_METHODS = frozenset(("WriteTxnMarkers", "GetReplicaLogInfo"))


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def quota_user(principal: str) -> str:
    """The quota entity's user for a principal: the name of ``User:<name>`` (``ANONYMOUS`` unauthenticated), as
    Kafka keys user quotas on the principal's name."""
    kind, colon, name = principal.partition(":")
    return name if colon and kind == "User" and name else ANONYMOUS


class ClientIdentity(NamedTuple):
    """Who a request is from, as far as quotas are concerned; also the key of its mute."""

    peer: str  # the gRPC peer (one connection)
    user: str
    client_id: str


class BrokerQuotas:
    """The broker's quota managers and mutes, kept in step with the metadata image."""

    def __init__(
        self, config: QuotaConfig, image: Callable[[], MetadataImage], clock: Callable[[], int] = monotonic_ms
    ) -> None:
        self.produce = QuotaManager(QuotaKind.PRODUCE, config)
        self.fetch = QuotaManager(QuotaKind.FETCH, config)
        self.request = QuotaManager(QuotaKind.REQUEST, config)
        self.mutes = Mutes()
        self.clock = clock
        self._image = image
        self._quotas: object = None
        self.enabled = False

    def refresh(self) -> bool:
        """Pick up the image's quotas if they changed (one identity check otherwise); whether any is set."""
        quotas = self._image().client_quotas
        if quotas is not self._quotas:
            self._quotas = quotas
            for manager in (self.produce, self.fetch, self.request):
                manager.set_quotas(quotas)
            self.enabled = self.produce.enabled or self.fetch.enabled or self.request.enabled
        return self.enabled

    def expire(self) -> None:
        """Forget clients inactive for the configured time, so metric series stay bounded."""
        now = self.clock()
        for manager in (self.produce, self.fetch, self.request):
            manager.expire(now)

    def metrics(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        """One series set per client entity being measured (KIP-13's per-client metrics)."""
        labels = ["user", "client_id"]
        now = self.clock()
        rate = {
            QuotaKind.PRODUCE: GaugeMetricFamily(
                "odradek_quota_produce_byte_rate", "produced bytes per second over the quota window", labels=labels
            ),
            QuotaKind.FETCH: GaugeMetricFamily(
                "odradek_quota_fetch_byte_rate", "fetched bytes per second over the quota window", labels=labels
            ),
            QuotaKind.REQUEST: GaugeMetricFamily(
                "odradek_quota_request_time_percent", "request handling time, % of one core", labels=labels
            ),
        }
        kind_labels = ["kind", *labels]
        limit = GaugeMetricFamily("odradek_quota_limit", "the quota that applies (absent: none)", labels=kind_labels)
        avg = GaugeMetricFamily("odradek_quota_throttle_time_avg_ms", "mean throttle time", labels=kind_labels)
        peak = GaugeMetricFamily("odradek_quota_throttle_time_max_ms", "largest throttle time", labels=kind_labels)
        throttled = CounterMetricFamily(
            "odradek_quota_throttled_requests", "responses that carried a throttle", labels=kind_labels
        )
        recorded = CounterMetricFamily(
            "odradek_quota_recorded", "bytes (produce, fetch) or handling ms (request) charged", labels=kind_labels
        )
        for manager in (self.produce, self.fetch, self.request):
            kind = manager.kind.name.lower()
            for s in manager.stats(now):
                who = [s.user, s.client_id]
                rate[manager.kind].add_metric(who, s.rate)
                if s.quota is not None:
                    limit.add_metric([kind, *who], s.quota)
                avg.add_metric([kind, *who], s.throttle_avg_ms)
                peak.add_metric([kind, *who], s.throttle_max_ms)
                throttled.add_metric([kind, *who], s.throttled_requests)
                recorded.add_metric([kind, *who], s.recorded_total)
        yield from rate.values()
        yield from (limit, avg, peak, throttled, recorded)


def _client_id(metadata: Any, request: Any) -> str:
    for key, value in metadata or ():
        if key == CLIENT_ID_KEY:
            return str(value)
    return str(getattr(request, "client_id", ""))


def _is_inter_broker(metadata: Any) -> bool:
    return any(key == INTER_BROKER_KEY for key, _ in metadata or ())


def exempt_caller(access: AccessControl, caller: Caller) -> bool:
    """Whether a request shaped as a broker's (replication, markers, the inter-broker mark) really is one: its
    caller may perform ClusterAction, which the nodes' principals may and clients may not."""
    return access.allows_cluster(caller, AclOperation.CLUSTER_ACTION, audit_denial=False)


class _TimedSteps:
    """Awaits a coroutine while adding up the time its steps run on the event loop (not the time it waits): the
    broker's own handling time for the request quota."""

    __slots__ = ("_coro", "seconds")

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self._coro = coro
        self.seconds = 0.0

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, clock = self._coro, time.perf_counter
        send: Any = None
        error: BaseException | None = None
        while True:
            start = clock()
            try:
                step = coro.send(send) if error is None else coro.throw(error)
            except StopIteration as done:
                self.seconds += clock() - start
                return done.value
            except BaseException:
                self.seconds += clock() - start
                raise
            self.seconds += clock() - start
            try:
                send, error = (yield step), None
            except BaseException as e:  # a cancellation (or other error) delivered while suspended
                send, error = None, e


async def handle_under_quotas(
    quotas: BrokerQuotas, who: ClientIdentity, handler: Coroutine[Any, Any, Any], throttled: Callable[[Any], int]
) -> tuple[Any, int]:
    """Run one client request under quotas, whatever the listener: hold it while ``who`` is muted, time the
    handler's event-loop steps for the request quota, then mute the client for the largest throttle (the byte
    quotas are charged by the data service, to the client its request context names). Returns the handler's
    answer and that throttle (ms), which the caller puts into the answer's ``throttle_time_ms``;
    ``throttled(answer)`` is the throttle the handler already decided."""
    wait = quotas.mutes.remaining_ms(who, quotas.clock())
    if wait > 0:
        try:
            await asyncio.sleep(wait / 1000)
        except BaseException:  # cancelled while held (the connection went away): the handler never runs
            handler.close()
            raise
    timed = _TimedSteps(handler) if quotas.request.enabled else None
    answer = await (timed if timed is not None else handler)
    now = quotas.clock()
    throttle = 0
    if timed is not None:
        throttle = quotas.request.record(who.user, who.client_id, timed.seconds * 1000, now)
        if throttle > 0:
            quotas.request.record_throttle(who.user, who.client_id, throttle, now)
    throttle = max(throttle, throttled(answer))
    if throttle > 0:
        quotas.mutes.mute(who, now + throttle)
    return answer, throttle


def _response_throttle(response: Any) -> int:
    return int(getattr(response, "throttle_time_ms", 0))


class QuotaInterceptor(WrappingInterceptor):
    """Applies ``BrokerQuotas`` to every client RPC of the broker listener (see the module docstring)."""

    def __init__(self, quotas: BrokerQuotas, access: AccessControl) -> None:
        super().__init__()
        self.quotas = quotas
        self.access = access

    def wrap(self, api: str, inner: Callable[..., Any]) -> Callable[..., Any] | None:
        quotas, access = self.quotas, self.access
        between_brokers = api in EXEMPT_METHODS

        async def handle(request: Any, context: grpc.aio.ServicerContext) -> Any:
            if not quotas.refresh():
                return await inner(request, context)
            metadata = context.invocation_metadata()
            principal = principal_of(context)
            if (
                between_brokers or getattr(request, "replica_id", -1) >= 0 or _is_inter_broker(metadata)
            ) and exempt_caller(access, Caller(principal, peer_host(context.peer()))):
                return await inner(request, CallContext(context, quotas_apply=False))
            who = ClientIdentity(context.peer(), quota_user(principal), _client_id(metadata, request))
            response, throttle = await handle_under_quotas(quotas, who, inner(request, context), _response_throttle)
            if throttle > 0 and hasattr(response, "throttle_time_ms"):
                response.throttle_time_ms = throttle
            return response

        return handle
