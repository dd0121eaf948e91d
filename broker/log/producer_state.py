"""Per-partition producer state for the idempotent and transactional producer (Kafka's ProducerStateManager).

For each producer id the partition keeps the producer epoch and the sequence and offset ranges of its last
MAX_RETAINED_BATCHES batches. The leader ``check``s a client batch against it before appending: a retry of one of
those batches is a duplicate, acknowledged with its original offsets and not appended again (a producer has at most
one request of that many batches per partition in flight, so a retry can only be one of them); otherwise the batch
must continue the producer's sequence, or start at 0 in a new epoch, and an older epoch is fenced. Every replica
``update``s the state after each append of a batch with a producer id, so a new leader already has it.

Transactions: a transactional data batch opens the producer's transaction on this partition (its first offset is
kept) unless one is open; a control batch (a COMMIT or ABORT marker) closes it and yields a ``CompletedTxn``, which
the log turns into an aborted-index entry for an ABORT, and which stays *unreplicated* until the high watermark
passes its marker (``on_high_watermark``). The first unstable offset is the lowest first offset among open and
unreplicated transactions: below it every transaction is decided and replicated. A marker's producer epoch becomes
the producer's (the coordinator bumps the epoch at every transaction end), and its coordinator epoch is kept so an
older coordinator's marker can be fenced. A leader's ``VerificationGuard``s (KIP-890) are the one part not derived
from the log: in memory only, each dropped by its producer's next transactional batch or marker.

The state is derived from the log: ``update`` for each batch in order rebuilds it. Snapshots bound that replay.
``take_snapshot`` writes the whole state, named by ``map_end_offset``; on open and after a truncation the caller
(the Log) does::

    start = state.load(log_start_offset, log_end_offset)   # latest usable snapshot, or nothing
    for batch in the log's batches from the one holding ``start`` to its end:
        if batch.producer_id != NO_PRODUCER_ID:
            state.update(...)
    state.map_end_offset = log_end_offset

Snapshot file ``<offset as 20 digits>.snapshot`` in the partition directory, big-endian::

    0   2  version (2; version 1 files still load)
    2   4  CRC32C of every byte after this field
    6   8  offset (the file name's, repeated so a misnamed file is caught)
    14  4  producer count
    then per producer:  8 producer id, 2 epoch, 8 last timestamp,
                        4 coordinator epoch, 8 open transaction's first offset, 8 last marker offset   (v2 only)
                        1 batch count (1..MAX_RETAINED_BATCHES; v2: 0.. when only a marker is known)
    then per batch:     4 first sequence, 4 last sequence, 8 first offset, 8 last offset, 8 timestamp
    v2 then:            4 count of unreplicated completed transactions,
                        each 8 producer id, 8 first offset, 8 marker offset, 1 aborted (0/1)

The offsets are -1 when absent (no open transaction, no marker seen).

All retained batches are kept (Kafka's snapshot keeps only the last), so duplicate detection survives a restart. A
snapshot that fails any check (torn, bit-flipped, unknown version) is deleted and an older one used: a snapshot is
only a cache of the log, so losing one costs replay time, never data.

Not thread-safe: the owning Log's lock guards it. File errors (OSError) propagate to the caller.
"""

from __future__ import annotations

import bisect
import logging
import struct
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

from crc32c import crc32c

