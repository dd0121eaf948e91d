"""A log segment: ``<base offset>.log`` holding whole batches as received, with its offset and time indexes.

Every method is called with the owning log's lock held; the log decides offsets, rolling and recovery policy, the
segment only does the I/O. Before touching its fd or indexes a method calls ``_file()``, which registers the
segment as most recently used in the shared handle cache (handles.py) and reopens it if it had been evicted.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import struct
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from odradek.broker.log import durability
from odradek.broker.log.config import LogConfig
from odradek.broker.log.epoch_cache import LeaderEpochCache
from odradek.broker.log.handles import SegmentHandles
from odradek.broker.log.index import CorruptIndexError, OffsetIndex, TimeIndex
from odradek.broker.log.txn_index import TXN_INDEX_SUFFIX, TransactionIndex
from odradek.client.common.file_slice import FileSlice
from odradek.client.errors import CorruptRecordError
from odradek.client.record.batch import read_batches
from odradek.client.record.header import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    AppendBatch,
    BatchHeader,
    batch_size_at,
    parse_header,
    validate_batch,
)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
# Disk blocks reserved ahead of the write position: as much as the segment holds already, between these two. A busy
# segment reserves 4 MiB at a time; a quiet one about what it holds, so a broker of 10,000 quiet partitions does
# not reserve 40 GB it will not write.
PREALLOCATE_BYTES = 4 * 1024 * 1024
PREALLOCATE_MIN_BYTES = 64 * 1024
SCAN_CHUNK = 16 * 1024  # header walks between sparse index entries
RECOVERY_CHUNK = 8 * 1024 * 1024  # full validation on recovery
MAX_RELATIVE_OFFSET = 2**31 - 1

_IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024
_HEAD = struct.Struct(">qi")  # base_offset, batch_length
_OFFSET_ENTRY = OffsetIndex.entry
_TIME_ENTRY = TimeIndex.entry
_LAST_OFFSET_DELTA = struct.Struct(">i")
_DELTA_AT = 23  # where last_offset_delta sits in the header
_HEAD_TO_DELTA = _DELTA_AT + _LAST_OFFSET_DELTA.size


class TimestampOffset(NamedTuple):
    """A record found by timestamp: its offset, its timestamp and the leader epoch of its batch."""

    offset: int
    timestamp: int
    leader_epoch: int


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


def _load_fallocate() -> Callable[[int, int, int, int], int] | None:
    """Linux fallocate(2), for FALLOC_FL_KEEP_SIZE reservations; None where unavailable."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).fallocate
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    fn.restype = ctypes.c_int
    return fn


_fallocate = _load_fallocate()
_FALLOC_FL_KEEP_SIZE = 1


class Invalid(NamedTuple):
    """Where and why a recovery scan stopped."""

    position: int
    expected_offset: int  # the offset the bad batch should have started at (next offset of the last good batch)
    reason: str


class Located(NamedTuple):
    position: int
    base_offset: int


