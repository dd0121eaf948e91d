"""What index.interval.bytes, segment.index.bytes and producer.id.expiration.ms do to a log."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from log_batches import make_batch

from odradek.broker.log.config import LogConfig
from odradek.broker.log.log import Log
from odradek.client.errors import OutOfOrderSequenceError
from odradek.client.record.builder import encode_batch


def index_entries(log: Log) -> int:
    return sum(seg.offset_index.entries for seg in log._segments)


def test_index_interval_bytes_sets_how_dense_the_offset_index_is(open_log: Callable[..., Log], tmp_path: Path) -> None:
    entries = {}
    for interval in (0, 1000, 100_000):
        log = open_log(tmp_path / f"i{interval}-0", LogConfig(index_interval_bytes=interval))
        for _ in range(100):
            log.append_as_leader(make_batch(3), 0)  # ~100 bytes a batch
        entries[interval] = index_entries(log)
    assert entries[0] >= 99  # every batch after the first is indexed
    assert 5 <= entries[1000] <= 15
    assert entries[100_000] == 0


def test_segment_index_bytes_rolls_a_segment_whose_index_is_full(open_log: Callable[..., Log], tmp_path: Path) -> None:
    def segments(index_bytes: int) -> int:
        config = LogConfig(index_interval_bytes=0, segment_index_bytes=index_bytes)
        log = open_log(tmp_path / f"s{index_bytes}-0", config)
        for _ in range(40):
            log.append_as_leader(make_batch(1), 0)
        return log.num_segments

    assert segments(10 * 1024 * 1024) == 1
    assert segments(120) == 3  # 15 offset-index entries (8 bytes each) per segment: 40 batches need 3


def test_producer_id_expiration_ms_forgets_a_silent_producer(open_log: Callable[..., Log], tmp_path: Path) -> None:
    """After expiry the producer's next sequence is not checked (a new producer may start anywhere); before it, a
    gap in its sequence is OUT_OF_ORDER_SEQUENCE."""

    def batch(seq: int) -> bytes:
        return encode_batch([b"v"], timestamps=1_000, producer_id=77, producer_epoch=0, base_sequence=seq)

    kept = open_log(tmp_path / "kept-0", LogConfig(producer_id_expiration_ms=10**12), clock=lambda: 10_000)
    short = open_log(tmp_path / "short-0", LogConfig(producer_id_expiration_ms=5_000), clock=lambda: 10_000)
    for log in (kept, short):
        log.append_as_leader(batch(0), 0)
        log.delete_old_segments(now_ms=10_000)  # the periodic pass that also expires producers
    try:
        kept.append_as_leader(batch(5), 0)
    except OutOfOrderSequenceError:
        pass
    else:
        raise AssertionError("a remembered producer's sequence gap was accepted")
    assert short.append_as_leader(batch(5), 0).first_offset == 1
