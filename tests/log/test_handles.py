import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path

from log_batches import make_batch

from odradek.broker.log.config import LogConfig
from odradek.broker.log.handles import SegmentHandles, derived_max_open_fds
from odradek.broker.log.log import Log


def open_fds(root: Path) -> int:
    """Descriptors of this process open on files under ``root``."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/self/fd/{fd}").startswith(str(root))
    return count


def mapped_indexes(root: Path) -> int:
    with open("/proc/self/maps") as maps:
        return sum(1 for line in maps if str(root) in line and "index" in line)


def test_many_partitions_share_a_bounded_number_of_open_segments(open_log: Callable[..., Log], tmp_path: Path) -> None:
    handles = SegmentHandles(max_open_fds=16)
    config = LogConfig(segment_bytes=2048, index_interval_bytes=128, segment_index_bytes=1024)
    logs = [open_log(tmp_path / f"t-{p}", config, handles=handles) for p in range(200)]
    expected: dict[int, list[bytes]] = {}
    for round_ in range(4):
        for p, log in enumerate(logs):
            batch = make_batch([f"{p}/{round_}/{i}".encode() * 40 for i in range(3)])
            log.append_as_leader(batch, 0)
            expected.setdefault(p, []).append(batch[16:])
            assert open_fds(tmp_path) <= 16
    assert sum(log.num_segments for log in logs) > 200  # the 2 KiB segments rolled
    for p, log in enumerate(logs):
        data, offset = b"", 0
        while offset < log.log_end_offset:  # one segment per read
            chunk = log.read(offset, 1 << 20)
            data, offset = data + bytes(chunk.records), chunk.next_offset
        assert all(part in data for part in expected[p])
        assert log.read(log.log_end_offset - 1, 1).records  # and the active segment, via its index
        assert open_fds(tmp_path) <= 16
        assert mapped_indexes(tmp_path) <= 10
    assert len(handles) <= 5
    for log in logs:
        log.close()
    assert open_fds(tmp_path) == 0
    assert mapped_indexes(tmp_path) == 0


def test_eviction_skips_segments_in_use_by_another_thread(open_log: Callable[..., Log], tmp_path: Path) -> None:
    handles = SegmentHandles(max_open_fds=6)
    logs = [open_log(tmp_path / f"t-{p}", LogConfig(), handles=handles) for p in range(6)]
    errors: list[BaseException] = []

    def work(log: Log) -> None:
        try:
            for i in range(300):
                log.append_as_leader(make_batch(2, timestamp=i), 0)
                assert len(log.read(max(0, log.log_end_offset - 4), 1 << 16).records) > 0
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(log,)) for log in logs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for log in logs:
        assert log.log_end_offset == 600
        log.close()


def test_flush_in_a_worker_thread_while_appending(tmp_path: Path, open_log: Callable[..., Log]) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=64 * 1024), handles=SegmentHandles(max_open_fds=6))
    stop = threading.Event()
    errors: list[BaseException] = []

    def flusher() -> None:
        try:
            while not stop.is_set():
                log.flush()
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=flusher)
    thread.start()
    try:
        for i in range(2000):
            log.append_as_leader(make_batch([b"x" * 200] * 3, timestamp=i), 0)
            if i % 50 == 0:
                assert log.read(max(0, log.log_end_offset - 30), 4096).records
    finally:
        stop.set()
        thread.join()
    assert not errors
    log.flush()
    assert log.recovery_point == log.log_end_offset == 6000
    assert log.num_segments > 10


def test_the_derived_budget_is_half_the_open_files_within_the_mappings_allowed() -> None:
    assert derived_max_open_fds(20_000, 65_530) == 10_000  # half the open files
    assert derived_max_open_fds(1_048_576, 65_530) == 65_530 // 2 // 2 * 3  # half the maps, two per segment
    assert derived_max_open_fds(1_024, None) == 512  # no mapping bound known
    assert derived_max_open_fds(4, None) == 3  # one segment at least
