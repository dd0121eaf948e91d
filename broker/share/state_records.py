"""The durable state of share-partitions, as Kafka's share coordinator keeps it in ``__share_group_state``.

What a share-partition must not forget across a leader move is its start offset (SPSO) and, for the in-flight
records after it, what became of them: ACKNOWLEDGED or ARCHIVED records are never delivered again, and a record
released or timed out comes back AVAILABLE with its delivery count (so the delivery count limit still holds). Those
are *state batches*: ``first..last, state, delivery count``. ACQUIRED is never stored: it is a lock a leader holds
in memory, so after a move a record that was acquired is AVAILABLE again, with the delivery count of its last
stored state (a record acquired for the first time has none: it is fetched again as new, count 1), as in Kafka.

Per share-partition (group, topic id, partition) two kinds of records, as Kafka writes them:

- a **snapshot**: the whole state, with the *state epoch* (bumped when the group's offsets are reset, so an older
  writer is fenced) and the *leader epoch* of the share-partition's leader that wrote it;
- an **update**: only the batches one write changed, and the start offset (-1: unchanged), applied on top of the
  snapshot and the updates before it (a later batch overrides what it overlaps; batches below the start offset are
  dropped).

The store (``ShareStateStore``) writes a snapshot for a share-partition's first write and after
``snapshot_every`` updates (Kafka's ``share.coordinator.snapshot.update.records.per.snapshot``, 500), else an
update, so a reader replays at most that many updates after the last snapshot. Its state changes only by replaying
records, the ones it writes included, so a coordinator that loads the topic reaches the state that wrote it.
The topic is not compacted (a snapshot and the updates after it are all needed): the records before every key's
latest snapshot may be deleted.

The bytes are odradek's own small versioned layout, written with the ``__consumer_offsets`` record primitives
(``broker/groups/record_codec.py``): a key is ``int16 kind (0 snapshot, 1 update), group string, topic uuid,
int32 partition``; a value ``int16 version (0)`` then a flexible struct: ``int32 snapshot epoch, [int32 state
epoch: snapshot only], int32 leader epoch, int64 start offset, batches[int64 first, int64 last, int8 state, int16
delivery count]``. A reader skips tagged fields it does not know, so later versions can add fields.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import IntEnum

from odradek.broker.groups.record_codec import RecordReader, RecordWriter, UnknownRecordVersionError
from odradek.broker.share import spans
from odradek.client.errors import ErrorCode

SNAPSHOT_KIND = 0
UPDATE_KIND = 1
VALUE_VERSION = 0
SNAPSHOT_EVERY = 500  # share.coordinator.snapshot.update.records.per.snapshot
UNCHANGED_START = -1  # an update's start offset when the write did not move it


class RecordState(IntEnum):
    """A record's delivery state (Kafka's ids, stored as they are)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


@dataclass(frozen=True, slots=True)
class StateBatch:
    """Records ``first``..``last`` in one state with one delivery count."""

    first: int
    last: int
    state: RecordState
    delivery_count: int

    def clipped(self, first: int, last: int) -> StateBatch:
        return replace(self, first=first, last=last)

    def same_value(self, other: StateBatch) -> bool:
        return (self.state, self.delivery_count) == (other.state, other.delivery_count)


Batches = tuple[StateBatch, ...]


def combine(base: Iterable[StateBatch], changes: Iterable[StateBatch], start_offset: int) -> Batches:
    """``base`` with ``changes`` laid over it in order (later wins where they overlap), without the offsets below
    ``start_offset`` (-1: keep all), adjacent equal batches merged."""
    out = list(base)
    for batch in changes:
        spans.assign(out, batch)
    if start_offset >= 0:
        spans.drop_below(out, start_offset)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class StateWrite:
    """What a share-partition's leader asks to store after a change (WriteShareGroupState's partition data): its
    start offset and the batches that changed."""

    start_offset: int
    batches: Batches


@dataclass(frozen=True, slots=True)
class ShareState:
    """A share-partition's stored state (ReadShareGroupState's answer); ``start_offset`` -1 while the group has not
    set it (the leader then applies ``share.auto.offset.reset``)."""

    state_epoch: int
    start_offset: int
    batches: Batches


# -- records -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SharePartitionKey:
    group_id: str
    topic_id: bytes  # 16 bytes, the topic's uuid
    partition: int


@dataclass(frozen=True, slots=True)
class ShareSnapshotValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: Batches


@dataclass(frozen=True, slots=True)
class ShareUpdateValue:
    snapshot_epoch: int  # of the snapshot it applies to
    leader_epoch: int
    start_offset: int  # UNCHANGED_START when the write did not move it
    batches: Batches


