"""``format("odradek")`` in real Spark (local[2], driver on 127.0.0.1, UI off) against a real replicated cluster:
availableNow ingest into Parquet, incremental and idempotent across restarts; maxOffsetsPerTrigger admission
control; a processing-time query that outlives a leader kill; failOnDataLoss after retention; commitToGroup
making a query's lag visible to ``group describe``; and bad options failing at query start with the option named."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from odradek.client import Admin, Consumer, Producer, TopicPartition
from odradek.deploy.local import DevCluster

from ..integration.conftest import wait_for

pyspark = pytest.importorskip("pyspark")
pytestmark = pytest.mark.integration


def produce(servers: str, topic: str, values: list[bytes]) -> dict[bytes, tuple[int, int]]:
    """Send with acks=all; return value -> (partition, offset) as acknowledged."""
    with Producer({"bootstrap.servers": servers}) as producer:
        futures = [(v, producer.send(topic, v)) for v in values]
        producer.flush(30)
        return {v: (f.result(10).partition, f.result(10).offset) for v, f in futures}


def test_available_now_ingest_is_exactly_once_across_runs(cluster: DevCluster, spark, tmp_path: Path) -> None:
    servers = cluster.bootstrap_servers
    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        admin.create_topic("ingest", 3, 3, {"min.insync.replicas": "2"})
    out, checkpoint = tmp_path / "parquet", tmp_path / "checkpoint"

    def run_once() -> list:
        ingest(spark, servers, "ingest", out, checkpoint)
        return spark.read.parquet(str(out)).select("value", "partition", "offset", "topic").collect()

    acked = produce(servers, "ingest", [b"n-%d" % i for i in range(1000)])
    first = run_once()
    acked |= produce(servers, "ingest", [b"m-%d" % i for i in range(500)])
    second = run_once()
    third = run_once()  # nothing new: a restart must not add rows
    assert len(first) == 1000 and len(second) == len(third) == 1500
    rows = {r.value: (r.partition, r.offset) for r in third}
    assert len(rows) == 1500  # no duplicates
    assert rows == acked  # values at the offsets their producer was told
    assert {r.topic for r in third} == {"ingest"}


def ingest(spark, servers: str, topic: str, out: Path, checkpoint: Path, **options: str):
    """An availableNow query from ``topic`` (or as ``options`` say) into Parquet; returns it after it ended."""
    reader = spark.readStream.format("odradek").option("bootstrap.servers", servers)
    for k, v in {**({"subscribe": topic} if topic else {}), "startingOffsets": "earliest", **options}.items():
        reader = reader.option(k, v)
    query = (
        reader.load()
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180)
    return query


def test_subscribe_pattern_picks_up_topics_created_between_runs(cluster: DevCluster, spark, tmp_path: Path) -> None:
    servers = cluster.bootstrap_servers
    out, checkpoint = tmp_path / "out", tmp_path / "cp"
    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        admin.create_topic("events-a", 2, 3)
        acked = produce(servers, "events-a", [b"a-%d" % i for i in range(200)])
        ingest(spark, servers, "", out, checkpoint, subscribePattern="events-.*")
        admin.create_topic("events-b", 2, 3)  # new partitions: read from their earliest offset
        admin.create_topic("other", 1, 3)  # not matched
    acked_b = produce(servers, "events-b", [b"b-%d" % i for i in range(100)])
    produce(servers, "other", [b"o"])
    ingest(spark, servers, "", out, checkpoint, subscribePattern="events-.*")
    rows = spark.read.parquet(str(out)).select("topic", "value", "partition", "offset").collect()
    assert {r.value: (r.partition, r.offset) for r in rows if r.topic == "events-a"} == acked
    assert {r.value: (r.partition, r.offset) for r in rows if r.topic == "events-b"} == acked_b
    assert len(rows) == 300 and {r.topic for r in rows} == {"events-a", "events-b"}


def test_max_offsets_per_trigger_caps_every_micro_batch(cluster: DevCluster, spark, tmp_path: Path) -> None:
    servers = cluster.bootstrap_servers
    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        admin.create_topic("capped", 3, 3, {"min.insync.replicas": "2"})
    acked = produce(servers, "capped", [b"c-%d" % i for i in range(1000)])
    query = ingest(spark, servers, "capped", tmp_path / "out", tmp_path / "cp", maxOffsetsPerTrigger="300")
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [300, 300, 300, 100]  # availableNow still honours the cap, over several batches
    rows = spark.read.parquet(str(tmp_path / "out")).select("value", "partition", "offset").collect()
    assert {r.value: (r.partition, r.offset) for r in rows} == acked and len(rows) == 1000


def test_processing_time_query_keeps_every_acked_record_through_a_leader_kill(
    cluster: DevCluster, spark, tmp_path: Path
) -> None:
    servers = cluster.bootstrap_servers
    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        admin.create_topic("failover", 2, 3, {"min.insync.replicas": "2"})
        leader = admin.describe_topic("failover").partitions[0].leader
    out = tmp_path / "out"
    query = (
        spark.readStream.format("odradek")
        .option("bootstrap.servers", servers)
        .option("subscribe", "failover")
        .option("startingOffsets", "earliest")
        .load()
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(processingTime="1 second")
        .start()
    )
    acked: dict[bytes, tuple[int, int]] = {}
    errors: list[BaseException] = []
    stop = threading.Event()

    def load() -> None:  # bounded: at most 6000 records or 60 s, acks=all
        deadline = time.monotonic() + 60
        with Producer({"bootstrap.servers": servers, "linger.ms": 5}) as producer:
            for i in range(6000):
                if stop.is_set() or time.monotonic() > deadline:
                    break
                value = b"f-%d" % i
                producer.send("failover", value).add_done_callback(lambda f, v=value: record(v, f))
                time.sleep(0.002)
            producer.flush(60)

    def record(value: bytes, future) -> None:
        if future.exception() is None:
            acked[value] = (future.result().partition, future.result().offset)
        else:
            errors.append(future.exception())

    try:
        producer = threading.Thread(target=load)
        producer.start()
        wait_for(lambda: len(acked) > 1000, 60, what="acknowledged records before the kill")
        cluster.signal(leader, signal.SIGKILL)
        wait_for(lambda: len(acked) > 3000, 90, what="writes to continue on the new leaders")
        cluster.start(leader)
        producer.join(120)
        assert not producer.is_alive() and not errors

        def caught_up() -> bool:
            return out.exists() and spark.read.parquet(str(out)).count() >= len(acked)

        wait_for(caught_up, 120, interval=1.0, what="the query to read every acknowledged record")
    finally:
        stop.set()
        query.stop()
        asyncio_wait_ready(cluster)
    assert query.exception() is None
    rows = spark.read.parquet(str(out)).select("value", "partition", "offset").collect()
    seen = [r.value for r in rows]
    assert len(seen) == len(set(seen))  # exactly once
    got = {r.value: (r.partition, r.offset) for r in rows}
    assert {v: got.get(v) for v in acked} == acked  # every acknowledged record, at its acknowledged offset


def test_fail_on_data_loss_after_retention(cluster: DevCluster, spark, tmp_path: Path) -> None:
    servers = cluster.bootstrap_servers
    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        admin.create_topic("aging", 1, 3, {"segment.bytes": "20000", "retention.bytes": "40000"})
    out, checkpoint = tmp_path / "out", tmp_path / "cp"
    acked = produce(servers, "aging", [b"a-%04d" % i for i in range(20)])
    ingest(spark, servers, "aging", out, checkpoint)
    acked |= produce(servers, "aging", [b"b-%04d" % i + b"." * 100 for i in range(1500)])
    tp = TopicPartition("aging", 0)
    with Consumer({"bootstrap.servers": servers}) as consumer:
        wait_for(lambda: consumer.beginning_offsets([tp])[tp] > 20, 30, what="retention to delete offset 20")

    with pytest.raises(Exception, match=r"failOnDataLoss: offset 20 of aging-0 is gone, the earliest available is"):
        ingest(spark, servers, "aging", out, checkpoint)

    ingest(spark, servers, "aging", out, checkpoint, failOnDataLoss="false")
    rows = spark.read.parquet(str(out)).select("value", "partition", "offset").collect()
    offsets = sorted(r.offset for r in rows)
    resumed = offsets[20]
    assert offsets == list(range(20)) + list(range(resumed, 1520))  # the lost offsets skipped, nothing else
    assert resumed > 20
    assert all(acked[r.value] == (r.partition, r.offset) for r in rows)


def test_the_ingest_example_runs_as_documented(cluster: DevCluster, spark, tmp_path: Path, capsys) -> None:
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "examples" / "spark_ingest.py"
    spec = importlib.util.spec_from_file_location("spark_ingest", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        admin.create_topic("example", 2, 3)
    acked = produce(cluster.bootstrap_servers, "example", [b"e-%d" % i for i in range(300)])
    args = ["--bootstrap-servers", cluster.bootstrap_servers, "--topic", "example", "--once"]
    args += ["--output", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "cp")]
    assert example.main(args) == 0
    assert example.main(args) == 0  # nothing new: nothing added
    assert "ingested 300 records" in capsys.readouterr().out
    rows = spark.read.parquet(str(tmp_path / "out")).select("value", "partition", "offset", "date").collect()
    assert {r.value: (r.partition, r.offset) for r in rows} == acked and len(rows) == 300
    assert all(r.date is not None for r in rows)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"subscribe": "t"}, "bootstrap.servers"),
        ({"bootstrap.servers": "127.0.0.1:1", "subscribe": "t", "assign": '{"t":[0]}'}, "assign/subscribe"),
        ({"bootstrap.servers": "127.0.0.1:1", "subscribe": "t", "startingOffsets": "{nope"}, "startingOffsets"),
        ({"bootstrap.servers": "127.0.0.1:1", "subscribe": "t", "kafka.fetch.max.wait": "5"}, "kafka.fetch.max.wait"),
        ({"bootstrap.servers": "127.0.0.1:1", "subscribe": "t", "minOffsetsPerTrigger": "5"}, "minOffsetsPerTrigger"),
        ({"bootstrap.servers": "127.0.0.1:1", "subscribe": "t", "commitToGroup": "true"}, "commitToGroup"),
    ],
)
def test_bad_options_fail_at_query_start_naming_the_option(spark, options: dict, named: str) -> None:
    reader = spark.readStream.format("odradek")
    for k, v in options.items():
        reader = reader.option(k, v)
    with pytest.raises(Exception, match=named):
        reader.load().writeStream.format("noop").start().awaitTermination(30)


def describe_group(cluster: DevCluster, group: str) -> dict:
    """``odradek group describe G --format json``, as an operator runs it; an error's JSON for an unknown group."""
    env = {**os.environ, "ODRADEK_BOOTSTRAP_SERVERS": cluster.bootstrap_servers}
    cmd = [sys.executable, "-m", "odradek.client.cli.main", "group", "describe", group, "--format", "json"]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    if result.returncode != 0:
        return json.loads(result.stderr)
    return json.loads(result.stdout)


