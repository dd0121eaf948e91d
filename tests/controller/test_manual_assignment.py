"""Manual replica assignments in CreateTopics and CreatePartitions: Kafka's checks, in Kafka's order, and partitions
that start with their active replicas in sync, led by the first of them."""

import pytest
from controller_images import apply, brokers, build

from odradek.client.errors import ErrorCode
from odradek.controller.topics import TopicRequest, create_partitions, create_topic


def manual(name: str, *assignments: tuple[int, ...]) -> TopicRequest:
    return TopicRequest(name, len(assignments), len(assignments[0]), assignments=assignments)


def test_a_topic_is_created_on_the_replicas_given_in_partition_order() -> None:
    image = build(brokers(1, 2, 3, 4))
    out = create_topic(image, manual("m", (3, 1), (4, 2), (1, 4)))
    assert out.error == ErrorCode.NONE, out.message
    parts = apply(image, out.records).topic("m").partitions
    assert [(list(p.replicas), list(p.isr), p.leader) for _, p in sorted(parts.items())] == [
        ([3, 1], [3, 1], 3),
        ([4, 2], [4, 2], 4),
        ([1, 4], [1, 4], 1),
    ]


def test_a_fenced_or_stopping_replica_starts_out_of_sync_and_the_first_active_one_leads() -> None:
    image = build(brokers(1, 2, 3, fenced=[1], shutting_down=[2]))
    out = create_topic(image, manual("m", (1, 2, 3)))
    assert out.error == ErrorCode.NONE, out.message
    p = apply(image, out.records).topic("m").partitions[0]
    assert (list(p.replicas), list(p.isr), p.leader) == ([1, 2, 3], [3], 3)


@pytest.mark.parametrize(
    ("assignments", "message"),
    [
        (((1, 2), ()), "The manual partition assignment includes an empty replica list."),
        (((1, 9),), "The manual partition assignment includes broker 9, but no such broker is registered."),
        (((2, 1, 2),), "The manual partition assignment includes the broker 2 more than once."),
        # Kafka checks the sorted list: the unregistered broker 0 comes before the duplicate 2.
        (((2, 0, 2),), "The manual partition assignment includes broker 0, but no such broker is registered."),
        (
            ((1, 2), (3,)),
            "The manual partition assignment includes a partition with 1 replica(s), but this is not consistent "
            "with previous partitions, which have 2 replica(s).",
        ),
    ],
)
def test_bad_assignments_are_refused_with_kafkas_message(
    assignments: tuple[tuple[int, ...], ...], message: str
) -> None:
    image = build(brokers(1, 2, 3))
    out = create_topic(image, TopicRequest("m", len(assignments), len(assignments[0]), assignments=assignments))
    assert (out.error, out.message, out.records) == (ErrorCode.INVALID_REPLICA_ASSIGNMENT, message, [])


def test_a_new_topic_partition_with_no_active_replica_is_refused() -> None:
    image = build(brokers(1, 2, 3, fenced=[1, 2]))
    out = create_topic(image, manual("m", (3,), (1,)))
    assert out.error == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert out.message == (
        "All brokers specified in the manual partition assignment for partition 1 are fenced or in controlled shutdown."
    )


def test_a_manual_assignment_still_has_its_configs_checked_and_the_per_broker_limit() -> None:
    image = build(brokers(1, 2))
    bad = create_topic(image, TopicRequest("m", 1, 1, configs={"nope": "1"}, assignments=((1,),)))
    assert bad.error == ErrorCode.INVALID_CONFIG
    full = create_topic(image, manual("m", *[(1,)] * 3), max_partitions_per_broker=2)
    assert full.error == ErrorCode.POLICY_VIOLATION and "broker 1 would hold 3" in full.message


def grown_image():
    image = build(brokers(1, 2, 3))
    return apply(image, create_topic(image, TopicRequest("t", 2, 2)).records)


def test_added_partitions_go_on_the_replicas_given() -> None:
    image = grown_image()
    out = create_partitions(image, "t", 4, assignments=[(3, 1), (2, 3)])
    assert out.error == ErrorCode.NONE, out.message
    parts = apply(image, out.records).topic("t").partitions
    assert [(list(parts[i].replicas), parts[i].leader) for i in (2, 3)] == [([3, 1], 3), ([2, 3], 2)]


@pytest.mark.parametrize(
    ("count", "assignments", "code", "message"),
    [
        (
            4,
            [(3, 1)],
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.",
        ),
        (
            3,
            [(3,)],
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes a partition with 1 replica(s), but this is not consistent "
            "with previous partitions, which have 2 replica(s).",
        ),
        (
            3,
            [(3, 7)],
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes broker 7, but no such broker is registered.",
        ),
    ],
)
def test_bad_added_assignments_are_refused(
    count: int, assignments: list[tuple[int, ...]], code: ErrorCode.ValueType, message: str
) -> None:
    out = create_partitions(grown_image(), "t", count, assignments=assignments)
    assert (out.error, out.message, out.records) == (code, message, [])


def test_added_partitions_with_no_active_replica_are_refused_as_kafka_refuses_them() -> None:
    image = build(brokers(1, 2, 3))
    image = apply(image, create_topic(image, TopicRequest("t", 1, 2)).records)
    image = apply(image, list(brokers(1, 2, 3, fenced=[2, 3])))
    out = create_partitions(image, "t", 2, assignments=[(2, 3)])
    assert (out.error, out.message) == (
        ErrorCode.INVALID_REPLICATION_FACTOR,
        "Unable to replicate the partition 2 time(s): All brokers are currently fenced or in controlled shutdown.",
    )
