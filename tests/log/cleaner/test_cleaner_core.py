"""The sans-I/O parts of the log cleaner: offset map, policy (with a fake clock), throttle, manager."""

from __future__ import annotations

import pytest

from odradek.broker.log.cleaner.manager import CleanerManager
from odradek.broker.log.cleaner.offset_map import SLOT_SIZE, OffsetMap
from odradek.broker.log.cleaner.policy import (
    CompactionConfig,
    LogSnapshot,
    SegmentInfo,
    choose,
    cleanable,
    first_uncleanable_offset,
)
from odradek.broker.log.cleaner.stats import PassStats
from odradek.broker.log.cleaner.throttle import Throttler

NOW = 1_700_000_000_000


def test_the_map_keeps_the_latest_offset_and_is_bounded_by_its_budget() -> None:
    m = OffsetMap(100 * SLOT_SIZE, load_factor=0.9)
    assert m.slots == 100 and m.max_entries == 90 and m.memory_bytes == 100 * SLOT_SIZE
    for i in range(90):
        m.put(b"k%d" % i, i)
    m.put(b"k3", 500)  # an update takes no new slot
    assert m.size == 90 and m.get(b"k3") == 500 and m.get(b"k89") == 89 and m.get(b"absent") == -1
    assert m.latest_offset == 500 and not m.has_room(1) and m.has_room(0)
    with pytest.raises(OverflowError):
        m.put(b"one too many", 501)
    full = OffsetMap(4 * SLOT_SIZE, load_factor=1.0)
    for i in range(4):
        full.put(b"f%d" % i, i)
    assert full.get(b"absent") == -1  # a full table still answers
    m.clear()
    assert m.size == 0 and m.get(b"k3") == -1 and m.has_room(90)
    with pytest.raises(ValueError):
        OffsetMap(SLOT_SIZE - 1)


def seg(base: int, end: int, size: int = 100, max_ts: int = NOW - 10_000_000, first_ts: int = -1) -> SegmentInfo:
    return SegmentInfo(base, end, size, max_ts, first_ts)


def snapshot(
    segments: list[SegmentInfo], first_dirty: int = 0, hw: int | None = None, key: str = "t-0", **config: object
) -> LogSnapshot:
    return LogSnapshot(
        key, segments, 0, segments[-1].end_offset if hw is None else hw, first_dirty, CompactionConfig(**config)
    )


def test_the_active_segment_the_high_watermark_and_the_min_lag_bound_the_cleanable_section() -> None:
    segs = [seg(0, 10), seg(10, 20), seg(20, 30, max_ts=NOW - 500), seg(30, 35)]
    assert first_uncleanable_offset(snapshot(segs), NOW) == 30  # the active segment
    assert first_uncleanable_offset(snapshot(segs, hw=15), NOW) == 10  # the segment holding the high watermark
    assert first_uncleanable_offset(snapshot(segs, min_compaction_lag_ms=1000), NOW) == 20  # a record too young
    assert first_uncleanable_offset(snapshot(segs, min_compaction_lag_ms=1000), NOW + 501) == 30


def test_the_dirtiest_log_above_the_ratio_is_chosen_and_skipped_logs_are_not() -> None:
    clean_a = snapshot([seg(0, 10), seg(10, 20), seg(20, 30), seg(30, 31)], first_dirty=20, key="a")  # 1/3 dirty
    dirty_b = snapshot([seg(0, 10), seg(10, 20), seg(20, 30), seg(30, 31)], first_dirty=10, key="b")  # 2/3 dirty
    chosen, max_ratio = choose([clean_a, dirty_b], NOW)
    assert chosen is not None and chosen.key == "b" and (chosen.first_dirty, chosen.end) == (10, 30)
    assert max_ratio == pytest.approx(2 / 3)
    assert choose([clean_a, dirty_b], NOW, skip={"b"})[0] is None  # a is below 0.5; b uncleanable or busy
    assert choose([clean_a], NOW)[0] is None
    low = snapshot(clean_a.segments, first_dirty=20, key="a", min_cleanable_dirty_ratio=0.3)
    assert choose([low], NOW)[0] is not None


def test_max_compaction_lag_forces_a_quiet_log_below_the_ratio_once_it_passes() -> None:
    old = NOW - 60_000
    segs = [seg(0, 10), seg(10, 20), seg(20, 30), seg(30, 40, first_ts=old, max_ts=old + 10), seg(40, 41)]
    quiet = snapshot(segs, first_dirty=30, max_compaction_lag_ms=60_000)  # 1/4 dirty
    assert choose([quiet], NOW)[0] is None
    chosen = choose([quiet], NOW + 1)[0]
    assert chosen is not None and chosen.due_by_max_lag and (chosen.first_dirty, chosen.end) == (30, 40)
    assert cleanable(quiet, NOW + 1).oldest_dirty_timestamp == old


def test_a_log_is_due_when_its_tombstones_may_go_even_with_nothing_dirty() -> None:
    segs = [seg(0, 10), seg(10, 11)]
    done = snapshot(segs, first_dirty=10)
    assert choose([done], NOW)[0] is None
    due = LogSnapshot("t-0", segs, 0, 11, 10, CompactionConfig(), tombstone_due_ms=NOW)
    chosen = choose([due], NOW)[0]
    assert chosen is not None and chosen.due_by_tombstones and chosen.first_dirty == chosen.end == 10
    assert choose([due], NOW - 1)[0] is None


def test_bad_compaction_settings_are_refused() -> None:
    for bad in ({"min_cleanable_dirty_ratio": 1.5}, {"min_compaction_lag_ms": -1}, {"max_compaction_lag_ms": 0}):
        with pytest.raises(ValueError):
            CompactionConfig(**bad)  # type: ignore[arg-type]


def test_the_throttle_holds_the_rate_and_one_second_of_credit() -> None:
    t = Throttler(1000, NOW)
    assert t.acquire(1000, NOW) == 0.0  # the first second's credit
    assert t.acquire(500, NOW) == pytest.approx(0.5)
    assert t.acquire(0, NOW + 500) == 0.0  # slept: the debt is paid
    assert t.acquire(2000, NOW + 100_000) == pytest.approx(1.0)  # idle time does not bank more than a second


def test_the_manager_tracks_first_dirty_offsets_uncleanable_logs_and_work_in_progress() -> None:
    segs = [seg(0, 10), seg(10, 20), seg(20, 21)]
    m = CleanerManager(NOW, {"a": 0})
    snaps = [m.snapshot(snapshot(segs, key=k), 21) for k in ("a", "b")]
    first = m.grab(snaps, NOW)
    second = m.grab(snaps, NOW)
    assert first is not None and second is not None and {first.key, second.key} == {"a", "b"}
    assert m.grab(snaps, NOW) is None  # both in progress
    m.done(first.key, PassStats(first_dirty=0, end=20), NOW)
    assert m.failed(second.key, ValueError("corrupt")) and not m.failed(second.key, ValueError("again"))
    assert m.first_dirty_offsets()[first.key] == 20
    assert m.grab([m.snapshot(snapshot(segs, key=k), 21) for k in ("a", "b")], NOW) is None
    assert list(m.uncleanable()) == [second.key]
    metrics = m.metrics(NOW + 5)
    assert metrics.time_since_last_run_ms == 5 and metrics.uncleanable == [second.key] and metrics.passes == 1
    m.truncated(first.key, 5)
    assert m.first_dirty_offsets()[first.key] == 5
