"""The aborted-transaction index of one segment: ``<base offset>.txnindex`` next to its log file.

One entry per aborted transaction whose ABORT marker lies in the segment, in marker order, each 34 bytes,
big-endian (Kafka's layout)::

    2 version (0), 8 producer id, 8 first offset, 8 last offset (the marker's), 8 last stable offset

The last stable offset is the first offset of the oldest transaction still open once this one completed (or the
marker's offset + 1): a search for the aborted transactions below some offset ``upper`` can stop at the first entry
whose last stable offset is at or above ``upper``, since every transaction overlapping the range was decided
before that marker.

The entries are derived data: replaying the log's control batches rebuilds them (the log does this for segments
that recovery scans again), so ``add`` ignores an entry that is already there. The file exists only once a segment
has an aborted transaction. A file whose size is not a whole number of entries (a torn write) is reported as
corrupt, and the segment is then recovered.

Not thread-safe: the owning log's lock guards it. File errors (OSError) propagate.
"""

from __future__ import annotations

import bisect
import os
import struct
from pathlib import Path
from typing import NamedTuple

from odradek.broker.log import durability
from odradek.broker.log.checkpoint import fsync_dir
from odradek.broker.log.index import CorruptIndexError

TXN_INDEX_SUFFIX = ".txnindex"
ENTRY_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size


class AbortedTxnEntry(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int


class TransactionIndex:
    """The entries of one segment's aborted-transaction index, read lazily and kept in memory."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxnEntry] | None = None
        self._dirty = False  # written since the last sync
        self._created = False  # the file was created since the last sync: its directory entry needs an fsync

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def entries(self) -> list[AbortedTxnEntry]:
        """All entries in marker order (read from the file the first time). Raises CorruptIndexError."""
        if self._entries is None:
            self._entries = self._read()
        return self._entries

    def _read(self) -> list[AbortedTxnEntry]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        if len(data) % ENTRY_SIZE:
            raise CorruptIndexError(f"{self.path}: {len(data)} bytes is not a whole number of entries")
        entries: list[AbortedTxnEntry] = []
        for fields in _ENTRY.iter_unpack(data):
            if fields[0] != ENTRY_VERSION:
                raise CorruptIndexError(f"{self.path}: unknown entry version {fields[0]}")
            entry = AbortedTxnEntry(*fields[1:])
            if entries and entry.last_offset <= entries[-1].last_offset:
                raise CorruptIndexError(f"{self.path}: entries out of order at offset {entry.last_offset}")
            entries.append(entry)
        return entries

    def check(self) -> bool:
        """True if the file is readable and well formed (a segment load calls this)."""
        try:
            self._entries = self._read()
        except CorruptIndexError:
            return False
        return True

    def add(self, entry: AbortedTxnEntry) -> bool:
        """Add ``entry`` unless one with its marker offset is there; True if added."""
        entries = self.entries
        lasts = [e.last_offset for e in entries] if entries and entries[-1].last_offset >= entry.last_offset else None
        if lasts is None:  # the common case: a new marker after every indexed one
            self._created |= not entries and not self.path.exists()
            with open(self.path, "ab") as f:
                f.write(_ENTRY.pack(ENTRY_VERSION, *entry))
            entries.append(entry)
        else:
            i = bisect.bisect_left(lasts, entry.last_offset)
            if i < len(entries) and entries[i].last_offset == entry.last_offset:
                return False
            entries.insert(i, entry)
            self._rewrite()
        self._dirty = True
        return True

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or above ``offset`` (the segment was truncated there)."""
        entries = self.entries
        keep = bisect.bisect_left([e.last_offset for e in entries], offset)
        if keep < len(entries):
            del entries[keep:]
            os.truncate(self.path, keep * ENTRY_SIZE)
            self._dirty = True

    def reset(self) -> None:
        """Forget every entry (recovery rebuilds them by replay)."""
        self._entries = []
        if self.path.exists():
            os.truncate(self.path, 0)
            self._dirty = True

    def sync(self) -> None:
        """fsync what was written since the last sync (with the directory entry of a new file)."""
        if not self._dirty:
            return
        fd = os.open(self.path, os.O_RDONLY)
        try:
            durability.fsync(fd)
        finally:
            os.close(fd)
        if self._created:
            fsync_dir(self.path.parent)
        self._dirty = self._created = False

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
        self._entries = []
        self._dirty = self._created = False

    def collect(self, start: int, upper: int) -> tuple[list[AbortedTxnEntry], bool]:
        """The entries of transactions overlapping [start, upper) (marker at or after ``start``, first offset below
        ``upper``), and whether the search is complete (an entry's last stable offset reached ``upper``)."""
        found: list[AbortedTxnEntry] = []
        for entry in self.entries:
            if entry.last_offset >= start and entry.first_offset < upper:
                found.append(entry)
            if entry.last_stable_offset >= upper:
                return found, True
        return found, False

    def _rewrite(self) -> None:
        data = encode_entries(self.entries)
        self._created |= not self.path.exists()
        with open(self.path, "wb") as f:
            f.write(data)


def encode_entries(entries: list[AbortedTxnEntry]) -> bytes:
    """The file content holding ``entries`` (the cleaner writes a cleaned segment's index with it)."""
    return b"".join(_ENTRY.pack(ENTRY_VERSION, *e) for e in entries)
