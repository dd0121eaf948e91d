"""Log reads as file ranges (``as_file``, the Kafka listener's zero-copy fetch) against the buffered reads."""

import contextlib
import os
import random
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from log_batches import make_batch

from odradek.broker.log.config import LogConfig
from odradek.broker.log.handles import SegmentHandles
from odradek.broker.log.log import FetchData, Log
from odradek.client.common.file_slice import FileSlice


def fill(log: Log, n: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    for i in range(n):
        values = [rng.randbytes(rng.randint(0, 300)) for _ in range(rng.randint(1, 6))]
        log.append_as_leader(make_batch(values, timestamp=10_000 + i), 0)


def log_file_fds(root: Path) -> Counter[str]:
    """Descriptors of this process open on each segment file under ``root``."""
    count: Counter[str] = Counter()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith(str(root)) and target.endswith(".log"):
                count[target] += 1
    return count


def file_read(log: Log, *args: object, **kwargs: object) -> tuple[FetchData[FileSlice | bytes], bytes]:
    """An as_file read and the bytes of its slice (closed), checking the empty answer is b""."""
    data = log.read(*args, as_file=True, **kwargs)  # type: ignore[call-overload]
    if not data.records:
        assert data.records == b""
        return data, b""
    assert isinstance(data.records, FileSlice)
    try:
        return data, data.records.read()
    finally:
        data.records.close()


def assert_same(log: Log, offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool) -> int:
    buffered = log.read(offset, max_bytes, max_offset, min_one_batch)
    data, raw = file_read(log, offset, max_bytes, max_offset, min_one_batch)
    assert raw == bytes(buffered.records), (offset, max_bytes, max_offset, min_one_batch)
    assert data[1:] == buffered[1:], (offset, max_bytes, max_offset, min_one_batch)
    return len(raw)


@pytest.fixture
def log(open_log: Callable[..., Log], tmp_path: Path, small_config: LogConfig) -> Iterator[Log]:
    log = open_log(tmp_path / "t-0", small_config)
    fill(log, 300)
    assert log.num_segments > 8
    yield log


def test_file_reads_match_buffered_reads_at_segment_starts_and_inside(log: Log, tmp_path: Path) -> None:
    bases = log.segment_base_offsets
    rng = random.Random(11)
    offsets = bases + [b + 1 for b in bases] + [rng.randrange(log.log_end_offset) for _ in range(40)]
    sizes = 0
    for offset in offsets:
        for max_bytes in (1, 100, 700, 3000, 1 << 20):
            for min_one_batch in (True, False):
                sizes += assert_same(log, offset, max_bytes, None, min_one_batch)
                cut = offset + rng.randint(0, 30)
                assert_same(log, offset, max_bytes, cut, min_one_batch)
    assert sizes > 0
    assert max(log_file_fds(tmp_path).values()) == 1  # the segments' own: every slice's duplicate was closed


def test_a_whole_log_read_as_file_ranges_is_the_buffered_log(log: Log) -> None:
    for max_bytes in (1, 900, 1 << 20):
        offset, buffered, filed = 0, b"", b""
        for _ in range(10_000):
            if offset >= log.log_end_offset:
                break
            b = log.read(offset, max_bytes)
            data, raw = file_read(log, offset, max_bytes)
            assert data.next_offset == b.next_offset > offset
            buffered, filed, offset = buffered + bytes(b.records), filed + raw, b.next_offset
        assert filed == buffered and len(filed) == log.size_in_bytes


def test_no_record_bytes_are_read_into_python(
    open_log: Callable[..., Log], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=1 << 20, index_interval_bytes=4096))
    fill(log, 600)
    read: list[int] = []
    real_pread = os.pread

    def counting_pread(fd: int, n: int, position: int) -> bytes:
        data = real_pread(fd, n, position)
        read.append(len(data))
        return data

    first = log.read(log.log_end_offset // 3, 1000, as_file=True)  # a consumer's first fetch, inside a batch
    assert isinstance(first.records, FileSlice)
    first.records.close()
    monkeypatch.setattr(os, "pread", counting_pread)
    data = log.read(first.next_offset, 200_000, as_file=True)  # and its next one
    monkeypatch.undo()
    assert isinstance(data.records, FileSlice)
    data.records.close()
    assert len(data.records) > 150_000
    assert 0 < sum(read) < 1024  # batch headers only


def test_slices_survive_handle_eviction_and_segment_deletion(
    open_log: Callable[..., Log], tmp_path: Path, small_config: LogConfig
) -> None:
    handles = SegmentHandles(max_open_fds=6)  # two segments open at a time
    log = open_log(tmp_path / "t-0", small_config, handles=handles)
    other = open_log(tmp_path / "t-1", small_config, handles=handles)
    fill(log, 200)
    fill(other, 200, seed=8)
    first_segment = log.segment_base_offsets[:2]
    slices, expected = [], []
    for offset in (first_segment[0], first_segment[0] + 3):
        expected.append(bytes(log.read(offset, 1 << 20).records))
        data = log.read(offset, 1 << 20, as_file=True)
        assert isinstance(data.records, FileSlice)
        slices.append(data.records)
    try:
        for offset in range(0, other.log_end_offset, 20):  # evicts t-0's segments from the handle cache
            other.read(offset, 1 << 20)
        assert [s.read() for s in slices] == expected
        log.high_watermark = log.log_end_offset
        log.increment_log_start_offset(first_segment[1])
        log.delete_old_segments()
        assert log.segment_base_offsets[0] >= first_segment[1]
        assert not (tmp_path / "t-0" / f"{first_segment[0]:020d}.log").exists()
        assert [s.read() for s in slices] == expected
    finally:
        for s in slices:
            s.close()


def test_partition_reads_pass_as_file_through(tmp_path: Path) -> None:
    """As a file from SENDFILE_MIN_BYTES on; a smaller read is bytes whatever ``as_file`` says."""
    from odradek.broker.partition import SENDFILE_MIN_BYTES, Partition
    from odradek.client.common.metadata_image import PartitionRegistration

    partition = Partition("t", 0, Log.open(tmp_path / "t-0"), 1)
    try:
        partition.update(PartitionRegistration(b"\x07" * 16, 0, (1,), (1,), 1, 3, 0), 1, 0)
        for i in range(5):
            partition.append_as_leader(make_batch([bytes(SENDFILE_MIN_BYTES // 8)] * 3, timestamp=1000 + i))
        assert partition.log.high_watermark == 15
        small = partition.read(14, 1 << 20, as_file=True)
        assert not isinstance(small.records, FileSlice) and len(small.records) < SENDFILE_MIN_BYTES
        for read in (partition.read, lambda *a, **k: partition.read_committed(*a, **k).data):
            buffered = read(4, 1 << 20)
            filed = read(4, 1 << 20, as_file=True)
            assert isinstance(filed.records, FileSlice)
            try:
                assert filed.records.read() == bytes(buffered.records)
            finally:
                filed.records.close()
            assert filed[1:] == buffered[1:]
    finally:
        partition.log.close()