class LogSegment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        handles: SegmentHandles,
        lock: threading.RLock,
        now_ms: int,
    ) -> None:
        self.base_offset = base_offset
        stem = directory / segment_name(base_offset)
        self.log_path = stem.with_name(stem.name + LOG_SUFFIX)
        index_bytes = config.segment_index_bytes
        self.offset_index = OffsetIndex(stem.with_name(stem.name + INDEX_SUFFIX), base_offset, index_bytes)
        self.time_index = TimeIndex(stem.with_name(stem.name + TIME_INDEX_SUFFIX), base_offset, index_bytes)
        self.txn_index = TransactionIndex(stem.with_name(stem.name + TXN_INDEX_SUFFIX))
        self.config = config
        self.lock = lock
        self._handles = handles
        self._fd: int | None = None
        self.size = 0
        self.next_offset: int | None = base_offset  # None: a sealed segment not yet scanned (see end_offset)
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.rolling_base_timestamp = -1  # max timestamp of the first batch: segment.ms counts from it
        self.created_ms = now_ms
        self._bytes_since_index = 0
        self._reserved = 0  # file bytes reserved by fallocate (KEEP_SIZE), beyond which writes allocate blocks
        # Where recent reads ended: next offset -> position of the first batch ending at or after it. A consumer's
        # next fetch starts there, so sequential reads skip the index search.
        self._read_ends: dict[int, int] = {}
        self._can_reserve = config.preallocate and _fallocate is not None

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path.name}, size={self.size})"

    # -- handle cache protocol -------------------------------------------------------------------------------

    def open_handles(self) -> None:
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def close_handles(self) -> None:
        fd, self._fd = self._fd, None
        self.offset_index.release()
        self.time_index.release()
        if fd is not None:
            os.close(fd)

    def _file(self) -> int:
        if self._handles.mru is not self:
            self._handles.touch(self)
        fd = self._fd
        assert fd is not None
        return fd

    # -- creation and loading ------------------------------------------------------------------------------

    def create(self) -> None:
        """Start a new empty segment (the files must not exist yet with data)."""
        fd = self._file()
        os.ftruncate(fd, 0)
        self.offset_index.create()
        self.time_index.create()
        self.txn_index.reset()

    def load(self) -> bool:
        """Open a segment written before, trusting its log and checking its indexes; False if an index is missing
        or inconsistent with the log and needs a rebuild (``recover``). Leaves the indexes read-only. A missing
        aborted-transaction index is an empty one; a torn one needs the rebuild too."""
        fd = self._file()
        self.size = self._reserved = os.fstat(fd).st_size
        self.next_offset = None
        try:
            self.offset_index.load()
            self.time_index.load()
        except (FileNotFoundError, CorruptIndexError):
            return False
        if not self.txn_index.check():
            return False
        offset, position = self.offset_index.last_entry()
        ts, ts_offset = self.time_index.last_entry()
        if self.offset_index.entries:
            head = os.pread(fd, LOG_OVERHEAD, position)
            if position >= self.size or len(head) < LOG_OVERHEAD or _HEAD.unpack(head)[0] != offset:
                return False
        if self.size == 0 and (self.offset_index.entries or self.time_index.entries):
            return False
        self.max_timestamp, self.offset_of_max_timestamp = ts, ts_offset
        return True

    def activate(self) -> None:
        """Make a loaded segment the one appended to: writable indexes and the state a scan of its tail gives."""
        fd = self._file()
        self.offset_index.make_writable()
        self.time_index.make_writable()
        self._scan_tail(fd)

    def recover(self, min_offset: int, epochs: LeaderEpochCache) -> Invalid | None:
        """Validate every batch (header, CRC, increasing offsets >= ``min_offset``), rebuild both indexes and
        add the batches' new leader epochs to ``epochs`` (as Kafka does: the cache may lag the log after a crash).

        Stops at the first invalid batch and returns where it is; the segment then holds the valid prefix in
        memory (``size``) while the file still has the rest, for the log to judge as torn tail or corruption.
        Leaves the indexes writable. The aborted-transaction index is emptied: the log's producer-state replay
        rebuilds it (it needs the transactions' first offsets, which may lie in earlier segments).
        """
        fd = self._file()
        file_size = os.fstat(fd).st_size
        self.offset_index.create()
        self.time_index.create()
        self.txn_index.reset()
        self.size = 0
        self._reserved = file_size
        self.next_offset = self.base_offset
        self.max_timestamp, self.offset_of_max_timestamp = -1, self.base_offset
        self.rolling_base_timestamp = -1
        self._bytes_since_index = 0
        expected = max(min_offset, self.base_offset)
        position = 0
        need = RECOVERY_CHUNK
        while position < file_size:
            data = os.pread(fd, min(need, file_size - position), position)
            view = memoryview(data)
            at_eof = position + len(data) >= file_size
            need = RECOVERY_CHUNK
            p = 0
            while p < len(data):
                left = len(data) - p
                if not at_eof and (left < HEADER_SIZE or left < batch_size_at(data, p) <= file_size - position - p):
                    if p == 0:  # one batch bigger than the chunk: read it whole next time
                        need = batch_size_at(data, 0)
                    break
                try:
                    h = validate_batch(view, p)
                except CorruptRecordError as e:
                    return Invalid(position + p, expected, str(e))
                if h.base_offset < expected or h.last_offset_delta < 0:
                    return Invalid(position + p, expected, f"batch offsets {h.base_offset}.. go back from {expected}")
                if h.last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
                    return Invalid(position + p, expected, f"offset {h.last_offset} does not fit this segment")
                if self.size == 0:
                    self.rolling_base_timestamp = h.max_timestamp
                latest = epochs.latest_epoch
                if h.partition_leader_epoch > (-1 if latest is None else latest):
                    epochs.assign(h.partition_leader_epoch, h.base_offset)
                self._index((h.append_batch,), None, position + p)
                expected = h.next_offset
                p += h.size
            position += p
        return None

    def _scan_tail(self, fd: int) -> None:
        """Derive the next offset, max timestamp and index spacing from the last index entries plus a header walk
        over the batches after them (which are the unindexed ones)."""
        ts, ts_offset = self.time_index.last_entry()
        self.max_timestamp, self.offset_of_max_timestamp = ts, ts_offset
        _, last_position = self.offset_index.last_entry()
        start = min(last_position, self.offset_index.lookup(ts_offset)[1])
        self.next_offset = self.base_offset
        for _, h in self._headers(fd, start, self.size):
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = h.max_timestamp, h.base_offset
            self.next_offset = h.next_offset
        self._bytes_since_index = self.size - last_position
        first = parse_header(os.pread(fd, HEADER_SIZE, 0)) if self.size >= HEADER_SIZE else None
        self.rolling_base_timestamp = first.max_timestamp if first else -1

    def first_batch_timestamp(self) -> int:
        """Max timestamp of the first batch, -1 if empty: the age of the segment's oldest records (the log cleaner's
        max.compaction.lag.ms), read once from the header."""
        if self.rolling_base_timestamp < 0 and self.size >= HEADER_SIZE:
            self.rolling_base_timestamp = parse_header(os.pread(self._file(), HEADER_SIZE, 0)).max_timestamp
        return self.rolling_base_timestamp

    def end_offset(self) -> int:
        """The offset after this segment's last batch (its base offset if empty)."""
        if self.next_offset is None:
            self._scan_tail(self._file())
        assert self.next_offset is not None
        return self.next_offset

    # -- appends ----------------------------------------------------------------------------------------------

    def append(self, buffers: list, total: int, batches: Sequence[AppendBatch], first_offset: int | None) -> None:
        """Write ``buffers`` (``total`` bytes, the ``batches``) at the end with one pwritev, then index them.
        ``first_offset`` is the offset assigned to the first batch (leader); None keeps the batches' own base
        offsets (follower)."""
        fd = self._fd
        if fd is None or self._handles.mru is not self:
            fd = self._file()
        position = self.size
        end = position + total
        if end > self._reserved and self._can_reserve:
            self._reserve(fd, end)
        if len(buffers) > _IOV_MAX or os.pwritev(fd, buffers, position) != total:
            _pwritev_all(fd, buffers, position, total)  # rewrites any part already written: same bytes, same place
        if position == 0:
            self.rolling_base_timestamp = batches[0][3]
        self._index(batches, first_offset, position)

    def _index(self, batches: Sequence[AppendBatch], first_offset: int | None, position: int) -> None:
        """Account batches written at ``position``: size, next offset, max timestamp, and an index entry each
        time more than ``index.interval.bytes`` were written since the last one (``first_offset`` as in append).
        One call per append, with the loop state in locals: this is the per-batch cost of the append path."""
        interval = self.config.index_interval_bytes
        oi, ti = self.offset_index, self.time_index
        since, max_ts, max_ts_offset = self._bytes_since_index, self.max_timestamp, self.offset_of_max_timestamp
        base = self.end_offset() if first_offset is None else first_offset
        for batch_base, size, delta, batch_max_ts, _, _, _, _, _ in batches:
            if first_offset is None:
                base = batch_base
            if batch_max_ts > max_ts:
                max_ts, max_ts_offset = batch_max_ts, base
            if since > interval and oi.entries < oi.max_entries and ti.entries + 1 < ti.max_entries:
                # OffsetIndex.append and TimeIndex.maybe_append, inlined
                _OFFSET_ENTRY.pack_into(oi.mm or oi.view(), oi.entries << 3, base - self.base_offset, position)
                oi.entries += 1
                if max_ts > ti.last_timestamp:
                    _TIME_ENTRY.pack_into(ti.mm or ti.view(), ti.entries * 12, max_ts, max_ts_offset - self.base_offset)
                    ti.entries += 1
                    ti.last_timestamp = max_ts
                since = 0
            since += size
            position += size
            base += delta + 1
        self.size = position
        self.next_offset = base
        self._bytes_since_index, self.max_timestamp, self.offset_of_max_timestamp = since, max_ts, max_ts_offset

    def _reserve(self, fd: int, end: int) -> None:
        start = max(self._reserved, self.size)
        ahead = min(PREALLOCATE_BYTES, max(PREALLOCATE_MIN_BYTES, end))
        target = max(end, min(end + ahead, self.config.segment_bytes))
        assert _fallocate is not None
        if _fallocate(fd, _FALLOC_FL_KEEP_SIZE, start, target - start) == 0:
            self._reserved = target
        else:  # unsupported here (or out of space: then the write itself reports it)
            self._can_reserve = False

    # -- reads --------------------------------------------------------------------------------------------------

    def _headers(self, fd: int, position: int, end: int) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch from ``position`` (a batch start) up to ``end``."""
        while position + HEADER_SIZE <= end:
            data = os.pread(fd, min(SCAN_CHUNK, end - position), position)
            p = 0
            while p + HEADER_SIZE <= len(data):
                h = parse_header(data, p)
                if h.batch_length < MIN_BATCH_LENGTH:
                    raise CorruptRecordError(f"{self.log_path}: bad batch length at byte {position + p}")
                yield position + p, h
                p += h.batch_length + LOG_OVERHEAD
            position += p

    def _locate(self, fd: int, offset: int, position: int = 0) -> Located | None:
        """Position of the first batch, from ``position`` on, whose last offset is >= ``offset``, with its base
        offset (or ``offset`` itself when found without reading the header); None if every batch ends before it."""
        hint = self._read_ends.get(offset)
        if hint is not None and position <= hint < self.size:
            return Located(hint, offset)
        indexed_offset, indexed = self.offset_index.lookup(offset)
        if indexed_offset == offset and indexed >= position and indexed > 0:
            return Located(indexed, offset)  # an indexed batch starts exactly there: no I/O
        for pos, h in self._headers(fd, max(position, indexed), self.size):
            if h.base_offset + h.last_offset_delta >= offset:
                return Located(pos, h.base_offset)
        return None

    def read(
        self,
        offset: int,
        max_bytes: int,
        max_offset: int | None,
        min_one_batch: bool,
        as_file: bool = False,
        file_min_bytes: int = 0,
    ) -> tuple[bytes | memoryview | FileSlice, int] | None:
        """Whole batches from the one holding ``offset``: (data, offset after the last batch returned). Stops
        before the batch holding ``max_offset``, and after ``max_bytes`` unless the first batch alone is larger
        and ``min_one_batch``. None if ``offset`` is past this segment's last batch.

        With ``as_file`` a non-empty answer is a FileSlice over the same bytes, on a duplicate of the segment's
        fd (so handle eviction or deletion after this call does not change it), found by walking batch headers
        only: the records are never read into Python. The caller owns the slice. Whole batches up to ``max_bytes``
        that are fewer than ``file_min_bytes`` are read as bytes all the same (one pread, no fd to duplicate)."""
        fd = self._file()
        found = self._locate(fd, offset)
        if found is None:
            return None
        start = found.position
        end, end_offset = self.size, self.end_offset()
        if max_offset is not None and max_offset < end_offset:
            cut = self._locate(fd, max_offset, start)
            if cut is not None:
                end, end_offset = cut
            if end <= start:
                return b"", offset
        data: bytes | memoryview | FileSlice
        if end - start <= max_bytes:
            next_offset = end_offset
            if as_file and end - start >= file_min_bytes:
                data = FileSlice(os.dup(fd), start, end - start)
            else:
                data = os.pread(fd, end - start, start)
        elif as_file:
            length, next_offset = self._whole_batches_span(fd, start, max_bytes, offset, min_one_batch)
            data = FileSlice(os.dup(fd), start, length) if length else b""
        else:
            data, next_offset = self._read_whole_batches(fd, start, max_bytes, offset, min_one_batch)
        if len(self._read_ends) >= 64:
            self._read_ends.clear()
        self._read_ends[next_offset] = start + len(data)
        return data, next_offset

    def _whole_batches_span(
        self, fd: int, start: int, max_bytes: int, offset: int, min_one_batch: bool
    ) -> tuple[int, int]:
        """(length, next offset) of the batches _read_whole_batches returns, from their headers alone."""
        limit = start + max_bytes
        indexed_offset, indexed = self.offset_index.lookup_position(limit)
        p, next_offset = (indexed, indexed_offset) if indexed > start else (start, offset)
        while p + LOG_OVERHEAD <= limit:
            head = self._head_at(fd, p)
            size = batch_size_at(head, 0)
            if p + size > limit:
                break
            next_offset = _next_offset_at(head, 0)
            p += size
        if p > start:
            return p - start, next_offset
        if not min_one_batch:
            return 0, offset
        head = self._head_at(fd, start)
        return batch_size_at(head, 0), _next_offset_at(head, 0)

    def _head_at(self, fd: int, position: int) -> bytes:
        """A batch's header up to its last offset delta (size and next offset; no record bytes)."""
        head = os.pread(fd, _HEAD_TO_DELTA, position)
        if len(head) < _HEAD_TO_DELTA:
            raise CorruptRecordError(f"{self.log_path}: batch header cut short at byte {position}")
        return head

    def _read_whole_batches(
        self, fd: int, start: int, max_bytes: int, offset: int, min_one_batch: bool
    ) -> tuple[bytes | memoryview, int]:
        """Read ``max_bytes`` from ``start`` and cut after the last whole batch (see read)."""
        data = os.pread(fd, max_bytes, start)
        # Every batch before the last indexed batch start <= the limit fits; walk the few after it.
        indexed_offset, indexed = self.offset_index.lookup_position(start + max_bytes)
        p, next_offset = (indexed - start, indexed_offset) if indexed > start else (0, offset)
        last = -1
        while p + LOG_OVERHEAD <= max_bytes:
            size = batch_size_at(data, p)
            if p + size > max_bytes:
                break
            last = p
            p += size
        if last >= 0:
            next_offset = _next_offset_at(data, last)
        if p:
            return (data if p == len(data) else memoryview(data)[:p]), next_offset
        if not min_one_batch:
            return b"", offset
        head = data if len(data) >= LOG_OVERHEAD else os.pread(fd, LOG_OVERHEAD, start)
        data = os.pread(fd, batch_size_at(head, 0), start)
        return data, _next_offset_at(data, 0)

    def find_timestamp(self, timestamp: int, min_offset: int) -> TimestampOffset | None:
        """The first record at or after ``min_offset`` whose timestamp is >= ``timestamp``, if any.

        The time index gives where to start; batch headers are walked from there and only the first batch whose
        max timestamp reaches ``timestamp`` is decoded (a LogAppendTime batch's records all carry its max
        timestamp, so that is its first record). A batch whose records all fall short, which a well-formed batch
        never has, moves the search on to the next one, as in Kafka."""
        if self.max_timestamp < timestamp:
            return None
        fd = self._file()
        start = max(self.time_index.lookup(timestamp), min_offset)
        _, position = self.offset_index.lookup(start)
        for pos, h in self._headers(fd, position, self.size):
            if h.max_timestamp < timestamp or h.base_offset + h.last_offset_delta < min_offset:
                continue
            data = os.pread(fd, h.size, pos)
            for batch in read_batches(data, validate=False):
                for record in batch.records():
                    if record.timestamp >= timestamp and record.offset >= min_offset:
                        return TimestampOffset(record.offset, record.timestamp, h.partition_leader_epoch)
        return None

    # -- mutation, durability, removal ------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop every batch whose last offset is >= ``offset`` (whole batches) and make the segment active."""
        fd = self._file()
        found = self._locate(fd, offset)
        if not self.offset_index.writable:
            self.offset_index.make_writable()
            self.time_index.make_writable()
        if found is not None:
            position, base = found
            self.truncate_bytes(position)
            self.offset_index.truncate_to(base)
            self.time_index.truncate_to(base)
            self.txn_index.truncate_to(base)
            self.txn_index.sync()
        self._read_ends.clear()
        self._scan_tail(fd)

    def truncate_bytes(self, size: int) -> None:
        """Cut the file at ``size`` durably (a batch boundary)."""
        fd = self._file()
        os.ftruncate(fd, size)
        durability.fsync(fd)
        self.size = self._reserved = size
        self._read_ends.clear()

    def seal(self) -> None:
        """Roll or clean close: final time-index entry, release reserved space, trim the indexes, fsync all."""
        fd = self._file()
        if self.size and self.time_index.has_room(1):
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        if self._reserved > self.size:
            os.ftruncate(fd, self.size)  # also frees the blocks reserved beyond the end
            self._reserved = self.size
        durability.fsync(fd)
        self.offset_index.seal()
        self.time_index.seal()
        self.txn_index.sync()

    def dup_fd(self) -> int:
        """A private duplicate of the log fd, for an fsync without the log lock (eviction cannot close it)."""
        return os.dup(self._file())

    def last_modified_ms(self) -> int:
        return os.stat(self.log_path).st_mtime_ns // 1_000_000

    def close(self) -> None:
        self._handles.forget(self)

    def delete(self) -> None:
        self._handles.forget(self)
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        self.txn_index.delete()

    def find_valid_batch(self, after: int, min_offset: int) -> int | None:
        """Position of a valid batch anywhere after byte ``after`` (to tell a corrupt batch followed by data from a
        torn tail). Candidates are positions whose magic byte is 2, whose length fits the file and whose base
        offset could follow ``min_offset`` in this segment: garbage almost never passes, so the CRC check (which
        reads the candidate) runs on real batches only."""
        fd = self._file()
        file_size = os.fstat(fd).st_size
        max_offset = self.base_offset + MAX_RELATIVE_OFFSET
        position = after + 1
        while position + HEADER_SIZE <= file_size:
            data = os.pread(fd, min(RECOVERY_CHUNK, file_size - position), position)
            m = data.find(b"\x02", 16)
            while m >= 0:
                candidate = position + m - 16
                base, length = _HEAD.unpack_from(data, m - 16)
                if (
                    min_offset <= base <= max_offset
                    and length >= MIN_BATCH_LENGTH
                    and candidate + length + LOG_OVERHEAD <= file_size
                ):
                    batch = os.pread(fd, length + LOG_OVERHEAD, candidate)
                    with contextlib.suppress(CorruptRecordError):
                        validate_batch(batch)
                        return candidate
                m = data.find(b"\x02", m + 1)
            position += max(1, len(data) - HEADER_SIZE)
        return None


def _next_offset_at(data: bytes, position: int) -> int:
    """The offset after the batch at ``position`` (base offset + last offset delta + 1), from its header."""
    return _HEAD.unpack_from(data, position)[0] + _LAST_OFFSET_DELTA.unpack_from(data, position + _DELTA_AT)[0] + 1


def _pwritev_all(fd: int, buffers: list, position: int, total: int) -> None:
    """pwritev in IOV_MAX groups, resuming after short writes (which regular files only give on errors)."""
    views = [memoryview(b).cast("B") for b in buffers]
    end = position + total
    while views:
        written = os.pwritev(fd, views[:_IOV_MAX], position)
        if written == 0:
            raise OSError(f"no progress writing at byte {position}")
        position += written
        while views and written >= len(views[0]):
            written -= len(views.pop(0))
        if views and written:
            views[0] = views[0][written:]
    assert position == end
