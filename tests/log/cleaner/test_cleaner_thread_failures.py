"""A cleaning pass that cannot finish never stops compaction silently: the log is reported uncleanable and leaves
the cleaner's in-progress set, whatever the error; and the largest settings Kafka accepts clean normally."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_cleaner_pass import CONFIG, append, fill, latest, rows

from odradek.broker.log.cleaner.cleaner import Cleaner
from odradek.broker.log.cleaner.manager import CleanerManager
from odradek.broker.log.cleaner.policy import CompactionConfig
from odradek.broker.log.cleaner.runner import CleanerThread, CompactedLog
from odradek.broker.log.log import Log
from odradek.client.record.batch import read_batches
from odradek.client.record.builder import assemble_batch
from odradek.client.record.header import DELETE_HORIZON_FLAG

LONG_MAX = 2**63 - 1


def thread_over(logs: dict[str, CompactedLog], clock: Any) -> tuple[CleanerThread, CleanerManager]:
    manager = CleanerManager(clock.now)
    return CleanerThread("c", manager, Cleaner(1 << 20, clock=clock), lambda: logs, clock=clock), manager


def test_delete_retention_at_long_max_keeps_tombstones_for_good_and_the_log_keeps_being_cleaned(
    open_log: Callable[..., Log], tmp_path: Path, clock: Any
) -> None:
    """Kafka's way to keep tombstones forever: now + delete.retention.ms does not fit the batch's timestamp, so the
    stamped delete horizon is capped at the largest one the format holds."""
    log = open_log(tmp_path / "t-0", CONFIG, clock=clock)
    append(log, clock, [(b"gone", b"old"), (b"also-gone", b"old")])
    fill(log, clock, 40, keys=5)
    append(log, clock, [(b"gone", None), (b"also-gone", None)])
    tombstones = log.log_end_offset - 2
    fill(log, clock, 40, keys=5, seed=2)
    before = rows(log)
    entry = {"t-0": CompactedLog(log, CompactionConfig(delete_retention_ms=LONG_MAX), log.log_end_offset)}
    thread, manager = thread_over(entry, clock)
    assert thread.run_once()
    assert manager.uncleanable() == {}
    cleaned_to = manager.first_dirty_offsets()["t-0"]
    assert cleaned_to > tombstones and rows(log) == latest(before, cleaned_to)
    data = log.read(tombstones, 1 << 20)
    stamped = next(b for b in read_batches(bytes(data.records)) if b.header.base_offset <= tombstones)
    assert stamped.header.attributes & DELETE_HORIZON_FLAG and stamped.header.base_timestamp == LONG_MAX
    assert [(r.offset, r.timestamp, r.value) for r in stamped.records() if r.value is None] == [
        (row[0], row[1], None) for row in before if row[0] in (tombstones, tombstones + 1)
    ]  # the records keep their timestamps
    clock.now += 10 * 365 * 86_400_000
    fill(log, clock, 40, keys=5, seed=3)
    assert thread.run_once()  # not left in progress: cleaned again, the tombstones still there
    assert manager.first_dirty_offsets()["t-0"] > cleaned_to
    assert [r[0] for r in rows(log) if r[3] is None] == [tombstones, tombstones + 1]


def _varint(zigzag: int) -> bytes:
    out = bytearray()
    while zigzag > 0x7F:
        out.append(zigzag & 0x7F | 0x80)
        zigzag >>= 7
    return bytes(out + bytes([zigzag]))


def _raw_record(offset_delta: int, key: bytes, value: bytes) -> bytes:
    """A v2 record written by hand, so its offset delta may be any varint (the builders refuse some)."""
    body = b"\x00" + _varint(0) + _varint(2 * offset_delta) + _varint(2 * len(key)) + key
    body += _varint(2 * len(value)) + value + _varint(0)
    return _varint(2 * len(body)) + body


def test_an_unexpected_error_in_a_pass_makes_the_log_uncleanable_and_the_others_are_still_cleaned(
    open_log: Callable[..., Log], tmp_path: Path, clock: Any
) -> None:
    """A record whose offset delta is a 10-byte varint (2**64), in a batch copied from a leader (a follower checks
    no record), makes an offset no offset map slot holds: the pass fails with an error no one planned for. The log
    must be reported uncleanable (and counted in the metrics), not left marked in progress, where no thread would
    ever clean it again."""
    logs = {}
    for name in ("bad-0", "good-0"):
        log = open_log(tmp_path / name, CONFIG, clock=clock)
        if name == "bad-0":
            records = _raw_record(0, b"k", b"a") + _raw_record(2**64, b"k2", b"b")
            log.append_as_follower(assemble_batch(records, 2, 0, 0, 0, 0, 1, clock.now, clock.now, -1, -1, -1))
        fill(log, clock, 60)
        logs[name] = CompactedLog(log, CompactionConfig(), log.log_end_offset)
    good_before = rows(logs["good-0"].log)
    thread, manager = thread_over(logs, clock)
    assert thread.run_once() and thread.run_once()  # no exception escapes a round
    assert not thread.run_once()
    assert list(manager.uncleanable()) == ["bad-0"] and manager.metrics(clock.now).uncleanable == ["bad-0"]
    good = logs["good-0"].log
    assert rows(good) == latest(good_before, good.segment_base_offsets[-1])
    manager.reset("bad-0")  # the way back for an uncleanable log: it must not still be held in progress
    assert thread.run_once() and list(manager.uncleanable()) == ["bad-0"]


def test_a_pass_interrupted_by_a_base_exception_releases_the_log(
    open_log: Callable[..., Log], tmp_path: Path, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(tmp_path / "t-0", CONFIG, clock=clock)
    fill(log, clock, 60)
    thread, manager = thread_over({"t-0": CompactedLog(log, CompactionConfig(), log.log_end_offset)}, clock)
    clean = thread.cleaner.clean

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(thread.cleaner, "clean", clean)
        raise KeyboardInterrupt

    monkeypatch.setattr(thread.cleaner, "clean", interrupted)
    with pytest.raises(KeyboardInterrupt):
        thread.run_once()
    assert thread.run_once() and manager.uncleanable() == {}  # grabbed again and cleaned
    assert manager.first_dirty_offsets()["t-0"] == log.segment_base_offsets[-1]
