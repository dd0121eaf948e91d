#!/usr/bin/env python3
"""Partition-log throughput against raw file I/O of the same bytes, measured in the same run.

    append  Log.append_as_leader of 16 KiB batches vs an os.write loop writing the same chunks to a plain file in
            the same directory (1 and 8 batches per call). The log's side is the broker's whole produce path:
            header.validate_for_append (header checks, CRC32C, and the record-count walk over the length prefixes
            of an uncompressed batch's records), offset assignment, one pwritev, sparse index, flush policy.
            The first two lines use batches of one 16 KiB record, where the record-count walk reads one length
            prefix; the third uses batches of 100-byte records, where it walks ~150 of them (the walk cannot be
            turned off: the figure is what such a produce costs).
    read    Log.read with 1 MiB max_bytes from offset 0 to the end vs an os.pread loop over the segment file

Fairness: both sides write the same bytes to a new file in the same file system, neither fsyncs (the log's flush
policy is Kafka's default: only at roll and close, and the data is smaller than segment.bytes, so no roll happens
in a timed loop), setup and teardown are outside the timed loops, and each figure is the best of several
alternating rounds (raw, log, raw, log, ...): this is a shared VM whose page-cache writes vary between runs, and
alternation makes a noisy neighbour slow both sides rather than one. The log reserves disk blocks ahead with
fallocate (LogConfig.preallocate); the raw loop does not, as a plain write does not.

The last lines split the cost of one single-record batch: what validation costs alone (CRC32C and the record walk
separately), how fast the rest of the append path runs against the raw write, and the ceiling validation alone
puts on the first line's ratio: a broker must check every batch's CRC32C, so even an append path with no cost
besides validation and the write reaches only raw / (raw + validation). The validation figures come from a tight
loop over one hot buffer, so they are the low end of what validation costs inside the append loop.
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from crc32c import crc32c

from odradek.broker.log.config import LogConfig
from odradek.broker.log.log import Log
from odradek.client.record.builder import encode_batch
from odradek.client.record.header import (
    CRC_START,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    check_record_count,
    validate_batch,
    validate_for_append,
)

MiB = 1024 * 1024
BATCH = 16 * 1024
SMALL_RECORD = 100
TIMESTAMP = 1_700_000_000_000


def make_batch(size: int) -> bytes:
    """One valid uncompressed v2 batch of exactly ``size`` bytes holding a single record."""

    def varint(n: int) -> bytes:
        z, out = (n << 1) ^ (n >> 63), bytearray()
        while z > 0x7F:
            out.append((z & 0x7F) | 0x80)
            z >>= 7
        return bytes([*out, z])

    value_len = size - HEADER_SIZE - 11  # record: length(3) attributes ts offset key(4) value length(3) headers(1)
    body = b"\x00\x00\x00\x01" + varint(value_len) + b"x" * value_len + b"\x00"
    record = varint(len(body)) + body
    assert HEADER_SIZE + len(record) == size, "the record overhead differs for this size"
    fields = (0, size - LOG_OVERHEAD, -1, MAGIC, 0, 0, 0, TIMESTAMP, TIMESTAMP, -1, -1, -1, 1)
    batch = bytearray(struct.pack(">qiibIhiqqqhii", *fields) + record)
    struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[CRC_START:]))
    return bytes(batch)


def make_small_records_batch(size: int) -> bytes:
    """The largest uncompressed batch of ``SMALL_RECORD``-byte values that fits in ``size`` bytes."""
    count = size // SMALL_RECORD
    while len(batch := encode_batch([b"v" * SMALL_RECORD] * count, timestamps=TIMESTAMP)) > size:
        count -= 1
    return batch


def raw_write(path: Path, chunk: bytes, count: int) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    try:
        start = time.perf_counter()
        for _ in range(count):
            os.write(fd, chunk)
        return time.perf_counter() - start
    finally:
        os.close(fd)
        path.unlink()


def log_append(directory: Path, chunk: bytes, count: int, keep: bool = False) -> float:
    log = Log.open(directory, LogConfig())
    try:
        append = log.append_as_leader
        start = time.perf_counter()
        for _ in range(count):
            append(chunk, 1)
        return time.perf_counter() - start
    finally:
        log.close()
        if not keep:
            shutil.rmtree(directory)


def loop(fn: Callable[[], object], count: int) -> float:
    start = time.perf_counter()
    for _ in range(count):
        fn()
    return time.perf_counter() - start


def raw_read(path: Path, max_bytes: int) -> float:
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        start = time.perf_counter()
        position = 0
        while position < size:
            position += len(os.pread(fd, max_bytes, position))
        return time.perf_counter() - start
    finally:
        os.close(fd)


def log_read(log: Log, max_bytes: int) -> float:
    read, end = log.read, log.log_end_offset
    start = time.perf_counter()
    offset = 0
    while offset < end:
        offset = read(offset, max_bytes).next_offset
    return time.perf_counter() - start


def report(what: str, log_s: float, raw_s: float, size: int, baseline: str) -> None:
    log_mbs, raw_mbs = size / log_s / 1e6, size / raw_s / 1e6
    print(f"{what}: {log_mbs:.0f} MB/s vs {baseline} {raw_mbs:.0f} MB/s = {log_mbs / raw_mbs:.2f} (target >= 0.8)")


def compare_appends(root: Path, what: str, chunk: bytes, total: int, rounds: int) -> tuple[float, float, int]:
    """Best-of-``rounds`` seconds of the raw loop and the log over ``total`` bytes of ``chunk``, alternating."""
    count = total // len(chunk)
    raw = appended = float("inf")
    for _ in range(rounds):
        raw = min(raw, raw_write(root / "raw", chunk, count))
        appended = min(appended, log_append(root / "log-0", chunk, count))
    report(what, appended, raw, count * len(chunk), "raw os.write")
    return appended, raw, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=128, help="data per timed loop (MiB)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--dir", default=None, help="scratch directory (default: a temporary one)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="odradek-bench-", dir=args.dir))
    total = args.mib * MiB
    batch = make_batch(BATCH)
    small = make_small_records_batch(BATCH)
    small_count = validate_batch(small).records_count
    try:
        what = f"append {BATCH // 1024} KiB batches, 1 per call"
        appended, raw, count = compare_appends(root, what, batch, total, args.rounds)
        compare_appends(root, f"append {BATCH // 1024} KiB batches, 8 per call", batch * 8, total, args.rounds)
        what = f"append {len(small)} B batches of {small_count} {SMALL_RECORD}-byte records, 1 per call"
        compare_appends(root, what, small, total, args.rounds)

        log_append(root / "read-0", batch, total // BATCH, keep=True)
        log = Log.open(root / "read-0", LogConfig(), clean_shutdown=True)
        segment = root / "read-0" / f"{0:020d}.log"
        raw_s = read = float("inf")
        for _ in range(args.rounds):
            raw_s = min(raw_s, raw_read(segment, MiB))
            read = min(read, log_read(log, MiB))
        log.close()
        what = f"read {BATCH // 1024} KiB batches, 1 MiB max_bytes"
        report(what, read, raw_s, segment.stat().st_size, "raw os.pread")

        view = memoryview(batch)
        small_header = validate_batch(small)
        parts = {
            "validate": lambda: validate_for_append(batch, view, BATCH, True),
            "crc": lambda: crc32c(view[CRC_START:]),
            "no walk": lambda: validate_for_append(batch, view, BATCH, False),
            "small walk": lambda: check_record_count(small, small_header),
        }
        best = dict.fromkeys(parts, float("inf"))
        for _ in range(args.rounds):
            for name, fn in parts.items():
                best[name] = min(best[name], loop(fn, count))
        us = {name: seconds * 1e6 / count for name, seconds in best.items()}
        validate = best["validate"]
        print(
            f"append cost per {BATCH // 1024} KiB single-record batch: {appended * 1e6 / count:.2f} us, of which"
            f" validate_for_append {us['validate']:.2f} us (CRC32C {us['crc']:.2f} us, record-count walk"
            f" {us['validate'] - us['no walk']:.2f} us); raw os.write {raw * 1e6 / count:.2f} us;"
            f" the rest of the append path runs at {raw / (appended - validate):.2f} of raw"
        )
        print(
            f"ceiling of a 1-per-call append that validates (CRC32C included) and writes: raw / (raw + validation)"
            f" = {raw / (raw + validate):.2f}, with no other cost at all"
        )
        print(f"record-count walk of a {len(small)} B batch of {small_count} records: {us['small walk']:.2f} us")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
