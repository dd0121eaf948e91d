"""The cleaner's view of a batch's records: each record's offset, key, whether its value is null, and where its
bytes are, without building ``Record`` objects or copying values.

The cleaner reads every record of a pass twice (once to build the offset map, once to decide what survives), and
decoding full records (``RecordBatch.records()``) was most of its time. ``scan_batch`` runs the record codec's
``scan_records``, which walks the same varints as its ``decode_records`` and checks exactly what it checks (length
prefixes, field boundaries, the record count filling the section, header names in UTF-8), so a batch the decoder
refuses is refused here with a CorruptRecordError too; it only skips slicing values and building tuples. The
records the cleaner keeps from a batch it must rebuild are then decoded alone, from their spans (``decode_span``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from odradek.client.record.batch import Record, decode_records
from odradek.client.record.codec import scan_records
from odradek.client.record.compression import decompress
from odradek.client.record.header import COMPRESSION_NONE, HEADER_SIZE, BatchHeader
from odradek.client.record.reference import SCAN_PAUSE_EVERY


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


PAUSE_EVERY = SCAN_PAUSE_EVERY  # records between two ``pause`` calls: a fraction of a millisecond of scanning


def _no_pause() -> None:
    pass


def scan_batch(data: bytes, h: BatchHeader, pause: Callable[[], None] = _no_pause) -> ScannedBatch:
    """Scan the records of the batch at ``h.position`` in ``data`` (CorruptRecordError as ``decode_records``).

    ``pause`` is called every PAUSE_EVERY records: the cleaner lets the broker's event loop have the interpreter
    there, so that a batch of many thousand records does not hold it for milliseconds."""
    buf, pos, end = records_section(data, h)
    offsets, keys, starts, tombstones = scan_records(buf, pos, end, h.records_count, h.base_offset, pause)
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
