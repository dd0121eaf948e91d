"""MetadataLogStore.load: what a restart keeps of the metadata log next to the latest snapshot, and that all
of it is durable before the Raft core sees (and acknowledges) it."""

from __future__ import annotations

from pathlib import Path

import pytest
from quorum_disk import METADATA_LOG, capturing_driver, write_log

from odradek.broker.log.metadata import open_metadata_log
from odradek.controller.quorum import driver as driver_module
from odradek.controller.quorum.log_store import MetadataLogError, MetadataLogStore
from odradek.controller.raft import EMPTY_SNAPSHOT, Entry, PersistentState, RaftNode, SnapshotId


def entries(epochs: list[int], start: int = 0) -> list[Entry]:
    return [Entry(start + i, ep, b"%d@%d" % (start + i, ep)) for i, ep in enumerate(epochs)]


def load(directory: Path, snapshot: SnapshotId) -> tuple[list[Entry], MetadataLogStore]:
    store = MetadataLogStore(directory / METADATA_LOG, open_metadata_log)
    return store.load(snapshot), store


def test_the_tail_after_an_own_snapshot_is_kept(tmp_path: Path) -> None:
    log = entries([1, 1, 2, 2, 2, 3, 3, 3])
    write_log(tmp_path, log)
    loaded, store = load(tmp_path, SnapshotId(4, 2))  # taken from this log: its entry 3 has epoch 2
    assert loaded == log[4:] and store.log.log_start_offset == 4
    store.close()


@pytest.mark.parametrize(
    ("log", "snapshot"),
    [
        (entries([2] * 10), SnapshotId(5, 4)),  # straddles the snapshot, entry 4 of another epoch
        (entries([1, 1, 4, 4, 4, 6, 6]), SnapshotId(5, 5)),  # epochs at or above the snapshot's after it, but
        # the entry below its end is of another epoch: another history (log matching), not a continuation
        (entries([2] * 3), SnapshotId(5, 4)),  # behind the snapshot
    ],
    ids=["straddling", "other-history", "behind"],
)
def test_entries_that_do_not_continue_the_snapshot_are_replaced_by_it(tmp_path: Path, log, snapshot) -> None:
    write_log(tmp_path, log)
    loaded, store = load(tmp_path, snapshot)
    assert loaded == []
    assert (store.log.log_start_offset, store.log.log_end_offset) == (snapshot.end_offset, snapshot.end_offset)
    store.close()
    again, store = load(tmp_path, snapshot)  # durably so
    assert again == [] and store.log.log_end_offset == snapshot.end_offset
    store.close()


def test_a_log_starting_after_the_snapshot_is_refused(tmp_path: Path) -> None:
    """No crash leaves entries missing between the snapshot and the log: the log start is set only once a
    snapshot covering it is durable. Damage like this must not be papered over."""
    write_log(tmp_path, entries([3, 3], start=10))
    with pytest.raises(MetadataLogError, match="after the end of snapshot"):
        load(tmp_path, SnapshotId(5, 2))


def test_reloaded_entries_are_flushed(tmp_path: Path) -> None:
    """Entries appended but never fsynced (the process died before the Ready's flush) come back from the page
    cache on restart; load makes them durable, since the core counts everything it is given as durable."""
    write_log(tmp_path, entries([3] * 10), flush=False)
    loaded, store = load(tmp_path, EMPTY_SNAPSHOT)
    assert len(loaded) == 10
    assert store.log.recovery_point == store.log.log_end_offset == 10
    store.close()


async def test_a_restarted_driver_acknowledges_only_flushed_entries(tmp_path: Path, monkeypatch) -> None:
    """The node is built (and may answer a Fetch with offset 10 or count its own copy) only after the flush."""
    write_log(tmp_path, entries([3] * 10), flush=False)
    seen = []

    def node(*args, **kwargs):
        seen.append((len(kwargs["entries"]), driver._log.log.recovery_point))
        return RaftNode(*args, **kwargs)

    monkeypatch.setattr(driver_module, "RaftNode", node)
    driver, _ = capturing_driver(tmp_path)
    driver._state_file.store(PersistentState(3, None, 1))
    await driver.start()
    try:
        assert seen == [(10, 10)]  # 10 entries given to the core, all 10 fsynced before it existed
    finally:
        await driver.stop(graceful=False)
