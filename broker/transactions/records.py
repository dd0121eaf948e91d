"""The records of the internal ``__transaction_state`` topic: one per change of a transactional id.

The key is the id, the value its whole ``TxnMetadata``, so the last record of an id is all a loading coordinator
needs and compaction may drop the others; a null value (tombstone) is an expired id. Our own versioned layout,
big-endian, every integer fixed width:

- key, version 0: ``version int16, transactional_id string``;
- value, version 0: ``version int16, producer_id int64, last_producer_id int64, producer_epoch int16,
  last_producer_epoch int16, timeout_ms int32, state int8, txn_start_ms int64, last_update_ms int64,
  topics int32 count of (name string, partitions int32 count of int32)``.

Strings are an int16 byte length and UTF-8. A reader refuses a version it does not know (a newer writer's), and
any truncated, overlong or trailing input, with ``TxnRecordError``.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from odradek.broker.transactions.metadata import TxnMetadata, TxnState
from odradek.client.errors import CorruptRecordError
from odradek.client.record.batch import Bytes, read_batches
from odradek.client.record.builder import BatchBuilder
from odradek.client.structs import TopicPartition

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0
MAX_STRING_BYTES = 32767

# The persisted number of each state: fixed forever (the enum's order is not).
STATE_CODES: dict[TxnState, int] = {
    TxnState.EMPTY: 0,
    TxnState.ONGOING: 1,
    TxnState.PREPARE_COMMIT: 2,
    TxnState.PREPARE_ABORT: 3,
    TxnState.COMPLETE_COMMIT: 4,
    TxnState.COMPLETE_ABORT: 5,
    TxnState.PREPARE_EPOCH_FENCE: 6,
    TxnState.DEAD: 7,
}
STATES_BY_CODE = {code: state for state, code in STATE_CODES.items()}

_HEAD = struct.Struct(">qqhhibqq")


class TxnRecordError(CorruptRecordError):
    """A ``__transaction_state`` key or value that cannot be decoded."""


def _string(s: str) -> bytes:
    data = s.encode()
    if len(data) > MAX_STRING_BYTES:
        raise TxnRecordError(f"string of {len(data)} bytes is too long for a transaction record")
    return struct.pack(">h", len(data)) + data


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def take(self, fmt: struct.Struct | str) -> tuple[int, ...]:
        s = fmt if isinstance(fmt, struct.Struct) else struct.Struct(fmt)
        if self.pos + s.size > len(self.data):
            raise TxnRecordError(f"truncated transaction {self.what}")
        out = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return tuple(out)

    def string(self) -> str:
        (n,) = self.take(">h")
        if n < 0 or self.pos + n > len(self.data):
            raise TxnRecordError(f"bad string length {n} in transaction {self.what}")
        raw = self.data[self.pos : self.pos + n]
        self.pos += n
        try:
            return raw.decode()
        except UnicodeDecodeError as e:
            raise TxnRecordError(f"transaction {self.what}: {e}") from None

    def done(self) -> None:
        if self.pos != len(self.data):
            raise TxnRecordError(f"{len(self.data) - self.pos} trailing bytes in transaction {self.what}")


def encode_key(transactional_id: str) -> bytes:
    return struct.pack(">h", KEY_VERSION) + _string(transactional_id)


def decode_key(data: bytes) -> str:
    r = _Reader(bytes(data), "key")
    (version,) = r.take(">h")
    if version != KEY_VERSION:
        raise TxnRecordError(f"unknown transaction key version {version}")
    txn_id = r.string()
    r.done()
    return txn_id


def _grouped(partitions: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in partitions:
        by_topic[tp.topic].append(tp.partition)
    return [(t, sorted(ps)) for t, ps in sorted(by_topic.items())]


def encode_value(md: TxnMetadata | None) -> bytes | None:
    """The value of ``md``'s record; None (a tombstone) for None."""
    if md is None:
        return None
    out = bytearray(struct.pack(">h", VALUE_VERSION))
    try:
        out += _HEAD.pack(
            md.producer_id,
            md.last_producer_id,
            md.producer_epoch,
            md.last_producer_epoch,
            md.timeout_ms,
            STATE_CODES[md.state],
            md.txn_start_ms,
            md.last_update_ms,
        )
    except struct.error as e:
        raise TxnRecordError(f"transaction metadata of {md.transactional_id!r} does not fit: {e}") from None
    topics = _grouped(md.partitions)
    out += struct.pack(">i", len(topics))
    for topic, parts in topics:
        out += _string(topic)
        out += struct.pack(f">i{len(parts)}i", len(parts), *parts)
    return bytes(out)


def decode_value(transactional_id: str, data: bytes | None) -> TxnMetadata | None:
    """The metadata of a record's value; None for a tombstone."""
    if data is None:
        return None
    r = _Reader(bytes(data), "value")
    (version,) = r.take(">h")
    if version != VALUE_VERSION:
        raise TxnRecordError(f"unknown transaction value version {version}")
    pid, last_pid, epoch, last_epoch, timeout, state_code, start, update = r.take(_HEAD)
    state = STATES_BY_CODE.get(state_code)
    if state is None:
        raise TxnRecordError(f"unknown transaction state {state_code}")
    (n_topics,) = r.take(">i")
    if n_topics < 0:
        raise TxnRecordError(f"bad topic count {n_topics}")
    partitions: set[TopicPartition] = set()
    for _ in range(n_topics):
        topic = r.string()
        (n,) = r.take(">i")
        if n < 0 or r.pos + 4 * n > len(r.data):
            raise TxnRecordError(f"bad partition count {n}")
        partitions.update(TopicPartition(topic, p) for p in r.take(f">{n}i"))
    r.done()
    return TxnMetadata(
        transactional_id=transactional_id,
        producer_id=pid,
        last_producer_id=last_pid,
        producer_epoch=epoch,
        last_producer_epoch=last_epoch,
        timeout_ms=timeout,
        state=state,
        partitions=frozenset(partitions),
        txn_start_ms=start,
        last_update_ms=update,
    )


def encode_batch(records: Iterable[tuple[str, TxnMetadata | None]], timestamp_ms: int) -> bytes:
    """One uncompressed batch of (transactional id, metadata or None for a tombstone) records."""
    builder = BatchBuilder()
    for txn_id, md in records:
        builder.append(timestamp_ms, encode_key(txn_id), encode_value(md))
    return builder.build()


@dataclass
class ReplayStats:
    records: int = 0
    skipped: int = 0


def read_records(data: Bytes, stats: ReplayStats | None = None) -> Iterator[tuple[str, TxnMetadata | None]]:
    """The records of whole batches read from the partition, in log order. Control batches carry none of ours;
    a record this codec cannot read is skipped and counted (``stats.skipped``)."""
    stats = stats if stats is not None else ReplayStats()
    for batch in read_batches(data):
        if batch.header.is_control:
            continue
        for record in batch.records():
            if record.key is None:
                stats.skipped += 1
                continue
            try:
                txn_id = decode_key(record.key)
                md = decode_value(txn_id, record.value)
            except TxnRecordError:
                stats.skipped += 1
                continue
            stats.records += 1
            yield txn_id, md
