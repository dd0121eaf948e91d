"""The ``__consumer_offsets`` records of KIP-932 share groups, in Kafka's own layout.

Kafka keeps a share group as it keeps a KIP-848 consumer group, in several records so that a heartbeat rewrites
only what it changed, under key versions 9 to 15: the subscribed topics' metadata (9, Kafka 4.0's record), each
member's metadata (10), the group epoch (11), the target assignment's epoch (12) and each member's target (13),
each member's current assignment (14), and the topics whose share-partitions have state (15, what deleting the
group must reset). Each key is ``int16 version, group string[, member string]`` in the classic encoding, each value
``int16 0`` then a flexible struct; no tagged field is written, and those Kafka may add are skipped when read.

A share group's member has no revoking partitions (partitions are shared, not owned), so its current assignment
is Kafka's: epoch, previous epoch, state (always stable) and the assigned partitions.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.broker.groups.consumer_records import (
    NO_PARTITIONS,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    Partitions,
    TopicId,
    TopicMetadata,
    by_topic,
    decode_consumer_value,
    encode_consumer_value,
    read_partitions,
    write_partitions,
)
from odradek.broker.groups.record_codec import RecordReader, RecordWriter, UnknownRecordVersionError

SHARE_GROUP_PARTITION_METADATA_KEY_VERSION = 9
SHARE_GROUP_MEMBER_METADATA_KEY_VERSION = 10
SHARE_GROUP_METADATA_KEY_VERSION = 11
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_VERSION = 12
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_VERSION = 13
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION = 14
SHARE_GROUP_STATE_PARTITION_METADATA_KEY_VERSION = 15
SHARE_KEY_VERSIONS = tuple(range(9, 16))
STABLE = 0  # Kafka's MemberState.STABLE, the only state of a share group member

# -- keys --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShareGroupPartitionMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataKey:
    group: str


ShareRecordKey = (
    ShareGroupPartitionMetadataKey
    | ShareGroupMemberMetadataKey
    | ShareGroupMetadataKey
    | ShareGroupTargetAssignmentMetadataKey
    | ShareGroupTargetAssignmentMemberKey
    | ShareGroupCurrentMemberAssignmentKey
    | ShareGroupStatePartitionMetadataKey
)

_KEY_VERSIONS: dict[type, int] = {
    ShareGroupPartitionMetadataKey: SHARE_GROUP_PARTITION_METADATA_KEY_VERSION,
    ShareGroupMemberMetadataKey: SHARE_GROUP_MEMBER_METADATA_KEY_VERSION,
    ShareGroupMetadataKey: SHARE_GROUP_METADATA_KEY_VERSION,
    ShareGroupTargetAssignmentMetadataKey: SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_VERSION,
    ShareGroupTargetAssignmentMemberKey: SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_VERSION,
    ShareGroupCurrentMemberAssignmentKey: SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION,
    ShareGroupStatePartitionMetadataKey: SHARE_GROUP_STATE_PARTITION_METADATA_KEY_VERSION,
}

# -- values ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShareGroupPartitionMetadataValue:
    """The subscribed topics as of the group epoch that last changed them."""

    topics: tuple[TopicMetadata, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataValue:
    epoch: int  # the group epoch


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataValue:
    assignment_epoch: int


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberValue:
    partitions: Partitions


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    assigned: Partitions = NO_PARTITIONS


@dataclass(frozen=True, slots=True)
class StateTopic:
    """A topic whose share-partitions have (or are getting) state for the group."""

    topic_id: TopicId
    name: str
    partitions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataValue:
    """The share-partitions with state: initialized ones are what a deletion of the group resets."""

    initialized: tuple[StateTopic, ...]
    initializing: tuple[StateTopic, ...] = ()
    deleting: tuple[StateTopic, ...] = ()  # topic id and name only


ShareRecordValue = (
    ShareGroupPartitionMetadataValue
    | ShareGroupMemberMetadataValue
    | ShareGroupMetadataValue
    | ShareGroupTargetAssignmentMetadataValue
    | ShareGroupTargetAssignmentMemberValue
    | ShareGroupCurrentMemberAssignmentValue
    | ShareGroupStatePartitionMetadataValue
)
ShareRecord = tuple[ShareRecordKey, ShareRecordValue | None]

# -- encoding ----------------------------------------------------------------------------------------------------


def encode_share_key(key: ShareRecordKey) -> bytes:
    w = RecordWriter(flexible=False)
    w.int16(_KEY_VERSIONS[type(key)])
    w.string(key.group)
    if isinstance(
        key, ShareGroupMemberMetadataKey | ShareGroupTargetAssignmentMemberKey | ShareGroupCurrentMemberAssignmentKey
    ):
        w.string(key.member_id)
    return bytes(w.out)


def _write_state_topics(w: RecordWriter, topics: tuple[StateTopic, ...], with_partitions: bool) -> None:
    w.array_length(len(topics))
    for t in topics:
        w.uuid(t.topic_id)
        w.string(t.name)
        if with_partitions:
            w.int32_array(sorted(t.partitions))
        w.end_struct()


def encode_share_value(value: ShareRecordValue) -> bytes:
    """Version 0 of the value: flexible, no tagged fields written."""
    if isinstance(value, ShareGroupPartitionMetadataValue):  # the consumer group record's layout
        return encode_consumer_value(ConsumerGroupPartitionMetadataValue(value.topics))
    w = RecordWriter(flexible=True)
    w.int16(0)
    if isinstance(value, ShareGroupMemberMetadataValue):
        w.string(value.rack_id)
        w.string(value.client_id)
        w.string(value.client_host)
        w.string_array(value.subscribed_topic_names)
    elif isinstance(value, ShareGroupMetadataValue):
        w.int32(value.epoch)
    elif isinstance(value, ShareGroupTargetAssignmentMetadataValue):
        w.int32(value.assignment_epoch)
    elif isinstance(value, ShareGroupTargetAssignmentMemberValue):
        write_partitions(w, value.partitions)
    elif isinstance(value, ShareGroupCurrentMemberAssignmentValue):
        w.int32(value.member_epoch)
        w.int32(value.previous_member_epoch)
        w.int8(STABLE)
        write_partitions(w, value.assigned)
    else:
        _write_state_topics(w, value.initializing, True)
        _write_state_topics(w, value.initialized, True)
        _write_state_topics(w, value.deleting, False)
    w.end_struct()
    return bytes(w.out)


# -- decoding ----------------------------------------------------------------------------------------------------


def decode_share_key(version: int, r: RecordReader) -> ShareRecordKey:
    """The rest of a key whose version (9-15) was read."""
    group = r.string()
    if version == SHARE_GROUP_PARTITION_METADATA_KEY_VERSION:
        return ShareGroupPartitionMetadataKey(group)
    if version == SHARE_GROUP_METADATA_KEY_VERSION:
        return ShareGroupMetadataKey(group)
    if version == SHARE_GROUP_TARGET_ASSIGNMENT_METADATA_KEY_VERSION:
        return ShareGroupTargetAssignmentMetadataKey(group)
    if version == SHARE_GROUP_STATE_PARTITION_METADATA_KEY_VERSION:
        return ShareGroupStatePartitionMetadataKey(group)
    member_id = r.string()
    if version == SHARE_GROUP_MEMBER_METADATA_KEY_VERSION:
        return ShareGroupMemberMetadataKey(group, member_id)
    if version == SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY_VERSION:
        return ShareGroupTargetAssignmentMemberKey(group, member_id)
    if version == SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY_VERSION:
        return ShareGroupCurrentMemberAssignmentKey(group, member_id)
    raise UnknownRecordVersionError("key", version)


def _read_state_topics(r: RecordReader, with_partitions: bool) -> tuple[StateTopic, ...]:
    out = []
    for _ in range(r.array_length()):
        topic_id, name = r.uuid(), r.string()
        partitions = r.int32_array() if with_partitions else ()
        r.end_struct()
        out.append(StateTopic(topic_id, name, partitions))
    return tuple(out)


def decode_share_value(key: ShareRecordKey, data: bytes) -> ShareRecordValue:
    if isinstance(key, ShareGroupPartitionMetadataKey):
        topics = decode_consumer_value(ConsumerGroupPartitionMetadataKey(key.group), data)
        assert isinstance(topics, ConsumerGroupPartitionMetadataValue)
        return ShareGroupPartitionMetadataValue(topics.topics)
    kind = type(key).__name__.removesuffix("Key") + "Value"
    r = RecordReader(data, kind)
    version = r.int16()
    if version != 0:
        raise UnknownRecordVersionError(kind, version)
    r.flexible = True
    value: ShareRecordValue
    if isinstance(key, ShareGroupMemberMetadataKey):
        value = ShareGroupMemberMetadataValue(r.nullable_string(), r.string(), r.string(), r.string_array())
    elif isinstance(key, ShareGroupMetadataKey):
        value = ShareGroupMetadataValue(r.int32())
        if len(r.data) - r.pos > 8:  # Kafka 4.1's metadata hash (KIP-1101), not used here
            r.int64()
    elif isinstance(key, ShareGroupTargetAssignmentMetadataKey):
        value = ShareGroupTargetAssignmentMetadataValue(r.int32())
    elif isinstance(key, ShareGroupTargetAssignmentMemberKey):
        value = ShareGroupTargetAssignmentMemberValue(read_partitions(r))
    elif isinstance(key, ShareGroupCurrentMemberAssignmentKey):
        member_epoch, previous_member_epoch = r.int32(), r.int32()
        r.int8()  # the state: always stable
        value = ShareGroupCurrentMemberAssignmentValue(member_epoch, previous_member_epoch, read_partitions(r))
    else:
        initializing = _read_state_topics(r, True)
        initialized = _read_state_topics(r, True)
        value = ShareGroupStatePartitionMetadataValue(initialized, initializing, _read_state_topics(r, False))
    r.end_struct()
    r.done()
    return value


def describe_share_value(value: ShareRecordValue) -> dict[str, object]:
    """The JSON view of a value (topic ids in hex)."""

    def show(partitions: Partitions) -> list[dict[str, object]]:
        return [{"topic_id": t.hex(), "partitions": ps} for t, ps in by_topic(partitions)]

    def topics(state: tuple[StateTopic, ...]) -> list[dict[str, object]]:
        return [{"topic_id": t.topic_id.hex(), "topic_name": t.name, "partitions": list(t.partitions)} for t in state]

    if isinstance(value, ShareGroupPartitionMetadataValue):
        return {
            "topics": [
                {"topic_id": t.topic_id.hex(), "topic_name": t.name, "num_partitions": t.num_partitions}
                for t in value.topics
            ]
        }
    if isinstance(value, ShareGroupMemberMetadataValue):
        return {
            "rack_id": value.rack_id,
            "client_id": value.client_id,
            "client_host": value.client_host,
            "subscribed_topic_names": list(value.subscribed_topic_names),
        }
    if isinstance(value, ShareGroupMetadataValue):
        return {"epoch": value.epoch}
    if isinstance(value, ShareGroupTargetAssignmentMetadataValue):
        return {"assignment_epoch": value.assignment_epoch}
    if isinstance(value, ShareGroupTargetAssignmentMemberValue):
        return {"topic_partitions": show(value.partitions)}
    if isinstance(value, ShareGroupCurrentMemberAssignmentValue):
        return {
            "member_epoch": value.member_epoch,
            "previous_member_epoch": value.previous_member_epoch,
            "assigned_partitions": show(value.assigned),
        }
    return {
        "initializing_topics": topics(value.initializing),
        "initialized_topics": topics(value.initialized),
        "deleting_topics": [{"topic_id": t.topic_id.hex(), "topic_name": t.name} for t in value.deleting],
    }


SHARE_RECORD_TYPES: dict[type, str] = {
    ShareGroupPartitionMetadataKey: "share_group_partition_metadata",
    ShareGroupMemberMetadataKey: "share_group_member_metadata",
    ShareGroupMetadataKey: "share_group_metadata",
    ShareGroupTargetAssignmentMetadataKey: "share_group_target_assignment_metadata",
    ShareGroupTargetAssignmentMemberKey: "share_group_target_assignment_member",
    ShareGroupCurrentMemberAssignmentKey: "share_group_current_member_assignment",
    ShareGroupStatePartitionMetadataKey: "share_group_state_partition_metadata",
}
