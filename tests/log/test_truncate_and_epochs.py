from collections.abc import Callable
from pathlib import Path

import pytest
from log_batches import make_batch, split_batches

from odradek.broker.log.config import LogConfig
from odradek.broker.log.epoch_cache import LeaderEpochCache
from odradek.broker.log.log import Log
from odradek.client.errors import OdradekError
from odradek.client.record.header import parse_header


def epochs_log(open_log: Callable[..., Log], path: Path, config: LogConfig) -> Log:
    """Epoch 0 at offsets 0-9, epoch 2 at 10-19, epoch 5 from 20 (batches of 2 records)."""
    log = open_log(path, config)
    for epoch in (0, 2, 5):
        for _ in range(5):
            log.append_as_leader(make_batch(2), epoch)
    return log


def test_end_offset_for_epoch_as_offsets_for_leader_epoch(
    open_log: Callable[..., Log], tmp_path: Path, small_config: LogConfig
) -> None:
    log = epochs_log(open_log, tmp_path / "t-0", small_config)
    assert log.latest_epoch == 5
    assert log.epoch_entries() == [(0, 0), (2, 10), (5, 20)]
    assert log.end_offset_for_epoch(0) == (0, 10)
    assert log.end_offset_for_epoch(1) == (0, 10)  # unknown epoch between known ones: the one below it answers
    assert log.end_offset_for_epoch(2) == (2, 20)
    assert log.end_offset_for_epoch(4) == (2, 20)
    assert log.end_offset_for_epoch(5) == (5, 30)  # the latest epoch ends at the log end offset
    assert log.end_offset_for_epoch(6) == (-1, -1)
    assert log.end_offset_for_epoch(-1) == (-1, -1)


def test_stale_leader_epoch_is_fenced(open_log: Callable[..., Log], tmp_path: Path, small_config: LogConfig) -> None:
    log = epochs_log(open_log, tmp_path / "t-0", small_config)
    with pytest.raises(OdradekError) as e:
        log.append_as_leader(make_batch(1), 4)
    assert e.value.code_name == "FENCED_LEADER_EPOCH"
    assert log.log_end_offset == 30


def test_truncate_to_drops_batches_and_epochs(
    open_log: Callable[..., Log], tmp_path: Path, small_config: LogConfig
) -> None:
    log = epochs_log(open_log, tmp_path / "t-0", small_config)
    log.high_watermark = 30
    assert log.truncate_to(14)
    assert log.log_end_offset == 14
    assert log.epoch_entries() == [(0, 0), (2, 10)]
    assert log.end_offset_for_epoch(2) == (2, 14)
    assert log.end_offset_for_epoch(5) == (-1, -1)
    assert log.high_watermark == 14 and log.recovery_point <= 14
    batches = [parse_header(b) for b in split_batches(bytes(log.read(0, 1 << 20).records))]
    assert batches[-1].last_offset == 13
    # a batch straddling the target goes whole: whole batches only
    assert log.truncate_to(13)
    assert log.log_end_offset == 12
    assert not log.truncate_to(12) and not log.truncate_to(100)
    # appends continue from the new end, in a new epoch
    info = log.append_as_leader(make_batch(3), 7)
    assert (info.first_offset, log.latest_epoch) == (12, 7)
    assert log.epoch_entries() == [(0, 0), (2, 10), (7, 12)]
    assert log.end_offset_for_epoch(2) == (2, 12)


def test_truncate_across_segments_then_reopen(open_log: Callable[..., Log], tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1024, index_interval_bytes=100)
    log = open_log(tmp_path / "t-0", config)
    for i in range(60):
        log.append_as_leader(make_batch(3, timestamp=100 * i), i // 20)
    segments = log.num_segments
    assert segments > 4
    assert log.truncate_to(50)
    assert log.num_segments < segments and log.log_end_offset == 48
    assert log.offset_for_timestamp(10**9) is None
    assert log.offset_for_timestamp(0)[:2] == (0, 0)
    log.append_as_leader(make_batch(5), 3)
    expected = bytes(log.read(0, 1 << 20).records)
    for clean in (True, False):
        log.close()
        log = open_log(tmp_path / "t-0", config, clean_shutdown=clean)
        assert log.failure is None
        assert log.log_end_offset == 53 and log.latest_epoch == 3
        assert bytes(log.read(0, 1 << 20).records) == expected


def test_truncate_below_the_first_segment_restarts_the_log(
    open_log: Callable[..., Log], tmp_path: Path, small_config: LogConfig
) -> None:
    log = open_log(tmp_path / "t-0", small_config)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (100, 100, 100)
    log.append_as_follower(make_batch(2, base_offset=100, epoch=3))
    assert log.truncate_to(50)
    assert (log.log_start_offset, log.log_end_offset, log.epoch_entries()) == (50, 50, [])


def test_truncate_fully_and_start_at(open_log: Callable[..., Log], tmp_path: Path, small_config: LogConfig) -> None:
    log = epochs_log(open_log, tmp_path / "t-0", small_config)
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point, log.num_segments) == (1000, 1000, 1000, 1)
    assert log.latest_epoch is None
    info = log.append_as_leader(make_batch(2), 9)
    assert info.first_offset == 1000
    log.close()
    log = open_log(tmp_path / "t-0", small_config, log_start_offset=1000)
    assert (log.log_start_offset, log.log_end_offset, log.epoch_entries()) == (1000, 1002, [(9, 1000)])


