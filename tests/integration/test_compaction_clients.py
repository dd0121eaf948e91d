"""Clients over compacted logs on a real cluster: ``topic describe`` names the replicas the log cleaner gave up on
(a byte flipped in a sealed segment on disk), and a consumer reading a compacted partition gets exactly the
surviving records across the offset gaps, its position ending at the log end, a seek or a committed offset at a
removed offset resuming at the next record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from odradek.client import Admin, Consumer, TopicPartition

from .compaction_gaps import COMPACT, END, NODE, compacted_with_gaps, produce_rounds, read_all
from .conftest import wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.odradek_cluster(controllers=1, brokers=2, config=NODE),  # shared by this module's tests
]
CLI = [sys.executable, "-m", "odradek.client.cli.main"]


def cli(cluster: Any, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ODRADEK_BOOTSTRAP_SERVERS": cluster.bootstrap_servers}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, timeout=60)


def log_files(cluster: Any, node_id: int, topic: str) -> list[Path]:
    [node] = [n for n in cluster.nodes if n.node_id == node_id]
    return sorted((Path(node.directory) / "data" / f"{topic}-0").glob("*.log"))


def test_describe_shows_the_replica_the_cleaner_gave_up_on(odradek_cluster) -> None:
    cluster = odradek_cluster
    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        # Nothing is old enough to clean until the lag is lowered, so no pass rewrites a file under the flip.
        admin.create_topic("broken", 1, 2, {**COMPACT, "min.compaction.lag.ms": "3600000"})
        produce_rounds(cluster, "broken", [[f"k{i % 10}" for i in range(r * 10, r * 10 + 10)] for r in range(8)])
        p = admin.describe_topic("broken").partitions[0]
        assert p.uncleanable_replicas == []
        victim = next(r for r in p.replicas if r != p.leader)  # the follower: the leader's reads stay intact
        files = log_files(cluster, victim, "broken")
        assert len(files) >= 3, files  # segments rolled: the first one is sealed
        with files[0].open("r+b") as f:  # a byte inside the first batch's records: its CRC no longer matches
            f.seek(70)
            byte = f.read(1)
            f.seek(70)
            f.write(bytes([byte[0] ^ 0xFF]))

        admin.alter_topic_configs("broken", set_configs={"min.compaction.lag.ms": "0"})
        wait_for(
            lambda: admin.describe_topic("broken").partitions[0].uncleanable_replicas == [victim],
            60,
            what="the replica reported uncleanable",
        )
        why = {
            b.broker_id: r.uncleanable
            for b in admin.describe_log_dirs(topics=["broken"])
            for d in b.log_dirs
            for r in d.replicas
        }
        assert why[p.leader] == "" and "Corrupt" in why[victim], why

    result = cli(cluster, "topic", "describe", "broken", "--format", "json")
    assert result.returncode == 0, result.stderr
    [partition] = json.loads(result.stdout)["partitions"]
    assert partition["uncleanable_replicas"] == [victim]
    result = cli(cluster, "topic", "describe", "broken")
    assert result.returncode == 0, result.stderr
    assert f"UNCLEANABLE on {victim}" in result.stdout


def test_consumers_read_across_the_offset_gaps_compaction_leaves(odradek_cluster) -> None:
    cluster = odradek_cluster
    tp = TopicPartition("gaps", 0)
    expected = compacted_with_gaps(cluster, tp.topic)
    config = {"bootstrap.servers": cluster.bootstrap_servers, "auto.offset.reset": "earliest"}

    with Consumer({**config, "max.poll.records": 5}) as c:
        c.assign([tp])
        assert c.end_offsets([tp])[tp] == END
        records = read_all(c, tp, END)
        assert [(r.offset, r.key, r.value) for r in records] == expected
        assert c.position(tp) == END  # at the log end, not at a removed offset

        c.seek(tp, 10)
        batch = wait_for(lambda: c.poll(timeout_ms=200), 10, what="records at 10")
        assert [r.offset for r in batch] == [10, 11, 12, 13, 14]
        assert c.position(tp) == 20  # past the batch's last offset (19), whose trailing records were removed
        for removed, following in ((0, 10), (15, 20), (25, 30)):
            c.seek(tp, removed)
            batch = wait_for(lambda: c.poll(timeout_ms=200), 10, what=f"a record from {removed}")
            assert batch[0].offset == following

    group = {**config, "group.id": "gaps-reader", "enable.auto.commit": "false"}
    with Consumer(group) as c:
        c.assign([tp])
        c.commit({tp: 15})  # a removed offset
    with Consumer(group) as c:
        c.assign([tp])
        assert c.committed([tp])[tp].offset == 15
        batch = wait_for(lambda: c.poll(timeout_ms=200), 10, what="records from the committed offset")
        assert batch[0].offset == 20

    result = cli(cluster, "consume", "gaps", "--exit-at-end", "--format", "json")  # ends despite the gaps
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["offset"] for line in result.stdout.splitlines()] == [o for o, _, _ in expected]
