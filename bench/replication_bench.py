#!/usr/bin/env python3
"""Produce throughput with replication: ``odradek perf produce`` (100-byte records) against a local cluster of
3 controllers and 3 brokers, for RF=3 with acks=all (min.insync.replicas=2) with the idempotent producer (the
default) and without it, RF=3 with acks=1, and the RF=1 baselines, on 1 and 3 partitions.

Configurations run in interleaved rounds so that a noisy neighbour slows all of them; each figure is the median
of the rounds, and the ratio column compares it with RF=1 acks=1 on the same partition count, measured in the
same run. All six server processes, the client and its perf loop share this machine's cores. Runs in about 90 s.

    python bench/replication_bench.py [--records N] [--rounds R] [--replica-fetch-protocol kafka|grpc]

``--replica-fetch-protocol`` sets the followers' transport (default: the nodes' default, kafka); run it once per
transport to compare them by their ratios to the RF=1 baseline of each run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from odradek.client.admin import Admin
from odradek.deploy.local import DevCluster

CONFIGS = [  # (label, replication factor, acks, enable.idempotence)
    ("RF=1 acks=1", 1, "1", "false"),
    ("RF=1 acks=all", 1, "all", "true"),
    ("RF=3 acks=1", 3, "1", "false"),
    ("RF=3 acks=all", 3, "all", "true"),
    ("RF=3 acks=all, no idempotence", 3, "all", "false"),
]


def perf(servers: str, topic: str, acks: str, idempotence: str, records: int) -> float:
    out = subprocess.run(
        [
            *(sys.executable, "-m", "odradek.client.cli.main", "perf", "produce", "--format", "json", "-X", servers),
            *("--topic", topic, "--num-records", str(records), "--record-size", "100", "--acks", acks),
            *("-P", f"enable.idempotence={idempotence}"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])["records_per_sec"]


def settle(admin: Admin, topic: str, timeout: float = 20.0) -> None:
    """Wait until the followers have caught up with the last run (an acks=1 run ends before they have, and the
    next run would pay for their catching up)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        marks = [(p.high_watermark, len(p.isr)) for p in admin.describe_topic(topic).partitions]
        if marks == last:
            return
        last = marks
        time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--replica-fetch-protocol", choices=("kafka", "grpc"), default=None)
    args = parser.parse_args()
    overrides = {"replica.fetch.protocol": args.replica_fetch_protocol} if args.replica_fetch_protocol else {}
    with tempfile.TemporaryDirectory(prefix="odradek-bench-") as tmp:
        cluster = DevCluster.create(Path(tmp), 3, 3, overrides=overrides)
        cluster.start_all()
        try:
            asyncio.run(cluster.wait_ready(60))
            admin = Admin({"bootstrap.servers": cluster.admin_servers})
            topics = {}
            for partitions in (1, 3):
                for rf in (1, 3):
                    name = f"bench-p{partitions}-rf{rf}"
                    admin.create_topic(name, partitions, rf, {"min.insync.replicas": "2"} if rf == 3 else {})
                    topics[partitions, rf] = name
            results: dict[tuple[int, str], list[float]] = {}
            for round_ in range(args.rounds):
                for partitions in (1, 3):
                    # Alternate the order, so no configuration always follows the same one.
                    for label, rf, acks, idempotence in CONFIGS[:: 1 if round_ % 2 == 0 else -1]:
                        rate = perf(cluster.bootstrap_servers, topics[partitions, rf], acks, idempotence, args.records)
                        results.setdefault((partitions, label), []).append(rate)
                        settle(admin, topics[partitions, rf])
            admin.close()
        finally:
            cluster.stop_all(timeout=20)
    transport = args.replica_fetch_protocol or "default (kafka)"
    print(f"perf produce, 100-byte records, {args.records} per run, median of {args.rounds} interleaved rounds")
    print(f"followers fetch over: {transport}")
    print(f"{'partitions':>10}  {'config':<30} {'records/s':>12} {'vs RF=1 acks=1':>15}")
    for partitions in (1, 3):
        base = statistics.median(results[partitions, CONFIGS[0][0]])
        for label, *_ in CONFIGS:
            rate = statistics.median(results[partitions, label])
            print(f"{partitions:>10}  {label:<30} {rate:>12,.0f} {rate / base:>15.2f}")
        on, off = (statistics.median(results[partitions, label]) for label in (CONFIGS[3][0], CONFIGS[4][0]))
        print(f"{partitions:>10}  idempotence on / off at RF=3 acks=all: {on / off:.2f}")


if __name__ == "__main__":
    main()
