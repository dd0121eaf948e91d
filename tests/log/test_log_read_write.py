import itertools
import random
from collections.abc import Callable
from pathlib import Path

import pytest
from log_batches import make_batch, split_batches

from odradek.broker.log.config import LogConfig
from odradek.broker.log.log import Log, UnexpectedAppendOffsetError
from odradek.broker.log.rewrite import CREATE_TIME, LOG_APPEND_TIME, rewrite_for_append
from odradek.client.errors import CorruptRecordError, OffsetOutOfRangeError
from odradek.client.record.header import PREFIX_SIZE, parse_header, validate_batch


def fill(log: Log, n: int, seed: int = 1, epoch: int = 0) -> list[tuple[int, int, bytes]]:
    """Append ``n`` random batches as leader; (first offset, last offset, batch as sent) each."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        values = [rng.randbytes(rng.randint(0, 300)) for _ in range(rng.randint(1, 6))]
        batch = make_batch(values, timestamp=10_000 + 10 * i)
        info = log.append_as_leader(batch, epoch)
        out.append((info.first_offset, info.last_offset, batch))
    return out


def read_all(log: Log, max_bytes: int, start: int = 0, max_offset: int | None = None) -> list[bytes]:
    batches, offset = [], start
    while True:
        data = log.read(offset, max_bytes, max_offset)
        if not data.records:
            return batches
        batches.extend(split_batches(bytes(data.records)))
        offset = data.next_offset


def test_round_trip_across_many_segments(open_log: Callable[..., Log], tmp_path: Path, small_config: LogConfig) -> None:
    log = open_log(tmp_path / "t-0", small_config)
    sent = fill(log, 400)
    assert log.num_segments > 10
    assert sent[0][0] == 0 and all(b[0] == a[1] + 1 for a, b in itertools.pairwise(sent))
    assert log.log_end_offset == sent[-1][1] + 1
    for max_bytes in (1, 700, 5000, 1 << 20):
        stored = read_all(log, max_bytes)
        assert len(stored) == len(sent)
        for (first, last, original), batch in zip(sent, stored):
            h = validate_batch(batch)
            assert (h.base_offset, h.last_offset, h.partition_leader_epoch) == (first, last, 0)
            assert batch[PREFIX_SIZE:] == original[PREFIX_SIZE:]  # only offset and epoch were rewritten
    log.close()


def test_read_from_the_middle_of_a_batch_returns_the_containing_batch(
    open_log: Callable[..., Log], tmp_path: Path, small_config: LogConfig
) -> None:
    log = open_log(tmp_path / "t-0", small_config)
    sent = fill(log, 200)
    rng = random.Random(3)
    for _ in range(300):
        offset = rng.randrange(log.log_end_offset)
        data = log.read(offset, 1)  # min_one_batch: exactly the one batch
        h = parse_header(data.records)
        assert h.base_offset <= offset <= h.last_offset
        assert data.first_offset == h.base_offset and data.next_offset == h.next_offset
        assert len(data.records) == h.size
        assert (h.base_offset, h.last_offset) in {(f, la) for f, la, _ in sent}


def test_max_bytes_returns_whole_batches_within_the_limit(
    open_log: Callable[..., Log], tmp_path: Path, small_config: LogConfig
) -> None:
    log = open_log(tmp_path / "t-0", small_config)
    fill(log, 100)
    rng = random.Random(4)
    for _ in range(200):
        offset, max_bytes = rng.randrange(log.log_end_offset), rng.randint(1, 3000)
        data = log.read(offset, max_bytes)
        batches = split_batches(bytes(data.records))
        assert batches, "min_one_batch returns at least one batch"
        assert len(data.records) <= max_bytes or len(batches) == 1
        assert sum(map(len, batches)) == len(data.records)
        assert data.next_offset == parse_header(batches[-1]).next_offset
        if len(data.records) > max_bytes:
            assert log.read(offset, max_bytes, min_one_batch=False).records == b""


def test_max_offset_is_an_exclusive_upper_bound(
    open_log: Callable[..., Log], tmp_path: Path, small_config: LogConfig
) -> None:
    log = open_log(tmp_path / "t-0", small_config)
    sent = fill(log, 80)
    for first, last, _ in sent[::7]:
        for max_offset in (first, first + 1, last + 1):
            batches = read_all(log, 1 << 20, max_offset=max_offset)
            assert all(parse_header(b).last_offset < max_offset for b in batches)
            expected = [s for s in sent if s[1] < max_offset]
            assert len(batches) == len(expected)
    assert log.read(10, 1 << 20, max_offset=10).records == b""
    data = log.read(0, 1 << 20, max_offset=0)
    assert (data.records, data.next_offset) == (b"", 0)


def test_read_outside_the_log_is_out_of_range(
    open_log: Callable[..., Log], tmp_path: Path, small_config: LogConfig
) -> None:
    log = open_log(tmp_path / "t-0", small_config)
    fill(log, 5)
    with pytest.raises(OffsetOutOfRangeError) as e:
        log.read(log.log_end_offset + 1, 100)
    assert e.value.code_name == "OFFSET_OUT_OF_RANGE"
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    at_end = log.read(log.log_end_offset, 100)
    assert at_end.records == b"" and at_end.next_offset == log.log_end_offset


def test_read_reports_the_partition_offsets(
    open_log: Callable[..., Log], tmp_path: Path, small_config: LogConfig
) -> None:
    log = open_log(tmp_path / "t-0", small_config)
    fill(log, 5)
    log.high_watermark = 7
    data = log.read(0, 100)
    assert (data.high_watermark, data.log_start_offset, data.log_end_offset) == (7, 0, log.log_end_offset)


def test_offset_for_timestamp(open_log: Callable[..., Log], tmp_path: Path, small_config: LogConfig) -> None:
    """Record granularity, as Kafka: the first record (not batch) at or after the target, with its own timestamp."""
    log = open_log(tmp_path / "t-0", small_config)
    rng = random.Random(5)
    records: list[tuple[int, int]] = []  # (offset, timestamp) of every record, in offset order
    for i in range(150):
        ts = 1000 + 10 * i + rng.randint(-40, 40)  # mostly increasing, with out-of-order producers
        n = rng.randint(1, 4)
        step = rng.choice([0, 1, 7])
        info = log.append_as_leader(make_batch(n, timestamp=ts, timestamp_step=step), 0)
        records += [(info.first_offset + k, ts + k * step) for k in range(n)]

    def expected(target: int) -> tuple[int, int] | None:
        return next(((o, t) for o, t in records if t >= target), None)

    def found(target: int) -> tuple[int, int] | None:
        hit = log.offset_for_timestamp(target)
        return None if hit is None else (hit.offset, hit.timestamp)

    targets = [0, 999, 1000, 1500, 2000, 2480, 2600, 10**9, *(rng.randint(900, 2600) for _ in range(100))]
    for target in targets:
        assert found(target) == expected(target), target
    log.close()
    for clean in (True, False):  # the time index survives reopening, or is rebuilt by recovery
        log = open_log(tmp_path / "t-0", small_config, clean_shutdown=clean)
        for target in targets:
            assert found(target) == expected(target), target
        log.close()


def test_offset_for_timestamp_inside_a_batch(open_log: Callable[..., Log], tmp_path: Path) -> None:
    """A target that falls between records of one batch answers the record that reaches it, not the batch start
    (a consumer seeking by time would otherwise get records older than asked), with that record's timestamp."""
    log = open_log(tmp_path / "t-0", LogConfig())
    log.append_as_leader(make_batch(5, timestamp=1000, timestamp_step=10), 0)  # 1000, 1010, ..., 1040
    log.high_watermark = log.log_end_offset
    hit = log.offset_for_timestamp(1025)
    assert hit is not None and (hit.offset, hit.timestamp) == (3, 1030)
    assert log.offset_for_timestamp(1040)[:2] == (4, 1040)
    assert log.offset_for_timestamp(1041) is None
    assert log.offset_for_timestamp(0)[:2] == (0, 1000)


