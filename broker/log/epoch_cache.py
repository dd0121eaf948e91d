"""The leader-epoch cache: for each leader epoch, the first offset written in it (Kafka's LeaderEpochFileCache).

Followers use it to find where their log diverges from the leader's (OffsetsForLeaderEpoch): the
end offset of epoch E is the start offset of the first epoch after E. It is persisted in the partition directory
as ``leader-epoch-checkpoint`` (checkpoint.py layout, ``epoch start_offset`` a line). Truncations are written at once.
A new epoch (``assign``) is only marked dirty: its owner makes it durable with ``persist`` before the log's recovery
point passes the epoch's start offset (a flush, a roll, a close), and the log manager's periodic pass writes what is
left off the event loop. Every entry at or above the recovery point is rebuilt from the batch headers after a crash,
so a lost write loses nothing, and an election that makes a broker lead thousands of partitions at once does not
cost it two fsyncs per partition on the path that applies the metadata (which its heartbeats wait behind).
"""

from __future__ import annotations

import bisect
import itertools
from pathlib import Path
from typing import NamedTuple

from odradek.broker.log.checkpoint import read_entries, write_entries
from odradek.client.errors import StorageError

FILE_NAME = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """Entries strictly increasing in both epoch and start offset."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            entries = [EpochEntry(int(e), int(o)) for e, o in read_entries(path, 2)]
        except ValueError as e:
            raise StorageError(f"{path}: malformed leader-epoch checkpoint ({e})") from None
        for prev, cur in itertools.pairwise(entries):
            if cur.epoch <= prev.epoch or cur.start_offset < prev.start_offset:
                raise StorageError(f"{path}: leader epochs out of order: {prev} then {cur}")
        self._set(entries)
        self.dirty = False  # entries assigned since the last write

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def _set(self, entries: list[EpochEntry]) -> None:
        self._entries = entries
        # A plain attribute: every leader append compares its epoch with it.
        self.latest_epoch: int | None = entries[-1].epoch if entries else None

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset``, dropping entries that conflict with it; written by the
        next ``persist`` (or truncation).

        Same rule as Kafka: a new entry is needed unless the epoch is the latest one and does not move back;
        entries with an epoch >= ``epoch`` or a start offset >= ``start_offset`` are superseded by it.
        """
        if epoch < 0:
            return
        if self._entries:
            last = self._entries[-1]
            if epoch == last.epoch and start_offset >= last.start_offset:
                return
        kept = [e for e in self._entries if e.epoch < epoch and e.start_offset < start_offset]
        self._set([*kept, EpochEntry(epoch, start_offset)])
        self.dirty = True

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as Kafka's OffsetsForLeaderEpoch answers it.

        The latest epoch ends at the log end offset; an earlier epoch ends where the next known epoch starts, and
        the answer names the largest known epoch <= the requested one (the follower truncates to that offset and
        asks again with that epoch). Unknown epochs (above all, or -1) give (-1, -1); an epoch below all known
        ones gives (requested epoch, start of the first epoch).
        """
        if epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch == self._entries[-1].epoch:
            return epoch, log_end_offset
        i = bisect.bisect_right(self._entries, epoch, key=lambda e: e.epoch)  # first entry with a higher epoch
        if i == len(self._entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        higher = self._entries[i]
        if i == 0:
            return epoch, higher.start_offset
        return self._entries[i - 1].epoch, higher.start_offset

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs starting at or after ``end_offset`` (the log was truncated there)."""
        kept = [e for e in self._entries if e.start_offset < end_offset]
        if len(kept) != len(self._entries):
            self._set(kept)
            self._persist()

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget epochs that end before ``start_offset``; the epoch covering it now starts there."""
        i = bisect.bisect_right(self._entries, start_offset, key=lambda e: e.start_offset)
        if i == 0 or (i == 1 and self._entries[0].start_offset == start_offset):
            return
        covering = self._entries[i - 1]
        self._set([EpochEntry(covering.epoch, start_offset), *self._entries[i:]])
        self._persist()

    def clear(self) -> None:
        if self._entries:
            self._set([])
            self._persist()

    def persist(self) -> None:
        """Write the entries if an ``assign`` changed them since the last write (raises OSError)."""
        if self.dirty:
            self._persist()

    def _persist(self) -> None:
        write_entries(self.path, list(self._entries))
        self.dirty = False
