"""Read-your-writes on a real cluster (a controller, two brokers): an admin write a broker answered is in that
broker's next answer, through its gRPC Admin and through its Kafka listener (kafka-python's KafkaAdminClient).

A broker forwards writes to the active controller, which answers once they are committed; without waiting for
its own image to replay them, the broker answered the read that followed from before the write (1 time in 4 for
kafka-python's own integration suite).
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from odradek.client.errors import ErrorCode
from odradek.deploy.local import DevCluster
from odradek.proto import admin_pb2 as apb
from odradek.proto import admin_pb2_grpc

from .conftest import start_cluster

pytestmark = pytest.mark.integration

BROKERS = (2, 3)  # node 1 is the controller
ROUNDS = 30
TIMEOUT = 10


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    c = start_cluster(tmp_path_factory.mktemp("read-your-writes"), controllers=1, brokers=len(BROKERS))
    yield c
    c.stop_all(timeout=10)


@pytest.fixture(scope="module")
def stubs(cluster: DevCluster) -> Iterator[dict[int, admin_pb2_grpc.AdminStub]]:
    channels = {b: grpc.insecure_channel(f"127.0.0.1:{cluster.node(b).broker_port}") for b in BROKERS}
    yield {b: admin_pb2_grpc.AdminStub(c) for b, c in channels.items()}
    for c in channels.values():
        c.close()


def binding(i: int) -> apb.AclBinding:
    return apb.AclBinding(
        resource_type=apb.ACL_RESOURCE_TYPE_TOPIC,
        resource_name=f"ryw-{i}",
        pattern_type=apb.ACL_PATTERN_TYPE_LITERAL,
        principal="User:alice",
        host="*",
        operation=apb.ACL_OPERATION_READ,
        permission_type=apb.ACL_PERMISSION_TYPE_ALLOW,
    )


def test_an_acl_created_through_a_broker_is_described_by_it(stubs: dict[int, admin_pb2_grpc.AdminStub]) -> None:
    missed = []
    for i in range(ROUNDS):
        stub = stubs[BROKERS[i % len(BROKERS)]]
        created = stub.CreateAcls(apb.CreateAclsRequest(creations=[binding(i)]), timeout=TIMEOUT)
        assert created.error == ErrorCode.NONE and [r.error for r in created.results] == [ErrorCode.NONE]
        acl_filter = apb.AclBindingFilter(resource_name=f"ryw-{i}")
        described = stub.DescribeAcls(apb.DescribeAclsRequest(filter=acl_filter), timeout=TIMEOUT)
        if list(described.bindings) != [binding(i)]:
            missed.append(i)
    assert not missed, f"{len(missed)} of {ROUNDS} creations were not in the same broker's next DescribeAcls"


def test_a_topic_config_altered_through_a_broker_is_described_by_it(
    stubs: dict[int, admin_pb2_grpc.AdminStub],
) -> None:
    topic = apb.CreatableTopic(name="ryw-configs", num_partitions=1, replication_factor=1)
    created = stubs[BROKERS[0]].CreateTopics(apb.CreateTopicsRequest(topics=[topic]), timeout=TIMEOUT)
    assert created.topics[0].error == ErrorCode.NONE
    missed = []
    for i in range(ROUNDS):
        stub = stubs[BROKERS[i % len(BROKERS)]]
        value = str(60_000 + i)
        change = apb.AlterableConfig(name="retention.ms", op=apb.SET, value=value)
        alter = apb.IncrementalAlterConfigsRequest(topics=[apb.AlterTopicConfigs(topic=topic.name, configs=[change])])
        assert [r.error for r in stub.IncrementalAlterConfigs(alter, timeout=TIMEOUT).results] == [ErrorCode.NONE]
        describe = apb.DescribeConfigsRequest(topics=[topic.name], config_names=["retention.ms"])
        [described] = stub.DescribeConfigs(describe, timeout=TIMEOUT).topics
        if [c.value for c in described.configs] != [value]:
            missed.append(i)
    assert not missed, f"{len(missed)} of {ROUNDS} alterations were not in the same broker's next DescribeConfigs"


def test_an_acl_created_through_a_kafka_listener_is_described_by_it(cluster: DevCluster) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import ACL, ACLFilter, ACLOperation, ACLPermissionType, ResourcePattern, ResourceType

    broker = cluster.node(BROKERS[0])
    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{broker.kafka_port}", request_timeout_ms=TIMEOUT * 1000)
    try:
        missed = []
        rounds = 10
        for i in range(rounds):
            pattern = ResourcePattern(ResourceType.TOPIC, f"ryw-kafka-{i}")
            acl = ACL("User:bob", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW, pattern)
            assert admin.create_acls([acl])["failed"] == []
            acl_filter = ACLFilter("User:bob", "*", ACLOperation.ANY, ACLPermissionType.ANY, pattern)
            found, _error = admin.describe_acls(acl_filter)
            if found != [acl]:
                missed.append(i)
        assert not missed, f"{len(missed)} of {rounds} creations were not in the next DescribeAcls"
    finally:
        admin.close()
