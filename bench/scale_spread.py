"""The spread phases of ``scale_bench.py --scale``: producing over every partition, and consuming them all, each as
a ratio of the same work on a 6-partition topic in the same run.

A producer spreading records round-robin over thousands of partitions sends a batch per partition per request
where one over 6 partitions sends a few full ones: what it costs per partition (client accumulator and sender,
broker produce path, the acks=all wait) shows as the spread rate's ratio to the 6-partition rate. Both run with
100-byte records, acks=all, linger.ms=20, for at most ``seconds`` each (and at most ``records``), through odradek's
client (gRPC) and through confluent-kafka (librdkafka on the Kafka listener). Then an odradek consumer assigned every
partition reads back what the spread run wrote, against one reading the 6-partition topic.

What is measured is the steady state: every partition has had a first record (and the leader-epoch checkpoint that
first batch dirties has been written by the log manager's pass) before any window starts, and each producer has
connected and learnt the metadata before its clock starts.
"""

from __future__ import annotations

import time
from typing import Any

from odradek.client.admin import Admin
from odradek.client.consumer import Consumer
from odradek.client.producer import Producer
from odradek.client.structs import TopicPartition
from odradek.deploy.local import DevCluster, run_sync

RECORD = b"x" * 100
BASELINE = "spread-baseline-6"


def _wait_whole(cluster: DevCluster, topic: str, timeout: float = 60) -> None:
    with Admin({"bootstrap.servers": cluster.admin_servers, "request.timeout.ms": 30000}) as admin:
        deadline = time.monotonic() + timeout
        while not all(len(p.isr) == 3 and p.leader >= 0 for p in admin.describe_topic(topic).partitions):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}'s ISRs did not become whole within {timeout:.0f} s")
            time.sleep(0.5)


def warm(cluster: DevCluster, partitions: list[TopicPartition]) -> None:
    """One record to every partition, then time for the log manager's pass to write the leader-epoch checkpoints
    the first batch of each log dirties: a one-off cost of new partitions, not of a batch."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 20})
    try:
        for tp in partitions:
            producer.send(tp.topic, RECORD, partition=tp.partition)
        producer.flush(120)
    finally:
        producer.close()
    time.sleep(8)


def _odradek_rate(cluster: DevCluster, partitions: list[TopicPartition], records: int, seconds: float) -> float:
    """Records/s acknowledged sending round-robin over ``partitions`` for at most ``seconds`` (then flushed), from
    a producer that knows every topic's metadata already."""
    config = {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 20}
    producer = Producer(config)
    try:
        for topic in dict.fromkeys(tp.topic for tp in partitions):
            producer.partitions_for(topic)
        sent, started = 0, time.monotonic()
        deadline = started + seconds
        while sent < records and (sent % 1000 or time.monotonic() < deadline):
            tp = partitions[sent % len(partitions)]
            producer.send(tp.topic, RECORD, partition=tp.partition)
            sent += 1
        producer.flush(120)
        return sent / (time.monotonic() - started)
    finally:
        producer.close()


def librdkafka_send(
    cluster: DevCluster,
    partitions: list[TopicPartition],
    records: int,
    seconds: float,
    config: dict[str, Any] | None = None,
) -> int:
    """Send round-robin over ``partitions`` through confluent-kafka for at most ``seconds`` (and ``records``),
    then flush; the count sent, every one delivered."""
    from confluent_kafka import Producer as KafkaProducer

    failed: list[str] = []

    def report(error: Any, _message: Any) -> None:
        if error is not None:
            failed.append(str(error))

    producer = KafkaProducer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap_servers,
            "acks": "all",
            "linger.ms": 20,
            "queue.buffering.max.messages": 1_000_000,
            **(config or {}),
        }
    )
    sent, started = 0, time.monotonic()
    deadline = started + seconds
    while sent < records and (sent % 1000 or time.monotonic() < deadline):
        tp = partitions[sent % len(partitions)]
        try:
            producer.produce(tp.topic, RECORD, partition=tp.partition, on_delivery=report)
        except BufferError:
            producer.poll(0.01)
            continue
        sent += 1
        if sent % 1000 == 0:
            producer.poll(0)
    left = producer.flush(120)
    if left or failed:
        raise RuntimeError(f"confluent-kafka: {left} record(s) not delivered, {len(failed)} failed: {failed[:3]}")
    return sent


def _librdkafka_rate(cluster: DevCluster, partitions: list[TopicPartition], records: int, seconds: float) -> float:
    started = time.monotonic()
    sent = librdkafka_send(cluster, partitions, records, seconds)
    return sent / (time.monotonic() - started)


def _consume_rate(cluster: DevCluster, partitions: list[TopicPartition], timeout: float) -> float:
    """Records/s reading every record of ``partitions`` from the beginning (an odradek consumer, assigned)."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "enable.auto.commit": False})
    try:
        expected = sum(consumer.end_offsets(partitions).values())
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        read, started = 0, time.monotonic()
        while read < expected:
            if time.monotonic() - started > timeout:
                raise RuntimeError(f"read {read} of {expected} records in {timeout:.0f} s")
            read += len(consumer.poll(500))
        return read / (time.monotonic() - started)
    finally:
        consumer.close()


def spread(cluster: DevCluster, topics: list[str], per_topic: int, records: int, seconds: float) -> dict[str, Any]:
    """Spread-produce and consume-all rates over every partition of ``topics``, and their ratios to the
    6-partition topic's in the same run."""
    run_sync(cluster.create_topics({BASELINE: {"partitions": 6, "replication_factor": 3}}))
    _wait_whole(cluster, BASELINE)
    spread_tps = [TopicPartition(t, p) for p in range(per_topic) for t in topics]
    six = [TopicPartition(BASELINE, p) for p in range(6)]
    warm(cluster, spread_tps + six)
    out: dict[str, Any] = {"partitions": len(spread_tps)}
    for client, rate in (("odradek", _odradek_rate), ("confluent-kafka", _librdkafka_rate)):
        baseline = rate(cluster, six, records, seconds)
        spread_rate = rate(cluster, spread_tps, records, seconds)
        out[client] = {"six_per_s": baseline, "spread_per_s": spread_rate, "ratio": spread_rate / baseline}
        print(
            f"  spread produce, {client}: {spread_rate:,.0f}/s over {len(spread_tps):,} partitions, "
            f"{baseline:,.0f}/s over 6: {spread_rate / baseline:.2f}",
            flush=True,
        )
    consume = _consume_rate(cluster, spread_tps, 300)
    consume_six = _consume_rate(cluster, six, 300)
    out["consume"] = {"six_per_s": consume_six, "all_per_s": consume, "ratio": consume / consume_six}
    print(
        f"  consume: {consume:,.0f}/s over {len(spread_tps):,} partitions, {consume_six:,.0f}/s over 6: "
        f"{consume / consume_six:.2f}",
        flush=True,
    )
    return out
