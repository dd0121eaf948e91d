"""AlterReplicaLogDirs on real processes: one controller and two brokers, each with two log dirs. While a Kafka
client (confluent-kafka, acks=all, idempotent) writes to an RF=2 topic, kafka-python's admin moves the leader's
replica to its broker's other dir, and ``odradek broker move-replica`` moves the follower's. DescribeLogDirs shows
each replica in its first dir before and in the other after, the old dirs are gone, and every acknowledged record
is read back once, in order."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import NoError
from kafka.structs import TopicPartitionReplica

from odradek.broker.config import NodeConfig
from odradek.broker.storage import format_storage
from odradek.deploy.local import DevCluster

from .conftest import FAST, start_created, wait_for

pytestmark = pytest.mark.integration

TOPIC = "moving"
RECORDS = 20_000  # written before the moves, so that each copy takes many rounds
SEGMENT_BYTES = 256 * 1024


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[DevCluster]:
    """Brokers with log dirs ``data`` (also the metadata log's) then ``extra``: a broker's first partition goes to
    ``data``, the dir holding the fewest partitions, the first of them on a tie."""
    cluster = DevCluster.create(tmp_path, 1, 2, overrides={**FAST, "log.segment.bytes": SEGMENT_BYTES})
    for n in cluster.nodes:
        if "broker" not in n.roles:
            continue
        props = tomllib.loads(Path(n.config).read_text())
        props["log.dirs"] = f"{n.directory / 'data'},{n.directory / 'extra'}"
        props["metadata.log.dir"] = str(n.directory / "data")
        Path(n.config).write_text(tomli_w.dumps(props))
        format_storage(NodeConfig.load(n.config), cluster.cluster_id, ignore_formatted=True)
    start_created(cluster)
    yield cluster
    cluster.stop_all(timeout=10)


class AckedProducer:
    """confluent-kafka writing numbered values with acks=all until stopped; ``acked`` holds what was delivered."""

    def __init__(self, servers: str) -> None:
        self.producer = Producer(
            {"bootstrap.servers": servers, "acks": "all", "enable.idempotence": True, "linger.ms": 5}
        )
        self.acked: list[bytes] = []
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, error: Any, message: Any) -> None:
        if error is None:
            self.acked.append(message.value())
        else:
            self.failed.append(str(error))

    def write(self, count: int, start: int) -> None:
        for i in range(start, start + count):
            while True:
                try:
                    self.producer.produce(TOPIC, f"value-{i:08d}".encode(), partition=0, on_delivery=self._delivered)
                    break
                except BufferError:
                    self.producer.poll(0.05)
            self.producer.poll(0)

    def _run(self) -> None:
        sent, deadline = RECORDS, time.monotonic() + 120
        while not self._stop.is_set() and time.monotonic() < deadline:
            self.write(50, sent)
            sent += 50
            time.sleep(0.01)
        self.producer.flush(30)

    def __enter__(self) -> AckedProducer:
        self.write(RECORDS, 0)
        self.producer.flush(60)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)


def replicas(admin: KafkaAdminClient) -> dict[int, list[tuple[str, bool]]]:
    """Broker -> the (log dir, is future) of each of its replicas of the topic, from DescribeLogDirs."""
    out: dict[int, list[tuple[str, bool]]] = {}
    for answer in admin.describe_log_dirs({TOPIC: [0]}):
        for d in answer["log_dirs"]:
            assert d["error_code"] == 0
            for t in d["topics"]:
                for p in t["partitions"]:
                    out.setdefault(answer["broker"], []).append((d["log_dir"], p["is_future_key"]))
    return {b: sorted(found) for b, found in out.items()}


def read_back(servers: str, end: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "check", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(out) < end and time.monotonic() < deadline:
        for m in consumer.consume(1000, 1.0):
            assert m.error() is None, m.error()
            out.append(m.value())
    consumer.close()
    return out


def cli_move(cluster: DevCluster, broker: int, path: str) -> list[dict[str, Any]]:
    env = {**os.environ, "ODRADEK_HOME": str(cluster.directory / "home")}
    args = ["broker", "move-replica", "-b", str(broker), "-t", TOPIC, "-p", "0", "-d", path, "--format", "json"]
    result = subprocess.run(
        [sys.executable, "-m", "odradek.client.cli.main", *args, "-X", cluster.admin_servers],
        capture_output=True,
        text=True,
        env=env,
        timeout=90,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_moving_replicas_under_acks_all_load_keeps_every_acknowledged_record(cluster: DevCluster) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap_servers, request_timeout_ms=20000)
    admin.create_topics([NewTopic(TOPIC, 1, 2, topic_configs={"min.insync.replicas": "2"})])
    brokers = [n for n in cluster.nodes if n.kafka_port]
    data = {n.node_id: str((n.directory / "data").resolve()) for n in brokers}
    extra = {n.node_id: str((n.directory / "extra").resolve()) for n in brokers}
    wait_for(lambda: replicas(admin) == {b: [(data[b], False)] for b in data}, 30, what="both replicas in data")
    leader = admin.describe_topic_partitions([TOPIC])["topics"][0]["partitions"][0]["leader_id"]
    [follower] = set(data) - {leader}

    with AckedProducer(cluster.kafka_bootstrap_servers) as producer:
        wait_for(lambda: len(producer.acked) > RECORDS + 200, 30, what="acks while the moves start")
        moved = admin.alter_replica_log_dirs({TopicPartitionReplica(TOPIC, 0, leader): extra[leader]})
        assert moved == {TopicPartitionReplica(TOPIC, 0, leader): NoError}
        assert cli_move(cluster, follower, extra[follower]) == [
            {"broker_id": follower, "topic": TOPIC, "partition": 0, "path": extra[follower], "error": None}
        ]
        # Each move ends with its replica in the other dir alone: the future replica has taken its place.
        wait_for(lambda: replicas(admin) == {b: [(extra[b], False)] for b in extra}, 60, what="both replicas moved")
        acked_at_move = len(producer.acked)
        wait_for(lambda: len(producer.acked) > acked_at_move + 300, 30, what="acks after the moves")
    assert producer.failed == []
    acked = producer.acked
    for n in brokers:
        assert not (n.directory / "data" / f"{TOPIC}-0").exists()
        wait_for(lambda n=n: not any(c.name.endswith("-delete") for c in (n.directory / "data").iterdir()), 10)
        assert (n.directory / "extra" / f"{TOPIC}-0").is_dir()
    got = read_back(cluster.kafka_bootstrap_servers, len(acked))
    assert len(got) == len(set(got))  # nothing doubled
    assert set(acked) <= set(got)  # nothing acknowledged lost
    assert got == sorted(got)  # in the order written
    admin.close()
