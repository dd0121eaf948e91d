"""KIP-848 consumer groups with unmodified librdkafka consumers (confluent-kafka, ``group.protocol=consumer``) on a
real one-broker cluster: members join and share the partitions, a joiner takes only the partitions that move (the
other member revokes just those), commits are stored and fetched with member epochs, a leaving member's partitions
go back, an empty classic group with committed offsets becomes a consumer group without losing them, and a classic
group with a member is upgraded online when a consumer protocol member joins (the classic member stays, speaking
the classic protocol) and downgraded when that member leaves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from odradek.client.admin import Admin
from odradek.deploy.local import DevCluster

from .conftest import start_cluster, wait_for

pytestmark = pytest.mark.integration

PARTITIONS = 4
CLI = [sys.executable, "-m", "odradek.client.cli.main"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    c = start_cluster(tmp_path_factory.mktemp("kip848"), controllers=1, brokers=1)
    yield c
    c.stop_all(timeout=10)


@pytest.fixture(scope="module")
def admin(cluster: DevCluster) -> Iterator[Admin]:
    a = Admin({"bootstrap.servers": cluster.admin_servers, "request.timeout.ms": 10000})
    yield a
    a.close()


def new_topic(admin: Admin, cluster: DevCluster, records: int) -> str:
    """A topic of PARTITIONS partitions with ``records`` records spread over them evenly."""
    name = f"kip848-{uuid.uuid4().hex[:8]}"
    admin.create_topic(name, partitions=PARTITIONS, replication_factor=1)
    produce(cluster, name, records)
    return name


def produce(cluster: DevCluster, topic: str, records: int, prefix: str = "v") -> None:
    producer = Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "acks": "all"})
    for i in range(records):
        producer.produce(topic, f"{prefix}{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


class Member:
    """A librdkafka consumer in the group, recording what its rebalance callbacks were told."""

    def __init__(self, cluster: DevCluster, group: str, topic: str, name: str, protocol: str = "consumer") -> None:
        self.name = name
        self.events: list[tuple[str, list[int]]] = []
        config = {
            "bootstrap.servers": cluster.kafka_bootstrap_servers,
            "group.id": group,
            "group.protocol": protocol,
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
        self.consumer = Consumer(config)
        self.consumer.subscribe(
            [topic],
            on_assign=lambda _, ps: self.events.append(("assign", sorted(p.partition for p in ps))),
            on_revoke=lambda _, ps: self.events.append(("revoke", sorted(p.partition for p in ps))),
        )
        self.values: list[bytes] = []

    def poll(self) -> None:
        message = self.consumer.poll(0.1)
        if message is not None and message.error() is None:
            self.values.append(message.value())

    def owned(self) -> list[int]:
        return sorted(p.partition for p in self.consumer.assignment())


def cli_json(cluster: DevCluster, *args: str) -> Any:
    env = {**os.environ, "ODRADEK_BOOTSTRAP_SERVERS": cluster.bootstrap_servers}
    done = subprocess.run([*CLI, *args, "--format", "json"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def poll_until(members: list[Member], condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll every member (their rebalance callbacks run inside poll) until ``condition`` holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for m in members:
            m.poll()
        if condition():
            return
    pytest.fail(f"timed out after {timeout}s waiting for {what}: " + repr({m.name: m.events for m in members}))


def test_members_share_the_partitions_and_only_moved_partitions_are_revoked(cluster: DevCluster, admin: Admin) -> None:
    topic = new_topic(admin, cluster, 40)
    group = f"g-{topic}"
    a = Member(cluster, group, topic, "a")
    poll_until([a], lambda: len(a.values) == 40, 60, "a to read every record")
    assert a.events == [("assign", [0, 1, 2, 3])]
    a.consumer.commit(asynchronous=False)
    committed = a.consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    assert [tp.offset for tp in committed] == [10] * PARTITIONS

    b = Member(cluster, group, topic, "b")
    poll_until([a, b], lambda: len(a.owned()) == 2 and len(b.owned()) == 2, 60, "the partitions to be shared")
    moved = b.owned()
    kept = a.owned()
    assert sorted(kept + moved) == [0, 1, 2, 3]
    # a gave up exactly what b took, and nothing else: no partition went away and came back.
    assert [e for e in a.events if e[0] == "revoke"] == [("revoke", moved)]
    assert b.events == [("assign", moved)]

    # Both commit with their member epochs; the consumer protocol's describe shows the stable group.
    produce(cluster, topic, 8, prefix="w")
    poll_until([a, b], lambda: len(a.values) + len(b.values) == 48, 60, "the new records")
    a.consumer.commit(asynchronous=False)
    b.consumer.commit(asynchronous=False)
    committed = a.consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    assert [tp.offset for tp in committed] == [12] * PARTITIONS
    kafka_admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    described = kafka_admin.describe_consumer_groups([group])[group].result(timeout=30)
    assert (described.type.name, described.partition_assignor) == ("CONSUMER", "uniform")
    assignments = {m.client_id: sorted(tp.partition for tp in m.assignment.topic_partitions) for m in described.members}
    assert assignments == {"a": kept, "b": moved}
    [desc] = admin.describe_groups([group])
    assert (desc.group_type, desc.protocol_type, desc.state) == ("consumer", "consumer", "Stable")
    shown = cli_json(cluster, "group", "describe", group)
    assert (shown["group_type"], shown["protocol"], shown["state"]) == ("consumer", "uniform", "Stable")
    assert {m["client_id"]: sorted(a["partition"] for a in m["assignment"]) for m in shown["members"]} == assignments
    listed = {g["group_id"]: g["group_type"] for g in cli_json(cluster, "group", "list")}
    assert listed[group] == "consumer"

    # b leaves: its partitions go back to a.
    b.consumer.close()
    poll_until([a], lambda: a.owned() == [0, 1, 2, 3], 60, "a to get b's partitions back")
    assert a.events[-1] == ("assign", moved)
    a.consumer.close()
    wait_for(lambda: admin.describe_groups([group])[0].state == "Empty", 30, what="the group to empty")


def test_an_empty_classic_group_becomes_a_consumer_group_and_keeps_its_offsets(
    cluster: DevCluster, admin: Admin
) -> None:
    topic = new_topic(admin, cluster, 20)
    group = f"g-{topic}"
    classic = Member(cluster, group, topic, "classic", protocol="classic")
    poll_until([classic], lambda: len(classic.values) == 20, 60, "the classic member to read every record")
    classic.consumer.commit(asynchronous=False)
    classic.consumer.close()
    [desc] = admin.describe_groups([group])
    assert (desc.group_type, desc.state) == ("classic", "Empty")

    produce(cluster, topic, 8, prefix="w")
    upgraded = Member(cluster, group, topic, "upgraded")
    poll_until([upgraded], lambda: len(upgraded.values) == 8, 60, "the consumer member to read the new records")
    assert sorted(upgraded.values) == sorted(f"w{i}".encode() for i in range(8))  # from the classic group's offsets
    [desc] = admin.describe_groups([group])
    assert (desc.group_type, desc.state) == ("consumer", "Stable")
    upgraded.consumer.close()


def test_a_classic_group_with_members_is_upgraded_online_and_downgraded_when_the_consumer_member_leaves(
    cluster: DevCluster, admin: Admin
) -> None:
    """group.consumer.migration.policy=bidirectional (Kafka 4's default): a mixed group of one librdkafka consumer
    of each protocol."""
    topic = new_topic(admin, cluster, 20)
    group = f"g-{topic}"
    classic = Member(cluster, group, topic, "classic", protocol="classic")
    poll_until([classic], lambda: len(classic.values) == 20, 60, "the classic member to read every record")
    classic.consumer.commit(asynchronous=False)
    assert admin.describe_groups([group])[0].group_type == "classic"

    modern = Member(cluster, group, topic, "modern")

    def shared() -> bool:
        mine, theirs = classic.owned(), modern.owned()
        return bool(mine) and bool(theirs) and sorted(mine + theirs) == list(range(PARTITIONS))

    poll_until([classic, modern], shared, 90, "the partitions to be shared by the two protocols")
    [desc] = admin.describe_groups([group])
    assert (desc.group_type, desc.protocol_type) == ("consumer", "consumer")
    kafka_admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    described = kafka_admin.describe_consumer_groups([group])[group].result(timeout=30)
    assert described.type.name == "CONSUMER"
    assert sorted(m.client_id for m in described.members) == ["classic", "modern"]

    # The classic group's offsets carried over: the new records are read once, by one member or the other.
    produce(cluster, topic, 8, prefix="w")
    poll_until([classic, modern], lambda: len(classic.values) + len(modern.values) == 28, 60, "the new records")
    assert sorted(classic.values[20:] + modern.values) == sorted(f"w{i}".encode() for i in range(8))
    classic.consumer.commit(asynchronous=False)  # a classic member commits with its member epoch as generation
    modern.consumer.commit(asynchronous=False)
    committed = classic.consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
    assert [tp.offset for tp in committed] == [7] * PARTITIONS

    # The member of the consumer protocol leaves: the group is a classic group again, and the classic member,
    # told to rejoin, takes every partition.
    modern.consumer.close()
    poll_until([classic], lambda: classic.owned() == list(range(PARTITIONS)), 90, "the classic member to own all")
    assert admin.describe_groups([group])[0].group_type == "classic"
    produce(cluster, topic, 4, prefix="x")
    poll_until([classic], lambda: len([v for v in classic.values if v.startswith(b"x")]) == 4, 60, "more records")
    classic.consumer.close()


def test_a_classic_member_joins_a_consumer_group_and_leaves_it(cluster: DevCluster, admin: Admin) -> None:
    """A classic librdkafka consumer joining a consumer group with members becomes a classic member of it: it shares
    the partitions, and its LeaveGroup gives them back to the consumer protocol member."""
    topic = new_topic(admin, cluster, 8)
    group = f"g-{topic}"
    modern = Member(cluster, group, topic, "modern")
    poll_until([modern], lambda: modern.owned() == list(range(PARTITIONS)), 60, "the consumer member to own all")
    classic = Member(cluster, group, topic, "classic", protocol="classic")

    def shared() -> bool:
        mine, theirs = classic.owned(), modern.owned()
        return len(mine) == len(theirs) == PARTITIONS // 2 and sorted(mine + theirs) == list(range(PARTITIONS))

    poll_until([classic, modern], shared, 90, "the partitions to be shared")
    assert admin.describe_groups([group])[0].group_type == "consumer"  # still a consumer group
    produce(cluster, topic, 8, prefix="w")
    wanted = {f"w{i}".encode() for i in range(8)}
    poll_until([classic, modern], lambda: wanted <= set(classic.values + modern.values), 60, "the new records")
    assert {v for v in classic.values if v.startswith(b"w")} == {f"w{i}".encode() for i in (2, 3, 6, 7)}
    classic.consumer.close()
    poll_until([modern], lambda: modern.owned() == list(range(PARTITIONS)), 60, "the partitions back")
    assert admin.describe_groups([group])[0].group_type == "consumer"
    modern.consumer.close()


def test_a_regular_expression_subscription_takes_topics_created_later(cluster: DevCluster, admin: Admin) -> None:
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    admin.create_topic(f"{prefix}-a", partitions=2, replication_factor=1)
    admin.create_topic(f"other-{prefix}", partitions=1, replication_factor=1)
    config = {
        "bootstrap.servers": cluster.kafka_bootstrap_servers,
        "group.id": f"g-{prefix}",
        "group.protocol": "consumer",
        "topic.metadata.refresh.interval.ms": 1000,
    }
    consumer = Consumer(config)
    try:
        consumer.subscribe([f"^{prefix}-.*"])  # librdkafka sends the pattern for the coordinator to match

        def owned() -> set[tuple[str, int]]:
            consumer.poll(0.1)
            return {(p.topic, p.partition) for p in consumer.assignment()}

        wait_for(lambda: owned() == {(f"{prefix}-a", 0), (f"{prefix}-a", 1)}, 60, 0, what="the matching topic")
        admin.create_topic(f"{prefix}-b", partitions=1, replication_factor=1)
        wait_for(lambda: (f"{prefix}-b", 0) in owned(), 60, 0, what="the topic created later")
        assert {t for t, _ in owned()} == {f"{prefix}-a", f"{prefix}-b"}
    finally:
        consumer.close()
