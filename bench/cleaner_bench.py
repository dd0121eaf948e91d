#!/usr/bin/env python3
"""Log cleaner throughput against a plain copy of the same segment files, measured in the same run.

Writes a compacted-topic log (``--mb`` of 100-byte values over ``--keys`` keys, 100 records a batch, optionally
compressed), then times (1) copying its sealed segment files (read + write + fsync, what any recopy costs at
least) and (2) one cleaner pass over the same data, on two copies of the directory. Prints MB/s of log cleaned (by
the wall clock, and per second of the cleaning thread's CPU time) and the ratio cleaner / copy. Runs in well under
a minute at the default size.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

from odradek.broker.log.cleaner.cleaner import Cleaner
from odradek.broker.log.cleaner.policy import CompactionConfig
from odradek.broker.log.config import LogConfig
from odradek.broker.log.log import Log
from odradek.client.record.builder import encode_batch


def write_log(path: Path, mb: int, keys: int, codec: str) -> Log:
    log = Log.open(path, LogConfig(segment_bytes=16 * 1024 * 1024))
    rng = random.Random(1)
    value = rng.randbytes(100)
    while log.size_in_bytes < mb * 1024 * 1024:
        batch_keys = [b"key-%08d" % rng.randrange(keys) for _ in range(100)]
        log.append_as_leader(encode_batch([value] * 100, batch_keys, 1_700_000_000_000, compression=codec), 0)
    log.append_as_leader(encode_batch([value], [b"tail"], 1_700_000_000_000), 0)
    log.flush()
    log.high_watermark = log.log_end_offset
    log.close()
    return log


def plain_copy(src: Path, dst: Path) -> int:
    dst.mkdir()
    total = 0
    for f in sorted(src.glob("*.log"))[:-1]:  # the sealed segments, as the cleaner reads them
        with open(f, "rb") as r, open(dst / f.name, "wb") as w:
            while chunk := r.read(1 << 20):
                w.write(chunk)
                total += len(chunk)
            w.flush()
            os.fsync(w.fileno())
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=48)
    parser.add_argument("--keys", type=int, default=50_000)
    parser.add_argument("--compression", default="none")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        base = Path(tmp)
        write_log(base / "orig-0", args.mb, args.keys, args.compression)
        shutil.copytree(base / "orig-0", base / "clean-0")
        t = time.perf_counter()
        copied = plain_copy(base / "orig-0", base / "copy")
        copy_s = time.perf_counter() - t
        log = Log.open(base / "clean-0", LogConfig(segment_bytes=16 * 1024 * 1024), clean_shutdown=True)
        log.high_watermark = log.log_end_offset
        cleaner = Cleaner(64 * 1024 * 1024)
        view = log.compaction_view()
        t, cpu = time.perf_counter(), time.thread_time()
        stats = cleaner.clean(log, CompactionConfig(), 0, view.active_base_offset, log.log_end_offset)
        clean_s, clean_cpu_s = time.perf_counter() - t, time.thread_time() - cpu
        log.close()
    mb = 1024 * 1024
    copy_rate, clean_rate = copied / mb / copy_s, copied / mb / clean_s  # MB of sealed log per second
    print(f"log: {copied / mb:.1f} MB sealed, {args.keys} keys, compression {args.compression}")
    print(f"plain copy:  {copy_rate:8.1f} MB/s")
    read, wrote = stats.bytes_read / mb, stats.bytes_written / mb
    print(f"cleaner:     {clean_rate:8.1f} MB/s  (read {read:.1f} MB, wrote {wrote:.1f} MB)")
    # The cleaner yields the CPU after every batch (to the broker's event loop; here, to whatever else runs on
    # the machine), so on a shared machine its wall-clock rate varies with the neighbours' load: the rate per
    # second of its own CPU time is the steadier figure.
    print(f"cleaner CPU: {copied / mb / clean_cpu_s:8.1f} MB/s of the cleaning thread's CPU time")
    print(f"  {stats.records_read / clean_s:,.0f} records/s")
    print(f"  removed {stats.records_removed} of {stats.records_read} records, map {stats.map_entries} keys")
    print(f"ratio cleaner/copy: {clean_rate / copy_rate:.3f}")


if __name__ == "__main__":
    main()
