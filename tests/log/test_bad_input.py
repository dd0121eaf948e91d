import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from log_batches import make_batch

from odradek.broker.log.config import LogConfig
from odradek.broker.log.log import Log
from odradek.client.errors import CorruptRecordError, OdradekError, RecordTooLargeError


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
}


# Followers copy what the leader accepted, so only the leader enforces max.message.bytes.
CASES = [
    (role, case)
    for role in ("leader", "follower")
    for case in sorted(BAD)
    if (role, case) != ("follower", "oversize batch")
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
