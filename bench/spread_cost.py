#!/usr/bin/env python3
"""What one replicated partition-batch costs, in CPU-seconds per process: the spread phase of ``scale_spread.py``
alone, with each process's CPU counted.

A 1-controller, 3-broker dev cluster gets ``--topics`` x ``--per-topic`` partitions (RF=3) and a 6-partition
baseline topic. odradek's producer (acks=all, linger.ms=20, 100-byte records) then sends round-robin over the 6
partitions, and over all of the spread ones, each for ``--seconds``. For each run: records/s, and the CPU-seconds
(utime + stime, from ``/proc``) each broker and the client process spent, per record. Over thousands of
partitions at these rates a batch holds one record, so CPU per record there is CPU per replicated batch (its
leader, its two followers and the client), and two cores allow at most ``2 / that`` batches a second.

``--librdkafka`` sends through confluent-kafka (librdkafka, its threads counted as the client's) over the Kafka
listener instead, with the same settings. ``--profile DIR`` records every broker and the client with py-spy
(``-f raw``, 100 Hz) during the spread run; with ``--gil`` only samples holding the GIL (CPU spent in Python,
not threads waiting in a poll).

    python bench/spread_cost.py [--topics 20] [--per-topic 100] [--seconds 20] [--librdkafka] [--profile DIR [--gil]]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scale_spread import BASELINE, RECORD, _wait_whole, librdkafka_send, warm

from odradek.client.producer import Producer
from odradek.client.structs import TopicPartition
from odradek.deploy.local import DevCluster, run_sync

TICKS = os.sysconf("SC_CLK_TCK")
PY_SPY = Path.home() / ".local/bin/py-spy"


def cpu_seconds(pid: int, system_only: bool = False) -> float:
    """utime + stime of ``pid`` (all its threads), or stime alone."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[12]) + (0 if system_only else int(fields[11]))) / TICKS


@contextlib.contextmanager
def profiled(directory: Path | None, pids: dict[str, int], phase: str, gil: bool = False) -> Iterator[None]:
    spies: list[subprocess.Popen[bytes]] = []
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
        for name, pid in pids.items():
            out = directory / f"{phase}-{name}.txt"
            command = [str(PY_SPY), "record", "-p", str(pid), "-r", "100", "-f", "raw", "--nonblocking", "-o", str(out)]
            command += ["--gil"] if gil else []
            spies.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1)
    try:
        yield
    finally:
        for spy in spies:
            spy.send_signal(signal.SIGINT)
        for spy in spies:
            try:
                spy.wait(30)
            except subprocess.TimeoutExpired:
                spy.kill()
                spy.wait()


def run(
    cluster: DevCluster,
    partitions: list[TopicPartition],
    seconds: float,
    pids: dict[str, int],
    client: dict[str, str] | None = None,
    librdkafka: bool = False,
) -> dict[str, Any]:
    """Records/s over ``partitions`` and each process's CPU-seconds per record (librdkafka's threads are the
    client process's)."""
    if librdkafka:
        librdkafka_send(cluster, partitions[:1], 1, 30, client)  # connected, metadata known
        before, system = _cpu(pids)
        started = time.monotonic()
        sent = librdkafka_send(cluster, partitions, 10**9, seconds, client)
        elapsed = time.monotonic() - started
        return _figures(sent, elapsed, before, system, pids)
    config = {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 20, **(client or {})}
    producer = Producer(config)
    try:
        producer.send(partitions[0].topic, RECORD, partition=partitions[0].partition)
        producer.flush(30)  # connected, metadata known
        before, system = _cpu(pids)
        sent, started = 0, time.monotonic()
        deadline = started + seconds
        while sent % 1000 or time.monotonic() < deadline:
            tp = partitions[sent % len(partitions)]
            producer.send(tp.topic, RECORD, partition=tp.partition)
            sent += 1
        producer.flush(120)
        elapsed = time.monotonic() - started
    finally:
        producer.close()
    return _figures(sent, elapsed, before, system, pids)


def _cpu(pids: dict[str, int]) -> tuple[dict[str, float], dict[str, float]]:
    return (
        {name: cpu_seconds(pid) for name, pid in pids.items()},
        {name: cpu_seconds(pid, system_only=True) for name, pid in pids.items()},
    )


