from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Clock
from log_batches import batch_of_size, make_batch

from odradek.broker.log.config import LogConfig
from odradek.broker.log.log import Log
from odradek.client.errors import OffsetOutOfRangeError, RecordTooLargeError


def test_roll_by_size(open_log: Callable[..., Log], tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=10_000))
    for _ in range(25):
        log.append_as_leader(batch_of_size(1000), 0)
    assert log.num_segments == 3  # 10 batches of 1000 bytes fill a 10000-byte segment exactly
    assert log.segment_base_offsets == [0, 10, 20]
    sizes = sorted(p.stat().st_size for p in (tmp_path / "t-0").glob("*.log"))
    assert sizes == [5000, 10_000, 10_000]
    # a roll fsyncs the old segment, so the recovery point moves to the new one
    assert log.recovery_point == 20


def test_a_request_larger_than_a_segment_spans_segments(open_log: Callable[..., Log], tmp_path: Path) -> None:
    leader = open_log(tmp_path / "t-0", LogConfig(segment_bytes=2000))
    info = leader.append_as_leader(batch_of_size(900) * 5, 0, max_batch_size=10_000)
    assert (info.first_offset, info.last_offset, info.batch_count, info.size) == (0, 4, 5, 4500)
    assert leader.segment_base_offsets == [0, 2, 4]  # two batches per segment, never one split
    follower = open_log(tmp_path / "t-1", LogConfig(segment_bytes=2000))
    fetched, offset = b"", 0
    while offset < leader.log_end_offset:  # a read stops at a segment's end
        data = leader.read(offset, 100_000)
        fetched, offset = fetched + bytes(data.records), data.next_offset
    follower.append_as_follower(fetched)  # what a fetch of more than a segment carries
    assert follower.log_end_offset == 5 and follower.segment_base_offsets == [0, 2, 4]


def test_a_batch_larger_than_a_segment_is_rejected(open_log: Callable[..., Log], tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=2000))
    with pytest.raises(RecordTooLargeError, match=r"exceeds segment\.bytes"):
        log.append_as_leader(batch_of_size(1000) + batch_of_size(2500), 0, max_batch_size=10_000)
    assert log.log_end_offset == 0


def test_roll_by_time_from_batch_timestamps(open_log: Callable[..., Log], tmp_path: Path, clock: Clock) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(segment_ms=1000), clock=clock)
    log.append_as_leader(make_batch(1, timestamp=5000), 0)
    log.append_as_leader(make_batch(1, timestamp=5900), 0)
    log.append_as_leader(make_batch(1, timestamp=6000), 0)  # exactly segment.ms after the first: no roll yet
    assert log.num_segments == 1
    log.append_as_leader(make_batch(1, timestamp=6001), 0)
    assert log.segment_base_offsets == [0, 3]


def test_roll_by_wall_clock_without_timestamps(open_log: Callable[..., Log], tmp_path: Path, clock: Clock) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(segment_ms=1000), clock=clock)
    log.append_as_leader(make_batch(1, timestamp=-1), 0)
    clock.now += 1000
    log.append_as_leader(make_batch(1, timestamp=-1), 0)
    assert log.num_segments == 1
    clock.now += 1
    log.append_as_leader(make_batch(1, timestamp=-1), 0)
    assert log.segment_base_offsets == [0, 2]


def test_roll_when_the_index_is_full(open_log: Callable[..., Log], tmp_path: Path) -> None:
    config = LogConfig(segment_index_bytes=64, index_interval_bytes=0)  # 8 offset entries, 5 time entries
    log = open_log(tmp_path / "t-0", config)
    for i in range(40):
        log.append_as_leader(make_batch(1, timestamp=i), 0)
    assert log.num_segments > 5
    for offset in range(40):
        assert log.read(offset, 1).first_offset == offset
    log.close()
    for index in (tmp_path / "t-0").glob("*.timeindex"):
        assert index.stat().st_size <= 60


def retention_log(open_log: Callable[..., Log], path: Path, config: LogConfig, clock: Clock) -> Log:
    """Five full segments of 10 one-record batches, timestamps 1000 * offset, and an active segment."""
    log = open_log(path, config, clock=clock)
    for i in range(55):
        log.append_as_leader(batch_of_size(100, timestamp=1000 * i), 0)
    log.high_watermark = log.log_end_offset
    return log


