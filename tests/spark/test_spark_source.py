"""``format("odradek")`` in real Spark (local[2], driver on 127.0.0.1, UI off) against a real replicated cluster:
availableNow ingest into Parquet, incremental and idempotent across restarts, and bad options failing at query
start with the option named."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.client import Admin, Producer
from odradek.client.cli.dev_cluster import DevCluster

from ..integration.conftest import start_cluster

pyspark = pytest.importorskip("pyspark")
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    c = start_cluster(tmp_path_factory.mktemp("spark-cluster"), controllers=1, brokers=3)
    yield c
    c.stop_all(timeout=10)


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    from odradek.spark_connector.source import register

    os.environ["PYSPARK_PYTHON"] = sys.executable  # executors run this venv's Python
    session = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    register(session)
    yield session
    session.stop()


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
        query = (
            spark.readStream.format("odradek")
            .option("bootstrap.servers", servers)
            .option("subscribe", "ingest")
            .option("startingOffsets", "earliest")
            .load()
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(180)
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


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"subscribe": "t"}, "bootstrap.servers"),
        ({"bootstrap.servers": "127.0.0.1:1", "subscribe": "t", "assign": '{"t":[0]}'}, "assign/subscribe"),
        ({"bootstrap.servers": "127.0.0.1:1", "subscribe": "t", "startingOffsets": "{nope"}, "startingOffsets"),
    ],
)
def test_bad_options_fail_at_query_start_naming_the_option(spark, options: dict, named: str) -> None:
    reader = spark.readStream.format("odradek")
    for k, v in options.items():
        reader = reader.option(k, v)
    with pytest.raises(Exception, match=named):
        reader.load().writeStream.format("noop").start().awaitTermination(30)