def _figures(
    sent: int, elapsed: float, before: dict[str, float], system: dict[str, float], pids: dict[str, int]
) -> dict[str, Any]:
    after, system_after = _cpu(pids)
    cpu = {name: after[name] - before[name] for name in pids}
    kernel = {name: system_after[name] - system[name] for name in pids}
    return {
        "records": sent,
        "per_s": sent / elapsed,
        "cpu_s": cpu,
        "cpu_us_per_record": {name: 1e6 * c / sent for name, c in cpu.items()},
        "system_share": {name: kernel[name] / cpu[name] if cpu[name] else 0.0 for name in pids},
    }


def batch_counts(data_dir: Path, prefix: str) -> tuple[int, int]:
    """(batches, records) in the logs of one broker's partitions whose names start with ``prefix``: the batches a
    producer's records went into (a follower's copy holds the leader's batches as they were written)."""
    batches = records = 0
    for segment in data_dir.glob(f"{prefix}*/*.log"):
        data = segment.read_bytes()
        position = 0
        while position + 61 <= len(data):
            (length,) = struct.unpack_from(">i", data, position + 8)
            (count,) = struct.unpack_from(">i", data, position + 57)
            batches, records = batches + 1, records + count
            position += 12 + length
    return batches, records


def report(label: str, r: dict[str, Any]) -> None:
    per = r["cpu_us_per_record"]
    total = sum(per.values())
    parts = ", ".join(f"{name} {us:.0f} ({100 * r['system_share'][name]:.0f}% system)" for name, us in per.items())
    print(f"  {label}: {r['per_s']:,.0f} records/s; CPU us per record {total:.0f} ({parts})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--per-topic", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--profile", type=Path)
    parser.add_argument("--gil", action="store_true", help="profile only samples holding the GIL")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a broker config override")
    parser.add_argument("--client-set", action="append", default=[], metavar="NAME=VALUE", help="a producer config")
    parser.add_argument(
        "--librdkafka", action="store_true", help="confluent-kafka over the Kafka listener instead of odradek's client"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="odradek-spread-cost-") as tmp:
        overrides = dict(item.split("=", 1) for item in args.set)
        cluster = DevCluster.create(Path(tmp), controllers=1, brokers=3, overrides=overrides)
        try:
            cluster.start_all_and_wait(120)
            names = [f"spread-{t}" for t in range(args.topics)]
            specs = {n: {"partitions": args.per_topic, "replication_factor": 3} for n in names}
            specs[BASELINE] = {"partitions": 6, "replication_factor": 3}
            run_sync(cluster.create_topics(specs))
            for name in [*names, BASELINE]:
                _wait_whole(cluster, name, 120)
            spread_tps = [TopicPartition(t, p) for p in range(args.per_topic) for t in names]
            warm(cluster, spread_tps)
            pids = {f"broker{n.node_id}": n.pid for n in cluster.nodes if n.broker_port}
            pids["client"] = os.getpid()
            six = [TopicPartition(BASELINE, p) for p in range(6)]
            client = dict(i.split("=", 1) for i in args.client_set)
            baseline = run(cluster, six, args.seconds, pids, client, args.librdkafka)
            report("6 partitions", baseline)
            with profiled(args.profile, pids, "spread", args.gil):
                spread = run(cluster, spread_tps, args.seconds, pids, client, args.librdkafka)
            report(f"{len(spread_tps):,} partitions", spread)
            broker = next(n for n in cluster.nodes if n.broker_port)
            batches, records = batch_counts(broker.directory / "data", "spread-")
            spread["records_per_batch"] = (records - len(spread_tps)) / max(1, batches - len(spread_tps))
            print(f"  {spread['records_per_batch']:.1f} records per spread batch", flush=True)
            ratio = spread["per_s"] / baseline["per_s"]
            total = sum(spread["cpu_us_per_record"].values())
            print(
                f"  ratio {ratio:.3f}; {total:.0f} CPU-us per spread record: at most {2e6 / total:,.0f}/s on 2 cores",
                flush=True,
            )
        finally:
            cluster.stop_all(timeout=30)
    out = {"six": baseline, "spread": spread, "ratio": ratio}
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    json.dump(out, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
