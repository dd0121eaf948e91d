"""The partition log: an ordered list of segments, the last one active, plus the offsets that frame it.

Offsets: ``log_start_offset`` <= ``high_watermark`` <= ``log_end_offset`` (LEO, the next offset to assign); the
``recovery_point`` is the offset below which everything has been fsynced.

Threading: each Log has one reentrant lock taken by every public method, so any thread may call any method.
Validation (header, CRC, record count) of appended batches runs before the lock is taken, and ``flush`` fsyncs
duplicated fds without it, so a flush running in a worker thread does not stall appends and reads on the event loop.

Opening (``Log.open``) recovers the directory first: loading or scanning segments, truncating a torn tail,
refusing corruption (recovery.py). A log that fails to open, or later hits an I/O error, goes offline: every
operation raises its error.

Transactions: leader appends, follower appends and the producer-state replay (on open and after truncation) all
feed each producer batch's header to the producer state, with the marker of a control batch, so every replica
knows the open transactions, the ``first_unstable_offset`` and the ``last_stable_offset`` (what ``read_committed``
consumers may see). An ABORT marker that ends a transaction adds an entry to the aborted-transaction index of the
segment holding it (txn_index.py); ``aborted_transactions`` answers fetches from those indexes.
"""

from __future__ import annotations

import bisect
import contextlib
import enum
import logging
import os
import struct
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Generic, Literal, NamedTuple, TypeVar, cast, overload

from odradek.broker.log import durability
from odradek.broker.log.checkpoint import fsync_dir
from odradek.broker.log.config import LogConfig
from odradek.broker.log.epoch_cache import UNDEFINED_EPOCH, LeaderEpochCache
from odradek.broker.log.handles import SegmentHandles
from odradek.broker.log.index import CorruptIndexError
from odradek.broker.log.producer_state import (
    MAX_RETAINED_BATCHES,
    NO_VERIFICATION,
    CompletedTxn,
    ProducerStateManager,
    VerificationGuard,
    increment_sequence,
)
from odradek.broker.log.recovery import recover
from odradek.broker.log.segment import MAX_RELATIVE_OFFSET, LogSegment, TimestampOffset
from odradek.broker.log.swap import commit_swap
from odradek.broker.log.txn_index import AbortedTxnEntry
from odradek.client.common.clock import wall_ms
from odradek.client.common.file_slice import FileSlice
from odradek.client.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidRequestError,
    InvalidTxnStateError,
    OdradekError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
    StorageError,
)
from odradek.client.record.batch import read_batches
from odradek.client.record.control import ControlMarker, ControlType, build_control_batch, parse_control_record
from odradek.client.record.header import (
    CONTROL_FLAG,
    LOG_OVERHEAD,
    NO_PRODUCER_ID,
    PREFIX,
    PREFIX_SIZE,
    TRANSACTIONAL_FLAG,
    AppendBatch,
    validate_for_append,
)

logger = logging.getLogger(__name__)

_BASE_OFFSET = struct.Struct(">q")

Buffered = bytes | memoryview
R = TypeVar("R", bound=Buffered | FileSlice, covariant=True)
_NO_LIMIT = 2**63 - 1  # followers copy what the leader accepted: no max.message.bytes check
_FLAGS_AT = 22  # the low byte of a batch's attributes: the transactional and control bits
_TXN_BITS = TRANSACTIONAL_FLAG | CONTROL_FLAG
_pack_prefix = PREFIX.pack


def wall_clock_ms() -> int:
    return wall_ms()  # the node's wall clock (client/common/clock.py: chaos runs skew it)


class UnexpectedAppendOffsetError(InvalidRequestError):
    """A follower append whose offsets do not continue the log (Kafka's UnexpectedAppendOffsetException)."""


class AppendOrigin(enum.Enum):
    """Who appends as leader. CLIENT: a producer (sequence checks; control batches refused). COORDINATOR: the
    group coordinator's own transactional writes (e.g. offset commits in a transaction: producer id and epoch,
    no sequence)."""

    CLIENT = "client"
    COORDINATOR = "coordinator"


class AbortedTxn(NamedTuple):
    """An aborted transaction overlapping a fetched range, as a fetch response lists it."""

    producer_id: int
    first_offset: int


