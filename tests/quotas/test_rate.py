"""The windowed rate and the throttle formula, against Kafka's Rate/SampledStat semantics (fake clock: plain ints)."""

import pytest

from odradek.broker.quotas.rate import SampledRate, SampledStat, throttle_time_ms


def test_a_short_history_is_padded_to_half_the_span() -> None:
    rate = SampledRate(num_samples=11, window_ms=1000)
    assert rate.padding_windows == 5
    rate.record(100, 0)
    assert rate.window_size_ms(0) == 5_000  # nothing elapsed: 5 windows assumed
    assert rate.rate(0) == pytest.approx(20.0)
    assert rate.window_size_ms(2_500) == 5_000
    assert rate.window_size_ms(5_000) == 5_000
    assert rate.window_size_ms(10_700) == 10_700  # past the padding: the history as it is
    assert rate.rate(10_700) == pytest.approx(100 / 10.7)


def test_a_steady_client_is_measured_at_its_rate_although_each_sample_starts_with_a_record() -> None:
    """400 units at every whole second: right after each record the samples hold one record more than the
    seconds elapsed; the padding keeps that from reading as a faster rate (unpadded: 800/s after one second)."""
    rate = SampledRate(num_samples=11, window_ms=1000)
    for second in range(30):
        rate.record(400, second * 1000)
        assert rate.rate(second * 1000) <= 500, second


def test_obsolete_samples_are_purged_before_measuring() -> None:
    rate = SampledRate(num_samples=11, window_ms=1000)
    rate.record(1000, 0)
    rate.record(500, 5_000)
    assert rate.rate(10_999) == pytest.approx(1500 / 10.999)
    # The sample that started at 0 is 11 windows old at 11,000: it is dropped, and the window starts at 5,000.
    assert rate.window_size_ms(11_000) == 6_000
    assert rate.rate(11_000) == pytest.approx(500 / 6)
    assert rate.rate(16_000) == 0.0  # both gone


def test_samples_start_at_the_first_record_after_the_previous_completed_not_on_the_clock() -> None:
    rate = SampledRate(num_samples=11, window_ms=1000)
    rate.record(1, 300)
    rate.record(2, 1_200)  # still the sample started at 300 (aligned samples would start a new one at 1,000)
    rate.record(4, 1_300)  # the first sample is complete: a new one starts here
    assert rate.rate(11_299) == pytest.approx(7 / 10.999)
    # At 11,300 the sample started at 300 is obsolete, taking the record made at 1,200 with it.
    assert rate.window_size_ms(11_300) == 10_000
    assert rate.rate(11_300) == pytest.approx(0.4)


def test_the_ring_recycles_its_oldest_sample() -> None:
    rate = SampledRate(num_samples=2, window_ms=1000)
    rate.record(1, 0)
    rate.record(2, 1_000)
    rate.record(4, 1_500)
    assert rate.rate(1_500) == pytest.approx(7 / 1.5)
    rate.record(8, 2_000)  # recycles the sample started at 0
    assert rate.window_size_ms(2_000) == 1_000
    assert rate.rate(2_000) == pytest.approx(14.0)


def test_the_padding_is_at_least_one_window() -> None:
    rate = SampledRate(num_samples=2, window_ms=1000)
    assert rate.padding_windows == 1
    rate.record(5, 42)
    assert rate.window_size_ms(42) == 1000
    assert rate.rate(42) == pytest.approx(5.0)


def test_an_empty_rate_is_zero() -> None:
    assert SampledRate().rate(123) == 0.0


def test_sampled_stat_avg_and_max_over_the_retained_samples() -> None:
    stat = SampledStat(num_samples=3, window_ms=1000)
    assert (stat.avg(0), stat.max(0), stat.count(0)) == (0.0, 0.0, 0)
    stat.record(100, 0)
    stat.record(300, 1_500)
    assert (stat.avg(2_000), stat.max(2_000), stat.count(2_000), stat.sum(2_000)) == (200.0, 300.0, 2, 400.0)
    assert (stat.avg(3_000), stat.max(3_000)) == (300.0, 300.0)  # the sample started at 0 is obsolete
    assert (stat.avg(4_500), stat.max(4_500), stat.count(4_500)) == (0.0, 0.0, 0)


@pytest.mark.parametrize("num_samples, window_ms", [(0, 1000), (11, 0), (-1, 1000)])
def test_bad_windows_are_rejected(num_samples: int, window_ms: int) -> None:
    with pytest.raises(ValueError):
        SampledRate(num_samples, window_ms)


def test_throttle_is_zero_within_or_at_the_bound() -> None:
    assert throttle_time_ms(0.0, 500.0, 10_000) == 0
    assert throttle_time_ms(499.9, 500.0, 10_000) == 0
    assert throttle_time_ms(500.0, 500.0, 10_000) == 0


def test_throttle_formula_of_kip_13() -> None:
    # 5 MB/s quota over 10 s, 60 MB seen: (6 - 5) / 5 * 10 s = 2 s.
    assert throttle_time_ms(6e6, 5e6, 10_000) == 2_000
    assert throttle_time_ms(600.0, 500.0, 10_500) == 2_100
    assert throttle_time_ms(1000.0, 500.0, 10_000) == 10_000  # byte quotas are not bounded by a window


def test_throttle_rounds_half_up_like_java_math_round() -> None:
    assert throttle_time_ms(1.5, 1.0, 1) == 1  # 0.5 ms: Python's round would give 0
    assert throttle_time_ms(3.5, 1.0, 1) == 3  # 2.5 ms: Python's round would give 2
    assert throttle_time_ms(1.4, 1.0, 1) == 0
    assert throttle_time_ms(1.6, 1.0, 1) == 1


@pytest.mark.parametrize(
    "observed, bound, window",
    [(1.0, 0.0, 1000), (1.0, -5.0, 1000), (1.0, float("nan"), 1000), (float("inf"), 1.0, 1000), (-1.0, 1.0, 1000)],
)
def test_throttle_rejects_bad_input(observed: float, bound: float, window: float) -> None:
    with pytest.raises(ValueError):
        throttle_time_ms(observed, bound, window)
