"""kafka-python's KafkaAdminClient deletes a group's offsets (OffsetDelete), sees a deleted topic's offsets go, and
inspects transactions (ListTransactions, DescribeTransactions, DescribeProducers: what ``kafka-transactions.sh``
runs) through the Kafka listener of a real cluster, against a librdkafka consumer group and a librdkafka transaction
left open."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import kafka.errors as kerrors
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin._transactions import TransactionState
from kafka.structs import OffsetAndMetadata

from odradek.client.admin import Admin
from odradek.deploy.local import DevCluster

from .conftest import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.odradek_cluster(controllers=1, brokers=2)]


@pytest.fixture
def admin(odradek_cluster: DevCluster) -> Iterator[Admin]:
    a = Admin({"bootstrap.servers": odradek_cluster.admin_servers, "request.timeout.ms": 10000})
    yield a
    a.close()


def new_topic(admin: Admin, kafka_admin: KafkaAdminClient, partitions: int = 2) -> str:
    """A topic every broker's metadata has (OffsetDelete checks partitions against the coordinator's)."""
    name = f"ga-{uuid.uuid4().hex[:8]}"
    admin.create_topic(name, partitions, 2)
    wait_for(lambda: name in kafka_admin.list_topics(), 10, what=f"{name} in the metadata")
    return name


def committed(kafka_admin: KafkaAdminClient, group: str) -> set[TopicPartition]:
    return set(kafka_admin.list_group_offsets(group)[group])


def test_offset_delete(odradek_cluster: DevCluster, admin: Admin, kafka_admin: KafkaAdminClient) -> None:
    """An empty group's offsets go; a partition the metadata lacks is UNKNOWN_TOPIC_OR_PARTITION; while a member
    subscribes to a topic its offsets stay (GROUP_SUBSCRIBED_TO_TOPIC) and another topic's go; an unknown group is
    GROUP_ID_NOT_FOUND."""
    name, other = new_topic(admin, kafka_admin), new_topic(admin, kafka_admin, partitions=1)
    idle = f"idle-{uuid.uuid4().hex[:6]}"
    tp0, tp1 = TopicPartition(name, 0), TopicPartition(name, 1)
    offsets = {tp0: OffsetAndMetadata(5, "", -1), tp1: OffsetAndMetadata(7, "", -1)}
    # The first group request of a cluster has the offsets topic created: COORDINATOR_NOT_AVAILABLE until it is.
    wait_for(lambda: kafka_admin.alter_group_offsets(idle, offsets), 30, what="a group coordinator")
    assert committed(kafka_admin, idle) == {tp0, tp1}

    missing = [TopicPartition(name, 9), TopicPartition(f"none-{uuid.uuid4().hex[:6]}", 0)]
    result = kafka_admin.delete_group_offsets(idle, [tp0, *missing])
    assert result == {
        tp0: kerrors.NoError,
        missing[0]: kerrors.UnknownTopicOrPartitionError,
        missing[1]: kerrors.UnknownTopicOrPartitionError,
    }
    assert committed(kafka_admin, idle) == {tp1}

    with pytest.raises(kerrors.GroupIdNotFoundError):
        kafka_admin.delete_group_offsets(f"never-{uuid.uuid4().hex[:6]}", [tp0])

    live = f"live-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": odradek_cluster.kafka_bootstrap_servers, "group.id": live})
    try:
        consumer.subscribe([name])
        wait_for(lambda: (consumer.poll(0.2), consumer.assignment())[1], 30, what="the member's assignment")
        consumer.commit(offsets=[KafkaTopicPartition(name, 0, 3), KafkaTopicPartition(other, 0, 4)], asynchronous=False)
        other0 = TopicPartition(other, 0)
        result = kafka_admin.delete_group_offsets(live, [tp0, other0])
        assert result == {tp0: kerrors.GroupSubscribedToTopicError, other0: kerrors.NoError}
        assert committed(kafka_admin, live) == {tp0}
    finally:
        consumer.close()


def test_a_deleted_topic_takes_its_offsets_along(
    odradek_cluster: DevCluster, admin: Admin, kafka_admin: KafkaAdminClient
) -> None:
    """Deleting a topic drops every group's offsets of it (Kafka's onPartitionsDeleted), so a topic created again
    under its name does not take them up; the group's other offsets stay."""
    name, other = new_topic(admin, kafka_admin), new_topic(admin, kafka_admin, partitions=1)
    group = f"gone-{uuid.uuid4().hex[:6]}"
    offsets = {
        TopicPartition(name, 0): OffsetAndMetadata(5, "", -1),
        TopicPartition(other, 0): OffsetAndMetadata(6, "", -1),
    }
    wait_for(lambda: kafka_admin.alter_group_offsets(group, offsets), 30, what="a group coordinator")
    admin.delete_topic(name)
    wait_for(lambda: committed(kafka_admin, group) == {TopicPartition(other, 0)}, 30, what="the offsets dropped")
    admin.create_topic(name, 2, 2)
    wait_for(lambda: name in kafka_admin.list_topics(), 10, what=f"{name} again")
    assert committed(kafka_admin, group) == {TopicPartition(other, 0)}


