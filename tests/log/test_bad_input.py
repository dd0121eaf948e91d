import random
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from crc32c import crc32c
from log_batches import batch_of_size, make_batch

from odradek.broker.log.config import LogConfig
from odradek.broker.log.log import Log
from odradek.client.errors import CorruptRecordError, InvalidRecordError, OdradekError, RecordTooLargeError
from odradek.client.record.builder import assemble_batch, encode_batch
from odradek.client.record.header import (
    CRC_START,
    MIN_RECORD_SIZE,
    check_record_count,
    parse_header,
    validate_batch,
    validate_for_append,
)
from odradek.client.record.varint import read_zigzag


def snapshot(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())}


def flip(batch: bytes, at: int) -> bytes:
    b = bytearray(batch)
    b[at] ^= 0x40
    return bytes(b)


def with_field(batch: bytes, fmt: str, at: int, value: int) -> bytes:
    b = bytearray(batch)
    struct.pack_into(fmt, b, at, value)
    return bytes(b)


def with_crc(batch: bytes) -> bytes:
    """The (single) batch with its CRC recomputed, so a changed header field passes the CRC check."""
    b = bytearray(batch)
    struct.pack_into(">I", b, 17, crc32c(memoryview(b)[CRC_START:]))
    return bytes(b)


def with_count(batch: bytes, count: int) -> bytes:
    """The batch with another record count (and the last offset delta to match) and a valid CRC: a header that is
    consistent in itself but disagrees with the records, as a buggy producer would send."""
    return with_crc(with_field(with_field(batch, ">i", 57, count), ">i", 23, max(count - 1, 0)))


GOOD = make_batch(5)

BAD: dict[str, tuple[type[OdradekError], Callable[[], bytes]]] = {
    "crc mismatch": (CorruptRecordError, lambda: flip(GOOD, len(GOOD) - 3)),
    "crc field": (CorruptRecordError, lambda: flip(GOOD, 18)),
    "wrong magic": (CorruptRecordError, lambda: with_field(GOOD, ">b", 16, 1)),
    "length past the buffer": (CorruptRecordError, lambda: GOOD[:-1]),
    "length field too large": (CorruptRecordError, lambda: with_field(GOOD, ">i", 8, len(GOOD) + 100)),
    "length below the header": (CorruptRecordError, lambda: with_field(GOOD, ">i", 8, 10)),
    "truncated header": (CorruptRecordError, lambda: GOOD[:40]),
    "trailing garbage": (CorruptRecordError, lambda: GOOD + b"\x00" * 20),
    "good then bad": (CorruptRecordError, lambda: GOOD + flip(GOOD, 70)),
    "oversize batch": (RecordTooLargeError, lambda: make_batch([b"x" * 2000])),
    "fewer records than counted": (CorruptRecordError, lambda: with_count(GOOD, 6)),
    "more records than counted": (CorruptRecordError, lambda: with_count(GOOD, 4)),
    "good then miscounted": (CorruptRecordError, lambda: GOOD + with_count(GOOD, 3)),
}
LEADER_ONLY = {"oversize batch", "fewer records than counted", "more records than counted", "good then miscounted"}

# Followers copy what the leader accepted, so only the leader enforces max.message.bytes and the record count.
CASES = [
    (role, case)
    for role in ("leader", "follower")
    for case in sorted(BAD)
    if role == "leader" or case not in LEADER_ONLY
]


@pytest.mark.parametrize(("role", "case"), CASES)
def test_bad_input_is_rejected_and_leaves_the_log_unchanged(
    open_log: Callable[..., Log], tmp_path: Path, case: str, role: str
) -> None:
    config = LogConfig(max_message_bytes=1024, segment_bytes=4096, index_interval_bytes=64, segment_index_bytes=4096)
    log = open_log(tmp_path / "t-0", config)
    for i in range(30):  # some segments and index entries already there
        log.append_as_leader(make_batch(3, timestamp=i), 0)
    log.flush()
    before, leo = snapshot(tmp_path / "t-0"), log.log_end_offset
    error, build = BAD[case]
    if role == "follower":
        buf = with_field(build(), ">q", 0, leo) if len(build()) >= 8 else build()
        with pytest.raises(error) as e:
            log.append_as_follower(buf)
    else:
        with pytest.raises(error) as e:
            log.append_as_leader(build(), 0)
    assert e.value.code_name == ("MESSAGE_TOO_LARGE" if error is RecordTooLargeError else "CORRUPT_MESSAGE")
    assert log.log_end_offset == leo and log.failure is None
    assert snapshot(tmp_path / "t-0") == before
    log.append_as_leader(GOOD, 0)  # the log still works
    assert log.log_end_offset == leo + 5


