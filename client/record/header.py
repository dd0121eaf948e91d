"""The v2 RecordBatch header (Kafka magic 2): parsing and header-only validation.

The broker validates and appends batches with these functions alone, without decoding records. The byte layout
is in ``layout.py``.
"""

from __future__ import annotations

import struct
from typing import NamedTuple, NoReturn

from crc32c import crc32c

from odradek.client.errors import CorruptRecordError, RecordTooLargeError
from odradek.client.record.codec import append_batches, records_end
from odradek.client.record.layout import COMPRESSION_MASK as COMPRESSION_MASK
from odradek.client.record.layout import CRC_START as CRC_START
from odradek.client.record.layout import HEADER_SIZE as HEADER_SIZE
from odradek.client.record.layout import LOG_OVERHEAD as LOG_OVERHEAD
from odradek.client.record.layout import MAGIC as MAGIC
from odradek.client.record.layout import MIN_BATCH_LENGTH as MIN_BATCH_LENGTH
from odradek.client.record.layout import AppendBatch as AppendBatch
from odradek.client.record.reference import MIN_RECORD_SIZE as MIN_RECORD_SIZE

PARTITION_LEADER_EPOCH_OFFSET = 12

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

# attributes bits (COMPRESSION_MASK: see layout.py)
TIMESTAMP_TYPE_MASK = 0x08  # 0 = CreateTime, 1 = LogAppendTime
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40

# compression codes, as in Kafka
COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4
COMPRESSION_CODES = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_LENGTH_AT = struct.Struct(">qi")  # base_offset, batch_length
_EPOCH = struct.Struct(">i")
# base_offset, batch_length, partition_leader_epoch: the bytes before the CRC'd part that the log rewrites (see
# header_prefix; the log packs with it directly, saving a call per batch).
PREFIX = struct.Struct(">qii")
PREFIX_SIZE = 16


class BatchHeader(NamedTuple):
    """A parsed batch header plus its position in the buffer it was read from."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    position: int = 0

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, headers included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def append_batch(self) -> AppendBatch:
        """The header as ``validate_for_append`` describes a batch."""
        return (
            self.base_offset,
            self.size,
            self.last_offset_delta,
            self.max_timestamp,
            self.records_count,
            self.partition_leader_epoch,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
        )

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def parse_header(buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """Parse the header at ``position``; the caller has checked that HEADER_SIZE bytes are there."""
    return BatchHeader._make((*_HEADER.unpack_from(buf, position), position))


def batch_size_at(buf: bytes | bytearray | memoryview, position: int) -> int:
    """Total size of the batch at ``position`` from its length field (no validation)."""
    length: int = _LENGTH_AT.unpack_from(buf, position)[1]
    return length + LOG_OVERHEAD


def validate_batch(
    buf: bytes | bytearray | memoryview, position: int = 0, max_batch_size: int | None = None
) -> BatchHeader:
    """Validate one batch's header and CRC without decoding its records; return the parsed header.

    Raises CorruptRecordError for a length running past the buffer, a wrong magic, a bad CRC, or a record count
    inconsistent with the offset deltas or the bytes present, and RecordTooLargeError above ``max_batch_size``.
    """
    available = len(buf) - position
    if available < HEADER_SIZE:
        raise CorruptRecordError(f"truncated batch header at byte {position}: {available} bytes")
    header = parse_header(buf, position)
    size = header.batch_length + LOG_OVERHEAD
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"batch length {header.batch_length} below the header size")
    if max_batch_size is not None and size > max_batch_size:
        raise RecordTooLargeError(f"batch of {size} bytes exceeds the limit of {max_batch_size}")
    if size > available:
        raise CorruptRecordError(f"batch length {header.batch_length} runs past the buffer ({available} bytes)")
    if header.magic != MAGIC:
        raise CorruptRecordError(f"unsupported magic {header.magic}, expected {MAGIC}")
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    if crc32c(view[position + CRC_START : position + size]) != header.crc:
        raise CorruptRecordError("batch CRC mismatch")
    count = header.records_count
    if count < 0 or (count == 0 and not header.is_control and header.last_offset_delta < 0):
        raise CorruptRecordError(f"invalid record count {count}")
    if count > 0 and header.last_offset_delta < count - 1:
        raise CorruptRecordError(f"record count {count} exceeds last offset delta {header.last_offset_delta}")
    if header.compression == COMPRESSION_NONE and count * MIN_RECORD_SIZE > size - HEADER_SIZE:
        raise CorruptRecordError(f"record count {count} does not fit in {size - HEADER_SIZE} record bytes")
    return header


def validate_for_append(
    buf: bytes | bytearray | memoryview, view: memoryview, max_batch_size: int, check_records: bool
) -> list[AppendBatch]:
    """Validate every batch in ``buf`` (whole batches only; ``view`` is ``memoryview(buf)``) before a log append;
    return one AppendBatch per batch.

    The checks and errors are ``validate_batch``'s, plus two: a batch must hold at least one offset (last offset
    delta >= 0), and with ``check_records`` an uncompressed batch's record length prefixes must tile its record
    bytes with exactly ``records_count`` records (``check_record_count``, which implies validate_batch's cheaper
    count-fits-the-bytes test, so that one is skipped). This runs on every produce, so the codec's
    ``append_batches`` (native when built) only decides; a batch that fails is handed to ``_reject``, which finds
    the reason with the ordinary functions, so the errors are theirs.
    """
    batches = append_batches(buf, view, max_batch_size, check_records)
    if isinstance(batches, int):
        _reject(view, batches, max_batch_size)
    if not batches:
        raise CorruptRecordError("no record batch to append")
    return batches


def _reject(view: memoryview, position: int, max_batch_size: int) -> NoReturn:
    """Raise the error for the batch at ``position``, which failed ``validate_for_append``'s condition."""
    header = validate_batch(view, position, max_batch_size)  # raises for a bad header or CRC
    if header.last_offset_delta < 0:
        raise CorruptRecordError(f"batch with last offset delta {header.last_offset_delta} holds no offset")
    _check_records(view, header)
    raise AssertionError("validate_for_append rejected a valid batch")


