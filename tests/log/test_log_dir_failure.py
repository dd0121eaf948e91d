"""An I/O error takes its whole log dir offline; the broker's other log dirs carry on (Kafka's log dir failure)."""

import errno
import os
from pathlib import Path

import pytest
from log_batches import make_batch

from odradek.broker.log.config import LogConfig
from odradek.broker.log.manager import CLEAN_SHUTDOWN_FILE, LogManager
from odradek.client.errors import ErrorCode, StorageError

CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=256, segment_index_bytes=4096)


def two_dirs(tmp_path: Path) -> tuple[LogManager, list[Path]]:
    """Partitions 0 and 2 in dir a, 1 and 3 in dir b (new logs go to the dir holding fewest)."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs, CONFIG)
    for p in range(4):
        manager.get_or_create_log("t", p).append_as_leader(make_batch(3), 0)
    assert [manager.dir_of("t", p).name for p in range(4)] == ["a", "b", "a", "b"]
    return manager, [d.resolve() for d in dirs]


def test_an_fsync_error_in_one_log_fails_every_log_of_its_dir_only(tmp_path: Path, monkeypatch) -> None:
    manager, (a, b) = two_dirs(tmp_path)
    told: list[Path] = []
    manager.on_dir_offline(told.append)

    def eio(_fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    with monkeypatch.context() as m:
        m.setattr(os, "fsync", eio)
        with pytest.raises(StorageError):
            manager.get_log("t", 0).flush()

    assert told == [a]
    assert manager.offline_dirs() == [a] and manager.online_dirs() == [b]
    assert sorted(manager.offline_logs()) == [("t", 0), ("t", 2)]
    with pytest.raises(StorageError) as e:
        manager.get_log("t", 2).read(0, 1 << 20)  # a sibling that saw no error itself
    assert e.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    manager.get_log("t", 1).append_as_leader(make_batch(2), 0)  # dir b serves on
    assert manager.get_or_create_log("t", 4) is not None and manager.dir_of("t", 4) == b
    manager.tick(10**15)  # checkpoints and flushes skip the offline dir without raising
    manager.close()
    assert not (a / CLEAN_SHUTDOWN_FILE).exists()  # nothing more is written on the failed disk
    assert (b / CLEAN_SHUTDOWN_FILE).exists()


def test_with_every_dir_offline_no_log_can_be_created(tmp_path: Path) -> None:
    manager, (a, b) = two_dirs(tmp_path)
    manager.inject_dir_failure(a)
    manager.get_log("t", 1).take_offline(StorageError("t-1: write failed: EIO"))
    assert manager.offline_dirs() == [a, b] and manager.online_dirs() == []
    with pytest.raises(StorageError, match="every log dir is offline"):
        manager.get_or_create_log("t", 9)
    assert manager.delete_log("t", 0)  # forgotten without touching the failed disk
    assert (a / "t-0").is_dir()
    manager.close()


def test_a_dir_that_cannot_be_loaded_is_offline_at_start(tmp_path: Path) -> None:
    (tmp_path / "bad").write_text("not a directory")  # mkdir/iterdir on it fail with a real OSError
    manager = LogManager([tmp_path / "good", tmp_path / "bad"], CONFIG)
    assert manager.offline_dirs() == [(tmp_path / "bad").resolve()]
    assert manager.dir_of("t", 0) is None and manager.get_or_create_log("t", 0) is not None
    assert manager.dir_of("t", 0) == (tmp_path / "good").resolve()
    manager.close()
