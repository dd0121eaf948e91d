"""Snapshot identity and the follower's progress through a chunked FetchSnapshot download.

The metadata image itself lives outside Raft: the core only names snapshots and moves their bytes between
shells. A snapshot is named, as in KIP-630, by the end offset it covers and the epoch of its last entry, so a
snapshot id doubles as the (offset, epoch) pair that log matching needs at the log start.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class SnapshotId:
    """A snapshot holding every entry below `end_offset`; `epoch` is the epoch of the entry at end_offset - 1."""

    end_offset: int
    epoch: int


#: The empty snapshot every log starts from: nothing below offset 0, epoch 0 (no leader has existed yet).
EMPTY_SNAPSHOT = SnapshotId(0, 0)


@dataclass(frozen=True, slots=True)
class SnapshotChunk:
    """A piece of a snapshot being downloaded: the shell writes `data` at `position` of that snapshot's file."""

    snapshot_id: SnapshotId
    position: int
    data: bytes


@dataclass(slots=True)
class SnapshotDownload:
    """Which snapshot a follower is fetching and how many bytes of it have arrived, so chunks stay in order."""

    snapshot_id: SnapshotId
    position: int = 0
