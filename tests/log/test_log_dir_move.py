"""A replica moving to another log dir of its broker, on real files: the future log copies the current one while
it changes (appends, a follower's truncation, DeleteRecords), the swap gives the partition one log with every
record, its producer state and its leader epochs, and a crash at any step of the swap, or during the copy, leaves
after a restart exactly one copy holding every record (the start-up rule of broker/log/future_dirs.py). A compacted
log whose last batches were cleaned away moves without waiting for an append."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from odradek.broker.log.cleaner.cleaner import Cleaner
from odradek.broker.log.cleaner.policy import CompactionConfig
from odradek.broker.log.config import LogConfig
from odradek.broker.log.future_dirs import SWAP_MARKER
from odradek.broker.log.log import Log
from odradek.broker.log.manager import LogManager
from odradek.broker.log.replica_move import CaughtUp, FutureCopy
from odradek.broker.log_dir_moves import copy_round
from odradek.client.record.batch import read_batches
from odradek.client.record.builder import encode_batch

CONFIG = LogConfig(segment_bytes=4096, index_interval_bytes=256, segment_index_bytes=4096)
SWAP_STEPS = ["align", "close", "copy-state", "checkpoint", "mark", "rename-current", "rename-future", "unmark", "open"]
COMMITTED_AT = SWAP_STEPS.index("mark") + 1  # a crash after the marker is written completes the swap at start


class Writer:
    """Idempotent batches as producers send them: each producer id's sequences continue."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.sequences: dict[int, int] = {}

    def write(self, count: int, epoch: int, producer_id: int = 7) -> None:
        for _ in range(count):
            seq = self.sequences.get(producer_id, 0)
            values = [f"{producer_id}-{seq}-{j}".encode() * 8 for j in range(3)]
            batch = encode_batch(values, timestamps=None, producer_id=producer_id, producer_epoch=0, base_sequence=seq)
            self.log.append_as_leader(batch, epoch)
            self.sequences[producer_id] = seq + 3


def contents(log: Log) -> bytes:
    """Every batch from the log start, as stored."""
    data, offset = b"", log.log_start_offset
    while offset < log.log_end_offset:
        chunk = log.read(offset, 1 << 20)
        if not len(chunk.records):
            break
        data, offset = data + bytes(chunk.records), chunk.next_offset
    return data


def state(log: Log) -> tuple[object, ...]:
    """What the replica must keep across the move: its records, offsets, leader epochs and producers (those a
    restart keeps: with a batch at or above the log start)."""
    kept = {pid for pid, last in log.producer_last_offsets().items() if last >= log.log_start_offset}
    producers = sorted(
        (p.producer_id, p.producer_epoch, p.last_sequence) for p in log.active_producers() if p.producer_id in kept
    )
    return contents(log), log.log_start_offset, log.log_end_offset, log.epoch_entries(), producers


def copy_all(manager: LogManager, future: Log, copy: FutureCopy) -> None:
    for _ in range(1000):
        if isinstance(copy_round(manager.get_log("t", 0), future, copy), CaughtUp):  # type: ignore[arg-type]
            return
    raise AssertionError("the copy never caught up")


def dirs_named(roots: list[Path], suffix: str) -> list[Path]:
    return [c for root in roots for c in root.iterdir() if c.is_dir() and c.name.endswith(suffix)]


def setup(tmp_path: Path) -> tuple[LogManager, list[Path], Path, Path]:
    roots = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(roots, CONFIG)
    manager.get_or_create_log("t", 0)
    src = manager.dir_of("t", 0)
    assert src is not None
    dest = next(d for d in manager.log_dirs if d != src)
    return manager, list(manager.log_dirs), src, dest


def test_the_copy_follows_appends_truncation_and_delete_records_and_the_swap_keeps_everything(
    tmp_path: Path,
) -> None:
    manager, roots, src, dest = setup(tmp_path)
    log = manager.get_log("t", 0)
    assert log is not None
    writer = Writer(log)
    writer.write(40, epoch=1)
    future = manager.create_future_log("t", 0, dest)
    copy = FutureCopy("t", 0, dest, max_bytes=1024)
    for _ in range(4):
        copy_round(log, future, copy)
    assert 0 < future.log_end_offset < log.log_end_offset and copy.lag > 0

    # A new leader truncates this replica below what the copy holds, and it goes on at epoch 2.
    log.truncate_to(future.log_end_offset - 10)
    writer.write(10, epoch=2, producer_id=8)
    copy_round(log, future, copy)  # finds the divergence
    assert future.log_end_offset <= log.log_end_offset

    # DeleteRecords beyond the copy's end, into the middle of a batch.
    log.high_watermark = log.log_end_offset
    log.increment_log_start_offset(log.log_end_offset - 4)
    writer.write(15, epoch=2, producer_id=9)
    log.high_watermark = log.log_end_offset - 5
    copy_all(manager, future, copy)
    assert copy.lag == 0 and future.log_start_offset == log.log_start_offset

    before = state(log)
    swapped = manager.replace_current_with_future("t", 0)
    assert swapped is not None
    moved, doomed = swapped
    assert manager.get_log("t", 0) is moved and manager.dir_of("t", 0) == dest and moved.dir == dest / "t-0"
    assert manager.future_log("t", 0) is None and log.dir.exists() is False and doomed.exists()
    assert state(moved) == before and moved.high_watermark == log.high_watermark
    shutil.rmtree(doomed)
    # The new log serves: the producers' next batches continue their sequences.
    follow_on = Writer(moved)
    follow_on.sequences = dict(writer.sequences)
    follow_on.write(2, epoch=2, producer_id=9)
    manager.close()

    reopened = LogManager(roots, CONFIG)
    again = reopened.get_log("t", 0)
    assert again is not None and reopened.dir_of("t", 0) == dest and again.log_end_offset == moved.log_end_offset
    assert (src / "t-0").exists() is False and dirs_named(roots, "-future") == []
    reopened.close()


