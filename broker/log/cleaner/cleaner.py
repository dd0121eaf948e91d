"""One cleaning pass over one log (Kafka's Cleaner): build the offset map of the dirty section, recopy the segments
below its end without superseded records, swap the copies in.

Runs in a cleaner thread, never on the event loop: it reads sealed segment files through its own descriptors
(sealed segments are immutable; a truncation or a retention deletion meanwhile makes the swap refuse, see
``Log.replace_segments``) and takes the log's lock only for the snapshot and for each swap.

What a pass keeps, batch by batch, for segments from the log start up to the end of the map:

- a record whose key the map holds at a later offset is dropped; the others keep their offset and timestamp;
- a tombstone (null value) is kept until the batch's delete horizon has passed *and* its offset is below the
  caller's ``tombstone_horizon_offset`` (the offset every replica holds durably, so a replica that was away or
  lost power cannot bring the deleted key's old value back). The horizon is stamped in the batch the first time a
  pass recopies it with a tombstone: the batch's base timestamp becomes now + ``delete.retention.ms`` and its
  delete-horizon attribute bit is set (Kafka's KIP-534 layout; the records' timestamp deltas are re-based, so every
  record keeps its timestamp). It lives in the log, so it survives restarts and needs no side file. A horizon
  beyond what a batch holds (``delete.retention.ms`` up to Long.MAX, Kafka's "for good") is capped to the largest
  that fits;
- a record without a key is kept (counted in ``keyless_records``): Kafka's broker refuses keyless records for a
  compacted topic and its cleaner drops any that got in; this log cannot know whether they were accepted on
  purpose, and never loses data silently;
- the records of aborted transactions are removed (the aborted-transaction indexes say which; they never enter the
  offset map either, so an aborted value supersedes nothing), and a transaction marker goes once no data of its
  transaction is left before it and its delete horizon passed, stamped and bounded by the tombstone horizon offset
  as a tombstone is (a follower that has the data but not yet the marker must still get it). An ABORT marker kept
  with data before it keeps its aborted-index entry in the cleaned segment (transactions.py);
- the last data batch and last marker of every producer id are never dropped (its header's sequence lets an
  idempotent producer continue, and a restarted broker rebuilds the producer state from it): the last data batch
  loses its superseded records as any other, and stays, if none is left, as an empty batch (Kafka's
  ``RETAIN_EMPTY``), with its max timestamp, which the producer's expiry follows. Its records must go in the pass
  that maps them: the pass's end becomes the first dirty offset, and no later pass maps those keys again;
- a batch left without records is dropped; a batch losing some is rebuilt with ``assemble_batch`` in its own codec,
  keeping its base offset, last offset delta (so its sequence range), epoch and producer fields.

Segments are recopied in groups of consecutive segments whose total size fits ``segment.bytes`` (and whose
offsets fit one index), each group into one new segment swapped in crash-safely (swap.py). A swap that would
remove a tombstone or marker at or above the tombstone horizon *as of the swap* is refused (the pass is redone):
a replica added during a pass lowers the horizon, and may already have copied the value a tombstone deletes.
A pass whose log's cleaning was paused meanwhile (its replica started moving to another log dir) stops before its
next group and refuses its next swap, as Kafka's cleaner aborts a pass for ``abortAndPauseCleaning``.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from odradek.broker.log import durability
from odradek.broker.log.cleaner.keyscan import PAUSE_EVERY, decode_span, scan_batch
from odradek.broker.log.cleaner.offset_map import OffsetMap
from odradek.broker.log.cleaner.policy import CompactionConfig
from odradek.broker.log.cleaner.stats import PassStats
from odradek.broker.log.cleaner.throttle import Throttler
from odradek.broker.log.cleaner.transactions import TxnTracker
from odradek.broker.log.index import OffsetIndex, TimeIndex
from odradek.broker.log.log import CompactionView, Log, SegmentStat, wall_clock_ms
from odradek.broker.log.segment import INDEX_SUFFIX, LOG_SUFFIX, MAX_RELATIVE_OFFSET, TIME_INDEX_SUFFIX
from odradek.broker.log.swap import cleaned_path
from odradek.broker.log.txn_index import TXN_INDEX_SUFFIX, AbortedTxnEntry, encode_entries
from odradek.client.errors import CorruptRecordError, OdradekError
from odradek.client.record.batch import Record, read_batches
from odradek.client.record.builder import assemble_batch, encode_record
from odradek.client.record.control import ControlType, parse_control_record
from odradek.client.record.header import (
    COMPRESSION_MASK,
    DELETE_HORIZON_FLAG,
    HEADER_SIZE,
    BatchHeader,
    batch_size_at,
    validate_batch,
)

_MAX_TIMESTAMP = struct.Struct(">q")  # at byte 35 of a batch
READ_CHUNK = 1 << 20
WRITE_CHUNK = 1 << 20
INT64_MAX = 2**63 - 1  # the largest timestamp (and timestamp delta) a batch holds


class OffsetMapTooSmallError(OdradekError):
    """One batch has more keys than the whole offset map holds: raise log.cleaner.dedupe.buffer.size."""


@dataclass
class _BatchFilter:
    """The per-batch keep/drop rules (the module docstring), with the pass's counters."""

    offset_map: OffsetMap
    now_ms: int
    delete_retention_ms: int
    tombstone_horizon_offset: int
    protected: set[int]  # last offsets of the producers' last data batches and markers
    stats: PassStats
    defer: Callable[[], None]  # between chunks of PAUSE_EVERY records (see _defer_to_other_threads)
    txns: TxnTracker
    # The tombstone horizon as of now (None: fixed), and the largest offset of a tombstone or marker removed since
    # the last swap: the next swap may go ahead only while that offset stays below the horizon.
    live_horizon: Callable[[], int] | None = None
    removed_up_to: int = -1
    tombstone_due: list[int] = field(default_factory=list)

    def removals_still_safe(self) -> bool:
        """Called under the log's lock right before a swap: a replica added since the pass read its horizon (and
        served from this log before the swap) may hold values whose tombstones this swap would remove."""
        return self.live_horizon is None or self.removed_up_to < self.live_horizon()

    def apply(self, data: bytes, h: BatchHeader) -> bytes | memoryview | None:
        """The batch as the cleaned segment holds it, or None to drop it."""
        raw = memoryview(data)[h.position : h.position + h.size]
        if h.is_control:
            removable = self.txns.on_marker(h, control_type(data, h))
            if not removable or h.last_offset in self.protected:
                return raw
            return self._expire_marker(data, h, raw)
        aborted = self.txns.on_data_batch(h)
        protected = h.last_offset in self.protected
        if aborted:
            self.stats.records_read += h.records_count
            self.stats.records_removed += h.records_count
            return _emptied(h) if protected else None
        defer = self.defer
        scanned = scan_batch(data, h, defer)
        keys, offsets = scanned.keys, scanned.offsets
        count = len(keys)
        stats = self.stats
        stats.records_read += count
        flagged = bool(h.attributes & DELETE_HORIZON_FLAG)
        horizon = h.base_timestamp if flagged else min(self.now_ms + self.delete_retention_ms, INT64_MAX)
        expired = flagged and horizon <= self.now_ms
        latest: list[int] = []
        for i in range(0, count, PAUSE_EVERY):
            latest += self.offset_map.get_batch(keys[i : i + PAUSE_EVERY])
            defer()
        null_values = set(scanned.tombstones)
        kept: list[int] = []  # indexes of the surviving records
        tombstones = 0
        for i in range(count):
            if keys[i] is None:
                stats.keyless_records += 1
            elif latest[i] > offsets[i]:
                continue
            elif i in null_values:
                if expired and offsets[i] < self.tombstone_horizon_offset:
                    stats.tombstones_removed += 1
                    self.removed_up_to = max(self.removed_up_to, offsets[i])
                    continue
                tombstones += 1
                if expired:
                    stats.tombstone_blocked_offset = min(stats.tombstone_blocked_offset, offsets[i])
            kept.append(i)
        stats.records_removed += count - len(kept)
        if tombstones and not expired:
            stats.tombstone_due_ms = min(stats.tombstone_due_ms, horizon)
        stamp = tombstones > 0 and not flagged
        if len(kept) == count and not stamp:
            return raw  # the common case of a clean section: no value decoded
        if not kept:
            return _emptied(h) if protected else None
        records = []
        for first, stop in _runs(kept, PAUSE_EVERY):
            records += decode_span(scanned, first, stop)
            defer()
        base_ts = _stamped_base(horizon, records) if stamp else h.base_timestamp
        flagged = flagged or stamp
        encoded: list[bytes] = []
        max_ts = -1
        for i, r in enumerate(records, 1):
            encoded.append(encode_record(r.offset - h.base_offset, r.timestamp - base_ts, r.key, r.value, r.headers))
            max_ts = max(max_ts, r.timestamp)
            if i % PAUSE_EVERY == 0:
                defer()
        if h.is_log_append_time or protected:
            max_ts = h.max_timestamp  # a producer's last batch: its max timestamp drives the producer's expiry
        return assemble_batch(
            b"".join(encoded),
            len(kept),
            h.compression,
            h.attributes | (DELETE_HORIZON_FLAG if flagged else 0),
            h.base_offset,
            h.partition_leader_epoch,
            h.last_offset_delta,
            base_ts,
            max_ts,
            h.producer_id,
            h.producer_epoch,
            h.base_sequence,
        )

    def _expire_marker(self, data: bytes, h: BatchHeader, raw: memoryview) -> bytes | memoryview | None:
        """A marker with no data of its transaction left: removed once its delete horizon passed (and it lies below
        the tombstone horizon offset); stamped with the horizon the first time it is met, as tombstones are."""
        stats = self.stats
        if h.attributes & DELETE_HORIZON_FLAG:
            horizon = h.base_timestamp
            if horizon > self.now_ms:
                stats.tombstone_due_ms = min(stats.tombstone_due_ms, horizon)
                return raw
            if h.last_offset < self.tombstone_horizon_offset:
                stats.markers_removed += 1
                self.removed_up_to = max(self.removed_up_to, h.last_offset)
                return None
            stats.tombstone_blocked_offset = min(stats.tombstone_blocked_offset, h.base_offset)
            return raw
        records = next(read_batches(raw, validate=False)).records()
        horizon = _stamped_base(min(self.now_ms + self.delete_retention_ms, INT64_MAX), records)
        stats.tombstone_due_ms = min(stats.tombstone_due_ms, horizon)
        encoded = b"".join(
            encode_record(r.offset - h.base_offset, r.timestamp - horizon, r.key, r.value, r.headers) for r in records
        )
        return assemble_batch(
            encoded,
            len(records),
            h.compression,
            h.attributes | DELETE_HORIZON_FLAG,
            h.base_offset,
            h.partition_leader_epoch,
            h.last_offset_delta,
            horizon,
            h.max_timestamp,
            h.producer_id,
            h.producer_epoch,
            h.base_sequence,
        )


