"""The records of the internal ``__consumer_offsets`` topic, in Kafka's own binary layout.

Each record's key and value start with a big-endian int16 version; the rest is the field list of that version
(Kafka's generated-message encoding). Keeping Kafka's layout byte for byte lets Kafka tooling read a copy of the
topic, and lets this codebase read records written by Kafka.

Keys (the key version says which record it is):

- version 0 or 1: an offset commit, ``group, topic, partition`` (written as 1);
- version 2: a group's metadata, ``group``;
- versions 3-8 and 16: the records of a KIP-848 consumer group (``consumer_records``);
- versions 9-15: the records of a KIP-932 share group (``share_records``);
- any other version is another coordinator's record type and is refused with ``UnknownRecordVersionError``.

Values (a null value is a tombstone: it deletes the key under compaction and on replay):

- offset commit, versions 0-4 (written as 3, or as 1 when it carries an explicit expire timestamp, as Kafka):
  ``offset int64, [v3+ leader_epoch int32], metadata string, commit_timestamp int64, [v1 expire_timestamp int64]``;
- group metadata, versions 0-4 (written as 3): ``protocol_type string, generation int32, protocol string?,
  leader string?, [v2+ current_state_timestamp int64], members[]`` where a member is ``member_id string,
  [v3+ group_instance_id string?], client_id string, client_host string, [v1+ rebalance_timeout int32],
  session_timeout int32, subscription bytes, assignment bytes``.

Classic (versions 0-3) encoding: int16-length UTF-8 strings (-1 = null), int32-length bytes and int32-count arrays.
Version 4 is Kafka's first "flexible" version: lengths and counts become unsigned varints of n+1 (0 = null) and
every struct ends with a tagged-field section, which this reader skips (Kafka adds only tagged fields from then on).
Fields a version does not carry decode to Kafka's defaults: leader epoch -1, expire timestamp -1, current state
timestamp -1, group instance id null, and (as Kafka's loader does for version 0) rebalance timeout = session timeout.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Literal

from odradek.broker.groups.consumer_records import (
    CONSUMER_KEY_VERSIONS,
    CONSUMER_RECORD_TYPES,
    ConsumerRecordKey,
    ConsumerRecordValue,
    decode_consumer_key,
    decode_consumer_value,
    describe_consumer_value,
    encode_consumer_key,
    encode_consumer_value,
)
from odradek.broker.groups.record_codec import MAX_STRING_BYTES as MAX_STRING_BYTES  # re-exported
from odradek.broker.groups.record_codec import OffsetsRecordError as OffsetsRecordError
from odradek.broker.groups.record_codec import RecordReader, RecordWriter
from odradek.broker.groups.record_codec import UnknownRecordVersionError as UnknownRecordVersionError
from odradek.broker.groups.share_records import (
    SHARE_KEY_VERSIONS,
    SHARE_RECORD_TYPES,
    ShareRecordKey,
    ShareRecordValue,
    decode_share_key,
    decode_share_value,
    describe_share_value,
    encode_share_key,
    encode_share_value,
)

OFFSETS_TOPIC = "__consumer_offsets"

OFFSET_COMMIT_KEY_VERSION = 1  # what Kafka writes; version 0 has the same layout
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3
MAX_VALUE_VERSION = 4
NO_TIMESTAMP = -1
NO_LEADER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    """A committed offset; ``commit_timestamp`` is the coordinator's clock when it accepted the commit."""

    offset: int
    metadata: str = ""
    commit_timestamp: int = NO_TIMESTAMP
    leader_epoch: int = NO_LEADER_EPOCH
    expire_timestamp: int = NO_TIMESTAMP  # only in version 1 (pre-KIP-211 per-commit retention)


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    """A group's state as of its last rebalance (or its emptying); ``protocol``/``leader`` are null while empty."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = NO_TIMESTAMP
    members: tuple[MemberMetadata, ...] = ()


RecordKey = OffsetCommitKey | GroupMetadataKey | ConsumerRecordKey | ShareRecordKey
RecordValue = OffsetCommitValue | GroupMetadataValue | ConsumerRecordValue | ShareRecordValue


# ---- encoding ----


def encode_key(key: RecordKey) -> bytes:
    """The key's bytes: the version prefix then its fields."""
    w = RecordWriter(flexible=False)
    if isinstance(key, OffsetCommitKey):
        w.int16(OFFSET_COMMIT_KEY_VERSION)
        w.string(key.group)
        w.string(key.topic)
        w.int32(key.partition)
    elif isinstance(key, GroupMetadataKey):
        w.int16(GROUP_METADATA_KEY_VERSION)
        w.string(key.group)
    elif isinstance(key, ShareRecordKey):
        return encode_share_key(key)
    else:
        return encode_consumer_key(key)
    return bytes(w.out)


