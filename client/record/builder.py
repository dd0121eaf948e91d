"""Encoding v2 record batches: ``BatchBuilder`` (one record at a time) and ``encode_batch`` (many at once).

The records themselves are encoded by the record codec (``codec.encode_record`` per appended record,
``codec.encode_records`` for a whole section); this module frames them: attributes, header fields, compression and
the CRC32C.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence

from crc32c import crc32c

from odradek.client.record.codec import encode_record as encode_record  # re-exported: the public name it had
from odradek.client.record.codec import encode_records
from odradek.client.record.compression import compress
from odradek.client.record.header import (
    COMPRESSION_CODES,
    CONTROL_FLAG,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
)

Headers = Sequence[tuple[str, bytes | None]]
Bytes = bytes | bytearray | memoryview

_HEAD = struct.Struct(">qiibI")  # base_offset, batch_length, partition_leader_epoch, magic, crc: outside the CRC
_TAIL = struct.Struct(">hiqqqhii")  # attributes .. records_count: the header fields the CRC covers
_BATCH_LENGTH_BASE = HEADER_SIZE - LOG_OVERHEAD


def codec_code(compression: int | str) -> int:
    """A COMPRESSION_* code from a code or a ``compression.type`` name ("none", "gzip", ...)."""
    code = COMPRESSION_CODES[compression] if isinstance(compression, str) else compression
    if code not in COMPRESSION_CODES.values():
        raise ValueError(f"unknown compression codec {compression!r}")
    return code


def batch_attributes(codec: int, is_transactional: bool, log_append_time: bool, is_control: bool = False) -> int:
    return (
        codec
        | (TRANSACTIONAL_FLAG if is_transactional else 0)
        | (TIMESTAMP_TYPE_MASK if log_append_time else 0)
        | (CONTROL_FLAG if is_control else 0)
    )


def assemble_batch(
    records: bytes,
    count: int,
    codec: int,
    attributes: int,
    base_offset: int,
    partition_leader_epoch: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
) -> bytes:
    """Compress an encoded records section if asked, and put the header with its CRC32C in front of it."""
    if codec:
        records = compress(codec, records)
    tail = _TAIL.pack(
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    crc = crc32c(records, crc32c(tail))
    head = _HEAD.pack(base_offset, _BATCH_LENGTH_BASE + len(records), partition_leader_epoch, MAGIC, crc)
    return b"".join((head, tail, records))


class BatchBuilder:
    """Accumulates records into one batch for the producer; ``append`` refuses a record once ``batch_size`` would
    be exceeded, so the producer can close this batch and start the next.

    Records are encoded as they are appended, so the size is exact (before compression) and ``build`` is a join.
    Offset deltas are 0, 1, 2, ... in append order; the first record's timestamp is the batch's base timestamp, so
    later records may have negative deltas.
    """

    __slots__ = (
        "_attributes",
        "_base_offset",
        "_base_sequence",
        "_base_timestamp",
        "_batch_size",
        "_codec",
        "_count",
        "_max_timestamp",
        "_partition_leader_epoch",
        "_pieces",
        "_producer_epoch",
        "_producer_id",
        "_size",
    )

    def __init__(
        self,
        compression: int | str = 0,
        base_offset: int = 0,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        log_append_time: bool = False,
        *,
        batch_size: int | None = None,
        is_control: bool = False,
    ) -> None:
        self._codec = codec_code(compression)
        self._attributes = batch_attributes(self._codec, is_transactional, log_append_time, is_control)
        self._base_offset = base_offset
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._partition_leader_epoch = partition_leader_epoch
        self._batch_size = batch_size
        self._pieces: list[bytes] = []
        self._size = HEADER_SIZE
        self._count = 0
        self._base_timestamp = 0
        self._max_timestamp = 0

    def append(self, timestamp_ms: int, key: Bytes | None, value: Bytes | None, headers: Headers = ()) -> int | None:
        """Add a record; return its offset delta, or None (nothing added) if it would take the batch past
        ``batch_size`` and the batch already holds a record (a lone record may exceed the limit)."""
        count = self._count
        if count == 0:
            self._base_timestamp = self._max_timestamp = timestamp_ms
        record = encode_record(count, timestamp_ms - self._base_timestamp, key, value, headers)
        size = self._size + len(record)
        if count and self._batch_size is not None and size > self._batch_size:
            return None
        self._pieces.append(record)
        self._size = size
        self._count = count + 1
        if timestamp_ms > self._max_timestamp:
            self._max_timestamp = timestamp_ms
        return count

    @property
    def records_count(self) -> int:
        return self._count

    def estimated_size(self) -> int:
        """Size of the batch built now: exact without compression, an upper bound in practice with it."""
        return self._size

    def build(self) -> bytes:
        """The complete batch: header, CRC32C, records (compressed if a codec was chosen)."""
        if not self._count:
            raise ValueError("cannot build a batch without records")
        return assemble_batch(
            b"".join(self._pieces),
            self._count,
            self._codec,
            self._attributes,
            self._base_offset,
            self._partition_leader_epoch,
            self._count - 1,
            self._base_timestamp,
            self._max_timestamp,
            self._producer_id,
            self._producer_epoch,
            self._base_sequence,
        )


def encode_batch(
    values: Sequence[Bytes | None],
    keys: Sequence[Bytes | None] | None = None,
    timestamps: int | Sequence[int] | None = None,
    headers: Sequence[Headers] | None = None,
    *,
    compression: int | str = 0,
    base_offset: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    log_append_time: bool = False,
) -> bytes:
    """Encode a whole batch at once: record i has ``values[i]``, ``keys[i]`` (all null if ``keys`` is None),
    ``headers[i]``, and ``timestamps`` (one for all, one per record, or now if None)."""
    count = len(values)
    if not count:
        raise ValueError("cannot build a batch without records")
    if keys is not None and len(keys) != count:
        raise ValueError(f"{len(keys)} keys for {count} values")
    if headers is not None and len(headers) != count:
        raise ValueError(f"{len(headers)} header lists for {count} values")
    if timestamps is None:
        timestamps = int(time.time() * 1000)
    if isinstance(timestamps, int):
        base_timestamp = max_timestamp = timestamps
        deltas = None
    else:
        if len(timestamps) != count:
            raise ValueError(f"{len(timestamps)} timestamps for {count} values")
        base_timestamp = timestamps[0]
        max_timestamp = max(timestamps)
        deltas = [t - base_timestamp for t in timestamps]
    records = encode_records(values, keys, deltas, headers)
    codec = codec_code(compression)
    return assemble_batch(
        records,
        count,
        codec,
        batch_attributes(codec, is_transactional, log_append_time),
        base_offset,
        partition_leader_epoch,
        count - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
    )