def _stamped_base(horizon: int, records: list[Record]) -> int:
    """The base timestamp of a batch stamped with ``horizon``: lowered, if need be, so that every record's timestamp
    delta fits 64 bits (it matters only for records dated before 1970 under a horizon near the largest)."""
    oldest = min((r.timestamp for r in records), default=-1)
    return min(horizon, oldest + INT64_MAX + 1)


def _emptied(h: BatchHeader) -> bytes:
    """A producer's last data batch with no record left: its header alone, uncompressed, keeping the offsets,
    sequence, epoch and max timestamp that the producer state is rebuilt from."""
    return assemble_batch(
        b"",
        0,
        0,
        h.attributes & ~(COMPRESSION_MASK | DELETE_HORIZON_FLAG),
        h.base_offset,
        h.partition_leader_epoch,
        h.last_offset_delta,
        h.max_timestamp,
        h.max_timestamp,
        h.producer_id,
        h.producer_epoch,
        h.base_sequence,
    )


def control_type(data: bytes, h: BatchHeader) -> ControlType | None:
    """The marker type of the control batch ``h`` in ``data`` (None: it holds no record)."""
    records = next(read_batches(memoryview(data)[h.position : h.position + h.size], validate=False)).records()
    return parse_control_record(records[0]).type if records else None


