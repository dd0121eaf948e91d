#!/usr/bin/env python3
"""Produce throughput of one broker with the log cleaner busy, as a ratio to the same broker with the cleaner
disabled, measured in the same run.

A cluster of one controller and one broker (RF=1). Each round: with the cleaner disabled
(``log.cleaner.enable=false``), create a compacted topic (``segment.bytes`` 1 MiB, ``min.cleanable.dirty.ratio``
0) and preload it with ``--preload-mb`` of keyed 100-byte records (about 3 updates a key), so that the cleaner has
a backlog; run ``odradek perf produce`` (acks=1, 100-byte records, ``--records``) to a plain topic: the "off"
figure. Then restart the broker with the cleaner enabled (``log.cleaner.backoff.ms`` 100) and run the same perf
produce while the cleaner works through the backlog: the "busy" figure. Every process shares this machine's cores
(the client, the broker, its cleaner thread, and whatever else runs here), so a neighbour's load moves single
figures a lot: the result is the median over the rounds of each round's busy / off ratio (the two windows of a
round are seconds apart), with the medians of the rates beside it.

To be honest about how much the cleaner ran, each busy window prints the bytes the cleaner read during it (the
broker's ``odradek_log_cleaner_bytes_read`` counter, which counts a pass when it ends: the pass still running at the
window's end is shown apart) and whether the cleaner still had work when the window ended (a pass finished after
it); a window where it had none is flagged, and its ratio would flatter the cleaner.

    python bench/compaction_produce_bench.py [--records N] [--preload-mb MB] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import tomli_w
from prometheus_client.parser import text_string_to_metric_families

from odradek.client.admin import Admin
from odradek.client.producer.producer import AsyncProducer
from odradek.deploy.local import DevCluster, process_state, run_sync

BROKER = 2  # node ids: the controller is 1
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": str(1 << 20), "min.cleanable.dirty.ratio": "0"}
NODE_SETTINGS = {"log.cleaner.backoff.ms": 100}
MB = 1024 * 1024


@dataclass
class CleanerCounters:
    bytes_read: float
    passes: float


def cleaner_counters(cluster: DevCluster) -> CleanerCounters:
    port = cluster.node(BROKER).metrics_port
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    values = {f.name: f.samples[0].value for f in text_string_to_metric_families(text) if f.samples}
    return CleanerCounters(values["odradek_log_cleaner_bytes_read"], values["odradek_log_cleaner_passes"])


def restart_broker(cluster: DevCluster, cleaner: bool) -> None:
    """Stop the broker, set ``log.cleaner.enable`` in its config, start it and wait until it has registered."""
    epochs = run_sync(cluster.broker_epochs())
    node = cluster.signal(BROKER, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while process_state(node.pid) != "stopped":
        if time.monotonic() > deadline:
            raise TimeoutError("the broker did not stop within 30 s")
        time.sleep(0.1)
    props = tomllib.loads(Path(node.config).read_text())
    props["log.cleaner.enable"] = cleaner
    Path(node.config).write_text(tomli_w.dumps(props))
    cluster.start(BROKER)
    run_sync(cluster.wait_ready(60, newer_than=epochs))


async def preload(servers: str, topic: str, mb: int, seed: int) -> None:
    """``mb`` of keyed 100-byte records, keys drawn from a third as many keys as records."""
    records = mb * MB // 130  # about 130 bytes a record in the log
    rng = random.Random(seed)
    value = rng.randbytes(100)
    config = {"bootstrap.servers": servers, "acks": "1", "linger.ms": 20, "batch.size": 131072}
    async with AsyncProducer(config) as producer:
        await producer.partitions_for(topic)
        for i in range(records):
            producer.send(topic, value, key=b"key-%08d" % rng.randrange(records // 3))
            if i & 1023 == 1023:
                await asyncio.sleep(0)
        await producer.flush()


def perf(servers: str, topic: str, records: int) -> float:
    out = subprocess.run(
        [
            *(sys.executable, "-m", "odradek.client.cli.main", "perf", "produce", "--format", "json", "-X", servers),
            *("--topic", topic, "--num-records", str(records), "--record-size", "100", "--acks", "1"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    rate: float = json.loads(out.stdout.strip().splitlines()[-1])["records_per_sec"]
    return rate


def after_window(cluster: DevCluster, at_end: CleanerCounters, timeout: float = 60.0) -> CleanerCounters | None:
    """The counters once the pass running at the window's end has finished; None if none finished within
    ``timeout`` after it (the cleaner had no work left when the window ended)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = cleaner_counters(cluster)
        if now.passes > at_end.passes:
            return now
        time.sleep(0.2)
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_500_000, help="records per perf produce run")
    parser.add_argument("--preload-mb", type=int, default=120, help="compacted backlog per round")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the compacted topics")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    off: list[float] = []
    busy: list[float] = []
    lines = []
    with tempfile.TemporaryDirectory(prefix="odradek-bench-") as tmp:
        cluster = DevCluster.create(Path(tmp), 1, 1, overrides={**NODE_SETTINGS, "log.cleaner.enable": False})
        cluster.start_all_and_wait(60)
        try:
            admin = Admin({"bootstrap.servers": cluster.admin_servers, "request.timeout.ms": 30000})
            admin.create_topic("plain", 1, 1)
            servers = cluster.bootstrap_servers
            for round_ in range(args.rounds):
                topic = f"compacted-{round_}"
                admin.create_topic(topic, args.partitions, 1, COMPACTED)
                t = time.perf_counter()
                asyncio.run(preload(servers, topic, args.preload_mb, round_))
                preload_s = time.perf_counter() - t
                off.append(perf(servers, "plain", args.records))
                admin.close()
                restart_broker(cluster, cleaner=True)
                admin = Admin({"bootstrap.servers": cluster.admin_servers, "request.timeout.ms": 30000})
                start = cleaner_counters(cluster)
                t = time.perf_counter()
                busy.append(perf(servers, "plain", args.records))
                window_s = time.perf_counter() - t
                end = cleaner_counters(cluster)
                later = after_window(cluster, end)
                in_window = (end.bytes_read - start.bytes_read) / MB
                if later is None:
                    state = "NO pass finished after the window: the cleaner ran out of work, the ratio flatters it"
                else:
                    state = f"the pass running at its end read {(later.bytes_read - end.bytes_read) / MB:.0f} MB"
                lines.append(
                    f"round {round_}: preload {args.preload_mb} MB in {preload_s:.0f} s; off {off[-1]:,.0f} rec/s, "
                    f"busy {busy[-1]:,.0f} rec/s over {window_s:.1f} s; cleaner read {in_window:.0f} MB in "
                    f"{end.passes - start.passes:.0f} passes finished in the window ({in_window / window_s:.1f} MB/s), "
                    f"{state}"
                )
                print(lines[-1], flush=True)
                admin.close()
                restart_broker(cluster, cleaner=False)
                admin = Admin({"bootstrap.servers": cluster.admin_servers, "request.timeout.ms": 30000})
            admin.close()
        finally:
            cluster.stop_all(timeout=20)
    off_rate, busy_rate = statistics.median(off), statistics.median(busy)
    ratios = sorted(b / o for b, o in zip(busy, off, strict=True))
    print(f"perf produce, acks=1, 100-byte records, {args.records} per run, {args.rounds} rounds")
    print(f"cleaner disabled: {off_rate:>10,.0f} records/s (median)")
    print(f"cleaner busy:     {busy_rate:>10,.0f} records/s (median)")
    print(f"ratio busy/disabled per round: {' '.join(f'{r:.2f}' for r in ratios)}")
    print(f"ratio busy/disabled: {statistics.median(ratios):.2f} (median of the rounds)")


if __name__ == "__main__":
    main()
