"""atheris fuzz target: the native record decoder, walk, cleaner scan and append validation against the reference
on the same bytes.

Run it directly (libFuzzer flags pass through, e.g. ``-max_total_time=20``); tests/record/test_codec_memory.py runs
it for a bounded time. An input is a record count byte, a mode byte, then the records section; the section is also
validated as a buffer of batches, with the first batch's CRC recomputed (else no input would pass the CRC check
and reach the record walk behind it). The reference's
functions are instrumented, so its branches guide the fuzzer towards inputs that take different paths; a
disagreement (result, exception type or message) raises AssertionError, which atheris reports as a crash.
"""

from __future__ import annotations

import os
import struct
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import atheris
from crc32c import crc32c

from odradek.client.record import _native, reference, varint
from odradek.client.record.batch import Record
from odradek.client.record.builder import encode_batch
from odradek.client.record.layout import CRC_START, HEADER_SIZE, LOG_OVERHEAD
from odradek.client.structs import ConsumerRecord

for function in (
    reference.append_batches,
    reference.records_end,
    reference._lone_record_end,
    reference.decode_records,
    reference.scan_records,
    reference.read_headers,
    varint.read_zigzag,
):
    atheris.instrument_func(function)


def outcome(function: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
    try:
        result = function(*args)
    except Exception as exc:
        return ("error", type(exc), str(exc))
    if isinstance(result, list):
        return ("ok", [(type(r), tuple(r)) for r in result])
    return ("ok", result)


def check(data: bytes) -> None:
    if len(data) < 2:
        return
    count = data[0] - 2  # -2 .. 253
    mode = data[1]
    section = data[2:]
    pos = mode & 0x07 if mode & 0x08 else 0
    end = len(section) - (mode >> 4 & 0x03)
    fixed = 1_700_000_000_000 if mode & 0x40 else None
    args = (section, pos, count)
    assert outcome(_native.records_end, *args) == outcome(reference.records_end, *args)
    if mode & 0x80:
        shape: tuple[Any, ...] = (ConsumerRecord, ("topic", 7), (1 if fixed else 0,))
    else:
        shape = (Record, (), ())
    args = (section, pos, end, count, 2**40, 1_600_000_000_000, fixed, *shape)
    assert outcome(_native.decode_records, *args) == outcome(reference.decode_records, *args)
    args = (section, pos, end, count, -5, _no_pause)
    assert outcome(_native.scan_records, *args) == outcome(reference.scan_records, *args)
    batches = with_first_crc(section)
    args = (batches, memoryview(batches), 2**63 - 1 if mode & 0x20 else len(batches) // 2, bool(mode & 0x01))
    assert outcome(_native.append_batches, *args) == outcome(reference.append_batches, *args)


def with_first_crc(data: bytes) -> bytes:
    """``data`` with the CRC of the batch at its start set to match, as far as its length field and the bytes go."""
    if len(data) < HEADER_SIZE:
        return data
    (length,) = struct.unpack_from(">i", data, 8)
    end = min(len(data), max(CRC_START, length + LOG_OVERHEAD))
    return data[:17] + struct.pack(">I", crc32c(data[CRC_START:end])) + data[CRC_START:]


def _no_pause() -> None:
    pass


def seed_corpus() -> str:
    """A directory of a few valid sections (with and without keys, headers, long values), and one of two whole
    batches (validated with the record walk), to start from."""
    corpus = tempfile.mkdtemp(prefix="codec-corpus-")
    sections = [
        reference.encode_records([b"v" * 10] * 3, None, None, None),
        reference.encode_records([b"a", None], [b"k", None], [0, -5], [[("h", b"x")], [("", None)]]),
        reference.encode_records([b"x" * 300], [b"key"], [2**40], None),
    ]
    for i, (count, section) in enumerate(zip((3, 2, 1), sections)):
        with open(os.path.join(corpus, f"seed{i}"), "wb") as out:
            out.write(bytes([2 + count, 0]) + section)
    batches = encode_batch([b"v" * 10] * 3, timestamps=1) + encode_batch([b"w"], [b"k"], 2, producer_id=5)
    with open(os.path.join(corpus, "batches"), "wb") as out:
        out.write(bytes([2, 0x21]) + batches)
    return corpus


if __name__ == "__main__":
    atheris.Setup([*sys.argv, seed_corpus()], check)
    atheris.Fuzz()
