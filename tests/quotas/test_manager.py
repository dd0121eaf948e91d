"""QuotaManager: sensors per sharing key, throttle decisions, quota changes, expiry and metrics (fake clock)."""

import pytest

from odradek.broker.quotas.manager import QuotaConfig, QuotaKind, QuotaManager
from odradek.client.quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    entity,
)

USER = "ANONYMOUS"


def manager(kind: QuotaKind, quotas: dict, config: QuotaConfig | None = None) -> QuotaManager:
    m = QuotaManager(kind, config or QuotaConfig())
    m.set_quotas(quotas)
    return m


def sensors(m: QuotaManager, now_ms: int) -> dict[tuple[str, str], float]:
    return {(s.user, s.client_id): s.recorded_total for s in m.stats(now_ms)}


def test_kafkas_own_case_gives_exactly_2100_ms() -> None:
    """ClientQuotaManagerTest.testQuotaViolation: 500 B/s, 400 B a second for 10 s, then 2,300 B at 10.5 s:
    6,300 B over 10.5 s is 600 B/s, and (600 - 500) / 500 * 10.5 s = 2.1 s."""
    m = manager(QuotaKind.PRODUCE, {entity(client_default=True): {PRODUCER_BYTE_RATE: 500}})
    for second in range(10):
        assert m.record(USER, "unknown", 400, second * 1000) == 0
    assert m.record(USER, "unknown", 2300, 10_500) == 2100
    [stats] = m.stats(10_500)
    assert (stats.user, stats.client_id, stats.quota, stats.rate) == ("", "unknown", 500, pytest.approx(600.0))


def test_kind_keys() -> None:
    assert QuotaKind.PRODUCE.key == PRODUCER_BYTE_RATE
    assert QuotaKind.FETCH.key == CONSUMER_BYTE_RATE
    assert QuotaKind.REQUEST.key == REQUEST_PERCENTAGE


def test_request_time_is_a_percentage_of_one_core_and_its_throttle_is_bounded_by_one_window() -> None:
    m = manager(QuotaKind.REQUEST, {entity(user=USER): {REQUEST_PERCENTAGE: 1}})
    for second in range(10):
        throttle = m.record(USER, "spammer", 1000, second * 1000)  # a whole core each second: 100 %
    [stats] = m.stats(10_000)
    assert stats.rate == pytest.approx(100.0)
    assert stats.recorded_total == 10_000  # handling ms
    # Unbounded, (100 - 1) / 1 * 10 s would be 990 s.
    assert throttle == 1000
    assert m.throttle_time(USER, "spammer", 10_000) == 1000


def test_request_time_within_its_percentage_is_not_throttled() -> None:
    m = manager(QuotaKind.REQUEST, {entity(user=USER): {REQUEST_PERCENTAGE: 50}})
    for t in range(0, 20_000, 100):
        assert m.record(USER, "c", 40, t) == 0  # 40 ms every 100 ms: 40 % of a core
    assert m.stats(20_000)[0].rate == pytest.approx(40.0, rel=0.05)


def test_byte_throttles_are_not_bounded_by_a_window() -> None:
    m = manager(QuotaKind.FETCH, {entity(client_default=True): {CONSUMER_BYTE_RATE: 100}})
    assert m.record(USER, "c", 3000, 0) == 25_000  # 600 B/s over the padded 5 s: (600 - 100) / 100 * 5 s


def test_throttle_time_measures_without_recording() -> None:
    m = manager(QuotaKind.FETCH, {entity(client_default=True): {CONSUMER_BYTE_RATE: 500}})
    assert m.throttle_time(USER, "c", 0) == 0
    assert m.stats(0) == []  # asking creates no sensor
    for second in range(10):
        m.record(USER, "c", 400, second * 1000)
    assert m.record(USER, "c", 2300, 10_500) == 2100
    for _ in range(3):
        assert m.throttle_time(USER, "c", 10_500) == 2100
    assert m.stats(10_500)[0].recorded_total == 6300
    # Later, with nothing recorded, the window grew: (6300 / 10.9 - 500) / 500 * 10.9 s = 1.7 s.
    assert m.throttle_time(USER, "c", 10_900) == 1700
    assert m.throttle_time(USER, "other", 10_900) == 0


