"""KIP-932 share group administration on a real (one-broker) cluster: a share group config set with confluent-kafka's
AdminClient (IncrementalAlterConfigs on the GROUP resource) takes effect (``share.auto.offset.reset=earliest``: the
first consumer reads from the log start), and the offset admin APIs (DescribeShareGroupOffsets,
AlterShareGroupOffsets, DeleteShareGroupOffsets, raw requests at version 0: librdkafka 2.16 has no admin calls for
them) describe what a librdkafka share consumer acknowledged, reset an empty group's start offset so that its
records are delivered again from there, and delete its state."""

from __future__ import annotations

import socket
import struct
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from odradek.broker.kafka.share_offset_apis import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
)
from odradek.client.admin import Admin
from odradek.client.errors import ErrorCode
from odradek.deploy.local import DevCluster

from .conftest import start_cluster

pytestmark = pytest.mark.integration

NODE = {
    "offsets.topic.num.partitions": 1,
    "offsets.topic.replication.factor": 1,
    "share.coordinator.state.topic.num.partitions": 1,
    "share.coordinator.state.topic.replication.factor": 1,
    "share.coordinator.state.topic.min.isr": 1,
    "group.share.heartbeat.interval.ms": 1000,
    "group.share.session.timeout.ms": 15000,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    c = start_cluster(tmp_path_factory.mktemp("share-admin"), controllers=1, brokers=1, **NODE)
    yield c
    c.stop_all(timeout=10)


def kafka_call(cluster: DevCluster, request: Any, response_cls: Any) -> Any:
    """One request at version 0 to the only broker (the coordinator of every group), its answer decoded."""
    node = next(n for n in cluster.nodes if n.kafka_port)
    body = request.encode(version=0)
    key = request.API_KEY
    header = struct.pack(">hhih", key, 0, 7, 4) + b"test" + b"\x00"  # request header v2, no tagged fields
    with socket.create_connection((node.host, node.kafka_port), timeout=20) as sock:
        sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        with sock.makefile("rb") as f:
            (size,) = struct.unpack(">i", f.read(4))
            frame = f.read(size)
    assert frame[:5] == struct.pack(">i", 7) + b"\x00"  # response header v1
    return response_cls.decode(frame[5:], version=0)


def describe(cluster: DevCluster, group: str, topic: str | None) -> tuple[int, dict[int, int]]:
    R = DescribeShareGroupOffsetsRequest
    Group = R.DescribeShareGroupOffsetsRequestGroup
    topics = None if topic is None else [Group.DescribeShareGroupOffsetsRequestTopic(topic_name=topic, partitions=[0])]
    answer = kafka_call(cluster, R(groups=[Group(group_id=group, topics=topics)]), DescribeShareGroupOffsetsResponse)
    [g] = answer.groups
    offsets = {p.partition_index: p.start_offset for t in g.topics for p in t.partitions if p.error_code == 0}
    return g.error_code, offsets


def alter(cluster: DevCluster, group: str, topic: str, offset: int) -> Any:
    R = AlterShareGroupOffsetsRequest
    T = R.AlterShareGroupOffsetsRequestTopic
    partition = T.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=offset)
    request = R(group_id=group, topics=[T(topic_name=topic, partitions=[partition])])
    return kafka_call(cluster, request, AlterShareGroupOffsetsResponse)


def delete(cluster: DevCluster, group: str, topic: str) -> Any:
    R = DeleteShareGroupOffsetsRequest
    request = R(group_id=group, topics=[R.DeleteShareGroupOffsetsRequestTopic(topic_name=topic)])
    return kafka_call(cluster, request, DeleteShareGroupOffsetsResponse)


def consume(cluster: DevCluster, group: str, topic: str, count: int, timeout: float = 60) -> list[tuple[int, int]]:
    """(offset, delivery count) of the first ``count`` records a new share consumer gets, each accepted; it then
    closes (its acknowledgements committed first)."""
    consumer = ShareConsumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap_servers,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
    )
    consumer.subscribe([topic])
    got: list[tuple[int, int]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            for m in consumer.poll(0.5):
                if m.error() is None:
                    got.append((m.offset(), m.delivery_count()))
                    consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        consumer.commit_sync()
    finally:
        consumer.close()
    return sorted(got)


def until_empty(cluster: DevCluster, action: Any, timeout: float = 40) -> Any:
    """``action()``'s answer once the group is empty (the consumer's leave may still be under way)."""
    deadline = time.monotonic() + timeout
    while True:
        answer = action()
        if answer.error_code != ErrorCode.NON_EMPTY_GROUP or time.monotonic() > deadline:
            return answer
        time.sleep(0.5)


def test_share_group_config_and_offset_admin(cluster: DevCluster) -> None:
    topic, group = f"share-admin-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": cluster.admin_servers, "request.timeout.ms": 10000}) as admin:
        admin.create_topic(topic, partitions=1, replication_factor=1)
    kadmin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    for future in kadmin.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])]
    ).values():
        future.result(timeout=30)
    refused = ConfigEntry("share.isolation.level", "serializable", incremental_operation=AlterConfigOpType.SET)
    with pytest.raises(Exception, match=r"share\.isolation\.level"):
        for future in kadmin.incremental_alter_configs(
            [ConfigResource(ResourceType.GROUP, group, incremental_configs=[refused])]
        ).values():
            future.result(timeout=30)
    producer = Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "acks": "all"})
    for i in range(10):
        producer.produce(topic, b"v%d" % i, partition=0)
    assert producer.flush(30) == 0

    # earliest (the group config): the records produced before the group's first fetch are delivered.
    assert consume(cluster, group, topic, 10) == [(o, 1) for o in range(10)]
    assert describe(cluster, group, None) == (0, {0: 10})  # every record acknowledged: the start offset is the end
    assert describe(cluster, "no-such-group", None)[0] == ErrorCode.GROUP_ID_NOT_FOUND

    altered = until_empty(cluster, lambda: alter(cluster, group, topic, 4))
    assert altered.error_code == 0 and [p.error_code for t in altered.responses for p in t.partitions] == [0]
    assert describe(cluster, group, topic) == (0, {0: 4})
    assert consume(cluster, group, topic, 6) == [(o, 1) for o in range(4, 10)]  # delivered again from there

    deleted = until_empty(cluster, lambda: delete(cluster, group, topic))
    assert deleted.error_code == 0 and [t.error_code for t in deleted.responses] == [0]
    assert describe(cluster, group, None) == (0, {})  # the group has no state of the topic any more
    assert describe(cluster, group, topic) == (0, {0: -1})
    missing = alter(cluster, group, "no-such-topic", 0)
    assert [p.error_code for t in missing.responses for p in t.partitions] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
