"""Manual replica assignments through real Kafka clients: CreateTopics and CreatePartitions with the replicas of each
partition given (``kafka-topics.sh --replica-assignment``, confluent-kafka's and kafka-python's admin clients), the
partitions placed exactly there, and Kafka's refusals for assignments it refuses."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka import KafkaAdminClient
from kafka.admin import NewPartitions as KpNewPartitions
from kafka.admin import NewTopic as KpNewTopic
from kafka.errors import InvalidReplicationAssignmentError

from odradek.client.admin import Admin
from odradek.deploy.local import DevCluster, running_cluster

from .conftest import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster() -> Iterator[DevCluster]:
    with running_cluster(controllers=1, brokers=2) as c:
        yield c


@pytest.fixture(scope="module")
def ids(cluster: DevCluster) -> tuple[int, int]:
    """The two brokers' node ids."""
    a, b = sorted(n.node_id for n in cluster.nodes if "broker" in n.roles)
    return a, b


@pytest.fixture(scope="module")
def admin(cluster: DevCluster) -> Iterator[Admin]:
    with Admin({"bootstrap.servers": cluster.admin_servers, "request.timeout.ms": 10000}) as a:
        yield a


def placement(admin: Admin, name: str, count: int) -> list[list[int]]:
    """Each partition's replicas once ``count`` partitions are visible."""

    def described() -> list[list[int]] | None:
        if name not in admin.list_topics():
            return None
        parts = admin.describe_topic(name).partitions
        return [list(p.replicas) for p in sorted(parts, key=lambda p: p.partition)] if len(parts) == count else None

    return wait_for(described, 30, what=f"{count} partitions of {name}")


def test_librdkafka_creates_a_topic_and_partitions_on_the_replicas_given(
    cluster: DevCluster, admin: Admin, ids: tuple[int, int]
) -> None:
    a, b = ids
    client = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    name = f"manual-{uuid.uuid4().hex[:8]}"
    client.create_topics([NewTopic(name, 3, replica_assignment=[[b, a], [a, b], [b, a]])])[name].result(30)
    assert placement(admin, name, 3) == [[b, a], [a, b], [b, a]]
    client.create_partitions([NewPartitions(name, 5, replica_assignment=[[a, b], [a, b]])])[name].result(30)
    assert placement(admin, name, 5) == [[b, a], [a, b], [b, a], [a, b], [a, b]]


def test_librdkafka_gets_kafkas_refusals(cluster: DevCluster, ids: tuple[int, int]) -> None:
    a, b = ids
    client = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    name = f"manual-{uuid.uuid4().hex[:8]}"
    with pytest.raises(KafkaException) as bad:
        client.create_topics([NewTopic(name, 1, replica_assignment=[[a, 77]])])[name].result(30)
    assert bad.value.args[0].name() == "INVALID_REPLICA_ASSIGNMENT"
    assert "broker 77, but no such broker is registered" in bad.value.args[0].str()
    client.create_topics([NewTopic(name, 1, replica_assignment=[[a]])])[name].result(30)
    with pytest.raises(KafkaException) as uneven:
        client.create_partitions([NewPartitions(name, 2, replica_assignment=[[a, b]])])[name].result(30)
    assert uneven.value.args[0].name() == "INVALID_REPLICA_ASSIGNMENT"
    assert "not consistent with previous partitions, which have 1 replica(s)" in uneven.value.args[0].str()


def test_kafka_python_creates_a_topic_and_partitions_on_the_replicas_given(
    cluster: DevCluster, admin: Admin, ids: tuple[int, int]
) -> None:
    a, b = ids
    client = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap_servers, request_timeout_ms=30000)
    try:
        name = f"manual-{uuid.uuid4().hex[:8]}"
        topic = KpNewTopic(name, num_partitions=-1, replication_factor=-1, replica_assignments={1: [a], 0: [b]})
        client.create_topics([topic])
        assert placement(admin, name, 2) == [[b], [a]]
        client.create_partitions({name: KpNewPartitions(3, new_assignments=[[b]])})
        assert placement(admin, name, 3) == [[b], [a], [b]]
        with pytest.raises(InvalidReplicationAssignmentError):
            client.create_partitions({name: KpNewPartitions(5, new_assignments=[[a]])})  # two more, one given
    finally:
        client.close()