def test_a_swap_refuses_while_the_future_log_is_behind(tmp_path: Path) -> None:
    manager, _, _, dest = setup(tmp_path)
    log = manager.get_log("t", 0)
    assert log is not None
    Writer(log).write(5, epoch=1)
    manager.create_future_log("t", 0, dest)
    assert manager.replace_current_with_future("t", 0) is None
    assert manager.get_log("t", 0) is log and not log.offline
    manager.close()


def crash_in_child(work: Callable[[], None]) -> None:
    """Run ``work`` in a forked child that dies (no close, no flush, no checkpoint) wherever ``work`` exits."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            work()
            code = 0
        finally:
            os._exit(code)
    assert os.waitpid(pid, 0)[1] == 0


def build_and_copy(tmp_path: Path) -> tuple[LogManager, list[Path], Path, Path, FutureCopy, tuple[object, ...]]:
    """A replica with data, a moved log start and two epochs, and its future log caught up."""
    manager, roots, src, dest = setup(tmp_path)
    log = manager.get_log("t", 0)
    assert log is not None
    writer = Writer(log)
    writer.write(30, epoch=1)
    writer.write(20, epoch=3, producer_id=8)
    log.high_watermark = log.log_end_offset
    log.increment_log_start_offset(17)
    manager.checkpoint_log_start_offsets()  # as a DeleteRecords answer does
    future = manager.create_future_log("t", 0, dest)
    copy = FutureCopy("t", 0, dest, max_bytes=2048)
    copy_all(manager, future, copy)
    return manager, roots, src, dest, copy, state(log)


@pytest.mark.parametrize("crash_before", range(len(SWAP_STEPS) + 1))
def test_a_crash_at_any_step_of_the_swap_leaves_exactly_one_copy_with_every_record(
    tmp_path: Path, crash_before: int
) -> None:
    expected_file = tmp_path / "expected"

    def child() -> None:
        manager, _, _, _, _, expected = build_and_copy(tmp_path)
        expected_file.write_bytes(repr(expected).encode())
        seen = []

        def step(name: str) -> None:
            if len(seen) == crash_before:
                os._exit(0)  # SIGKILL's effect: nothing closed, flushed or checkpointed from here
            seen.append(name)

        manager.replace_current_with_future("t", 0, step)
        assert seen == SWAP_STEPS
        os._exit(0)

    crash_in_child(child)
    roots = [(tmp_path / d).resolve() for d in "ab"]
    manager = LogManager(roots, CONFIG)
    log = manager.get_log("t", 0)
    assert log is not None and not log.offline
    assert repr(state(log)).encode() == expected_file.read_bytes()
    # One copy: a single partition dir, no marker, no leftovers; a future log only if the swap had not committed.
    assert len(dirs_named(roots, "t-0")) == 1 and dirs_named(roots, "-delete") == []
    assert not any((d / SWAP_MARKER).exists() for d in dirs_named(roots, "t-0") + dirs_named(roots, "-future"))
    future = manager.future_log("t", 0)
    src, dest = roots  # the first dir took the replica (both were empty)
    if crash_before >= COMMITTED_AT:
        assert future is None and dirs_named(roots, "-future") == [] and manager.dir_of("t", 0) == dest
    else:
        # Resumed: the copy goes on from what it had, and the move completes.
        assert future is not None and len(dirs_named(roots, "-future")) == 1
        assert (manager.dir_of("t", 0), manager.future_dir_of("t", 0)) == (src, dest)
        copy_all(manager, future, FutureCopy("t", 0, dest, max_bytes=2048))
        swapped = manager.replace_current_with_future("t", 0)
        assert swapped is not None
        log = swapped[0]
        assert repr(state(log)).encode() == expected_file.read_bytes()
        shutil.rmtree(swapped[1])
    manager.close()


def test_a_crash_during_the_copy_resumes_it_and_one_without_its_replica_is_dropped(tmp_path: Path) -> None:
    def child() -> None:
        manager, _, _, dest = setup(tmp_path)
        log = manager.get_log("t", 0)
        assert log is not None
        Writer(log).write(60, epoch=1)
        future = manager.create_future_log("t", 0, dest)
        copy = FutureCopy("t", 0, dest, max_bytes=1024)
        for _ in range(5):
            copy_round(log, future, copy)
        future.flush()

    crash_in_child(child)
    roots = [(tmp_path / d).resolve() for d in "ab"]
    manager = LogManager(roots, CONFIG)
    log, future = manager.get_log("t", 0), manager.future_log("t", 0)
    assert log is not None and future is not None
    assert 0 < future.log_end_offset < log.log_end_offset
    dest = manager.future_dir_of("t", 0)
    assert dest is not None
    expected = state(log)
    copy_all(manager, future, FutureCopy("t", 0, dest, max_bytes=1024))
    swapped = manager.replace_current_with_future("t", 0)
    assert swapped is not None and state(swapped[0]) == expected
    manager.close()

    # A future log whose replica is gone (deleted while it moved, the deletion interrupted) is dropped at start.
    manager = LogManager(roots, CONFIG)
    src = manager.dir_of("t", 0)
    assert src is not None
    other = next(d for d in roots if d != src)
    manager.create_future_log("t", 0, other)
    manager.close()
    shutil.rmtree(src / "t-0")
    manager = LogManager(roots, CONFIG)
    assert manager.get_log("t", 0) is None and manager.future_log("t", 0) is None
    assert dirs_named(roots, "-future") == []
    manager.close()


def test_the_preferred_dir_places_a_replica_created_later(tmp_path: Path) -> None:
    manager, _, src, dest = setup(tmp_path)
    manager.prefer_dir("u", 3, src)
    manager.prefer_dir("u", 4, dest)
    assert manager.dir_of("u", 3) is None
    manager.get_or_create_log("u", 3)
    manager.get_or_create_log("u", 4)
    assert (manager.dir_of("u", 3), manager.dir_of("u", 4)) == (src, dest)
    assert manager.preferred_dir("u", 3) is None  # used once
    manager.close()


def test_a_compacted_log_whose_last_batches_were_cleaned_away_moves_without_a_new_append(tmp_path: Path) -> None:
    """The current log's last batches before its end are gone (expired tombstones, cleaned away) and its active
    segment is empty: a read from the future's end finds nothing, yet the future holds every batch. The copy is
    complete and the swap gives the new log the old one's end, with no append to wait for."""
    manager, roots, _, dest = setup(tmp_path)
    log = manager.get_log("t", 0)
    assert log is not None
    for i in range(20):
        log.append_as_leader(encode_batch([b"v%d" % i * 20], [b"k%d" % (i % 4)], 0), 1)
    for k in range(1, 4):  # k1-k3 deleted: the last batches before the roll are tombstones
        log.append_as_leader(encode_batch([None], [b"k%d" % k], 0), 1)
    tail = log.log_end_offset
    log.append_as_leader(encode_batch([b"x" * 4000], [b"big"], 0), 1)  # rolls: the tombstones are in sealed segments
    assert log.compaction_view().active_base_offset == tail
    log.high_watermark = log.log_end_offset
    now = [1000]
    cleaner = Cleaner(1 << 20, clock=lambda: now[0])
    for _ in range(2):  # the first pass stamps the tombstones' delete horizon (now + 0 ms), the second removes them
        cleaner.clean(log, CompactionConfig(delete_retention_ms=0), 0, tail, log.log_end_offset)
        now[0] += 1000
    log.truncate_to(tail)  # as a follower whose new leader ends there: the active segment is empty
    log.high_watermark = tail
    assert log.log_end_offset == tail and contents(log)
    last = max(r.offset for b in read_batches(contents(log)) for r in b.records())
    assert last + 1 < tail  # the cleaned tail: nothing between the last batch and the end

    future = manager.create_future_log("t", 0, dest)
    copy = FutureCopy("t", 0, dest, max_bytes=1024)
    copy_all(manager, future, copy)  # caught up: before the fix, each round waited for an append
    assert future.log_end_offset == last + 1 and copy.lag == 0
    before = state(log)
    swapped = manager.replace_current_with_future("t", 0)
    assert swapped is not None
    moved = swapped[0]
    assert state(moved) == before and moved.log_end_offset == tail and moved.high_watermark == tail
    shutil.rmtree(swapped[1])
    # The next append continues at the old end, and a restart keeps it.
    moved.append_as_leader(encode_batch([b"after"], [b"k0"], 0), 2)
    assert moved.log_end_offset == tail + 1
    expected = contents(moved)
    manager.close()
    reopened = LogManager(roots, CONFIG)
    again = reopened.get_log("t", 0)
    assert again is not None and again.log_end_offset == tail + 1 and contents(again) == expected
    reopened.close()
