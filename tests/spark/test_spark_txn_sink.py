"""The sink's transactional mode (``transactional.id.prefix``) in real Spark against a real cluster: a streaming
query whose micro-batch is run again, once after every task committed it (the checkpoint lost its commit entry)
and once after one task committed and another failed (the query failed and is restarted), leaves every row exactly
once for a ``read_committed`` reader; a ``df.write`` job commits its rows once too. Without the mode, the same
replays write rows twice."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from pathlib import Path

import pytest

from odradek.client import Admin, Consumer, ConsumerRecord, OffsetAndMetadata, TopicPartition
from odradek.deploy.local import DevCluster
from odradek.spark_connector.transactional_sink import MARKER_PARTITION, Marker

from .test_spark_sink import create_topic

pyspark = pytest.importorskip("pyspark")
pytestmark = pytest.mark.integration


def read_committed(servers: str, topic: str) -> list[ConsumerRecord]:
    """Every committed record of the topic up to its last stable offset at the time of the call."""
    config = {"bootstrap.servers": servers, "auto.offset.reset": "earliest", "isolation.level": "read_committed"}
    with Consumer(config) as consumer:
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


def marker(servers: str, group: str) -> Marker | None:
    """The marker the sink's tasks committed for ``group`` (the task's transactional id), as the admin sees it."""
    with Admin({"bootstrap.servers": servers}) as admin:
        offsets = admin.list_group_offsets(group, [MARKER_PARTITION])
    return Marker.from_offset(group, OffsetAndMetadata(offsets[0].offset, offsets[0].metadata)) if offsets else None


class Query:
    """A file-to-odradek streaming query, one micro-batch per file, rows shuffled into 2 write tasks by key."""

    def __init__(self, spark, cluster: DevCluster, tmp: Path, topic: str, options: dict[str, str]) -> None:
        self.spark, self.cluster, self.topic, self.options = spark, cluster, topic, options
        self.source, self.checkpoint = tmp / "in", tmp / "checkpoint"
        self.source.mkdir()
        self.files = 0
        self.created = time.time() - 3600

    def add_file(self, n: int) -> None:
        first = self.files * 1000
        lines = (json.dumps({"k": f"k-{i}", "v": f"v-{i}"}) for i in range(first, first + n))
        path = self.source / f"{self.files}.json"
        path.write_text("\n".join(lines) + "\n")
        mtime = self.created + self.files  # the file source takes files in modification-time order
        os.utime(path, (mtime, mtime))
        self.files += 1

    def start(self, transform=None):
        df = (
            self.spark.readStream.schema("k string, v string")
            .option("maxFilesPerTrigger", 1)
            .json(str(self.source))
            .selectExpr("k AS key", "v AS value")
            .repartition(2, "key")  # two write tasks per micro-batch (spark.sql.shuffle.partitions is 2)
        )
        if transform is not None:
            df = transform(df)
        writer = df.writeStream.format("odradek").option("bootstrap.servers", self.cluster.bootstrap_servers)
        for k, v in {"topic": self.topic, "checkpointLocation": str(self.checkpoint), **self.options}.items():
            writer = writer.option(k, v)
        return writer.trigger(availableNow=True).start()

    def run(self) -> list[int]:
        """Rows per micro-batch of one availableNow run."""
        query = self.start()
        assert query.awaitTermination(180)
        assert query.exception() is None
        return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]

    def forget_commit(self, batch: int) -> None:
        """As if the query had died after its tasks committed ``batch`` but before Spark recorded it: the restart
        runs the batch again from the offsets in the checkpoint."""
        for name in (str(batch), f".{batch}.crc"):
            (self.checkpoint / "commits" / name).unlink(missing_ok=True)


def expected(*counts: int) -> Counter:
    return Counter((b"k-%d" % i, b"v-%d" % i) for f, n in enumerate(counts) for i in range(f * 1000, f * 1000 + n))


def rows(records: list[ConsumerRecord]) -> Counter:
    return Counter((r.key, r.value) for r in records)


@pytest.mark.parametrize("transactional", [True, False], ids=["transactional", "at-least-once"])
def test_a_batch_run_again_after_its_tasks_committed_is_not_written_twice(
    cluster: DevCluster, spark, tmp_path: Path, transactional: bool
) -> None:
    topic = f"txn-replay-{transactional}"
    create_topic(cluster, topic)
    options = {"transactional.id.prefix": f"replay-{transactional}"} if transactional else {}
    q = Query(spark, cluster, tmp_path, topic, options)
    q.add_file(200)
    q.add_file(300)
    assert q.run() == [200, 300]
    q.forget_commit(1)
    assert q.run() == [300]  # batch 1 again, same offsets
    q.add_file(100)
    assert q.run() == [100]

    got = rows(read_committed(cluster.bootstrap_servers, topic))
    if not transactional:  # the replay wrote batch 1 again: what the transactional mode is for
        assert got == expected(200, 300, 100) + expected(0, 300)
        return
    assert got == expected(200, 300, 100)
    markers = [marker(cluster.admin_servers, f"replay-True-{p}") for p in (0, 1)]
    assert [m.batch if m else None for m in markers] == [2, 2]
    assert markers[0] is not None and markers[0].run == markers[1].run  # type: ignore[union-attr]


def test_a_batch_that_failed_after_one_task_committed_writes_only_the_rest_on_restart(
    cluster: DevCluster, spark, tmp_path: Path
) -> None:
    """Task 0 of micro-batch 1 commits; task 1 then fails before writing (the query fails: local mode does not
    retry tasks). The restarted query runs batch 1 again: task 0 finds its commit, task 1 writes its rows."""
    from pyspark import TaskContext
    from pyspark.sql.functions import udf

    topic, prefix, servers = "txn-partial", "partial", cluster.bootstrap_servers
    create_topic(cluster, topic)
    q = Query(spark, cluster, tmp_path, topic, {"transactional.id.prefix": prefix})
    q.add_file(200)
    assert q.run() == [200]

    fail_flag = tmp_path / "fail-task-1"
    fail_flag.touch()

    def fail_task_1_once_task_0_committed(value):  # no type hints: Spark would read them as a pandas UDF
        # Runs in the executor's Python worker: only odradek and local names (this module is not importable there).
        from odradek.client import Consumer as C
        from odradek.spark_connector.transactional_sink import MARKER_PARTITION as TP
        from odradek.spark_connector.transactional_sink import Marker as M

        context = TaskContext.get()
        if context is None or context.partitionId() != 1 or not fail_flag.exists():
            return value
        deadline = time.monotonic() + 60
        with C({"bootstrap.servers": servers, "group.id": f"{prefix}-0"}) as consumer:
            while time.monotonic() < deadline:  # the event: task 0's marker says batch 1 is committed
                m = M.from_offset(f"{prefix}-0", consumer.committed([TP])[TP])
                if m is not None and m.batch >= 1:
                    raise RuntimeError("injected: task 1 fails after task 0 committed")
                time.sleep(0.2)
        raise RuntimeError("injected, but task 0 did not commit within 60 s")

    q.add_file(300)
    fail = udf(fail_task_1_once_task_0_committed, "string")
    query = q.start(lambda df: df.select("key", fail("value").alias("value")))
    with pytest.raises(Exception, match="injected: task 1 fails after task 0 committed"):
        query.awaitTermination(180)
    task_0_only = rows(read_committed(servers, topic)) - expected(200)
    assert 0 < sum(task_0_only.values()) < 300 and set(task_0_only.values()) == {1}

    fail_flag.unlink()
    assert q.run() == [300]  # batch 1 again
    assert rows(read_committed(servers, topic)) == expected(200, 300)
    assert [marker(cluster.admin_servers, f"{prefix}-{p}").batch for p in (0, 1)] == [1, 1]  # type: ignore[union-attr]


def test_a_batch_job_commits_each_task_once(cluster: DevCluster, spark) -> None:
    create_topic(cluster, "txn-job")
    data = [(b"k-%d" % i, b"v-%d" % i) for i in range(500)]
    spark.createDataFrame(data, "key binary, value binary").repartition(3).write.format("odradek").option(
        "bootstrap.servers", cluster.bootstrap_servers
    ).option("topic", "txn-job").option("transactional.id.prefix", "job").mode("append").save()
    assert rows(read_committed(cluster.bootstrap_servers, "txn-job")) == Counter(data)
    runs = {marker(cluster.admin_servers, f"job-{p}") for p in range(3)}
    assert len(runs) == 1 and next(iter(runs)).run.startswith("job-")  # type: ignore[union-attr]
