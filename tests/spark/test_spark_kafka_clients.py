"""``format("odradek")`` in real Spark reads what librdkafka (confluent-kafka) produced on the brokers' Kafka
listener: the same keys (null included), values, headers (repeated keys, empty and null values), partitions,
offsets and CreateTime timestamps as the producer's delivery reports, in a batch read and in an availableNow
streaming query into the memory sink."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME
from confluent_kafka import Producer as KafkaProducer

from odradek.client import Admin
from odradek.deploy.local import DevCluster

from ..integration.kafka_records import produce_records

pyspark = pytest.importorskip("pyspark")
pytestmark = pytest.mark.integration

PARTITIONS = 3
COUNT = 300
BASE_TS = 1_700_000_000_000

# (partition, offset) -> (key, value, headers, timestamp in ms)
Rows = dict[tuple[int, int], tuple[bytes | None, bytes | None, tuple, int]]


def record(i: int) -> tuple[int, bytes | None, bytes, list, int]:
    key = None if i % 6 == 0 else b"key-%d" % i
    value = b"" if i % 17 == 0 else b"value-%d" % i
    headers = [] if i % 4 == 0 else [("h", b"a"), ("h", b"b"), ("empty", b""), ("null", None), ("i", b"%d" % i)]
    return i % PARTITIONS, key, value, headers, BASE_TS + (i * 7919) % 100_000


def produce_with_librdkafka(bootstrap: str, topic: str) -> Rows:
    producer = KafkaProducer({"bootstrap.servers": bootstrap, "acks": "all", "compression.type": "snappy"})
    reports = produce_records(producer, topic, COUNT, record)
    produced: Rows = {}
    for i, msg in reports:
        partition, key, value, headers, ts = record(i)
        assert (msg.partition(), msg.timestamp()) == (partition, (TIMESTAMP_CREATE_TIME, ts))
        produced[(partition, msg.offset())] = (key, value, tuple(headers), ts)
    assert len(produced) == COUNT
    return produced


def as_rows(df) -> Rows:
    """The source's rows in the producer's shape; timestamps as epoch ms, independent of the session time zone."""
    from pyspark.sql import functions as F

    selected = df.select(
        "topic",
        "partition",
        "offset",
        "key",
        "value",
        "headers",
        "timestampType",
        F.unix_micros("timestamp").alias("micros"),
    ).collect()
    assert {r.timestampType for r in selected} == {0}  # CreateTime
    out: Rows = {}
    for r in selected:
        headers = tuple((h.key, None if h.value is None else bytes(h.value)) for h in r.headers)
        key = None if r.key is None else bytes(r.key)
        out[(r.partition, r.offset)] = (key, bytes(r.value), headers, r.micros // 1000)
    assert len(out) == len(selected)
    return out


def test_batch_and_streaming_reads_return_what_librdkafka_produced(cluster: DevCluster, spark) -> None:
    name = f"rdk-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        admin.create_topic(name, PARTITIONS, 3)
    produced = produce_with_librdkafka(cluster.kafka_bootstrap_servers, name)

    def source(reader):
        return (
            reader.format("odradek")
            .option("bootstrap.servers", cluster.bootstrap_servers)
            .option("subscribe", name)
            .option("startingOffsets", "earliest")
            .option("includeHeaders", "true")
            .load()
        )

    batch = source(spark.read)
    assert {r.topic for r in batch.select("topic").collect()} == {name}
    assert as_rows(batch) == produced

    table = f"rdk_{uuid.uuid4().hex[:8]}"
    query = source(spark.readStream).writeStream.format("memory").queryName(table).trigger(availableNow=True).start()
    try:
        assert query.awaitTermination(180)
        assert query.exception() is None
        assert as_rows(spark.table(table)) == produced
    finally:
        query.stop()
