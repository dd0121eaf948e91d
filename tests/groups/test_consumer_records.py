"""The KIP-848 consumer group records of ``__consumer_offsets``: Kafka's layout byte for byte (keys 3-8 and 16, flexible
values of version 0), tagged fields Kafka added later skipped, the JSON view, and the loader's fold of a group's
records (the last value of each key; tombstones remove keys)."""

from __future__ import annotations

import struct

import pytest

from odradek.broker.groups.consumer_records import (
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerRecordKey,
    ConsumerRecordValue,
    MemberState,
    TopicMetadata,
)
from odradek.broker.groups.loader import ReplayStats, encode_records, replay_batches
from odradek.broker.groups.offsets import OffsetStore
from odradek.broker.groups.records import (
    OffsetsRecordError,
    UnknownRecordVersionError,
    decode_key,
    decode_record,
    describe_record,
    encode_key,
    encode_value,
)

T = bytes(range(16))  # a topic id
U = bytes(range(16, 32))


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def s(text: str) -> bytes:
    """A classic string (keys)."""
    return struct.pack(">h", len(text)) + text.encode()


def cs(text: str | None) -> bytes:
    """A compact (flexible) string: length + 1, 0 for null."""
    return b"\x00" if text is None else bytes([len(text) + 1]) + text.encode()


VALUE_V0 = b"\x00\x00"
NO_TAGS = b"\x00"

CASES: list[tuple[ConsumerRecordKey, bytes, ConsumerRecordValue, bytes]] = [
    (
        ConsumerGroupMetadataKey("g"),
        b"\x00\x03" + s("g"),
        ConsumerGroupMetadataValue(7),
        VALUE_V0 + i32(7) + NO_TAGS,
    ),
    (
        ConsumerGroupPartitionMetadataKey("g"),
        b"\x00\x04" + s("g"),
        ConsumerGroupPartitionMetadataValue((TopicMetadata(T, "t", 3),)),
        VALUE_V0 + b"\x02" + T + cs("t") + i32(3) + b"\x01" + NO_TAGS + NO_TAGS,
    ),
    (
        ConsumerGroupMemberMetadataKey("g", "m"),
        b"\x00\x05" + s("g") + s("m"),
        ConsumerGroupMemberMetadataValue("i", None, "c", "/h", ("a", "b"), None, 30000, "uniform"),
        VALUE_V0
        + cs("i")
        + cs(None)
        + cs("c")
        + cs("/h")
        + b"\x03"
        + cs("a")
        + cs("b")
        + cs(None)
        + i32(30000)
        + cs("uniform")
        + NO_TAGS,
    ),
    (
        ConsumerGroupTargetAssignmentMetadataKey("g"),
        b"\x00\x06" + s("g"),
        ConsumerGroupTargetAssignmentMetadataValue(7),
        VALUE_V0 + i32(7) + NO_TAGS,
    ),
    (
        ConsumerGroupTargetAssignmentMemberKey("g", "m"),
        b"\x00\x07" + s("g") + s("m"),
        ConsumerGroupTargetAssignmentMemberValue(frozenset({(U, 0), (T, 2), (T, 1)})),
        VALUE_V0 + b"\x03" + T + b"\x03" + i32(1) + i32(2) + NO_TAGS + U + b"\x02" + i32(0) + NO_TAGS + NO_TAGS,
    ),
    (
        ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
        b"\x00\x08" + s("g") + s("m"),
        ConsumerGroupCurrentMemberAssignmentValue(
            7, 6, MemberState.UNREVOKED_PARTITIONS, frozenset({(T, 0)}), frozenset({(T, 1)})
        ),
        VALUE_V0
        + i32(7)
        + i32(6)
        + b"\x01"
        + b"\x02"
        + T
        + b"\x02"
        + i32(0)
        + NO_TAGS
        + b"\x02"
        + T
        + b"\x02"
        + i32(1)
        + NO_TAGS
        + NO_TAGS,
    ),
]


@pytest.mark.parametrize("key, key_bytes, value, value_bytes", CASES, ids=lambda c: type(c).__name__)
def test_kafka_layout_both_ways(
    key: ConsumerRecordKey, key_bytes: bytes, value: ConsumerRecordValue, value_bytes: bytes
) -> None:
    assert encode_key(key) == key_bytes
    assert encode_value(value) == value_bytes
    assert decode_record(key_bytes, value_bytes) == (key, value)
    assert decode_record(key_bytes, None) == (key, None)


def test_tagged_fields_kafka_added_later_are_skipped() -> None:
    metadata_hash = b"\x00\x08" + bytes(8)  # KIP-1101's MetadataHash: tag 0, 8 bytes
    assert decode_record(b"\x00\x03" + s("g"), VALUE_V0 + i32(7) + b"\x01" + metadata_hash) == (
        ConsumerGroupMetadataKey("g"),
        ConsumerGroupMetadataValue(7),
    )


def test_a_state_a_newer_coordinator_wrote_reads_as_unknown() -> None:
    value = VALUE_V0 + i32(1) + i32(0) + b"\x05" + b"\x01" + b"\x01" + NO_TAGS
    _, decoded = decode_record(encode_key(ConsumerGroupCurrentMemberAssignmentKey("g", "m")), value)
    assert isinstance(decoded, ConsumerGroupCurrentMemberAssignmentValue) and decoded.state is MemberState.UNKNOWN


