"""The in-memory view of the replicated log: entries after the latest snapshot plus their epoch boundaries.

The shell persists the log (it is told what to write through `Ready`); this class is what the core reasons
with: where each epoch ends (for divergence detection, KIP-595's `end_offset_for_epoch`), truncation on
divergence, and trimming the prefix a snapshot already covers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from odradek.controller.raft.snapshot import EMPTY_SNAPSHOT, SnapshotId


@dataclass(frozen=True, slots=True)
class Entry:
    """One log entry. `control` marks entries the core writes itself (the leader-change entry of an epoch)."""

    offset: int
    epoch: int
    data: bytes
    control: bool = False


class RaftLog:
    """Entries in [start_offset, end_offset), where start_offset is the end offset of the latest snapshot."""

    __slots__ = ("_entries", "_epochs", "_snapshot")

    def __init__(self, snapshot: SnapshotId = EMPTY_SNAPSHOT, entries: Iterable[Entry] = ()) -> None:
        self._snapshot = snapshot
        self._entries: list[Entry] = []
        # (epoch, first retained offset of that epoch), ascending; an epoch starting inside the snapshot is
        # recorded from the log start, which is all end_offset_for_epoch needs.
        self._epochs: list[tuple[int, int]] = []
        self.append([e for e in entries if e.offset >= snapshot.end_offset])

    @property
    def snapshot_id(self) -> SnapshotId:
        return self._snapshot

    @property
    def start_offset(self) -> int:
        return self._snapshot.end_offset

    @property
    def end_offset(self) -> int:
        return self._snapshot.end_offset + len(self._entries)

    @property
    def last_epoch(self) -> int:
        """Epoch of the last entry, or of the snapshot when the log is empty: what a fetcher reports."""
        return self._entries[-1].epoch if self._entries else self._snapshot.epoch

    def entry(self, offset: int) -> Entry:
        if not self.start_offset <= offset < self.end_offset:
            raise IndexError(f"offset {offset} outside [{self.start_offset}, {self.end_offset})")
        return self._entries[offset - self.start_offset]

    def epoch_at(self, offset: int) -> int:
        """Epoch of the entry at `offset`; the entry just below the log start is known through the snapshot."""
        if offset == self.start_offset - 1:
            return self._snapshot.epoch
        return self.entry(offset).epoch

    def entries(self, start: int, end: int | None = None) -> list[Entry]:
        """Entries in [start, end); start must be at or above the log start."""
        base = self.start_offset
        if start < base:
            raise IndexError(f"offset {start} is below the log start {base}")
        return self._entries[start - base : None if end is None else end - base]

    def read(self, start: int, max_bytes: int) -> tuple[Entry, ...]:
        """Entries from `start` up to about `max_bytes` of data, always at least one if any exist."""
        out: list[Entry] = []
        size = 0
        for e in self._entries[start - self.start_offset :]:
            if out and size + len(e.data) > max_bytes:
                break
            out.append(e)
            size += len(e.data)
        return tuple(out)

    def append(self, entries: Iterable[Entry]) -> None:
        for e in entries:
            if e.offset != self.end_offset:
                raise ValueError(f"append at {e.offset} but the log ends at {self.end_offset}")
            if e.epoch < self.last_epoch:
                raise ValueError(f"entry epoch {e.epoch} below the last epoch {self.last_epoch}")
            if not self._epochs or self._epochs[-1][0] != e.epoch:
                self._epochs.append((e.epoch, e.offset))
            self._entries.append(e)

    def truncate(self, offset: int) -> None:
        """Drop every entry at `offset` and above (divergence from the leader)."""
        if offset < self.start_offset:
            raise ValueError(f"cannot truncate to {offset}, below the log start {self.start_offset}")
        del self._entries[offset - self.start_offset :]
        while self._epochs and self._epochs[-1][1] >= offset:
            self._epochs.pop()

    def trim_prefix(self, snapshot: SnapshotId) -> None:
        """Forget entries the snapshot covers; `snapshot` must name an entry of this log."""
        new_start = snapshot.end_offset
        if new_start <= self.start_offset:
            return
        if new_start > self.end_offset or self.epoch_at(new_start - 1) != snapshot.epoch:
            raise ValueError(f"snapshot {snapshot} does not match the log")
        kept = [(ep, start) for i, (ep, start) in enumerate(self._epochs) if self._epoch_end(i) > new_start]
        self._epochs = [(ep, max(start, new_start)) for ep, start in kept]
        del self._entries[: new_start - self.start_offset]
        self._snapshot = snapshot

    def reset(self, snapshot: SnapshotId) -> None:
        """Replace the whole log with an installed snapshot (the follower's log was behind or divergent)."""
        self._entries.clear()
        self._epochs.clear()
        self._snapshot = snapshot

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= `epoch` in this log, the offset where it ends), or (-1, -1) if it is unknown.

        Unknown means the requested epoch is older than anything the snapshot still tells about, so the
        divergence point lies inside the snapshot.
        """
        if epoch >= self.last_epoch:
            return self.last_epoch, self.end_offset
        for i in range(len(self._epochs) - 1, -1, -1):
            ep = self._epochs[i][0]
            if ep <= epoch:
                return ep, self._epoch_end(i)
        if epoch >= self._snapshot.epoch:
            return self._snapshot.epoch, self.start_offset
        return -1, -1

    def _epoch_end(self, i: int) -> int:
        return self._epochs[i + 1][1] if i + 1 < len(self._epochs) else self.end_offset
