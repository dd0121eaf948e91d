"""RaftLog: epoch boundaries, divergence lookups, truncation and snapshot trimming."""

from __future__ import annotations

import pytest
from raft_cluster import log_of

from odradek.controller.raft import RaftLog, SnapshotId

# Log with epochs [1, 1, 3, 3, 3, 6] at offsets 0..5.
EPOCHS = [1, 1, 3, 3, 3, 6]


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [
        (0, (0, 0)),  # before any entry: the empty snapshot's epoch, ending at 0
        (1, (1, 2)),
        (2, (1, 2)),  # never had epoch 2: the largest epoch below it and where that ends
        (3, (3, 5)),
        (5, (3, 5)),
        (6, (6, 6)),
        (9, (6, 6)),  # beyond the last epoch: the log end
    ],
)
def test_end_offset_for_epoch(epoch: int, expected: tuple[int, int]) -> None:
    assert RaftLog(entries=log_of(EPOCHS)).end_offset_for_epoch(epoch) == expected


@pytest.mark.parametrize(
    ("snapshot", "epoch", "expected"),
    [
        (SnapshotId(3, 3), 3, (3, 5)),  # epoch 3 began inside the snapshot, still ends at 5
        (SnapshotId(3, 3), 2, (-1, -1)),  # older than the snapshot's epoch: unknown, lies inside it
        (SnapshotId(2, 1), 1, (1, 2)),  # the snapshot's own epoch ends at the log start
        (SnapshotId(2, 1), 2, (1, 2)),
        (SnapshotId(6, 6), 6, (6, 6)),  # everything snapshotted
    ],
)
def test_end_offset_for_epoch_after_trim(snapshot: SnapshotId, epoch: int, expected: tuple[int, int]) -> None:
    log = RaftLog(entries=log_of(EPOCHS))
    log.trim_prefix(snapshot)
    assert (log.start_offset, log.end_offset) == (snapshot.end_offset, 6)
    assert log.end_offset_for_epoch(epoch) == expected


def test_truncate_drops_epoch_boundaries() -> None:
    log = RaftLog(entries=log_of(EPOCHS))
    log.truncate(3)
    assert (log.end_offset, log.last_epoch) == (3, 3)
    assert log.end_offset_for_epoch(6) == (3, 3)
    log.truncate(2)
    assert log.end_offset_for_epoch(3) == (1, 2)


def test_restart_skips_entries_the_snapshot_covers() -> None:
    log = RaftLog(SnapshotId(4, 3), log_of(EPOCHS))
    assert (log.start_offset, log.end_offset, log.epoch_at(3), log.entry(4).epoch) == (4, 6, 3, 3)


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (lambda log: log.append(log_of([6], start=7)), "gap"),
        (lambda log: log.append(log_of([5], start=6)), "epoch goes back"),
        (lambda log: log.trim_prefix(SnapshotId(3, 1)), "snapshot epoch does not match the entry"),
        (lambda log: log.trim_prefix(SnapshotId(9, 6)), "snapshot beyond the log"),
    ],
)
def test_rejects_inconsistent_changes(bad, why: str) -> None:
    with pytest.raises(ValueError):
        bad(RaftLog(entries=log_of(EPOCHS)))


def test_read_respects_byte_budget_but_returns_one_entry() -> None:
    log = RaftLog(entries=log_of(EPOCHS))  # each entry's data is 3 bytes, e.g. b"0@1"
    assert [e.offset for e in log.read(1, 7)] == [1, 2]
    assert [e.offset for e in log.read(1, 1)] == [1]
    assert log.read(6, 100) == ()