def test_leader_rejects_a_record_count_that_disagrees_with_the_records(
    open_log: Callable[..., Log], tmp_path: Path
) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(index_interval_bytes=64))
    large = batch_of_size(20_000)  # one record with a three-byte length varint
    for i in range(5):
        log.append_as_leader(make_batch(3, timestamp=i), 0)
    log.append_as_leader(large, 0)
    before, leo = snapshot(tmp_path / "t-0"), log.log_end_offset
    for bad in (with_count(large, 2), with_count(make_batch([b"v" * 50]), 2), with_count(make_batch(40), 39)):
        validate_batch(bad)  # the header alone is consistent: only the records tell
        with pytest.raises(CorruptRecordError, match="records do not fill") as e:
            log.append_as_leader(memoryview(bad), 0)
        assert e.value.code_name == "CORRUPT_MESSAGE"
    assert log.log_end_offset == leo and log.failure is None
    assert snapshot(tmp_path / "t-0") == before
    log.append_as_follower(with_count(make_batch(40, base_offset=leo), 39))  # followers do not walk records
    assert log.log_end_offset == leo + 39


def with_delta(batch: bytes, last_offset_delta: int) -> bytes:
    """The batch claiming another offset range, its records and count unchanged (a valid CRC)."""
    return with_crc(with_field(batch, ">i", 23, last_offset_delta))


def test_leader_refuses_a_producers_batch_with_fewer_records_than_offsets(
    open_log: Callable[..., Log], tmp_path: Path
) -> None:
    """As Kafka's LogValidator on a producer's batch: one record per offset (record count = last offset delta + 1),
    else INVALID_RECORD; the header tells, so compressed batches are refused too. Records the log would number
    past their count would be offsets no record holds, and the producer's sequence range would not match. Followers
    still take such batches: a compacted leader's cleaner leaves them."""
    log = open_log(tmp_path / "t-0", LogConfig())
    idempotent = encode_batch([b"a", b"b"], timestamps=1000, producer_id=7, producer_epoch=0, base_sequence=0)
    for bad in (
        with_delta(make_batch(1), 4),
        with_delta(encode_batch([b"a", b"b"], timestamps=1000, compression="gzip"), 5),
        with_delta(make_batch([]), 0),  # no record at all
        with_delta(idempotent, 9),
        GOOD + with_delta(GOOD, 7),
    ):
        with pytest.raises(InvalidRecordError) as e:
            log.append_as_leader(bad, 0)
        assert e.value.code_name == "INVALID_RECORD"
    assert log.log_end_offset == 0 and log.failure is None
    assert log.append_as_leader(idempotent, 0).last_offset == 1  # the producer's sequence is untouched
    info = log.append_as_follower(with_field(with_delta(make_batch(1), 4), ">q", 0, 2))
    assert (info.first_offset, info.last_offset, info.record_count) == (2, 6, 1)


def reference(buf: bytes, max_batch_size: int, check_records: bool) -> tuple[str, object]:
    """What an append must decide, from the ordinary validation functions, batch by batch."""
    try:
        headers, position = [], 0
        while position < len(buf):
            h = validate_batch(buf, position, max_batch_size)
            if h.last_offset_delta < 0:
                raise CorruptRecordError(f"batch with last offset delta {h.last_offset_delta} holds no offset")
            if check_records:
                check_record_count(buf, h)
            headers.append(h)
            position += h.size
        if not headers:
            raise CorruptRecordError("no record batch to append")
    except OdradekError as e:
        return type(e).__name__, str(e)
    return "ok", [h.append_batch for h in headers]


def fast(buf: bytes, max_batch_size: int, check_records: bool) -> tuple[str, object]:
    try:
        return "ok", validate_for_append(buf, memoryview(buf), max_batch_size, check_records)
    except OdradekError as e:
        return type(e).__name__, str(e)


def mutate(rng: random.Random, buf: bytes) -> bytes:
    """Damage a buffer of batches: header fields of its first batch (CRC fixed again, so that the checks after it
    are reached), single bytes, or a cut."""
    b = bytearray(buf)
    for _ in range(rng.randint(1, 3)):
        kind = rng.random()
        if kind < 0.6 and len(b) >= 64:
            at, fmt, values = rng.choice(
                [
                    (8, ">i", [-(2**31), -1, 0, 1, 48, 49, 50, len(b) - 12, len(b) - 11, 2**31 - 1]),
                    (16, ">b", [0, 1, 3]),
                    (21, ">h", [0x20, 0x21, 1, 0x08]),  # control, control + gzip, gzip, log append time
                    (23, ">i", [-(2**31), -2, -1, 0, 1, 4, 5, 2**31 - 1]),  # last offset delta
                    (57, ">i", [-1, 0, 1, 2, 5, 6, 7, 100, 2**31 - 1]),  # records count
                    (61, ">B", [0, 1, 2, 0x80, 0xFE, 0xFF]),  # the first record's length varint
                ]
            )
            struct.pack_into(fmt, b, at, rng.choice(values))
            if rng.random() < 0.8:
                end = min(parse_header(b).size, len(b))
                struct.pack_into(">I", b, 17, crc32c(memoryview(b)[CRC_START : max(CRC_START, end)]))
        elif kind < 0.85 and b:
            b[rng.randrange(len(b))] = rng.randrange(256)
        else:
            del b[rng.randint(0, len(b)) :]
    return bytes(b)


