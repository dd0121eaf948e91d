"""CreatePartitions decisions: a topic only grows, new partitions are placed as at creation, and nothing else
changes."""

import pytest
from controller_images import apply, brokers, build

from odradek.client.common.topic_rules import OFFSETS_TOPIC
from odradek.client.errors import ErrorCode
from odradek.controller.placement import BrokerSlot, assign_replicas
from odradek.controller.topics import TopicRequest, create_partitions, create_topic, internal_topic_request


def with_topic(partitions: int = 3, rf: int = 2, ids: tuple[int, ...] = (1, 2, 3)):
    image = build(brokers(*ids))
    return apply(image, create_topic(image, TopicRequest("t", partitions, rf)).records)


def test_new_partitions_continue_the_creation_placement_and_keep_the_old_ones() -> None:
    image = with_topic(3, 2)
    before = dict(image.topic("t").partitions)
    out = create_partitions(image, "t", 7)
    assert out.error == ErrorCode.NONE, out.message
    grown = apply(image, out.records)
    parts = grown.topic("t").partitions
    assert sorted(parts) == list(range(7))
    assert {i: parts[i] for i in range(3)} == before  # existing partitions untouched
    # Placed as a 7-partition topic would have been at creation, with the topic's replication factor.
    slots = [BrokerSlot(b) for b in (1, 2, 3)]
    assert [list(parts[i].replicas) for i in range(3, 7)] == assign_replicas("t", 4, 2, slots, first_partition=3)
    assert [list(parts[i].replicas) for i in range(7)] == assign_replicas("t", 7, 2, slots)
    assert all(parts[i].isr == parts[i].replicas and parts[i].leader == parts[i].replicas[0] for i in range(3, 7))
    assert grown.topic("t").topic_id == image.topic("t").topic_id


@pytest.mark.parametrize("count", [3, 2, 0, -1])
def test_fewer_or_equal_counts_are_refused(count: int) -> None:
    out = create_partitions(with_topic(3), "t", count)
    assert (out.error, out.records) == (ErrorCode.INVALID_PARTITIONS, [])
    assert f"topic 't' has 3 partitions: the new count must be larger, not {count}" in out.message


def test_unknown_and_internal_topics_are_refused() -> None:
    image = with_topic()
    out = create_partitions(image, "nope", 5)
    assert (out.error, out.records) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])
    image = apply(image, create_topic(image, internal_topic_request(image, OFFSETS_TOPIC, 3, 3), internal=True).records)
    out = create_partitions(image, OFFSETS_TOPIC, 10)
    assert (out.error, out.records) == (ErrorCode.INVALID_TOPIC_EXCEPTION, [])
    assert "internal topic" in out.message


def test_too_few_live_brokers_for_the_replication_factor() -> None:
    image = with_topic(2, 3)
    image = apply(image, brokers(3, fenced=[3]))  # broker 3 re-registers fenced
    out = create_partitions(image, "t", 4)
    assert (out.error, out.records) == (ErrorCode.INVALID_REPLICATION_FACTOR, [])


def test_the_partition_limit_applies() -> None:
    image = with_topic(3, 2)  # 2 replicas on each broker
    out = create_partitions(image, "t", 6, max_partitions_per_broker=3)
    assert (out.error, out.records) == (ErrorCode.POLICY_VIOLATION, [])
    assert "max.partitions.per.broker=3" in out.message
    assert create_partitions(image, "t", 4, max_partitions_per_broker=3).error == ErrorCode.NONE
