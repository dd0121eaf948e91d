#!/usr/bin/env python3
"""Spark ingest throughput: ``spark.read.format("odradek")`` of N 100-byte records into the ``noop`` sink on
``local[2]``, against a local cluster of 1 controller and 1 broker, excluding query start-up.

Start-up is excluded by running the same query once on a small topic first (Spark's Python workers are reused,
so the timed query pays only its own planning and reading). The baseline, measured in the same run, is one
plain ``odradek perf consume`` process reading the same topic: the ratio says what Spark's two executors make
of the client's single-process rate, on a machine whose two cores they share with the broker.

    python bench/spark_bench.py [--records N] [--partitions P] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from odradek.client.admin import Admin
from odradek.deploy.local import DevCluster


def cli(*args: str, timeout: float = 600) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "odradek.client.cli.main", *args, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def spark_session():
    from pyspark.sql import SparkSession

    from odradek.spark_connector.source import register

    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session


def ingest_seconds(spark, servers: str, topic: str, partitions: int) -> float:
    start = time.perf_counter()
    (
        spark.read.format("odradek")
        .option("bootstrap.servers", servers)
        .option("subscribe", topic)
        .option("minPartitions", str(partitions))
        .load()
        .write.format("noop")
        .mode("overwrite")
        .save()
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=2, help="topic partitions (= Spark input partitions)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="odradek-spark-bench-") as tmp:
        cluster = DevCluster.create(Path(tmp), controllers=1, brokers=1)
        cluster.start_all()
        try:
            asyncio.run(cluster.wait_ready(60))
            servers = cluster.bootstrap_servers
            with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
                admin.create_topic("bench", args.partitions, 1)
                admin.create_topic("warmup", args.partitions, 1)
            for topic, n in (("bench", args.records), ("warmup", 10_000)):
                cli("perf", "produce", "-X", servers, "--topic", topic, "--num-records", str(n), "--record-size", "100")
            spark = spark_session()
            ingest_seconds(spark, servers, "warmup", args.partitions)  # JVM, Python workers and client imports
            spark_rates, consumer_rates = [], []
            for _ in range(args.rounds):
                spark_rates.append(args.records / ingest_seconds(spark, servers, "bench", args.partitions))
                consume = cli("perf", "consume", "-X", servers, "--topic", "bench", "--num-records", str(args.records))
                consumer_rates.append(consume["records_per_sec"])
            spark.stop()
        finally:
            cluster.stop_all(timeout=10)

    s, c = statistics.median(spark_rates), statistics.median(consumer_rates)
    print(f"records: {args.records:,} x 100 bytes, {args.partitions} partitions, local[2], median of {args.rounds}")
    print(f"  spark read -> noop      {s:>12,.0f} rows/s   ({', '.join(f'{r:,.0f}' for r in spark_rates)})")
    print(f"  perf consume (baseline) {c:>12,.0f} rec/s    ({', '.join(f'{r:,.0f}' for r in consumer_rates)})")
    print(f"  ratio spark / one consumer process: {s / c:.2f}")


if __name__ == "__main__":
    main()