def test_unknown_value_version_and_corrupt_values() -> None:
    key = encode_key(ConsumerGroupMetadataKey("g"))
    with pytest.raises(UnknownRecordVersionError) as info:
        decode_record(key, b"\x00\x01" + i32(7) + NO_TAGS)
    assert (info.value.kind, info.value.version) == ("ConsumerGroupMetadataValue", 1)
    with pytest.raises(OffsetsRecordError):
        decode_record(key, VALUE_V0 + i32(7))  # no tagged-field section
    with pytest.raises(OffsetsRecordError):
        decode_key(b"\x00\x05" + s("g"))  # a member key without its member id


def test_json_view() -> None:
    key = encode_key(ConsumerGroupCurrentMemberAssignmentKey("g", "m"))
    value = encode_value(CASES[-1][2])
    assert describe_record(key, value) == {
        "type": "consumer_group_current_member_assignment",
        "key": {"version": 8, "group": "g", "member_id": "m"},
        "value": {
            "version": 0,
            "member_epoch": 7,
            "previous_member_epoch": 6,
            "state": "unrevoked_partitions",
            "assigned_partitions": [{"topic_id": T.hex(), "partitions": [0]}],
            "partitions_pending_revocation": [{"topic_id": T.hex(), "partitions": [1]}],
        },
    }
    assert describe_record(encode_key(ConsumerGroupMetadataKey("g")), None) == {
        "type": "consumer_group_metadata",
        "key": {"version": 3, "group": "g"},
        "value": None,
    }


def test_replay_folds_each_groups_records_and_tombstones_remove_keys() -> None:
    member = ConsumerGroupMemberMetadataKey("g", "m")
    log = b"".join(
        [
            encode_records([(key, value) for key, _, value, _ in CASES], 0),
            encode_records([(ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(8)), (member, None)], 1),
            encode_records([(ConsumerGroupMetadataKey("h"), ConsumerGroupMetadataValue(1))], 2),
            encode_records([(ConsumerGroupMetadataKey("h"), None)], 3),
        ]
    )
    live: dict[str, dict[ConsumerRecordKey, ConsumerRecordValue]] = {}
    stats = ReplayStats()
    replay_batches(log, OffsetStore(4096), {}, stats, live)
    assert set(live) == {"g"}  # h's only key was removed
    assert member not in live["g"] and live["g"][ConsumerGroupMetadataKey("g")] == ConsumerGroupMetadataValue(8)
    assert len(live["g"]) == 5 and (stats.records, stats.skipped) == (10, 0)

    # A reader that hosts no consumer groups counts them as skipped and leaves its other state alone.
    stats = ReplayStats()
    classic: dict[str, object] = {}
    replay_batches(log, OffsetStore(4096), classic, stats)  # type: ignore[arg-type]
    assert (stats.records, stats.skipped, classic) == (0, 10, {})


def test_a_classic_members_metadata_is_the_tagged_field_0_kafka_writes() -> None:
    """ClassicMemberMetadata: tag 0, its size, a presence byte (a nullable struct), then the session timeout and the
    supported protocols (compact name, compact bytes, no tags each), and the struct's own empty tag section."""
    value = ConsumerGroupMemberMetadataValue(
        None, None, "c", "h", ("t",), None, 300, None, ClassicMemberMetadata(10_000, (("range", b"\x00\x03"),))
    )
    protocols = b"\x02" + cs("range") + b"\x03\x00\x03" + NO_TAGS
    struct_bytes = b"\x01" + i32(10_000) + protocols + NO_TAGS
    expected = (
        VALUE_V0
        + b"\x00\x00"  # instance id, rack id: null
        + cs("c")
        + cs("h")
        + b"\x02"
        + cs("t")
        + b"\x00"  # regex
        + i32(300)
        + b"\x00"  # server assignor
        + b"\x01\x00"  # one tagged field, tag 0
        + bytes([len(struct_bytes)])
        + struct_bytes
    )
    key = ConsumerGroupMemberMetadataKey("g", "m")
    assert encode_value(value) == expected
    assert decode_record(encode_key(key), expected) == (key, value)
    assert describe_record(encode_key(key), expected)["value"]["classic_member_metadata"] == {
        "session_timeout_ms": 10_000,
        "supported_protocols": ["range"],
    }


def test_the_regular_expression_record_is_key_16() -> None:
    key = ConsumerGroupRegularExpressionKey("g", "orders-.*")
    value = ConsumerGroupRegularExpressionValue(("orders-eu", "orders-us"), 42, 1_700_000_000_000)
    assert encode_key(key) == struct.pack(">h", 16) + s("g") + s("orders-.*")
    expected = VALUE_V0 + b"\x03" + cs("orders-eu") + cs("orders-us") + struct.pack(">qq", 42, 1_700_000_000_000)
    assert encode_value(value) == expected + NO_TAGS
    assert decode_record(encode_key(key), expected + NO_TAGS) == (key, value)
    assert decode_record(encode_key(key), None) == (key, None)


def test_partition_racks_round_trip_in_the_partition_metadata() -> None:
    value = ConsumerGroupPartitionMetadataValue((TopicMetadata(T, "t", 2, (frozenset({"r1", "r2"}), frozenset())),))
    key = ConsumerGroupPartitionMetadataKey("g")
    data = encode_value(value)
    assert (cs("r1") + cs("r2")) in data  # each partition's racks, sorted
    assert decode_record(encode_key(key), data) == (key, value)
