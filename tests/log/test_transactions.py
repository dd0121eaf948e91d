"""Transactions in the log: open, committed and aborted transactions on leader and follower appends, the first
unstable and last stable offsets, the checks on markers and transactional batches, the aborted-transaction index
across segments, and the same state after truncation, a clean restart and crash recovery."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from odradek.broker.log.config import LogConfig
from odradek.broker.log.log import AbortedTxn, ActiveProducer, AppendOrigin, Log
from odradek.broker.log.txn_index import TXN_INDEX_SUFFIX
from odradek.client.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from odradek.client.record.batch import read_batches
from odradek.client.record.builder import encode_batch
from odradek.client.record.control import ControlType, build_control_batch

P1, P2, P3 = 7001, 7002, 7003
TS = int(time.time() * 1000)  # producer state expires by batch timestamps against the clock
SMALL = LogConfig(segment_bytes=600, index_interval_bytes=64, segment_index_bytes=4096)


def txn(pid: int, seq: int, count: int = 2, epoch: int = 0, transactional: bool = True) -> bytes:
    values = [f"{pid}-{epoch}-{seq + i}".encode() for i in range(count)]
    return encode_batch(
        values, timestamps=TS, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=transactional
    )


def plain(count: int = 1) -> bytes:
    return encode_batch([b"plain"] * count, timestamps=TS)


def marker(log: Log, pid: int, committed: bool, epoch: int = 1, coordinator_epoch: int = 0) -> int:
    return log.append_marker(committed, pid, epoch, coordinator_epoch, 0, TS).first_offset


def open_log(tmp_path: Path, config: LogConfig | None = None, **kwargs) -> Log:
    return Log.open(tmp_path / "t-0", config or LogConfig(), **kwargs)


def state(log: Log) -> tuple:
    """Everything transactional a replica derives from its log."""
    return (
        log.first_unstable_offset,
        log.aborted_index_entries(0, log.log_end_offset + 1),
        sorted(log.active_producers()),
    )


def test_open_commit_and_abort_move_the_last_stable_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert (log.first_unstable_offset, log.last_stable_offset) == (None, 0)
    log.append_as_leader(plain(), 0)  # offset 0
    first = log.append_as_leader(txn(P1, 0), 0).first_offset  # 1-2
    log.append_as_leader(txn(P2, 0), 0)  # 3-4
    log.high_watermark = log.log_end_offset
    assert log.first_unstable_offset == first == 1
    assert log.last_stable_offset == 1
    assert log.has_ongoing_transaction(P1, 0) and not log.has_ongoing_transaction(P1, 1)

    commit = marker(log, P1, committed=True)  # offset 5
    # committed, but the marker is not below the high watermark yet: still unstable
    assert log.first_unstable_offset == 1
    log.high_watermark = log.log_end_offset
    assert log.first_unstable_offset == 3  # P2's transaction
    abort = marker(log, P2, committed=False)
    assert log.first_unstable_offset == 3
    log.high_watermark = abort  # the marker itself not yet replicated
    assert log.last_stable_offset == 3
    log.high_watermark = log.log_end_offset
    assert (log.first_unstable_offset, log.last_stable_offset) == (None, log.log_end_offset)
    assert log.aborted_transactions(0, log.log_end_offset) == [AbortedTxn(P2, 3)]
    assert not log.has_ongoing_transaction(P1, 1)
    producers = {p.producer_id: p for p in log.active_producers()}
    assert producers[P1] == ActiveProducer(P1, 1, -1, TS, 0, -1)  # the marker bumped the epoch
    assert commit == 5
    log.close()


def test_a_follower_copying_the_leader_derives_the_same_state(tmp_path: Path) -> None:
    leader = Log.open(tmp_path / "a" / "t-0", SMALL)
    follower = Log.open(tmp_path / "b" / "t-0", SMALL)
    leader.append_as_leader(txn(P1, 0), 0)
    leader.append_as_leader(txn(P2, 0), 0)
    leader.append_as_leader(txn(P1, 2), 0)
    marker(leader, P1, committed=False)
    leader.append_as_leader(txn(P3, 0), 0)
    marker(leader, P2, committed=True)
    leader.append_as_leader(txn(P1, 0, epoch=1), 0)  # the next transaction, in the bumped epoch
    offset = 0
    while offset < leader.log_end_offset:
        data = leader.read(offset, 1 << 20)
        follower.append_as_follower(data.records)
        offset = data.next_offset
    leader.high_watermark = follower.high_watermark = 3
    assert state(follower) == state(leader)
    assert follower.first_unstable_offset == 0
    assert follower.aborted_transactions(0, 100) == [AbortedTxn(P1, 0)]
    assert follower.has_ongoing_transaction(P3, 0) and follower.has_ongoing_transaction(P1, 1)
    leader.close()
    follower.close()


def test_a_delayed_batch_of_the_previous_epoch_is_refused_after_the_marker(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(txn(P1, 0), 0)
    marker(log, P1, committed=True, epoch=1)  # KIP-890: the marker carries the bumped epoch
    end = log.log_end_offset
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(txn(P1, 2, epoch=0), 0)  # transaction N's late batch
    assert log.log_end_offset == end and not log.has_ongoing_transaction(P1, 0)
    log.append_as_leader(txn(P1, 0, epoch=1), 0)  # transaction N+1 starts at sequence 0
    assert log.has_ongoing_transaction(P1, 1)
    log.close()


def test_markers_are_fenced_by_producer_and_coordinator_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(txn(P1, 0, epoch=3), 0)
    with pytest.raises(InvalidProducerEpochError):
        log.append_marker(False, P1, 2, 5, 0, TS)
    log.append_marker(False, P1, 4, 5, 0, TS)
    log.append_as_leader(txn(P1, 0, epoch=4), 0)
    end = log.log_end_offset
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append_marker(True, P1, 5, 4, 0, TS)  # a deposed coordinator
    assert log.log_end_offset == end and log.has_ongoing_transaction(P1, 4)
    log.append_marker(True, P1, 5, 6, 0, TS)
    # a retried marker for a transaction already ended is appended, harmlessly
    log.append_marker(True, P1, 5, 6, 0, TS)
    assert not log.has_ongoing_transaction(P1, 5)
    assert [p.coordinator_epoch for p in log.active_producers()] == [6]
    log.close()


def test_control_and_malformed_transactional_batches_from_clients_are_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    control = build_control_batch(ControlType.COMMIT, P1, 0, 0, TS)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(control, 0)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(control, 0, origin=AppendOrigin.COORDINATOR)
    no_pid = encode_batch([b"x"], timestamps=TS, is_transactional=True)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(no_pid, 0)
    with pytest.raises(InvalidRecordError):  # one producer's transactional and plain batches together
        log.append_as_leader(txn(P1, 0) + txn(P1, 2, transactional=False), 0)
    assert log.log_end_offset == 0
    log.close()


def test_a_non_transactional_write_during_an_open_transaction_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(txn(P1, 0), 0)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(txn(P1, 2, transactional=False), 0)
    log.append_as_leader(txn(P2, 0, transactional=False), 0)  # another idempotent producer is unaffected
    marker(log, P1, committed=True)
    log.append_as_leader(txn(P1, 0, epoch=1, transactional=False), 0)
    log.close()


def test_coordinator_appends_carry_no_sequence_but_are_epoch_checked(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    offsets_commit = encode_batch(
        [b"offset"], timestamps=TS, producer_id=P1, producer_epoch=2, base_sequence=-1, is_transactional=True
    )
    log.append_as_leader(offsets_commit, 0, origin=AppendOrigin.COORDINATOR)
    log.append_as_leader(offsets_commit, 0, origin=AppendOrigin.COORDINATOR)  # no duplicate detection
    assert log.log_end_offset == 2 and log.has_ongoing_transaction(P1, 2)
    log.append_marker(False, P1, 3, 0, 0, TS)
    stale = encode_batch(
        [b"offset"], timestamps=TS, producer_id=P1, producer_epoch=2, base_sequence=-1, is_transactional=True
    )
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(stale, 0, origin=AppendOrigin.COORDINATOR)
    assert log.aborted_transactions(0, 3) == [AbortedTxn(P1, 0)]
    log.close()


def build_aborts(log: Log) -> dict[str, int]:
    """Interleaved transactions over many small segments; returns notable offsets."""
    at = {}
    at["a"] = log.append_as_leader(txn(P1, 0, count=5), 0).first_offset
    for _ in range(4):
        log.append_as_leader(plain(4), 0)
    at["b"] = log.append_as_leader(txn(P2, 0, count=5), 0).first_offset
    log.append_as_leader(txn(P1, 5, count=5), 0)
    at["a_end"] = marker(log, P1, committed=False)
    for _ in range(4):
        log.append_as_leader(plain(4), 0)
    at["c"] = log.append_as_leader(txn(P3, 0, count=5), 0).first_offset
    at["b_end"] = marker(log, P2, committed=True)
    for _ in range(3):
        log.append_as_leader(plain(4), 0)
    at["c_end"] = marker(log, P3, committed=False)
    at["d"] = log.append_as_leader(txn(P1, 0, count=5, epoch=1), 0).first_offset
    for _ in range(3):
        log.append_as_leader(plain(4), 0)
    return at


def test_aborted_transactions_are_found_across_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path, SMALL)
    at = build_aborts(log)
    assert log.num_segments >= 5
    a, c = AbortedTxn(P1, at["a"]), AbortedTxn(P3, at["c"])
    leo = log.log_end_offset
    assert log.aborted_transactions(0, leo) == [a, c]
    assert log.aborted_transactions(at["a_end"], leo) == [a, c]  # the marker itself is in the range
    assert log.aborted_transactions(at["a_end"] + 1, leo) == [c]
    assert log.aborted_transactions(0, at["c"]) == [a]
    assert log.aborted_transactions(at["c_end"] + 1, leo) == []
    # the entries live in the segments holding the markers
    with_index = sorted(p.name for p in (tmp_path / "t-0").glob("*" + TXN_INDEX_SUFFIX))
    assert len(with_index) == 2
    assert log.first_unstable_offset == at["a"]  # nothing is below the high watermark yet
    log.high_watermark = leo
    assert log.first_unstable_offset == at["d"]
    log.close()


def test_clean_restart_and_crash_recovery_rebuild_the_same_state(tmp_path: Path) -> None:
    log = open_log(tmp_path, SMALL)
    build_aborts(log)
    log.append_as_leader(txn(P2, 0, count=3, epoch=1), 0)  # open at the end, in the active segment
    expected = state(log)
    assert expected[1]  # there are aborted entries to rebuild
    directory = tmp_path / "t-0"
    # a crash: the directory as the process left it (nothing closed), without snapshots, indexes nor txn indexes
    crashed = tmp_path / "crash" / "t-0"
    shutil.copytree(directory, crashed)
    for path in crashed.iterdir():
        if path.suffix in (".snapshot", TXN_INDEX_SUFFIX, ".index", ".timeindex"):
            path.unlink()
    # and a torn tail: half a batch of garbage after the last one
    last_segment = max(crashed.glob("*.log"))
    with open(last_segment, "ab") as f:
        f.write(txn(P3, 99)[:30])
    recovered = Log.open(crashed, SMALL, recovery_point=0)
    assert state(recovered) == expected
    recovered.close()
    log.close()
    reopened = Log.open(directory, SMALL, clean_shutdown=True)
    assert state(reopened) == expected
    reopened.close()


def test_recovery_of_a_late_segment_rebuilds_its_index_from_an_earlier_snapshot(tmp_path: Path) -> None:
    """A transaction opened in an early segment and aborted in the one being recovered: the replay that rebuilds
    the aborted entry starts at or below that segment, with the transaction's first offset known."""
    log = open_log(tmp_path, SMALL)
    at = build_aborts(log)
    expected = state(log)
    directory = tmp_path / "t-0"
    crashed = tmp_path / "crash" / "t-0"
    shutil.copytree(directory, crashed)
    log.close()
    # only the segment holding c's marker (and after) is re-scanned; its index is gone
    marker_segment = max(b for b in (int(p.stem) for p in crashed.glob("*.log")) if b <= at["c_end"])
    (crashed / f"{marker_segment:020d}{TXN_INDEX_SUFFIX}").unlink()
    recovered = Log.open(crashed, SMALL, recovery_point=marker_segment)
    assert state(recovered) == expected
    recovered.close()


