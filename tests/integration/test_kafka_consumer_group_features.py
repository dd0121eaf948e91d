"""KIP-848 consumer group features with Kafka clients on a real cluster (one controller, two brokers in racks r1 and
r2, the authorizer on with ``allow.everyone.if.no.acl.found``, so only resources with ACLs are restricted):

- group configs (Kafka's GROUP config resource): set, described and refused with confluent-kafka's and
  kafka-python's admin clients, and applied by the coordinator to the group's heartbeats;
- rack-aware assignment: librdkafka consumers with ``client.rack`` get the partitions whose replica is in their rack;
- a regular expression subscription under the authorizer: the topics the member may not describe are left out, and
  an ACL change is taken at a following heartbeat.
"""

from __future__ import annotations

import time
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka.admin import ConfigResource as KafkaPythonConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from odradek.broker.kafka.consumer_group_apis import ConsumerGroupHeartbeatRequest
from odradek.deploy.local import DevCluster

from .conftest import FAST, start_created, wait_for

pytestmark = pytest.mark.integration

RACKS = {2: "r1", 3: "r2"}  # broker id -> rack


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    overrides = {
        **FAST,
        "authorizer.class.name": "odradek",
        "allow.everyone.if.no.acl.found": True,
        "group.consumer.min.session.timeout.ms": 10000,
    }
    c = DevCluster.create(tmp_path_factory.mktemp("kip848-features"), 1, 2, overrides=overrides)
    for node in c.nodes:
        if node.node_id in RACKS:  # broker.rack, one per broker
            path = Path(node.config)
            config = tomllib.loads(path.read_text())
            config["broker.rack"] = RACKS[node.node_id]
            path.write_text(tomli_w.dumps(config))
    start_created(c)
    yield c
    c.stop_all(timeout=10)


@pytest.fixture(scope="module")
def kafka_admin(cluster: DevCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})


@pytest.fixture(scope="module")
def python_admin(cluster: DevCluster) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap_servers, request_timeout_ms=20000)
    yield a
    a.close()


def create_topic(admin: AdminClient, name: str, replicas: list[list[int]]) -> None:
    for future in admin.create_topics([NewTopic(name, len(replicas), replica_assignment=replicas)]).values():
        future.result(timeout=30)


def group_config(admin: AdminClient, group: str, **configs: str | None) -> None:
    """IncrementalAlterConfigs of a group: SET each value given, DELETE each None."""
    entries = [
        ConfigEntry(
            name.replace("_", "."),
            value,
            incremental_operation=AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE,
        )
        for name, value in configs.items()
    ]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def raw_heartbeat(admin: KafkaAdminClient, group: str, topic: str) -> Any:
    """A ConsumerGroupHeartbeat joining ``group`` (v1: the member makes its id), sent to the group's coordinator."""
    request = ConsumerGroupHeartbeatRequest(
        version=1,
        group_id=group,
        member_id=str(uuid.uuid4()),
        member_epoch=0,
        instance_id=None,
        rack_id=None,
        rebalance_timeout_ms=30000,
        subscribed_topic_names=[topic],
        subscribed_topic_regex=None,
        server_assignor=None,
        topic_partitions=[],
    )

    async def call() -> Any:
        node = await admin._find_coordinator_id(group)
        return await admin._manager.send(request, node_id=node)

    return admin._manager.run(call)