def test_offset_for_timestamp_respects_the_log_start(open_log: Callable[..., Log], tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig())
    log.append_as_leader(make_batch(5, timestamp=1000, timestamp_step=10), 0)
    log.high_watermark = log.log_end_offset
    assert log.increment_log_start_offset(2)
    assert log.offset_for_timestamp(0)[:2] == (2, 1020)


def test_offset_for_timestamp_in_log_append_time_batches(open_log: Callable[..., Log], tmp_path: Path) -> None:
    """Every record of a LogAppendTime batch carries the batch's max timestamp: the batch's first record answers."""
    log = open_log(tmp_path / "t-0", LogConfig())
    stamped = rewrite_for_append(make_batch(4, timestamp=1000, timestamp_step=10), LOG_APPEND_TIME, "producer", 5000)
    log.append_as_leader(make_batch(2, timestamp=900), 0)
    log.append_as_leader(stamped, 0)
    assert log.offset_for_timestamp(1020)[:2] == (2, 5000)
    assert log.offset_for_timestamp(5000)[:2] == (2, 5000)
    assert log.offset_for_timestamp(5001) is None


def test_offset_for_timestamp_in_compressed_batches(open_log: Callable[..., Log], tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig())
    batch = rewrite_for_append(make_batch(6, timestamp=1000, timestamp_step=10), CREATE_TIME, "zstd", 0)
    assert parse_header(batch).compression != 0
    log.append_as_leader(batch, 0)
    assert log.offset_for_timestamp(1031)[:2] == (4, 1040)


