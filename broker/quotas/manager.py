"""A broker's client quotas of one kind (produce bytes, fetch bytes or request time): measure and decide throttles.

One ``QuotaManager`` per kind, as Kafka's ``ClientQuotaManager`` and ``ClientRequestQuotaManager``. Each client
``(user, client_id)`` resolves its quota with the 8-level precedence (``odradek.client.quotas.resolve``); the clients
that resolve to the same *sharing key* share one sensor: a ``SampledRate`` of what they recorded, and the throttle
statistics. A client whose rate after a record exceeds its quota gets the delay of KIP-13; the shell delays the
response by it and processes nothing more from the client until it has passed.

Without any quota of its kind the manager records nothing (no cost per request, as in Kafka). Once some entity sets
the kind's key, clients without a quota are measured too (under ``("", client_id)``, never throttled) so that their
rates show in the metrics and a quota set later applies to the history. Sensors idle for ``inactive_ms`` are dropped
by ``expire`` so the metrics stay bounded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from odradek.broker.quotas.rate import SampledRate, SampledStat, throttle_time_ms
from odradek.client.quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaEntity,
    resolve,
)

# Bound on the per-client resolution cache; past it the cache starts over (resolving again is cheap).
_MAX_CACHED_CLIENTS = 10_000


class QuotaKind(Enum):
    """What a manager measures: bytes appended, bytes fetched, or request handling time."""

    PRODUCE = "produce"
    FETCH = "fetch"
    REQUEST = "request"

    @property
    def key(self) -> str:
        """The quota key (``odradek.client.quotas``) this kind is bounded by."""
        return _KEYS[self]


_KEYS = {
    QuotaKind.PRODUCE: PRODUCER_BYTE_RATE,
    QuotaKind.FETCH: CONSUMER_BYTE_RATE,
    QuotaKind.REQUEST: REQUEST_PERCENTAGE,
}


@dataclass(frozen=True)
class QuotaConfig:
    """Kafka's ``quota.window.num``, ``quota.window.size.seconds`` (in ms) and the one-hour sensor expiry."""

    num_samples: int = 11
    window_ms: int = 1000
    inactive_ms: int = 3_600_000

    def __post_init__(self) -> None:
        if self.num_samples < 1:
            raise ValueError(f"quota num_samples must be at least 1, not {self.num_samples}")
        if self.window_ms < 1:
            raise ValueError(f"quota window_ms must be at least 1, not {self.window_ms}")
        if self.inactive_ms < 1:
            raise ValueError(f"quota inactive_ms must be at least 1, not {self.inactive_ms}")


@dataclass(frozen=True)
class EntityStats:
    """One sensor's metrics: ``(user, client_id)`` is its sharing key (``""`` for a component it does not have);
    ``rate`` is bytes per second, or for REQUEST the percentage of one core."""

    kind: QuotaKind
    user: str
    client_id: str
    quota: float | None
    rate: float
    throttle_avg_ms: float
    throttle_max_ms: float
    throttled_requests: int
    recorded_total: float


class _Sensor:
    __slots__ = ("last_record_ms", "quota", "rate", "recorded_total", "throttle", "throttled_requests")

    def __init__(self, config: QuotaConfig, quota: float | None, now_ms: int) -> None:
        self.quota = quota
        self.rate = SampledRate(config.num_samples, config.window_ms)
        self.throttle = SampledStat(config.num_samples, config.window_ms)
        self.throttled_requests = 0
        self.recorded_total = 0.0
        self.last_record_ms = now_ms


# The entities whose quota a sensor's sharing key can stand for (Kafka's DefaultQuotaCallback.quotaLimit).
def _sharing_key_entities(user: str, client_id: str) -> tuple[QuotaEntity, ...]:
    if user and client_id:
        return (
            QuotaEntity(user, False, client_id, False),
            QuotaEntity(user, False, None, True),
            QuotaEntity(None, True, client_id, False),
            QuotaEntity(None, True, None, True),
        )
    if user:
        return (QuotaEntity(user, False, None, False), QuotaEntity(None, True, None, False))
    if client_id:
        return (QuotaEntity(None, False, client_id, False), QuotaEntity(None, False, None, True))
    return ()


