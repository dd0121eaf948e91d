#!/usr/bin/env python3
"""Partition-log throughput against raw file I/O of the same bytes, measured in the same run.

    append  Log.append_as_leader of 16 KiB batches (validate_batch + CRC32C, offsets, pwritev, sparse index)
            vs an os.write loop writing the same chunks to a plain file (1 and 8 batches per call)
    read    Log.read with 1 MiB max_bytes from offset 0 to the end vs an os.pread loop over the segment file

Each figure is the best of several alternating rounds: this is a shared VM whose page-cache writes vary between
runs. Neither side fsyncs (the log's flush policy is Kafka's default: only at roll and close, and the data is
smaller than segment.bytes, so no roll happens in a timed loop). The last line splits the append cost: the raw
loop does no validation, while the log must run header.validate_batch (CRC32C over the batch) on every batch.
"""

from __future__ import annotations

import argparse
import os
import shutil
import struct
import tempfile
import time
from pathlib import Path

from crc32c import crc32c

from odradek.broker.log.config import LogConfig
from odradek.broker.log.log import Log
from odradek.client.record.header import CRC_START, HEADER_SIZE, LOG_OVERHEAD, MAGIC, validate_batch

MiB = 1024 * 1024
BATCH = 16 * 1024
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


def validate_only(chunk: bytes, count: int) -> float:
    view = memoryview(chunk)
    start = time.perf_counter()
    for _ in range(count):
        position = 0
        while position < len(view):
            position += validate_batch(view, position).size
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=128, help="data per timed loop (MiB)")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--dir", default=None, help="scratch directory (default: a temporary one)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="odradek-bench-", dir=args.dir))
    total = args.mib * MiB
    batch = make_batch(BATCH)
    try:
        single = None
        for per_call in (1, 8):
            chunk, count = batch * per_call, total // (BATCH * per_call)
            raw = appended = float("inf")
            for _ in range(args.rounds):
                raw = min(raw, raw_write(root / "raw", chunk, count))
                appended = min(appended, log_append(root / "log-0", chunk, count))
            what = f"append {BATCH // 1024} KiB batches, {per_call} per call"
            report(what, appended, raw, count * len(chunk), "raw os.write")
            if per_call == 1:
                single = (appended, raw, count)

        log_append(root / "read-0", batch, total // BATCH, keep=True)
        log = Log.open(root / "read-0", LogConfig(), clean_shutdown=True)
        segment = root / "read-0" / f"{0:020d}.log"
        raw = read = float("inf")
        for _ in range(args.rounds):
            raw = min(raw, raw_read(segment, MiB))
            read = min(read, log_read(log, MiB))
        log.close()
        report(f"read {BATCH // 1024} KiB batches, 1 MiB max_bytes", read, raw, segment.stat().st_size, "raw os.pread")

        assert single is not None
        appended, raw, count = single
        validate = min(validate_only(batch, count) for _ in range(args.rounds))
        per = 1e6 / count
        print(
            f"append cost per batch: {appended * per:.2f} us, of which validate_batch {validate * per:.2f} us;"
            f" raw os.write {raw * per:.2f} us; the rest of the append path runs at"
            f" {raw / (appended - validate):.2f} of raw"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
