"""Valid, uncompressed v2 record batches for the log tests (the record codec lands separately)."""

from __future__ import annotations

import struct

from crc32c import crc32c

from odradek.client.record.header import CRC_START, HEADER_SIZE, LOG_OVERHEAD, MAGIC, parse_header

_HEADER = struct.Struct(">qiibIhiqqqhii")


def _varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _record(offset_delta: int, timestamp_delta: int, value: bytes) -> bytes:
    body = b"\x00" + _varint(timestamp_delta) + _varint(offset_delta) + _varint(-1) + _varint(len(value))
    body += value + _varint(0)
    return _varint(len(body)) + body


def make_batch(
    values: list[bytes] | int = 1,
    *,
    base_offset: int = 0,
    timestamp: int = 1000,
    epoch: int = -1,
    timestamp_step: int = 1,
) -> bytes:
    """One batch; ``values`` is the record values or a record count (values b"v0", b"v1", ...)."""
    if isinstance(values, int):
        values = [f"v{i}".encode() for i in range(values)]
    records = b"".join(_record(i, i * timestamp_step, v) for i, v in enumerate(values))
    n = len(values)
    max_ts = timestamp + (n - 1) * timestamp_step
    header = _HEADER.pack(
        base_offset,
        HEADER_SIZE - LOG_OVERHEAD + len(records),
        epoch,
        MAGIC,
        0,
        0,
        n - 1,
        timestamp,
        max_ts,
        -1,
        -1,
        -1,
        n,
    )
    batch = bytearray(header + records)
    struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[CRC_START:]))
    return bytes(batch)


def batch_of_size(size: int, *, base_offset: int = 0, timestamp: int = 1000, epoch: int = -1) -> bytes:
    """A one-record batch of exactly ``size`` bytes (the value is padded to fit)."""
    for pad in range(size - HEADER_SIZE - 16, size - HEADER_SIZE + 1):
        batch = make_batch([b"x" * pad], base_offset=base_offset, timestamp=timestamp, epoch=epoch)
        if len(batch) == size:
            return batch
    raise ValueError(f"cannot build a batch of {size} bytes")


def split_batches(buf: bytes) -> list[bytes]:
    """Cut a buffer of whole batches into batches."""
    out, pos = [], 0
    while pos < len(buf):
        size = parse_header(buf, pos).size
        out.append(buf[pos : pos + size])
        pos += size
    return out
