"""Real Spark and a real cluster for the Spark tests: one local[2] session for the whole run (driver on 127.0.0.1,
UI off; a JVM start costs seconds), and one cluster of 1 controller and 3 brokers that the Spark test modules share
(every module creates topics of its own names): started for the first of them, made whole again (stopped nodes
restarted, paused ones resumed) for each next one, and stopped after the last Spark test in a row, so that it does
not idle on while the worker runs other files. A cluster per module cost each module a start and a stop of four
nodes (about 3 CPU-seconds) and as many seconds of wall time."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from odradek.deploy.local import DevCluster
from odradek.deploy.pytest_plugin import restore

from ..integration.conftest import start_cluster

HERE = Path(__file__).parent


class _Shared:
    cluster: DevCluster | None = None


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> DevCluster:
    if _Shared.cluster is None:
        # Retention runs every half second so that a test can age records out (failOnDataLoss).
        _Shared.cluster = start_cluster(
            tmp_path_factory.mktemp("spark-cluster"),
            controllers=1,
            brokers=3,
            schema_registry=True,  # the source's keyFormat/valueFormat decode through it
            **{"log.retention.check.interval.ms": 500},
        )
    else:
        restore(_Shared.cluster)  # as a previous module left it: every node running and every broker registered
    return _Shared.cluster


@pytest.hookimpl(trylast=True)  # after the test's own fixtures are torn down
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After the last Spark test in a row (this hook runs for the tests of this directory only), stop the cluster."""
    if _Shared.cluster is not None and (nextitem is None or HERE not in nextitem.path.parents):
        cluster, _Shared.cluster = _Shared.cluster, None
        cluster.stop_all(timeout=10)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _Shared.cluster is not None:  # the session was interrupted
        cluster, _Shared.cluster = _Shared.cluster, None
        cluster.stop_all(timeout=10)


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
