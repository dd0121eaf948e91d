"""A follower installing a leader's snapshot may crash at any instant and must start again afterwards.

The install replaces the whole metadata log: chunks go to a ``.part`` file, the snapshot is made visible
(fsync, rename), then the log is reset to start at its end. Each test crashes the process at one step (an error
raised there stops the driver as a crash would stop the process), restarts a driver on the same directory, and
checks that it starts with either the old log or the snapshot, and can then finish the install.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from quorum_disk import METADATA_LOG, RecordingStateMachine, capturing_driver, write_log

from odradek.broker.log.metadata import open_metadata_log
from odradek.broker.log.segment import LogSegment
from odradek.controller.quorum.driver import MetadataLogFailedError, RaftDriver
from odradek.controller.quorum.files import QuorumStateFile, SnapshotStore
from odradek.controller.quorum.log_store import MetadataLogStore
from odradek.controller.raft import EMPTY_SNAPSHOT, Entry, PersistentState, SnapshotId
from odradek.controller.raft.messages import (
    BeginQuorumEpoch,
    Fetch,
    FetchResponse,
    FetchSnapshot,
    FetchSnapshotResponse,
)

LEADER, EPOCH = 1, 5
IMAGE = b"the metadata image at the snapshot"
# The follower's old log: [0, 12) of epoch 2, an uncommitted tail the leader never had, in several segments.
OLD_LOG = [Entry(i, 2, b"old-%d" % i) for i in range(12)]
SEGMENT_BYTES = 300


class Crash(Exception):
    """Stands for the process dying at this point."""


def crash_on_call(n: int, real=None):
    """A stand-in that lets ``n - 1`` calls through to ``real`` and crashes on call ``n``."""
    calls = 0

    def fake(*args, **kwargs):
        nonlocal calls
        calls += 1
        if calls >= n:
            raise Crash(f"crash on call {calls}")
        return real(*args, **kwargs)

    return fake


# Where to crash: (name, patch target, call number that crashes, the snapshot held after the restart).
CRASH_POINTS = [
    ("writing the first chunk", (SnapshotStore, "write_chunk"), 1, False),
    ("writing the second chunk", (SnapshotStore, "write_chunk"), 2, False),
    ("before the snapshot is complete", (SnapshotStore, "complete"), 1, False),
    ("after complete, before the log reset", (MetadataLogStore, "reset"), 1, True),
    ("during the log reset (newest segment deleted)", (LogSegment, "delete"), 2, True),
    ("after the log reset, before its flush", (MetadataLogStore, "flush"), 1, True),
    ("after the flush, while loading the image", (RecordingStateMachine, "load_snapshot"), 1, True),
]


def prepare(directory: Path) -> None:
    write_log(directory, OLD_LOG, segment_bytes=SEGMENT_BYTES)
    QuorumStateFile(directory).store(PersistentState(EPOCH, None, LEADER))  # follows node 1 in epoch 5


async def install(driver: RaftDriver, sent: list, sid: SnapshotId) -> None:
    """Play the leader: announce the epoch, answer the fetch with "fetch snapshot ``sid``", serve two chunks."""
    half = len(IMAGE) // 2
    driver.step(BeginQuorumEpoch(LEADER, driver.node_id, EPOCH))
    [fetch] = [m for m in sent if isinstance(m, Fetch)]
    driver.step(
        FetchResponse(
            LEADER,
            driver.node_id,
            EPOCH,
            LEADER,
            fetch.fetch_offset,
            fetch.last_fetched_epoch,
            sid.end_offset,
            snapshot_id=sid,
            correlation_id=fetch.correlation_id,
        )
    )
    for position, data in ((0, IMAGE[:half]), (half, IMAGE[half:])):
        [request] = [m for m in sent if isinstance(m, FetchSnapshot) and m.position == position]
        driver.step(
            FetchSnapshotResponse(
                LEADER,
                driver.node_id,
                EPOCH,
                LEADER,
                sid,
                position,
                data,
                len(IMAGE),
                correlation_id=request.correlation_id,
            )
        )


@pytest.mark.parametrize("sid", [SnapshotId(5, 4), SnapshotId(20, 4)], ids=["inside-old-log", "past-old-log"])
@pytest.mark.parametrize(("where", "target", "call", "holds_snapshot"), CRASH_POINTS, ids=[c[0] for c in CRASH_POINTS])
async def test_restart_after_a_crash_during_snapshot_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sid, where, target, call, holds_snapshot
) -> None:
    prepare(tmp_path)
    driver, sent = capturing_driver(tmp_path)
    await driver.start()
    owner, name = target
    monkeypatch.setattr(owner, name, crash_on_call(call, getattr(owner, name)))
    with pytest.raises(MetadataLogFailedError):
        await install(driver, sent, sid)
    assert isinstance(driver.failure, Crash), f"no crash {where}"
    monkeypatch.undo()
    await driver.stop(graceful=False)

    restarted, sent = capturing_driver(tmp_path)
    await restarted.start()  # the old code raised here after a crash past complete(): "below the last epoch"
    try:
        log = restarted.node.log
        if holds_snapshot:
            assert (log.snapshot_id, log.end_offset) == (sid, sid.end_offset)
            assert restarted.sm.snapshots == [(sid, IMAGE)]
        else:
            assert (log.snapshot_id, log.end_offset, log.last_epoch) == (EMPTY_SNAPSHOT, 12, 2)
            assert restarted.sm.snapshots == []
            await install(restarted, sent, sid)  # the restarted follower finishes what the crash interrupted
            assert restarted.failure is None
            assert (log.snapshot_id, log.end_offset) == (sid, sid.end_offset)
            assert restarted.sm.snapshots == [(sid, IMAGE)]
        assert not list((tmp_path / "snapshots").glob("*.part"))
    finally:
        await restarted.stop(graceful=False)
    store = MetadataLogStore(tmp_path / METADATA_LOG, open_metadata_log)
    try:
        assert store.load(sid) == [] and store.log.log_start_offset == sid.end_offset
    finally:
        store.close()


async def test_a_completed_install_restarts_with_the_snapshot(tmp_path: Path) -> None:
    prepare(tmp_path)
    sid = SnapshotId(5, 4)
    driver, sent = capturing_driver(tmp_path)
    await driver.start()
    await install(driver, sent, sid)
    assert driver.failure is None and driver.node.log.snapshot_id == sid
    await driver.stop(graceful=False)
    restarted, _ = capturing_driver(tmp_path)
    await restarted.start()
    try:
        assert restarted.node.log.snapshot_id == sid and restarted.node.log.end_offset == sid.end_offset
    finally:
        await restarted.stop(graceful=False)
