import os
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Clock
from log_batches import batch_of_size, make_batch

from odradek.broker.log import manager as manager_module
from odradek.broker.log import recovery as recovery_module
from odradek.broker.log.config import LogConfig, LogManagerConfig
from odradek.broker.log.manager import CLEAN_SHUTDOWN_FILE, LogManager
from odradek.client.errors import CorruptRecordError, InvalidRequestError, StorageError

CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=256, segment_index_bytes=4096)


def crash_after(work: Callable[[], None]) -> None:
    """Run ``work`` in a forked child that then exits without closing anything: an unclean shutdown."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            work()
            code = 0
        finally:
            os._exit(code)
    assert os.waitpid(pid, 0)[1] == 0


def populate(manager: LogManager) -> dict[tuple[str, int], bytes]:
    """A few partitions with data, a high watermark and (for one) a raised log start offset; their bytes."""
    contents = {}
    for p in range(4):
        log = manager.get_or_create_log("orders", p)
        for i in range(30 + 10 * p):
            log.append_as_leader(make_batch(2 + i % 3, timestamp=i), p % 2)
        log.high_watermark = log.log_end_offset - 5
        if p == 1:
            log.increment_log_start_offset(7)
        contents["orders", p] = read_everything(manager, "orders", p)
    return contents


def read_everything(manager: LogManager, topic: str, partition: int) -> bytes:
    log = manager.get_log(topic, partition)
    data, offset = b"", log.segment_base_offsets[0]
    while offset < log.log_end_offset:
        chunk = log.read(max(offset, log.log_start_offset), 1 << 20)
        data, offset = data + bytes(chunk.records), chunk.next_offset
    return data


def offsets(manager: LogManager) -> dict[tuple[str, int], tuple[int, int, int]]:
    return {tp: (log.log_start_offset, log.high_watermark, log.log_end_offset) for tp, log in manager.logs().items()}


def test_clean_reopen_keeps_offsets_and_data(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, CONFIG)
    contents = populate(manager)
    before = offsets(manager)
    manager.close()
    assert all((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)
    manager = LogManager(dirs, CONFIG)
    assert not any((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)  # a crash from now on is unclean
    assert offsets(manager) == before
    assert before["orders", 1][0] == 7
    for tp, data in contents.items():
        assert read_everything(manager, *tp) == data
        assert manager.get_log(*tp).recovery_point == manager.get_log(*tp).log_end_offset
    manager.close()


def test_unclean_reopen_recovers_from_the_checkpoints(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, CONFIG)
    contents = populate(manager)
    expected = offsets(manager)
    manager.close()

    def crash() -> None:
        m = LogManager(dirs, CONFIG)
        m.get_log("orders", 0).flush()
        m.checkpoint()
        m.get_log("orders", 0).append_as_leader(make_batch(3), 0)  # after the checkpoint: recovered by the scan

    crash_after(crash)
    manager = LogManager(dirs, CONFIG)
    assert not manager.offline_logs()
    start, hw, leo = expected["orders", 0]
    assert offsets(manager) == {**expected, ("orders", 0): (start, hw, leo + 3)}
    for tp, data in contents.items():
        assert read_everything(manager, *tp).startswith(data)
    manager.close()


def test_the_clean_shutdown_epoch_survives_only_a_clean_close_of_every_dir(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, CONFIG)
    assert manager.clean_shutdown_epoch == -1  # new dirs: nothing is known of their past
    populate(manager)
    manager.close(broker_epoch=42)
    manager = LogManager(dirs, CONFIG)
    assert manager.clean_shutdown_epoch == 42
    crash_after(lambda: LogManager(dirs, CONFIG).get_log("orders", 0).append_as_leader(make_batch(1), 0))
    manager = LogManager(dirs, CONFIG)
    assert manager.clean_shutdown_epoch == -1  # the crash left no marker
    manager.close(broker_epoch=43)
    (dirs[1] / CLEAN_SHUTDOWN_FILE).unlink()  # one dir replaced by an empty disk
    manager = LogManager(dirs, CONFIG)
    assert manager.clean_shutdown_epoch == -1
    manager.close()


def test_new_partitions_go_to_the_least_loaded_dir(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    (tmp_path / "b" / "old-0").mkdir(parents=True)  # b already holds a partition
    manager = LogManager(dirs, CONFIG)
    for p in range(5):
        manager.get_or_create_log("t", p)
    placed = {d.name: sorted(p.name for p in d.iterdir() if p.is_dir()) for d in manager.log_dirs}
    assert {name: len(parts) for name, parts in placed.items()} == {"a": 2, "b": 2, "c": 2}
    assert manager.get_or_create_log("t", 0) is manager.get_log("t", 0)
    assert manager.dir_of("t", 0) == (tmp_path / "a").resolve()
    manager.close()


@pytest.mark.parametrize("topic", ["", "a b", "../x", ".", "x" * 250, "a/b"])
def test_invalid_topic_names_are_rejected(tmp_path: Path, topic: str) -> None:
    manager = LogManager([tmp_path], CONFIG)
    with pytest.raises(InvalidRequestError):
        manager.get_or_create_log(topic, 0)
    manager.close()


def test_delete_log(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], CONFIG)
    manager.get_or_create_log("t", 0).append_as_leader(make_batch(3), 0)
    manager.get_or_create_log("t", 1)
    assert manager.delete_log("t", 0)
    assert not manager.delete_log("t", 0)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["t-1"]
    (tmp_path / "t-7.0123abcd-delete").mkdir()  # a deletion a crash interrupted
    manager.close()
    manager = LogManager([tmp_path], CONFIG)
    assert list(manager.logs()) == [("t", 1)]
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["t-1"]
    manager.close()


def test_a_partition_in_two_dirs_is_an_error(tmp_path: Path) -> None:
    for d in ("a", "b"):
        (tmp_path / d / "t-0").mkdir(parents=True)
    with pytest.raises(StorageError):
        LogManager([tmp_path / "a", tmp_path / "b"], CONFIG)


def test_tick_flushes_retains_and_checkpoints_on_their_intervals(tmp_path: Path, clock: Clock) -> None:
    intervals = LogManagerConfig(
        retention_check_interval_ms=10_000,
        recovery_point_checkpoint_interval_ms=3000,
        log_start_offset_checkpoint_interval_ms=3000,
        high_watermark_checkpoint_interval_ms=1000,
    )
    config = LogConfig(segment_bytes=1000, retention_ms=60_000, flush_ms=2000)
    manager = LogManager([tmp_path], config, intervals, clock=clock)
    log = manager.get_or_create_log("t", 0)
    for i in range(25):
        log.append_as_leader(batch_of_size(100, timestamp=clock.now + i), 0)
    log.high_watermark = 25
    hw_file = tmp_path / "replication-offset-checkpoint"
    rp_file = tmp_path / "recovery-point-offset-checkpoint"
    manager.tick(clock.now + 999)
    assert not hw_file.exists()
    manager.tick(clock.now + 1000)
    assert hw_file.read_text().splitlines()[2] == "t 0 25"
    assert log.recovery_point == 20  # the rolls fsynced; flush.ms not due yet
    manager.tick(clock.now + 3000)
    assert log.recovery_point == 25
    assert rp_file.read_text().splitlines()[2] == "t 0 25"
    assert log.num_segments == 3
    manager.tick(clock.now + 55_000)  # retention check due, nothing old enough
    assert log.num_segments == 3
    manager.tick(clock.now + 61_000)  # old enough, but the last check was only 6 s ago
    assert log.num_segments == 3
    manager.tick(clock.now + 65_000)
    assert (log.num_segments, log.log_start_offset) == (1, 20)
    assert (tmp_path / "log-start-offset-checkpoint").read_text().splitlines()[2] == "t 0 20"
    manager.close()


def test_a_moved_log_start_is_checkpointed_at_the_next_tick(tmp_path: Path, clock: Clock) -> None:
    """DeleteRecords (or a follower taking its leader's log start) must not wait a whole checkpoint interval: a
    crash meanwhile would bring the deleted records back."""
    intervals = LogManagerConfig(log_start_offset_checkpoint_interval_ms=60_000)
    manager = LogManager([tmp_path], CONFIG, intervals, clock=clock)
    log = manager.get_or_create_log("t", 0)
    log.append_as_leader(make_batch(10), 0)
    log.high_watermark = 10
    start_file = tmp_path / "log-start-offset-checkpoint"
    manager.tick(clock.now + 1)  # a new log: its start is written too
    assert start_file.read_text().splitlines()[2] == "t 0 0"
    log.increment_log_start_offset(6)
    manager.tick(clock.now + 2)
    assert start_file.read_text().splitlines()[2] == "t 0 6"
    manager.close()


def test_a_corrupt_log_is_offline_and_its_dir_never_marked_clean(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, CONFIG)
    for p in range(2):
        log = manager.get_or_create_log("t", p)
        for _ in range(10):
            log.append_as_leader(make_batch(3), 0)
    bad_dir = manager.dir_of("t", 0)
    manager.close()
    segment = bad_dir / "t-0" / f"{0:020d}.log"
    data = bytearray(segment.read_bytes())
    data[150] ^= 0xFF  # inside the second batch (88 bytes each), under its CRC; eight valid batches follow
    segment.write_bytes(bytes(data))
    (bad_dir / CLEAN_SHUTDOWN_FILE).unlink()  # as after a crash
    for _ in range(2):
        manager = LogManager(dirs, CONFIG)
        assert manager.offline_logs() == [("t", 0)]
        assert manager.get_log("t", 0).failure.code_name == "CORRUPT_MESSAGE"
        with pytest.raises(CorruptRecordError):
            manager.get_log("t", 0).read(0, 100)
        assert manager.get_log("t", 1).read(0, 100).records
        manager.close()
        assert not (bad_dir / CLEAN_SHUTDOWN_FILE).exists()
        assert [(d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs if d != bad_dir] == [True]


@pytest.mark.parametrize("count", [3, 40])  # one after the other, and side by side
def test_new_logs_created_without_sync_are_synced_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    """A metadata change creating many logs syncs each new log's directory and each log dir once, after creating
    them all; a directory whose sync fails takes its log dir offline, not the other one."""
    manager = LogManager([tmp_path / "a", tmp_path / "b"], CONFIG)
    synced: list[Path] = []
    real = manager_module.fsync_dir

    def fsync_dir(path: Path) -> None:
        synced.append(path)
        if path.name == "bad-0":
            raise OSError(5, "injected")
        real(path)

    monkeypatch.setattr(manager_module, "fsync_dir", fsync_dir)
    monkeypatch.setattr(recovery_module, "fsync_dir", fsync_dir)
    logs = [manager.get_or_create_log("t", p, sync=False) for p in range(count)]
    assert synced == []  # nothing synced while they are created
    manager.sync_new_logs()
    assert sorted(synced[:count]) == sorted(log.dir for log in logs)
    assert sorted(synced[count:]) == [tmp_path / "a", tmp_path / "b"]
    assert manager.offline_dirs() == []
    synced.clear()
    manager.sync_new_logs()
    assert synced == []  # synced once
    bad = manager.get_or_create_log("bad", 0, sync=False)
    good = manager.get_or_create_log("good", 0, sync=False)
    manager.sync_new_logs()
    assert manager.offline_dirs() == [manager.dir_of("bad", 0)] and bad.offline and not good.offline
    manager.close()