def test_truncation_removes_index_entries_and_reopens_transactions(tmp_path: Path) -> None:
    log = open_log(tmp_path, SMALL)
    at = build_aborts(log)
    log.truncate_to(at["c_end"])  # c's ABORT marker is gone
    assert log.aborted_transactions(0, log.log_end_offset) == [AbortedTxn(P1, at["a"])]
    assert log.has_ongoing_transaction(P3, 0)
    log.high_watermark = log.log_end_offset
    assert log.first_unstable_offset == at["c"]
    log.truncate_to(at["a_end"])
    assert log.aborted_transactions(0, log.log_end_offset) == []
    assert log.first_unstable_offset == at["a"]
    assert log.has_ongoing_transaction(P1, 0) and log.has_ongoing_transaction(P2, 0)
    log.close()
    reopened = open_log(tmp_path, SMALL, clean_shutdown=True)
    assert reopened.aborted_transactions(0, reopened.log_end_offset) == []
    assert reopened.first_unstable_offset == at["a"]
    reopened.close()


def test_deleted_segments_take_their_index_along(tmp_path: Path) -> None:
    log = open_log(tmp_path, SMALL)
    build_aborts(log)
    log.high_watermark = log.log_end_offset
    log.increment_log_start_offset(log.log_end_offset)
    log.delete_old_segments()
    assert not list((tmp_path / "t-0").glob("*" + TXN_INDEX_SUFFIX))
    assert log.aborted_transactions(log.log_start_offset, log.log_end_offset) == []
    log.close()


