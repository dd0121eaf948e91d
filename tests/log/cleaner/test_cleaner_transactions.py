"""Cleaning logs with transactions: aborted records go and supersede nothing, markers go only once their
transaction's data is gone and delete.retention.ms passed, aborted-index entries follow their markers into cleaned
segments, and nothing at or past the first unstable offset is touched."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from odradek.broker.log.cleaner.cleaner import Cleaner
from odradek.broker.log.cleaner.policy import CompactionConfig, LogSnapshot, SegmentInfo, first_uncleanable_offset
from odradek.broker.log.cleaner.stats import PassStats
from odradek.broker.log.config import LogConfig
from odradek.broker.log.log import AbortedTxn, Log
from odradek.broker.log.txn_index import TXN_INDEX_SUFFIX
from odradek.client.record.batch import read_batches
from odradek.client.record.builder import encode_batch

CONFIG = LogConfig(segment_bytes=512, index_interval_bytes=128, segment_index_bytes=4096)
RETENTION = 1000
P1, P2 = 8001, 8002

Row = tuple[int, bytes | None, bytes | None, bool]  # offset, key, value, in a control batch


def write(log: Log, clock: Any, pairs: list[tuple[bytes, bytes]], pid: int = -1, epoch: int = 0, seq: int = -1) -> None:
    batch = encode_batch(
        [v for _, v in pairs],
        [k for k, _ in pairs],
        clock.now,
        producer_id=pid,
        producer_epoch=epoch if pid >= 0 else -1,
        base_sequence=seq,
        is_transactional=pid >= 0,
    )
    log.append_as_leader(batch, 0)


def end_txn(log: Log, clock: Any, pid: int, committed: bool, epoch: int) -> int:
    return log.append_marker(committed, pid, epoch, 0, 0, clock.now).first_offset


def pad(log: Log, clock: Any, n: int, tag: str) -> None:
    for i in range(n):
        write(log, clock, [(f"{tag}-{i}".encode(), b"x" * 40)])


def rows(log: Log) -> list[Row]:
    out: list[Row] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        for batch in read_batches(bytes(data.records)):
            out.extend((r.offset, r.key, r.value, batch.header.is_control) for r in batch.records())
        offset = data.next_offset
    return out


def clean(log: Log, clock: Callable[[], int]) -> PassStats:
    view = log.compaction_view()
    config = CompactionConfig(delete_retention_ms=RETENTION)
    return Cleaner(1 << 20, clock=clock).clean(log, config, 0, view.active_base_offset, log.log_end_offset)


def values(log: Log) -> dict[bytes, bytes | None]:
    return {key: value for _, key, value, control in rows(log) if not control and key is not None}


def test_aborted_records_go_and_their_marker_after_the_data_and_delete_retention(
    open_log: Callable[..., Log], tmp_path: Path, clock: Any
) -> None:
    log = open_log(tmp_path / "t-0", CONFIG, clock=clock)
    write(log, clock, [(b"k1", b"a1"), (b"k2", b"a2")], P1, 0, 0)
    end_txn(log, clock, P1, True, 1)
    write(log, clock, [(b"k1", b"bad"), (b"k2", b"bad")], P2, 0, 0)
    pad(log, clock, 8, "mid")  # the aborted data and its marker in different segments
    abort = end_txn(log, clock, P2, False, 1)
    write(log, clock, [(b"k3", b"c")], P2, 1, 0)  # P2's next transaction: its marker is P2's last
    end_txn(log, clock, P2, True, 2)
    pad(log, clock, 12, "end")
    log.high_watermark = log.log_end_offset
    assert log.first_unstable_offset is None
    assert log.aborted_transactions(0, log.log_end_offset) == [AbortedTxn(P2, 3)]
    assert log.num_segments > 3

    stats = clean(log, clock)
    assert stats.records_removed >= 2
    kept = values(log)
    assert kept[b"k1"] == b"a1" and kept[b"k2"] == b"a2"  # the aborted values removed and superseding nothing
    assert b"bad" not in kept.values()
    # the ABORT marker stays this pass (its data was still there), with its index entry
    assert any(offset == abort for offset, *_ in rows(log))
    assert log.aborted_transactions(0, log.log_end_offset) == [AbortedTxn(P2, 3)]

    clean(log, clock)  # no data before the marker any more: stamped with its delete horizon, still there
    assert any(offset == abort for offset, *_ in rows(log))
    clock.now += RETENTION + 1
    stats = clean(log, clock)
    assert stats.markers_removed >= 1
    assert not any(offset == abort for offset, *_ in rows(log))
    assert log.aborted_transactions(0, log.log_end_offset) == []
    assert values(log)[b"k1"] == b"a1"
    expected = rows(log)
    log.close()
    for clean_shutdown in (True, False):
        again = open_log(tmp_path / "t-0", CONFIG, clean_shutdown=clean_shutdown, clock=clock)
        assert rows(again) == expected
        assert again.aborted_transactions(0, again.log_end_offset) == []
        again.close()


def test_aborted_index_entries_survive_cleaning_and_restart(
    open_log: Callable[..., Log], tmp_path: Path, clock: Any
) -> None:
    log = open_log(tmp_path / "t-0", CONFIG, clock=clock)
    write(log, clock, [(b"k1", b"bad")], P1, 0, 0)
    pad(log, clock, 6, "a")
    write(log, clock, [(b"k1", b"bad2")], P1, 0, 1)  # P1's last data batch: kept whole by the cleaner
    end_txn(log, clock, P1, False, 1)
    write(log, clock, [(b"k9", b"later")], P1, 1, 0)
    end_txn(log, clock, P1, True, 2)
    pad(log, clock, 10, "b")
    log.high_watermark = log.log_end_offset
    before = log.aborted_transactions(0, log.log_end_offset)
    assert before == [AbortedTxn(P1, 0)]
    clean(log, clock)
    assert log.aborted_transactions(0, log.log_end_offset) == before  # the protected batch keeps it needed
    assert list((tmp_path / "t-0").glob("*" + TXN_INDEX_SUFFIX))
    log.close()
    again = open_log(tmp_path / "t-0", CONFIG, clean_shutdown=True, clock=clock)
    assert again.aborted_transactions(0, again.log_end_offset) == before
    again.close()


def test_nothing_at_or_past_the_first_unstable_offset_is_cleaned(
    open_log: Callable[..., Log], tmp_path: Path, clock: Any
) -> None:
    log = open_log(tmp_path / "t-0", CONFIG, clock=clock)
    for _ in range(3):
        pad(log, clock, 6, "k")  # the same keys again and again
    first = log.log_end_offset
    write(log, clock, [(b"k-0", b"open")], P1, 0, 0)  # an open transaction
    for _ in range(3):
        pad(log, clock, 6, "k")
    log.high_watermark = log.log_end_offset
    assert log.first_unstable_offset == first
    view = log.compaction_view()
    holding = max(s.base_offset for s in view.sealed if s.base_offset <= first)
    untouched = {s.base_offset: s.log_path.read_bytes() for s in view.sealed if s.base_offset >= holding}
    stats = clean(log, clock)
    assert stats.end <= holding and stats.records_removed > 0
    for base, data in untouched.items():
        assert (tmp_path / "t-0" / f"{base:020d}.log").read_bytes() == data
    # the policy agrees: the cleanable section ends at that segment
    segments = [SegmentInfo(s.base_offset, s.end_offset, s.size, s.max_timestamp) for s in view.sealed]
    segments.append(SegmentInfo(view.active_base_offset, view.active_end_offset, view.active_size, -1))
    snapshot = LogSnapshot("t-0", segments, 0, view.high_watermark, 0, CompactionConfig(), first_unstable_offset=first)
    assert first_uncleanable_offset(snapshot, clock.now) == holding
    # once the transaction commits and the marker is replicated, the rest becomes cleanable
    end_txn(log, clock, P1, True, 1)
    log.high_watermark = log.log_end_offset
    assert log.first_unstable_offset is None
    stats = clean(log, clock)
    assert stats.end > holding
    assert values(log)[b"k-0"] == b"x" * 40
