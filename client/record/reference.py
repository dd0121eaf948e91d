"""The reference record codec in pure Python: v2 batches validated for an append, and their records section
walked, decoded and encoded.

Everything that validates a batch for an append, or reads or writes the records inside one, goes through
``record.codec``, which runs these
functions or, when it is built, the native accelerator (``_native.c``) that implements the same functions with the
same results and the same CorruptRecordError messages. This module is the specification the accelerator is tested
against, so it stays complete on its own. Each field is read by one small helper (``_read_varint``,
``_read_record_length``, ``_read_nullable``, ``read_headers``); the loops keep only the speed tricks measured to
matter on the interpreter: ``decode_records`` reads one-byte varints, two-byte record and value lengths and a null
key inline and calls the helpers for the rest, the record walk is a table walk over length prefixes, and encoding
indexes the varint table.

A record, after its length prefix: attributes (one unused byte), timestamp delta, offset delta, key length, key,
value length, value, header count, then per header a name length, the UTF-8 name, a value length and the value.
Every integer is a zigzag varint; a length of -1 is a null.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import length_hint
from typing import Any, TypeVar

from crc32c import crc32c

from odradek.client.errors import CorruptRecordError
from odradek.client.record.layout import (
    APPEND_FIELDS,
    COMPRESSION_MASK,
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MIN_BATCH_LENGTH,
    AppendBatch,
)
from odradek.client.record.varint import NULL_LENGTH, TABLE_LIMIT, VARINT, encode_varint, read_zigzag

Bytes = bytes | bytearray | memoryview
RecordHeaders = tuple[tuple[str, bytes | None], ...]
Headers = Sequence[tuple[str, bytes | None]]
T = TypeVar("T", bound=tuple[Any, ...])

# Smallest encoding of one record: length, attributes, timestamp delta, offset delta, key length, value length,
# header count, one byte each.
MIN_RECORD_SIZE = 7
_MIN_RECORD_BODY = MIN_RECORD_SIZE - 1  # the same, without the length prefix

# ---------------------------------------------------------------------------------------------------------------
# The record walk: where ``count`` records end, reading nothing but their length prefixes.

# Table steps that stop the walk: a length varint of three or more bytes (LONG, added to the record's start so the
# walk can resume there) and an impossible length (BAD, which ends the walk).
_LONG = 1 << 61
_BAD = 1 << 62


def _length_steps() -> list[list[int]]:
    """``_STEPS[b0][b1]``: how far a record whose length varint starts with bytes b0, b1 reaches past its own start
    (prefix size + length), for one- and two-byte varints (records under 8 KiB); _LONG for longer varints, and
    _BAD for a negative length or one below the smallest record. About 0.8 MB, built once."""

    def step(length: int, prefix: int) -> int:
        return _BAD if length < _MIN_RECORD_BODY else prefix + length

    rows = [[_BAD if b0 & 1 else step(b0 >> 1, 1)] * 256 for b0 in range(0x80)]
    for b0 in range(0x80, 0x100):
        if b0 & 1:
            row = [_BAD] * 0x80
        else:
            row = [step(((b0 & 0x7F) | (b1 << 7)) >> 1, 2) for b1 in range(0x80)]
        rows.append(row + [_LONG] * 0x80)
    return rows


_STEPS = _length_steps()


def records_end(buf: Bytes, pos: int, count: int) -> int:
    """Where ``count`` records starting at ``pos`` end, judging by their length prefixes; -1 if one of them has a
    negative length or one below the smallest record, or a length varint over 10 bytes, or if they do not all lie
    within ``buf`` (each record's first two bytes must be there, even with a one-byte length).

    A lone record (the shape of large messages) is measured directly. More records take the table walk, which has
    no branch per record: a record with a long length varint adds _LONG, which ends the walk without losing the
    record's start (the next lookup runs off the buffer, or that was the last record); that record is measured as
    a lone one and the walk resumes after it. ~50 ns a record, ~7 µs for a 16 KiB batch of 100-byte records.
    """
    if count == 1:
        return _lone_record_end(buf, pos)
    steps = _STEPS
    records = iter(range(count))
    while True:
        try:
            for _ in records:
                pos += steps[buf[pos]][buf[pos + 1]]
        except IndexError:
            if pos < _LONG:
                return -1  # ran off the buffer
            records = iter(range(length_hint(records) + 1))  # the failed lookup took the next record's turn
        else:
            if pos < _LONG:
                return pos if pos <= len(buf) else -1
        if pos >= _BAD:
            return -1
        pos = _lone_record_end(buf, pos - _LONG)
        if pos < 0:
            return -1


def _lone_record_end(buf: Bytes, pos: int) -> int:
    """records_end for one record, decoding a long length varint inline."""
    try:
        step = _STEPS[buf[pos]][buf[pos + 1]]
        if step < _LONG:
            end = pos + step
            return end if end <= len(buf) else -1
        if step >= _BAD:
            return -1
        z = buf[pos + 2]
        if z < 0x80:  # three bytes (records under 1 MiB); the first two have their high bit set
            z = z << 14 | (buf[pos + 1] & 0x7F) << 7 | buf[pos] & 0x7F
            pos += 3
        else:
            z, pos = read_zigzag(buf, pos)
    except (IndexError, CorruptRecordError):
        return -1
    if z & 1 or z >> 1 < _MIN_RECORD_BODY:
        return -1
    end = pos + (z >> 1)
    return end if end <= len(buf) else -1


# ---------------------------------------------------------------------------------------------------------------
# Batch validation for an append.


def append_batches(buf: Bytes, view: memoryview, max_batch_size: int, check_records: bool) -> list[AppendBatch] | int:
    """The AppendBatch of every batch in ``buf`` (``view`` is ``memoryview(buf)``), or the position of the first
    batch that is not fit to append: fewer than a header's bytes left, a batch length below the header or running
    past the buffer, over ``max_batch_size``, a magic other than 2, no offset (last offset delta < 0), a record
    count below 0 or above the offsets, a CRC32C mismatch, or an uncompressed batch whose records do not fit:
    with ``check_records`` their length prefixes must tile the record bytes with exactly ``records_count``
    records (records_end), without it ``records_count`` smallest records must fit.

    The caller finds the reason for a failed batch with header.validate_batch; this runs on every produce, so it
    only decides: one unpack of the needed fields and one chained condition, cheapest tests first, the CRC over a
    view slice (no copy) before the record walk. An empty ``buf`` gives an empty list."""
    batches: list[AppendBatch] = []
    unpack = APPEND_FIELDS.unpack_from
    position, end = 0, len(view)
    while position < end:
        if end - position < HEADER_SIZE:
            return position
        base, length, epoch, magic, crc, attributes, delta, max_ts, pid, pepoch, seq, count = unpack(view, position)
        size = length + LOG_OVERHEAD
        batch_end = position + size
        if not (
            length >= MIN_BATCH_LENGTH
            and size <= max_batch_size
            and batch_end <= end
            and magic == MAGIC
            and delta >= 0
            and 0 <= count <= delta + 1
            and crc32c(view[position + CRC_START : batch_end]) == crc
            and (
                attributes & COMPRESSION_MASK
                or (
                    records_end(buf, position + HEADER_SIZE, count) == batch_end
                    if check_records
                    else count * MIN_RECORD_SIZE <= size - HEADER_SIZE
                )
            )
        ):
            return position
        batches.append((base, size, delta, max_ts, count, epoch, pid, pepoch, seq))
        position = batch_end
    return batches


# ---------------------------------------------------------------------------------------------------------------
# Decoding.


def _read_varint(data: Bytes, pos: int) -> tuple[int, int]:
    """The raw (still zigzagged) varint at ``pos`` and the position after it."""
    z = data[pos]
    if z < 0x80:
        return z, pos + 1
    return _read_varint_after(data, pos, z)


def _read_varint_after(data: Bytes, pos: int, first: int) -> tuple[int, int]:
    """``_read_varint`` when its first byte, ``first``, has been read and has its high bit set: two-byte varints
    (every length and delta under 8 KiB) are read here, longer ones by ``read_zigzag``."""
    b = data[pos + 1]
    if b < 0x80:
        return (first & 0x7F) | (b << 7), pos + 2
    return read_zigzag(data, pos)


def _read_record_length(data: Bytes, pos: int) -> tuple[int, int]:
    """The length prefix of the record at ``pos``: where its fields start, and where they must end."""
    z, pos = _read_varint(data, pos)
    if z & 1:
        raise CorruptRecordError("negative record length")
    return pos, pos + (z >> 1)


def _read_nullable_length(data: Bytes, pos: int, field: str) -> tuple[int, int]:
    """The length of a nullable bytes field (``field`` names it in the error): -1 for a null, and the position
    after the length."""
    z, pos = _read_varint(data, pos)
    if z & 1:
        if z != 1:  # a null in more than one byte is not canonical, but -1 all the same
            raise CorruptRecordError(f"negative {field} length")
        return -1, pos
    return z >> 1, pos


def _read_nullable(data: bytes, pos: int, field: str) -> tuple[bytes | None, int]:
    """A nullable length-prefixed bytes field (``field`` names it in the error) and the position after it. Past
    the end of ``data`` the slice comes out short; the next read raises IndexError."""
    n, pos = _read_nullable_length(data, pos, field)
    if n < 0:
        return None, pos
    return data[pos : pos + n], pos + n


def read_headers(data: bytes, pos: int) -> tuple[RecordHeaders, int]:
    """The record headers at ``pos`` (count, then name/value pairs) and the position after them."""
    z, pos = _read_varint(data, pos)
    if z & 1:
        raise CorruptRecordError("negative record header count")
    headers = []
    for _ in range(z >> 1):
        z, pos = _read_varint(data, pos)
        if z & 1:
            raise CorruptRecordError("negative record header key length")
        end = pos + (z >> 1)
        name = data[pos:end].decode("utf-8")
        value, pos = _read_nullable(data, end, "record header value")
        headers.append((name, value))
    return tuple(headers), pos


_UNZIGZAG = [(z >> 1) ^ -(z & 1) for z in range(0x80)]  # one-byte zigzag varint -> value


def decode_records(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    timestamp: int | None,
    record_type: type[T],
    leading: tuple[Any, ...],
    middle: tuple[Any, ...],
) -> list[T]:
    """Decode ``count`` records that must exactly fill ``data[pos:end]``, each as
    ``record_type(*leading, offset, timestamp, *middle, key, value, headers)``: one loop for ``batch.Record``
    (no leading or middle fields) and the consumer's ``ConsumerRecord`` (topic and partition leading, the
    timestamp type in the middle), so that each record is one tuple built once.

    Offsets are ``base_offset`` + each delta; timestamps ``base_timestamp`` + each delta, or ``timestamp`` for
    every record when it is given (LogAppendTime). Fields that do not end at their record's length prefix, records
    that do not fill the section with ``count``, a negative length or a header name that is not UTF-8 raise
    CorruptRecordError; so does a read past the end of ``data`` (which may run on past ``end``).
    """
    records: list[T] = []
    append = records.append
    new = tuple.__new__
    unzigzag = _UNZIGZAG
    no_headers: RecordHeaders = ()
    lead0 = lead1 = middle0 = None
    if not leading and not middle:
        shape = 0  # Record
    elif len(leading) == 2 and len(middle) == 1:
        shape = 1  # ConsumerRecord
        (lead0, lead1), (middle0,) = leading, middle
    else:
        shape = 2
    # One-byte varints, and the two-byte record and value lengths of records from 64 B to 8 KiB, are read here;
    # longer ones through _read_varint_after. Reading every field through the helpers, as scan_records does, took
    # about a third off this loop's rate, and the pure-Python decode must stay 2x kafka-python's
    # (bench/record_bench.py).
    try:
        for _ in range(count):
            z = data[pos]  # length: two bytes for records of 64 B to 8 KiB, read inline too
            if z < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (z & 0x7F) | data[pos + 1] << 7
                pos += 2
            else:
                z, pos = _read_varint_after(data, pos, z)
            if z & 1:
                raise CorruptRecordError("negative record length")
            record_end = pos + (z >> 1)
            z = data[pos + 1]  # after the unused attributes byte: the timestamp delta
            if z < 0x80:
                pos += 2
                record_timestamp = base_timestamp + unzigzag[z]
            else:
                z, pos = _read_varint_after(data, pos + 1, z)
                record_timestamp = base_timestamp + ((z >> 1) ^ -(z & 1))
            z = data[pos]  # offset delta
            if z < 0x80:
                pos += 1
                offset = base_offset + unzigzag[z]
            else:
                z, pos = _read_varint_after(data, pos, z)
                offset = base_offset + ((z >> 1) ^ -(z & 1))
            if data[pos] == 1:  # key length: a null, the common case
                key = None
                pos += 1
            else:
                key, pos = _read_nullable(data, pos, "key")
            z = data[pos]  # value length: as the record length
            if z < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                z = (z & 0x7F) | data[pos + 1] << 7
                pos += 2
            else:
                z, pos = _read_varint_after(data, pos, z)
            if z & 1:
                if z != 1:
                    raise CorruptRecordError("negative value length")
                value = None
            else:
                value = data[pos : pos + (z >> 1)]
                pos += z >> 1
            if data[pos] == 0:
                headers = no_headers
                pos += 1
            else:
                headers, pos = read_headers(data, pos)
            if pos != record_end:
                raise CorruptRecordError(f"record fields end at byte {pos}, its length says {record_end}")
            if shape == 1:  # the two shapes in use, spelled out: a starred tuple display costs ~15% of the loop
                append(new(record_type, (lead0, lead1, offset, record_timestamp, middle0, key, value, headers)))
            elif shape == 0:
                append(new(record_type, (offset, record_timestamp, key, value, headers)))
            else:
                append(new(record_type, (*leading, offset, record_timestamp, *middle, key, value, headers)))
    except IndexError:
        raise CorruptRecordError("record runs past the end of the batch") from None
    except UnicodeDecodeError as exc:
        raise CorruptRecordError(f"record header name is not UTF-8: {exc}") from None
    if pos != end:
        raise CorruptRecordError(f"{count} records end at byte {pos}, the batch at {end}")
    if timestamp is not None:  # LogAppendTime (rare): every record gets the batch's timestamp
        at = len(leading) + 1
        records = [new(record_type, (*r[:at], timestamp, *r[at + 1 :])) for r in records]
    return records


def _no_pause() -> None:
    pass


SCAN_PAUSE_EVERY = 256  # scan_records calls ``pause`` before records 255, 511, ...


def scan_records(
    data: bytes, pos: int, end: int, count: int, base_offset: int, pause: Callable[[], None] = _no_pause
) -> tuple[list[int], list[bytes | None], list[int], list[int]]:
    """Walk ``count`` records filling ``data[pos:end]`` as ``decode_records`` does, with the same checks and
    errors, but return only what the log cleaner needs: each record's offset, its key (None for a null one), the
    positions where records start (``count + 1``, the last one ``end``) and the indexes of records with a null
    value. No record tuple is built and no value copied. ``pause`` is called every SCAN_PAUSE_EVERY records (the
    cleaner lets the broker's event loop have the interpreter there).
    """
    offsets: list[int] = []
    keys: list[bytes | None] = []
    starts = [pos]
    tombstones: list[int] = []
    try:
        for i in range(count):
            if i & (SCAN_PAUSE_EVERY - 1) == SCAN_PAUSE_EVERY - 1:
                pause()
            pos, record_end = _read_record_length(data, pos)
            pos = _read_varint(data, pos + 1)[1]  # after the unused attributes byte: the timestamp delta, skipped
            z, pos = _read_varint(data, pos)  # offset delta
            offsets.append(base_offset + ((z >> 1) ^ -(z & 1)))
            key, pos = _read_nullable(data, pos, "key")
            keys.append(key)
            n, pos = _read_nullable_length(data, pos, "value")  # only the length: the value is not copied
            if n < 0:
                tombstones.append(i)
            else:
                pos += n
            if data[pos] == 0:  # headers: checked as the decoder checks them
                pos += 1
            else:
                pos = read_headers(data, pos)[1]
            if pos != record_end:
                raise CorruptRecordError(f"record fields end at byte {pos}, its length says {record_end}")
            starts.append(pos)
    except IndexError:
        raise CorruptRecordError("record runs past the end of the batch") from None
    except UnicodeDecodeError as exc:
        raise CorruptRecordError(f"record header name is not UTF-8: {exc}") from None
    if pos != end:
        raise CorruptRecordError(f"{count} records end at byte {pos}, the batch at {end}")
    return offsets, keys, starts, tombstones


# ---------------------------------------------------------------------------------------------------------------
# Encoding.


def _encode_headers(headers: Headers) -> bytes:
    parts: list[Bytes] = [encode_varint(len(headers))]
    for name, value in headers:
        name_bytes = name.encode("utf-8")
        parts.append(encode_varint(len(name_bytes)))
        parts.append(name_bytes)
        if value is None:
            parts.append(NULL_LENGTH)
        else:
            parts.append(encode_varint(len(value)))
            parts.append(value)
    return b"".join(parts)


def encode_record(
    offset_delta: int, timestamp_delta: int, key: Bytes | None, value: Bytes | None, headers: Headers = ()
) -> bytes:
    """One record, length prefix included. The deltas are int64s (Kafka's varlong): a wider one raises
    OverflowError (``encode_varint``), as in the native codec, rather than write a record that decodes elsewhere."""
    table = VARINT
    limit = TABLE_LIMIT
    parts: list[Bytes] = [
        b"\x00",  # attributes: unused in v2 records
        table[timestamp_delta] if 0 <= timestamp_delta < limit else encode_varint(timestamp_delta),
        table[offset_delta] if 0 <= offset_delta < limit else encode_varint(offset_delta),
    ]
    if key is None:
        parts.append(NULL_LENGTH)
    else:
        n = len(key)
        parts.append(table[n] if n < limit else encode_varint(n))
        parts.append(key)
    if value is None:
        parts.append(NULL_LENGTH)
    else:
        n = len(value)
        parts.append(table[n] if n < limit else encode_varint(n))
        parts.append(value)
    parts.append(_encode_headers(headers) if headers else b"\x00")
    body = b"".join(parts)
    n = len(body)
    return (table[n] if n < limit else encode_varint(n)) + body


def encode_records(
    values: Sequence[Bytes | None],
    keys: Sequence[Bytes | None] | None,
    timestamp_deltas: Sequence[int] | None,
    headers: Sequence[Headers] | None,
) -> bytes:
    """A whole records section: record i is ``encode_record(i, timestamp_deltas[i], keys[i], values[i],
    headers[i])``, with 0, null and no headers where those are None. The sequences have ``len(values)`` items."""
    if timestamp_deltas is None and not (headers and any(headers)):
        try:
            return b"".join(_records_one_timestamp(values, keys))
        except (IndexError, TypeError):
            pass  # a long or None value: take the general path
    return b"".join(
        [
            encode_record(
                i,
                timestamp_deltas[i] if timestamp_deltas is not None else 0,
                keys[i] if keys is not None else None,
                values[i],
                headers[i] if headers is not None else (),
            )
            for i in range(len(values))
        ]
    )


def _records_one_timestamp(values: Sequence[Bytes | None], keys: Sequence[Bytes | None] | None) -> list[Bytes]:
    """The records section's pieces when every record has timestamp delta 0 and no headers: the producer's
    common case, one loop with no calls but ``len``. Raises IndexError for a value past the varint tables (the
    caller falls back to the general encoder) and TypeError for a None value (a tombstone)."""
    table = VARINT
    offsets = table
    if len(values) > TABLE_LIMIT:
        offsets = table + [encode_varint(n) for n in range(TABLE_LIMIT, len(values))]
    pieces: list[Bytes] = []
    extend = pieces.extend
    # length, attributes 0 + timestamp delta 0, offset delta, key length (b"\x01": null), key, value length, value,
    # 0 headers
    for offset_delta, value in enumerate(values):
        if value is None:
            raise TypeError("a tombstone")
        key = None if keys is None else keys[offset_delta]
        n = len(value)
        value_length = table[n]
        delta = offsets[offset_delta]
        if key is None:
            extend(
                (
                    table[4 + len(delta) + len(value_length) + n],
                    b"\x00\x00",
                    delta,
                    b"\x01",
                    value_length,
                    value,
                    b"\x00",
                )
            )
        else:
            k = len(key)
            key_length = table[k]
            extend(
                (
                    table[3 + len(delta) + len(key_length) + k + len(value_length) + n],
                    b"\x00\x00",
                    delta,
                    key_length,
                    key,
                    value_length,
                    value,
                    b"\x00",
                )
            )
    return pieces
