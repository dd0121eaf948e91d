"""The log's extent against a real cluster (1 controller, brokers 2..4): ``topic add-partitions`` grows a topic
without touching its data and keyed records then follow murmur2 over the new count; ``topic trim`` (DeleteRecords)
advances the log start offset on every replica, consumers below it are reset, and the trim survives a crash of
every broker."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator

import pytest

from odradek.client import Consumer, Producer
from odradek.client.admin import Admin
from odradek.client.producer.partitioner import partition_for_key
from odradek.deploy.local import DevCluster, process_state

from .cli_runner import as_json, odradek
from .conftest import start_cluster, wait_for

pytestmark = pytest.mark.integration
BROKERS = (2, 3, 4)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    c = start_cluster(tmp_path_factory.mktemp("cluster"), controllers=1, brokers=3)
    yield c
    c.stop_all(timeout=10)


def one_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def produce(cluster: DevCluster, topic: str, values: list[bytes], partition: int | None = None, key=None) -> list:
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"}) as p:
        futures = [p.send(topic, v, key=key, partition=partition) for v in values]
        p.flush(30)
        return [f.result(5) for f in futures]


def read(cluster: DevCluster, topic: str, partition: int, offset: int, count: int) -> list:
    """``count`` records of one partition from ``offset`` (earliest where ``offset`` is out of range)."""
    config = {"bootstrap.servers": cluster.bootstrap_servers, "auto.offset.reset": "earliest", "group.id": None}
    with Consumer(config) as c:
        c.assign([(topic, partition)])
        c.seek((topic, partition), offset)
        out: list = []
        wait_for(lambda: out.extend(c.poll(200)) or len(out) >= count, 20, what=f"{count} records of {topic}")
        return out[:count]


def replica_log_starts(admin: Admin, topic: str, partition: int) -> dict[int, int]:
    """Each replica's own log start offset, as its broker reports it (describe-log-dirs)."""
    return {
        b.broker_id: r.log_start_offset
        for b in admin.describe_log_dirs(topics=[topic])
        for d in b.log_dirs
        for r in d.replicas
        if (r.topic, r.partition) == (topic, partition)
    }


def test_add_partitions_keeps_data_and_routes_keys_over_the_new_count(cluster: DevCluster, admin: Admin) -> None:
    """Observed: a topic's partition count could not be changed after creation."""
    admin.create_topic("grow", 2, 2)
    keys = [f"key-{i}".encode() for i in range(20)]
    before = {k: produce(cluster, "grow", [b"old-" + k], key=k)[0] for k in keys}
    assert all(m.partition == partition_for_key(k, 2) for k, m in before.items())

    data = as_json(cluster, "topic", "add-partitions", "grow", "--count", "5")
    assert data == {"name": "grow", "partitions": 5}
    # Every node answers from its own metadata: the one asked may apply the change a moment later.
    info = wait_for(lambda: len((i := admin.describe_topic("grow")).partitions) == 5 and i, 10, what="5 partitions")
    assert [p.partition for p in info.partitions] == [0, 1, 2, 3, 4]
    assert all(len(p.replicas) == 2 for p in info.partitions)  # the topic's replication factor
    wait_for(lambda: all(p.leader > 0 for p in admin.describe_topic("grow").partitions), 20, what="leaders")
    # Existing records stay where they were.
    for k, m in list(before.items())[:3]:
        [r] = read(cluster, "grow", m.partition, m.offset, 1)
        assert r.value == b"old-" + k
    # A producer learns the new count from metadata and routes keys by murmur2 over it.
    after = {k: produce(cluster, "grow", [b"new-" + k], key=k)[0] for k in keys}
    assert all(m.partition == partition_for_key(k, 5) for k, m in after.items())
    assert {m.partition for m in after.values()} - {0, 1}, "no key moved to a new partition"


