"""``write`` / ``writeStream`` ``.format("odradek")`` in real Spark (local[2], driver on 127.0.0.1, UI off) against a
real replicated cluster: every column lands where it says, rows are routed by a topic column, a streaming query
writes each row once in a clean run and only new rows after a restart, and bad options, bad columns and records
the cluster does not acknowledge fail the query with the option, column or error named."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from odradek.client import Admin, Consumer, ConsumerRecord, TopicPartition
from odradek.client.producer.partitioner import murmur2
from odradek.deploy.local import DevCluster

pyspark = pytest.importorskip("pyspark")
pytestmark = pytest.mark.integration

ROWS_SCHEMA = "key binary, value binary, partition int, headers array<struct<key: string, value: binary>>, topic string"


def create_topic(cluster: DevCluster, name: str, partitions: int = 3, **config: str) -> None:
    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        admin.create_topic(name, partitions, 3, {"min.insync.replicas": "2", **config})


def read_all(servers: str, topic: str) -> list[ConsumerRecord]:
    """Every record of the topic, up to the end offsets at the time of the call."""
    with Consumer({"bootstrap.servers": servers, "auto.offset.reset": "earliest"}) as consumer:
        tps = [TopicPartition(topic, p) for p in consumer.partitions_for(topic)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        end = consumer.end_offsets(tps)
        records: list[ConsumerRecord] = []
        for _ in range(600):
            if all(consumer.position(tp) >= end[tp] for tp in tps):
                return records
            records += consumer.poll(timeout_ms=100)
        pytest.fail(f"{topic}: read {len(records)} records, not up to the end offsets {end}")


def test_batch_write_lands_keys_values_headers_and_partitions(cluster: DevCluster, spark) -> None:
    create_topic(cluster, "batch")
    n = 2000

    def row(i: int) -> tuple:
        key = None if i % 7 == 0 else b"k-%d" % i
        partition = None if i % 10 == 0 else i % 3  # null: chosen by the producer, from the key if there is one
        headers = [] if i % 5 == 0 else None if i % 5 == 1 else [("i", str(i).encode()), ("nil", None)]
        return key, b"v-%d" % i, partition, headers, "ignored: the topic option wins"

    rows = [row(i) for i in range(n)]
    spark.createDataFrame(rows, ROWS_SCHEMA).write.format("odradek").option(
        "bootstrap.servers", cluster.bootstrap_servers
    ).option("topic", "batch").option("kafka.linger.ms", "2").mode("append").save()

    records = read_all(cluster.bootstrap_servers, "batch")
    assert len(records) == n
    got = {r.value: r for r in records}
    assert len(got) == n  # each row once
    for key, value, partition, headers, _ in rows:
        r = got[value]
        assert (r.topic, r.key, r.headers) == ("batch", key, tuple(headers or ()))
        if partition is not None:
            assert r.partition == partition
        elif key is not None:
            assert r.partition == (murmur2(key) & 0x7FFFFFFF) % 3  # Kafka's default partitioner


def test_rows_are_routed_by_the_topic_column(cluster: DevCluster, spark) -> None:
    create_topic(cluster, "even", 2)
    create_topic(cluster, "odd", 2)
    rows = [(None, b"%d" % i, None, None, "even" if i % 2 == 0 else "odd") for i in range(1000)]
    spark.createDataFrame(rows, ROWS_SCHEMA).repartition(3).write.format("odradek").option(
        "bootstrap.servers", cluster.bootstrap_servers
    ).mode("append").save()

    even, odd = (sorted(int(r.value) for r in read_all(cluster.bootstrap_servers, t)) for t in ("even", "odd"))
    assert even == list(range(0, 1000, 2))
    assert odd == list(range(1, 1000, 2))


def test_streaming_write_sends_each_row_once_and_only_new_rows_after_a_restart(
    cluster: DevCluster, spark, tmp_path: Path
) -> None:
    create_topic(cluster, "stream")
    source, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    source.mkdir()

    def add_file(name: str, values: range) -> None:
        lines = (json.dumps({"k": f"k-{i}", "v": f"v-{i}"}) for i in values)
        (source / name).write_text("\n".join(lines) + "\n")

    def run() -> list[int]:
        """Rows per micro-batch."""
        query = (
            spark.readStream.schema("k string, v string")
            .option("maxFilesPerTrigger", 1)  # one micro-batch per file
            .json(str(source))
            .selectExpr("k AS key", "v AS value")  # string columns, sent as UTF-8
            .writeStream.format("odradek")
            .option("bootstrap.servers", cluster.bootstrap_servers)
            .option("topic", "stream")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(180)
        assert query.exception() is None
        return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]

    for f in range(3):
        add_file(f"{f}.json", range(f * 300, (f + 1) * 300))
    assert run() == [300, 300, 300]
    first = read_all(cluster.bootstrap_servers, "stream")
    add_file("3.json", range(900, 1200))
    assert run() == [300]  # the checkpoint says files 0-2 are written: only file 3 is sent
    records = read_all(cluster.bootstrap_servers, "stream")

    assert len(first) == 900
    assert len(records) == 1200  # a clean run: every row exactly once
    assert {(r.key, r.value) for r in records} == {(b"k-%d" % i, b"v-%d" % i) for i in range(1200)}


@pytest.mark.parametrize(
    ("options", "columns", "named"),
    [
        ({"topic": "t"}, "value binary", "bootstrap.servers: required"),
        ({"bootstrap.servers": "127.0.0.1:1"}, "value binary", "topic: no topic option and no 'topic' column"),
        ({"bootstrap.servers": "127.0.0.1:1", "topic": "t", "kafka.acks": "1"}, "value binary", "kafka.acks: must"),
        ({"bootstrap.servers": "127.0.0.1:1", "topic": "t"}, "key binary", "column 'value': is required"),
        ({"bootstrap.servers": "127.0.0.1:1", "topic": "t"}, "value binary, ts long", "column 'ts': is not"),
    ],
)
def test_bad_options_and_columns_fail_at_query_start_naming_them(
    spark, options: dict[str, str], columns: str, named: str
) -> None:
    writer = spark.createDataFrame([], columns).write.format("odradek").mode("append")
    for k, v in options.items():
        writer = writer.option(k, v)
    with pytest.raises(Exception, match=named):
        writer.save()


def test_bad_columns_fail_a_streaming_query_at_start(spark, tmp_path: Path) -> None:
    query = (
        spark.readStream.format("rate")
        .load()
        .writeStream.format("odradek")
        .option("bootstrap.servers", "127.0.0.1:1")
        .option("topic", "t")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        with pytest.raises(Exception, match="column 'timestamp': is not a column the sink writes"):
            query.awaitTermination(60)
    finally:
        query.stop()


def test_records_the_cluster_does_not_acknowledge_fail_the_job(cluster: DevCluster, spark) -> None:
    """One replica cannot satisfy min.insync.replicas=2, so acks=all never succeeds: the tasks' producers (given
    the kafka. options) retry until delivery.timeout.ms, then the task fails with the cluster's error."""
    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        admin.create_topic("unreplicated", 1, 1, {"min.insync.replicas": "2"})
        # Led before the write: a record waiting for a leader would expire without the cluster's error to show.
        deadline = time.monotonic() + 30
        while admin.describe_topic("unreplicated").partitions[0].leader <= 0 and time.monotonic() < deadline:
            time.sleep(0.1)
    writer = spark.createDataFrame([(b"v",)], "value binary").write.format("odradek").mode("append")
    for k, v in {
        "bootstrap.servers": cluster.bootstrap_servers,
        "topic": "unreplicated",
        "kafka.delivery.timeout.ms": "6000",
        "kafka.request.timeout.ms": "2000",
    }.items():
        writer = writer.option(k, v)
    started = time.monotonic()
    with pytest.raises(Exception, match=r"a record was not acknowledged: .*min\.insync\.replicas"):
        writer.save()
    assert time.monotonic() - started < 60  # not the default delivery.timeout.ms of 120 s
