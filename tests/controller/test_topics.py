"""Topic creation: settings odradek cannot honour yet are refused, never stored and ignored; the others stored."""

import pytest
from controller_images import apply, brokers, build

from odradek.client.errors import ErrorCode
from odradek.controller.topics import TopicRequest, create_topic


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"file.delete.delay.ms": "0"}, "topic config 'file.delete.delay.ms' is not supported yet"),
        ({"cleanup.policy": "compact,shred"}, "invalid value 'compact,shred' for topic config 'cleanup.policy'"),
        ({"cleanup.policy": "compact,,delete"}, "invalid value 'compact,,delete' for topic config 'cleanup.policy'"),
        ({"delete.retention.ms": "-1"}, "invalid value '-1' for topic config 'delete.retention.ms'"),
        ({"min.compaction.lag.ms": "soon"}, "invalid value 'soon' for topic config 'min.compaction.lag.ms'"),
        ({"max.compaction.lag.ms": "0"}, "invalid value '0' for topic config 'max.compaction.lag.ms'"),
        ({"min.cleanable.dirty.ratio": "2"}, "invalid value '2' for topic config 'min.cleanable.dirty.ratio'"),
    ],
)
def test_unsupported_and_malformed_topic_configs_are_refused(configs: dict[str, str], message: str) -> None:
    image = build(brokers(1, 2, 3))
    out = create_topic(image, TopicRequest("t", 1, 1, configs))
    assert (out.error, out.records) == (ErrorCode.INVALID_CONFIG, [])
    assert message in out.message


@pytest.mark.parametrize(
    "configs",
    [
        {"cleanup.policy": "delete"},
        {"cleanup.policy": "compact"},
        {"cleanup.policy": "compact,delete"},
        {"cleanup.policy": ""},  # neither: every record is kept (Kafka accepts an empty list)
        {
            "cleanup.policy": "compact",
            "delete.retention.ms": "0",
            "min.compaction.lag.ms": "10",
            "max.compaction.lag.ms": "60000",
            "min.cleanable.dirty.ratio": "0.1",
        },
    ],
)
def test_every_cleanup_policy_and_compaction_setting_is_accepted(configs: dict[str, str]) -> None:
    image = build(brokers(1, 2, 3))
    out = create_topic(image, TopicRequest("t", 1, 1, configs))
    assert out.error == ErrorCode.NONE and out.records
    assert apply(image, out.records).topic_configs("t") == configs


@pytest.mark.parametrize(
    ("partitions", "replication_factor", "code", "message"),
    [
        (0, 1, ErrorCode.INVALID_PARTITIONS, "the number of partitions must be at least 1"),
        (-5, 1, ErrorCode.INVALID_PARTITIONS, "the number of partitions must be at least 1"),
        (1, 0, ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor must be at least 1"),
        (1, -2, ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor must be at least 1"),
        (1, 4, ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor 4 is larger than the 3 available brokers"),
        (4001, 3, ErrorCode.POLICY_VIOLATION, "max.partitions.per.broker=4000"),
        (10**9, 1, ErrorCode.POLICY_VIOLATION, "max.partitions.per.broker=4000"),
    ],
)
def test_bad_counts_are_refused(partitions: int, replication_factor: int, code: int, message: str) -> None:
    out = create_topic(build(brokers(1, 2, 3)), TopicRequest("t", partitions, replication_factor))
    assert (out.error, out.records) == (code, [])
    assert message in out.message


def test_the_partition_limit_counts_existing_replicas() -> None:
    image = build(brokers(1, 2, 3))
    out = create_topic(image, TopicRequest("a", 6, 2), max_partitions_per_broker=4)
    assert out.error == ErrorCode.NONE  # 12 replicas, 4 on each broker
    image = apply(image, out.records)
    out = create_topic(image, TopicRequest("b", 1, 1), max_partitions_per_broker=4)
    assert (out.error, out.records) == (ErrorCode.POLICY_VIOLATION, [])
    assert "1 partitions with replication factor 1 would put more than max.partitions.per.broker=4" in out.message
    assert create_topic(image, TopicRequest("b", 1, 1), max_partitions_per_broker=5).error == ErrorCode.NONE


def test_the_limit_is_per_broker_after_placement_not_the_average() -> None:
    """Room for one more replica in total, but placement puts topic 'b' on the broker that is full already."""
    image = build(brokers(1, 2))
    image = apply(image, create_topic(image, TopicRequest("a", 1, 1)).records)
    (partition,) = image.topic("a").partitions.values()
    out = create_topic(image, TopicRequest("b", 1, 1), max_partitions_per_broker=1)
    assert (out.error, out.records) == (ErrorCode.POLICY_VIOLATION, [])
    assert f"(broker {partition.replicas[0]} would hold 2)" in out.message
    assert create_topic(image, TopicRequest("d", 1, 1), max_partitions_per_broker=1).error == ErrorCode.NONE


def test_users_cannot_create_or_delete_the_offsets_topic() -> None:
    from odradek.client.common.topic_rules import OFFSETS_TOPIC
    from odradek.controller.topics import delete_topic

    image = build(brokers(1, 2, 3))
    out = create_topic(image, TopicRequest(OFFSETS_TOPIC, 3, 3))
    assert (out.error, out.records) == (ErrorCode.INVALID_TOPIC_EXCEPTION, [])
    assert "internal topic" in out.message
    out = delete_topic(image, OFFSETS_TOPIC)
    assert (out.error, out.records) == (ErrorCode.INVALID_TOPIC_EXCEPTION, [])


@pytest.mark.parametrize(
    ("registered", "asked", "rf", "min_isr"), [((1, 2, 3), 3, 3, "2"), ((1, 2), 3, 2, "1"), ((1,), 3, 1, "1")]
)
def test_the_internal_offsets_topic_is_compacted_and_capped(
    registered: tuple[int, ...], asked: int, rf: int, min_isr: str
) -> None:
    from odradek.client.common.topic_rules import OFFSETS_TOPIC
    from odradek.controller.topics import internal_topic_request

    image = build(brokers(*registered))
    assert internal_topic_request(image, OFFSETS_TOPIC, 5, asked).configs == {
        "cleanup.policy": "compact",
        "min.insync.replicas": min_isr,
    }
    request = internal_topic_request(image, OFFSETS_TOPIC, 5, asked, segment_bytes=1 << 20)
    assert (request.partitions, request.replication_factor) == (5, rf)
    assert request.configs == {"cleanup.policy": "compact", "min.insync.replicas": min_isr, "segment.bytes": "1048576"}
    out = create_topic(image, request, internal=True)
    assert out.error == ErrorCode.NONE, out.message
    image = apply(image, out.records)
    assert image.topic_configs(OFFSETS_TOPIC)["cleanup.policy"] == "compact"
    # the internal path cannot create a user topic
    assert create_topic(image, TopicRequest("t", 1, 1), internal=True).error == ErrorCode.INVALID_TOPIC_EXCEPTION