def test_add_partitions_refuses_bad_counts_and_changes_nothing(cluster: DevCluster, admin: Admin) -> None:
    admin.create_topic("fixed", 3, 1)
    for count in ("3", "2"):
        line = one_error(odradek(cluster, "topic", "add-partitions", "fixed", "--count", count))
        assert f"topic 'fixed' has 3 partitions: the new count must be larger, not {count}" in line
    result = odradek(cluster, "topic", "add-partitions", "fixed", "--count", "1", "--format", "json")
    assert result.returncode != 0 and json.loads(result.stderr)["error"]["code"] == "INVALID_PARTITIONS"
    assert len(admin.describe_topic("fixed").partitions) == 3
    assert "unknown topic 'nope'" in one_error(odradek(cluster, "topic", "add-partitions", "nope", "--count", "4"))
    result = odradek(cluster, "topic", "add-partitions", "nope", "--count", "4", "--format", "json")
    assert json.loads(result.stderr)["error"]["code"] == "UNKNOWN_TOPIC_OR_PARTITION"


def test_trim_advances_every_replica_and_survives_a_crash_of_every_broker(cluster: DevCluster, admin: Admin) -> None:
    """Observed: records could only leave a log by retention; there was no way to delete up to an offset."""
    admin.create_topic("trimmed", 1, 3)
    produce(cluster, "trimmed", [f"v{i}".encode() for i in range(30)], partition=0)
    wait_for(lambda: len(admin.describe_topic("trimmed").partitions[0].isr) == 3, 20, what="a whole ISR")

    # Beyond the high watermark: refused, nothing changes.
    result = odradek(cluster, "topic", "trim", "trimmed", "--partition", "0", "--offset", "31", "--format", "json")
    assert json.loads(result.stderr)["error"]["code"] == "OFFSET_OUT_OF_RANGE"
    assert admin.describe_topic("trimmed").partitions[0].log_start_offset == 0

    data = as_json(cluster, "topic", "trim", "trimmed", "--partition", "0", "--offset", "12")
    assert data == {"topic": "trimmed", "partition": 0, "low_watermark": 12}
    assert replica_log_starts(admin, "trimmed", 0) == {2: 12, 3: 12, 4: 12}  # every replica, when answered
    assert admin.describe_topic("trimmed").partitions[0].log_start_offset == 12
    # A consumer below the new start is out of range: auto.offset.reset takes it to the new start.
    [first] = read(cluster, "trimmed", 0, 3, 1)
    assert (first.offset, first.value) == (12, b"v12")

    # -1 trims up to the high watermark; the admin API answers with the low watermark.
    assert admin.delete_records({("trimmed", 0): 20}) == {("trimmed", 0): 20}

    # Every broker crashes at once: no clean shutdown writes the checkpoints for them.
    for b in BROKERS:
        cluster.signal(b, signal.SIGKILL)
    wait_for(lambda: all(process_state(cluster.node(b).pid) == "stopped" for b in BROKERS), 10, what="the kills")
    for b in BROKERS:
        cluster.start(b)
    wait_for(lambda: replica_log_starts(admin, "trimmed", 0) == {2: 20, 3: 20, 4: 20}, 60, what="replicas back")
    wait_for(lambda: admin.describe_topic("trimmed").partitions[0].leader > 0, 60, what="a leader")
    [first] = read(cluster, "trimmed", 0, 0, 1)
    assert (first.offset, first.value) == (20, b"v20")

    data = as_json(cluster, "topic", "trim", "trimmed", "--partition", "0", "--offset", "-1")
    assert data["low_watermark"] == 30


def test_trim_refusals(cluster: DevCluster, admin: Admin) -> None:
    line = one_error(odradek(cluster, "topic", "trim", "missing", "--partition", "0", "--offset", "1"))
    assert "missing" in line
    admin.create_topic("short", 1, 1)
    line = one_error(odradek(cluster, "topic", "trim", "short", "--partition", "5", "--offset", "0"))
    assert "unknown partition short-5" in line
    # The internal offsets topic is compacted: its records are never trimmed.
    with Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "g"}) as c:  # creates it
        c.subscribe(["short"])
        c.poll(500)
    wait_for(lambda: "__consumer_offsets" in admin.list_topics(include_internal=True), 20, what="the offsets topic")
    result = odradek(cluster, "topic", "trim", "__consumer_offsets", "-p", "0", "-o", "0", "--format", "json")
    assert json.loads(result.stderr)["error"]["code"] == "POLICY_VIOLATION"