def test_an_open_transaction_listed_and_described(
    odradek_cluster: DevCluster, admin: Admin, kafka_admin: KafkaAdminClient
) -> None:
    """A librdkafka transaction with records on one partition, left open: its coordinator (and only it) lists it,
    filters select it or not, DescribeTransactions gives its state, timeout and partition, and the partition's
    leader describes its producer with the open transaction's first offset. Committed, it is CompleteCommit with
    the same start time."""
    name = new_topic(admin, kafka_admin)
    txn_id = f"open-{uuid.uuid4().hex[:6]}"
    started = int(time.time() * 1000)
    producer = Producer(
        {
            "bootstrap.servers": odradek_cluster.kafka_bootstrap_servers,
            "transactional.id": txn_id,
            "transaction.timeout.ms": 120_000,
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(name, b"v%d" % i, partition=0)
    assert producer.flush(30) == 0

    def listed(**filters: object) -> dict[int, list]:
        by_broker = kafka_admin.list_transactions(**filters)
        return {b: [t for t in txns if t.transactional_id == txn_id] for b, txns in by_broker.items()}

    by_broker = wait_for(lambda: (found := listed()) and any(found.values()) and found, 10, what="the listing")
    (coordinator,) = [b for b, txns in by_broker.items() if txns]  # every broker answers for its own coordinators
    (listing,) = by_broker[coordinator]
    assert listing.state is TransactionState.ONGOING
    pid = listing.producer_id
    assert listed(state_filters=["Ongoing"], producer_id_filters=[pid])[coordinator] == [listing]
    assert listed(state_filters=["CompleteCommit"])[coordinator] == []
    assert listed(state_filters=["NoSuchState"])[coordinator] == []  # as Kafka: an unknown state matches nothing
    assert listed(duration_filter_ms=1)[coordinator] == [listing]
    assert listed(duration_filter_ms=3_600_000)[coordinator] == []

    described = kafka_admin.describe_transactions([txn_id])[txn_id]
    assert (described.coordinator_id, described.state, described.producer_id) == (
        coordinator,
        TransactionState.ONGOING,
        pid,
    )
    assert described.transaction_timeout_ms == 120_000
    assert started - 5_000 <= described.transaction_start_time_ms <= int(time.time() * 1000)
    assert described.topic_partitions == {TopicPartition(name, 0)}
    with pytest.raises(kerrors.TransactionalIdNotFoundError):
        kafka_admin.describe_transactions([f"never-{uuid.uuid4().hex[:6]}"])

    tp0 = TopicPartition(name, 0)
    producers = kafka_admin.describe_producers([tp0, TopicPartition(name, 1)])
    (state,) = producers[tp0].active_producers
    assert (state.producer_id, state.producer_epoch) == (pid, described.producer_epoch)
    assert (state.current_transaction_start_offset, state.last_sequence) == (0, 2)
    assert producers[TopicPartition(name, 1)].active_producers == []

    producer.commit_transaction(30)  # answered once PrepareCommit is written; the markers follow
    done = wait_for(
        lambda: (
            (d := kafka_admin.describe_transactions([txn_id])[txn_id]).state is TransactionState.COMPLETE_COMMIT and d
        ),
        10,
        what="CompleteCommit",
    )
    assert done.topic_partitions == set()
    assert done.transaction_start_time_ms == described.transaction_start_time_ms  # kept, as Kafka keeps it
    assert [t.producer_id for t in listed(state_filters=["CompleteCommit"])[coordinator]] == [pid]
    wait_for(
        lambda: kafka_admin.describe_producers([tp0])[tp0].active_producers[0].current_transaction_start_offset == -1,
        10,
        what="the commit marker on the partition",
    )