class ActiveProducer(NamedTuple):
    """A producer the partition knows (DescribeProducers); -1 for an unknown sequence or no open transaction."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


class AppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    record_count: int
    batch_count: int
    size: int
    log_start_offset: int


# AppendInfo(*fields) runs a Python-level __new__; this builds the same NamedTuple from a tuple in C, ~80 ns less per
# append.
_append_info = cast("Callable[[tuple[int, ...]], AppendInfo]", partial(tuple.__new__, AppendInfo))


class FetchData(NamedTuple, Generic[R]):
    """Whole batches plus the partition's offsets, read under one lock hold so they agree.

    ``records`` is bytes, or a memoryview over a larger read when cut at ``max_bytes`` (no copy); for a read with
    ``as_file`` (the Kafka listener's zero-copy fetch) a non-empty answer is instead a FileSlice over the same
    batches in the segment file, which the caller must close, and an empty one is still b"".
    ``first_offset`` is the first batch's base offset (it may precede the requested offset, as in Kafka);
    ``next_offset`` is where the next read continues. Both equal the requested offset when nothing is returned.
    """

    records: R
    first_offset: int
    next_offset: int
    high_watermark: int
    log_start_offset: int
    log_end_offset: int


def _first_base_offset(data: Buffered | FileSlice) -> int:
    """The first batch's base offset: from the bytes, or a small read of a file slice (closed if that fails)."""
    if not isinstance(data, FileSlice):
        return int(_BASE_OFFSET.unpack_from(data)[0])
    try:
        return int(_BASE_OFFSET.unpack(os.pread(data.fd, _BASE_OFFSET.size, data.position))[0])
    except BaseException:
        data.close()
        raise


class SegmentStat(NamedTuple):
    """A sealed segment as the log cleaner sees it (``Log.compaction_view``)."""

    segment: LogSegment
    base_offset: int
    end_offset: int
    size: int
    max_timestamp: int  # the file's mtime when no batch has a timestamp
    first_timestamp: int  # max timestamp of its first batch, -1 when empty
    index_entries: int
    log_path: Path


class CompactionView(NamedTuple):
    """The sealed segments and offsets of a log at one instant, for a cleaning pass. ``generation`` changes when
    the log is truncated: ``replace_segments`` refuses a swap planned on an older view."""

    sealed: list[SegmentStat]
    active_base_offset: int
    active_end_offset: int
    active_size: int
    log_start_offset: int
    high_watermark: int
    generation: int
    first_unstable_offset: int | None = None  # the cleaner never cleans at or past it


class Log:
    """One partition replica's log. Create with ``Log.open``."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        handles: SegmentHandles | None = None,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.dir = Path(directory)
        topic, _, partition = self.dir.name.rpartition("-")
        self.topic = topic
        self.partition = int(partition) if partition.isdigit() else -1
        self.config = config
        self._handles = SegmentHandles() if handles is None else handles
        self._clock = clock
        self._lock = threading.RLock()
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._epochs: LeaderEpochCache
        self._producers: ProducerStateManager
        self._log_start = 0
        self._hw = 0
        self._recovery_point = 0
        self._appended_messages = 0
        self._flushed_messages = 0
        self._last_flush_ms = clock()
        self._last_append_ms = self._last_flush_ms
        self._truncations = 0  # bumped by truncation so a flush that raced with one does not move the recovery point
        self._truncated_to: int | None = None  # the lowest offset truncated to since take_truncation
        self._closed = False
        self.failure: OdradekError | None = None
        # Told (from whichever thread failed, holding this log's lock) when the log goes offline: the log manager
        # takes the whole log dir offline on an I/O error.
        self.failure_listener: Callable[[Log], None] | None = None

    def __repr__(self) -> str:
        return f"Log({self.dir.name}, start={self._log_start}, end={self.log_end_offset})"

    # -- opening and recovery ----------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: Path | str,
        config: LogConfig | None = None,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int = 0,
        clean_shutdown: bool = False,
        handles: SegmentHandles | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        sync: bool = True,
    ) -> Log:
        """Open (creating if needed) the log in ``directory``, recovering it unless ``clean_shutdown``.

        The offsets come from the log dir's checkpoints (manager.py). A log that fails to load is returned in the
        failed state (``failure`` set, every operation raising it) so the broker can report it offline. Without
        ``sync``, the directory entry of a new log's first segment is left for the caller to fsync (the log
        manager syncs the logs one metadata change creates together).
        """
        log = cls(Path(directory), config or LogConfig(), handles, clock)
        with log._lock:
            try:
                log._load(recovery_point, log_start_offset, high_watermark, clean_shutdown, sync)
            except OdradekError as e:
                log._fail(e)
            except OSError as e:
                log._fail(StorageError(f"{log.dir}: {e}"))
        return log

    def _load(
        self, recovery_point: int, log_start_offset: int, high_watermark: int, clean: bool, sync: bool = True
    ) -> None:
        """Install what recovery.py found in the directory, then replay the producer state. Lock held."""
        self._producers = ProducerStateManager(self.dir, self.config.producer_id_expiration_ms)
        r = recover(
            self.dir,
            self.config,
            self._handles,
            self._lock,
            self._clock,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            high_watermark=high_watermark,
            clean=clean,
            sync=sync,
        )
        self._segments, self._bases = r.segments, [seg.base_offset for seg in r.segments]
        self._epochs = r.epochs
        self._log_start, self._hw, self._recovery_point = r.log_start_offset, r.high_watermark, r.recovery_point
        self._rebuild_producer_state(r.rescanned_from)

    def _rebuild_producer_state(self, replay_from: int | None = None) -> None:
        """Producer state from the latest usable snapshot (at or below ``replay_from`` when given) plus the batches
        after it (producer_state.py). The replay also adds the aborted-index entries of the markers it meets that
        are missing (recovery empties the indexes of the segments it scans again). Lock held.

        Every batch the reads return is applied, the first one too when it starts below the replay offset: a log
        start inside a batch (DeleteRecords, a follower taking its leader's) still serves that batch, and its
        transaction must stay open (a snapshot offset is always a batch boundary, so no batch is applied twice)."""
        producers = self._producers
        leo = self.log_end_offset
        offset = producers.load(self._log_start, leo, replay_from)
        while offset < leo:
            data = self.read(offset, 1 << 20)
            if not data.records:
                break
            for batch in read_batches(data.records, validate=False):
                h = batch.header
                if h.producer_id != NO_PRODUCER_ID:
                    marker = None
                    if h.is_control:
                        marker = _marker_of(batch.records())
                        if marker is None:
                            continue
                    txn = producers.update(
                        h.producer_id,
                        h.producer_epoch,
                        h.base_sequence,
                        h.last_sequence,
                        h.base_offset,
                        h.last_offset,
                        h.max_timestamp,
                        is_transactional=h.is_transactional,
                        marker=marker,
                    )
                    if txn is not None:
                        self._index_aborted(txn)
            offset = data.next_offset
        producers.map_end_offset = leo
        producers.on_high_watermark(self._hw)
        producers.remove_expired(self._clock())

    def _index_aborted(self, txn: CompletedTxn) -> None:
        """An ABORT marker ended ``txn``: its entry in the aborted index of the segment holding the marker (kept if
        there). Lock held."""
        if not txn.is_aborted:
            return
        lso = self._producers.last_stable_offset_after(txn)
        seg = self._segments[max(0, bisect.bisect_right(self._bases, txn.last_offset) - 1)]
        try:
            seg.txn_index.add(AbortedTxnEntry(txn.producer_id, txn.first_offset, txn.last_offset, lso))
        except OSError as e:
            raise self._fail(StorageError(f"{self.dir.name}: aborted index write failed: {e}")) from e

    # -- state ---------------------------------------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        segments = self._segments  # one read: a failing log swaps in an empty list
        return segments[-1].end_offset() if segments else self._log_start

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def high_watermark(self) -> int:
        return self._hw

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        """Set by replication; clamped to [log start offset, log end offset] as Kafka does. Transactions whose
        marker it passes stop holding back the last stable offset."""
        with self._lock:
            self._hw = min(max(offset, self._log_start), self.log_end_offset)
            if self.failure is None:
                self._producers.on_high_watermark(self._hw)

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction that is open, or completed with its marker not yet below the
        high watermark; None if there is none."""
        with self._lock:
            self._check_usable()
            first = self._producers.first_unstable_offset
            return None if first is None else max(first, self._log_start)

    @property
    def last_stable_offset(self) -> int:
        """min(first unstable offset, high watermark): ``read_committed`` consumers read below it."""
        with self._lock:
            first = self.first_unstable_offset
            return self._hw if first is None else min(first, self._hw)

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """True if the producer has a transaction open here at that epoch (the leader then needs no verification)."""
        with self._lock:
            self._check_usable()
            return self._producers.has_ongoing_transaction(producer_id, producer_epoch)

    def start_transaction_verification(self, producer_id: int, producer_epoch: int) -> VerificationGuard:
        """What a leader presents with the producer's transactional batch (``append_as_leader``): NO_VERIFICATION
        if its transaction is open here at that epoch, else the guard of a verification to ask its coordinator for
        before the append (KIP-890). Taken before asking, so a marker written meanwhile voids the answer."""
        with self._lock:
            self._check_usable()
            producers = self._producers
            if producers.has_ongoing_transaction(producer_id, producer_epoch):
                return NO_VERIFICATION
            return producers.start_verification(producer_id, producer_epoch, self._clock())

    def aborted_transactions(self, start: int, upper: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start, upper): marker at or after ``start``, first offset below
        ``upper`` (a ``read_committed`` fetch returns them so the consumer drops their records)."""
        return [AbortedTxn(e.producer_id, e.first_offset) for e in self.aborted_index_entries(start, upper)]

    def aborted_index_entries(self, start: int, upper: int) -> list[AbortedTxnEntry]:
        """``aborted_transactions`` with the whole index entries. The search starts at the segment holding
        ``start`` (a transaction overlapping the range has its marker there or later) and stops at an entry whose
        last stable offset reaches ``upper``."""
        with self._lock:
            self._check_usable()
            found: list[AbortedTxnEntry] = []
            i = max(0, bisect.bisect_right(self._bases, start) - 1)
            try:
                for seg in self._segments[i:]:
                    entries, complete = seg.txn_index.collect(start, upper)
                    found += entries
                    if complete:
                        break
            except OSError as e:
                raise self._fail(StorageError(f"{self.dir.name}: aborted index read failed: {e}")) from e
            except CorruptIndexError as e:  # a damaged index file met after open
                raise self._fail(CorruptRecordError(str(e))) from None
            return found

    def active_producers(self) -> list[ActiveProducer]:
        """The producers this partition knows, for DescribeProducers."""
        with self._lock:
            self._check_usable()
            return [
                ActiveProducer(
                    e.producer_id,
                    e.epoch,
                    e.last_seq,
                    e.last_timestamp,
                    e.coordinator_epoch,
                    -1 if e.txn_first_offset is None else e.txn_first_offset,
                )
                for e in self._producers.producers.values()
            ]

    @property
    def latest_epoch(self) -> int | None:
        with self._lock:
            self._check_usable()
            return self._epochs.latest_epoch

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def num_segments(self) -> int:
        return len(self._segments)

    @property
    def segment_base_offsets(self) -> list[int]:
        return list(self._bases)

    @property
    def offline(self) -> bool:
        return self.failure is not None

    @property
    def closed(self) -> bool:
        """Closed for good: deleted, or replaced by its copy in another log dir."""
        return self._closed

    @property
    def lock(self) -> threading.RLock:
        """The lock every method takes; held across several calls that must see one state (a move's swap)."""
        return self._lock

    def update_config(self, config: LogConfig) -> None:
        """Apply a topic config change (segment.index.bytes applies to segments created from now on)."""
        with self._lock:
            self.config = config
            for seg in self._segments:
                seg.config = config

    def _check_usable(self) -> None:
        if self.failure is not None:
            raise type(self.failure)(str(self.failure))
        if self._closed:
            raise StorageError(f"{self.dir.name}: log is closed")

    def _fail(self, error: OdradekError) -> OdradekError:
        """Take the log offline: no more I/O on it (a disk error or corrupt data makes any further write unsafe)."""
        if self.failure is None:
            self.failure = error
            logger.error("%s: log offline: %s", self.dir, error)
            for seg in self._segments:
                with contextlib.suppress(OSError):
                    seg.close()
            self._segments, self._bases = [], []
            if self.failure_listener is not None:
                self.failure_listener(self)
        return error

    def take_offline(self, error: OdradekError) -> None:
        """Fail the log from outside (another log of its dir hit an I/O error): no more I/O on it."""
        with self._lock:
            self._fail(error)

    # -- appends -------------------------------------------------------------------------------------------------

    def append_as_leader(
        self,
        buf: bytes | bytearray | memoryview,
        leader_epoch: int,
        max_batch_size: int | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification: VerificationGuard | None = None,
    ) -> AppendInfo:
        """Validate the producer's batches, assign offsets from the log end offset, stamp ``leader_epoch``, append.

        All batches are validated before anything is written (header.validate_for_append: header, CRC, size <=
        ``max_batch_size`` (default max.message.bytes), at least one offset, and for uncompressed batches a record
        count that agrees with the records, since the broker never decodes them later): an invalid one raises
        CorruptRecordError / RecordTooLargeError and leaves the log as it was. Offsets and epoch live outside the
        CRC, so each batch is written as a new 16-byte prefix plus a view of the rest of the caller's buffer: one
        pwritev, no payload copy.

        Transactions (``origin``): control batches are refused (markers come through ``append_marker``) and a
        transactional batch needs a producer id and epoch (InvalidRecordError). A CLIENT's batches pass the
        sequence checks; a non-transactional batch of a producer whose transaction is open here is refused
        (InvalidTxnStateError). A COORDINATOR's batches are checked for a stale epoch only (no sequence).

        A CLIENT's batch must hold one record per offset of its range (record count = last offset delta + 1), as
        Kafka's LogValidator requires of producers (InvalidRecordError): fewer records would leave offsets that no
        record holds, and the sequence range (base sequence + last offset delta) would not match the records. Only
        the cleaner leaves such gaps, and followers copy them.

        ``verification``, from the produce path (``start_transaction_verification``): a CLIENT's transactional batch
        of a producer with no transaction open here at its epoch is refused (InvalidTxnStateError) unless the guard
        is still the producer's, checked under the lock with the append, so a batch verified before the
        transaction's marker cannot open a transaction after it. None: the appender verified nothing.
        """
        view = memoryview(buf)
        config = self.config
        limit = config.max_message_bytes if max_batch_size is None else max_batch_size
        batches = validate_for_append(buf, view, limit, True)
        size = len(view)
        if size > config.segment_bytes:
            return self._append_in_parts(
                view, batches, lambda part: self.append_as_leader(part, leader_epoch, limit, origin, verification)
            )
        idempotent = batches[0][6] != NO_PRODUCER_ID or (
            len(batches) > 1 and any(b[6] != NO_PRODUCER_ID for b in batches)
        )
        flags = 0
        position = 0
        for batch in batches:
            if batch[4] != batch[2] + 1 and origin is AppendOrigin.CLIENT:
                raise InvalidRecordError(
                    f"batch at byte {position} has {batch[4]} records for {batch[2] + 1} offsets (last offset delta"
                    f" {batch[2]})"
                )
            flags |= view[position + _FLAGS_AT]
            position += batch[1]
        transactional = _check_transactional_flags(view, batches) if flags & _TXN_BITS else False
        with self._lock:
            if self.failure is not None or self._closed:
                self._check_usable()
            if idempotent:
                if origin is AppendOrigin.CLIENT:
                    duplicate = self._check_producer(batches)
                    if duplicate is not None:
                        return duplicate
                    if not transactional and self._producers.ongoing_transaction(batches[0][6]) is not None:
                        raise InvalidTxnStateError(
                            f"producer {batches[0][6]} wrote a non-transactional batch while its transaction is open"
                        )
                    if transactional and verification is not None:
                        self._check_verified(batches[0][6], batches[0][7], verification)
                else:
                    self._check_coordinator_batches(batches)
            info = self._append_locked(view, batches, size, leader_epoch)
            if idempotent:
                self._update_producers(batches, info.first_offset, transactional)
            return info

    def append_marker(
        self,
        committed: bool,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        leader_epoch: int,
        timestamp_ms: int,
    ) -> AppendInfo:
        """Append a COMMIT or ABORT marker (a control batch) for the producer's transaction, as leader.

        Raises InvalidProducerEpochError if ``producer_epoch`` is older than the producer's epoch here, and
        TransactionCoordinatorFencedError if ``coordinator_epoch`` is older than the last one seen for it. The
        marker ends the producer's open transaction (an ABORT adds an aborted-index entry) and its epoch becomes
        the producer's; a marker for a producer with no open transaction (a retry) is appended all the same."""
        marker_type = ControlType.COMMIT if committed else ControlType.ABORT
        buf = build_control_batch(marker_type, producer_id, producer_epoch, coordinator_epoch, timestamp_ms)
        view = memoryview(buf)
        batches = validate_for_append(buf, view, _NO_LIMIT, True)
        with self._lock:
            if self.failure is not None or self._closed:
                self._check_usable()
            self._producers.check_marker(producer_id, producer_epoch, coordinator_epoch)
            info = self._append_locked(view, batches, len(view), leader_epoch)
            txn = self._producers.update(
                producer_id,
                producer_epoch,
                -1,
                -1,
                info.first_offset,
                info.last_offset,
                info.max_timestamp,
                marker=ControlMarker(marker_type, coordinator_epoch),
            )
            if txn is not None:
                self._index_aborted(txn)
            return info

    def _append_locked(self, view: memoryview, batches: list[AppendBatch], size: int, leader_epoch: int) -> AppendInfo:
        """Assign offsets from the log end, stamp ``leader_epoch``, write. Lock held, batches checked."""
        if leader_epoch != self._epochs.latest_epoch:
            self._start_epoch(leader_epoch)
        seg = self._segments[-1]
        first = offset = seg.end_offset()
        iov: list[bytes | memoryview] = []
        max_ts, max_ts_offset, records, position = -1, first, 0, 0
        for _, batch_size, delta, batch_max_ts, count, _, _, _, _ in batches:
            rest = view[position + PREFIX_SIZE : position + batch_size]
            iov += _pack_prefix(offset, batch_size - LOG_OVERHEAD, leader_epoch), rest
            if batch_max_ts > max_ts:
                max_ts, max_ts_offset = batch_max_ts, offset
            records += count
            offset += delta + 1
            position += batch_size
        self._write(seg, iov, size, batches, first, offset - 1, max_ts, records)
        info = (first, offset - 1, max_ts, max_ts_offset, records, len(batches), size, self._log_start)
        return _append_info(info)

    def _check_verified(self, producer_id: int, producer_epoch: int, guard: VerificationGuard) -> None:
        """A transactional batch may open a transaction here only with the producer's current guard: a marker
        written since the guard was handed out ended the transaction it was verified in (Kafka's VerificationGuard
        check). Lock held."""
        producers = self._producers
        if not producers.has_ongoing_transaction(producer_id, producer_epoch) and not producers.verifies(
            producer_id, producer_epoch, guard
        ):
            raise InvalidTxnStateError(
                f"producer {producer_id} epoch {producer_epoch}: the transaction this batch was verified in has"
                " ended here"
            )

    def _check_coordinator_batches(self, batches: list[AppendBatch]) -> None:
        """A coordinator's transactional batches: one producer, an epoch, not older than the producer's."""
        pid, producer_epoch = batches[0][6], batches[0][7]
        if producer_epoch < 0 or any((b[6], b[7]) != (pid, producer_epoch) for b in batches):
            raise InvalidRecordError("coordinator batches need one producer id and epoch")
        entry = self._producers.producers.get(pid)
        if entry is not None and producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(f"producer {pid}: epoch {producer_epoch} is older than {entry.epoch}")

    def _check_producer(self, batches: list[AppendBatch]) -> AppendInfo | None:
        """Validate an idempotent producer's batches against its sequence (producer_state.py); for a retried
        duplicate, the AppendInfo of the original (no records appended: ``batch_count`` 0). Lock held.

        Several batches of one producer may come together if they continue each other's sequence, at most as
        many as the producer state remembers (so a retry of any of them is still recognised). A duplicate must
        come alone: its original offsets are the answer, and batches after it would not follow them."""
        if len(batches) > MAX_RETAINED_BATCHES:
            raise InvalidRecordError(
                f"more than {MAX_RETAINED_BATCHES} idempotent batches of a partition in one request"
            )
        _, _, delta, _, _, _, pid, producer_epoch, seq = batches[0]
        if seq < 0 or producer_epoch < 0:
            raise InvalidRecordError(f"batch of producer {pid} has no sequence number or epoch")
        last = increment_sequence(seq, delta)
        duplicate = self._producers.check(pid, producer_epoch, seq, last)
        if duplicate is not None:
            if len(batches) > 1:
                raise InvalidRecordError("a retried idempotent batch must be sent alone")
            first, end = duplicate.first_offset, duplicate.last_offset
            return _append_info((first, end, duplicate.timestamp, first, 0, 0, 0, self._log_start))
        for _, _, delta, _, _, _, next_pid, next_epoch, next_seq in batches[1:]:
            if (next_pid, next_epoch) != (pid, producer_epoch):
                raise InvalidRecordError("idempotent batches of different producers in one partition's records")
            if next_seq != increment_sequence(last, 1):
                raise OutOfOrderSequenceError(f"producer {pid}: sequence {next_seq} does not follow {last}")
            last = increment_sequence(next_seq, delta)
        return None

    def _update_producers(self, batches: list[AppendBatch], first_offset: int, transactional: bool) -> None:
        """Record appended idempotent batches (offsets assigned from ``first_offset``) in the producer state."""
        update, offset = self._producers.update, first_offset
        for _, _, delta, batch_max_ts, _, _, pid, producer_epoch, seq in batches:
            update(
                pid,
                producer_epoch,
                seq,
                increment_sequence(seq, delta),
                offset,
                offset + delta,
                batch_max_ts,
                is_transactional=transactional,
            )
            offset += delta + 1

    def start_leader_epoch(self, leader_epoch: int) -> None:
        """This replica became leader at ``leader_epoch``: the epoch starts at the log end offset now, before any
        append, so a follower's divergence check against this log sees it."""
        with self._lock:
            self._check_usable()
            if leader_epoch != self._epochs.latest_epoch:
                self._start_epoch(leader_epoch)

    def _start_epoch(self, leader_epoch: int) -> None:
        """The first append of a new leader epoch starts it at the log end offset. Lock held."""
        latest = self._epochs.latest_epoch
        if latest is not None and leader_epoch < latest:
            raise OdradekError(
                f"leader epoch {leader_epoch} is older than the log's {latest}", code=ErrorCode.FENCED_LEADER_EPOCH
            )
        self._epochs.assign(leader_epoch, self.log_end_offset)  # written by _persist_epochs, see epoch_cache.py

    def _persist_epochs(self) -> None:
        """Write the leader epochs assigned since the last write. Lock held; before the recovery point moves."""
        try:
            self._epochs.persist()
        except OSError as e:
            raise self._fail(StorageError(f"{self.dir.name}: leader epoch write failed: {e}")) from e

    def persist_epochs(self) -> None:
        """The log manager's periodic pass: write a new leader epoch this log has not written yet."""
        if not self._epochs.dirty:  # read without the lock: a change it misses is written by the next pass
            return
        with self._lock:
            if self.failure is None and not self._closed:
                self._persist_epochs()

    def _append_in_parts(
        self, view: memoryview, batches: list, append: Callable[[memoryview], AppendInfo]
    ) -> AppendInfo:
        """Append batches that together exceed segment.bytes as runs that each fit in one segment (a follower's
        fetch or a producer's request may carry more than a small segment holds); only a single batch larger
        than a segment is refused. Each run is one ordinary append, so a segment never splits a batch."""
        limit = self.config.segment_bytes
        runs: list[tuple[int, int]] = []
        start = position = 0
        for batch in batches:
            size = batch[1]
            if size > limit:
                raise RecordTooLargeError(f"a {size}-byte batch exceeds segment.bytes {limit}")
            if position + size - start > limit:
                runs.append((start, position))
                start = position
            position += size
        runs.append((start, position))
        infos = [append(view[a:b]) for a, b in runs]
        first, last = infos[0], infos[-1]
        best = max(infos, key=lambda i: i.max_timestamp)
        return _append_info(
            (
                first.first_offset,
                last.last_offset,
                best.max_timestamp,
                best.offset_of_max_timestamp,
                sum(i.record_count for i in infos),
                sum(i.batch_count for i in infos),
                sum(i.size for i in infos),
                last.log_start_offset,
            )
        )

    def append_as_follower(self, buf: bytes | bytearray | memoryview, fetch_offset: int | None = None) -> AppendInfo:
        """Append batches copied from the leader, offsets and epochs as they are.

        Without ``fetch_offset`` the first batch must start exactly at the log end offset and each later one where
        the one before it ends. A compacted leader's log has gaps (its cleaner removed superseded records, and
        whole batches), so its answer to a fetch from ``fetch_offset`` may start later and skip offsets: given
        ``fetch_offset``, which must be the log end offset, batches may start anywhere after the end of what is
        before them. Either way an answer to an older request (sent before a truncation or reset) is refused: it
        would leave a hole a leader could count as replicated. New epochs in the batch headers enter the epoch
        cache.

        One exception, as in Kafka (KAFKA-6975): an empty log (log end = log start) whose log start lies inside the
        first batch, as when a replica restarts at its leader's log start after a DeleteRecords into a batch. The
        leader's reads answer from the batch holding the offset, so the log restarts at that batch's base offset
        and appends it whole; its log start stays where it was, and the records below it stay unreadable.
        """
        view = memoryview(buf)
        batches = validate_for_append(buf, view, _NO_LIMIT, False)
        size = len(view)
        if size > self.config.segment_bytes:
            self._check_fetch_offset(fetch_offset)
            return self._append_in_parts(
                view,
                batches,
                lambda part: self.append_as_follower(part, None if fetch_offset is None else self.log_end_offset),
            )
        first, last = batches[0][0], batches[-1][0] + batches[-1][2]
        if last - first > MAX_RELATIVE_OFFSET:
            raise InvalidRequestError(f"batches span {last - first} offsets, more than a segment can index")
        flags: list[int] = []
        markers: dict[int, ControlMarker | None] = {}  # batch index -> a control batch's marker
        position = 0
        for i, batch in enumerate(batches):
            bits = view[position + _FLAGS_AT] & _TXN_BITS
            flags.append(bits)
            # Only a producer's control batches are transaction markers: the metadata log's Raft control records
            # are control batches without a producer id.
            if bits & CONTROL_FLAG and batch[6] != NO_PRODUCER_ID:
                markers[i] = _marker_of(next(read_batches(view[position : position + batch[1]])).records())
            position += batch[1]
        with self._lock:
            self._check_usable()
            self._check_fetch_offset(fetch_offset)
            start = expected = self.log_end_offset
            restart = start == self._log_start and first < start <= first + batches[0][2]
            if restart:
                expected = first
            max_ts, max_ts_offset, records = -1, first, 0
            for base, _, delta, batch_max_ts, count, _, _, _, _ in batches:
                if base < expected or (base > expected and fetch_offset is None):
                    raise UnexpectedAppendOffsetError(
                        f"{self.dir.name}: batch at offset {base} does not start at the log end offset {expected}"
                        if expected == start
                        else f"{self.dir.name}: batch at offset {base} does not follow offset {expected - 1}"
                    )
                expected = base + delta + 1
                if batch_max_ts > max_ts:
                    max_ts, max_ts_offset = batch_max_ts, base
                records += count
            if restart:
                self.truncate_fully_and_start_at(first)
            for base, _, _, _, _, epoch, _, _, _ in batches:
                latest = self._epochs.latest_epoch
                if epoch > (-1 if latest is None else latest):
                    self._epochs.assign(epoch, base)
            self._write(self._segments[-1], [view], size, batches, None, last, max_ts, records)
            if restart:
                self._log_start = self._hw = start
                self._epochs.truncate_from_start(start)
            update = self._producers.update
            for i, (base, _, delta, batch_max_ts, _, _, pid, producer_epoch, seq) in enumerate(batches):
                if pid == NO_PRODUCER_ID:
                    continue
                marker = None
                if flags[i] & CONTROL_FLAG:
                    marker = markers[i]
                    if marker is None:
                        continue
                txn = update(
                    pid,
                    producer_epoch,
                    seq,
                    increment_sequence(seq, delta),
                    base,
                    base + delta,
                    batch_max_ts,
                    is_transactional=bool(flags[i] & TRANSACTIONAL_FLAG),
                    marker=marker,
                )
                if txn is not None:
                    self._index_aborted(txn)
            info = (first, last, max_ts, max_ts_offset, records, len(batches), size, self._log_start)
            return _append_info(info)

    def _check_fetch_offset(self, fetch_offset: int | None) -> None:
        if fetch_offset is not None and fetch_offset != self.log_end_offset:
            raise UnexpectedAppendOffsetError(
                f"{self.dir.name}: records fetched from offset {fetch_offset}, the log ends at {self.log_end_offset}"
            )

    def _write(
        self,
        seg: LogSegment,
        iov: list,
        size: int,
        batches: list[AppendBatch],
        first: int | None,
        last_offset: int,
        max_ts: int,
        records: int,
    ) -> None:
        """Roll if needed, append to the active segment ``seg``, apply the flush.messages policy. Lock held."""
        config, n = self.config, len(batches)
        oi, ti, rolling = seg.offset_index, seg.time_index, seg.rolling_base_timestamp
        try:
            # Roll a non-empty segment on segment.bytes, a full index, or segment.ms (measured as Kafka does: from
            # the first batch's timestamp to the new batch's when both have one, else by the wall clock from the
            # segment's creation); roll even an empty one when offsets would not fit its 32-bit relative index.
            if (
                seg.size
                and (
                    seg.size + size > config.segment_bytes
                    or oi.entries + n > oi.max_entries
                    or ti.entries + n >= ti.max_entries
                    or (max_ts - rolling if rolling >= 0 and max_ts >= 0 else self._clock() - seg.created_ms)
                    > config.segment_ms
                )
            ) or last_offset - seg.base_offset > MAX_RELATIVE_OFFSET:
                seg = self._roll(batches[0][0] if first is None else first)
            seg.append(iov, size, batches, first)
        except OSError as e:
            raise self._fail(StorageError(f"{self.dir.name}: append failed: {e}")) from e
        self._appended_messages += records
        self._last_append_ms = self._clock()
        if self._appended_messages - self._flushed_messages >= config.flush_messages:
            self.flush()

    def roll_to(self, offset: int) -> None:
        """Move the log end up to ``offset``, with nothing in between: a new, empty active segment starts there.
        A future log that holds every batch of its current log does this when that log's last batches were cleaned
        away (its own active segment, empty, starts at its end). Nothing at or below the log end."""
        with self._lock:
            self._check_usable()
            if offset <= self.log_end_offset:
                return
            try:
                self._roll(offset)
            except OSError as e:
                raise self._fail(StorageError(f"{self.dir.name}: roll failed: {e}")) from e

    def _roll(self, base_offset: int) -> LogSegment:
        """Seal the active segment (fsync: see the recovery rules) and start one at ``base_offset``. Lock held."""
        old = self._segments[-1]
        if not old.size and old.base_offset == base_offset:
            return old
        old.seal()
        self._epochs.persist()  # before the recovery point passes them (an OSError is the caller's roll failure)
        self._sync_segments(self._recovery_point, old.base_offset)
        self._producers.map_end_offset = base_offset
        self._producers.take_snapshot()  # bounds the replay on open to the segments from here
        seg = self._add_segment(base_offset)
        self._recovery_point = max(self._recovery_point, base_offset)
        return seg

    def _add_segment(self, base_offset: int) -> LogSegment:
        seg = LogSegment(self.dir, base_offset, self.config, self._handles, self._lock, self._clock())
        seg.create()
        fsync_dir(self.dir)
        self._segments.append(seg)
        self._bases.append(base_offset)
        return seg

    def _sync_segments(self, from_offset: int, to_offset: int) -> None:
        """fsync the segments holding offsets in [from_offset, to_offset). Lock held."""
        start = max(0, bisect.bisect_right(self._bases, from_offset) - 1)
        for seg in self._segments[start:]:
            if seg.base_offset >= to_offset:
                break
            seg.txn_index.sync()
            fd = seg.dup_fd()
            try:
                durability.fsync(fd)
            finally:
                os.close(fd)

    # -- reads ----------------------------------------------------------------------------------------------------

    @overload
    def read(
        self,
        offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_batch: bool = True,
        as_file: Literal[False] = False,
    ) -> FetchData[Buffered]: ...

    @overload
    def read(
        self,
        offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_batch: bool = True,
        *,
        as_file: Literal[True],
        file_min_bytes: int = 0,
    ) -> FetchData[FileSlice | Buffered]: ...

    @overload
    def read(
        self,
        offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_batch: bool = True,
        as_file: bool = False,
        file_min_bytes: int = 0,
    ) -> FetchData[Buffered | FileSlice]: ...

    def read(
        self,
        offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_batch: bool = True,
        as_file: bool = False,
        file_min_bytes: int = 0,
    ) -> FetchData[Buffered | FileSlice]:
        """Whole batches from the one holding ``offset``, at most ``max_bytes`` (but at least one batch if
        ``min_one_batch``), all ending below ``max_offset`` (the high watermark or last stable offset for
        consumers; None for followers). Reads one segment; the caller reads again from ``next_offset``.

        ``as_file`` answers a FileSlice over the same batches instead of their bytes (see FetchData): its fd is a
        duplicate taken under the lock, so a later handle eviction, retention or cleaning cannot change it. A read
        of fewer than ``file_min_bytes`` is bytes all the same: one pread costs less than the duplicate fd, its
        close and a sendfile of its own.

        Raises OffsetOutOfRangeError outside [log start offset, log end offset].
        """
        with self._lock:
            self._check_usable()
            leo = self.log_end_offset
            if offset < self._log_start or offset > leo:
                raise OffsetOutOfRangeError(f"{self.dir.name}: offset {offset} outside [{self._log_start}, {leo}]")
            upper = leo if max_offset is None else min(max_offset, leo)
            if offset < upper:
                i = bisect.bisect_right(self._bases, offset) - 1
                try:
                    for seg in self._segments[i:]:
                        found = seg.read(offset, max_bytes, max_offset, min_one_batch, as_file, file_min_bytes)
                        if found is not None:
                            data, next_offset = found
                            if data:
                                first = _first_base_offset(data)
                                return FetchData(data, first, next_offset, self._hw, self._log_start, leo)
                            break
                except OSError as e:
                    raise self._fail(StorageError(f"{self.dir.name}: read failed: {e}")) from e
                except CorruptRecordError as e:  # a bad batch length met while walking headers
                    raise self._fail(e) from None
            return FetchData(b"", offset, offset, self._hw, self._log_start, leo)

    def read_for_copy(
        self, offset: int, last_epoch: int | None, max_bytes: int
    ) -> tuple[FetchData[Buffered] | None, tuple[int, int] | None]:
        """What a future copy of this log (the replica moving to another log dir) appends next: from ``offset``, its
        log end, whose batches end in ``last_epoch``, its latest. Checked and read under one lock hold, as a leader
        answers a follower: (data, None), or (None, (epoch, end offset)) when the copy's last epoch ends before
        ``offset`` here (this log was truncated since). Raises OffsetOutOfRangeError outside [log start, log end]."""
        with self._lock:
            self._check_usable()
            if last_epoch is not None:
                epoch, end = self._epochs.end_offset_for(last_epoch, self.log_end_offset)
                if epoch == UNDEFINED_EPOCH:
                    epoch, end = last_epoch, self._log_start
                if epoch != last_epoch or end < offset:
                    return None, (epoch, end)
            return self.read(offset, max_bytes), None

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """The first record from the log start offset on whose timestamp is >= ``timestamp``: its offset, its
        timestamp and its batch's leader epoch (None if there is none), as Kafka's ListOffsets answers.

        Record granularity: the time index and batch headers find the batch, and only that batch is decoded.
        """
        with self._lock:
            self._check_usable()
            try:
                for seg in self._segments:
                    found = seg.find_timestamp(timestamp, self._log_start)
                    if found is not None:
                        return found
            except OSError as e:
                raise self._fail(StorageError(f"{self.dir.name}: read failed: {e}")) from e
            except CorruptRecordError as e:
                raise self._fail(e) from None
            return None

    def max_timestamp_offset(self) -> TimestampOffset | None:
        """The first record from the log start offset on that carries the log's largest timestamp (None if no
        record has one), as Kafka's ListOffsets answers MAX_TIMESTAMP (-3)."""
        with self._lock:
            self._check_usable()
            largest = max((seg.max_timestamp for seg in self._segments), default=-1)
        return self.offset_for_timestamp(largest) if largest >= 0 else None

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetsForLeaderEpoch: see LeaderEpochCache.end_offset_for."""
        with self._lock:
            self._check_usable()
            return self._epochs.end_offset_for(epoch, self.log_end_offset)

    def epoch_entries(self) -> list[tuple[int, int]]:
        with self._lock:
            return [(e.epoch, e.start_offset) for e in self._epochs.entries]

    # -- truncation, log start, retention ------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch whose last offset is >= ``offset`` (follower divergence). Whole batches only, so
        the log end offset becomes the end of the last batch kept (<= ``offset``). True if anything changed."""
        with self._lock:
            self._check_usable()
            if offset < 0:
                raise InvalidRequestError(f"cannot truncate to offset {offset}")
            if offset >= self.log_end_offset:
                # No batch to remove, but an epoch that starts at the end (a leader that never wrote in it) may
                # be what diverges: forget it, or the follower would send it again forever.
                self._epochs.truncate_from_end(offset)
                return False
            self._truncations += 1
            self._note_truncation(offset)
            try:
                if offset < self._bases[0]:
                    self._truncate_fully(offset)
                    return True
                i = bisect.bisect_right(self._bases, offset) - 1
                for seg in reversed(self._segments[i + 1 :]):  # newest first: a crash leaves a valid prefix
                    seg.delete()
                del self._segments[i + 1 :], self._bases[i + 1 :]
                self._segments[i].truncate_to(offset)
            except OSError as e:
                raise self._fail(StorageError(f"{self.dir.name}: truncation failed: {e}")) from e
            except CorruptRecordError as e:
                raise self._fail(e) from None
            leo = self.log_end_offset
            self._epochs.truncate_from_end(leo)
            self._log_start = min(self._log_start, leo)
            self._hw = min(self._hw, leo)
            self._recovery_point = min(self._recovery_point, leo)
            self._producers.truncate(leo)
            self._rebuild_producer_state()
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete everything and restart empty at ``offset`` (a follower far behind the leader's log start)."""
        with self._lock:
            self._check_usable()
            self._truncations += 1
            self._note_truncation(offset)
            try:
                self._truncate_fully(offset)
            except OSError as e:
                raise self._fail(StorageError(f"{self.dir.name}: truncation failed: {e}")) from e

    def _note_truncation(self, offset: int) -> None:
        if self._truncated_to is None or offset < self._truncated_to:
            self._truncated_to = offset

    def take_truncation(self) -> int | None:
        """The lowest offset the log was truncated to since the last call (None: not truncated). The log cleaner
        asks, so what is appended again from there counts as dirty."""
        with self._lock:
            offset, self._truncated_to = self._truncated_to, None
            return offset

    def _truncate_fully(self, offset: int) -> None:
        for seg in reversed(self._segments):
            seg.delete()
        self._segments, self._bases = [], []
        self._add_segment(offset)
        self._epochs.clear()
        self._log_start = self._hw = self._recovery_point = offset
        self._producers.truncate(offset)
        self._producers.load(offset, offset)
        self._producers.map_end_offset = offset

    def increment_log_start_offset(self, offset: int) -> bool:
        """Move the log start offset up (DeleteRecords); segments below it go at the next retention pass."""
        with self._lock:
            self._check_usable()
            if offset > self._hw:
                raise OffsetOutOfRangeError(f"log start offset {offset} above the high watermark {self._hw}")
            if offset <= self._log_start:
                return False
            self._log_start = offset
            self._epochs.truncate_from_start(offset)
            return True

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Delete whole leading segments past retention.ms (by max timestamp) or retention.bytes, or below the
        log start offset; never the active segment nor one with offsets at or above the high watermark.
        Advances the log start offset; returns the number of segments deleted."""
        with self._lock:
            self._check_usable()
            now = self._clock() if now_ms is None else now_ms
            retention_ms, retention_bytes = self.config.retention_ms, self.config.retention_bytes
            total = self.size_in_bytes
            deleted = 0
            try:
                while len(self._segments) > 1 and self._bases[1] <= self._hw:
                    seg = self._segments[0]
                    if not (
                        self._bases[1] <= self._log_start
                        or (retention_bytes >= 0 and total - seg.size >= retention_bytes)
                        or (retention_ms >= 0 and now - self._largest_timestamp(seg) > retention_ms)
                    ):
                        break
                    seg.delete()
                    del self._segments[0], self._bases[0]
                    total -= seg.size
                    deleted += 1
                    self._log_start = max(self._log_start, self._bases[0])
            except OSError as e:
                raise self._fail(StorageError(f"{self.dir.name}: retention failed: {e}")) from e
            if deleted:
                self._epochs.truncate_from_start(self._log_start)
                self._producers.delete_snapshots_below(self._log_start)
            self._producers.remove_expired(now)
            return deleted

    @staticmethod
    def _largest_timestamp(seg: LogSegment) -> int:
        return seg.max_timestamp if seg.max_timestamp >= 0 else seg.last_modified_ms()

    # -- compaction (the log cleaner runs in its own thread: broker/log/cleaner/) -----------------------------------

    def compaction_view(self) -> CompactionView:
        """The sealed segments (the cleaner only ever reads and replaces these) and the offsets, under the lock."""
        with self._lock:
            self._check_usable()
            try:
                sealed = []
                for seg in self._segments[:-1]:
                    sealed.append(
                        SegmentStat(
                            seg,
                            seg.base_offset,
                            seg.end_offset(),
                            seg.size,
                            self._largest_timestamp(seg),
                            seg.first_batch_timestamp(),
                            seg.offset_index.entries,
                            seg.log_path,
                        )
                    )
            except OSError as e:
                raise self._fail(StorageError(f"{self.dir.name}: read failed: {e}")) from e
            active = self._segments[-1]
            return CompactionView(
                sealed,
                active.base_offset,
                active.end_offset(),
                active.size,
                self._log_start,
                self._hw,
                self._truncations,
                self._producers.first_unstable_offset,
            )

    def producer_last_offsets(self) -> dict[int, int]:
        """Producer id -> last offset of its last batch: the cleaner keeps those batches, so an idempotent producer
        whose earlier batches were cleaned away still finds its sequence here after a restart."""
        with self._lock:
            self._check_usable()
            return {pid: entry.last_offset for pid, entry in self._producers.producers.items()}

    def producer_protected_offsets(self) -> set[int]:
        """The last offsets of each producer's last data batch and last marker: the cleaner keeps those batches
        whole, so a restarted broker still finds each producer's sequence, epoch and coordinator epoch."""
        with self._lock:
            self._check_usable()
            offsets = set()
            for entry in self._producers.producers.values():
                offsets.add(entry.last_data_offset)
                offsets.add(entry.marker_offset)
            offsets.discard(-1)
            return offsets

    def moved_since(self, view: CompactionView) -> bool:
        """True if the log was closed or truncated, or lost a sealed segment of ``view`` (retention, DeleteRecords)
        since the view was taken: a cleaning pass that failed reading it is redone, the log is not uncleanable."""
        with self._lock:
            if self._closed or view.generation != self._truncations:
                return True
            live = {id(seg) for seg in self._segments}
            return any(id(s.segment) not in live for s in view.sealed)

    def replace_segments(
        self,
        view: CompactionView,
        old: list[SegmentStat],
        end: int,
        step: Callable[[str], None] | None = None,
        still_valid: Callable[[], bool] | None = None,
    ) -> bool:
        """Swap the cleaned segment written at ``old[0].base_offset`` (swap.py's ``.cleaned`` files) in for the
        consecutive sealed segments ``old``, whose base offsets are below ``end``. False, changing nothing, if the
        log moved on since ``view`` (truncated, or those segments deleted by retention) or ``still_valid`` says
        no, asked under the lock so that no read comes between it and the swap: the caller discards its files.
        Reads and appends wait only for the renames and unlinks, not for the cleaned data's fsync."""
        base = old[0].base_offset
        with self._lock:
            self._check_usable()
            if view.generation != self._truncations or (still_valid is not None and not still_valid()):
                return False
            try:
                i = self._segments.index(old[0].segment)
            except ValueError:
                return False
            j = i + len(old)
            if j >= len(self._segments) or [s.segment for s in old] != self._segments[i:j]:
                return False
            try:
                commit_swap(self.dir, base, end, [s.segment for s in old], step)
                seg = LogSegment(self.dir, base, self.config, self._handles, self._lock, self._clock())
                if not seg.load():  # the cleaner writes both indexes: this is a bug, not a crash
                    raise CorruptRecordError(f"{seg.log_path}: the cleaned segment's indexes do not match it")
            except OSError as e:
                raise self._fail(StorageError(f"{self.dir.name}: segment swap failed: {e}")) from e
            except CorruptRecordError as e:
                raise self._fail(e) from None
            self._segments[i:j] = [seg]
            self._bases[i:j] = [base]
            try:
                self._producers.remove_stray_snapshots(self._bases)
            except OSError as e:
                raise self._fail(StorageError(f"{self.dir.name}: deleting producer snapshots failed: {e}")) from e
            return True

    # -- durability and shutdown --------------------------------------------------------------------------------

    def flush(self, up_to: int | None = None) -> None:
        """fsync everything below ``up_to`` (default: the log end offset) and advance the recovery point.

        The fsyncs run on duplicated fds without the lock, so appends and reads continue meanwhile."""
        with self._lock:
            self._check_usable()
            self._persist_epochs()  # before the recovery point passes them
            leo = self.log_end_offset
            target = leo if up_to is None else min(up_to, leo)
            if target <= self._recovery_point:
                return
            start = max(0, bisect.bisect_right(self._bases, self._recovery_point) - 1)
            fds: list[int] = []
            try:
                for seg in self._segments[start:]:
                    if seg.base_offset < target:
                        seg.txn_index.sync()  # rare (only after an abort), so under the lock
                fds.extend(seg.dup_fd() for seg in self._segments[start:] if seg.base_offset < target)
            except OSError as e:
                for fd in fds:
                    os.close(fd)
                raise self._fail(StorageError(f"{self.dir.name}: flush failed: {e}")) from e
            generation, appended = self._truncations, self._appended_messages
        try:
            for fd in fds:
                durability.fsync(fd)
        except OSError as e:
            with self._lock:
                raise self._fail(StorageError(f"{self.dir.name}: fsync failed: {e}")) from e
        finally:
            for fd in fds:
                os.close(fd)
        with self._lock:
            if self._truncations == generation:
                self._recovery_point = max(self._recovery_point, target)
            self._flushed_messages = max(self._flushed_messages, appended)
            self._last_flush_ms = self._clock()

    def flush_if_due(self, now_ms: int) -> bool:
        """Apply the flush.ms policy; True if it flushed. The log manager asks every log each second: one not due
        answers without taking its lock (the last flush time only moves forward, so a stale read is an earlier
        time, and the check under the lock decides)."""
        if now_ms - self._last_flush_ms < self.config.flush_ms:
            return False
        with self._lock:
            if self.failure is not None or self._closed or now_ms - self._last_flush_ms < self.config.flush_ms:
                return False
            if self._appended_messages == self._flushed_messages and self.log_end_offset <= self._recovery_point:
                return False
        self.flush()
        return True

    def flush_if_idle(self, idle_ms: int) -> bool:
        """Flush what is not yet durable once nothing was appended for ``idle_ms``; True if it flushed. A compacted
        log's replicas call it: the tombstone horizon waits for every replica's fsync, which an idle log would
        otherwise get only at its next segment roll, and a follower's roll may never come once writes stop."""
        with self._lock:
            if self.failure is not None or self._closed or self._clock() - self._last_append_ms < idle_ms:
                return False
            if self.log_end_offset <= self._recovery_point:
                return False
        self.flush()
        return True

    def close(self) -> None:
        """Flush and seal the active segment (final index entries, trimmed index files) and release all handles."""
        with self._lock:
            if self._closed:
                return
            try:
                if self.failure is None:
                    self._segments[-1].seal()
                    self._epochs.persist()
                    self._sync_segments(self._recovery_point, self._bases[-1])
                    self._recovery_point = self.log_end_offset
                    self._producers.map_end_offset = self._recovery_point
                    self._producers.take_snapshot()  # a clean restart replays nothing
            except OSError as e:
                self._fail(StorageError(f"{self.dir.name}: close failed: {e}"))
            finally:
                self._closed = True
                for seg in self._segments:
                    with contextlib.suppress(OSError):
                        seg.close()


def _check_transactional_flags(view: memoryview, batches: list[AppendBatch]) -> bool:
    """Refuse control batches from appenders (markers come through ``Log.append_marker``), transactional batches
    without a producer id, and requests mixing transactional and other batches. True if the batches are
    transactional."""
    position = 0
    kinds = set()
    for batch in batches:
        bits = view[position + _FLAGS_AT] & _TXN_BITS
        if bits & CONTROL_FLAG:
            raise InvalidRecordError("control batches are written by the transaction coordinator only")
        if bits and batch[6] == NO_PRODUCER_ID:
            raise InvalidRecordError("a transactional batch needs a producer id")
        kinds.add(bits)
        position += batch[1]
    if len(kinds) > 1:
        raise InvalidRecordError("transactional and non-transactional batches in one partition's records")
    return bool(kinds.pop())


def _marker_of(records: list) -> ControlMarker | None:
    """The marker in a control batch's records; None for a control batch without records."""
    return parse_control_record(records[0]) if records else None