def test_follower_append_keeps_offsets_and_refuses_anything_but_the_log_end(
    open_log: Callable[..., Log], tmp_path: Path, small_config: LogConfig
) -> None:
    log = open_log(tmp_path / "t-0", small_config)
    info = log.append_as_follower(make_batch(3, base_offset=0, epoch=4) + make_batch(2, base_offset=3, epoch=4))
    assert (info.first_offset, info.last_offset, info.batch_count) == (0, 4, 2)
    log.append_as_follower(make_batch(1, base_offset=5, epoch=6))
    assert log.log_end_offset == 6
    assert log.epoch_entries() == [(4, 0), (6, 5)]
    for bad in (
        make_batch(1, base_offset=5),  # going back
        make_batch(1, base_offset=9),  # a hole: the answer to a fetch from before a truncation
        make_batch(2, base_offset=6) + make_batch(1, base_offset=9),  # a hole between batches
        make_batch(2, base_offset=6) + make_batch(1, base_offset=7),  # overlapping batches
    ):
        with pytest.raises(UnexpectedAppendOffsetError) as e:
            log.append_as_follower(bad)
        assert e.value.code_name == "INVALID_REQUEST"
    assert log.log_end_offset == 6 and log.failure is None
    assert [parse_header(b).base_offset for b in read_all(log, 1 << 20)] == [0, 3, 5]
    assert log.epoch_entries() == [(4, 0), (6, 5)]


def test_follower_append_of_a_compacted_leaders_answer_takes_its_gaps(
    open_log: Callable[..., Log], tmp_path: Path, small_config: LogConfig
) -> None:
    """Given the offset it fetched from (the log end), a follower takes batches that skip offsets the leader's
    cleaner removed; an answer fetched from another offset, or overlapping batches, are still refused."""
    log = open_log(tmp_path / "t-0", small_config)
    log.append_as_follower(make_batch(2, base_offset=0), fetch_offset=0)
    for bad, fetched in (
        (make_batch(1, base_offset=9), 5),  # fetched before a truncation: the log ends at 2
        (make_batch(1, base_offset=1), 2),  # overlaps what the log holds
        (make_batch(2, base_offset=6) + make_batch(1, base_offset=7), 2),  # overlapping batches
    ):
        with pytest.raises(UnexpectedAppendOffsetError):
            log.append_as_follower(bad, fetch_offset=fetched)
    info = log.append_as_follower(make_batch(2, base_offset=5) + make_batch(1, base_offset=10), fetch_offset=2)
    assert (info.first_offset, info.last_offset, log.log_end_offset) == (5, 10, 11)
    assert [parse_header(b).base_offset for b in read_all(log, 1 << 20)] == [0, 5, 10]
    # a read at a removed offset returns the next batch
    assert parse_header(log.read(3, 1 << 20).records).base_offset == 5