def test_max_value_in_window() -> None:
    quotas = {entity(client_id="capped"): {CONSUMER_BYTE_RATE: 500}}
    assert manager(QuotaKind.FETCH, quotas).max_value_in_window(USER, "capped") == 500.0
    assert manager(QuotaKind.FETCH, quotas, QuotaConfig(window_ms=2000)).max_value_in_window(USER, "capped") == 1000.0
    assert manager(QuotaKind.FETCH, quotas).max_value_in_window(USER, "free") is None
    assert manager(QuotaKind.PRODUCE, quotas).max_value_in_window(USER, "capped") is None  # disabled kind


def test_client_ids_under_one_user_quota_share_one_sensor() -> None:
    m = manager(QuotaKind.PRODUCE, {entity(user="alice"): {PRODUCER_BYTE_RATE: 500}})
    assert m.record("alice", "a", 1500, 0) == 0
    # Together 3,000 B over the padded 5 s: 600 B/s, over alice's 500 although each sent only 300 B/s.
    assert m.record("alice", "b", 1500, 0) == 1000
    assert sensors(m, 0) == {("alice", ""): 3000}


def test_under_a_client_id_default_each_client_id_has_its_own_sensor() -> None:
    m = manager(QuotaKind.PRODUCE, {entity(client_default=True): {PRODUCER_BYTE_RATE: 500}})
    assert m.record("alice", "a", 1500, 0) == 0
    assert m.record("alice", "b", 1500, 0) == 0
    assert sensors(m, 0) == {("", "a"): 1500, ("", "b"): 1500}


def test_under_a_user_and_client_id_default_each_pair_has_its_own_sensor() -> None:
    m = manager(QuotaKind.PRODUCE, {entity(user="alice", client_default=True): {PRODUCER_BYTE_RATE: 500}})
    m.record("alice", "a", 100, 0)
    m.record("alice", "b", 200, 0)
    assert sensors(m, 0) == {("alice", "a"): 100, ("alice", "b"): 200}


def test_clients_without_a_quota_are_measured_but_never_throttled_while_the_kind_is_enabled() -> None:
    m = manager(QuotaKind.PRODUCE, {entity(client_id="limited"): {PRODUCER_BYTE_RATE: 1}})
    assert m.enabled
    assert m.record("bob", "free", 10**9, 0) == 0
    [stats] = m.stats(0)
    assert (stats.user, stats.client_id, stats.quota, stats.recorded_total) == ("", "free", None, 10**9)


def test_a_changed_quota_applies_to_existing_sensors_at_once() -> None:
    m = manager(QuotaKind.PRODUCE, {entity(client_default=True): {PRODUCER_BYTE_RATE: 500}})
    assert m.record(USER, "c", 2000, 0) == 0  # 400 B/s over the padded 5 s
    m.set_quotas({entity(client_default=True): {PRODUCER_BYTE_RATE: 200}})
    assert m.stats(0)[0].quota == 200
    assert m.throttle_time(USER, "c", 0) == 5_000  # (400 - 200) / 200 * 5 s, with the history kept
    m.set_quotas({entity(client_default=True): {PRODUCER_BYTE_RATE: 1000}})
    assert m.throttle_time(USER, "c", 0) == 0


def test_a_no_quota_sensor_gets_the_quota_set_later_for_its_client_id() -> None:
    m = manager(QuotaKind.PRODUCE, {entity(client_id="other"): {PRODUCER_BYTE_RATE: 1}})
    m.record(USER, "c", 2000, 0)
    assert m.stats(0)[0].quota is None
    m.set_quotas({entity(client_id="c"): {PRODUCER_BYTE_RATE: 200}})
    assert [(s.client_id, s.quota) for s in m.stats(0)] == [("c", 200)]
    assert m.throttle_time(USER, "c", 0) == 5_000


