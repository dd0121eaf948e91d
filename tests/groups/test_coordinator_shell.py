"""The pure parts of the group coordinator's shell: its config from the node's keys, the records it appends and
their replay when a partition is loaded (which partitions to load is the runtime's: tests/coordinator)."""

from __future__ import annotations

from odradek.broker.config import NodeConfig
from odradek.broker.groups.consumer_group import ConsumerGroupConfig
from odradek.broker.groups.coordinator import CoordinatorConfig, commit_append_error
from odradek.broker.groups.group import GroupConfig
from odradek.broker.groups.loader import encode_records, group_record, replay_batches, snapshot_of
from odradek.broker.groups.messages import GroupSnapshot, MemberSnapshot
from odradek.broker.groups.offsets import OffsetStore
from odradek.broker.groups.records import GroupMetadataValue, OffsetCommitKey, OffsetCommitValue, group_tombstone
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition


def test_the_node_keys_become_the_coordinator_config() -> None:
    config = NodeConfig(
        {
            "process.roles": "broker",
            "node.id": 4,
            "controller.quorum.voters": "1@127.0.0.1:7001",
            "listeners": "PLAINTEXT://127.0.0.1:9092",
            "offsets.topic.num.partitions": 7,
            "offsets.topic.replication.factor": 2,
            "offsets.retention.minutes": 3,
            "offsets.retention.check.interval.ms": 1234,
            "offset.metadata.max.bytes": 10,
            "offsets.commit.timeout.ms": 777,
            "group.initial.rebalance.delay.ms": 5,
            "group.min.session.timeout.ms": 100,
            "group.max.session.timeout.ms": 200,
            "group.max.size": 9,
            "group.consumer.session.timeout.ms": 3000,
            "group.consumer.min.session.timeout.ms": 3000,
            "group.consumer.heartbeat.interval.ms": 300,
            "group.consumer.min.heartbeat.interval.ms": 300,
            "group.consumer.max.size": 8,
            "group.consumer.migration.policy": "Upgrade",
            "group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor, uniform",
        }
    )
    assert CoordinatorConfig.from_node(config) == CoordinatorConfig(
        num_partitions=7,
        replication_factor=2,
        retention_ms=180_000,
        retention_check_interval_ms=1234,
        offset_metadata_max_bytes=10,
        commit_timeout_ms=777,
        group=GroupConfig(
            initial_rebalance_delay_ms=5, min_session_timeout_ms=100, max_session_timeout_ms=200, max_size=9
        ),
        consumer_group=ConsumerGroupConfig(
            session_timeout_ms=3000,
            heartbeat_interval_ms=300,
            max_size=8,
            assignors=("range", "uniform"),
            migration_policy="upgrade",
            classic_max_size=9,
        ),
    )
    defaults = CoordinatorConfig.from_node(
        NodeConfig({"process.roles": "broker", "node.id": 4, "controller.quorum.voters": "1@127.0.0.1:7001"})
    )
    assert defaults == CoordinatorConfig()  # Kafka's defaults


def test_append_errors_map_as_kafkas_offset_commit() -> None:
    assert commit_append_error(ErrorCode.NOT_ENOUGH_REPLICAS) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert commit_append_error(ErrorCode.NOT_LEADER_OR_FOLLOWER) == ErrorCode.NOT_COORDINATOR
    assert commit_append_error(ErrorCode.MESSAGE_TOO_LARGE) == ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    assert commit_append_error(ErrorCode.REQUEST_TIMED_OUT) == ErrorCode.REQUEST_TIMED_OUT


def test_appended_records_replay_into_the_offsets_and_the_last_group_record() -> None:
    member = MemberSnapshot("m-1", "i", "c", "/1.2.3.4", 300, 100, b"sub", b"asg")
    first = GroupSnapshot("g", "consumer", 1, "range", "m-1", 10, (member,))
    second = GroupSnapshot("g", "consumer", 2, "range", "m-1", 20, (member,))
    log = b"".join(
        [
            encode_records([group_record(first), (OffsetCommitKey("g", "t", 0), OffsetCommitValue(5))], 1),
            encode_records([group_record(second), (OffsetCommitKey("g", "t", 0), OffsetCommitValue(9))], 2),
            encode_records([group_record(GroupSnapshot("gone", "consumer", 1, None, None, 1, ()))], 3),
            encode_records([group_tombstone("gone"), (OffsetCommitKey("g", "t", 1), None)], 4),
        ]
    )
    store = OffsetStore()
    groups: dict[str, GroupMetadataValue] = {}
    replay_batches(log, store, groups)
    assert set(groups) == {"g"}
    assert snapshot_of("g", groups["g"]) == second
    assert store.fetch("g", [TopicPartition("t", 0)])[TopicPartition("t", 0)].offset == 9


def test_member_ids_carry_the_client_id_when_there_is_one() -> None:
    from odradek.broker.groups.coordinator import uuid_member_ids

    assert uuid_member_ids("billing-1").startswith("billing-1-")
    anonymous = uuid_member_ids("")
    assert not anonymous.startswith("-") and len(anonymous) == 36
