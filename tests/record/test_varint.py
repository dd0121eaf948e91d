"""Zigzag varints: the table agrees with the bit loop, and every int64 round trips."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.client.errors import CorruptRecordError
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
