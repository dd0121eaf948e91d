#!/usr/bin/env python3
"""Ingest an odradek topic into Parquet with Spark Structured Streaming, exactly once across runs.

Each run reads everything new since the last run (``trigger(availableNow=True)``) and stops; the checkpoint holds
the offsets, so running it again after a crash or on a schedule neither skips nor repeats a record. Without
``--once`` the query keeps running with a processing-time trigger.

    python examples/spark_ingest.py --bootstrap-servers 10.0.0.4:9092 --topic events \\
        --output /data/events --checkpoint /data/events-checkpoint [--once]

Needs ``pip install 'odradek[spark]'`` and Java 17+; executors run this Python (``PYSPARK_PYTHON``).
"""

from __future__ import annotations

import argparse
import os
import sys


def ingest(spark, servers: str, topic: str, output: str, checkpoint: str, once: bool, trigger_s: int = 10):
    """Start the query and return it: the raw records plus an ingest date column, appended to Parquet."""
    reader = (
        spark.readStream.format("odradek")
        .option("bootstrap.servers", servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "500000")  # bounds each micro-batch on a large backlog
        .option("includeHeaders", "true")
        .load()
        .selectExpr("*", "to_date(timestamp) AS date")
    )
    writer = (
        reader.writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .partitionBy("date")
    )
    trigger = {"availableNow": True} if once else {"processingTime": f"{trigger_s} seconds"}
    return writer.trigger(**trigger).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--output", required=True, help="Parquet directory")
    parser.add_argument("--checkpoint", required=True, help="Spark checkpoint directory (keep it with the output)")
    parser.add_argument("--once", action="store_true", help="read what is there now, then stop")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)

    from pyspark.sql import SparkSession

    from odradek.spark_connector.source import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = SparkSession.builder.master(args.master).appName("odradek-ingest").getOrCreate()
    register(spark)
    query = ingest(spark, args.bootstrap_servers, args.topic, args.output, args.checkpoint, args.once)
    query.awaitTermination()
    progress = query.recentProgress
    print(f"ingested {sum(p['numInputRows'] for p in progress)} records in {len(progress)} micro-batches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