def test_group_configs_are_set_described_refused_and_applied(
    cluster: DevCluster, kafka_admin: AdminClient, python_admin: KafkaAdminClient
) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    topic = f"cfg-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_admin, topic, [[2]])
    group_config(kafka_admin, group, consumer_heartbeat_interval_ms="7000", consumer_session_timeout_ms="20000")
    described = kafka_admin.describe_configs([ConfigResource(ResourceType.GROUP, group)])
    [configs] = [f.result(timeout=30) for f in described.values()]
    share_defaults = {
        "share.session.timeout.ms": "45000",
        "share.heartbeat.interval.ms": "5000",
        "share.record.lock.duration.ms": "30000",
        "share.auto.offset.reset": "latest",
        "share.isolation.level": "read_uncommitted",
    }
    assert {n: (c.value, c.source) for n, c in configs.items()} == {
        "consumer.heartbeat.interval.ms": ("7000", 8),  # GROUP_CONFIG
        "consumer.session.timeout.ms": ("20000", 8),
        **{n: (v, 5) for n, v in share_defaults.items()},  # DEFAULT_CONFIG
    }
    # kafka-python's admin client names the GROUP resource type 32 as Kafka does. It asks any broker, which answers
    # from its copy of the metadata: a broker other than the one that forwarded the change may learn it a moment
    # after the change was acknowledged (Kafka's brokers too), so the answer is awaited.
    resource = KafkaPythonConfigResource(ConfigResourceType.GROUP, group)
    modified = {"consumer.heartbeat.interval.ms": "7000", "consumer.session.timeout.ms": "20000"}
    answers: list[dict[str, str]] = []
    wait_for(
        lambda: (
            answers.append(
                {name: c["value"] for name, c in python_admin.describe_configs([resource])["group"][group].items()}
            )
            or answers[-1] == modified
        ),  # kafka-python lists only the modified ones by default
        30,
        0.2,
        what="kafka-python's answer to list the modified configs",
    )
    # Unknown names and values out of the brokers' bounds are refused with Kafka's error.
    with pytest.raises(KafkaException, match=r"Unknown group config name: consumer\.max\.poll\.records"):
        group_config(kafka_admin, group, consumer_max_poll_records="5")
    with pytest.raises(KafkaException, match=r"less than or equal to group\.consumer\.max\.session\.timeout\.ms"):
        group_config(kafka_admin, group, consumer_session_timeout_ms="600000")
    # The coordinator tells the group's members the group's heartbeat interval; removed, the broker's applies.
    wait_for(lambda: raw_heartbeat(python_admin, group, topic).heartbeat_interval_ms == 7000, 30, 0.5, what="7 s")
    group_config(kafka_admin, group, consumer_heartbeat_interval_ms=None)
    wait_for(lambda: raw_heartbeat(python_admin, group, topic).heartbeat_interval_ms == 5000, 30, 0.5, what="5 s")


def test_members_get_the_partitions_of_their_rack(cluster: DevCluster, kafka_admin: AdminClient) -> None:
    topic = f"racks-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_admin, topic, [[2], [3], [2], [3]])  # partitions 0 and 2 in r1, 1 and 3 in r2
    group = f"g-{topic}"
    consumers = {
        rack: Consumer(
            {
                "bootstrap.servers": cluster.kafka_bootstrap_servers,
                "group.id": group,
                "group.protocol": "consumer",
                "client.rack": rack,
                "client.id": rack,
            }
        )
        for rack in ("r2", "r1")
    }
    try:
        for c in consumers.values():
            c.subscribe([topic])

        def placed() -> dict[str, list[int]]:
            for c in consumers.values():
                c.poll(0.1)
            return {rack: sorted(p.partition for p in c.assignment()) for rack, c in consumers.items()}

        wait_for(lambda: placed() == {"r1": [0, 2], "r2": [1, 3]}, 90, 0, what="each rack's partitions")
        described = kafka_admin.describe_consumer_groups([group])[group].result(timeout=30)
        assert described.partition_assignor == "uniform"
    finally:
        for c in consumers.values():
            c.close()


def test_a_regular_expression_leaves_out_topics_the_member_may_not_describe(
    cluster: DevCluster, kafka_admin: AdminClient
) -> None:
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    create_topic(kafka_admin, f"{prefix}-open", [[2]])
    create_topic(kafka_admin, f"{prefix}-closed", [[3]])
    deny = AclBinding(
        ResourceType.TOPIC,
        f"{prefix}-closed",
        ResourcePatternType.LITERAL,
        "User:ANONYMOUS",
        "*",
        AclOperation.DESCRIBE,
        AclPermissionType.DENY,
    )
    for future in kafka_admin.create_acls([deny]).values():
        future.result(timeout=30)
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap_servers,
            "group.id": f"g-{prefix}",
            "group.protocol": "consumer",
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    try:
        consumer.subscribe([f"^{prefix}-.*"])

        def owned() -> set[str]:
            consumer.poll(0.1)
            return {p.topic for p in consumer.assignment()}

        wait_for(lambda: owned() == {f"{prefix}-open"}, 60, 0, what="the topic it may describe")
        deadline = time.monotonic() + 8  # a few heartbeats: still not the denied topic
        while time.monotonic() < deadline:
            assert owned() == {f"{prefix}-open"}
        # The deny goes: at a following heartbeat the expression resolves to both topics.
        gone = AclBindingFilter(
            ResourceType.TOPIC,
            f"{prefix}-closed",
            ResourcePatternType.LITERAL,
            None,
            None,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        for future in kafka_admin.delete_acls([gone]).values():
            future.result(timeout=30)
        wait_for(lambda: owned() == {f"{prefix}-open", f"{prefix}-closed"}, 60, 0, what="the topic now allowed")
    finally:
        consumer.close()