def test_commit_to_group_makes_the_querys_lag_visible(cluster: DevCluster, spark, tmp_path: Path) -> None:
    """kafka.group.id alone commits nothing (as Spark); with commitToGroup each finished micro-batch's end offsets
    are the group's committed offsets, so `group describe` shows the query's lag, and 0 once it caught up."""
    servers = cluster.bootstrap_servers
    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        admin.create_topic("lagged", 2, 3)
    acked = produce(servers, "lagged", [b"l-%d" % i for i in range(300)])
    ends = {p: 1 + max((o for part, o in acked.values() if part == p), default=-1) for p in (0, 1)}

    ingest(spark, servers, "lagged", tmp_path / "a", tmp_path / "cp-a", **{"kafka.group.id": "silent"})
    assert describe_group(cluster, "silent")["error"]["code"] == "GROUP_ID_NOT_FOUND"  # the id alone commits nothing

    group = {"kafka.group.id": "ingest-lagged", "commitToGroup": "true", "maxOffsetsPerTrigger": "100"}
    out, checkpoint = tmp_path / "b", tmp_path / "cp-b"
    ingest(spark, servers, "lagged", out, checkpoint, **group)
    rows = {
        r.partition: (r.committed_offset, r.log_end_offset, r.lag)
        for r in _offsets(describe_group(cluster, "ingest-lagged"))
    }
    assert rows == {p: (ends[p], ends[p], 0) for p in (0, 1)}

    more = produce(servers, "lagged", [b"m-%d" % i for i in range(50)])
    description = describe_group(cluster, "ingest-lagged")
    assert sum(r.lag for r in _offsets(description)) == 50  # records the query has not ingested yet
    assert description["state"] == "Empty" and description["members"] == []  # it commits without joining

    ingest(spark, servers, "lagged", out, checkpoint, **group)
    assert sum(r.lag for r in _offsets(describe_group(cluster, "ingest-lagged"))) == 0
    assert spark.read.parquet(str(out)).count() == len(acked) + len(more)


def _offsets(description: dict) -> list:
    from types import SimpleNamespace

    return [SimpleNamespace(**r) for r in description["offsets"]]


def asyncio_wait_ready(cluster: DevCluster) -> None:
    """Every broker back and unfenced, so the next test starts from a whole cluster."""
    import asyncio

    asyncio.run(cluster.wait_ready(60))