def test_a_torn_aborted_index_of_a_sealed_segment_is_rebuilt_on_a_clean_open(tmp_path: Path) -> None:
    log = open_log(tmp_path, SMALL)
    build_aborts(log)
    expected = state(log)
    log.close()
    for path in (tmp_path / "t-0").glob("*" + TXN_INDEX_SUFFIX):
        with open(path, "ab") as f:
            f.write(b"\x01\x02\x03")
    reopened = open_log(tmp_path, SMALL, clean_shutdown=True)
    assert state(reopened) == expected
    reopened.close()


def committed_offsets(log: Log, start: int) -> list[int]:
    """The offsets a read_committed consumer at ``start`` keeps: records below the last stable offset, less those of
    the aborted transactions the read overlaps (as the consumer drops them)."""
    lso = log.last_stable_offset
    data = log.read(start, 1 << 20, max_offset=lso)
    aborted = {t.producer_id for t in log.aborted_transactions(start, max(data.next_offset, start + 1))}
    return [
        r.offset
        for b in read_batches(bytes(data.records))
        if not b.header.is_control and b.header.producer_id not in aborted
        for r in b.records()
        if start <= r.offset < lso
    ]


def test_truncation_keeps_the_transaction_of_the_batch_holding_a_midbatch_log_start(tmp_path: Path) -> None:
    """DeleteRecords into a transactional batch, then a truncation: the replay starts at the log start, inside that
    batch, and must still apply it, or the open transaction is forgotten and its records become readable."""
    log = open_log(tmp_path)
    log.append_as_leader(txn(P1, 0, count=10), 0)  # 0..9, open
    log.high_watermark = 10
    log.increment_log_start_offset(5)
    log.append_as_leader(plain(), 0)  # 10, later truncated (a follower's divergence)
    assert log.truncate_to(10)

    assert log.has_ongoing_transaction(P1, 0)
    assert (log.first_unstable_offset, log.last_stable_offset) == (5, 5)
    assert committed_offsets(log, 5) == []

    marker(log, P1, committed=False)  # 10
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 11
    assert log.aborted_transactions(5, 11) == [AbortedTxn(P1, 0)]
    assert committed_offsets(log, 5) == []  # aborted: dropped by the consumer
    log.close()


