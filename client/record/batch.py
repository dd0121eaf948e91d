"""Decoding v2 record batches: ``read_batches`` splits a buffer into ``RecordBatch`` views, and
``RecordBatch.records()`` decodes one batch's records with the record codec (``codec.decode_records``). Every
record's fields must end exactly at its length prefix and the records must fill the section exactly with the
header's count; anything else is a CorruptRecordError.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from odradek.client.errors import CorruptRecordError
from odradek.client.record import codec
from odradek.client.record.compression import decompress
from odradek.client.record.header import (
    COMPRESSION_NONE,
    HEADER_SIZE,
    BatchHeader,
    batch_size_at,
    parse_header,
    validate_batch,
)

Bytes = bytes | bytearray | memoryview
RecordHeaders = tuple[tuple[str, bytes | None], ...]


class Record(NamedTuple):
    """A decoded record; ``key``/``value`` None is a null (``b""`` is an empty one), headers keep their order."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: RecordHeaders = ()


def decode_records(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_timestamp: int | None = None,
) -> list[Record]:
    """Decode ``count`` records that must exactly fill ``data[pos:end]`` (the record codec's ``decode_records``).

    Timestamps are ``base_timestamp`` + each delta, or ``log_append_timestamp`` for every record when given.
    """
    return codec.decode_records(
        data, pos, end, count, base_offset, base_timestamp, log_append_timestamp, Record, (), ()
    )


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