def encode_value(value: RecordValue | None, *, version: int | None = None) -> bytes | None:
    """The value's bytes (None for a tombstone), in Kafka's current write version unless ``version`` is given.

    Fields the chosen version does not carry are dropped, as Kafka drops ignorable fields.
    """
    if value is None:
        return None
    if isinstance(value, OffsetCommitValue):
        if version is None:
            version = 1 if value.expire_timestamp != NO_TIMESTAMP else OFFSET_COMMIT_VALUE_VERSION
        return _encode_offset_commit(value, _check_version("OffsetCommitValue", version))
    if isinstance(value, ShareRecordValue):
        return encode_share_value(value)  # version 0, the only one
    if not isinstance(value, GroupMetadataValue):
        return encode_consumer_value(value)  # version 0, the only one
    if version is None:
        version = GROUP_METADATA_VALUE_VERSION
    return _encode_group_metadata(value, _check_version("GroupMetadataValue", version))


def _check_version(kind: str, version: int) -> int:
    if not 0 <= version <= MAX_VALUE_VERSION:
        raise UnknownRecordVersionError(kind, version)
    return version


def _encode_offset_commit(v: OffsetCommitValue, version: int) -> bytes:
    w = RecordWriter(flexible=version >= 4)
    w.int16(version)
    w.int64(v.offset)
    if version >= 3:
        w.int32(v.leader_epoch)
    w.string(v.metadata)
    w.int64(v.commit_timestamp)
    if version == 1:
        w.int64(v.expire_timestamp)
    w.end_struct()
    return bytes(w.out)


def _encode_group_metadata(v: GroupMetadataValue, version: int) -> bytes:
    w = RecordWriter(flexible=version >= 4)
    w.int16(version)
    w.string(v.protocol_type)
    w.int32(v.generation)
    w.string(v.protocol)
    w.string(v.leader)
    if version >= 2:
        w.int64(v.current_state_timestamp)
    w.array_length(len(v.members))
    for m in v.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.int32(m.rebalance_timeout)
        w.int32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
        w.end_struct()
    w.end_struct()
    return bytes(w.out)


# ---- decoding ----


def decode_key(data: bytes) -> RecordKey:
    """Decode a key; its version says whether it is an offset commit or a group's metadata."""
    r = RecordReader(data, "__consumer_offsets key")
    version = r.int16()
    key: RecordKey
    if version in (0, 1):
        key = OffsetCommitKey(group=r.string(), topic=r.string(), partition=r.int32())
    elif version == GROUP_METADATA_KEY_VERSION:
        key = GroupMetadataKey(group=r.string())
    elif version in CONSUMER_KEY_VERSIONS:
        key = decode_consumer_key(version, r)
    elif version in SHARE_KEY_VERSIONS:
        key = decode_share_key(version, r)
    else:
        raise UnknownRecordVersionError("key", version)
    r.done()
    return key


def decode_value(key: RecordKey, data: bytes | None) -> RecordValue | None:
    """Decode the value of ``key``'s record type; None (a tombstone) stays None."""
    if data is None:
        return None
    if isinstance(key, OffsetCommitKey):
        return _decode_offset_commit(data)
    if isinstance(key, GroupMetadataKey):
        return _decode_group_metadata(data)
    if isinstance(key, ShareRecordKey):
        return decode_share_value(key, data)
    return decode_consumer_value(key, data)


def decode_record(key: bytes, value: bytes | None) -> tuple[RecordKey, RecordValue | None]:
    decoded = decode_key(key)
    return decoded, decode_value(decoded, value)


def value_version(data: bytes) -> int:
    """The version prefix of an encoded value (for the JSON view)."""
    return RecordReader(data, "__consumer_offsets value").int16()


def _value_reader(data: bytes, kind: str) -> tuple[RecordReader, int]:
    r = RecordReader(data, kind)
    version = r.int16()
    if not 0 <= version <= MAX_VALUE_VERSION:
        raise UnknownRecordVersionError(kind, version)
    r.flexible = version >= 4
    return r, version


