"""The metadata log on disk: Raft entries stored in the foundation's partition log (``__cluster_metadata-0``).

Each Raft entry is one v2 record batch holding one record: the batch's base offset is the entry's offset, its
partition-leader-epoch field the entry's Raft epoch, and the control flag marks entries the Raft layer writes
itself. So the metadata log gets the same CRCs, recovery and torn-tail handling as every partition.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

from odradek.client.common import clock
from odradek.client.record.batch import read_batches
from odradek.client.record.builder import BatchBuilder
from odradek.controller.raft.log import Entry
from odradek.controller.raft.snapshot import EMPTY_SNAPSHOT, SnapshotId

logger = logging.getLogger(__name__)


class _Read(Protocol):
    @property
    def records(self) -> bytes | bytearray | memoryview: ...

    @property
    def next_offset(self) -> int: ...


class SegmentLog(Protocol):
    """What the store uses of the partition log it keeps the entries in (the storage layer's ``Log``, which the
    node's wiring opens: ``broker/log/metadata.py``)."""

    high_watermark: int

    @property
    def dir(self) -> Path: ...

    @property
    def failure(self) -> BaseException | None: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    def read(self, offset: int, max_bytes: int) -> _Read: ...

    def append_as_follower(self, records: bytes) -> object: ...

    def truncate_to(self, offset: int) -> object: ...

    def truncate_fully_and_start_at(self, offset: int) -> None: ...

    def increment_log_start_offset(self, offset: int) -> bool: ...

    def delete_old_segments(self) -> object: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


OpenLog = Callable[[Path], SegmentLog]
"""Opens (creating where missing) the partition log of the metadata log in a directory."""


def encode_entry(entry: Entry) -> bytes:
    builder = BatchBuilder(base_offset=entry.offset, partition_leader_epoch=entry.epoch, is_control=entry.control)
    builder.append(clock.wall_ms(), None, entry.data)
    return builder.build()


class MetadataLogError(RuntimeError):
    """The metadata log contradicts itself or its snapshot in a way no crash can cause: refuse to start on it."""


class MetadataLogStore:
    def __init__(self, directory: Path, open_log: OpenLog) -> None:
        self.log = open_log(directory)
        if self.log.failure is not None:
            raise self.log.failure

    def load(self, snapshot: SnapshotId = EMPTY_SNAPSHOT) -> list[Entry]:
        """The entries that continue ``snapshot`` (the latest one), made durable before anyone counts them.

        The snapshot supersedes whatever does not continue it: a crash while a downloaded snapshot replaced the log
        leaves the snapshot next to the old log (or part of it), whose entries may sit behind it, straddle it with
        other epochs, or stop short of it. Those are dropped, so every instant of an install can restart. What is
        kept is fsynced here: entries a crash left only in the page cache would otherwise be acknowledged on the
        strength of a write no fsync ever covered.
        """
        log, start = self.log, snapshot.end_offset
        if log.log_start_offset > start:
            raise MetadataLogError(
                f"{log.dir.name}: the log starts at {log.log_start_offset}, after the end of snapshot {snapshot}: "
                "entries between them are missing"
            )
        if not self._holds_end_of(snapshot):
            if log.log_end_offset > log.log_start_offset:
                logger.warning(
                    "%s: entries [%d, %d) do not continue snapshot %s; the snapshot replaces them",
                    log.dir.name,
                    log.log_start_offset,
                    log.log_end_offset,
                    snapshot,
                )
            log.truncate_fully_and_start_at(start)
            return []
        if log.log_start_offset < start:
            self.trim_prefix(start)
        entries: list[Entry] = []
        for entry in self._read(start):
            last_epoch = entries[-1].epoch if entries else snapshot.epoch
            if entry.offset != start + len(entries) or entry.epoch < last_epoch:
                raise MetadataLogError(
                    f"{log.dir.name}: entry at {entry.offset} (epoch {entry.epoch}) does not follow offset "
                    f"{start + len(entries) - 1} (epoch {last_epoch})"
                )
            entries.append(entry)
        log.flush()
        return entries

    def _holds_end_of(self, snapshot: SnapshotId) -> bool:
        """Whether the log goes on from ``snapshot``: it starts at its end offset (reset or trimmed for it) or
        holds its last entry. Only then do the entries after it belong to the same history (log matching)."""
        log, start = self.log, snapshot.end_offset
        if log.log_start_offset == start:
            return True
        if log.log_end_offset < start:
            return False
        last = next(self._read(start - 1), None)
        return last is not None and last.offset == start - 1 and last.epoch == snapshot.epoch

    def _read(self, offset: int) -> Iterator[Entry]:
        """Entries from the batch holding ``offset`` on (offsets as stored, gaps included)."""
        log = self.log
        while offset < log.log_end_offset:
            data = log.read(offset, 1 << 20)
            for batch in read_batches(data.records):
                h = batch.header
                if h.base_offset < offset:
                    continue
                record = batch.records()[0]
                yield Entry(h.base_offset, h.partition_leader_epoch, record.value or b"", h.is_control)
            if data.next_offset <= offset:
                raise RuntimeError(f"metadata log cannot be read at offset {offset}")
            offset = data.next_offset

    def append(self, entries: list[Entry]) -> None:
        self.log.append_as_follower(b"".join(encode_entry(e) for e in entries))

    def truncate(self, offset: int) -> None:
        self.log.truncate_to(offset)

    def reset(self, start_offset: int) -> None:
        """Drop everything: a snapshot ending at ``start_offset`` replaces the log."""
        self.log.truncate_fully_and_start_at(start_offset)

    def trim_prefix(self, offset: int) -> None:
        """Entries below ``offset`` are in a durable snapshot: release their segments."""
        log = self.log
        log.high_watermark = log.log_end_offset
        if log.increment_log_start_offset(min(offset, log.log_end_offset)):
            log.delete_old_segments()

    def flush(self) -> None:
        self.log.flush()

    def close(self) -> None:
        self.log.close()
