"""Zigzag varints, Kafka's (and protobuf's sint64) encoding of every integer inside a v2 record.

Records are mostly small integers (offset deltas, lengths, zero timestamp deltas), so encoding goes through a
precomputed table and only falls back to the bit loop for values outside it; the codec indexes ``VARINT`` directly
in its hot loops instead of calling ``encode_varint``.
"""

from __future__ import annotations

from odradek.client.errors import CorruptRecordError

# Non-negative values below this encode in at most two bytes (zigzag value < 2**14).
TABLE_LIMIT = 8192
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def _encode_slow(value: int) -> bytes:
    z = (value << 1) ^ (value >> 63)  # the shift first: a non-integer raises TypeError, as in the native codec
    if not INT64_MIN <= value <= INT64_MAX:
        # Beyond int64 the zigzag above is no zigzag: the bytes would decode to another value.
        raise OverflowError(f"{value} does not fit a signed 64-bit varint")
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


# VARINT[n] is the encoding of n for 0 <= n < TABLE_LIMIT. Never index it with a negative number: Python would
# silently wrap around to the wrong entry.
VARINT: list[bytes] = [bytes((n << 1,)) for n in range(64)] + [
    bytes(((n << 1) & 0x7F | 0x80, n >> 6)) for n in range(64, TABLE_LIMIT)
]
NULL_LENGTH = b"\x01"  # -1: the length of a null key, value or header value


def encode_varint(value: int) -> bytes:
    """Encode a signed 64-bit integer as a zigzag varint; OverflowError for any other integer (Kafka's varlong is
    an int64, and a wider value cannot round-trip)."""
    if 0 <= value < TABLE_LIMIT:
        return VARINT[value]
    return _encode_slow(value)


def read_zigzag(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Read the raw (still zigzagged) unsigned varint at ``pos``; return it and the position after it.

    The codec's loops read short varints themselves and call this only for longer ones, and unzigzag
    themselves when they need to (``(z >> 1) ^ -(z & 1)``).
    """
    z = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        if b < 0x80:
            return z, pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")


def decode_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode the zigzag varint at ``pos``; return the value and the position after it."""
    z, pos = read_zigzag(buf, pos)
    return (z >> 1) ^ -(z & 1), pos