@dataclass(frozen=True, slots=True)
class ShareStateRecord:
    """One record of ``__share_group_state``; a value of None is a tombstone (the state was deleted)."""

    key: SharePartitionKey
    value: ShareSnapshotValue | ShareUpdateValue | None


def encode_record(record: ShareStateRecord) -> tuple[bytes, bytes | None]:
    """The record's key and value bytes (None for a tombstone, written under the snapshot kind)."""
    value = record.value
    key = RecordWriter(flexible=False)
    key.int16(UPDATE_KIND if isinstance(value, ShareUpdateValue) else SNAPSHOT_KIND)
    key.string(record.key.group_id)
    key.uuid(record.key.topic_id)
    key.int32(record.key.partition)
    if value is None:
        return bytes(key.out), None
    w = RecordWriter(flexible=True)
    w.int16(VALUE_VERSION)
    w.int32(value.snapshot_epoch)
    if isinstance(value, ShareSnapshotValue):
        w.int32(value.state_epoch)
    w.int32(value.leader_epoch)
    w.int64(value.start_offset)
    w.array_length(len(value.batches))
    for b in value.batches:
        w.int64(b.first)
        w.int64(b.last)
        w.int8(b.state)
        w.int16(b.delivery_count)
        w.end_struct()
    w.end_struct()
    return bytes(key.out), bytes(w.out)


def decode_record(key_bytes: bytes, value_bytes: bytes | None) -> ShareStateRecord:
    """A record from its bytes; a fault raises the codec's ``OffsetsRecordError`` (``UnknownRecordVersionError``
    for a kind or version this reader does not know)."""
    r = RecordReader(key_bytes, "share state key")
    kind = r.int16()
    if kind not in (SNAPSHOT_KIND, UPDATE_KIND):
        raise UnknownRecordVersionError("share state key", kind)
    key = SharePartitionKey(r.string(), r.uuid(), r.int32())
    r.done()
    if value_bytes is None:
        return ShareStateRecord(key, None)
    what = "share snapshot value" if kind == SNAPSHOT_KIND else "share update value"
    r = RecordReader(value_bytes, what)
    version = r.int16()
    if version != VALUE_VERSION:
        raise UnknownRecordVersionError(what, version)
    r.flexible = True
    snapshot_epoch = r.int32()
    state_epoch = r.int32() if kind == SNAPSHOT_KIND else 0
    leader_epoch, start_offset = r.int32(), r.int64()
    batches = []
    for _ in range(r.array_length()):
        first, last, state, count = r.int64(), r.int64(), r.int8(), r.int16()
        r.end_struct()
        if state not in RecordState._value2member_map_ or state == RecordState.ACQUIRED:
            raise r.fail(f"delivery state {state} cannot be stored")
        batches.append(StateBatch(first, last, RecordState(state), count))
    r.end_struct()
    r.done()
    if kind == SNAPSHOT_KIND:
        return ShareStateRecord(
            key, ShareSnapshotValue(snapshot_epoch, state_epoch, leader_epoch, start_offset, tuple(batches))
        )
    return ShareStateRecord(key, ShareUpdateValue(snapshot_epoch, leader_epoch, start_offset, tuple(batches)))


# -- the store ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Stored:
    """A share-partition's state as its records add up, and how many updates follow its last snapshot."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: Batches
    updates: int


@dataclass(frozen=True, slots=True)
class StoreAnswer:
    """An answer of the store, and the record to append (acks=all) before it is given, if any; ``state`` is a
    read's (None: nothing stored for the share-partition)."""

    error: ErrorCode.ValueType
    record: ShareStateRecord | None = None
    state: ShareState | None = None


