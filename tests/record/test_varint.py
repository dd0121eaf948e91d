"""Zigzag varints: the table agrees with the bit loop, every int64 round trips, and no wider integer is encoded."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.client.errors import CorruptRecordError
from odradek.client.record import codec
from odradek.client.record.batch import Record
from odradek.client.record.varint import (
    TABLE_LIMIT,
    VARINT,
    decode_varint,
    encode_varint,
    read_zigzag,
)

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (300, b"\xd8\x04"),
        (2**63 - 1, b"\xfe" + b"\xff" * 8 + b"\x01"),
        (-(2**63), b"\xff" * 9 + b"\x01"),
    ],
)
def test_known_encodings(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded
    assert decode_varint(encoded + b"junk", 0) == (value, len(encoded))


def test_table_matches_the_general_encoder() -> None:
    assert len(VARINT) == TABLE_LIMIT
    for n in range(TABLE_LIMIT):
        assert VARINT[n] == encode_varint(n)
        assert decode_varint(VARINT[n], 0) == (n, len(VARINT[n]))
    assert max(map(len, VARINT)) == 2


@given(INT64, st.binary(max_size=3))
def test_round_trip(value: int, prefix: bytes) -> None:
    encoded = encode_varint(value)
    assert decode_varint(prefix + encoded, len(prefix)) == (value, len(prefix) + len(encoded))


def test_overlong_and_truncated_varints() -> None:
    with pytest.raises(CorruptRecordError):
        read_zigzag(b"\xff" * 11, 0)
    with pytest.raises(IndexError):
        read_zigzag(b"\xff\xff", 0)


@pytest.mark.parametrize("value", [-(2**63) - 1, 2**63, 2**64 + 5, -(2**69)])
def test_integers_beyond_int64_are_refused(value: int) -> None:
    """Past int64 the zigzag bit trick is no zigzag: the bytes would decode to another integer."""
    with pytest.raises(OverflowError):
        encode_varint(value)


@pytest.mark.parametrize("delta", [-(2**63), 2**63 - 1, -(2**63) - 1, 2**63])
def test_the_running_codec_keeps_record_deltas_to_int64(delta: int) -> None:
    """Whichever codec runs (native, or the reference with ODRADEK_NO_EXTENSIONS=1): an int64 delta round-trips, one
    past int64 is refused rather than written as a record at another offset or time."""
    if not -(2**63) <= delta < 2**63:
        with pytest.raises(OverflowError):
            codec.encode_record(delta, 0, b"k", b"v")
        with pytest.raises(OverflowError):
            codec.encode_record(0, delta, b"k", b"v")
        return
    for offset_delta, timestamp_delta in [(delta, 0), (0, delta)]:
        encoded = codec.encode_record(offset_delta, timestamp_delta, b"k", b"v")
        (record,) = codec.decode_records(encoded, 0, len(encoded), 1, 0, 0, None, Record, (), ())
        assert (record.offset, record.timestamp, record.value) == (offset_delta, timestamp_delta, b"v")