def _stable_end(view: CompactionView) -> int:
    """The base offset of the segment holding the log's first unstable offset: nothing at or past an open or
    unreplicated transaction is cleaned (its outcome is not known everywhere yet)."""
    first = view.first_unstable_offset
    if first is not None:
        for seg in view.sealed:
            if seg.end_offset > first:
                return seg.base_offset
    return view.active_base_offset


def _runs(indexes: list[int], longest: int) -> Iterator[tuple[int, int]]:
    """The runs of consecutive numbers in sorted ``indexes`` as [first, stop) pairs, none longer than ``longest``:
    [0, 1, 2, 5] -> (0, 3), (5, 6)."""
    first = prev = indexes[0]
    for i in indexes[1:]:
        if i != prev + 1 or i - first == longest:
            yield first, prev + 1
            first = i
        prev = i
    yield first, prev + 1


class _SegmentWriter:
    """Writes one cleaned segment's ``.cleaned`` files: the batches, and both indexes as LogSegment builds and
    seals them (an offset entry every index.interval.bytes, a time entry when the max timestamp grows)."""

    def __init__(self, log: Log, base: int, sleep_for: Callable[[int], None]) -> None:
        config = log.config
        self.base = base
        self.dir = log.dir
        self._interval = config.index_interval_bytes
        self._max_offset_entries = config.segment_index_bytes // OffsetIndex.entry.size
        self._max_time_entries = config.segment_index_bytes // TimeIndex.entry.size
        self._fd = os.open(cleaned_path(log.dir, base, LOG_SUFFIX), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._pending: list[bytes | memoryview] = []
        self._pending_bytes = 0
        self._sleep_for = sleep_for
        self.size = 0
        self._since = 0
        self._max_ts, self._max_ts_offset = -1, base
        self._offsets = bytearray()
        self._times = bytearray()
        self._last_time = -1
        self.aborted: list[AbortedTxnEntry] = []  # the cleaned segment's aborted-index entries

    def append(self, batch: bytes | memoryview, base_offset: int, max_ts: int) -> None:
        if max_ts > self._max_ts:
            self._max_ts, self._max_ts_offset = max_ts, base_offset
        if (
            self._since > self._interval
            and len(self._offsets) // 8 < self._max_offset_entries
            and len(self._times) // 12 + 1 < self._max_time_entries
        ):
            self._offsets += OffsetIndex.entry.pack(base_offset - self.base, self.size)
            self._time_entry()
            self._since = 0
        size = len(batch)
        self._since += size
        self.size += size
        self._pending.append(batch)
        self._pending_bytes += size
        if self._pending_bytes >= WRITE_CHUNK:
            self._flush()

    def _time_entry(self) -> None:
        if self._max_ts > self._last_time:
            self._times += TimeIndex.entry.pack(self._max_ts, self._max_ts_offset - self.base)
            self._last_time = self._max_ts

    def _flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
            self._sleep_for(len(data))
            self._pending, self._pending_bytes = [], 0

    def finish(self) -> None:
        """Write the rest and both indexes, fsync all three (the swap renames only durable files)."""
        try:
            self._flush()
            durability.fsync(self._fd)
        finally:
            os.close(self._fd)
            self._fd = -1
        if self.size and len(self._times) // 12 < self._max_time_entries:
            self._time_entry()  # as LogSegment.seal
        files: list[tuple[str, bytes | bytearray]] = [(INDEX_SUFFIX, self._offsets), (TIME_INDEX_SUFFIX, self._times)]
        if self.aborted:
            files.append((TXN_INDEX_SUFFIX, encode_entries(self.aborted)))
        for suffix, data in files:
            fd = os.open(cleaned_path(self.dir, self.base, suffix), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, data)
                durability.fsync(fd)
            finally:
                os.close(fd)

    def abandon(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            cleaned_path(self.dir, self.base, suffix).unlink(missing_ok=True)


def group_segments(segments: list[SegmentStat], max_bytes: int, max_index_entries: int) -> list[list[SegmentStat]]:
    """Consecutive segments grouped while the total size fits ``segment.bytes``, the offset index entries fit
    ``segment.index.bytes`` and the offsets fit a 32-bit relative index (Kafka's groupSegmentsBySize)."""
    groups: list[list[SegmentStat]] = []
    for seg in segments:
        group = groups[-1] if groups else None
        if (
            group is not None
            and sum(s.size for s in group) + seg.size <= max_bytes
            and sum(s.index_entries for s in group) + seg.index_entries + 1 <= max_index_entries
            and seg.end_offset - 1 - group[0].base_offset <= MAX_RELATIVE_OFFSET
        ):
            group.append(seg)
        else:
            groups.append([seg])
    return groups


def _swap_check(batch_filter: _BatchFilter, paused: Callable[[], bool] | None) -> Callable[[], bool]:
    """What a swap asks under the log's lock: its removals are still safe, and the log's cleaning is not paused."""
    if paused is None:
        return batch_filter.removals_still_safe
    is_paused = paused

    def check() -> bool:
        return not is_paused() and batch_filter.removals_still_safe()

    return check


def _defer_to_other_threads() -> None:
    """Let a thread that waits for the interpreter lock have it (the broker's event loop). A CPU-bound thread
    that never blocks keeps the lock for a whole switch interval each time it gets it, so it takes about half the
    interpreter from a busy broker; releasing it after every batch, and every ``PAUSE_EVERY`` records inside a large
    one (a producer's 1 MB batch holds thousands: milliseconds of work), makes the cleaner run mostly when the event
    loop does not need the interpreter, as a low-priority thread would (``sched_yield`` releases the lock, and costs
    well under a microsecond where ``time.sleep(0)`` costs tens)."""
    os.sched_yield()


class Cleaner:
    """Runs passes; one instance per cleaner thread (it owns the offset map's memory)."""

    def __init__(
        self,
        dedupe_buffer_bytes: int = 128 * 1024 * 1024,
        io_max_bytes_per_second: float = float("inf"),
        *,
        load_factor: float = 0.9,
        clock: Callable[[], int] = wall_clock_ms,
        sleep: Callable[[float], None] = time.sleep,
        throttler: Throttler | None = None,
        defer: Callable[[], None] = _defer_to_other_threads,
    ) -> None:
        """``throttler``: a bucket shared with the other cleaner threads (else one of ``io_max_bytes_per_second``
        for this cleaner alone). ``defer`` runs between batches and every ``PAUSE_EVERY`` records of a batch (see
        ``_defer_to_other_threads``)."""
        self._map_size = (dedupe_buffer_bytes, load_factor)
        self._offset_map: OffsetMap | None = None
        self._clock = clock
        self._sleep = sleep
        self._defer = defer
        self.throttler = throttler or Throttler(io_max_bytes_per_second, clock())
        # Tests set this to inject a crash at each step of a swap (swap.commit_swap's ``step``).
        self.swap_step: Callable[[str], None] | None = None

    @property
    def offset_map(self) -> OffsetMap:
        """Allocated at the first pass: a broker without compacted logs never holds the dedupe buffer."""
        if self._offset_map is None:
            self._offset_map = OffsetMap(*self._map_size)
        return self._offset_map

    def _throttle(self, nbytes: int) -> None:
        wait = self.throttler.acquire(nbytes, self._clock())
        if wait > 0:
            self._sleep(wait)

    def _batches(self, seg: SegmentStat, stats: PassStats) -> Iterator[tuple[bytes, BatchHeader]]:
        """Every batch of a sealed segment file, CRC-checked (CorruptRecordError: the log is uncleanable)."""
        fd = os.open(seg.log_path, os.O_RDONLY)
        try:
            position, size = 0, seg.size
            while position < size:
                data = os.pread(fd, min(READ_CHUNK, size - position), position)
                stats.bytes_read += len(data)
                self._throttle(len(data))
                p = 0
                while p + HEADER_SIZE <= len(data) and p + batch_size_at(data, p) <= len(data):
                    h = validate_batch(data, p)
                    self._defer()
                    yield data, h
                    p += h.size
                if p == 0:  # one batch larger than the chunk (or a damaged length)
                    need = batch_size_at(data, 0) if len(data) >= HEADER_SIZE else 0
                    if need < HEADER_SIZE or position + need > size:
                        raise CorruptRecordError(f"{seg.log_path}: bad batch at byte {position}")
                    data = os.pread(fd, need, position)
                    h = validate_batch(data, 0)
                    yield data, h
                    p = h.size
                position += p
        finally:
            os.close(fd)

    def build_map(
        self,
        view: CompactionView,
        first_dirty: int,
        end: int,
        stats: PassStats,
        aborted: list[AbortedTxnEntry] | None = None,
    ) -> int:
        """Put the keys of [first_dirty, end) into the map, but those of ``aborted`` transactions (the log's
        aborted-index entries overlapping the range); return where it stopped (``end``, or the base offset of the
        first batch that did not fit)."""
        aborted = aborted or []
        m = self.offset_map
        m.clear()
        txns = TxnTracker(aborted)
        for seg in view.sealed:
            if seg.end_offset <= first_dirty:
                continue
            if seg.base_offset >= end:
                break
            for data, h in self._batches(seg, stats):
                if h.is_control:
                    txns.on_marker(h, control_type(data, h))
                    continue
                if txns.on_data_batch(h) or h.last_offset < first_dirty:
                    continue
                if h.base_offset >= end:
                    return end
                if not m.has_room(h.records_count):
                    if m.size == 0:
                        raise OffsetMapTooSmallError(
                            f"a batch of {h.records_count} records does not fit the offset map "
                            f"({m.max_entries} entries): raise log.cleaner.dedupe.buffer.size"
                        )
                    return h.base_offset
                scanned = scan_batch(data, h, self._defer)
                keys, offsets = scanned.keys, scanned.offsets
                if h.base_offset < first_dirty:  # a batch straddling the start of the dirty section
                    kept = [i for i, offset in enumerate(offsets) if offset >= first_dirty]
                    keys, offsets = [keys[i] for i in kept], [offsets[i] for i in kept]
                for i in range(0, len(keys), PAUSE_EVERY):
                    m.put_batch(keys[i : i + PAUSE_EVERY], offsets[i : i + PAUSE_EVERY])
                    self._defer()
        return end

    def clean(
        self,
        log: Log,
        config: CompactionConfig,
        first_dirty: int,
        end: int,
        tombstone_horizon_offset: int,
        tombstone_horizon: Callable[[], int] | None = None,
        paused: Callable[[], bool] | None = None,
    ) -> PassStats:
        """Clean ``log`` up to ``end`` (the policy's cleanable end, a segment base offset), its dirty section
        starting at ``first_dirty``. Tombstones at or above ``tombstone_horizon_offset`` stay whatever their age;
        ``tombstone_horizon`` gives that offset as of now: a swap it no longer allows aborts the pass. ``paused``
        says whether the log's cleaning was paused since: asked before each group and, under the log's lock, before
        each swap, it aborts the pass (the groups swapped before stay).

        Returns the pass's stats; ``stats.end`` is the new first dirty offset. Raises CorruptRecordError (or
        another OdradekError / OSError) when the log cannot be cleaned: the caller marks it uncleanable."""
        start = self._clock()
        view = log.compaction_view()
        stats = PassStats(first_dirty=first_dirty, start_ms=start)
        try:
            self._clean(log, view, config, end, tombstone_horizon_offset, tombstone_horizon, stats, paused)
        except (OdradekError, OSError):
            if not log.moved_since(view):
                raise
            stats.aborted = True  # a segment went (retention, truncation) while it was read: not its fault
            stats.end = first_dirty
        stats.duration_ms = self._clock() - start
        return stats

    def _clean(
        self,
        log: Log,
        view: CompactionView,
        config: CompactionConfig,
        end: int,
        tombstone_horizon_offset: int,
        tombstone_horizon: Callable[[], int] | None,
        stats: PassStats,
        paused: Callable[[], bool] | None = None,
    ) -> None:
        first_dirty, start = stats.first_dirty, stats.start_ms
        throttled_before = self.throttler.throttled_ms
        sealed_end = view.sealed[-1].end_offset if view.sealed else view.log_start_offset
        end = min(end, view.active_base_offset, max(sealed_end, first_dirty), _stable_end(view))
        map_end = self.build_map(view, first_dirty, end, stats, log.aborted_index_entries(first_dirty, end))
        stats.end = max(map_end, first_dirty)
        stats.map_entries = self.offset_map.size
        stats.map_utilization = self.offset_map.utilization
        to_clean = [s for s in view.sealed if s.base_offset < map_end]
        config_max_entries = log.config.segment_index_bytes // OffsetIndex.entry.size
        batch_filter = _BatchFilter(
            self.offset_map,
            start,
            config.delete_retention_ms,
            tombstone_horizon_offset,
            log.producer_protected_offsets(),
            stats,
            self._defer,
            TxnTracker(log.aborted_index_entries(view.log_start_offset, map_end)),
            tombstone_horizon,
        )
        groups = group_segments(to_clean, log.config.segment_bytes, config_max_entries)
        for i, group in enumerate(groups):
            group_end = groups[i + 1][0].base_offset if i + 1 < len(groups) else self._next_base(view, group[-1])
            stopped = paused is not None and paused()
            if stopped or not self._clean_group(log, view, group, group_end, batch_filter, paused):
                stats.aborted = True
                stats.end = first_dirty
                break
        stats.throttled_ms = self.throttler.throttled_ms - throttled_before

    @staticmethod
    def _next_base(view: CompactionView, last: SegmentStat) -> int:
        """The base offset of the segment after ``last``: the end of the range a swap replaces."""
        for i, seg in enumerate(view.sealed):
            if seg.segment is last.segment:
                return view.sealed[i + 1].base_offset if i + 1 < len(view.sealed) else view.active_base_offset
        raise AssertionError("segment not in the view")

    def _clean_group(
        self,
        log: Log,
        view: CompactionView,
        group: list[SegmentStat],
        end: int,
        batch_filter: _BatchFilter,
        paused: Callable[[], bool] | None = None,
    ) -> bool:
        stats = batch_filter.stats
        batch_filter.removed_up_to = -1
        writer = _SegmentWriter(log, group[0].base_offset, self._throttle)
        try:
            for seg in group:
                for data, h in self._batches(seg, stats):
                    out = batch_filter.apply(data, h)
                    if out is not None:
                        writer.append(out, h.base_offset, _MAX_TIMESTAMP.unpack_from(out, 35)[0])
            writer.aborted = batch_filter.txns.take_kept_entries()
            writer.finish()
            stats.bytes_written += writer.size
            swapped = log.replace_segments(view, group, end, self.swap_step, _swap_check(batch_filter, paused))
        except BaseException:
            writer.abandon()
            raise
        if not swapped:
            writer.abandon()
            return False
        stats.segments_in += len(group)
        stats.segments_out += 1
        return True
