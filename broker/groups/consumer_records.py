"""The ``__consumer_offsets`` records of KIP-848 consumer groups, in Kafka's own layout.

A consumer group is not one record but several, so that a heartbeat rewrites only what it changed: the group's
epoch, the metadata of the topics its members subscribe to, each member's subscription, the target assignment
(its epoch, and one record per member), each member's current assignment, and what each subscribed regular
expression resolved to. Kafka writes them under key versions 3 to 8 and 16 (its "record types"); each key is
``int16 version, group string[, member string or regular expression]`` in the classic encoding, each value
``int16 0`` then a flexible struct. The member metadata's tagged field 0 (a classic protocol member's session
timeout and supported protocols) is read and written; other tagged fields Kafka added later (the metadata hash of
KIP-1101, a target assignment's timestamp, per-partition assignment epochs) are skipped when read and not written.
A partition set is written as Kafka writes it: one entry per topic id, with the partition numbers.

Partition sets are ``frozenset[(topic id, partition)]`` here, so the state machine can use set operations on them;
the codec groups them by topic, both sorted, so one state always encodes to the same bytes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from enum import IntEnum

from odradek.broker.groups.record_codec import RecordReader, RecordWriter, UnknownRecordVersionError

TopicId = bytes  # 16 bytes, the topic's uuid
Partitions = frozenset[tuple[TopicId, int]]
NO_PARTITIONS: Partitions = frozenset()

CONSUMER_GROUP_METADATA_KEY_VERSION = 3
CONSUMER_GROUP_PARTITION_METADATA_KEY_VERSION = 4
CONSUMER_GROUP_MEMBER_METADATA_KEY_VERSION = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_VERSION = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_VERSION = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION = 8
CONSUMER_GROUP_REGULAR_EXPRESSION_KEY_VERSION = 16
CONSUMER_KEY_VERSIONS = (*range(3, 9), CONSUMER_GROUP_REGULAR_EXPRESSION_KEY_VERSION)
CLASSIC_MEMBER_METADATA_TAG = 0  # the member metadata value's tagged field of a classic protocol member


class MemberState(IntEnum):
    """Where a member is in its reconciliation (Kafka's MemberState values, stored in the current assignment)."""

    STABLE = 0  # it owns its whole target assignment of its epoch
    UNREVOKED_PARTITIONS = 1  # it must revoke partitions before it may move to the next epoch
    UNRELEASED_PARTITIONS = 2  # at the new epoch, waiting for partitions other members still hold
    UNKNOWN = 127  # a state a newer coordinator wrote: the member is fenced and reconciled from scratch


# -- keys --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionKey:
    group: str
    regex: str


ConsumerRecordKey = (
    ConsumerGroupMetadataKey
    | ConsumerGroupPartitionMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
    | ConsumerGroupRegularExpressionKey
)

_KEY_VERSIONS: dict[type, int] = {
    ConsumerGroupMetadataKey: CONSUMER_GROUP_METADATA_KEY_VERSION,
    ConsumerGroupPartitionMetadataKey: CONSUMER_GROUP_PARTITION_METADATA_KEY_VERSION,
    ConsumerGroupMemberMetadataKey: CONSUMER_GROUP_MEMBER_METADATA_KEY_VERSION,
    ConsumerGroupTargetAssignmentMetadataKey: CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_VERSION,
    ConsumerGroupTargetAssignmentMemberKey: CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_VERSION,
    ConsumerGroupCurrentMemberAssignmentKey: CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION,
    ConsumerGroupRegularExpressionKey: CONSUMER_GROUP_REGULAR_EXPRESSION_KEY_VERSION,
}


# -- values ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue:
    epoch: int  # the group epoch


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: TopicId
    name: str
    num_partitions: int
    # The racks of each partition's replicas (index = partition), when some broker has a rack; empty otherwise.
    racks: tuple[frozenset[str], ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataValue:
    """The subscribed topics as of the group epoch that last changed them (a change bumps the epoch)."""

    topics: tuple[TopicMetadata, ...]


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """What a member that uses the classic protocol (JoinGroup, SyncGroup, Heartbeat) in a consumer group sent in
    its JoinGroup: its session timeout and every protocol it supports, with its metadata (Kafka's tagged field 0
    of the member metadata value; null for a member of the consumer protocol)."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicMemberMetadata | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    partitions: Partitions


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned: Partitions
    pending_revocation: Partitions


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionValue:
    """The topics a subscribed regular expression resolved to (those the resolving member's principal may
    describe, with an authorizer), as of metadata ``version`` (the image's offset) at ``timestamp_ms``."""

    topics: tuple[str, ...]
    version: int
    timestamp_ms: int


ConsumerRecordValue = (
    ConsumerGroupMetadataValue
    | ConsumerGroupPartitionMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
    | ConsumerGroupRegularExpressionValue
)
ConsumerRecord = tuple[ConsumerRecordKey, ConsumerRecordValue | None]


def by_topic(partitions: Partitions) -> list[tuple[TopicId, list[int]]]:
    """A partition set as Kafka lists it: per topic id (sorted), the sorted partition numbers."""
    topics: dict[TopicId, list[int]] = defaultdict(list)
    for topic_id, partition in partitions:
        topics[topic_id].append(partition)
    return [(topic_id, sorted(topics[topic_id])) for topic_id in sorted(topics)]


# -- encoding ----------------------------------------------------------------------------------------------------


def encode_consumer_key(key: ConsumerRecordKey) -> bytes:
    w = RecordWriter(flexible=False)
    w.int16(_KEY_VERSIONS[type(key)])
    w.string(key.group)
    if isinstance(
        key,
        ConsumerGroupMemberMetadataKey
        | ConsumerGroupTargetAssignmentMemberKey
        | ConsumerGroupCurrentMemberAssignmentKey,
    ):
        w.string(key.member_id)
    elif isinstance(key, ConsumerGroupRegularExpressionKey):
        w.string(key.regex)
    return bytes(w.out)


def write_partitions(w: RecordWriter, partitions: Partitions) -> None:
    topics = by_topic(partitions)
    w.array_length(len(topics))
    for topic_id, numbers in topics:
        w.uuid(topic_id)
        w.int32_array(numbers)
        w.end_struct()


def encode_consumer_value(value: ConsumerRecordValue) -> bytes:
    """Version 0 of the value, Kafka's only one: flexible, no tagged fields written."""
    w = RecordWriter(flexible=True)
    w.int16(0)
    if isinstance(value, ConsumerGroupMetadataValue):
        w.int32(value.epoch)
    elif isinstance(value, ConsumerGroupPartitionMetadataValue):
        w.array_length(len(value.topics))
        for t in value.topics:
            w.uuid(t.topic_id)
            w.string(t.name)
            w.int32(t.num_partitions)
            w.array_length(len(t.racks))  # per-partition racks (Kafka 3.x's field; 4.0 no longer reads it)
            for partition, racks in enumerate(t.racks):
                w.int32(partition)
                w.string_array(sorted(racks))
                w.end_struct()
            w.end_struct()
    elif isinstance(value, ConsumerGroupMemberMetadataValue):
        w.string(value.instance_id)
        w.string(value.rack_id)
        w.string(value.client_id)
        w.string(value.client_host)
        w.string_array(value.subscribed_topic_names)
        w.string(value.subscribed_topic_regex)
        w.int32(value.rebalance_timeout_ms)
        w.string(value.server_assignor)
        if value.classic is not None:  # ends the struct with its tagged field
            w.tagged_field(CLASSIC_MEMBER_METADATA_TAG, _classic_metadata(value.classic))
            return bytes(w.out)
    elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        w.int32(value.assignment_epoch)
    elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        write_partitions(w, value.partitions)
    elif isinstance(value, ConsumerGroupRegularExpressionValue):
        w.string_array(value.topics)
        w.int64(value.version)
        w.int64(value.timestamp_ms)
    else:
        w.int32(value.member_epoch)
        w.int32(value.previous_member_epoch)
        w.int8(value.state)
        write_partitions(w, value.assigned)
        write_partitions(w, value.pending_revocation)
    w.end_struct()
    return bytes(w.out)


def _classic_metadata(classic: ClassicMemberMetadata) -> bytes:
    """The tagged field's payload: a nullable struct, so a presence byte (1) first, as Kafka's generated code
    writes it."""
    w = RecordWriter(flexible=True)
    w.uvarint(1)
    w.int32(classic.session_timeout_ms)
    w.array_length(len(classic.supported_protocols))
    for name, metadata in classic.supported_protocols:
        w.string(name)
        w.bytes_(metadata)
        w.end_struct()
    w.end_struct()
    return bytes(w.out)


def _read_classic_metadata(data: bytes) -> ClassicMemberMetadata | None:
    r = RecordReader(data, "ClassicMemberMetadata")
    r.flexible = True
    if r.uvarint() == 0:  # a null struct
        return None
    session_timeout_ms = r.int32()
    protocols = []
    for _ in range(r.array_length()):
        name, metadata = r.string(), r.bytes_()
        r.end_struct()
        protocols.append((name, metadata))
    r.end_struct()
    r.done()
    return ClassicMemberMetadata(session_timeout_ms, tuple(protocols))


# -- decoding ----------------------------------------------------------------------------------------------------


def decode_consumer_key(version: int, r: RecordReader) -> ConsumerRecordKey:
    """The rest of a key whose version (3-8) was read."""
    group = r.string()
    if version == CONSUMER_GROUP_METADATA_KEY_VERSION:
        return ConsumerGroupMetadataKey(group)
    if version == CONSUMER_GROUP_PARTITION_METADATA_KEY_VERSION:
        return ConsumerGroupPartitionMetadataKey(group)
    if version == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_VERSION:
        return ConsumerGroupTargetAssignmentMetadataKey(group)
    if version == CONSUMER_GROUP_REGULAR_EXPRESSION_KEY_VERSION:
        return ConsumerGroupRegularExpressionKey(group, r.string())
    member_id = r.string()
    if version == CONSUMER_GROUP_MEMBER_METADATA_KEY_VERSION:
        return ConsumerGroupMemberMetadataKey(group, member_id)
    if version == CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_VERSION:
        return ConsumerGroupTargetAssignmentMemberKey(group, member_id)
    if version == CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION:
        return ConsumerGroupCurrentMemberAssignmentKey(group, member_id)
    raise UnknownRecordVersionError("key", version)


def read_partitions(r: RecordReader) -> Partitions:
    out: set[tuple[TopicId, int]] = set()
    for _ in range(r.array_length()):
        topic_id = r.uuid()
        out.update((topic_id, p) for p in r.int32_array())
        r.end_struct()
    return frozenset(out)


def decode_consumer_value(key: ConsumerRecordKey, data: bytes) -> ConsumerRecordValue:
    kind = type(key).__name__.removesuffix("Key") + "Value"
    r = RecordReader(data, kind)
    version = r.int16()
    if version != 0:
        raise UnknownRecordVersionError(kind, version)
    r.flexible = True
    value: ConsumerRecordValue
    if isinstance(key, ConsumerGroupMetadataKey):
        value = ConsumerGroupMetadataValue(r.int32())
    elif isinstance(key, ConsumerGroupPartitionMetadataKey):
        topics = []
        for _ in range(r.array_length()):
            topic_id, name, num_partitions = r.uuid(), r.string(), r.int32()
            by_partition: dict[int, frozenset[str]] = {}
            for _ in range(r.array_length()):  # per-partition racks
                partition = r.int32()
                by_partition[partition] = frozenset(r.string_array())
                r.end_struct()
            r.end_struct()
            racks = tuple(by_partition.get(p, frozenset()) for p in range(num_partitions)) if by_partition else ()
            topics.append(TopicMetadata(topic_id, name, num_partitions, racks))
        value = ConsumerGroupPartitionMetadataValue(tuple(topics))
    elif isinstance(key, ConsumerGroupMemberMetadataKey):
        value = ConsumerGroupMemberMetadataValue(
            instance_id=r.nullable_string(),
            rack_id=r.nullable_string(),
            client_id=r.string(),
            client_host=r.string(),
            subscribed_topic_names=r.string_array(),
            subscribed_topic_regex=r.nullable_string(),
            rebalance_timeout_ms=r.int32(),
            server_assignor=r.nullable_string(),
        )
        tagged = r.tagged_fields()
        if CLASSIC_MEMBER_METADATA_TAG in tagged:
            value = replace(value, classic=_read_classic_metadata(tagged[CLASSIC_MEMBER_METADATA_TAG]))
        r.done()
        return value
    elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
        value = ConsumerGroupTargetAssignmentMetadataValue(r.int32())
    elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
        value = ConsumerGroupTargetAssignmentMemberValue(read_partitions(r))
    elif isinstance(key, ConsumerGroupRegularExpressionKey):
        value = ConsumerGroupRegularExpressionValue(r.string_array(), r.int64(), r.int64())
    else:
        member_epoch, previous_member_epoch, state = r.int32(), r.int32(), r.int8()
        value = ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch,
            previous_member_epoch,
            MemberState(state) if state in MemberState._value2member_map_ else MemberState.UNKNOWN,
            read_partitions(r),
            read_partitions(r),
        )
    r.end_struct()
    r.done()
    return value


def describe_consumer_value(value: ConsumerRecordValue) -> dict[str, object]:
    """The JSON view of a value (topic ids in hex; partition sets as ``{topic_id, partitions}`` lists)."""

    def show(partitions: Partitions) -> list[dict[str, object]]:
        return [{"topic_id": t.hex(), "partitions": ps} for t, ps in by_topic(partitions)]

    if isinstance(value, ConsumerGroupMetadataValue):
        return {"epoch": value.epoch}
    if isinstance(value, ConsumerGroupPartitionMetadataValue):
        return {
            "topics": [
                {
                    "topic_id": t.topic_id.hex(),
                    "topic_name": t.name,
                    "num_partitions": t.num_partitions,
                    "partition_racks": [sorted(r) for r in t.racks],
                }
                for t in value.topics
            ]
        }
    if isinstance(value, ConsumerGroupMemberMetadataValue):
        return {
            "instance_id": value.instance_id,
            "rack_id": value.rack_id,
            "client_id": value.client_id,
            "client_host": value.client_host,
            "subscribed_topic_names": list(value.subscribed_topic_names),
            "subscribed_topic_regex": value.subscribed_topic_regex,
            "rebalance_timeout_ms": value.rebalance_timeout_ms,
            "server_assignor": value.server_assignor,
            "classic_member_metadata": None
            if value.classic is None
            else {
                "session_timeout_ms": value.classic.session_timeout_ms,
                "supported_protocols": [name for name, _ in value.classic.supported_protocols],
            },
        }
    if isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        return {"assignment_epoch": value.assignment_epoch}
    if isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        return {"topic_partitions": show(value.partitions)}
    if isinstance(value, ConsumerGroupRegularExpressionValue):
        return {"topics": list(value.topics), "version": value.version, "timestamp": value.timestamp_ms}
    return {
        "member_epoch": value.member_epoch,
        "previous_member_epoch": value.previous_member_epoch,
        "state": value.state.name.lower(),
        "assigned_partitions": show(value.assigned),
        "partitions_pending_revocation": show(value.pending_revocation),
    }


CONSUMER_RECORD_TYPES: dict[type, str] = {
    ConsumerGroupMetadataKey: "consumer_group_metadata",
    ConsumerGroupPartitionMetadataKey: "consumer_group_partition_metadata",
    ConsumerGroupMemberMetadataKey: "consumer_group_member_metadata",
    ConsumerGroupTargetAssignmentMetadataKey: "consumer_group_target_assignment_metadata",
    ConsumerGroupTargetAssignmentMemberKey: "consumer_group_target_assignment_member",
    ConsumerGroupCurrentMemberAssignmentKey: "consumer_group_current_member_assignment",
    ConsumerGroupRegularExpressionKey: "consumer_group_regular_expression",
}
