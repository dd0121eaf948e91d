#!/usr/bin/env python3
"""The Kafka listener against its targets (issue 21), with real Kafka clients and real broker processes, all
figures from the same run so that their ratios hold on a noisy machine:

  a. confluent-kafka (librdkafka) producer, acks=1, one broker: records/s and MB/s (target >= 1,000,000 records/s);
  b. confluent-kafka consumer reading what (a) wrote, from the page cache, with no group (target >= 2,000,000/s);
  c. the broker's CPU seconds per GB fetched through the Kafka listener (the read of b) and through gRPC (odradek's
     own consumer reading the same data), and their ratio (target <= 0.3);
  d. a 3-broker cluster, RF=3 acks=all with idempotence: confluent-kafka through the Kafka listener and odradek's
     producer through gRPC, the same records, side by side.

The broker's CPU is its process's utime + stime from /proc, read before and after each read; its idle rate,
measured just before, is also taken off, since a slower read pays more of the broker's background work. Logs live
on tmpfs: this machine's disk sustains only ~200 MB/s of writes, and the reads are meant to come from the page
cache. Clients run in this process, their threads sharing the cores with the brokers.

    python bench/kafka_bench.py [--records N] [--record-size B] [--partitions P] [--rounds R] [--only a,b,c,d]
    python bench/kafka_bench.py --quick     # a smoke run of a few seconds per cluster
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin
from client_loops import librdkafka_consumer_rate, librdkafka_producer_rate, producer_rate, read_rate

from odradek.client import Consumer
from odradek.client.admin import Admin
from odradek.client.structs import TopicPartition
from odradek.deploy.local import DevCluster
from odradek.deploy.process import tuned_environment

PRODUCE_TARGET = 1_000_000  # records/s
CONSUME_TARGET = 2_000_000  # records/s
CPU_RATIO_TARGET = 0.3  # Kafka listener / gRPC, broker CPU seconds per GB fetched

# librdkafka tuned for throughput: large batches (up to the broker's default message.max.bytes), a short linger to
# fill them, a queue deep enough that the application never waits for it, and no per-record delivery callback.
KAFKA_PRODUCER = {
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "batch.num.messages": 100_000,
    "compression.type": "none",
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "delivery.report.only.error": True,
}
KAFKA_CONSUMER = {
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 16_777_216,
    "receive.message.max.bytes": 52_428_800 + 65_536,
    "queued.max.messages.kbytes": 262_144,
    # librdkafka stops fetching a partition for fetch.queue.backoff.ms (1 s by default) once its local queue holds
    # queued.min.messages (100,000 by default): one 16 MiB fetch of 100-byte records is more than that.
    "queued.min.messages": 1_000_000,
    "fetch.queue.backoff.ms": 10,
    "fetch.wait.max.ms": 100,
}
ODRADEK_PRODUCER = {"batch.size": 1_000_000, "linger.ms": 5, "buffer.memory": 256 * 1024 * 1024}
ODRADEK_CONSUMER = {
    "auto.offset.reset": "earliest",
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 16_777_216,
    "max.poll.records": 10_000,
}


# ---- measuring ----


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def client_cpu_seconds() -> float:
    """CPU seconds of this process (all threads: librdkafka's too) and of its waited-for children (kcat)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@contextmanager
def broker_cpu(pid: int) -> Iterator[dict[str, float]]:
    """The broker's CPU seconds, the wall seconds and the clients' CPU seconds per wall second (over 1: they kept
    more than a core busy) spent inside the block, in the yielded dict once it ends."""
    out: dict[str, float] = {}
    cpu, client, wall = cpu_seconds(pid), client_cpu_seconds(), time.perf_counter()
    yield out
    out["wall"] = time.perf_counter() - wall
    out["cpu"] = cpu_seconds(pid) - cpu
    out["client"] = (client_cpu_seconds() - client) / out["wall"]


def idle_rate(pid: int, seconds: float) -> float:
    """The broker's CPU seconds per second while no client talks to it (heartbeats, timers)."""
    with broker_cpu(pid) as used:
        time.sleep(seconds)
    return used["cpu"] / used["wall"]


def log_bytes(cluster: DevCluster, topic: str) -> int:
    """Bytes of the topic's segment files on the brokers: what a read of the whole topic fetches."""
    return sum(
        f.stat().st_size for n in cluster.nodes if n.kafka_port for f in (n.directory / "data").glob(f"{topic}-*/*.log")
    )


def met(value: float, target: float, at_most: bool = False) -> str:
    ok = value <= target if at_most else value >= target
    return f"target {'<=' if at_most else '>='} {target:,}: {'met' if ok else 'NOT met'}"


# ---- clusters and topics ----


@contextmanager
def running(directory: Path, brokers: int) -> Iterator[DevCluster]:
    cluster = DevCluster.create(directory, controllers=1, brokers=brokers, overrides={"log.segment.bytes": 1 << 30})
    cluster.start_all_and_wait(60)
    try:
        yield cluster
    finally:
        cluster.stop_all(timeout=20)


def create_topic(cluster: DevCluster, name: str, partitions: int, rf: int) -> None:
    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        admin.create_topic(name, partitions, rf, {"min.insync.replicas": "2"} if rf == 3 else {})
    wait_for_leaders(cluster, name, partitions)


def wait_for_leaders(cluster: DevCluster, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """Until the Kafka listener reports a leader for every partition (a fresh topic's first seconds)."""
    probe = confluent_kafka.admin.AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        t = probe.list_topics(topic, timeout=10).topics.get(topic)
        ready = t is not None and t.error is None and len(t.partitions) == partitions
        if ready and all(p.error is None and p.leader >= 0 for p in t.partitions.values()):
            return
        time.sleep(0.2)
    raise RuntimeError(f"topic {topic} has no leader for every partition after {timeout} s")


# ---- clients ----


def kafka_produce(servers: str, topic: str, records: int, size: int, acks: str, idempotent: bool = False) -> float:
    config = {**KAFKA_PRODUCER, "bootstrap.servers": servers, "acks": acks, "enable.idempotence": idempotent}
    return librdkafka_producer_rate(config, topic, records, size)


def kafka_consume(servers: str, topic: str, partitions: int, records: int) -> float:
    config = {**KAFKA_CONSUMER, "bootstrap.servers": servers, "group.id": "kafka-bench"}
    return librdkafka_consumer_rate(config, topic, partitions, records)


def grpc_consume(servers: str, topic: str, partitions: int, records: int) -> float:
    """Records/s of odradek's own consumer (gRPC) reading the topic from the start, with assign."""
    with Consumer({**ODRADEK_CONSUMER, "bootstrap.servers": servers}) as consumer:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        return read_rate(lambda: len(consumer.poll(timeout_ms=500)), records)


def grpc_produce(servers: str, topic: str, records: int, size: int, acks: str) -> float:
    """Records/s of odradek's producer (gRPC, idempotent) sending ``records`` values."""
    return producer_rate({**ODRADEK_PRODUCER, "bootstrap.servers": servers, "acks": acks}, topic, records, size)


# ---- the figures ----


def kcat_values(path: Path, records: int, size: int) -> Path:
    """A file of ``records`` lines of ``size`` random hex characters, for ``kcat -P -l``."""
    line = os.urandom(size // 2 + 1).hex()[:size].encode() + b"\n"
    with path.open("wb") as f:
        for done in range(0, records, 10_000):
            f.write(line * min(10_000, records - done))
    return path


def kcat_produce(servers: str, topic: str, values: Path, records: int, acks: str) -> float:
    """Records/s of kcat (librdkafka driven from C) sending the lines of ``values``, process start included."""
    config = {k: v for k, v in KAFKA_PRODUCER.items() if k != "delivery.report.only.error"}
    start = time.perf_counter()
    subprocess.run(
        ["kcat", "-P", "-q", "-b", servers, "-t", topic, "-l", *kcat_config({**config, "acks": acks}), str(values)],
        check=True,
        timeout=300,
    )
    return records / (time.perf_counter() - start)


def kcat_consume(servers: str, topic: str, records: int) -> float:
    """Records/s of kcat reading the topic from the start to its end (one offset printed per record, counted),
    process start included."""
    config = {k: v for k, v in KAFKA_CONSUMER.items() if k != "fetch.queue.backoff.ms"}  # kcat's librdkafka: 2.0
    start = time.perf_counter()
    out = subprocess.run(
        ["kcat", "-C", "-q", "-e", "-b", servers, "-t", topic, "-o", "beginning", "-f", "%o\n", *kcat_config(config)],
        check=True,
        stdout=subprocess.PIPE,
        timeout=300,
    ).stdout
    elapsed = time.perf_counter() - start
    if (read := out.count(b"\n")) != records:
        raise RuntimeError(f"kcat read {read} records, not {records}")
    return records / elapsed


def kcat_config(config: dict[str, object]) -> list[str]:
    return [arg for k, v in config.items() for arg in ("-X", f"{k}={str(v).lower()}")]


# ---- the figures ----


def one_broker(tmp: Path, args: argparse.Namespace, only: set[str]) -> None:
    """a, b and c: one broker; a writes the data that b and c read (written anyway when only b or c is asked).
    Where kcat is installed, it runs beside confluent-kafka: the same librdkafka without a Python call per record."""
    n, size, partitions = args.records, args.record_size, args.partitions
    kcat = shutil.which("kcat") is not None
    values = kcat_values(tmp / "values", n, size) if kcat else None
    with running(tmp / "one", 1) as cluster:
        broker = next(node for node in cluster.nodes if node.kafka_port)
        kafka, grpc_servers = cluster.kafka_bootstrap_servers, cluster.bootstrap_servers
        create_topic(cluster, "bench", partitions, 1)
        # (records/s, broker CPU s, client CPU s/s)
        produced: dict[str, list[tuple[float, float, float]]] = {"python": [], "kcat": []}
        for round_ in range(args.rounds):
            for client in ("python", "kcat") if round_ % 2 == 0 else ("kcat", "python"):
                with broker_cpu(broker.pid) as used:
                    if client == "python":
                        rate = kafka_produce(kafka, "bench", n, size, "1")
                    elif values is not None:
                        rate = kcat_produce(kafka, "bench", values, n, "1")
                    else:
                        continue
                produced[client].append((rate, used["cpu"], used["client"]))
        total = n * sum(map(len, produced.values()))
        if "a" in only:
            gb = n * size / 1e9
            print(f"a. produce, acks=1, 1 broker, {partitions} partitions, {n:,} x {size} B (best of {args.rounds})")
            for client, label, note in (
                ("python", "confluent-kafka", met(max(produced["python"])[0], PRODUCE_TARGET)),
                ("kcat", "kcat", "(librdkafka from C, process start included)"),
            ):
                if produced[client]:
                    rate, cpu, client_load = max(produced[client])
                    print(
                        f"   {label:<15} {rate:11,.0f} records/s {rate * size / 1e6:6.1f} MB/s  broker "
                        f"{cpu / gb:4.2f} CPU s/GB of values, client {client_load:4.2f} CPU s/s  {note}",
                        flush=True,
                    )
        if not only & {"b", "c"}:
            return
        fetched = log_bytes(cluster, "bench")
        idle = idle_rate(broker.pid, 1.0 if args.quick else 3.0)
        paths = ["kafka", *(["grpc"] if "c" in only else []), *(["kcat"] if kcat and "b" in only else [])]
        # (records/s, broker CPU s, wall s, client CPU s/s)
        reads: dict[str, list[tuple[float, float, float, float]]] = {path: [] for path in paths}
        for round_ in range(args.rounds):
            for path in paths if round_ % 2 == 0 else paths[::-1]:
                with broker_cpu(broker.pid) as used:
                    if path == "kafka":
                        rate = kafka_consume(kafka, "bench", partitions, total)
                    elif path == "grpc":
                        rate = grpc_consume(grpc_servers, "bench", partitions, total)
                    else:
                        rate = kcat_consume(kafka, "bench", total)
                reads[path].append((rate, used["cpu"], used["wall"], used["client"]))
        if "b" in only:
            print(f"b. consume from page cache, no group, {total:,} x {size} B (best of {args.rounds})")
            for path, label, note in (
                ("kafka", "confluent-kafka", met(max(reads["kafka"])[0], CONSUME_TARGET)),
                ("kcat", "kcat", "(librdkafka from C, process start included)"),
            ):
                if reads.get(path):
                    rate, _, _, client_load = max(reads[path])
                    print(
                        f"   {label:<15} {rate:11,.0f} records/s {rate * size / 1e6:6.1f} MB/s  "
                        f"client {client_load:4.2f} CPU s/s  {note}",
                        flush=True,
                    )
        if "c" in only:
            gb = fetched / 1e9
            print(f"c. broker CPU per GB fetched ({fetched / 1e6:.0f} MB of segments; broker idle: {idle:.3f} CPU s/s)")
            per_gb: dict[str, tuple[float, float]] = {}
            for path, label in (("kafka", "Kafka listener, confluent-kafka"), ("grpc", "gRPC, odradek Consumer")):
                # The read with the least broker CPU, raw and with the broker's idle work over its duration taken off.
                rate, cpu, wall, _ = min(reads[path], key=lambda r: r[1])
                per_gb[path] = (cpu / gb, max(0.0, cpu - idle * wall) / gb)
                print(
                    f"   {label:<34} {per_gb[path][0]:7.2f} CPU s/GB ({per_gb[path][1]:.2f} without idle), "
                    f"read at {rate:,.0f} records/s",
                    flush=True,
                )
            raw, net = per_gb["kafka"][0] / per_gb["grpc"][0], per_gb["kafka"][1] / max(per_gb["grpc"][1], 1e-9)
            print(
                f"   ratio Kafka / gRPC: {net:.3f} without idle ({met(net, CPU_RATIO_TARGET, at_most=True)}), "
                f"{raw:.3f} raw",
                flush=True,
            )


def three_brokers(tmp: Path, args: argparse.Namespace) -> None:
    """d: the same RF=3 acks=all idempotent workload through each listener, in alternating order per round."""
    n, size, partitions = args.records, args.record_size, args.partitions
    with running(tmp / "three", 3) as cluster:
        create_topic(cluster, "rf3-kafka", partitions, 3)
        create_topic(cluster, "rf3-grpc", partitions, 3)
        rates: dict[str, list[float]] = {"kafka": [], "grpc": []}
        for round_ in range(args.rounds):
            for path in ("kafka", "grpc") if round_ % 2 == 0 else ("grpc", "kafka"):
                if path == "kafka":
                    rate = kafka_produce(cluster.kafka_bootstrap_servers, "rf3-kafka", n, size, "all", True)
                else:
                    rate = grpc_produce(cluster.bootstrap_servers, "rf3-grpc", n, size, "all")
                rates[path].append(rate)
        kafka, grpc_rate = max(rates["kafka"]), max(rates["grpc"])
        print(f"d. RF=3 acks=all idempotent produce, 3 brokers, {partitions} partitions, {n:,} x {size} B")
        print(f"   Kafka listener, confluent-kafka  {kafka:12,.0f} records/s  {kafka * size / 1e6:7.1f} MB/s")
        print(f"   gRPC, odradek AsyncProducer      {grpc_rate:12,.0f} records/s  {grpc_rate * size / 1e6:7.1f} MB/s")
        print(f"   ratio Kafka / gRPC: {kafka / grpc_rate:.2f} (best of {args.rounds} each)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000, help="records per produce run (default 2,000,000)")
    parser.add_argument("--record-size", type=int, default=100, help="value bytes (default 100)")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of each topic (default 4)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each figure, best reported (default 2)")
    parser.add_argument("--only", default="a,b,c,d", help="comma-separated figures to run (default a,b,c,d)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 50,000 records, one round")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if not only or only - set("abcd"):
        parser.error("--only takes a comma-separated subset of a,b,c,d")
    if args.quick:
        args.records, args.rounds = 50_000, 1
    if args.records < 1 or args.record_size < 1 or args.partitions < 1 or args.rounds < 1:
        parser.error("--records, --record-size, --partitions and --rounds must be positive")
    started = time.perf_counter()
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(prefix="odradek-kafka-bench-", dir=shm) as tmp:
        if only & {"a", "b", "c"}:
            one_broker(Path(tmp), args, only)
        if "d" in only:
            three_brokers(Path(tmp), args)
    print(f"total bench time: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    # The odradek clients in this process get the malloc tuning the brokers run with (set before the interpreter
    # starts, hence the re-exec).
    if "ODRADEK_BENCH_CHILD" not in os.environ:
        os.execve(sys.executable, [sys.executable, *sys.argv], {**tuned_environment(), "ODRADEK_BENCH_CHILD": "1"})
    main()
