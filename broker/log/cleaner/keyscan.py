"""The cleaner's view of a batch's records: each record's offset, key, whether its value is null, and where its
bytes are, without building ``Record`` objects or copying values.

The cleaner reads every record of a pass twice (once to build the offset map, once to decide what survives), and
decoding full records (``RecordBatch.records()``) was most of its time. ``scan_batch`` walks the same varints as
the record codec's ``decode_records`` and checks exactly what it checks (length prefixes, field boundaries, the
record count filling the section, header names in UTF-8), so a batch the decoder refuses is refused here with a
CorruptRecordError too; it only skips slicing values and building tuples. The records the cleaner keeps from a
batch it must rebuild are then decoded alone, from their spans (``decode_span``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from odradek.client.errors import CorruptRecordError
from odradek.client.record.batch import Record, decode_records
from odradek.client.record.codec import read_headers
from odradek.client.record.compression import decompress
from odradek.client.record.header import COMPRESSION_NONE, HEADER_SIZE, BatchHeader
from odradek.client.record.varint import read_zigzag


class ScannedBatch(NamedTuple):
    """A batch's records as the cleaner needs them: record i has ``offsets[i]`` and ``keys[i]`` (None for a null
    key) and its bytes are ``data[starts[i]:starts[i + 1]]``; ``tombstones`` lists the i whose value is null."""

    header: BatchHeader
    data: bytes  # the records section's buffer: the segment's bytes, or the decompressed records
    offsets: list[int]
    keys: list[bytes | None]
    starts: list[int]  # len(offsets) + 1 positions
    tombstones: list[int]


def records_section(data: bytes, h: BatchHeader) -> tuple[bytes, int, int]:
    """The buffer holding the batch's encoded records and their [start, end) in it (decompressed if need be)."""
    start = h.position + HEADER_SIZE
    end = h.position + h.size
    if h.compression == COMPRESSION_NONE:
        return data, start, end
    section = decompress(h.compression, memoryview(data)[start:end])
    return section, 0, len(section)


PAUSE_EVERY = 256  # records between two ``pause`` calls: a fraction of a millisecond of scanning


def _no_pause() -> None:
    pass


def scan_batch(data: bytes, h: BatchHeader, pause: Callable[[], None] = _no_pause) -> ScannedBatch:
    """Scan the records of the batch at ``h.position`` in ``data`` (CorruptRecordError as ``decode_records``).

    ``pause`` is called every PAUSE_EVERY records: the cleaner lets the broker's event loop have the interpreter
    there, so that a batch of many thousand records does not hold it for milliseconds."""
    buf, pos, end = records_section(data, h)
    base_offset = h.base_offset
    offsets: list[int] = []
    keys: list[bytes | None] = []
    starts = [pos]
    tombstones: list[int] = []
    add_offset, add_key, add_start = offsets.append, keys.append, starts.append
    # The varint reads are decode_records' inline ones: one and two bytes inline, read_zigzag beyond.
    try:
        for i in range(h.records_count):
            if i & (PAUSE_EVERY - 1) == PAUSE_EVERY - 1:
                pause()
            # length
            z = buf[pos]
            if z < 0x80:
                pos += 1
            else:
                b = buf[pos + 1]
                if b < 0x80:
                    z = (z & 0x7F) | (b << 7)
                    pos += 2
                else:
                    z, pos = read_zigzag(buf, pos)
            if z & 1:
                raise CorruptRecordError("negative record length")
            record_end = pos + (z >> 1)
            # attributes (unused), timestamp delta (skipped: only kept records need it, see decode_span)
            if buf[pos + 1] < 0x80:
                pos += 2
            else:
                pos = read_zigzag(buf, pos + 1)[1]
            # offset delta
            z = buf[pos]
            if z < 0x80:
                pos += 1
            else:
                b = buf[pos + 1]
                if b < 0x80:
                    z = (z & 0x7F) | (b << 7)
                    pos += 2
                else:
                    z, pos = read_zigzag(buf, pos)
            add_offset(base_offset + ((z >> 1) ^ -(z & 1)))
            # key
            z = buf[pos]
            if z < 0x80:
                pos += 1
            else:
                b = buf[pos + 1]
                if b < 0x80:
                    z = (z & 0x7F) | (b << 7)
                    pos += 2
                else:
                    z, pos = read_zigzag(buf, pos)
            if z & 1:
                if z != 1:
                    raise CorruptRecordError("negative key length")
                add_key(None)
            else:
                add_key(buf[pos : pos + (z >> 1)])
                pos += z >> 1
            # value: only its length
            z = buf[pos]
            if z < 0x80:
                pos += 1
            else:
                b = buf[pos + 1]
                if b < 0x80:
                    z = (z & 0x7F) | (b << 7)
                    pos += 2
                else:
                    z, pos = read_zigzag(buf, pos)
            if z & 1:
                if z != 1:
                    raise CorruptRecordError("negative value length")
                tombstones.append(i)
            else:
                pos += z >> 1
            # headers: checked as the decoder checks them (rare, so the decoder's own reader)
            if buf[pos] == 0:
                pos += 1
            else:
                pos = read_headers(buf, pos)[1]
            if pos != record_end:
                raise CorruptRecordError(f"record fields end at byte {pos}, its length says {record_end}")
            add_start(pos)
    except IndexError:
        raise CorruptRecordError("record runs past the end of the batch") from None
    except UnicodeDecodeError as exc:
        raise CorruptRecordError(f"record header name is not UTF-8: {exc}") from None
    if pos != end:
        raise CorruptRecordError(f"{h.records_count} records end at byte {pos}, the batch at {end}")
    return ScannedBatch(h, buf, offsets, keys, starts, tombstones)


def decode_span(scanned: ScannedBatch, first: int, stop: int) -> list[Record]:
    """Records ``first`` .. ``stop - 1`` of a scanned batch, decoded as ``RecordBatch.records()`` decodes them."""
    h = scanned.header
    return decode_records(
        scanned.data,
        scanned.starts[first],
        scanned.starts[stop],
        stop - first,
        h.base_offset,
        h.base_timestamp,
        h.max_timestamp if h.is_log_append_time else None,
    )
