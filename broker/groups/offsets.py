"""The committed offsets of one ``__consumer_offsets`` partition: the materialised view of its commit records.

Sans-I/O: the coordinator shell asks for the records of a commit, a deletion or an expiry, appends them (acks=all)
and reports the outcome with ``on_appended`` or ``on_append_failed``. Readers see only acknowledged records, so a
commit whose append fails, or is never acknowledged before the coordinator moves, was never visible: nothing is
rolled back because nothing moved early. When the coordinator loads the partition it rebuilds this view with
``replay`` over the log (later records win; a tombstone deletes).

Rules, as Kafka's offset manager keeps them:

- A commit's metadata longer than ``offset.metadata.max.bytes`` (UTF-8 bytes) fails that partition with
  OFFSET_METADATA_TOO_LARGE; the request's other partitions still commit.
- ``commit_timestamp`` is the coordinator's clock when it accepted the commit.
- Retention (KIP-211): the offsets of a group with members never expire; those of an empty group expire
  ``offsets.retention.minutes`` after the group became empty; those of a standalone consumer (``assign`` users that
  commit without ever joining: no membership) expire that long after their own commit. A record written with an
  explicit expire timestamp (version 1, before KIP-211) expires at that time once the group has no members.
  A partition with a commit in flight is not expired, so the expiry cannot overtake a newer commit.
- The partitions of a deleted topic lose their offsets in every group at once (Kafka's onPartitionsDeleted), so a
  topic created again under that name starts without them.

Acknowledgements must be reported in append order (the order the shell appended them, which is the order the high
watermark passes them); pending appends are kept per append id.

Transactional commits (TxnOffsetCommit) are appended as a transactional batch of the producer. Once acknowledged
they wait, per producer id, for their transaction's marker in the offsets partition: COMMIT makes them committed
offsets, ABORT drops them. A committed transactional offset takes its place by the position of its own record in
the log, as Kafka does: a plain commit appended after it (even before the marker) wins. That is the order
compaction of the offsets topic keeps (the last record of a key), so a coordinator loading a compacted log agrees
with the one that served it. A tombstone drops the pending transactional offsets of its key as well. While a
partition has pending transactional offsets, ``has_pending_txn`` says so (OffsetFetch with require_stable), and
retention leaves it alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from odradek.broker.groups.records import (
    MAX_STRING_BYTES,
    NO_LEADER_EPOCH,
    NO_TIMESTAMP,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordKey,
    RecordValue,
)
from odradek.client.errors import ConfigError, ErrorCode
from odradek.client.structs import TopicPartition

DEFAULT_OFFSET_METADATA_MAX_BYTES = 4096
DEFAULT_OFFSETS_RETENTION_MS = 7 * 24 * 60 * 60 * 1000
NO_PRODUCER_ID = -1
# What ``group_empty_since`` answers for a group that has no membership at all (a standalone consumer's, or an
# empty group whose emptying time is unknown): its offsets expire by their own commit timestamps.
USE_COMMIT_TIMESTAMP = -1
# What ``fetch`` answers for a partition without a committed offset, as Kafka's OffsetFetch does.
NO_OFFSET = OffsetCommitValue(offset=-1, metadata="", commit_timestamp=NO_TIMESTAMP, leader_epoch=NO_LEADER_EPOCH)

OffsetRecord = tuple[OffsetCommitKey, OffsetCommitValue | None]


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """One partition's offset in a commit request."""

    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""


@dataclass(frozen=True, slots=True)
class Append:
    """Records for the shell to append to the offsets partition, and the id to report the outcome with."""

    append_id: int
    records: tuple[OffsetRecord, ...]
    producer_id: int = NO_PRODUCER_ID  # set: a transactional batch of this producer
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class CommitResult:
    """A commit's per-partition error codes (NONE for the accepted ones) and the append, None if nothing passed."""

    errors: dict[TopicPartition, int]
    append: Append | None


@dataclass(slots=True)
class _Entry:
    value: OffsetCommitValue
    seq: int  # order of the record in the log: a later record always wins


@dataclass(slots=True)
class _Pending:
    append: Append
    seq: int
    marker: bool | None = None  # the producer's marker came before the acknowledgement: COMMIT or ABORT


