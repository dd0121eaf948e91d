"""Records cross between the two listeners of a real 3-broker cluster intact: what librdkafka (confluent-kafka)
produces on the Kafka listener, odradek's own consumer reads over gRPC, and the reverse, with partitions, offsets,
keys (null and empty), values, headers (repeated keys, empty and null values), timestamps and timestamp types
equal, also where the broker stamps the time (LogAppendTime)."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import Producer as KafkaProducer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from odradek.client import Admin, Consumer, Producer, TopicPartition
from odradek.client.structs import CREATE_TIME, LOG_APPEND_TIME
from odradek.deploy.local import DevCluster

from .kafka_records import produce_records

pytestmark = pytest.mark.integration

PARTITIONS = 3
COUNT = 120
BASE_TS = 1_700_000_000_000
HEADERS = [("h", b"first"), ("h", b"second"), ("empty", b""), ("null", None)]

# (partition, offset) -> (key, value, headers, timestamp type, timestamp), the same shape on both sides.
Seen = dict[tuple[int, int], tuple[bytes | None, bytes | None, tuple, int, int]]


def new_topic(admin: Admin, configs: dict[str, str] | None = None) -> str:
    name = f"x-{uuid.uuid4().hex[:8]}"
    admin.create_topic(name, PARTITIONS, 3, configs or {})
    return name


def record(i: int) -> tuple[int, bytes | None, bytes | None, list, int]:
    """The i-th record sent: partition, key (every 5th null, every 7th empty), value (every 11th null, every 13th
    empty), headers (every 4th none at all), CreateTime timestamp (not in send order)."""
    key = None if i % 5 == 0 else b"" if i % 7 == 0 else b"key-%d" % i
    value = None if i % 11 == 0 else b"" if i % 13 == 0 else b"value-%d-" % i + bytes(range(256)) * (i % 3)
    headers = [] if i % 4 == 0 else [*HEADERS, ("n", str(i).encode())]
    return i % PARTITIONS, key, value, headers, BASE_TS + (i * 7919) % 100_000


def kafka_produce(bootstrap: str, topic: str, log_append_time: bool = False) -> Seen:
    """Send COUNT records with librdkafka (lz4, several records per batch, two rounds); return what each delivery
    report said."""
    producer = KafkaProducer(
        {"bootstrap.servers": bootstrap, "acks": "all", "compression.type": "lz4", "linger.ms": 20}
    )
    reports = produce_records(producer, topic, COUNT, record, flush_at=COUNT // 2)  # two batches per partition
    expected: Seen = {}
    for i, msg in reports:
        partition, key, value, headers, ts = record(i)
        ts_type, reported_ts = msg.timestamp()
        assert (msg.partition(), ts_type) == (
            partition,
            TIMESTAMP_LOG_APPEND_TIME if log_append_time else TIMESTAMP_CREATE_TIME,
        )
        if not log_append_time:
            assert reported_ts == ts
        kind = LOG_APPEND_TIME if log_append_time else CREATE_TIME
        expected[(partition, msg.offset())] = (key, value, tuple(headers), kind, reported_ts)
    assert len(expected) == COUNT
    return expected


def odradek_consume(servers: str, topic: str, count: int, timeout: float = 30) -> Seen:
    got = []
    with Consumer({"bootstrap.servers": servers, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            got.extend(consumer.poll(timeout_ms=200))
    seen = {(r.partition, r.offset): (r.key, r.value, r.headers, r.timestamp_type, r.timestamp) for r in got}
    assert len(seen) == len(got) == count
    return seen


def odradek_produce(servers: str, topic: str, log_append_time: bool = False) -> Seen:
    """Send COUNT records with odradek's producer (zstd); return what each delivery result said."""
    with Producer({"bootstrap.servers": servers, "compression.type": "zstd", "linger.ms": 20}) as producer:
        futures = []
        for i in range(COUNT):
            if i == COUNT // 2:
                producer.flush(30)  # at least two batches per partition
            partition, key, value, headers, ts = record(i)
            futures.append(producer.send(topic, value, key=key, partition=partition, headers=headers, timestamp=ts))
        producer.flush(30)
        results = [f.result(10) for f in futures]
    expected: Seen = {}
    for i, r in enumerate(results):
        partition, key, value, headers, ts = record(i)
        assert r.partition == partition
        if not log_append_time:
            assert r.timestamp == ts
        kind = LOG_APPEND_TIME if log_append_time else CREATE_TIME
        expected[(r.partition, r.offset)] = (key, value, tuple(headers), kind, r.timestamp)
    assert len(expected) == COUNT
    return expected


def kafka_consume(bootstrap: str, topic: str, count: int, timeout: float = 30) -> Seen:
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False})
    consumer.assign([KafkaTopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    seen: Seen = {}
    deadline = time.monotonic() + timeout
    try:
        while len(seen) < count and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            ts_type, ts = m.timestamp()
            kind = {TIMESTAMP_CREATE_TIME: CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME: LOG_APPEND_TIME}[ts_type]
            assert (m.partition(), m.offset()) not in seen
            seen[(m.partition(), m.offset())] = (m.key(), m.value(), tuple(m.headers() or ()), kind, ts)
    finally:
        consumer.close()
    assert len(seen) == count
    return seen


def test_librdkafka_produced_records_read_intact_by_the_grpc_consumer(cluster: DevCluster, admin: Admin) -> None:
    name = new_topic(admin)
    expected = kafka_produce(cluster.kafka_bootstrap_servers, name)
    assert odradek_consume(cluster.bootstrap_servers, name, COUNT) == expected
    # Offsets are dense from 0 in each partition: the two listeners number the same log.
    assert sorted(expected) == sorted((p, o) for p in range(PARTITIONS) for o in range(COUNT // PARTITIONS))


def test_grpc_produced_records_read_intact_by_librdkafka(cluster: DevCluster, admin: Admin) -> None:
    name = new_topic(admin)
    expected = odradek_produce(cluster.bootstrap_servers, name)
    assert kafka_consume(cluster.kafka_bootstrap_servers, name, COUNT) == expected


def test_log_append_time_is_the_brokers_on_both_listeners(cluster: DevCluster, admin: Admin) -> None:
    """Timestamps the producers chose are replaced by the leader's clock, which both producers are told and both
    consumers read, whichever listener wrote the record."""
    before = int(time.time() * 1000)
    from_kafka = new_topic(admin, {"message.timestamp.type": "LogAppendTime"})
    expected = kafka_produce(cluster.kafka_bootstrap_servers, from_kafka, log_append_time=True)
    assert odradek_consume(cluster.bootstrap_servers, from_kafka, COUNT) == expected
    from_grpc = new_topic(admin, {"message.timestamp.type": "LogAppendTime"})
    expected_grpc = odradek_produce(cluster.bootstrap_servers, from_grpc, log_append_time=True)
    assert kafka_consume(cluster.kafka_bootstrap_servers, from_grpc, COUNT) == expected_grpc
    after = int(time.time() * 1000)
    stamps = [v[4] for v in (*expected.values(), *expected_grpc.values())]
    assert all(before - 5_000 <= ts <= after + 5_000 for ts in stamps)  # the broker's clock, not BASE_TS
