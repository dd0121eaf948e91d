#!/usr/bin/env python3
"""What TLS costs: produce and consume throughput over TLS against plaintext, in the same run.

Two clusters of one controller and one broker run side by side, one plaintext and one TLS (every listener SSL,
client certificates required, as ``DevCluster.create(tls=True)`` lays it out). Four paths are measured on each,
on 100-byte records into a fresh one-partition topic per round:

  odradek-produce   odradek's producer over gRPC, acks=1, a tight send loop then a flush;
  odradek-consume   odradek's consumer over gRPC reading what it wrote, from the start;
  kafka-produce     confluent-kafka (librdkafka) on the Kafka listener, acks=1, PLAINTEXT vs SSL;
  kafka-consume     confluent-kafka reading what it wrote.

Rounds interleave the two clusters path by path (their order alternating from round to round), so that a noisy
neighbour slows both sides alike; each figure is the median over the rounds. The run is bounded: ``--records``
per path and round, ``--rounds``, a time limit after which no new round starts, and a read that stalls for 60 s
fails. Logs live on tmpfs when the machine has one, so that the disk does not set the pace.

    python bench/tls_bench.py [--records 100000] [--rounds 3] [--max-seconds 300]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from client_loops import librdkafka_consumer_rate, librdkafka_producer_rate, producer_rate, read_rate

from odradek.client import Admin, Consumer
from odradek.client.structs import TopicPartition
from odradek.deploy.local import DevCluster

VALUE_SIZE = 100
STALL_S = 60.0  # a read that gets nothing for this long fails the bench
PATHS = ("odradek-produce", "odradek-consume", "kafka-produce", "kafka-consume")
KAFKA_PRODUCER = {
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "batch.num.messages": 100_000,
    "queue.buffering.max.messages": 2_000_000,
    "delivery.report.only.error": True,
}
KAFKA_CONSUMER = {
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "fetch.wait.max.ms": 100,
    "queued.min.messages": 1_000_000,
    "fetch.queue.backoff.ms": 10,
}
ODRADEK_PRODUCER = {"acks": "1", "batch.size": 1_000_000, "linger.ms": 5, "buffer.memory": 256 * 1024 * 1024}
ODRADEK_CONSUMER = {"auto.offset.reset": "earliest", "max.poll.records": 10_000}


@contextmanager
def running(directory: Path, tls: bool) -> Iterator[DevCluster]:
    cluster = DevCluster.create(directory, controllers=1, brokers=1, tls=tls)
    cluster.start_all_and_wait(60)
    try:
        yield cluster
    finally:
        cluster.stop_all(timeout=20)


def create_topic(cluster: DevCluster, name: str) -> None:
    with Admin({"bootstrap.servers": cluster.admin_servers, **cluster.security_config()}) as admin:
        admin.create_topic(name, 1, 1)
        deadline = time.monotonic() + 30
        while admin.describe_topic(name).partitions[0].leader < 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {name} has no leader after 30 s")
            time.sleep(0.1)


def odradek_produce(cluster: DevCluster, topic: str, records: int) -> float:
    return producer_rate(cluster.client_config(**ODRADEK_PRODUCER), topic, records, VALUE_SIZE)


def odradek_consume(cluster: DevCluster, topic: str, records: int) -> float:
    with Consumer(cluster.client_config(**ODRADEK_CONSUMER)) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        return read_rate(lambda: len(consumer.poll(timeout_ms=500)), records, STALL_S)


def kafka_config(cluster: DevCluster, settings: dict[str, Any]) -> dict[str, Any]:
    """librdkafka's config for the cluster's Kafka listener: the same ssl.* names as odradek's clients."""
    return {**settings, "bootstrap.servers": cluster.kafka_bootstrap_servers, **cluster.security_config()}


def kafka_produce(cluster: DevCluster, topic: str, records: int) -> float:
    return librdkafka_producer_rate(kafka_config(cluster, {**KAFKA_PRODUCER, "acks": "1"}), topic, records, VALUE_SIZE)


def kafka_consume(cluster: DevCluster, topic: str, records: int) -> float:
    config = kafka_config(cluster, {**KAFKA_CONSUMER, "group.id": "tls-bench"})
    return librdkafka_consumer_rate(config, topic, 1, records)


def one_round(clusters: dict[str, DevCluster], n: int, records: int, rates: dict[tuple[str, str], list[float]]) -> None:
    """Each path on both clusters, the clusters' order alternating by round; produce before consume (the consume
    reads what that round's produce wrote)."""
    order = list(clusters) if n % 2 == 0 else list(reversed(clusters))
    for client, produce, consume in (
        ("odradek", odradek_produce, odradek_consume),
        ("kafka", kafka_produce, kafka_consume),
    ):
        topics = {}
        for name in order:
            topics[name] = f"{client}-{n}"
            create_topic(clusters[name], topics[name])
        for step, fn in (("produce", produce), ("consume", consume)):
            for name in order:
                rates[(f"{client}-{step}", name)].append(fn(clusters[name], topics[name], records))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000, help="records per path and round (100-byte)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-seconds", type=float, default=300.0, help="no new round starts after this")
    args = parser.parse_args()
    if args.records < 1 or args.rounds < 1:
        parser.error("--records and --rounds must be at least 1")
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    root = Path(tempfile.mkdtemp(prefix="odradek-tls-bench-", dir=shm))
    rates: dict[tuple[str, str], list[float]] = {(p, c): [] for p in PATHS for c in ("plaintext", "tls")}
    began = time.monotonic()
    try:
        with ExitStack() as stack:
            clusters = {
                "plaintext": stack.enter_context(running(root / "plaintext", tls=False)),
                "tls": stack.enter_context(running(root / "tls", tls=True)),
            }
            for n in range(args.rounds):
                if n and time.monotonic() - began > args.max_seconds:
                    print(f"time limit: stopping after {n} rounds", flush=True)
                    break
                one_round(clusters, n, args.records, rates)
                print(f"round {n + 1}/{args.rounds} done ({time.monotonic() - began:.0f} s)", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rounds = len(rates[(PATHS[0], "plaintext")])
    print(f"\n{args.records} records of {VALUE_SIZE} B per path and round, median of {rounds} rounds, records/s:")
    print(f"  {'path':<18}{'plaintext':>12}{'TLS':>12}{'TLS/plaintext':>15}   per-round TLS/plaintext")
    for path in PATHS:
        plain, tls = (statistics.median(rates[(path, c)]) for c in ("plaintext", "tls"))
        each = " ".join(f"{t / p:.2f}" for p, t in zip(rates[(path, "plaintext")], rates[(path, "tls")], strict=True))
        print(f"  {path:<18}{plain:>12,.0f}{tls:>12,.0f}{tls / plain:>15.2f}   {each}")


if __name__ == "__main__":
    main()
