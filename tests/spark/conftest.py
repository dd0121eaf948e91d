"""Real Spark and a real cluster for the Spark tests: one local[2] session for the whole run (driver on 127.0.0.1,
UI off; a JVM start costs seconds), and per module a cluster of 1 controller and 3 brokers."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from odradek.deploy.local import DevCluster

from ..integration.conftest import start_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    # Retention runs every half second so that a test can age records out (failOnDataLoss).
    c = start_cluster(
        tmp_path_factory.mktemp("spark-cluster"), controllers=1, brokers=3, **{"log.retention.check.interval.ms": 500}
    )
    yield c
    c.stop_all(timeout=10)


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    from odradek.spark_connector.source import register

    os.environ["PYSPARK_PYTHON"] = sys.executable  # executors run this venv's Python
    session = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        # The tests run small queries on a 2-core machine beside the clusters: the JVM's client compiler alone and
        # a single-threaded collector halve its CPU (24 s to 12 s for a start and a few queries, measured here).
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .getOrCreate()
    )
    register(session)
    yield session
    session.stop()