def _decode_offset_commit(data: bytes) -> OffsetCommitValue:
    r, version = _value_reader(data, "OffsetCommitValue")
    offset = r.int64()
    leader_epoch = r.int32() if version >= 3 else NO_LEADER_EPOCH
    metadata = r.string()
    commit_timestamp = r.int64()
    expire_timestamp = r.int64() if version == 1 else NO_TIMESTAMP
    r.end_struct()
    r.done()
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp)


def _decode_group_metadata(data: bytes) -> GroupMetadataValue:
    r, version = _value_reader(data, "GroupMetadataValue")
    protocol_type = r.string()
    generation = r.int32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    current_state_timestamp = r.int64() if version >= 2 else NO_TIMESTAMP
    count = r.array_length()
    members = []
    for _ in range(count):
        member_id = r.string()
        group_instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.int32() if version >= 1 else None
        session_timeout = r.int32()
        subscription = r.bytes_()
        assignment = r.bytes_()
        r.end_struct()
        members.append(
            MemberMetadata(
                member_id=member_id,
                group_instance_id=group_instance_id,
                client_id=client_id,
                client_host=client_host,
                rebalance_timeout=session_timeout if rebalance_timeout is None else rebalance_timeout,
                session_timeout=session_timeout,
                subscription=subscription,
                assignment=assignment,
            )
        )
    r.end_struct()
    r.done()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, current_state_timestamp, tuple(members))


def group_tombstone(group: str) -> tuple[GroupMetadataKey, None]:
    """The record that deletes a group's metadata (the group is dead)."""
    return GroupMetadataKey(group), None


# ---- the JSON view ----


def describe_record(
    key: bytes, value: bytes | None, *, binary: Literal["base64", "hex"] = "base64"
) -> dict[str, object]:
    """A JSON-ready view of one record: ``{type, key: {version, ...}, value: {version, ...} | null}``.

    ``type`` is ``offset_commit``, ``group_metadata`` or one of the consumer group records
    (``consumer_group_metadata``, ``consumer_group_member_metadata``, ...; keys show ``group`` and, per member,
    ``member_id``); member subscription and assignment bytes are shown in ``binary`` encoding. Raises
    ``OffsetsRecordError`` (or ``UnknownRecordVersionError``) as the decoders do.
    """
    decoded_key, decoded_value = decode_record(key, value)
    key_version = RecordReader(key, "key").int16()
    out: dict[str, object] = {}
    if isinstance(decoded_key, OffsetCommitKey):
        out["type"] = "offset_commit"
        out["key"] = {
            "version": key_version,
            "group": decoded_key.group,
            "topic": decoded_key.topic,
            "partition": decoded_key.partition,
        }
    elif isinstance(decoded_key, GroupMetadataKey):
        out["type"] = "group_metadata"
        out["key"] = {"version": key_version, "group": decoded_key.group}
    else:
        out["type"] = {**CONSUMER_RECORD_TYPES, **SHARE_RECORD_TYPES}[type(decoded_key)]
        shown_key: dict[str, object] = {"version": key_version, "group": decoded_key.group}
        if member_id := getattr(decoded_key, "member_id", None):
            shown_key["member_id"] = member_id
        out["key"] = shown_key
    if value is None or decoded_value is None:
        out["value"] = None
        return out
    version = value_version(value)
    if isinstance(decoded_value, ShareRecordValue):
        out["value"] = {"version": version, **describe_share_value(decoded_value)}
        return out
    if not isinstance(decoded_value, OffsetCommitValue | GroupMetadataValue):
        out["value"] = {"version": version, **describe_consumer_value(decoded_value)}
        return out

    def show(data: bytes) -> str:
        return base64.b64encode(data).decode() if binary == "base64" else data.hex()

    if isinstance(decoded_value, OffsetCommitValue):
        shown: dict[str, object] = {
            "version": version,
            "offset": decoded_value.offset,
            "leader_epoch": decoded_value.leader_epoch,
            "metadata": decoded_value.metadata,
            "commit_timestamp": decoded_value.commit_timestamp,
        }
        if version == 1:
            shown["expire_timestamp"] = decoded_value.expire_timestamp
        out["value"] = shown
        return out
    out["value"] = {
        "version": version,
        "protocol_type": decoded_value.protocol_type,
        "generation": decoded_value.generation,
        "protocol": decoded_value.protocol,
        "leader": decoded_value.leader,
        "current_state_timestamp": decoded_value.current_state_timestamp,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "rebalance_timeout": m.rebalance_timeout,
                "session_timeout": m.session_timeout,
                "subscription": show(m.subscription),
                "assignment": show(m.assignment),
            }
            for m in decoded_value.members
        ],
    }
    return out
