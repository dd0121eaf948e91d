"""``odradek demo``: what ``make run`` shows: a local 3-controller, 3-broker cluster and its metadata at work."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from typing import Any, TextIO

from odradek.client.cli.common import add_command
from odradek.client.cli.dev import default_dir
from odradek.client.cli.output import emit
from odradek.deploy.local import DevCluster, process_state


def register(sub: argparse._SubParsersAction) -> None:
    demo = add_command(sub, "demo", _demo, "start a local cluster (3 controllers, 3 brokers) and show it working")
    demo.add_argument("--keep", action="store_true", help="reuse a running dev cluster instead of starting afresh")


class _Show:
    """Where the demo's narration goes: stdout, or stderr with ``--format json`` (stdout then holds one JSON
    summary)."""

    out: TextIO = sys.stdout

    def __call__(self, text: str) -> None:
        print(text, file=self.out, flush=True)


say = _Show()


def _step(title: str, *args: str) -> None:
    say(f"\n$ odradek {' '.join(args)}    # {title}")
    result = subprocess.run([sys.executable, "-m", "odradek.client.cli.main", *args], stdout=say.out)
    if result.returncode != 0:
        raise SystemExit(result.returncode)


def _text(data: bytes | None) -> str | None:
    """A key or value as text; None for a null (with ``--keep`` the topic may hold records not sent by the demo)."""
    return None if data is None else data.decode()


def _sample(servers: str) -> dict[str, Any]:
    """Produce ten keyed records through the client API and read them back from the partitions' leaders."""
    from odradek.client import Consumer, ConsumerRecord, Producer, TopicPartition

    say("\n# producing 10 keyed records with odradek.client.Producer (routed to each partition's leader)")
    with Producer({"bootstrap.servers": servers, "linger.ms": 1}) as producer:
        sent = [producer.send("demo", f"event {i}", key=f"user-{i % 4}").result(30) for i in range(10)]
        partitions = producer.partitions_for("demo")
    for m in sent:
        say(f"  sent to partition {m.partition} at offset {m.offset}")
    say("# reading them back with odradek.client.Consumer")
    with Consumer({"bootstrap.servers": servers, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TopicPartition("demo", p) for p in partitions])
        got: list[ConsumerRecord] = []
        deadline = time.monotonic() + 30
        while len(got) < len(sent) and time.monotonic() < deadline:
            got.extend(consumer.poll(timeout_ms=200))
    shown = sorted(got, key=lambda r: (r.partition, r.offset))[-10:]
    for r in shown:
        say(f"  partition {r.partition} offset {r.offset} key={_text(r.key)} value={_text(r.value)}")
    return {
        "sent": [{"partition": m.partition, "offset": m.offset} for m in sent],
        "received": [
            {"partition": r.partition, "offset": r.offset, "key": _text(r.key), "value": _text(r.value)} for r in shown
        ],
    }


def _kafka_sample(servers: str) -> dict[str, Any]:
    """Produce five records through the brokers' Kafka listener with kafka-python, an unmodified Kafka client, and
    read them back with it: the same topic, storage and metadata, on Kafka's own protocol."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KafkaTopicPartition

    say(f"\n# the brokers also speak Kafka's protocol ({servers}): 5 records with kafka-python's KafkaProducer")
    producer = KafkaProducer(bootstrap_servers=servers, acks="all", linger_ms=1)
    try:
        futures = [producer.send("demo", f"kafka event {i}".encode(), key=b"kafka-user") for i in range(5)]
        sent = [f.get(timeout=30) for f in futures]
    finally:
        producer.close(timeout=10)
    for m in sent:
        say(f"  sent to partition {m.partition} at offset {m.offset}")
    say("# reading them back with kafka-python's KafkaConsumer")
    tp = KafkaTopicPartition("demo", sent[0].partition)  # one key: one partition
    consumer = KafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False)
    got: list[Any] = []
    try:
        consumer.assign([tp])
        consumer.seek(tp, sent[0].offset)
        deadline = time.monotonic() + 30
        while len(got) < len(sent) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(records)
    finally:
        consumer.close()
    for r in got:
        say(f"  partition {r.partition} offset {r.offset} key={_text(r.key)} value={_text(r.value)}")
    return {
        "sent": [{"partition": m.partition, "offset": m.offset} for m in sent],
        "received": [
            {"partition": r.partition, "offset": r.offset, "key": _text(r.key), "value": _text(r.value)} for r in got
        ],
    }


def _demo(args: argparse.Namespace) -> None:
    say.out = sys.stderr if args.format == "json" else sys.stdout
    directory = default_dir()
    running = False
    if (directory / "cluster.json").exists():
        cluster = DevCluster.load(directory)
        running = any(process_state(n.pid) != "stopped" for n in cluster.nodes)
        if running and not args.keep:
            _step("stop the previous dev cluster", "dev", "down", "--purge")
            running = False
    if not running:
        _step("start 3 controllers and 3 brokers on 127.0.0.1", "dev", "up", "--controllers", "3", "--brokers", "3")
    _step("the Raft quorum of controllers", "cluster", "quorum")
    _step("registered brokers", "broker", "list")
    topics = subprocess.run(
        [sys.executable, "-m", "odradek.client.cli.main", "topic", "list"], capture_output=True, text=True
    ).stdout.split()
    if "demo" not in topics:
        _step(
            "a replicated topic: 3 replicas, acks=all writes need 2 in sync",
            "topic",
            "create",
            "demo",
            "--partitions",
            "6",
            "--replication-factor",
            "3",
            "-c",
            "min.insync.replicas=2",
        )
    cluster = DevCluster.load(directory)
    sample = _sample(cluster.bootstrap_servers)
    kafka_servers = cluster.kafka_bootstrap_servers
    kafka = _kafka_sample(kafka_servers)
    _step("its partitions: leaders spread over the brokers, offsets after the sample", "topic", "describe", "demo")
    _step("replication health: no under-replicated or offline partitions", "cluster", "health")
    say(
        "\nThe cluster keeps running. Try: odradek dev kill 1 && odradek cluster quorum   "
        "(a new controller leader is elected),\nor odradek dev kill 4 && odradek cluster health   "
        "(broker 4's partitions get new leaders from their ISR)\n"
        f"Kafka clients connect to {kafka_servers} (e.g. kcat -b {kafka_servers} -L)"
        "\nStop it with: odradek dev down"
    )
    if args.format == "json":
        summary = {
            "dir": str(cluster.directory),
            "bootstrap_servers": cluster.bootstrap_servers,
            "controllers": cluster.controller_servers,
            "kafka_bootstrap_servers": kafka_servers,
            "topic": "demo",
            **sample,
            "kafka": kafka,
        }
        emit(summary, "json")
