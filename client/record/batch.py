"""Decoding v2 record batches: ``read_batches`` splits a buffer into ``RecordBatch`` views, and
``RecordBatch.records()`` decodes one batch's records.

The record loop is the consumer's hot path, so it reads one- and two-byte varints inline (record lengths, offset
deltas and key/value lengths of records up to 8 KiB all fit) and calls ``read_zigzag`` only for longer ones. Every
record's fields must end exactly at its length prefix and the records must fill the section exactly with the
header's count; anything else is a CorruptRecordError.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from odradek.client.errors import CorruptRecordError
from odradek.client.record.compression import decompress
from odradek.client.record.header import (
    COMPRESSION_NONE,
    HEADER_SIZE,
    BatchHeader,
    batch_size_at,
    parse_header,
    validate_batch,
)
from odradek.client.record.varint import read_zigzag

Bytes = bytes | bytearray | memoryview
RecordHeaders = tuple[tuple[str, bytes | None], ...]


class Record(NamedTuple):
    """A decoded record; ``key``/``value`` None is a null (``b""`` is an empty one), headers keep their order."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: RecordHeaders = ()


def _read_headers(data: bytes, pos: int) -> tuple[RecordHeaders, int]:
    z, pos = read_zigzag(data, pos)
    if z & 1:
        raise CorruptRecordError("negative record header count")
    headers = []
    for _ in range(z >> 1):
        z, pos = read_zigzag(data, pos)
        if z & 1:
            raise CorruptRecordError("negative record header key length")
        end = pos + (z >> 1)
        name = data[pos:end].decode("utf-8")
        z, pos = read_zigzag(data, end)
        if z == 1:
            value = None
        elif z & 1:
            raise CorruptRecordError("negative record header value length")
        else:
            end = pos + (z >> 1)
            value = data[pos:end]
            pos = end
        headers.append((name, value))
    return tuple(headers), pos


def decode_records(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_timestamp: int | None = None,
) -> list[Record]:
    """Decode ``count`` records that must exactly fill ``data[pos:end]``.

    Timestamps are ``base_timestamp`` + each delta, or ``log_append_timestamp`` for every record when given.
    """
    records: list[Record] = []
    append = records.append
    new = tuple.__new__
    record_type = Record
    no_headers: RecordHeaders = ()
    try:
        for _ in range(count):
            # length
            z = data[pos]
            if z < 0x80:
                pos += 1
            else:
                b = data[pos + 1]
                if b < 0x80:
                    z = (z & 0x7F) | (b << 7)
                    pos += 2
                else:
                    z, pos = read_zigzag(data, pos)
            if z & 1:
                raise CorruptRecordError("negative record length")
            record_end = pos + (z >> 1)
            # attributes (unused), timestamp delta
            z = data[pos + 1]
            if z < 0x80:
                pos += 2
            else:
                z, pos = read_zigzag(data, pos + 1)
            timestamp = base_timestamp + ((z >> 1) ^ -(z & 1))
            # offset delta
            z = data[pos]
            if z < 0x80:
                pos += 1
            else:
                b = data[pos + 1]
                if b < 0x80:
                    z = (z & 0x7F) | (b << 7)
                    pos += 2
                else:
                    z, pos = read_zigzag(data, pos)
            offset = base_offset + ((z >> 1) ^ -(z & 1))
            # key
            z = data[pos]
            if z < 0x80:
                pos += 1
            else:
                b = data[pos + 1]
                if b < 0x80:
                    z = (z & 0x7F) | (b << 7)
                    pos += 2
                else:
                    z, pos = read_zigzag(data, pos)
            if z & 1:
                if z != 1:
                    raise CorruptRecordError("negative key length")
                key = None
            else:
                key = data[pos : pos + (z >> 1)]
                pos += z >> 1
            # value
            z = data[pos]
            if z < 0x80:
                pos += 1
            else:
                b = data[pos + 1]
                if b < 0x80:
                    z = (z & 0x7F) | (b << 7)
                    pos += 2
                else:
                    z, pos = read_zigzag(data, pos)
            if z & 1:
                if z != 1:
                    raise CorruptRecordError("negative value length")
                value = None
            else:
                value = data[pos : pos + (z >> 1)]
                pos += z >> 1
            # headers
            if data[pos] == 0:
                headers = no_headers
                pos += 1
            else:
                headers, pos = _read_headers(data, pos)
            if pos != record_end:
                raise CorruptRecordError(f"record fields end at byte {pos}, its length says {record_end}")
            append(new(record_type, (offset, timestamp, key, value, headers)))
    except IndexError:
        raise CorruptRecordError("record runs past the end of the batch") from None
    except UnicodeDecodeError as exc:
        raise CorruptRecordError(f"record header name is not UTF-8: {exc}") from None
    if pos != end:
        raise CorruptRecordError(f"{count} records end at byte {pos}, the batch at {end}")
    if log_append_timestamp is not None:
        records = [new(record_type, (r[0], log_append_timestamp, r[2], r[3], r[4])) for r in records]
    return records


class RecordBatch:
    """One batch inside a buffer: its parsed ``header`` and, on demand, its records."""

    __slots__ = ("_buf", "header")

    def __init__(self, buf: Bytes, header: BatchHeader) -> None:
        self._buf = buf
        self.header = header

    def records(self) -> list[Record]:
        """Decode the records (decompressing first if needed) with absolute offsets and timestamps."""
        header = self.header
        start = header.position + HEADER_SIZE
        end = header.position + header.size
        if header.compression == COMPRESSION_NONE:
            data = self._buf
            if not isinstance(data, bytes):
                data = bytes(memoryview(data)[start:end])
                start, end = 0, len(data)
        else:
            data = decompress(header.compression, memoryview(self._buf)[start:end])
            start, end = 0, len(data)
        return decode_records(
            data,
            start,
            end,
            header.records_count,
            header.base_offset,
            header.base_timestamp,
            header.max_timestamp if header.is_log_append_time else None,
        )

    def __repr__(self) -> str:
        return f"RecordBatch({self.header!r})"


def read_batches(buf: Bytes, *, validate: bool = True) -> Iterator[RecordBatch]:
    """Yield the batches in ``buf``, which must hold whole batches only.

    With ``validate`` each batch's header and CRC are checked first (``header.validate_batch``); without it only
    the lengths are trusted, for data this process has validated before.
    """
    position = 0
    end = len(buf)
    while position < end:
        if validate:
            header = validate_batch(buf, position)
        else:
            if end - position < HEADER_SIZE or not HEADER_SIZE <= batch_size_at(buf, position) <= end - position:
                raise CorruptRecordError(f"truncated or malformed batch at byte {position}")
            header = parse_header(buf, position)
        yield RecordBatch(buf, header)
        position += header.size