def test_set_quotas_drops_the_cached_resolutions() -> None:
    m = manager(QuotaKind.PRODUCE, {entity(client_default=True): {PRODUCER_BYTE_RATE: 500}})
    m.record("alice", "a", 100, 0)
    assert m.max_value_in_window("alice", "a") == 500.0
    # A user quota now takes precedence over the client-id default: alice's clients move to a shared sensor.
    m.set_quotas(
        {entity(client_default=True): {PRODUCER_BYTE_RATE: 500}, entity(user="alice"): {PRODUCER_BYTE_RATE: 50}}
    )
    assert m.max_value_in_window("alice", "a") == 50.0
    m.record("alice", "a", 200, 0)
    m.record("alice", "b", 300, 0)
    stats = {(s.user, s.client_id): (s.quota, s.recorded_total) for s in m.stats(0)}
    assert stats == {("", "a"): (500, 100), ("alice", ""): (50, 500)}


def test_a_disabled_kind_records_nothing() -> None:
    m = manager(QuotaKind.PRODUCE, {entity(client_default=True): {CONSUMER_BYTE_RATE: 1}})
    assert not m.enabled
    assert m.record(USER, "c", 10**9, 0) == 0
    assert m.throttle_time(USER, "c", 0) == 0
    m.record_throttle(USER, "c", 500, 0)
    assert m.stats(0) == []
    assert not QuotaManager(QuotaKind.FETCH).enabled


def test_removing_the_last_quota_disables_the_kind() -> None:
    m = manager(QuotaKind.PRODUCE, {entity(client_default=True): {PRODUCER_BYTE_RATE: 100}})
    m.record(USER, "c", 5000, 0)
    m.set_quotas({})
    assert not m.enabled
    assert m.record(USER, "c", 5000, 0) == 0
    [stats] = m.stats(0)
    assert (stats.quota, stats.recorded_total) == (None, 5000)


def test_sensors_expire_after_inactive_ms_without_a_record() -> None:
    m = manager(
        QuotaKind.PRODUCE, {entity(client_default=True): {PRODUCER_BYTE_RATE: 100}}, QuotaConfig(inactive_ms=5000)
    )
    m.record(USER, "old", 10, 0)
    m.record(USER, "new", 10, 3000)
    assert m.expire(5000) == 0
    m.throttle_time(USER, "old", 5001)  # asking is no activity
    assert m.expire(5001) == 1
    assert sensors(m, 5001) == {("", "new"): 10}
    assert m.expire(8001) == 1
    assert m.stats(8001) == []
    m.record(USER, "old", 10, 9000)  # comes back with a fresh sensor
    assert sensors(m, 9000) == {("", "old"): 10}


def test_record_throttle_keeps_average_max_and_count() -> None:
    m = manager(QuotaKind.PRODUCE, {entity(client_default=True): {PRODUCER_BYTE_RATE: 100}})
    m.record(USER, "c", 10, 0)
    m.record_throttle(USER, "c", 100, 0)
    m.record_throttle(USER, "c", 0, 200)  # no throttle: not counted, not averaged
    m.record_throttle(USER, "c", 300, 1500)
    [stats] = m.stats(2000)
    assert (stats.throttle_avg_ms, stats.throttle_max_ms, stats.throttled_requests) == (200.0, 300.0, 2)
    # Once the samples are obsolete the average and max fall to 0; the count is a total.
    [stats] = m.stats(20_000)
    assert (stats.throttle_avg_ms, stats.throttle_max_ms, stats.throttled_requests) == (0.0, 0.0, 2)


def test_bad_values_are_rejected() -> None:
    m = manager(QuotaKind.PRODUCE, {entity(client_default=True): {PRODUCER_BYTE_RATE: 100}})
    with pytest.raises(ValueError):
        m.record(USER, "c", -1, 0)
    with pytest.raises(ValueError):
        m.record_throttle(USER, "c", -1, 0)
    with pytest.raises(ValueError):
        QuotaConfig(num_samples=0)
    with pytest.raises(ValueError):
        QuotaConfig(window_ms=0)
    with pytest.raises(ValueError):
        QuotaConfig(inactive_ms=0)
