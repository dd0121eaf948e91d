"""Client quotas (KIP-13) for HTTP callers: their produce and fetch bytes count against the same byte-rate quotas, on
the same sensors, as Kafka and gRPC clients of the same principal (the user is the principal's name, the client id
``odradek-http``), so a user's quota holds whichever listener it uses.

How a throttled HTTP caller is told: as Confluent's REST Proxy tells it, ``429`` with ``error_code`` 42901 and a
``Retry-After`` header (whole seconds), nothing done. A request is refused so while its user's rate is over the quota
(the time the rate needs to fall back to it, KIP-13's formula); the request that takes the rate over is served, as
Kafka serves the request that crosses a quota and holds the client back afterwards. Nothing is ever half done: a
produce is refused before its append, a read before it reads. The console's search is paced rather than refused:
each chunk it reads waits out the fetch throttle within the page's ``timeout_ms``, so a long search runs at the quota.
"""

from __future__ import annotations

import math

from odradek.broker.quotas.manager import QuotaKind, QuotaManager
from odradek.broker.rest import errors
from odradek.broker.throttling import BrokerQuotas, quota_user
from odradek.client.common.request_context import RequestContext

RETRY_AFTER = "retry-after"
_WHAT = {QuotaKind.PRODUCE: "Produce", QuotaKind.FETCH: "Fetch"}


def too_many_requests(kind: QuotaKind, throttle_ms: int) -> errors.RestError:
    """The refusal of a request held ``throttle_ms`` by the caller's quota of ``kind``."""
    seconds = max(1, math.ceil(throttle_ms / 1000))
    return errors.RestError(
        429,
        errors.TOO_MANY_REQUESTS,
        f"{_WHAT[kind]} quota exceeded: retry in {throttle_ms} ms",
        ((RETRY_AFTER, str(seconds)),),
    )


class HttpQuotas:
    """The broker's quota managers as the HTTP API uses them (``quotas`` None: the broker has none)."""

    def __init__(self, quotas: BrokerQuotas | None) -> None:
        self._quotas = quotas

    def _manager(self, kind: QuotaKind, ctx: RequestContext) -> QuotaManager | None:
        quotas = self._quotas
        if quotas is None or not ctx.quotas_apply or not quotas.refresh():
            return None
        manager = quotas.produce if kind is QuotaKind.PRODUCE else quotas.fetch
        return manager if manager.enabled else None

    def held_ms(self, kind: QuotaKind, ctx: RequestContext) -> int:
        """How long ``ctx``'s client must wait before its quota of ``kind`` lets it in (0: now), counted as a
        throttle in the quota metrics when it must."""
        manager = self._manager(kind, ctx)
        if manager is None or self._quotas is None:
            return 0
        user, now = quota_user(ctx.principal), self._quotas.clock()
        throttle = manager.throttle_time(user, ctx.client_id, now)
        if throttle > 0:
            manager.record_throttle(user, ctx.client_id, throttle, now)
        return throttle

    def admit(self, ctx: RequestContext, *kinds: QuotaKind) -> None:
        """Refuse (429, Retry-After) a request whose client is over one of its quotas of ``kinds``."""
        for kind in kinds:
            throttle = self.held_ms(kind, ctx)
            if throttle > 0:
                raise too_many_requests(kind, throttle)

    def charge(self, kind: QuotaKind, ctx: RequestContext, size: int) -> None:
        """Count ``size`` bytes the broker moved for ``ctx``'s client on a path the data service does not charge
        (another broker's partitions, reached over the brokers' own channel)."""
        manager = self._manager(kind, ctx)
        if manager is None or self._quotas is None or size <= 0:
            return
        user, now = quota_user(ctx.principal), self._quotas.clock()
        throttle = manager.record(user, ctx.client_id, size, now)
        if throttle > 0:
            manager.record_throttle(user, ctx.client_id, throttle, now)
