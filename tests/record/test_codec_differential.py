"""The native record codec against the pure-Python reference: on the same inputs (valid sections from the encoder,
and corrupt, truncated, oversized and adversarial ones) both must return equal results, or raise the same
exception type with the same message.

The native module is imported directly; the tests skip where it is not built and with ODRADEK_NO_EXTENSIONS=1 (the
run of the suites on the reference alone). ``ODRADEK_NATIVE_PATH`` points them at another build of the module (the
AddressSanitizer test's), ``ODRADEK_CODEC_EXAMPLES`` sets the examples per property.
"""

from __future__ import annotations

import importlib.util
import os
import struct
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.client.record import reference
from odradek.client.record.batch import Record
from odradek.client.record.builder import encode_batch
from odradek.client.record.codec import NO_EXTENSIONS_ENV
from odradek.client.record.layout import CRC_START, HEADER_SIZE
from odradek.client.structs import ConsumerRecord, TopicPartition


def _load_native() -> ModuleType | None:
    path = os.environ.get("ODRADEK_NATIVE_PATH")
    if not path and os.environ.get(NO_EXTENSIONS_ENV, "") not in ("", "0"):
        return None
    if path:
        spec = importlib.util.spec_from_file_location("odradek.client.record._native", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    try:
        from odradek.client.record import _native
    except ImportError:
        return None
    return _native


native = _load_native()
pytestmark = pytest.mark.skipif(
    native is None,
    reason=f"the native record codec is disabled ({NO_EXTENSIONS_ENV}) or not built (no C compiler at install)",
)

EXAMPLES = int(os.environ.get("ODRADEK_CODEC_EXAMPLES", "150"))
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

INT64 = st.integers(-(2**63), 2**63 - 1)


def outcome(function: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
    """("ok", result with each item's type) or ("error", exception type, message)."""
    try:
        result = function(*args)
    except Exception as exc:  # the comparison is the point: any exception, typed
        return ("error", type(exc), str(exc))
    if isinstance(result, list):
        return ("ok", [(type(r), tuple(r), [type(f) for f in r]) for r in result])
    return ("ok", type(result), result)


def same(name: str, *args: Any) -> tuple[Any, ...]:
    """Run ``name`` from both codecs; assert identical outcomes and return it."""
    expected = outcome(getattr(reference, name), *args)
    assert outcome(getattr(native, name), *args) == expected
    return expected


# -- inputs -------------------------------------------------------------------------------------------------------

LENGTHS = st.one_of(st.integers(0, 40), st.sampled_from([63, 64, 127, 128, 300, 8191, 8192, 9000, 20_000]))
PAYLOADS = st.one_of(st.none(), LENGTHS.map(lambda n: bytes(i & 0xFF for i in range(n))), st.binary(max_size=50))
HEADER_NAMES = st.text(max_size=8)
HEADERS = st.lists(st.tuples(HEADER_NAMES, st.one_of(st.none(), st.binary(max_size=20))), max_size=3)
DELTAS = st.one_of(st.integers(-100, 10_000), INT64)


@st.composite
def records(draw: st.DrawFn) -> list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    n = draw(st.integers(1, 6))
    return [(i, draw(DELTAS), draw(PAYLOADS), draw(PAYLOADS), draw(st.one_of(st.just([]), HEADERS))) for i in range(n)]


def uvarint(z: int, width: int = 0) -> bytes:
    """``z`` as an unsigned varint, padded to ``width`` bytes (non-canonical) when wider than needed."""
    width = max(width, 1, (z.bit_length() + 6) // 7)
    return bytes((z >> 7 * i) & 0x7F | (0x80 if i < width - 1 else 0) for i in range(width))


# Byte strings that break records: 10-byte varints (largest legal ones, 70 bits), 11-byte ones, negative lengths
# (odd zigzag values), a length of 2**61 + 10, non-canonical zeros, long runs of continuation bytes.
ADVERSARIAL = st.sampled_from(
    [
        uvarint(2**70 - 1),
        uvarint(2**70 - 2),
        uvarint(2**64),
        b"\xff" * 10 + b"\x01",
        b"\x80" * 10 + b"\x00",
        b"\xff" * 11,
        b"\x03",
        b"\x01",
        b"\x7f",
        uvarint(2 * (2**61 + 10), 9),
        uvarint(0, 3),
        uvarint(2, 5),
        b"\x02\xff\xfe",
        b"\xc3\x28",
        b"\x00",
        b"\x80",
    ]
)


@st.composite
def damaged(draw: st.DrawFn, section: bytes) -> bytes:
    """``section`` with a few edits: byte flips, truncation, adversarial bytes spliced in, random bytes."""
    data = bytearray(section)
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["flip", "truncate", "splice", "insert", "append"]))
        at = draw(st.integers(0, len(data))) if data else 0
        if kind == "flip" and data:
            at = min(at, len(data) - 1)
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "truncate":
            del data[at:]
        elif kind == "splice":
            piece = draw(ADVERSARIAL)
            data[at : at + len(piece)] = piece
        elif kind == "insert":
            data[at:at] = draw(ADVERSARIAL)
        else:
            data += draw(st.binary(max_size=12))
    return bytes(data)


@st.composite
def raw_record(draw: st.DrawFn) -> bytes:
    """A record put together field by field, where every varint may lie (lengths that disagree with the bytes,
    negative or huge values, non-canonical widths)."""

    def z(default: int) -> bytes:
        value = draw(
            st.one_of(
                st.just(default),
                st.just(default),
                st.integers(0, 300),
                st.integers(0, 2**70 - 1),
                st.sampled_from([1, 3, 2**63, 2**64 - 1, 2**70 - 1]),
            )
        )
        return uvarint(value, draw(st.sampled_from([0, 0, 0, 2, 10])))

    key = draw(st.binary(max_size=6))
    value = draw(st.binary(max_size=6))
    headers = b""
    count = draw(st.integers(0, 2))
    for _ in range(count):
        name = draw(st.sampled_from([b"h", b"", b"\xff", b"\xed\xa0\x80", "é".encode()]))
        header_value = draw(st.binary(max_size=4))
        headers += z(2 * len(name)) + name + z(2 * len(header_value)) + header_value
    body = (
        bytes([draw(st.integers(0, 255))])  # attributes: any byte, unread
        + z(draw(st.integers(0, 200)))
        + z(draw(st.integers(0, 200)))
        + z(2 * len(key))
        + key
        + z(2 * len(value))
        + value
        + z(2 * count)
        + headers
    )
    return z(2 * len(body)) + body


def encode(recs: list[Any]) -> bytes:
    return b"".join(reference.encode_record(*r) for r in recs)


# -- encoding ------------------------------------------------------------------------------------------------------


@PROPERTY
@given(INT64, DELTAS, PAYLOADS, PAYLOADS, HEADERS, st.sampled_from([bytes, bytearray, memoryview]))
def test_encode_record(
    offset_delta: int, timestamp_delta: int, key: Any, value: Any, headers: Any, kind: type[Any]
) -> None:
    if value is not None:
        value = kind(value)
    same("encode_record", offset_delta, timestamp_delta, key, value, headers)
    same("encode_record", offset_delta, timestamp_delta, key, value)


@PROPERTY
@given(st.lists(PAYLOADS, min_size=1, max_size=20), st.data())
def test_encode_records(values: list[Any], data: st.DataObject) -> None:
    n = len(values)
    keys = data.draw(st.one_of(st.none(), st.lists(PAYLOADS, min_size=n, max_size=n)))
    deltas = data.draw(st.one_of(st.none(), st.lists(DELTAS, min_size=n, max_size=n)))
    headers = data.draw(st.one_of(st.none(), st.lists(st.one_of(st.just([]), HEADERS), min_size=n, max_size=n)))
    result = same("encode_records", values, keys, deltas, headers)
    assert result[0] == "ok"


def test_encode_errors_are_typed_alike() -> None:
    """Wrong input types: the same exception type (the messages are the interpreter's own, and differ)."""
    assert same("encode_record", 0, 0, None, None, [("\ud800", None)])[1] is UnicodeEncodeError
    for name, args in [("encode_record", (0, 0, 5, None)), ("encode_records", ([b"x", 5], None, None, None))]:
        expected = outcome(getattr(reference, name), *args)
        assert expected[:2] == outcome(getattr(native, name), *args)[:2] == ("error", TypeError)


INT64_EDGES = [-(2**63), -(2**63) + 1, 2**63 - 1]
BEYOND_INT64 = [-(2**63) - 1, 2**63, 2**64 + 5, -(2**69)]


@pytest.mark.parametrize("delta", INT64_EDGES + BEYOND_INT64)
def test_deltas_are_int64_in_both_encoders(delta: int) -> None:
    """A record's deltas are zigzag varints of int64s (Kafka's varlong): both codecs encode the int64 edges to the
    same bytes, which decode back to them, and refuse one past an edge with the same OverflowError and message,
    never writing a record whose offset or timestamp decodes to another value."""
    encodings = [  # (function, arguments, the record's (offset, timestamp) at base offset and timestamp 0)
        ("encode_record", (delta, 0, b"k", b"v"), (delta, 0)),
        ("encode_record", (0, delta, None, b"v", [("h", b"x")]), (0, delta)),
        ("encode_records", ([b"v"], None, [delta], None), (0, delta)),
    ]
    for name, args, position in encodings:
        result = same(name, *args)
        if delta not in INT64_EDGES:
            assert result[:2] == ("error", OverflowError)
            continue
        section = result[2]
        (record,) = reference.decode_records(section, 0, len(section), 1, 0, 0, None, Record, (), ())
        assert (record.offset, record.timestamp) == position
        same("decode_records", section, 0, len(section), 1, 0, 0, None, Record, (), ())


# -- decoding and the walk -------------------------------------------------------------------------------------------


def scan(implementation: ModuleType, *args: Any) -> tuple[Any, int]:
    """scan_records with a pause that counts its calls."""
    pauses = []
    result = implementation.scan_records(*args, lambda: pauses.append(1))
    return result, len(pauses)


def check_section(data: bytes, pos: int, end: int, count: int, base_offset: int, base_ts: int, fixed: Any) -> None:
    same("records_end", data, pos, count)
    args = (data, pos, end, count, base_offset)
    assert outcome(scan, native, *args) == outcome(scan, reference, *args)
    same("decode_records", data, pos, end, count, base_offset, base_ts, fixed, Record, (), ())
    same(
        "decode_records",
        data,
        pos,
        end,
        count,
        base_offset,
        base_ts,
        fixed,
        ConsumerRecord,
        TopicPartition("t", 3),
        (0 if fixed is None else 1,),
    )


@PROPERTY
@given(records(), INT64, INT64, st.one_of(st.none(), INT64), st.binary(max_size=4), st.binary(max_size=4))
def test_valid_sections(recs: Any, base_offset: int, base_ts: int, fixed: Any, before: bytes, after: bytes) -> None:
    section = encode(recs)
    data = before + section + after
    pos, end = len(before), len(before) + len(section)
    check_section(data, pos, end, len(recs), base_offset, base_ts, fixed)
    assert reference.records_end(data, pos, len(recs)) == end
    decoded = reference.decode_records(data, pos, end, len(recs), base_offset, base_ts, fixed, Record, (), ())
    assert [r.value for r in decoded] == [r[3] for r in recs]


@PROPERTY
@given(records(), st.data())
def test_damaged_sections(recs: Any, data: st.DataObject) -> None:
    section = data.draw(damaged(encode(recs)))
    count = len(recs) + data.draw(st.sampled_from([0, 0, 0, -1, 1, 2, -len(recs), 1000]))
    suffix = data.draw(st.sampled_from([b"", b"\x00" * 8, bytes(range(256))]))
    end = len(section) + data.draw(st.sampled_from([0, 0, -1, 1, 7]))
    check_section(section + suffix, 0, end, count, 0, 1_700_000_000_000, None)


@PROPERTY
@given(st.lists(raw_record(), min_size=1, max_size=4), st.data())
def test_adversarial_records(raw: list[bytes], data: st.DataObject) -> None:
    section = b"".join(raw)
    count = len(raw) + data.draw(st.sampled_from([0, 0, -1, 1]))
    fixed = data.draw(st.sampled_from([None, 5]))
    check_section(section, 0, len(section), count, data.draw(INT64), data.draw(INT64), fixed)


def test_scan_pauses_alike() -> None:
    values = [b"v", None, b"w"] * 200
    section = reference.encode_records(values, None, None, None)
    result = outcome(scan, native, section, 0, len(section), len(values), 7)
    assert result == outcome(scan, reference, section, 0, len(section), len(values), 7)
    (offsets, keys, starts, tombstones), pauses = result[2]
    assert pauses == 2 and offsets == list(range(7, 607)) and tombstones == list(range(1, 600, 3))
    assert keys == [None] * 600 and starts[0] == 0 and starts[-1] == len(section)


@PROPERTY
@given(st.binary(max_size=120), st.integers(-2, 40), st.integers(0, 130))
def test_arbitrary_bytes(section: bytes, count: int, pos: int) -> None:
    check_section(section, min(pos, len(section) + 2), len(section), count, 0, 0, None)


def test_known_edge_cases() -> None:
    huge = uvarint(2**70 - 2)  # a 70-bit zigzag value: timestamps and offsets beyond int64
    body = b"\x00" + huge + huge + b"\x01\x01\x00"
    cases = [
        uvarint(2 * len(body)) + body,  # valid, with timestamp and offset deltas of 2**69 - 1
        b"\x0e\x00\x00\x00\x01\x01\x02" + huge + b"h" + b"\x01",  # header name length past any buffer
        b"\x10\x00\x00\x00\x01\x01\x02\x02\xff\x01",  # header name not UTF-8
        b"\x14\x00\x00\x00\x01\x01\x02\x02h" + uvarint(80) + b"ab",  # header value past the buffer
        b"\x0e\x00\x00\x00\x01\x01\x02\x00\x01",  # one header "" -> null, record end mismatch
        uvarint(2 * (2**61 + 10), 9) + bytes(10),  # the 2**61 length
        b"\xff" * 11,  # an overlong varint
        b"\x10\x00\x00\x00\x81\x00\x02v\x00",  # a null key in two bytes (found by the fuzz target)
        b"\x10\x00\x00\x00\x02k\x81\x00\x00",  # a null value in two bytes
        b"",
    ]
    for section in cases:
        for count in (0, 1, 2):
            check_section(section, 0, len(section), count, 2**63 - 1, -(2**63), None)
    assert outcome(reference.decode_records, cases[0], 0, len(cases[0]), 1, 0, 0, None, Record, (), ())[1][0][1][
        :2
    ] == (2**69 - 1, 2**69 - 1)


# -- batch validation for an append --------------------------------------------------------------------------------

# Header fields an edit may set (offset in the header, struct format) and values that break them.
HEADER_EDITS = st.sampled_from(
    [
        (8, ">i", [-1, 0, 48, 49, 50, 2**31 - 1, -(2**31)]),  # batch_length
        (16, ">b", [0, 1, 3, -1]),  # magic
        (21, ">h", [0, 1, 3, 4, 7, 0x20, -1]),  # attributes: compression bits, control flag
        (23, ">i", [-1, 0, 1, 5, 2**31 - 1, -(2**31)]),  # last_offset_delta
        (57, ">i", [-1, 0, 1, 2, 5, 1000, 2**31 - 1, -(2**31)]),  # records_count
        (0, ">q", [-1, 2**63 - 1]),  # base_offset
        (43, ">q", [-(2**63), 7]),  # producer_id
    ]
)


def fix_crc(batch: bytearray, at: int = 0) -> None:
    """Recompute the CRC of the batch at ``at`` as its length field says (clamped to the buffer), so that an edit
    behind it reaches the checks after the CRC."""
    (length,) = struct.unpack_from(">i", batch, at + 8)
    end = min(len(batch), max(at + CRC_START, at + length + 12))
    struct.pack_into(">I", batch, at + 17, crc32c(bytes(batch[at + CRC_START : end])))


@st.composite
def append_buffers(draw: st.DrawFn) -> bytes:
    """One to three batches from the encoder, then edits: header fields set to breaking values, record bytes
    damaged, truncation or extra bytes; the CRC is recomputed after most edits so the later checks are reached."""
    out = bytearray()
    for _ in range(draw(st.integers(1, 3))):
        recs = draw(records())
        batch = encode_batch(
            [r[3] for r in recs],
            [r[2] for r in recs],
            1_700_000_000_000,
            [r[4] for r in recs],
            compression=draw(st.sampled_from([0, 0, 0, "gzip", "lz4"])),
            base_offset=draw(st.integers(0, 2**40)),
            producer_id=draw(st.sampled_from([-1, 7, 2**62])),
            producer_epoch=draw(st.sampled_from([-1, 0, 32767])),
            base_sequence=draw(st.sampled_from([-1, 0, 2**31 - 1])),
            partition_leader_epoch=draw(st.sampled_from([-1, 0, 9])),
        )
        start = len(out)
        out += batch
        for _ in range(draw(st.integers(0, 2))):
            if draw(st.booleans()):
                at, fmt, values = draw(HEADER_EDITS)
                struct.pack_into(fmt, out, start + at, draw(st.sampled_from(values)))
            else:
                section = draw(damaged(bytes(out[start + HEADER_SIZE :])))
                del out[start + HEADER_SIZE :]
                out += section
            if draw(st.integers(0, 3)):
                fix_crc(out, start)
    tail = draw(st.sampled_from(["", "", "truncate", "extra"]))
    if tail == "truncate":
        del out[draw(st.integers(0, len(out))) :]
    elif tail == "extra":
        out += draw(st.binary(max_size=70))
    return bytes(out)


@PROPERTY
@given(append_buffers(), st.sampled_from([2**63 - 1, 1 << 20, 200, 61, 0, -1, 2**70]), st.booleans(), st.data())
def test_append_batches(buf: bytes, max_batch_size: int, check_records: bool, data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from([bytes, bytearray, memoryview]))
    held = kind(buf)
    same("append_batches", held, memoryview(held), max_batch_size, check_records)


@PROPERTY
@given(st.binary(max_size=200), st.booleans())
def test_append_batches_of_arbitrary_bytes(buf: bytes, check_records: bool) -> None:
    edited = bytearray(buf)
    if len(edited) >= HEADER_SIZE:
        fix_crc(edited)
    same("append_batches", bytes(edited), memoryview(bytes(edited)), 2**63 - 1, check_records)


def test_append_batches_agree_on_valid_batches() -> None:
    """The common case, checked field by field: both codecs describe every batch of a valid buffer alike."""
    first = encode_batch([b"a" * 100] * 150, timestamps=5, producer_id=3, producer_epoch=1, base_sequence=9)
    second = encode_batch([b"b"], [b"k"], 6, compression="lz4", partition_leader_epoch=4)
    buf = first + second
    result = same("append_batches", buf, memoryview(buf), 1 << 20, True)
    assert result[0] == "ok"
    assert [batch[1] for batch in result[1]] == [
        (0, len(first), 149, 5, 150, -1, 3, 1, 9),
        (0, len(second), 0, 6, 1, 4, -1, -1, -1),
    ]


def edited(batch: bytes, *edits: tuple[int, str, int]) -> bytes:
    """``batch`` with header fields set (offset, struct format, value) and its CRC recomputed."""
    out = bytearray(batch)
    for at, fmt, value in edits:
        struct.pack_into(fmt, out, at, value)
    fix_crc(out)
    return bytes(out)


def test_append_batches_edge_cases() -> None:
    """Each check of the condition, reached with a valid CRC: (buffer, max_batch_size, expected outcome with the
    record walk, without it); an int is the position of the batch refused, a list the number of batches."""
    three = encode_batch([b"x" * 10] * 3, timestamps=1)
    bare = encode_batch([b"x"], timestamps=1)[:HEADER_SIZE]
    bare = edited(bare, (8, ">i", HEADER_SIZE - 12), (23, ">i", 0), (57, ">i", 0))
    size = len(three)
    cases: list[tuple[bytes, int, int | list[int], int | list[int]]] = [
        (three, size, [size], [size]),
        (three, size - 1, 0, 0),  # over max_batch_size
        (three + three, 2**63 - 1, [size, size], [size, size]),
        (three + three[:60], 2**63 - 1, size, size),  # a truncated header after a valid batch
        (three[:-1], 2**63 - 1, 0, 0),  # the length runs past the buffer
        (edited(three, (8, ">i", 48)), 2**63 - 1, 0, 0),  # length below the header
        (edited(three, (16, ">b", 1)), 2**63 - 1, 0, 0),  # magic
        (edited(three, (57, ">i", 2)), 2**63 - 1, 0, [size]),  # fewer records counted than present
        (edited(three, (57, ">i", 4), (23, ">i", 3)), 2**63 - 1, 0, [size]),  # more counted than present
        (edited(three, (57, ">i", 4)), 2**63 - 1, 0, 0),  # more records than offsets
        (edited(three, (57, ">i", -1)), 2**63 - 1, 0, 0),
        (edited(three, (57, ">i", 10), (23, ">i", 100)), 2**63 - 1, 0, 0),  # ten smallest records do not fit
        (edited(three, (57, ">i", 10), (23, ">i", 100), (21, ">h", 3)), 2**63 - 1, [size], [size]),  # compressed
        (bare, 2**63 - 1, [HEADER_SIZE], [HEADER_SIZE]),  # no records, one offset
        (edited(bare, (23, ">i", -1)), 2**63 - 1, 0, 0),  # no offset at all
        (edited(bare, (23, ">i", -1), (21, ">h", 1)), 2**63 - 1, 0, 0),  # no offset, compressed
        (bytes(three[:20]) + bytes([three[20] ^ 1]) + three[21:], 2**63 - 1, 0, 0),  # CRC mismatch
    ]
    for buf, max_batch_size, walked, counted in cases:
        for check_records, expected in ((True, walked), (False, counted)):
            result = same("append_batches", buf, memoryview(buf), max_batch_size, check_records)
            got = result[2] if result[1] is int else [batch[1][1] for batch in result[1]]
            assert got == expected, (buf[:64].hex(), max_batch_size, check_records)


def test_native_records_are_left_out_of_the_cyclic_gc() -> None:
    """Records hold only str, bytes, int, None and tuples of those, so they can never be in a reference cycle; the
    native decoder untracks them (and their headers) so that the collector does not walk every buffered record.
    A record with a field the collector tracks stays tracked."""
    import gc

    section = encode([(0, 0, b"k", b"v", [("h", b"x"), ("n", None)]), (1, 0, None, None, [])])
    tp = TopicPartition("t", 0)
    records = native.decode_records(section, 0, len(section), 2, 0, 0, None, ConsumerRecord, tp, (0,))
    assert records[0].headers == (("h", b"x"), ("n", None))
    assert not any(gc.is_tracked(r) for r in records)
    assert not gc.is_tracked(records[0].headers) and not any(gc.is_tracked(h) for h in records[0].headers)
    mutable_field = native.decode_records(section, 0, len(section), 2, 0, 0, None, ConsumerRecord, ([], 0), (0,))
    assert all(gc.is_tracked(r) for r in mutable_field)