def test_follower_append_in_parts_refuses_a_hole_before_writing_anything(
    open_log: Callable[..., Log], tmp_path: Path
) -> None:
    """A fetch larger than a segment is appended in runs; a stale one is refused before the first run."""
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=1024))
    log.append_as_follower(make_batch(1, base_offset=0))
    batches = [make_batch([b"v" * 300], base_offset=10 + i) for i in range(6)]  # > one segment, starts at 10
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(b"".join(batches))
    assert log.log_end_offset == 1 and log.num_segments == 1


def test_an_empty_follower_log_takes_the_batch_holding_its_log_start(
    open_log: Callable[..., Log], tmp_path: Path, small_config: LogConfig
) -> None:
    """A replica restarted at its leader's log start, which DeleteRecords put inside a batch: fetching from there,
    it gets that batch (reads answer from the batch holding the offset). The log restarts at the batch's base
    offset to take it whole, and keeps its log start, so nothing below it becomes readable."""
    log = open_log(tmp_path / "t-0", small_config)
    log.truncate_fully_and_start_at(5)
    fetched = make_batch(10, base_offset=0, epoch=3) + make_batch(2, base_offset=10, epoch=4)
    info = log.append_as_follower(fetched, fetch_offset=5)
    assert (info.first_offset, info.last_offset, info.log_start_offset) == (0, 11, 5)
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset, log.recovery_point) == (5, 5, 12, 0)
    assert log.segment_base_offsets == [0]
    assert log.epoch_entries() == [(3, 5), (4, 10)]
    assert [parse_header(b).base_offset for b in read_all(log, 1 << 20, start=5)] == [0, 10]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4, 1 << 20)
    log.close()
    reopened = open_log(tmp_path / "t-0", small_config, log_start_offset=5, recovery_point=0)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (5, 12)


def test_only_an_empty_log_restarts_below_its_log_start_and_only_for_the_batch_holding_it(
    open_log: Callable[..., Log], tmp_path: Path, small_config: LogConfig
) -> None:
    log = open_log(tmp_path / "t-0", small_config)
    log.truncate_fully_and_start_at(5)
    for bad, fetch_offset in (
        (make_batch(5, base_offset=0), 5),  # ends below the log start
        (make_batch(10, base_offset=0), 3),  # the answer to another fetch
        (make_batch(10, base_offset=0) + make_batch(1, base_offset=12), None),  # a hole after it
    ):
        with pytest.raises(UnexpectedAppendOffsetError):
            log.append_as_follower(bad, fetch_offset)
        assert (log.log_start_offset, log.log_end_offset, log.segment_base_offsets) == (5, 5, [5])
    log.append_as_follower(make_batch(2, base_offset=5), fetch_offset=5)
    with pytest.raises(UnexpectedAppendOffsetError):  # no longer empty: a batch going back is refused
        log.append_as_follower(make_batch(10, base_offset=0), fetch_offset=7)
    assert (log.log_start_offset, log.log_end_offset, log.segment_base_offsets) == (5, 7, [5])


def test_append_info(open_log: Callable[..., Log], tmp_path: Path, small_config: LogConfig) -> None:
    log = open_log(tmp_path / "t-0", small_config)
    log.append_as_leader(make_batch(2), 0)
    buf = make_batch(3, timestamp=500) + make_batch(4, timestamp=900) + make_batch(1, timestamp=100)
    info = log.append_as_leader(buf, 0)
    assert info.first_offset == 2 and info.last_offset == 9
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (903, 5)
    assert (info.record_count, info.batch_count, info.size) == (8, 3, len(buf))


def test_empty_buffer_is_rejected(open_log: Callable[..., Log], tmp_path: Path, small_config: LogConfig) -> None:
    log = open_log(tmp_path / "t-0", small_config)
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(b"", 0)
    with pytest.raises(CorruptRecordError):
        log.append_as_follower(b"")