def test_retention_by_time(open_log: Callable[..., Log], tmp_path: Path, clock: Clock) -> None:
    config = LogConfig(segment_bytes=1000, retention_ms=20_000)
    log = retention_log(open_log, tmp_path / "t-0", config, clock)
    assert log.segment_base_offsets == [0, 10, 20, 30, 40, 50]
    # segment [10, 20) holds timestamps up to 19000: expired when now - 19000 > 20000
    assert log.delete_old_segments(now_ms=39_000) == 1
    assert log.log_start_offset == 10
    assert log.delete_old_segments(now_ms=39_001) == 1
    assert log.segment_base_offsets == [20, 30, 40, 50]
    assert log.delete_old_segments(now_ms=10**12) == 3  # never the active segment
    assert (log.segment_base_offsets, log.log_start_offset) == ([50], 50)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(49, 100)
    assert log.read(50, 100).first_offset == 50
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.log")) == [f"{50:020d}.log"]


def test_retention_by_size(open_log: Callable[..., Log], tmp_path: Path, clock: Clock) -> None:
    config = LogConfig(segment_bytes=1000, retention_ms=-1, retention_bytes=2500)
    log = retention_log(open_log, tmp_path / "t-0", config, clock)
    assert log.size_in_bytes == 5500
    assert log.delete_old_segments() == 3  # 5500 -> 2500: whole segments only, keeping at least 2500 bytes
    assert (log.log_start_offset, log.size_in_bytes) == (30, 2500)
    assert log.delete_old_segments() == 0


def test_retention_keeps_segments_at_or_above_the_high_watermark(
    open_log: Callable[..., Log], tmp_path: Path, clock: Clock
) -> None:
    config = LogConfig(segment_bytes=1000, retention_ms=1)
    log = retention_log(open_log, tmp_path / "t-0", config, clock)
    log.high_watermark = 25
    assert log.delete_old_segments(now_ms=10**12) == 2
    assert log.log_start_offset == 20


def test_log_start_offset_and_epoch_cache_follow_retention(
    open_log: Callable[..., Log], tmp_path: Path, clock: Clock
) -> None:
    config = LogConfig(segment_bytes=1000, retention_ms=-1)
    log = open_log(tmp_path / "t-0", config, clock=clock)
    for i in range(30):
        log.append_as_leader(batch_of_size(100), i // 10)
    log.high_watermark = 30
    with pytest.raises(OffsetOutOfRangeError):
        log.increment_log_start_offset(31)
    assert log.increment_log_start_offset(15)
    assert not log.increment_log_start_offset(12)
    assert log.epoch_entries() == [(1, 15), (2, 20)]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(14, 100)
    assert log.read(15, 100).first_offset == 15
    assert log.delete_old_segments() == 1  # the segment wholly below the log start offset
    assert log.segment_base_offsets == [10, 20] and log.log_start_offset == 15


def test_high_watermark_is_clamped(open_log: Callable[..., Log], tmp_path: Path, small_config: LogConfig) -> None:
    log = open_log(tmp_path / "t-0", small_config)
    log.append_as_leader(make_batch(5), 0)
    log.high_watermark = 100
    assert log.high_watermark == 5
    log.high_watermark = -3
    assert log.high_watermark == 0


def test_flush_messages_and_flush_ms_policies(open_log: Callable[..., Log], tmp_path: Path, clock: Clock) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(flush_messages=5), clock=clock)
    log.append_as_leader(make_batch(3), 0)
    assert log.recovery_point == 0
    log.append_as_leader(make_batch(2), 0)
    assert log.recovery_point == 5
    timed = open_log(tmp_path / "t-1", LogConfig(flush_ms=1000), clock=clock)
    timed.append_as_leader(make_batch(3), 0)
    assert not timed.flush_if_due(clock.now + 999)
    assert timed.flush_if_due(clock.now + 1000)
    assert timed.recovery_point == 3
    assert not timed.flush_if_due(clock.now + 5000)  # nothing new to flush
    timed.append_as_leader(make_batch(1), 0)
    timed.flush(up_to=2)
    assert timed.recovery_point == 3
    timed.flush()
    assert timed.recovery_point == 4