def test_epoch_cache_persists_and_is_trimmed_on_load(
    open_log: Callable[..., Log], tmp_path: Path, small_config: LogConfig
) -> None:
    log = epochs_log(open_log, tmp_path / "t-0", small_config)
    log.close()
    log = open_log(tmp_path / "t-0", small_config, clean_shutdown=True, log_start_offset=12)
    assert log.epoch_entries() == [(2, 12), (5, 20)]
    log.close()
    # an epoch checkpoint ahead of the log (crash between epoch write and data write) is trimmed
    cache = LeaderEpochCache(tmp_path / "t-0" / "leader-epoch-checkpoint")
    cache.assign(9, 500)
    cache.persist()
    log = open_log(tmp_path / "t-0", small_config, log_start_offset=12)
    assert log.epoch_entries() == [(2, 12), (5, 20)]


def test_recovery_rebuilds_missing_epochs_from_batches(
    open_log: Callable[..., Log], tmp_path: Path, small_config: LogConfig
) -> None:
    log = epochs_log(open_log, tmp_path / "t-0", small_config)
    log.close()
    (tmp_path / "t-0" / "leader-epoch-checkpoint").unlink()
    log = open_log(tmp_path / "t-0", small_config)  # unclean: every batch is scanned
    assert log.epoch_entries() == [(0, 0), (2, 10), (5, 20)]


def test_a_new_epoch_is_written_before_the_recovery_point_passes_it(
    open_log: Callable[..., Log], tmp_path: Path, small_config: LogConfig
) -> None:
    """Becoming leader writes nothing (a broker may become leader of thousands of partitions in one metadata
    change); the epoch is on disk before a flush or a roll moves the recovery point past its start, and the log
    manager's periodic pass writes one that saw no append."""
    checkpoint = tmp_path / "t-0" / "leader-epoch-checkpoint"
    log = open_log(tmp_path / "t-0", small_config)
    log.start_leader_epoch(3)
    assert LeaderEpochCache(checkpoint).entries == []
    log.append_as_leader(make_batch(2), 3)
    log.flush()
    assert log.recovery_point == 2 and LeaderEpochCache(checkpoint).entries == [(3, 0)]
    log.append_as_leader(make_batch(2), 4)
    while log.recovery_point < 4:  # rolls, each fsyncing what it seals: epoch 4 is written by the first
        log.append_as_leader(make_batch(2), 4)
    assert LeaderEpochCache(checkpoint).entries == [(3, 0), (4, 2)]
    log.start_leader_epoch(6)
    log.persist_epochs()
    assert LeaderEpochCache(checkpoint).entries == [(3, 0), (4, 2), (6, log.log_end_offset)]


def test_epoch_cache_rules(open_log: Callable[..., Log], tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path / "epochs")
    cache.assign(1, 0)
    cache.assign(1, 5)  # same epoch, later offset: no change
    cache.assign(3, 10)
    assert cache.entries == [(1, 0), (3, 10)]
    cache.assign(2, 8)  # conflicts with epoch 3: it supersedes it
    assert cache.entries == [(1, 0), (2, 8)]
    cache.assign(4, 4)  # starts before epoch 2's start: epoch 2 goes
    assert cache.entries == [(1, 0), (4, 4)]
    assert LeaderEpochCache(tmp_path / "epochs").entries == []  # assigned, not written yet
    cache.persist()
    assert LeaderEpochCache(tmp_path / "epochs").entries == [(1, 0), (4, 4)]
    cache.truncate_from_start(2)
    assert cache.entries == [(1, 2), (4, 4)]
    cache.truncate_from_start(6)
    assert cache.entries == [(4, 6)]
    cache.truncate_from_end(6)
    assert cache.entries == []
    assert LeaderEpochCache(tmp_path / "epochs").entries == []
