"""Helpers for tests of the quorum shell on a real directory: a recording state machine, a metadata log written
as an earlier run left it, and a driver whose outgoing messages are captured instead of sent."""

from __future__ import annotations

import asyncio
from pathlib import Path

from odradek.broker.log.config import LogConfig
from odradek.broker.log.log import Log
from odradek.broker.log.metadata import open_metadata_log
from odradek.controller.quorum.driver import RaftDriver
from odradek.controller.quorum.log_store import encode_entry
from odradek.controller.raft import Entry, LeaderAndEpoch, Role, SnapshotId
from odradek.controller.raft.messages import Message

METADATA_LOG = "__cluster_metadata-0"


class RecordingStateMachine:
    def __init__(self) -> None:
        self.snapshots: list[tuple[SnapshotId, bytes]] = []
        self.applied: list[Entry] = []
        self.leaders: list[LeaderAndEpoch] = []
        self.leading = asyncio.Event()

    def load_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        self.snapshots.append((snapshot_id, data))

    def apply(self, entries: list[Entry]) -> None:
        self.applied.extend(entries)

    def snapshot(self) -> tuple[SnapshotId, bytes] | None:
        return None

    def leader_changed(self, leader: LeaderAndEpoch) -> None:
        self.leaders.append(leader)
        if leader.role is Role.LEADER:
            self.leading.set()


def write_log(directory: Path, entries: list[Entry], segment_bytes: int = 1 << 20, flush: bool = True) -> None:
    """The metadata log an earlier run left in ``directory`` (small ``segment_bytes`` give several segments)."""
    start = entries[0].offset if entries else 0
    log = Log.open(directory / METADATA_LOG, LogConfig(segment_bytes=segment_bytes), log_start_offset=start)
    for entry in entries:
        log.append_as_follower(encode_entry(entry))
    if flush:
        log.close()


def capturing_driver(directory: Path, node_id: int = 2, voters=(1, 2, 3), **kw) -> tuple[RaftDriver, list[Message]]:
    """A driver that never ticks on its own and keeps what it would send."""
    sm = kw.pop("state_machine", None) or RecordingStateMachine()
    addresses = {v: f"127.0.0.1:{v}" for v in voters}
    driver = RaftDriver(node_id, addresses, "c", directory, sm, tick_ms=3_600_000, open_log=open_metadata_log, **kw)
    sent: list[Message] = []
    driver._send = sent.append
    return driver, sent