class QuotaManager:
    """The sensors and throttle decisions of one quota kind on one broker."""

    def __init__(self, kind: QuotaKind, config: QuotaConfig = QuotaConfig()) -> None:
        self.kind = kind
        self.config = config
        self._quotas: dict[Any, dict[str, float]] = {}
        self._enabled = False
        self._sensors: dict[tuple[str, str], _Sensor] = {}
        self._resolved: dict[tuple[str, str], tuple[tuple[str, str], float | None]] = {}

    # -- configuration ---------------------------------------------------------------------------------------------

    def set_quotas(self, quotas: Mapping[Any, Mapping[str, float]]) -> None:
        """Take the metadata image's ``client_quotas`` (replacing the previous ones): resolutions are redone and
        every existing sensor is bounded by its entity's new quota at once."""
        key = self.kind.key
        self._quotas = {e: dict(values) for e, values in quotas.items()}
        self._enabled = any(key in values for values in self._quotas.values())
        self._resolved.clear()
        for (user, client_id), sensor in self._sensors.items():
            sensor.quota = self._sharing_key_quota(user, client_id)

    @property
    def enabled(self) -> bool:
        """Whether some entity sets this kind's quota key; without one nothing is measured."""
        return self._enabled

    def _sharing_key_quota(self, user: str, client_id: str) -> float | None:
        key = self.kind.key
        for e in _sharing_key_entities(user, client_id):
            values = self._quotas.get(e)
            if values is not None and key in values:
                return values[key]
        return None

    def _resolve(self, user: str, client_id: str) -> tuple[tuple[str, str], float | None]:
        cached = self._resolved.get((user, client_id))
        if cached is not None:
            return cached
        found = resolve(self._quotas, user, client_id, self.kind.key)
        out = (("", client_id), None) if found is None else (found.sharing_key, found.value)
        if len(self._resolved) >= _MAX_CACHED_CLIENTS:
            self._resolved.clear()
        self._resolved[(user, client_id)] = out
        return out

    def _sensor(self, user: str, client_id: str, now_ms: int) -> _Sensor:
        sharing_key, quota = self._resolve(user, client_id)
        sensor = self._sensors.get(sharing_key)
        if sensor is None:
            sensor = self._sensors[sharing_key] = _Sensor(self.config, quota, now_ms)
        else:
            sensor.quota = quota
        return sensor

    # -- measurement -----------------------------------------------------------------------------------------------

    def _throttle(self, sensor: _Sensor, now_ms: int) -> int:
        if sensor.quota is None:
            return 0
        rate = sensor.rate.rate(now_ms)
        if rate <= sensor.quota:
            return 0
        throttle = throttle_time_ms(rate, sensor.quota, sensor.rate.window_size_ms(now_ms))
        if self.kind is QuotaKind.REQUEST:
            # Kafka's ClientRequestQuotaManager: request time is throttled by at most one window.
            throttle = min(throttle, self.config.window_ms)
        return throttle

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record ``value`` (bytes, or for REQUEST the handling time in ms) for the client and return the throttle
        in ms its sensor's rate now calls for (0 within quota, without a quota, or when the kind is disabled)."""
        if value < 0:
            raise ValueError(f"a recorded quota value must not be negative, not {value!r}")
        if not self._enabled:
            return 0
        sensor = self._sensor(user, client_id, now_ms)
        sensor.recorded_total += value
        sensor.last_record_ms = now_ms
        # Request time in ms per second, over 1000 ms per second of one core, times 100: percent of one core.
        sensor.rate.record(value / 10.0 if self.kind is QuotaKind.REQUEST else value, now_ms)
        return self._throttle(sensor, now_ms)

    def throttle_time(self, user: str, client_id: str, now_ms: int) -> int:
        """The throttle a zero-valued record would give now, recording nothing: a fetch is checked before its read
        and, when throttled, neither reads nor is charged."""
        if not self._enabled:
            return 0
        sensor = self._sensors.get(self._resolve(user, client_id)[0])
        return 0 if sensor is None else self._throttle(sensor, now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """The client's quota times one window in seconds, the most one fetch response may carry; None when the
        client has no quota of this kind."""
        if not self._enabled:
            return None
        quota = self._resolve(user, client_id)[1]
        return None if quota is None else quota * self.config.window_ms / 1000.0

    def record_throttle(self, user: str, client_id: str, throttle_ms: int, now_ms: int) -> None:
        """Count a throttled request and its delay in the throttle-time average and max (a 0 is no throttle and not
        recorded, as in Kafka, so the average is over throttled requests)."""
        if throttle_ms < 0:
            raise ValueError(f"a throttle time must not be negative, not {throttle_ms!r}")
        if not self._enabled or throttle_ms == 0:
            return
        sensor = self._sensor(user, client_id, now_ms)
        sensor.throttle.record(float(throttle_ms), now_ms)
        sensor.throttled_requests += 1
        sensor.last_record_ms = now_ms

    # -- upkeep and metrics ----------------------------------------------------------------------------------------

    def expire(self, now_ms: int) -> int:
        """Drop the sensors without a record for more than ``inactive_ms``; return how many were dropped."""
        stale = [k for k, s in self._sensors.items() if now_ms - s.last_record_ms > self.config.inactive_ms]
        for k in stale:
            del self._sensors[k]
        if stale:
            self._resolved.clear()
        return len(stale)

    def stats(self, now_ms: int) -> list[EntityStats]:
        """Every sensor's metrics, ordered by sharing key."""
        return [
            EntityStats(
                kind=self.kind,
                user=user,
                client_id=client_id,
                quota=sensor.quota,
                rate=sensor.rate.rate(now_ms),
                throttle_avg_ms=sensor.throttle.avg(now_ms),
                throttle_max_ms=sensor.throttle.max(now_ms),
                throttled_requests=sensor.throttled_requests,
                recorded_total=sensor.recorded_total,
            )
            for (user, client_id), sensor in sorted(self._sensors.items())
        ]