class ShareStateStore:
    """The share-partitions' states of one ``__share_group_state`` partition (Kafka's ShareCoordinatorShard).

    Sans-I/O: each call returns the record to append, already replayed here; if its append fails, the shell
    reloads the partition from its log, as the group coordinator does."""

    def __init__(self, snapshot_every: int = SNAPSHOT_EVERY) -> None:
        if snapshot_every < 1:
            raise ValueError("share.coordinator.snapshot.update.records.per.snapshot must be >= 1")
        self.snapshot_every = snapshot_every
        self._states: dict[SharePartitionKey, _Stored] = {}

    def __len__(self) -> int:
        """How many share-partitions have a stored state."""
        return len(self._states)

    def state(self, key: SharePartitionKey) -> ShareState | None:
        stored = self._states.get(key)
        return None if stored is None else ShareState(stored.state_epoch, stored.start_offset, stored.batches)

    def leader_epoch(self, key: SharePartitionKey) -> int:
        """The newest leader epoch stored for the share-partition (-1: none)."""
        stored = self._states.get(key)
        return -1 if stored is None else stored.leader_epoch

    # -- requests ------------------------------------------------------------------------------------------------

    def write(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, write: StateWrite) -> StoreAnswer:
        """WriteShareGroupState: a leader's change. A leader or state epoch older than the stored one is fenced
        (FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH). The first write, and every ``snapshot_every``-th after a
        snapshot, is a snapshot of the combined state; the others are updates of what changed."""
        stored = self._states.get(key)
        if stored is not None:
            fenced = self._fenced(stored, leader_epoch, state_epoch)
            if fenced is not None:
                return StoreAnswer(fenced)
        value: ShareSnapshotValue | ShareUpdateValue
        if stored is None:
            batches = combine((), write.batches, write.start_offset)
            value = ShareSnapshotValue(0, state_epoch, leader_epoch, write.start_offset, batches)
        elif stored.updates >= self.snapshot_every:
            batches = combine(stored.batches, write.batches, write.start_offset)
            epoch = stored.snapshot_epoch + 1
            value = ShareSnapshotValue(epoch, state_epoch, leader_epoch, write.start_offset, batches)
        else:
            start = write.start_offset if write.start_offset != stored.start_offset else UNCHANGED_START
            batches = combine((), write.batches, write.start_offset)
            value = ShareUpdateValue(stored.snapshot_epoch, leader_epoch, start, batches)
        return self._answer(ShareStateRecord(key, value))

    def read(self, key: SharePartitionKey, leader_epoch: int) -> StoreAnswer:
        """ReadShareGroupState by a new leader: the state, after recording the leader's epoch (an update without
        batches) when it is newer, so that the previous leader's writes are fenced from then on."""
        stored = self._states.get(key)
        if stored is None:
            return StoreAnswer(ErrorCode.NONE)
        if leader_epoch < stored.leader_epoch:
            return StoreAnswer(ErrorCode.FENCED_LEADER_EPOCH)
        record = None
        if leader_epoch > stored.leader_epoch:
            record = ShareStateRecord(key, ShareUpdateValue(stored.snapshot_epoch, leader_epoch, UNCHANGED_START, ()))
            self.replay(record)
        return StoreAnswer(ErrorCode.NONE, record, self.state(key))

    def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> StoreAnswer:
        """InitializeShareGroupState: the group (re)sets a share-partition's start offset (-1: the leader applies
        ``share.auto.offset.reset``) at a newer state epoch, forgetting its in-flight state."""
        stored = self._states.get(key)
        if stored is not None and state_epoch <= stored.state_epoch:
            return StoreAnswer(ErrorCode.FENCED_STATE_EPOCH)
        snapshot_epoch = 0 if stored is None else stored.snapshot_epoch + 1
        leader_epoch = -1 if stored is None else stored.leader_epoch
        return self._answer(
            ShareStateRecord(key, ShareSnapshotValue(snapshot_epoch, state_epoch, leader_epoch, start_offset, ()))
        )

    def delete(self, key: SharePartitionKey) -> StoreAnswer:
        """DeleteShareGroupState: a tombstone (nothing to write when nothing is stored)."""
        if key not in self._states:
            return StoreAnswer(ErrorCode.NONE)
        return self._answer(ShareStateRecord(key, None))

    def _fenced(self, stored: _Stored, leader_epoch: int, state_epoch: int) -> ErrorCode.ValueType | None:
        if leader_epoch < stored.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if state_epoch < stored.state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        return None

    def _answer(self, record: ShareStateRecord) -> StoreAnswer:
        self.replay(record)
        return StoreAnswer(ErrorCode.NONE, record)

    # -- replay --------------------------------------------------------------------------------------------------

    def replay(self, record: ShareStateRecord) -> None:
        """Apply one stored record (the only way the store's state changes)."""
        key, value = record.key, record.value
        stored = self._states.get(key)
        if value is None:
            self._states.pop(key, None)
        elif isinstance(value, ShareSnapshotValue):
            self._states[key] = _Stored(
                value.snapshot_epoch, value.state_epoch, value.leader_epoch, value.start_offset, value.batches, 0
            )
        elif stored is None:  # an update whose snapshot is gone: it is all there is
            self._states[key] = _Stored(
                value.snapshot_epoch, 0, value.leader_epoch, value.start_offset, value.batches, 0
            )
        else:
            start = stored.start_offset if value.start_offset == UNCHANGED_START else value.start_offset
            self._states[key] = _Stored(
                stored.snapshot_epoch,
                stored.state_epoch,
                max(stored.leader_epoch, value.leader_epoch),
                start,
                combine(stored.batches, value.batches, start),
                stored.updates + 1,
            )
