"""Live topic configuration on a real cluster: ``odradek topic alter-config`` changes segment.bytes and retention.ms
of a topic with data, and every replica applies them without a restart; min.insync.replicas changes what acks=all
needs at once; a bad value is refused naming the config and nothing changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from odradek.client import Admin, Producer
from odradek.client.errors import InvalidConfigError, NotEnoughReplicasError

from .conftest import FAST, wait_for

NODE = {**FAST, "log.retention.check.interval.ms": 200}
pytestmark = [
    pytest.mark.integration,
    pytest.mark.odradek_cluster(controllers=1, brokers=3, config=NODE, shared=False),
]
CLI = [sys.executable, "-m", "odradek.client.cli.main"]


def cli(cluster: Any, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ODRADEK_BOOTSTRAP_SERVERS": cluster.bootstrap_servers}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, timeout=60)


def all_brokers_describe(cluster: Any, topic: str, key: str, value: str) -> bool:
    """Whether every broker, asked alone, describes ``topic`` with ``key`` = ``value`` (from its own image)."""
    for n in cluster.nodes:
        if n.broker_port:
            with Admin({"bootstrap.servers": f"{n.host}:{n.broker_port}"}) as one:
                if one.describe_topic(topic).configs.get(key) != value:
                    return False
    return True


def segments(cluster: Any, topic: str) -> dict[int, int]:
    """Node id -> number of segment files of ``topic``-0 in its log dir."""
    out = {}
    for n in cluster.nodes:
        d = Path(n.directory) / "data" / f"{topic}-0"
        if d.is_dir():
            out[n.node_id] = len(list(d.glob("*.log")))
    return out


def produce(cluster: Any, topic: str, count: int, size: int = 200) -> None:
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 0, "batch.size": 1}) as p:
        futures = [p.send(topic, b"x" * size, partition=0) for _ in range(count)]
        p.flush(30)
        assert all(f.exception(10) is None for f in futures)


def test_segment_bytes_and_retention_take_effect_on_every_replica_live(odradek_cluster) -> None:
    cluster = odradek_cluster
    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        admin.create_topic("live", 1, 3)
        produce(cluster, "live", 50)
        assert set(segments(cluster, "live").values()) == {1}  # the default segment size holds it all

        result = cli(cluster, "topic", "alter-config", "live", "--set", "segment.bytes=2048", "--format", "json")
        assert result.returncode == 0, result.stderr
        data = json.loads(result.stdout)
        assert data["configs"] == {"segment.bytes": "2048"} and data["set"] == {"segment.bytes": "2048"}
        produce(cluster, "live", 50)  # ~12 KB more: rolls every 2 KB from now on, on each replica
        wait_for(lambda: all(n >= 5 for n in segments(cluster, "live").values()), 30, what="segments rolled")
        assert len(segments(cluster, "live")) == 3

        described = {c.name: c for c in admin.describe_configs("live")}
        assert (described["segment.bytes"].value, described["segment.bytes"].source) == ("2048", "topic")
        assert described["retention.ms"].source in ("default", "broker")

        before = admin.describe_topic("live").partitions[0].log_start_offset
        configs = admin.alter_topic_configs("live", set_configs={"retention.ms": "1"})
        assert configs == {"segment.bytes": "2048", "retention.ms": "1"}
        wait_for(
            lambda: all(n == 1 for n in segments(cluster, "live").values()),
            30,
            what="every replica deleting its old segments",
        )
        assert admin.describe_topic("live").partitions[0].log_start_offset > before

        assert admin.alter_topic_configs("live", delete_configs=["retention.ms"]) == {"segment.bytes": "2048"}
        wait_for(lambda: "retention.ms" not in admin.describe_topic("live").configs, 10, what="the describe")


def test_min_insync_replicas_applies_at_once_and_bad_changes_change_nothing(odradek_cluster) -> None:
    cluster = odradek_cluster
    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        admin.create_topic("strict", 1, 2)
        admin.alter_topic_configs("strict", set_configs={"min.insync.replicas": "3"})  # more than the replicas
        # The answering broker has applied the change; the leader applies it when it replays the metadata log, as
        # in Kafka, which may be a moment later: it is in force once every broker describes it.
        wait_for(lambda: all_brokers_describe(cluster, "strict", "min.insync.replicas", "3"), 10, what="the change")
        with Producer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "delivery.timeout.ms": 3000,
                "request.timeout.ms": 1000,
                "linger.ms": 0,
            }
        ) as p:
            with pytest.raises(NotEnoughReplicasError):
                p.send("strict", b"refused").result(10)
            admin.alter_topic_configs("strict", set_configs={"min.insync.replicas": "2"})
            wait_for(lambda: all_brokers_describe(cluster, "strict", "min.insync.replicas", "2"), 10, what="it")
            assert p.send("strict", b"accepted").result(10).offset == 0

        with pytest.raises(InvalidConfigError, match=r"retention\.ms"):
            admin.alter_topic_configs("strict", set_configs={"segment.bytes": "4096", "retention.ms": "soon"})
        assert admin.alter_topic_configs("strict", validate_only=True) == {"min.insync.replicas": "2"}  # none applied

        result = cli(cluster, "topic", "alter-config", "strict", "--set", "flush.ms=-5")
        lines = result.stderr.strip().splitlines()
        assert result.returncode != 0 and len(lines) == 1 and lines[0].startswith("error: ") and "flush.ms" in lines[0]
        result = cli(cluster, "topic", "alter-config", "strict", "--set", "retention.ms=5", "--dry-run")
        assert result.returncode == 0 and "nothing changed" in result.stdout
        assert admin.alter_topic_configs("strict", validate_only=True) == {"min.insync.replicas": "2"}
        result = cli(cluster, "topic", "alter-config", "strict")
        assert result.returncode != 0 and "nothing to alter" in result.stderr


def test_a_cluster_wide_default_applies_to_topics_without_their_own_value(odradek_cluster) -> None:
    cluster = odradek_cluster
    with Admin({"bootstrap.servers": cluster.admin_servers}) as admin:
        admin.create_topic("inherits", 1, 3, {"segment.bytes": "2048"})
        admin.create_topic("keeps", 1, 3, {"segment.bytes": "2048", "retention.ms": "604800000"})
        for topic in ("inherits", "keeps"):
            produce(cluster, topic, 60)
        wait_for(lambda: min(segments(cluster, "inherits").values()) >= 5, 30, what="segments rolled")

        result = cli(cluster, "cluster", "alter-config", "--set", "log.retention.ms=1", "--format", "json")
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["configs"] == {"log.retention.ms": "1"}
        wait_for(lambda: set(segments(cluster, "inherits").values()) == {1}, 30, what="the default applied")
        assert min(segments(cluster, "keeps").values()) >= 5  # its own retention.ms wins

        wait_for(
            lambda: {c.name: c.source for c in admin.describe_configs("inherits")}["retention.ms"] == "cluster",
            10,
            what="the describe",
        )
        listed = json.loads(cli(cluster, "cluster", "configs", "--format", "json").stdout)
        assert {"name": "log.retention.ms", "value": "1", "source": "cluster"} in [
            {k: c[k] for k in ("name", "value", "source")} for c in listed
        ]
        bad = cli(cluster, "cluster", "alter-config", "--set", "num.partitions=3")
        assert bad.returncode != 0 and "num.partitions" in bad.stderr and "dynamic" in bad.stderr
        assert admin.alter_cluster_configs(delete_configs=["log.retention.ms"]) == {}
