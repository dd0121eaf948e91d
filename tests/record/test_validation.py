"""Header-only validation, the record-count walk, and the decoder's handling of damaged records: every failure is
a typed error (CorruptRecordError or RecordTooLargeError), never an IndexError or a wrong answer."""

import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.client.errors import CorruptRecordError, RecordTooLargeError
from odradek.client.record.batch import read_batches
from odradek.client.record.builder import assemble_batch, encode_batch, encode_record
from odradek.client.record.header import (
    COMPRESSION_CODES,
    CRC_START,
    HEADER_SIZE,
    check_record_count,
    iter_batches,
    parse_header,
    validate_batch,
)

TS = 1_700_000_000_000
COUNT_AT = 57
LAST_OFFSET_DELTA_AT = 23
MAGIC_AT = 16


def batch(n: int = 5, value: bytes = b"v" * 100, compression: str = "none") -> bytes:
    return encode_batch([value] * n, timestamps=TS, compression=compression)


def with_fixed_crc(buf: bytearray) -> bytes:
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[CRC_START:])))
    return bytes(buf)


def from_records(records_section: bytes, count: int) -> bytes:
    """A batch with a valid header and CRC around arbitrary record bytes."""
    return assemble_batch(records_section, count, 0, 0, 0, -1, max(count - 1, 0), TS, TS, -1, -1, -1)


def set_count(buf: bytes, count: int) -> bytes:
    """Change the record count (and the last offset delta with it), keeping the header and CRC valid."""
    patched = bytearray(buf)
    struct.pack_into(">i", patched, COUNT_AT, count)
    struct.pack_into(">i", patched, LAST_OFFSET_DELTA_AT, max(count - 1, 0))
    return with_fixed_crc(patched)


def test_valid_batch_passes_everything() -> None:
    buf = batch()
    header = validate_batch(buf, max_batch_size=len(buf))
    check_record_count(buf, header)
    assert header.records_count == 5


def test_wrong_crc() -> None:
    buf = bytearray(batch())
    buf[-1] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC"):
        validate_batch(buf)


def test_wrong_magic() -> None:
    buf = bytearray(batch())
    buf[MAGIC_AT] = 1
    with pytest.raises(CorruptRecordError, match="magic"):
        validate_batch(buf)


def test_length_past_the_buffer() -> None:
    buf = batch()
    for cut in (len(buf) - 1, HEADER_SIZE, 30):
        with pytest.raises(CorruptRecordError):
            validate_batch(buf[:cut])
        with pytest.raises(CorruptRecordError):
            list(read_batches(buf[:cut]))
        with pytest.raises(CorruptRecordError):
            list(read_batches(buf[:cut], validate=False))


def test_batch_over_the_maximum_size() -> None:
    buf = batch()
    with pytest.raises(RecordTooLargeError):
        validate_batch(buf, max_batch_size=len(buf) - 1)
    with pytest.raises(RecordTooLargeError):
        iter_batches(buf + buf, max_batch_size=len(buf) - 1)


@pytest.mark.parametrize("count", [0, 1, 4, 6, 7])
def test_record_count_disagreeing_with_the_records(count: int) -> None:
    buf = set_count(batch(5), count)
    header = validate_batch(buf)  # the header alone is consistent
    with pytest.raises(CorruptRecordError):
        check_record_count(buf, header)
    with pytest.raises(CorruptRecordError):
        next(read_batches(buf)).records()


def test_record_count_beyond_the_offset_deltas_or_bytes() -> None:
    buf = bytearray(batch(5))
    struct.pack_into(">i", buf, COUNT_AT, 6)  # last offset delta still 4
    with pytest.raises(CorruptRecordError, match="last offset delta"):
        validate_batch(with_fixed_crc(buf))
    with pytest.raises(CorruptRecordError, match="does not fit"):
        validate_batch(set_count(batch(5), 500))


@pytest.mark.parametrize("count", [4, 6])
def test_count_check_when_more_batches_follow(count: int) -> None:
    # walking past the batch end runs into the next batch's bytes: still detected
    buf = set_count(batch(5), count) + batch(5)
    with pytest.raises(CorruptRecordError):
        check_record_count(buf, validate_batch(buf))