@dataclass
class OffsetStore:
    """The offsets of every group on one offsets-topic partition (committed, and appended but not acknowledged)."""

    offset_metadata_max_bytes: int = DEFAULT_OFFSET_METADATA_MAX_BYTES
    _committed: dict[str, dict[TopicPartition, _Entry]] = field(default_factory=dict, init=False, repr=False)
    _pending: dict[int, _Pending] = field(default_factory=dict, init=False, repr=False)
    # acknowledged transactional offsets waiting for their producer's marker
    _txn: dict[int, dict[OffsetCommitKey, _Entry]] = field(default_factory=dict, init=False, repr=False)
    _next_seq: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.offset_metadata_max_bytes, bool) or not isinstance(self.offset_metadata_max_bytes, int):
            raise ConfigError(f"offset.metadata.max.bytes must be an integer, not {self.offset_metadata_max_bytes!r}")
        if self.offset_metadata_max_bytes < 0:
            raise ConfigError(f"offset.metadata.max.bytes must be >= 0, not {self.offset_metadata_max_bytes}")

    # ---- writes: records out, outcome in ----

    def prepare_commit(
        self, group: str, offsets: Mapping[TopicPartition, OffsetAndMetadata], now_ms: int
    ) -> CommitResult:
        """Validate a commit and return the records for the partitions that pass (group and member checks are
        the caller's: they belong to the group's state)."""
        errors, records = self._validate(group, offsets, now_ms)
        return CommitResult(errors, self._stage(records))

    def prepare_txn_commit(
        self,
        group: str,
        producer_id: int,
        producer_epoch: int,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        now_ms: int,
    ) -> CommitResult:
        """A TxnOffsetCommit: validated as a plain commit, appended as one transactional batch of the producer
        (``Append.producer_id``/``producer_epoch``); acknowledged, its offsets stay pending until the marker."""
        if producer_id < 0 or not 0 <= producer_epoch < 2**15:
            raise ValueError(f"a transactional commit needs a producer id and epoch: {producer_id}/{producer_epoch}")
        errors, records = self._validate(group, offsets, now_ms)
        return CommitResult(errors, self._stage(records, producer_id, producer_epoch))

    def _validate(
        self, group: str, offsets: Mapping[TopicPartition, OffsetAndMetadata], now_ms: int
    ) -> tuple[dict[TopicPartition, int], list[OffsetRecord]]:
        limit = min(self.offset_metadata_max_bytes, MAX_STRING_BYTES)
        errors: dict[TopicPartition, int] = {}
        records: list[OffsetRecord] = []
        for tp, commit in offsets.items():
            if not 0 <= tp.partition < 2**31:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif len(commit.metadata.encode("utf-8")) > limit:
                errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            elif not -(2**63) <= commit.offset < 2**63 or not -(2**31) <= commit.leader_epoch < 2**31:
                errors[tp] = ErrorCode.INVALID_REQUEST
            else:
                errors[tp] = ErrorCode.NONE
                value = OffsetCommitValue(
                    offset=commit.offset,
                    metadata=commit.metadata,
                    commit_timestamp=now_ms,
                    leader_epoch=commit.leader_epoch,
                )
                records.append((OffsetCommitKey(group, tp.topic, tp.partition), value))
        return errors, records

    def delete_offsets(self, group: str, topics: Iterable[str]) -> Append | None:
        """Tombstones for every partition of ``topics`` the group has an offset for (committed or in flight)."""
        wanted = set(topics)
        return self._stage((key, None) for key in self._keys(group) if key.topic in wanted)

    def delete_partitions(self, group: str, partitions: Iterable[TopicPartition]) -> Append | None:
        """Tombstones for those of ``partitions`` the group has an offset for (committed or in flight)."""
        wanted = set(partitions)
        return self._stage(
            (key, None) for key in self._keys(group) if TopicPartition(key.topic, key.partition) in wanted
        )

    def on_partitions_deleted(self, partitions: Iterable[TopicPartition]) -> Append | None:
        """Tombstones for every group's offsets of ``partitions`` (committed or in flight): their topic was deleted,
        and a topic created again under its name must not take them up (Kafka's onPartitionsDeleted)."""
        wanted = set(partitions)
        groups = self.groups() | {key.group for p in self._pending.values() for key, _ in p.append.records}
        return self._stage(
            (key, None)
            for group in sorted(groups)
            for key in self._keys(group)
            if TopicPartition(key.topic, key.partition) in wanted
        )

    def delete_group(self, group: str) -> Append | None:
        """Tombstones for all the group's offsets (its metadata tombstone is the group state's to write)."""
        return self._stage((key, None) for key in self._keys(group))

    def expired(self, now_ms: int, retention_ms: int, group_empty_since: Callable[[str], int | None]) -> Append | None:
        """Tombstones for the offsets past retention.

        ``group_empty_since(group)`` answers None while the group has members (its offsets are kept), the time it
        became empty, or ``USE_COMMIT_TIMESTAMP`` when it has no membership (a standalone consumer's offsets).
        """
        in_flight = {key for p in self._pending.values() for key, _ in p.append.records}
        in_flight.update(key for entries in self._txn.values() for key in entries)
        doomed: list[OffsetRecord] = []
        for group, entries in self._committed.items():
            empty_since = group_empty_since(group)
            if empty_since is None:
                continue
            for tp, entry in entries.items():
                key = OffsetCommitKey(group, tp.topic, tp.partition)
                if key in in_flight:
                    continue
                value = entry.value
                if value.expire_timestamp != NO_TIMESTAMP:
                    expired = now_ms >= value.expire_timestamp
                else:
                    base = value.commit_timestamp if empty_since == USE_COMMIT_TIMESTAMP else empty_since
                    expired = now_ms - base >= retention_ms
                if expired:
                    doomed.append((key, None))
        return self._stage(doomed)

    def on_appended(self, append_id: int) -> None:
        """The append reached the offsets partition's high watermark: its records take effect."""
        pending = self._pending.pop(append_id, None)
        if pending is None:
            raise KeyError(f"no pending append {append_id}")
        producer_id = pending.append.producer_id
        if producer_id == NO_PRODUCER_ID or pending.marker is True:
            for key, value in pending.append.records:
                self._apply(key, value, pending.seq)
        elif pending.marker is None:
            entries = self._txn.setdefault(producer_id, {})
            for key, value in pending.append.records:
                if value is not None:  # a transactional commit writes no tombstones
                    entries[key] = _Entry(value, pending.seq)

    def on_append_failed(self, append_id: int) -> None:
        """The append failed (or its fate is unknown because the coordinator moved): its records never count."""
        if self._pending.pop(append_id, None) is None:
            raise KeyError(f"no pending append {append_id}")

    def on_txn_marker(self, producer_id: int, committed: bool) -> list[OffsetCommitKey]:
        """The producer's COMMIT or ABORT marker is in the offsets partition (replicated; or read while loading):
        its pending offsets become committed offsets, each in its own record's place, or are dropped. Returns the
        keys that took effect. An append of the producer still waiting for its acknowledgement precedes the marker
        in the log (the producer's next transaction cannot commit offsets before this one is complete), so the
        marker decides it too."""
        entries = self._txn.pop(producer_id, {})
        for pending in self._pending.values():
            if pending.append.producer_id == producer_id and pending.marker is None:
                pending.marker = committed
        if not committed:
            return []
        applied = []
        for key, entry in entries.items():
            if self._apply(key, entry.value, entry.seq):
                applied.append(key)
        return applied

    def abort_pending(self) -> list[int]:
        """Drop every pending append (the coordinator is unloading); returns their ids."""
        ids = list(self._pending)
        self._pending.clear()
        return ids

    # ---- loading ----

    def replay(self, key: RecordKey, value: RecordValue | None, producer_id: int = NO_PRODUCER_ID) -> None:
        """Apply one record read from the log while loading; group metadata records are not this store's. A record
        of a transactional batch (``producer_id`` set) stays pending until that producer's marker is replayed
        (``on_txn_marker``), or comes after the load."""
        if isinstance(key, OffsetCommitKey):
            if value is not None and not isinstance(value, OffsetCommitValue):
                raise TypeError(f"an offset commit key with a {type(value).__name__}")
            self._next_seq += 1
            if producer_id == NO_PRODUCER_ID:
                self._apply(key, value, self._next_seq)
            elif value is not None:
                self._txn.setdefault(producer_id, {})[key] = _Entry(value, self._next_seq)

    # ---- reads ----

    def fetch(
        self, group: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetCommitValue]:
        """The committed offsets of ``partitions`` (``NO_OFFSET`` for those without one), or of all the group's."""
        entries = self._committed.get(group, {})
        if partitions is None:
            return {tp: entry.value for tp, entry in entries.items()}
        return {tp: entries[tp].value if tp in entries else NO_OFFSET for tp in partitions}

    def groups(self) -> set[str]:
        """The groups with at least one committed offset, or transactional offsets waiting for their marker."""
        return set(self._committed) | {key.group for entries in self._txn.values() for key in entries}

    def has_offsets(self, group: str) -> bool:
        return group in self._committed

    def has_pending(self, group: str) -> bool:
        """Offsets of the group in flight, or transactional ones waiting for their marker."""
        return any(key.group == group for p in self._pending.values() for key, _ in p.append.records) or any(
            key.group == group for entries in self._txn.values() for key in entries
        )

    def has_pending_txn(self, group: str, partition: TopicPartition) -> bool:
        """Whether a transaction's offset for the partition waits for its marker (or its own acknowledgement):
        the committed offset may be about to change (OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT)."""
        key = OffsetCommitKey(group, partition.topic, partition.partition)
        return any(key in entries for entries in self._txn.values()) or any(
            p.append.producer_id != NO_PRODUCER_ID and p.marker is None and any(k == key for k, _ in p.append.records)
            for p in self._pending.values()
        )

    def pending_txn_partitions(self, group: str) -> set[TopicPartition]:
        """The group's partitions for which ``has_pending_txn`` holds."""
        keys = {key for entries in self._txn.values() for key in entries if key.group == group}
        keys.update(
            key
            for p in self._pending.values()
            if p.append.producer_id != NO_PRODUCER_ID and p.marker is None
            for key, _ in p.append.records
            if key.group == group
        )
        return {TopicPartition(key.topic, key.partition) for key in keys}

    def pending_producers(self) -> set[int]:
        """The producers with acknowledged transactional offsets waiting for a marker."""
        return set(self._txn)

    # ---- internals ----

    def _keys(self, group: str) -> list[OffsetCommitKey]:
        keys = {OffsetCommitKey(group, tp.topic, tp.partition) for tp in self._committed.get(group, {})}
        keys.update(key for p in self._pending.values() for key, _ in p.append.records if key.group == group)
        keys.update(key for entries in self._txn.values() for key in entries if key.group == group)
        return sorted(keys, key=lambda k: (k.topic, k.partition))

    def _stage(
        self, records: Iterable[OffsetRecord], producer_id: int = NO_PRODUCER_ID, producer_epoch: int = -1
    ) -> Append | None:
        staged = tuple(records)
        if not staged:
            return None
        self._next_seq += 1
        append = Append(self._next_seq, staged, producer_id, producer_epoch)
        self._pending[append.append_id] = _Pending(append, self._next_seq)
        return append

    def _apply(self, key: OffsetCommitKey, value: OffsetCommitValue | None, seq: int) -> bool:
        """Let the record at ``seq`` take effect unless a later one already has; whether it did."""
        tp = TopicPartition(key.topic, key.partition)
        if value is None:
            self._drop_txn(key, seq)
        entries = self._committed.get(key.group)
        current = entries.get(tp) if entries else None
        if current is not None and current.seq > seq:
            return False  # a later record already took effect
        if value is None:
            if entries is not None and current is not None:
                del entries[tp]
                if not entries:
                    del self._committed[key.group]
            return True
        self._committed.setdefault(key.group, {})[tp] = _Entry(value, seq)
        return True

    def _drop_txn(self, key: OffsetCommitKey, before_seq: int) -> None:
        """A tombstone deletes the key's pending transactional offsets written before it (compaction would too)."""
        for producer_id in list(self._txn):
            entries = self._txn[producer_id]
            entry = entries.get(key)
            if entry is not None and entry.seq < before_seq:
                del entries[key]
                if not entries:
                    del self._txn[producer_id]