def lone_record_batch(length_varint: bytes, body: bytes, count: int = 1) -> bytes:
    """A batch whose records section is one record with the given (possibly non-canonical) length encoding."""
    section = length_varint + body
    return assemble_batch(section, count, 0, 0, 0, -1, max(count - 1, 0), 1000, 1000, -1, -1, -1)


def crafted_cases() -> list[tuple[bytes, int]]:
    """Buffers that pass every check of the fast path but one (or sit on a boundary), with a max batch size."""
    body = b"\x00\x00\x00\x01" + b"\x02" * 20  # attributes, timestamp/offset deltas, null key, junk: never decoded
    four_bytes = bytes((len(body) << 1 & 0x7F | 0x80, len(body) >> 6 & 0x7F | 0x80, 0x80, 0))  # non-canonical
    empty_control = with_field(with_field(with_count(make_batch(1), 0), ">h", 21, 0x20), ">i", 23, -1)
    short_gzip = with_field(with_field(GOOD, ">h", 21, 1), ">i", 8, 1)  # length below the header, CRC over nothing
    short_gzip = with_field(short_gzip, ">I", 17, crc32c(b""))
    big = batch_of_size(20_000)
    return [
        (with_crc(empty_control), 1 << 20),  # passes validate_batch, holds no offset
        (short_gzip, 1 << 20),
        (big, len(big)),
        (big, len(big) - 1),
        (lone_record_batch(four_bytes, body), 1 << 20),  # a four-byte length varint: decoded the slow way
        (lone_record_batch(four_bytes, body + b"\x00"), 1 << 20),
        (lone_record_batch(four_bytes[:3] + b"\x01", body), 1 << 20),
        (lone_record_batch(b"\x80\x80\x00" + b"", b""), 1 << 20),  # length 0 in three bytes
        (GOOD + with_count(GOOD, 4), 1 << 20),
        (b"", 1 << 20),
    ]


def test_the_append_validator_decides_as_the_ordinary_functions() -> None:
    """header.validate_for_append is a fused fast path: it must accept exactly what validate_batch (plus a last
    offset delta >= 0 and, for the leader, check_record_count) accepts, and raise the same errors."""
    for buf, limit in crafted_cases():
        for check in (True, False):
            assert fast(buf, limit, check) == reference(buf, limit, check)
    rng = random.Random(7)
    shapes = [make_batch(1), make_batch(6), make_batch([b"x" * 9000]), make_batch([b"y" * 20_000, b"z"])]
    outcomes = set()
    for _ in range(4000):
        buf = b"".join(rng.choice(shapes) for _ in range(rng.choice([0, 1, 1, 2, 3])))
        if rng.random() < 0.8:
            buf = mutate(rng, buf)
        limit, check = rng.choice([100, 9000, 1 << 20]), rng.random() < 0.7
        expected = reference(buf, limit, check)
        assert fast(buf, limit, check) == expected
        outcomes.add(expected[0] if expected[0] == "ok" else " ".join(str(expected[1]).split()[:2]))
    reasons = {"batch length", "unsupported magic", "batch CRC", "invalid record", "record count", "the 1"}
    assert {"ok", *reasons} <= {o if o == "ok" else next((r for r in reasons if o.startswith(r)), o) for o in outcomes}


def plain_walk(buf: bytes, pos: int, end: int, count: int) -> bool:
    """The record-count check done the obvious way: decode every length varint."""
    for _ in range(count):
        if pos >= end:
            return False
        try:
            z, pos = read_zigzag(buf, pos)
        except (IndexError, CorruptRecordError):
            return False
        if z & 1 or z >> 1 < MIN_RECORD_SIZE - 1:
            return False
        pos += z >> 1
    return pos == end


def varint(z: int, width: int) -> bytes:
    """``z`` as an unsigned varint of exactly ``width`` bytes (non-canonical when wider than needed)."""
    return bytes([(z >> 7 * i) & 0x7F | (0x80 if i < width - 1 else 0) for i in range(width)])


def test_the_record_walk_agrees_with_decoding_every_length() -> None:
    """check_record_count's table walk (and its lone-record shortcut) against a plain decoding walk, on sections of
    records whose length varints take one to four bytes, canonical or not, some damaged."""
    rng = random.Random(3)
    for _ in range(3000):
        records = []
        for _ in range(rng.choice([1, 1, 2, 3, 6])):
            size = rng.choice([6, 7, 60, 64, 100, 8191, 8192, 9000, 70_000])
            width = max(rng.randint(1, 4), (size * 2).bit_length() // 7 + 1)
            records.append(varint(2 * size, width) + bytes(size))
        section = bytearray(b"".join(records))
        if rng.random() < 0.4:
            section[rng.randrange(min(len(section), 8))] = rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFF])
        count = max(0, len(records) + rng.choice([0, 0, 0, -1, 1]))
        buf = assemble_batch(bytes(section), count, 0, 0, 0, -1, max(count - 1, 0), 1000, 1000, -1, -1, -1)
        header = parse_header(buf)
        try:
            check_record_count(buf, header)
            walked = True
        except CorruptRecordError:
            walked = False
        assert walked == plain_walk(buf, 61, len(buf), count)