def test_count_check_on_large_records_and_positions() -> None:
    big = batch(3, value=b"x" * 20_000)  # three-byte length varints: the slow walk
    check_record_count(big, validate_batch(big))
    with pytest.raises(CorruptRecordError):
        check_record_count(set_count(big, 2), validate_batch(set_count(big, 2)))
    pair = batch(2) + big
    second = validate_batch(pair, len(batch(2)))
    check_record_count(pair, second)
    check_record_count(memoryview(pair), second)
    check_record_count(bytearray(pair), second)


def test_count_check_rejects_negative_and_tiny_lengths() -> None:
    record = encode_record(0, 0, None, b"v")
    negative = b"\x03" + record[1:]  # length -2
    tiny = b"\x02" + b"\x00"  # a one-byte record: smaller than any real record
    for section in (negative, tiny + record[:-1], b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"):
        buf = from_records(section, 1)
        with pytest.raises(CorruptRecordError):
            check_record_count(buf, parse_header(buf))
        with pytest.raises(CorruptRecordError):
            next(read_batches(buf)).records()


def test_compressed_batches_are_not_walked() -> None:
    buf = set_count(batch(5, compression="gzip"), 4)
    check_record_count(buf, validate_batch(buf))  # nothing to check without decompressing
    with pytest.raises(CorruptRecordError):
        next(read_batches(buf)).records()


@pytest.mark.parametrize("compression", list(COMPRESSION_CODES.values()))
def test_truncated_and_garbage_records(compression: int) -> None:
    records = encode_record(0, 0, b"k", b"value") + encode_record(1, 0, None, b"x" * 300)
    for section in (records[:-1], records[:10], records + b"\x00", b"\x7f" * 40, records[:5] + b"\xff" * 20):
        damaged = assemble_batch(section, 2, compression, compression, 0, -1, 1, TS, TS, -1, -1, -1)
        with pytest.raises(CorruptRecordError):
            next(read_batches(damaged)).records()


def test_header_name_not_utf8() -> None:
    body = b"\x00\x00\x00\x01\x01\x02\x02\xff\xfe\x01"  # attrs, ts, offset, null key/value, 1 header "\xff\xfe"
    buf = from_records(bytes([len(body) << 1]) + body, 1)
    with pytest.raises(CorruptRecordError, match="UTF-8"):
        next(read_batches(buf)).records()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 30))
def test_garbage_records_only_raise_corrupt(section: bytes, count: int) -> None:
    buf = from_records(section, count)
    header = validate_batch(buf) if count * 7 <= len(section) else parse_header(buf)
    try:
        records = next(read_batches(buf, validate=False)).records()
    except CorruptRecordError:
        return
    # the decoder is stricter than the cheap walk: whatever it accepts, the walk accepts too
    assert len(records) == count
    check_record_count(buf, header)


def test_unvalidated_read_rejects_impossible_lengths() -> None:
    for length in (-12, 0, 48):  # sizes 0, 12, 60: below a header
        buf = bytearray(batch())
        struct.pack_into(">i", buf, 8, length)
        with pytest.raises(CorruptRecordError):
            list(read_batches(bytes(buf), validate=False))


def test_count_check_rejects_a_length_past_any_buffer() -> None:
    """A nine-byte length varint of 2**61 + 10 once wrapped the walk's table arithmetic: the record was measured as
    10 bytes long, and a batch claiming two records over three physical ones passed check_record_count."""
    small = bytes([2 * 10]) + bytes(10)
    z = 2 * ((1 << 61) + 10)
    absurd = bytes((z >> 7 * i) & 0x7F | (0x80 if i < 8 else 0) for i in range(9)) + bytes(10)
    buf = from_records(small + absurd + small, 2)
    with pytest.raises(CorruptRecordError, match="do not fill"):
        check_record_count(buf, validate_batch(buf))
    with pytest.raises(CorruptRecordError):
        next(read_batches(buf)).records()
