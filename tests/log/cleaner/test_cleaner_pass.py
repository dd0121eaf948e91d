"""Cleaning passes over real logs on disk: what survives, where, and what a restart sees."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from odradek.broker.log.cleaner.cleaner import Cleaner
from odradek.broker.log.cleaner.manager import CleanerManager
from odradek.broker.log.cleaner.offset_map import SLOT_SIZE
from odradek.broker.log.cleaner.policy import CompactionConfig
from odradek.broker.log.cleaner.runner import CleanerThread, CompactedLog
from odradek.broker.log.config import LogConfig
from odradek.broker.log.log import Log
from odradek.client.record.batch import read_batches
from odradek.client.record.builder import encode_batch
from odradek.client.record.header import BatchHeader

CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=256, segment_index_bytes=4096)
DAY = 86_400_000

Row = tuple[int, int, bytes | None, bytes | None]  # offset, timestamp, key, value


def append(log: Log, clock: Any, pairs: list[tuple[bytes, bytes | None]], **producer: int) -> None:
    log.append_as_leader(
        encode_batch([v for _, v in pairs], [k for k, _ in pairs], clock.now, **producer),
        0,
    )
    log.high_watermark = log.log_end_offset


def rows(log: Log, start: int | None = None) -> list[Row]:
    out: list[Row] = []
    offset = log.log_start_offset if start is None else start
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        for batch in read_batches(bytes(data.records)):
            out.extend((r.offset, r.timestamp, r.key, r.value) for r in batch.records())
        offset = data.next_offset
    return out


def latest(all_rows: list[Row], below: int) -> list[Row]:
    """What compaction should leave of the rows below ``below`` (tombstones included), in offset order."""
    last: dict[bytes | None, int] = {}
    for r in all_rows:
        if r[0] < below:
            last[r[2]] = r[0]
    return [r for r in all_rows if r[0] >= below or last[r[2]] == r[0]]


def fill(log: Log, clock: Any, batches: int, keys: int = 20, seed: int = 1, tombstones: float = 0.0) -> None:
    rng = random.Random(seed)
    for _ in range(batches):
        pairs = []
        for _ in range(5):
            value = None if rng.random() < tombstones else rng.randbytes(rng.randint(10, 60))
            pairs.append((b"key-%d" % rng.randrange(keys), value))
        append(log, clock, pairs)
        clock.now += 1


def clean(log: Log, clock: Callable[[], int], horizon: int | None = None, **config: int) -> object:
    cleaner = Cleaner(1 << 20, clock=clock)
    view = log.compaction_view()
    return cleaner.clean(
        log,
        CompactionConfig(**config),  # type: ignore[arg-type]
        0,
        view.active_base_offset,
        log.log_end_offset if horizon is None else horizon,
    )


def test_the_last_value_of_each_key_survives_at_its_offset_in_order_and_segments_are_grouped(
    open_log: Callable[..., Log], tmp_path: Path, clock: Any
) -> None:
    log = open_log(tmp_path / "t-0", CONFIG, clock=clock)
    fill(log, clock, 120)
    before, segments_before = rows(log), log.num_segments
    active = log.segment_base_offsets[-1]
    stats = clean(log, clock)
    after = rows(log)
    assert after == latest(before, active)
    assert stats.end == active and stats.records_removed == len(before) - len(after)
    assert stats.bytes_written < stats.bytes_read
    # The first pass copies each full segment on its own; the next groups the small cleaned ones.
    assert log.num_segments == segments_before
    stats = clean(log, clock)
    assert rows(log) == after and log.num_segments < segments_before
    assert stats.segments_out < stats.segments_in
    # A read at an offset compaction removed answers the next batch.
    removed = sorted({r[0] for r in before} - {r[0] for r in after})
    gap = removed[len(removed) // 2]
    data = log.read(gap, 1 << 20)
    first = next(iter(read_batches(bytes(data.records)))).records()
    assert data.records and max(r.offset for r in first) > gap
    assert min(r[0] for r in rows(log, gap) if r[0] >= gap) == min(r[0] for r in after if r[0] > gap)
    # Appends continue; a restart (clean or not) reads the same.
    fill(log, clock, 3, seed=9)
    expected = rows(log)
    log.close()
    for clean_shutdown in (True, False):
        again = open_log(tmp_path / "t-0", CONFIG, clean_shutdown=clean_shutdown, clock=clock)
        assert rows(again) == expected
        again.close()


def test_a_section_larger_than_the_map_is_cleaned_in_several_passes(
    open_log: Callable[..., Log], tmp_path: Path, clock: Any
) -> None:
    log = open_log(tmp_path / "t-0", CONFIG, clock=clock)
    fill(log, clock, 150, keys=200)
    before = rows(log)
    active = log.segment_base_offsets[-1]
    cleaner = Cleaner(40 * SLOT_SIZE, load_factor=1.0, clock=clock)
    first_dirty, passes = 0, 0
    while first_dirty < active:
        stats = cleaner.clean(log, CompactionConfig(), first_dirty, active, log.log_end_offset)
        assert stats.map_entries <= 40 and stats.end > first_dirty
        first_dirty = stats.end
        passes += 1
        assert passes < 100
    assert passes > 2
    assert rows(log) == latest(before, active)


def test_tombstones_stay_for_delete_retention_and_below_the_tombstone_horizon_only(
    open_log: Callable[..., Log], tmp_path: Path, clock: Any
) -> None:
    log = open_log(tmp_path / "t-0", CONFIG, clock=clock)
    append(log, clock, [(b"gone-1", b"old"), (b"gone-2", b"old")])
    fill(log, clock, 80, keys=10)
    append(log, clock, [(b"gone-1", None), (b"gone-2", None)])
    tomb_offset = log.log_end_offset - 2
    fill(log, clock, 40, keys=5, seed=2)
    before = rows(log)
    active = log.segment_base_offsets[-1]
    assert tomb_offset < active
    stats = clean(log, clock)
    tombs = [r for r in rows(log) if r[3] is None]
    assert [r[0] for r in tombs] == [tomb_offset, tomb_offset + 1]  # kept, at their offsets, with their timestamps
    assert [r[1] for r in tombs] == [r[1] for r in before if r[0] in (tomb_offset, tomb_offset + 1)]
    assert not [r for r in rows(log) if r[2] in (b"gone-1", b"gone-2") and r[0] < tomb_offset]
    assert stats.tombstone_due_ms == clock.now + DAY
    clock.now += DAY - 1
    clean(log, clock)
    assert len([r for r in rows(log) if r[3] is None]) == 2  # delete.retention.ms not yet passed
    clock.now += 2
    stats = clean(log, clock, horizon=tomb_offset + 1)  # one replica has not reached the second tombstone
    assert [r[0] for r in rows(log) if r[3] is None] == [tomb_offset + 1]
    assert stats.tombstones_removed == 1 and stats.tombstone_blocked_offset == tomb_offset + 1
    # The horizon is stamped in the batch: a restart does not forget it.
    log.close()
    log = open_log(tmp_path / "t-0", CONFIG, clock=clock)
    clean(log, clock)
    assert [r for r in rows(log) if r[3] is None] == []


def headers(log: Log) -> list[BatchHeader]:
    out: list[BatchHeader] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        out.extend(batch.header for batch in read_batches(bytes(data.records)))
        offset = data.next_offset
    return out


def test_the_last_batch_of_each_producer_stays_even_emptied_and_it_can_continue(
    open_log: Callable[..., Log], tmp_path: Path, clock: Any
) -> None:
    log = open_log(tmp_path / "t-0", CONFIG, clock=clock)
    for seq in range(0, 50, 5):
        append(log, clock, [(b"k", b"p%d" % (seq + i)) for i in range(5)], producer_id=7, producer_epoch=0,
               base_sequence=seq)  # fmt: skip
    last_batch = log.log_end_offset - 5
    fill(log, clock, 60, keys=1)
    append(log, clock, [(b"k", b"plain")])
    fill(log, clock, 30, keys=1, seed=3)
    clean(log, clock)
    assert not [r for r in rows(log) if r[0] < last_batch + 5 and r[2] == b"k"]  # every record superseded
    kept = [h for h in headers(log) if h.producer_id == 7]
    assert [(h.base_offset, h.last_offset, h.base_sequence, h.records_count) for h in kept] == [
        (last_batch, last_batch + 4, 45, 0)  # the batch stays, empty, with its offsets and sequence
    ]
    append(log, clock, [(b"k", b"p50")], producer_id=7, producer_epoch=0, base_sequence=50)
    log.close()
    log = open_log(tmp_path / "t-0", CONFIG, clock=clock)  # the producer state rebuilt from the cleaned log
    append(log, clock, [(b"k", b"p51")], producer_id=7, producer_epoch=0, base_sequence=51)
    assert rows(log)[-1][3] == b"p51"


def test_the_producers_last_batch_below_the_checkpoint_is_deduplicated_too(
    open_log: Callable[..., Log], tmp_path: Path, clock: Any
) -> None:
    """An idempotent producer writes every batch of a segment that then rolls by segment.ms: its last batch before
    the cleanable end must lose its superseded records in the same pass, since the pass checkpoints past it and
    no later pass maps those keys again (each pass would otherwise leave one such batch of duplicates behind)."""
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=4096, segment_ms=1000), clock=clock)
    rng = random.Random(3)
    for seq in range(0, 400, 10):
        pairs = [(b"key-%d" % rng.randrange(30), rng.randbytes(20)) for _ in range(10)]
        append(log, clock, pairs, producer_id=7, producer_epoch=0, base_sequence=seq)
    last = [r[2] for r in rows(log) if r[0] >= 390]
    assert len(set(last)) < len(last)  # the producer's last batch holds a key twice
    clock.now += 3_000
    append(log, clock, [(b"other", b"x")])  # rolls the segment: 0-399 is cleanable
    before = rows(log)
    manager = CleanerManager(clock.now)
    entry = {"t-0": CompactedLog(log, CompactionConfig(min_cleanable_dirty_ratio=0.01), log.log_end_offset)}
    thread = CleanerThread("c", manager, Cleaner(1 << 20, clock=clock), lambda: entry, clock=clock)
    assert thread.run_once()
    assert manager.first_dirty_offsets()["t-0"] == 400
    assert rows(log) == latest(before, 400)  # one record a key below the checkpoint
    state = manager.log_state("t-0")
    stats = state.last_pass if state is not None else None
    assert stats is not None and stats.records_read == 400 and stats.records_removed == 400 - 30
    kept = [h for h in headers(log) if h.producer_id == 7]
    assert kept[-1].last_offset == 399 and kept[-1].base_sequence == 390  # still the producer's last batch
    append(log, clock, [(b"key-1", b"y")], producer_id=7, producer_epoch=0, base_sequence=400)
    assert rows(log)[-1] == (401, clock.now, b"key-1", b"y")


def snapshot_offsets(directory: Path) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in directory.glob("*.snapshot"))


def test_merging_segments_deletes_their_producer_snapshots_and_the_state_survives_a_crash(
    open_log: Callable[..., Log], tmp_path: Path, clock: Any
) -> None:
    """Each roll writes a producer snapshot; once compaction merges segments away their snapshots must go too,
    or a compacted topic gathers one file per roll forever. Duplicate detection still works after a crash."""
    directory = tmp_path / "t-0"
    log = open_log(directory, CONFIG, clock=clock)
    seq = 0
    for round_ in range(6):
        for _ in range(15):
            append(log, clock, [(b"k", b"v%d" % (seq + i)) for i in range(5)], producer_id=7, producer_epoch=0,
                   base_sequence=seq)  # fmt: skip
            seq += 5
        fill(log, clock, 20, keys=3, seed=round_)
    rolls = len(snapshot_offsets(directory))
    assert rolls == log.num_segments - 1 > 8  # one per roll
    for _ in range(3):
        clean(log, clock)
    bases = log.segment_base_offsets
    assert log.num_segments < rolls // 2
    left = snapshot_offsets(directory)
    assert set(left[:-1]) <= set(bases) and len(left) <= log.num_segments
    log.close()
    log = open_log(directory, CONFIG, clean_shutdown=False, clock=clock)  # recovery replays from a snapshot
    retry = encode_batch([b"v%d" % i for i in range(seq - 5, seq)], [b"k"] * 5, clock.now, producer_id=7,
                         producer_epoch=0, base_sequence=seq - 5)  # fmt: skip
    end = log.log_end_offset
    assert log.append_as_leader(retry, 0).batch_count == 0 and log.log_end_offset == end  # still a duplicate
    append(log, clock, [(b"k", b"next")], producer_id=7, producer_epoch=0, base_sequence=seq)
    assert rows(log)[-1][3] == b"next"


def test_a_corrupt_log_is_uncleanable_and_reported_once_while_others_are_cleaned(
    open_log: Callable[..., Log], tmp_path: Path, clock: Any
) -> None:
    logs = {}
    for name in ("bad-0", "good-0"):
        log = open_log(tmp_path / name, CONFIG, clock=clock)
        fill(log, clock, 100)
        log.close()
    first = sorted((tmp_path / "bad-0").glob("*.log"))[0]
    data = bytearray(first.read_bytes())
    data[200] ^= 0xFF  # inside the first batch's records: CRC mismatch
    first.write_bytes(bytes(data))
    for name in ("bad-0", "good-0"):
        log = open_log(tmp_path / name, CONFIG, clean_shutdown=True, clock=clock)
        log.high_watermark = log.log_end_offset
        logs[name] = CompactedLog(log, CompactionConfig(), log.log_end_offset)
    good_before = rows(logs["good-0"].log)
    manager = CleanerManager(clock.now)
    thread = CleanerThread("cleaner-0", manager, Cleaner(1 << 20, clock=clock), lambda: logs, clock=clock)
    assert thread.run_once() and thread.run_once()
    assert not thread.run_once()  # nothing left to do: the bad log is skipped
    assert list(manager.uncleanable()) == ["bad-0"] and "CRC" in manager.uncleanable()["bad-0"]
    good = logs["good-0"].log
    assert rows(good) == latest(good_before, good.segment_base_offsets[-1])
    assert manager.first_dirty_offsets()["good-0"] == good.segment_base_offsets[-1]
    assert not logs["bad-0"].log.offline  # the log still serves: only cleaning stopped
    assert manager.metrics(clock.now).uncleanable == ["bad-0"]


def test_records_younger_than_min_compaction_lag_are_kept(
    open_log: Callable[..., Log], tmp_path: Path, clock: Any
) -> None:
    log = open_log(tmp_path / "t-0", CONFIG, clock=clock)
    fill(log, clock, 60, keys=3)
    clock.now += 10_000
    young_from = log.log_end_offset
    fill(log, clock, 60, keys=3, seed=4)
    before = rows(log)
    manager = CleanerManager(clock.now)
    entry = {"t-0": CompactedLog(log, CompactionConfig(min_compaction_lag_ms=5_000), log.log_end_offset)}
    assert CleanerThread("c", manager, Cleaner(1 << 20, clock=clock), lambda: entry, clock=clock).run_once()
    end = manager.first_dirty_offsets()["t-0"]
    assert end <= young_from
    assert [r for r in rows(log) if r[0] >= young_from] == [r for r in before if r[0] >= young_from]


def test_the_swap_refuses_when_the_log_was_truncated_meanwhile(
    open_log: Callable[..., Log], tmp_path: Path, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(tmp_path / "t-0", CONFIG, clock=clock)
    fill(log, clock, 60)
    stale = log.compaction_view()
    log.truncate_to(log.log_end_offset - 1)  # a follower truncation while the pass was planning
    before = rows(log)
    monkeypatch.setattr(log, "compaction_view", lambda: stale)
    stats = Cleaner(1 << 20).clean(log, CompactionConfig(), 0, stale.active_base_offset, log.log_end_offset)
    assert stats.aborted and stats.end == 0 and stats.segments_out == 0
    assert rows(log) == before
    assert not [p for p in os.listdir(tmp_path / "t-0") if p.endswith((".cleaned", ".swap"))]


def test_a_swap_that_would_remove_a_tombstone_the_horizon_no_longer_allows_is_refused(
    open_log: Callable[..., Log], tmp_path: Path, clock: Any
) -> None:
    """The tombstone horizon is read when a pass starts and again, under the log's lock, before each swap: a
    replica added meanwhile lowers it, and the pass is redone rather than remove what that replica still needs."""
    log = open_log(tmp_path / "t-0", CONFIG, clock=clock)
    append(log, clock, [(b"gone", b"old")])
    fill(log, clock, 40, keys=5)
    append(log, clock, [(b"gone", None)])
    tombstone = log.log_end_offset - 1
    fill(log, clock, 40, keys=5, seed=2)
    clean(log, clock, delete_retention_ms=0)  # stamps the tombstone's delete horizon (now: passed)
    before = rows(log)
    config, end = CompactionConfig(delete_retention_ms=0), log.segment_base_offsets[-1]
    cleaner = Cleaner(1 << 20, clock=clock)
    stats = cleaner.clean(log, config, 0, end, log.log_end_offset, lambda: tombstone)
    assert stats.aborted and stats.end == 0
    assert [r for r in rows(log) if r[3] is None] == [r for r in before if r[0] == tombstone]
    assert not [p for p in os.listdir(tmp_path / "t-0") if p.endswith((".cleaned", ".swap"))]
    stats = cleaner.clean(log, config, 0, end, log.log_end_offset, lambda: tombstone + 1)
    assert not stats.aborted and stats.tombstones_removed == 1
    assert [r for r in rows(log) if r[3] is None] == []


def test_a_pass_whose_log_is_paused_meanwhile_stops_before_its_next_swap(
    open_log: Callable[..., Log], tmp_path: Path, clock: Any
) -> None:
    """A replica starting to move to another log dir pauses its cleaning (Kafka's abortAndPauseCleaning): a pass
    under way asks before each group and, under the log's lock, before each swap, and stops there; what it
    swapped before stays, and it is redone once cleaning resumes."""
    log = open_log(tmp_path / "t-0", CONFIG, clock=clock)
    fill(log, clock, 120)
    before, active = rows(log), log.segment_base_offsets[-1]
    asked: list[int] = []

    def paused_at(n: int) -> Callable[[], bool]:
        def paused() -> bool:
            asked.append(n)
            return len(asked) > n

        return paused

    cleaner = Cleaner(1 << 20, clock=clock)
    # Paused before the first swap (the first group was asked about once, then the swap asks again).
    stats = cleaner.clean(log, CompactionConfig(), 0, active, log.log_end_offset, None, paused_at(1))
    assert stats.aborted and stats.end == 0 and stats.segments_out == 0 and len(asked) == 2
    assert rows(log) == before
    assert not [p for p in os.listdir(tmp_path / "t-0") if p.endswith((".cleaned", ".swap"))]
    # Paused after the first group's swap: that group stays cleaned, the rest is not touched.
    asked.clear()
    stats = cleaner.clean(log, CompactionConfig(), 0, active, log.log_end_offset, None, paused_at(2))
    assert stats.aborted and stats.end == 0 and stats.segments_out == 1
    # Resumed: the pass is redone in full.
    stats = cleaner.clean(log, CompactionConfig(), 0, active, log.log_end_offset, None, lambda: False)
    assert not stats.aborted and rows(log) == latest(before, active)


def test_a_paused_log_is_not_picked_and_keeps_its_state(
    open_log: Callable[..., Log], tmp_path: Path, clock: Any
) -> None:
    log = open_log(tmp_path / "t-0", CONFIG, clock=clock)
    fill(log, clock, 60)
    log.high_watermark = log.log_end_offset
    manager = CleanerManager(clock.now, {("t", 0): 0})
    paused = [True]
    entry = CompactedLog(
        log, CompactionConfig(min_cleanable_dirty_ratio=0.0), log.log_end_offset, None, lambda: paused[0]
    )
    thread = CleanerThread("t", manager, Cleaner(1 << 20, clock=clock), lambda: {("t", 0): entry}, clock=clock)
    assert not thread.run_once()
    assert manager.log_state(("t", 0)) is not None and manager.metrics(clock.now).passes == 0
    paused[0] = False
    assert thread.run_once()
    state = manager.log_state(("t", 0))
    assert state is not None and state.first_dirty > 0
