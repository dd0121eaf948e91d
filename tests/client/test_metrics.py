"""The windowed avg/max behind the clients' throttle-time metrics, and the per-broker throttle state, on a fake
clock (seconds)."""

from __future__ import annotations

import math

import pytest

from odradek.client.metrics import SAMPLES, WINDOW_S, WindowedStat
from odradek.client.throttle import NodeThrottles, throttle_metrics


def test_nothing_recorded_is_nan_as_in_kafka() -> None:
    stat = WindowedStat()
    assert math.isnan(stat.avg(0.0)) and math.isnan(stat.max(0.0))


def test_avg_and_max_cover_every_value_in_the_window() -> None:
    stat = WindowedStat()
    for t, value in ((0.0, 100), (10.0, 0), (29.0, 500), (31.0, 200)):  # the last one opens the second sample
        stat.record(value, t)
    assert stat.avg(40.0) == 200.0
    assert stat.max(40.0) == 500.0


def test_a_sample_is_forgotten_after_samples_times_window() -> None:
    """The first sample starts at 0 and holds 900; it counts until 60 s, then only the second sample's 100 does."""
    stat = WindowedStat()
    stat.record(900, 0.0)
    stat.record(100, 35.0)  # second sample, started at 35
    assert stat.max(59.9) == 900.0
    assert stat.avg(59.9) == 500.0
    assert stat.max(60.0) == 100.0 and stat.avg(60.0) == 100.0
    assert math.isnan(stat.max(95.0))  # the second sample is 60 s old too


def test_samples_are_reused_in_a_ring() -> None:
    """With 2 samples, a third window overwrites the first: only the last two windows' values count."""
    stat = WindowedStat()
    for i, value in enumerate((10, 20, 30)):
        stat.record(value, i * WINDOW_S)
    assert stat.max(2 * WINDOW_S) == 30.0 and stat.avg(2 * WINDOW_S) == 25.0
    assert SAMPLES == 2 and WINDOW_S == 30.0  # Kafka's metrics.num.samples and metrics.sample.window.ms


def test_bad_window_is_refused() -> None:
    with pytest.raises(ValueError, match="samples >= 1"):
        WindowedStat(0, 30.0)


def test_a_throttle_holds_only_its_node_and_a_shorter_one_does_not_cut_it() -> None:
    throttles = NodeThrottles()
    throttles.record(1, 500, now=10.0)
    throttles.record(1, 100, now=10.2)  # an earlier request's answer, with less throttle
    throttles.record(2, 0, now=10.2)
    assert throttles.until(1) == pytest.approx(10.5)
    assert throttles.until(2) == 0.0
    assert throttles.next_end(10.3) == pytest.approx(10.5)
    assert throttles.next_end(10.5) == math.inf  # ended throttles are forgotten
    assert throttle_metrics("produce", throttles, 11.0) == {
        "produce-throttle-time-avg": 200.0,  # (500 + 100 + 0) / 3: every answer counts, as in Kafka
        "produce-throttle-time-max": 500.0,
    }


def test_hold_does_not_count_in_the_metrics() -> None:
    throttles = NodeThrottles()
    throttles.hold(3, 250, now=0.0)
    assert throttles.until(3) == 0.25
    assert math.isnan(throttles.times.max(0.0))