def iter_batches(buf: bytes | bytearray | memoryview, max_batch_size: int | None = None) -> list[BatchHeader]:
    """Validate every batch in ``buf``, which must hold whole batches only; return their headers in order."""
    headers = []
    position = 0
    end = len(buf)
    while position < end:
        header = validate_batch(buf, position, max_batch_size)
        headers.append(header)
        position += header.size
    if not headers:
        raise CorruptRecordError("no record batch in the request")
    return headers


def header_prefix(base_offset: int, batch_length: int, partition_leader_epoch: int) -> bytes:
    """The first 16 bytes of a batch as the log stores it: none of them is covered by the CRC, so the log can
    assign offsets and stamp the leader epoch by writing this prefix followed by the batch's remaining bytes."""
    return PREFIX.pack(base_offset, batch_length, partition_leader_epoch)


def set_base_offset(buf: bytearray | memoryview, position: int, base_offset: int) -> None:
    _BASE_OFFSET.pack_into(buf, position, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, position: int, epoch: int) -> None:
    """Stamp the leader epoch (also outside the CRC), as the leader does on append."""
    _EPOCH.pack_into(buf, position + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def check_record_count(buf: bytes | bytearray | memoryview, header: BatchHeader) -> None:
    """Check that the length prefixes of an uncompressed batch's records tile its records section exactly with
    ``records_count`` records, reading nothing but those prefixes; raise CorruptRecordError if they do not.

    Call it after ``validate_batch``. A compressed batch is not checked: its records are inside the compressed
    stream, and the broker does not decompress. The walk is the record codec's ``records_end``.
    """
    if not header.attributes & COMPRESSION_MASK:
        _check_records(buf, header)


def _check_records(buf: bytes | bytearray | memoryview, header: BatchHeader) -> None:
    """check_record_count for a batch known to be uncompressed."""
    if records_end(buf, header.position + HEADER_SIZE, header.records_count) != header.position + header.size:
        raise CorruptRecordError(f"the {header.records_count} records do not fill the batch's record bytes")
