"""Client quotas on the Kafka listener, with real processes and librdkafka (confluent-kafka): a client id with a
producer_byte_rate or consumer_byte_rate quota is held near it, sees the throttle in throttle_time_ms (librdkafka's
per-broker ``throttle`` statistics), and an unthrottled client id in the same run goes much faster; an acks=0
producer, which gets no answers to read a throttle from, is held by muting alone. The quota APIs themselves are
exercised through kafka-python's protocol classes on the Kafka listener.

A produce rate is what the broker appended (the topic's end offset before and after the run), a fetch rate what
the consumer received, each over a whole run: the first five seconds of quota may be taken at once (the broker
pads a short history to half its span), so a run of several seconds stays near the quota overall."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaAdminClient
from kafka.protocol.admin.client_quotas import (
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
)

from odradek.client.admin import Admin
from odradek.client.quotas import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, entity
from odradek.deploy.local import DevCluster

from .conftest import wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.odradek_cluster(controllers=1, brokers=1, shared=False),
]

QUOTA = 200_000  # bytes per second
RUN_S = 6.0  # each throttled client runs this long
VALUE = bytes(1000)
DATA_RECORDS = 4000  # what the consumers read: more than a throttled consumer may take in a run
SLOW_PRODUCER, SLOW_ACKS0, SLOW_CONSUMER = "kq-slow-producer", "kq-slow-acks0", "kq-slow-consumer"
FAST_PRODUCER, FAST_CONSUMER = "kq-fast-producer", "kq-fast-consumer"


class Throttles:
    """The largest per-broker throttle (ms) in librdkafka's statistics, and the largest of their averages, over
    every report (each covers the time since the previous one)."""

    def __init__(self) -> None:
        self.max_ms = 0.0
        self.avg_ms = 0.0

    def __call__(self, stats: str) -> None:
        for broker in json.loads(stats)["brokers"].values():
            self.max_ms = max(self.max_ms, broker["throttle"]["max"])
            self.avg_ms = max(self.avg_ms, broker["throttle"]["avg"])

    def seen(self) -> dict[str, float]:
        return {"throttle_max_ms": self.max_ms, "throttle_avg_ms": self.avg_ms}


def producer_config(bootstrap: str, client_id: str, throttles: Throttles, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "linger.ms": 5,
        "batch.size": 16384,  # requests of a few batches, well under a second's quota
        "queue.buffering.max.kbytes": 64,
        "statistics.interval.ms": 500,
        "stats_cb": throttles,
        **extra,
    }


def end_offset(bootstrap: str, topic: str) -> int:
    watcher = Consumer({"bootstrap.servers": bootstrap, "group.id": "kq-watcher", "client.id": "kq-watcher"})
    try:
        return watcher.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        watcher.close()


def produce_for(bootstrap: str, topic: str, client_id: str, seconds: float, **extra: Any) -> dict[str, Any]:
    """Produce as fast as the client may for ``seconds``: the rate the broker appended at (the topic's end offset
    before and after, so an acks=0 client's socket buffers do not count) and the throttles librdkafka saw."""
    throttles = Throttles()
    producer = Producer(producer_config(bootstrap, client_id, throttles, **extra))
    producer.list_topics(topic, timeout=10)  # connected before the clock starts
    before = end_offset(bootstrap, topic)
    end = time.monotonic() + seconds
    for _ in range(1_000_000):
        if time.monotonic() >= end:
            break
        try:
            producer.produce(topic, VALUE)
        except BufferError:  # the local queue is full: wait for the broker
            producer.poll(0.01)
        producer.poll(0)
    appended = end_offset(bootstrap, topic) - before
    producer.purge()
    producer.poll(0.6)  # one more statistics report
    producer.flush(1)  # acks=0: what is in the socket is gone anyway
    return {"rate": appended * len(VALUE) / seconds, "records": appended, **throttles.seen()}


def consume_for(bootstrap: str, topic: str, client_id: str, seconds: float, limit: int) -> dict[str, Any]:
    """Read ``topic`` from its start for at most ``seconds`` or ``limit`` records: the rate over the time taken
    and the throttles librdkafka saw."""
    throttles = Throttles()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "group.id": client_id,  # never joined (assign) nor committed to
            "enable.auto.commit": False,
            "statistics.interval.ms": 500,
            "stats_cb": throttles,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = count = 0
    started = time.monotonic()
    end = started + seconds
    try:
        while count < limit and time.monotonic() < end:
            for m in consumer.consume(500, 0.1):
                if m.error() is None:
                    got += len(m.value())
                    count += 1
        took = time.monotonic() - started
        settle = time.monotonic() + 0.6
        while time.monotonic() < settle:  # one more statistics report
            consumer.consume(500, 0.1)
    finally:
        consumer.close()
    return {"rate": got / took, "records": count, "seconds": took, **throttles.seen()}


@pytest.fixture
def admin(odradek_cluster: DevCluster) -> Iterator[Admin]:
    a = Admin({"bootstrap.servers": odradek_cluster.admin_servers, "request.timeout.ms": 10000})
    yield a
    a.close()


def kafka_call(admin: KafkaAdminClient, request: Any) -> Any:
    """One request through kafka-python's connection manager: KafkaAdminClient has no client-quota methods in
    kafka-python 3.0, though the library ships these APIs' protocol classes."""

    async def call() -> Any:
        return await admin._manager.send(request)

    return admin._manager.run(call)


def kafka_describe(admin: KafkaAdminClient, client_id: str) -> dict[str, float]:
    component = DescribeClientQuotasRequest.ComponentData(entity_type="client-id", match_type=0, match=client_id)
    response = kafka_call(admin, DescribeClientQuotasRequest(components=[component], strict=True))
    assert response.error_code == 0, response
    return {v.key: v.value for e in response.entries for v in e.values}


def test_quota_apis_through_kafka_python(kafka_admin: KafkaAdminClient, admin: Admin) -> None:
    entry = AlterClientQuotasRequest.EntryData
    request = AlterClientQuotasRequest(
        entries=[
            entry(
                entity=[entry.EntityData(entity_type="client-id", entity_name="kq-api")],
                ops=[entry.OpData(key=CONSUMER_BYTE_RATE, value=123456.0, remove=False)],
            ),
            entry(  # a bad entry fails alone
                entity=[entry.EntityData(entity_type="client-id", entity_name="kq-api-bad")],
                ops=[entry.OpData(key="no.such.quota", value=1.0, remove=False)],
            ),
        ],
        validate_only=False,
    )
    response = kafka_call(kafka_admin, request)
    assert [e.error_code for e in response.entries] == [0, 42]  # INVALID_REQUEST
    assert "no.such.quota" in response.entries[1].error_message
    wait_for(lambda: kafka_describe(kafka_admin, "kq-api") == {CONSUMER_BYTE_RATE: 123456.0}, 10, what="the quota")
    # Stored where odradek's own admin client reads it.
    assert admin.describe_client_quotas(client_id="kq-api", strict=True) == [
        (entity(client_id="kq-api"), {CONSUMER_BYTE_RATE: 123456.0})
    ]
    removal = entry(
        entity=[entry.EntityData(entity_type="client-id", entity_name="kq-api")],
        ops=[entry.OpData(key=CONSUMER_BYTE_RATE, value=0.0, remove=True)],
    )
    response = kafka_call(kafka_admin, AlterClientQuotasRequest(entries=[removal], validate_only=False))
    assert [e.error_code for e in response.entries] == [0]
    wait_for(lambda: kafka_describe(kafka_admin, "kq-api") == {}, 10, what="the quota removed")


def test_byte_rate_quotas_throttle_and_mute_kafka_clients(
    odradek_cluster: DevCluster, admin: Admin, kafka_admin: KafkaAdminClient
) -> None:
    bootstrap = odradek_cluster.kafka_bootstrap_servers
    for topic in ("kq-in", "kq-in0", "kq-data"):
        admin.create_topic(topic, partitions=1, replication_factor=1)
    for client in (SLOW_PRODUCER, SLOW_ACKS0):
        admin.alter_client_quotas(entity(client_id=client), {PRODUCER_BYTE_RATE: QUOTA})
    admin.alter_client_quotas(entity(client_id=SLOW_CONSUMER), {CONSUMER_BYTE_RATE: QUOTA})
    expected = (
        (SLOW_PRODUCER, PRODUCER_BYTE_RATE),
        (SLOW_ACKS0, PRODUCER_BYTE_RATE),
        (SLOW_CONSUMER, CONSUMER_BYTE_RATE),
    )
    for client, key in expected:
        # The broker answers from its own metadata: once it lists the quota, it enforces it.
        wait_for(lambda c=client, k=key: kafka_describe(kafka_admin, c) == {k: QUOTA}, 10, what=f"{client}'s quota")

    # Unthrottled, the data the consumers read goes in at full speed.
    fast = Producer(producer_config(bootstrap, FAST_PRODUCER, fast_throttles := Throttles(), acks="all"))
    started = time.monotonic()
    for _ in range(DATA_RECORDS):
        while True:
            try:
                fast.produce("kq-data", VALUE)
                break
            except BufferError:
                fast.poll(0.01)
    assert fast.flush(60) == 0
    fast_rate = DATA_RECORDS * len(VALUE) / (time.monotonic() - started)
    fast.poll(0.6)

    results: dict[str, dict[str, Any]] = {}

    def run(name: str, fn: Any, *args: Any, **kwargs: Any) -> threading.Thread:
        thread = threading.Thread(target=lambda: results.__setitem__(name, fn(*args, **kwargs)), daemon=True)
        thread.start()
        return thread

    threads = [
        run("producer", produce_for, bootstrap, "kq-in", SLOW_PRODUCER, RUN_S, acks="all"),
        run("consumer", consume_for, bootstrap, "kq-data", SLOW_CONSUMER, RUN_S, DATA_RECORDS),
    ]
    for t in threads:
        t.join(RUN_S + 30)
    results["acks0"] = produce_for(bootstrap, "kq-in0", SLOW_ACKS0, RUN_S, acks=0)
    results["fast-consumer"] = consume_for(bootstrap, "kq-data", FAST_CONSUMER, 60, DATA_RECORDS)
    print(f"\nquota {QUOTA} B/s; unthrottled producer {fast_rate:.0f} B/s; {json.dumps(results)}")

    producer, consumer, acks0 = results["producer"], results["consumer"], results["acks0"]
    fast_consumer = results["fast-consumer"]
    # (a) Held near the quota over the run.
    assert 0.25 * QUOTA <= producer["rate"] <= 1.5 * QUOTA, producer
    assert 0.25 * QUOTA <= consumer["rate"] <= 1.5 * QUOTA, consumer
    # (b) The client saw the throttle in throttle_time_ms.
    for throttled in (producer, consumer):
        assert throttled["throttle_max_ms"] > 0 and throttled["throttle_avg_ms"] > 0, throttled
    # (c) Unthrottled client ids in the same run go much faster, and are never throttled.
    assert fast_rate >= 5 * producer["rate"], (fast_rate, producer)
    assert fast_consumer["records"] == DATA_RECORDS and fast_consumer["rate"] >= 5 * consumer["rate"], fast_consumer
    assert fast_throttles.max_ms == 0 and fast_consumer["throttle_max_ms"] == 0
    # An acks=0 producer reads no throttle_time_ms: muting its connection holds it all the same.
    assert acks0["rate"] <= 1.5 * QUOTA, acks0