@pytest.mark.parametrize("aborted", [False, True])
def test_crash_recovery_keeps_the_transaction_of_the_batch_holding_a_midbatch_log_start(
    tmp_path: Path, aborted: bool
) -> None:
    """The same after a crash: recovery scans the segment again (its aborted index emptied) and the replay from the
    log start must reopen the transaction and, after its ABORT, add the aborted entry again."""
    log = open_log(tmp_path)
    log.append_as_leader(txn(P1, 0, count=10), 0)  # 0..9
    log.high_watermark = 10
    log.increment_log_start_offset(5)
    if aborted:
        marker(log, P1, committed=False)  # 10
    log.high_watermark = log.log_end_offset
    expected = (log.first_unstable_offset, log.aborted_transactions(5, log.log_end_offset), committed_offsets(log, 5))
    assert expected == ((None, [AbortedTxn(P1, 0)], []) if aborted else (5, [], []))
    crashed = tmp_path / "crash" / "t-0"
    shutil.copytree(tmp_path / "t-0", crashed)  # as the process left it: never closed, no snapshot
    log.close()

    recovered = Log.open(crashed, LogConfig(), recovery_point=0, log_start_offset=5, high_watermark=log.log_end_offset)
    got = (
        recovered.first_unstable_offset,
        recovered.aborted_transactions(5, recovered.log_end_offset),
        committed_offsets(recovered, 5),
    )
    assert got == expected
    recovered.close()