from odradek.broker.log.checkpoint import fsync_dir, write_atomic
from odradek.client.errors import (
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from odradek.client.record.control import ControlMarker, ControlType

logger = logging.getLogger(__name__)

# Kafka keeps 5 (its idempotent producer has at most 5 requests in flight, one batch per partition each); odradek's
# producer has one request in flight per partition carrying up to this many of its batches (IDEMPOTENT_BATCHES in
# client/producer/accumulator.py), so a retry of any of them is recognised.
MAX_RETAINED_BATCHES = 8
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 2
_OFFSET_DIGITS = 20
NO_OFFSET = -1
NO_COORDINATOR_EPOCH = -1

_VERSION_CRC = struct.Struct(">hI")
_BODY_HEAD = struct.Struct(">qi")  # offset, producer count
_ENTRY_V1 = struct.Struct(">qhqB")  # producer id, epoch, last timestamp, batch count
_ENTRY = struct.Struct(">qhqiqqB")  # v2: ... coordinator epoch, txn first offset, marker offset, batch count
_BATCH = struct.Struct(">iiqqq")  # first seq, last seq, first offset, last offset, timestamp
_COUNT = struct.Struct(">i")
_TXN = struct.Struct(">qqq?")  # producer id, first offset, marker offset, aborted


class _CorruptSnapshot(Exception):
    pass


def snapshot_name(offset: int) -> str:
    """The file name of the producer snapshot at ``offset``."""
    return f"{offset:0{_OFFSET_DIGITS}d}{SNAPSHOT_SUFFIX}"


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequence numbers are non-negative int32s that wrap to 0 after 2**31 - 1, as in Kafka."""
    return (sequence + increment) & 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One appended batch: its sequence range (``last_seq = first_seq + record count - 1``, wrapping) and offsets."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class VerificationGuard:
    """What a leader holds while it asks a producer's coordinator whether the partition is in the producer's ongoing
    transaction (KIP-890). The append that follows presents it, and passes only while it is still the producer's
    guard: the producer's next marker or transactional append drops it, so a "yes" answered before the marker can
    never open a transaction after it. Compared by identity, so a later verification never revives an earlier one."""

    __slots__ = ("created_ms", "epoch")

    def __init__(self, epoch: int, created_ms: int) -> None:
        self.epoch = epoch
        self.created_ms = created_ms


NO_VERIFICATION = VerificationGuard(-1, -1)
"""Presented for a batch whose transaction the leader found open, so it asked no coordinator: verifies nothing,
so the batch is refused if the transaction has ended by the time it is appended."""


class CompletedTxn(NamedTuple):
    """A transaction a marker ended: its first offset and the marker's offset (``last_offset``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(slots=True)
class ProducerEntry:
    """A producer's current epoch, its last MAX_RETAINED_BATCHES data batches (oldest first; none when only a
    marker of the current epoch is known), the coordinator epoch of its last marker, the first offset of its open
    transaction on this partition (None: none open) and the offset of its last marker (-1: none)."""

    producer_id: int
    epoch: int
    batches: deque[BatchMetadata]
    last_timestamp: int
    coordinator_epoch: int = NO_COORDINATOR_EPOCH
    txn_first_offset: int | None = None
    marker_offset: int = NO_OFFSET

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else NO_OFFSET

    @property
    def last_offset(self) -> int:
        """The offset of the producer's last batch, data or marker."""
        return max(self.last_data_offset, self.marker_offset)


class ProducerStateManager:
    """The producer state of one partition replica, plus its snapshot files in ``directory``.

    ``expiration_ms`` is Kafka's ``producer.id.expiration.ms``: how long a silent producer's state is kept.
    """

    def __init__(self, directory: Path, expiration_ms: int = 86_400_000) -> None:
        self.directory = directory
        self.expiration_ms = expiration_ms
        self._producers: dict[int, ProducerEntry] = {}
        self._map_end_offset = 0
        self._ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self._unreplicated: dict[int, CompletedTxn] = {}  # marker offset -> transaction, marker not below the HW
        self._verifications: dict[int, VerificationGuard] = {}  # producer id -> guard of a verification under way

    def __len__(self) -> int:
        return len(self._producers)

    @property
    def producers(self) -> Mapping[int, ProducerEntry]:
        """A read-only view by producer id (the entries are live: do not mutate them)."""
        return MappingProxyType(self._producers)

    @property
    def map_end_offset(self) -> int:
        """The log offset below which every batch has been applied; the next snapshot is named by it.

        ``update`` advances it past each producer batch; the Log sets it to its log end offset after batches without
        a producer id and after replay, so that snapshots are named by the log end."""
        return self._map_end_offset

    @map_end_offset.setter
    def map_end_offset(self, offset: int) -> None:
        self._map_end_offset = offset

    # -- the data path ---------------------------------------------------------------------------------------------

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """Validate a client batch before the leader appends it; the state is not changed.

        Returns the retained batch it duplicates (same epoch and sequence range), which the caller acknowledges
        with that batch's offsets instead of appending, or None for a new, valid batch. Raises
        InvalidProducerEpochError for an epoch older than the producer's, and OutOfOrderSequenceError for a new
        epoch not starting at sequence 0 or a same-epoch batch that does not follow the last one. A producer with
        no state (new, expired, or truncated away) may start at any sequence (KIP-360): the broker cannot tell a
        gap from a producer whose earlier batches it no longer remembers.
        """
        entry = self._producers.get(producer_id)
        if entry is None:
            return None
        if epoch == entry.epoch:
            if not entry.batches:  # only a marker is known in this epoch: no sequence to continue (KIP-360)
                return None
            for batch in entry.batches:
                if batch.first_seq == first_seq and batch.last_seq == last_seq:
                    return batch
            expected = increment_sequence(entry.last_seq, 1)
            if first_seq != expected:
                raise OutOfOrderSequenceError(
                    f"producer {producer_id} epoch {epoch}: sequence {first_seq}, expected {expected}"
                )
        elif epoch < entry.epoch:
            raise InvalidProducerEpochError(f"producer {producer_id}: epoch {epoch} is older than {entry.epoch}")
        elif first_seq != 0:
            raise OutOfOrderSequenceError(
                f"producer {producer_id}: new epoch {epoch} must start at sequence 0, not {first_seq}"
            )
        return None

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """Validate a transaction marker before the leader appends it: InvalidProducerEpochError for an epoch older
        than the producer's, TransactionCoordinatorFencedError for a coordinator epoch older than the last seen."""
        entry = self._producers.get(producer_id)
        if entry is None:
            return
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(f"producer {producer_id}: marker epoch {epoch} is older than {entry.epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"producer {producer_id}: coordinator epoch {coordinator_epoch} is older than {entry.coordinator_epoch}"
            )

    def has_ongoing_transaction(self, producer_id: int, epoch: int) -> bool:
        entry = self._producers.get(producer_id)
        return entry is not None and entry.epoch == epoch and entry.txn_first_offset is not None

    def ongoing_transaction(self, producer_id: int) -> int | None:
        """The first offset of the producer's open transaction here, None if none."""
        return self._ongoing.get(producer_id)

    def start_verification(self, producer_id: int, epoch: int, now_ms: int) -> VerificationGuard:
        """The guard of a verification of the producer's transaction at ``epoch``: the one under way at that epoch
        (concurrent requests of a producer share it), else a new one."""
        guard = self._verifications.get(producer_id)
        if guard is None or guard.epoch != epoch:
            guard = self._verifications[producer_id] = VerificationGuard(epoch, now_ms)
        return guard

    def verifies(self, producer_id: int, epoch: int, guard: VerificationGuard) -> bool:
        """True if ``guard`` is still the producer's guard at ``epoch``: no marker or transactional batch of the
        producer was appended since it was handed out."""
        return self._verifications.get(producer_id) is guard and guard.epoch == epoch

    def update(
        self,
        producer_id: int,
        epoch: int,
        first_seq: int,
        last_seq: int,
        first_offset: int,
        last_offset: int,
        timestamp: int,
        *,
        is_transactional: bool = False,
        marker: ControlMarker | None = None,
    ) -> CompletedTxn | None:
        """Record a batch the log has appended (leader, follower and replay alike; no validation: the log is the
        truth). Any epoch other than the producer's current one replaces it and forgets the retained batches, whose
        sequences belong to the old epoch. ``timestamp`` is the batch's max timestamp, which drives expiry.

        A transactional data batch opens the producer's transaction if none is open. ``marker`` (a control batch's
        COMMIT/ABORT) closes it: the result is the completed transaction, None if none was open (a retried marker).
        Either drops the producer's verification guard: the transaction is now open here, or over.
        """
        if marker is not None or is_transactional:
            self._verifications.pop(producer_id, None)
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = ProducerEntry(
                producer_id, epoch, deque(maxlen=MAX_RETAINED_BATCHES), timestamp
            )
        elif epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.last_timestamp = timestamp
        self._map_end_offset = last_offset + 1
        if marker is not None:
            entry.coordinator_epoch = marker.coordinator_epoch
            entry.marker_offset = last_offset
            first = entry.txn_first_offset
            if first is None:
                return None
            entry.txn_first_offset = None
            del self._ongoing[producer_id]
            txn = CompletedTxn(producer_id, first, last_offset, marker.type == ControlType.ABORT)
            self._unreplicated[last_offset] = txn
            return txn
        if first_seq < 0:  # a coordinator's own transactional append: no sequence
            first_seq = last_seq = -1
        entry.batches.append(BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp))
        if is_transactional and entry.txn_first_offset is None:
            entry.txn_first_offset = first_offset
            self._ongoing[producer_id] = first_offset
        return None

    def last_stable_offset_after(self, txn: CompletedTxn) -> int:
        """The offset below which no transaction is open once ``txn`` completed (the aborted index stores it, so
        a search can stop early): the first offset of the oldest other open transaction, else after the marker."""
        return min(self._ongoing.values(), default=txn.last_offset + 1)

    def on_high_watermark(self, high_watermark: int) -> None:
        """Completed transactions whose marker is now below the high watermark no longer hold back the LSO."""
        if self._unreplicated:
            for offset in [o for o in self._unreplicated if o < high_watermark]:
                del self._unreplicated[offset]

    @property
    def first_unstable_offset(self) -> int | None:
        """The lowest first offset of an open transaction or of a completed one whose marker is not yet below the
        high watermark; None if there is none."""
        first = min(self._ongoing.values(), default=None)
        for txn in self._unreplicated.values():
            if first is None or txn.first_offset < first:
                first = txn.first_offset
        return first

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers silent for ``expiration_ms`` or more (Kafka's rule); return how many were removed.

        Without this the state of every producer that ever wrote would live forever. A producer that comes back
        is unknown and may continue from any sequence. A producer with an open transaction is kept (as Kafka does):
        its transaction still holds back the last stable offset. Verification guards as old are dropped too: their
        batch never came."""
        expired = [
            pid
            for pid, e in self._producers.items()
            if e.txn_first_offset is None and now_ms - e.last_timestamp >= self.expiration_ms
        ]
        for pid in expired:
            del self._producers[pid]
        for pid in [p for p, g in self._verifications.items() if now_ms - g.created_ms >= self.expiration_ms]:
            del self._verifications[pid]
        return len(expired)

    # -- snapshots -------------------------------------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files in the directory, ascending."""
        offsets = []
        for path in self.directory.iterdir():
            stem = path.name[: -len(SNAPSHOT_SUFFIX)]
            if path.name.endswith(SNAPSHOT_SUFFIX) and len(stem) == _OFFSET_DIGITS and stem.isdigit():
                offsets.append(int(stem))
        return sorted(offsets)

    def take_snapshot(self) -> Path:
        """Write the whole state as the snapshot at ``map_end_offset`` (atomically, replacing one there)."""
        path = self._path(self._map_end_offset)
        write_atomic(path, self._encode())
        return path

    def load(self, log_start_offset: int, log_end_offset: int, max_snapshot_offset: int | None = None) -> int:
        """Replace the in-memory state with the latest valid snapshot at or below ``log_end_offset`` (and
        ``max_snapshot_offset``, when the caller must replay from there: recovery rebuilt the aborted indexes of the
        segments from that offset on); return the offset the caller replays batches from (see the module
        docstring), also the new ``map_end_offset``.

        Snapshots above the log end describe batches the log no longer has and are deleted, as are corrupt ones.
        Producers whose batches all lie below ``log_start_offset`` are dropped: retention removed their data. The
        replay starts at the snapshot's offset, or at the log start if there is no snapshot or it lies below; from
        the log start it includes the batch holding it, which may begin below it (DeleteRecords moves the log start
        inside a batch, and that batch may hold an open transaction)."""
        offsets = self.snapshot_offsets()
        keep = bisect.bisect_right(offsets, log_end_offset)
        doomed = offsets[keep:]
        usable = offsets[:keep]
        if max_snapshot_offset is not None:
            usable = usable[: bisect.bisect_right(usable, max_snapshot_offset)]
        producers: dict[int, ProducerEntry] = {}
        unreplicated: list[CompletedTxn] = []
        snapshot_offset = log_start_offset
        for offset in reversed(usable):
            try:
                producers, unreplicated = self._decode(offset, self._path(offset).read_bytes())
            except _CorruptSnapshot as e:
                logger.warning("%s: ignoring corrupt producer snapshot (%s)", self._path(offset), e)
                doomed.append(offset)
                continue
            snapshot_offset = offset
            break
        self._delete(doomed)
        self._producers = {pid: e for pid, e in producers.items() if e.last_offset >= log_start_offset}
        self._ongoing = {
            pid: e.txn_first_offset for pid, e in self._producers.items() if e.txn_first_offset is not None
        }
        self._unreplicated = {t.last_offset: t for t in unreplicated if t.last_offset >= log_start_offset}
        self._map_end_offset = max(snapshot_offset, log_start_offset)
        return self._map_end_offset

    def truncate(self, offset: int) -> None:
        """The log was truncated to ``offset``: delete the snapshots above it and clear the in-memory state, which
        may hold batches that are gone. The caller must then ``load`` and replay (module docstring) before using
        the state. Until then it is empty with ``map_end_offset`` 0, which is true of any log."""
        self._delete([o for o in self.snapshot_offsets() if o > offset])
        self._producers = {}
        self._ongoing = {}
        self._unreplicated = {}
        self._verifications = {}
        self._map_end_offset = 0

    def delete_snapshots_below(self, offset: int) -> None:
        """Retention moved the log start to ``offset``: delete older snapshots but the newest at or below it, which
        a load would still start from."""
        offsets = self.snapshot_offsets()
        self._delete(offsets[: max(bisect.bisect_right(offsets, offset) - 1, 0)])

    def remove_stray_snapshots(self, segment_bases: Sequence[int]) -> None:
        """Compaction merged segments: keep the snapshots at the remaining segments' base offsets and the newest
        (a clean shutdown's, at the log end), delete the rest. A load or a truncation replays from the nearest
        kept snapshot below its offset, so the deleted ones only saved replay within a merged segment; without
        this every roll's snapshot outlived the segments it bounded, one file per roll forever."""
        offsets = self.snapshot_offsets()
        bases = set(segment_bases)
        self._delete([o for o in offsets[:-1] if o not in bases])

    def _path(self, offset: int) -> Path:
        return self.directory / snapshot_name(offset)

    def _delete(self, offsets: list[int]) -> None:
        """Delete snapshots durably: one reappearing after a crash could describe batches a truncation removed."""
        for offset in offsets:
            self._path(offset).unlink(missing_ok=True)
        if offsets:
            fsync_dir(self.directory)

    def _encode(self) -> bytes:
        parts = [_BODY_HEAD.pack(self._map_end_offset, len(self._producers))]
        for e in self._producers.values():
            txn_first = NO_OFFSET if e.txn_first_offset is None else e.txn_first_offset
            parts.append(
                _ENTRY.pack(
                    e.producer_id,
                    e.epoch,
                    e.last_timestamp,
                    e.coordinator_epoch,
                    txn_first,
                    e.marker_offset,
                    len(e.batches),
                )
            )
            parts.extend(
                _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp) for b in e.batches
            )
        parts.append(_COUNT.pack(len(self._unreplicated)))
        parts.extend(_TXN.pack(*t) for t in self._unreplicated.values())
        body = b"".join(parts)
        return _VERSION_CRC.pack(SNAPSHOT_VERSION, crc32c(body)) + body

    @staticmethod
    def _decode(offset: int, data: bytes) -> tuple[dict[int, ProducerEntry], list[CompletedTxn]]:
        """The producers and unreplicated transactions of a version 1 or 2 snapshot."""
        try:
            version, crc = _VERSION_CRC.unpack_from(data)
            if version not in (1, 2):
                raise _CorruptSnapshot(f"unknown version {version}")
            view = memoryview(data)[_VERSION_CRC.size :]
            if crc32c(view) != crc:
                raise _CorruptSnapshot("CRC mismatch")
            stored_offset, count = _BODY_HEAD.unpack_from(view)
            if stored_offset != offset:
                raise _CorruptSnapshot(f"holds offset {stored_offset}")
            position = _BODY_HEAD.size
            producers: dict[int, ProducerEntry] = {}
            for _ in range(count):
                if version == 1:
                    pid, epoch, last_timestamp, n = _ENTRY_V1.unpack_from(view, position)
                    coordinator_epoch, txn_first, marker_offset = NO_COORDINATOR_EPOCH, NO_OFFSET, NO_OFFSET
                    position += _ENTRY_V1.size
                    least = 1
                else:
                    pid, epoch, last_timestamp, coordinator_epoch, txn_first, marker_offset, n = _ENTRY.unpack_from(
                        view, position
                    )
                    position += _ENTRY.size
                    least = 0 if marker_offset >= 0 or txn_first >= 0 else 1
                if not least <= n <= MAX_RETAINED_BATCHES:
                    raise _CorruptSnapshot(f"producer {pid} with {n} batches")
                batches = deque(
                    (BatchMetadata(*_BATCH.unpack_from(view, position + i * _BATCH.size)) for i in range(n)),
                    maxlen=MAX_RETAINED_BATCHES,
                )
                position += n * _BATCH.size
                producers[pid] = ProducerEntry(
                    pid,
                    epoch,
                    batches,
                    last_timestamp,
                    coordinator_epoch,
                    None if txn_first < 0 else txn_first,
                    marker_offset,
                )
            unreplicated: list[CompletedTxn] = []
            if version >= 2:
                (n,) = _COUNT.unpack_from(view, position)
                position += _COUNT.size
                if n < 0:
                    raise _CorruptSnapshot(f"{n} unreplicated transactions")
                for _ in range(n):
                    unreplicated.append(CompletedTxn(*_TXN.unpack_from(view, position)))
                    position += _TXN.size
        except struct.error as e:
            raise _CorruptSnapshot(f"truncated ({e})") from None
        if position != len(view):
            raise _CorruptSnapshot(f"{len(view) - position} trailing bytes")
        return producers, unreplicated
