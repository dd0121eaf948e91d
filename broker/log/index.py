"""Sparse segment indexes: fixed-size big-endian entries in a memory-mapped file, searched by bisection.

The offset index maps a batch's base offset (relative to the segment's base offset) to the batch's byte position
in the segment, one entry every ``index.interval.bytes`` of log; the time index maps the largest timestamp seen so
far to the base offset of the batch that first reached it, appended alongside offset-index entries whenever the
maximum grew. Both are ordered by both fields, which is what makes bisection work in either direction.

The active segment's indexes are files preallocated to ``segment.index.bytes`` (sparse) and mapped read-write, so
an entry costs a ``pack_into`` and no system call, and lives in the page cache rather than the Python heap. Rolling
or closing the segment trims each file to its entries and fsyncs it; sealed indexes are mapped read-only on first
use. The segment decides when a mapping exists (see handles.py): these classes only map lazily and release.

After an unclean shutdown the active segment's indexes are not trusted (their tail may be stale or zero): recovery
rebuilds them from the log, as Kafka does.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path
from typing import ClassVar

from odradek.broker.log import durability

# Advice for the active segment's mappings. Appends store into their sparse pages in order, the first store to each
# page faulting it in; with the default advice every such fault also reads ahead (zero-fills) the holes around it:
# ~150 us per page on the benchmark VM, ~0.3 us per 16 KiB append on average, against ~25-60 us without. Lookups
# bisect, so random is the right advice for them too.
_MADV_RANDOM = getattr(mmap, "MADV_RANDOM", None)


class CorruptIndexError(Exception):
    """An index file is unusable; the segment rebuilds it from its log."""


class _Index:
    entry: ClassVar[struct.Struct]
    _offset_field: ClassVar[int]  # which field of an entry holds the relative offset

    def __init__(self, path: Path, base_offset: int, max_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_bytes // self.entry.size
        self.entries = 0
        self.writable = False
        # The current mapping, if any (``view()`` maps). Read directly by the segment's append loop, which writes
        # entries itself with ``entry.pack_into`` to save two calls per batch.
        self.mm: mmap.mmap | None = None

    def create(self) -> None:
        """Start an empty writable index (a new segment, or a rebuild)."""
        self.release()
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            os.ftruncate(fd, self.max_entries * self.entry.size)
        finally:
            os.close(fd)
        self.entries = 0
        self.writable = True
        self._loaded()

    def load(self) -> None:
        """Open a trimmed index file read-only; raises CorruptIndexError (or FileNotFoundError) if unusable."""
        size = os.stat(self.path).st_size
        if size % self.entry.size:
            raise CorruptIndexError(f"{self.path}: size {size} is not a multiple of {self.entry.size}")
        self.release()
        self.entries = size // self.entry.size
        self.writable = False
        self._loaded()

    def make_writable(self) -> None:
        """Reopen a loaded (trimmed) index for appends: the segment became active again."""
        self.release()
        fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        try:
            os.ftruncate(fd, max(self.entries, self.max_entries) * self.entry.size)
        finally:
            os.close(fd)
        self.writable = True

    def seal(self) -> None:
        """Trim to the entries and fsync: the segment is no longer written (roll or clean close)."""
        self.release()
        fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        try:
            os.ftruncate(fd, self.entries * self.entry.size)
            durability.fsync(fd)
        finally:
            os.close(fd)
        self.writable = False

    def release(self) -> None:
        """Unmap (eviction or close); the next lookup maps the file again."""
        if self.mm is not None:
            self.mm.close()
            self.mm = None

    def delete(self) -> None:
        self.release()
        self.path.unlink(missing_ok=True)

    def has_room(self, count: int) -> bool:
        return self.entries + count <= self.max_entries

    def view(self) -> mmap.mmap:
        mm = self.mm
        if mm is None:
            fd = os.open(self.path, (os.O_RDWR if self.writable else os.O_RDONLY) | os.O_CLOEXEC)
            try:
                length = max(self.entries, self.max_entries) if self.writable else self.entries
                access = mmap.ACCESS_WRITE if self.writable else mmap.ACCESS_READ
                mm = self.mm = mmap.mmap(fd, length * self.entry.size, access=access)
                if self.writable and _MADV_RANDOM is not None:
                    mm.madvise(_MADV_RANDOM)
            finally:
                os.close(fd)
        return mm

    def at(self, i: int) -> tuple[int, int]:
        return self.entry.unpack_from(self.view(), i * self.entry.size)

    def last(self) -> tuple[int, int]:
        return self.at(self.entries - 1)

    def _floor(self, field: int, target: int) -> int:
        """Position of the last entry whose ``field`` is <= ``target``, or -1."""
        lo, hi = 0, self.entries
        if not hi:
            return -1
        mm = self.view()
        unpack = self.entry.unpack_from
        size = self.entry.size
        while lo < hi:
            mid = (lo + hi) >> 1
            if unpack(mm, mid * size)[field] <= target:
                lo = mid + 1
            else:
                hi = mid
        return lo - 1

    def truncate_to(self, offset: int) -> None:
        """Drop the entries for batches at or after ``offset``."""
        self.entries = self._floor(self._offset_field, offset - self.base_offset - 1) + 1
        self._loaded()

    def _loaded(self) -> None:
        """Refresh cached facts after the entries changed wholesale."""


class OffsetIndex(_Index):
    """Relative base offset (u32) -> byte position (u32)."""

    entry = struct.Struct(">II")
    _offset_field = 0

    def lookup(self, offset: int) -> tuple[int, int]:
        """(base offset, position) of the last indexed batch starting at or before ``offset``."""
        i = self._floor(0, offset - self.base_offset)
        if i < 0:
            return self.base_offset, 0
        rel, position = self.at(i)
        return self.base_offset + rel, position

    def lookup_position(self, position: int) -> tuple[int, int]:
        """(base offset, position) of the last indexed batch starting at or before byte ``position``."""
        i = self._floor(1, position)
        if i < 0:
            return self.base_offset, 0
        rel, pos = self.at(i)
        return self.base_offset + rel, pos

    def last_entry(self) -> tuple[int, int]:
        """(base offset, position) of the last entry, or of the segment start if empty."""
        if not self.entries:
            return self.base_offset, 0
        rel, position = self.last()
        return self.base_offset + rel, position


class TimeIndex(_Index):
    """Timestamp (i64) -> relative base offset (u32) of the first batch whose max timestamp reached it."""

    entry = struct.Struct(">qI")
    _offset_field = 1
    last_timestamp = -1

    def _loaded(self) -> None:
        self.last_timestamp = self.last()[0] if self.entries else -1

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add an entry if ``timestamp`` is a new maximum (the caller checked there is room)."""
        if timestamp > self.last_timestamp:
            self.entry.pack_into(self.mm or self.view(), self.entries * 12, timestamp, offset - self.base_offset)
            self.entries += 1
            self.last_timestamp = timestamp

    def lookup(self, timestamp: int) -> int:
        """Base offset of the last indexed batch whose max timestamp is below ``timestamp`` (batches before it
        are all below it too), or the segment's base offset: where a scan for ``timestamp`` may start."""
        i = self._floor(0, timestamp - 1)
        return self.base_offset + (self.at(i)[1] if i >= 0 else 0)

    def last_entry(self) -> tuple[int, int]:
        """(max timestamp, base offset of the batch holding it), or (-1, base offset) if empty."""
        if not self.entries:
            return -1, self.base_offset
        ts, rel = self.last()
        return ts, self.base_offset + rel
