"""The ``__consumer_offsets`` record codec (broker/groups/records.py) against Kafka's published layout.

The golden byte strings below were written out by hand from Kafka's schemas (OffsetCommitKey/Value,
GroupMetadataKey/Value), field by field, so that a change of the format fails here.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.broker.groups.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    OffsetsRecordError,
    UnknownRecordVersionError,
    decode_key,
    decode_record,
    decode_value,
    describe_record,
    encode_key,
    encode_value,
    group_tombstone,
)
from odradek.client.errors import CorruptRecordError, ErrorCode, InvalidRequestError


def i16(n: int) -> bytes:
    return n.to_bytes(2, "big", signed=True)


def i32(n: int) -> bytes:
    return n.to_bytes(4, "big", signed=True)


def i64(n: int) -> bytes:
    return n.to_bytes(8, "big", signed=True)


def s(text: str) -> bytes:
    return i16(len(text.encode())) + text.encode()


MEMBER = MemberMetadata(
    member_id="m1",
    group_instance_id=None,
    client_id="c",
    client_host="/h",
    rebalance_timeout=300_000,
    session_timeout=45_000,
    subscription=b"\x01",
    assignment=b"",
)
GROUP = GroupMetadataValue(
    protocol_type="consumer",
    generation=1,
    protocol="range",
    leader="m1",
    current_state_timestamp=1000,
    members=(MEMBER,),
)

# ---- golden bytes, by hand ----


def test_offset_commit_key_golden() -> None:
    key = OffsetCommitKey(group="g", topic="t", partition=1)
    golden = b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x01"
    assert encode_key(key) == golden
    assert decode_key(golden) == key
    # version 0 has the same fields
    assert decode_key(b"\x00\x00" + golden[2:]) == key


def test_group_metadata_key_golden() -> None:
    golden = b"\x00\x02\x00\x01g"
    assert encode_key(GroupMetadataKey("g")) == golden
    assert decode_key(golden) == GroupMetadataKey("g")


def test_offset_commit_value_v3_golden() -> None:
    value = OffsetCommitValue(offset=5, metadata="m", commit_timestamp=1000, leader_epoch=2)
    golden = (
        b"\x00\x03"  # version 3
        + b"\x00\x00\x00\x00\x00\x00\x00\x05"  # offset
        + b"\x00\x00\x00\x02"  # leader epoch
        + b"\x00\x01m"  # metadata
        + b"\x00\x00\x00\x00\x00\x00\x03\xe8"  # commit timestamp
    )
    assert encode_value(value) == golden
    assert decode_value(OffsetCommitKey("g", "t", 0), golden) == value


def test_offset_commit_value_older_versions_golden() -> None:
    key = OffsetCommitKey("g", "t", 0)
    v0 = b"\x00\x00" + i64(5) + s("m") + i64(1000)
    assert decode_value(key, v0) == OffsetCommitValue(offset=5, metadata="m", commit_timestamp=1000)
    v1 = b"\x00\x01" + i64(5) + s("") + i64(1000) + i64(2000)
    expiring = OffsetCommitValue(offset=5, metadata="", commit_timestamp=1000, expire_timestamp=2000)
    assert decode_value(key, v1) == expiring
    assert encode_value(expiring) == v1  # an explicit expire timestamp is written as version 1, as Kafka does
    v2 = b"\x00\x02" + i64(5) + s("m") + i64(1000)
    assert decode_value(key, v2) == OffsetCommitValue(offset=5, metadata="m", commit_timestamp=1000)


def test_offset_commit_value_flexible_v4_skips_unknown_tagged_fields() -> None:
    body = i64(5) + i32(2) + b"\x02m" + i64(1000)  # compact string: varint length + 1
    value = OffsetCommitValue(offset=5, metadata="m", commit_timestamp=1000, leader_epoch=2)
    assert encode_value(value, version=4) == b"\x00\x04" + body + b"\x00"
    tagged = b"\x00\x04" + body + b"\x01" + b"\x05" + b"\x02" + b"\xaa\xbb"  # one field: tag 5, 2 bytes
    assert decode_value(OffsetCommitKey("g", "t", 0), tagged) == value


def test_group_metadata_value_v3_golden() -> None:
    golden = (
        b"\x00\x03"
        + b"\x00\x08consumer"
        + b"\x00\x00\x00\x01"  # generation
        + b"\x00\x05range"
        + b"\x00\x02m1"  # leader
        + b"\x00\x00\x00\x00\x00\x00\x03\xe8"  # current state timestamp
        + b"\x00\x00\x00\x01"  # one member
        + b"\x00\x02m1"
        + b"\xff\xff"  # null group instance id
        + b"\x00\x01c"
        + b"\x00\x02/h"
        + b"\x00\x04\x93\xe0"  # rebalance timeout 300000
        + b"\x00\x00\xaf\xc8"  # session timeout 45000
        + b"\x00\x00\x00\x01\x01"  # subscription
        + b"\x00\x00\x00\x00"  # empty assignment
    )
    assert encode_value(GROUP) == golden
    assert decode_value(GroupMetadataKey("g"), golden) == GROUP


def test_empty_group_metadata_v3_golden_has_null_protocol_and_leader() -> None:
    empty = GroupMetadataValue("consumer", 2, None, None, 5, ())
    golden = b"\x00\x03" + s("consumer") + i32(2) + b"\xff\xff" + b"\xff\xff" + i64(5) + i32(0)
    assert encode_value(empty) == golden
    assert decode_value(GroupMetadataKey("g"), golden) == empty


def test_group_metadata_v0_takes_the_session_timeout_as_rebalance_timeout() -> None:
    member = s("m1") + s("c") + s("/h") + i32(10_000) + i32(1) + b"\x01" + i32(0)
    v0 = b"\x00\x00" + s("consumer") + i32(1) + s("range") + s("m1") + i32(1) + member
    decoded = decode_value(GroupMetadataKey("g"), v0)
    assert isinstance(decoded, GroupMetadataValue)
    assert decoded.current_state_timestamp == -1
    assert decoded.members == (MemberMetadata("m1", None, "c", "/h", 10_000, 10_000, b"\x01", b""),)


def test_group_metadata_flexible_v4() -> None:
    member = b"\x03m1" + b"\x00" + b"\x02c" + b"\x03/h" + i32(300_000) + i32(45_000) + b"\x02\x01" + b"\x01" + b"\x00"
    v4 = b"\x00\x04" + b"\x09consumer" + i32(1) + b"\x06range" + b"\x03m1" + i64(1000) + b"\x02" + member + b"\x00"
    assert encode_value(GROUP, version=4) == v4
    assert decode_value(GroupMetadataKey("g"), v4) == GROUP


# ---- round trips of every version read ----


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_offset_commit_value_round_trips(version: int) -> None:
    value = OffsetCommitValue(
        offset=2**40,
        metadata="méta",
        commit_timestamp=1_700_000_000_000,
        leader_epoch=7 if version >= 3 else -1,
        expire_timestamp=1_800_000_000_000 if version == 1 else -1,
    )
    key = OffsetCommitKey("g", "t", 3)
    assert decode_value(key, encode_value(value, version=version)) == value


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_metadata_value_round_trips(version: int) -> None:
    members = tuple(
        MemberMetadata(
            member_id=f"m{i}",
            group_instance_id=f"i{i}" if version >= 3 else None,
            client_id="client",
            client_host="/10.0.0.1",
            rebalance_timeout=60_000 if version >= 1 else 45_000,
            session_timeout=45_000,
            subscription=bytes(range(i + 3)),
            assignment=b"\x00" * i,
        )
        for i in range(3)
    )
    value = GroupMetadataValue("consumer", 9, "range", "m0", 12345 if version >= 2 else -1, members)
    assert decode_value(GroupMetadataKey("g"), encode_value(value, version=version)) == value


@settings(max_examples=60, deadline=None)
@given(
    group=st.text(max_size=20),
    topic=st.text(max_size=20),
    partition=st.integers(0, 2**31 - 1),
    offset=st.integers(-1, 2**63 - 1),
    epoch=st.integers(-1, 2**31 - 1),
    metadata=st.text(max_size=40),
    ts=st.integers(0, 2**62),
)
def test_any_commit_round_trips(
    group: str, topic: str, partition: int, offset: int, epoch: int, metadata: str, ts: int
) -> None:
    key = OffsetCommitKey(group, topic, partition)
    value = OffsetCommitValue(offset, metadata, ts, epoch)
    encoded = encode_value(value)
    assert encoded is not None
    assert decode_record(encode_key(key), encoded) == (key, value)


def test_tombstones() -> None:
    assert encode_value(None) is None
    assert decode_value(OffsetCommitKey("g", "t", 0), None) is None
    key, value = group_tombstone("g")
    assert decode_record(encode_key(key), encode_value(value)) == (GroupMetadataKey("g"), None)


# ---- corrupt and unknown input ----


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        b"\x00\x01\x00\x05ab",  # string shorter than its length
        b"\x00\x01\x00\x01g\x00\x01t\x00\x00",  # truncated partition
        b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x01\x00",  # trailing byte
        b"\x00\x02\xff\xff",  # null group
        b"\x00\x02\xff\xfe",  # negative length
        b"\x00\x02\x00\x01\xff",  # not UTF-8
    ],
)
def test_corrupt_keys_raise_a_typed_error(data: bytes) -> None:
    with pytest.raises(OffsetsRecordError) as info:
        decode_key(data)
    assert isinstance(info.value, CorruptRecordError)
    assert info.value.code == ErrorCode.CORRUPT_MESSAGE


def test_unknown_key_version() -> None:
    with pytest.raises(UnknownRecordVersionError) as info:
        decode_key(b"\x00\x11\x00\x01g")  # a record type of groups this coordinator does not host (streams)
    assert (info.value.kind, info.value.version) == ("key", 17)


def test_unknown_value_versions() -> None:
    with pytest.raises(UnknownRecordVersionError):
        decode_value(OffsetCommitKey("g", "t", 0), b"\x00\x05" + i64(1) + s("") + i64(1))
    with pytest.raises(UnknownRecordVersionError):
        decode_value(GroupMetadataKey("g"), b"\xff\xff")
    with pytest.raises(UnknownRecordVersionError):
        encode_value(GROUP, version=5)


@pytest.mark.parametrize(
    "data",
    [
        encode_value(GROUP)[:-3],  # type: ignore[index]
        encode_value(GROUP) + b"\x00",  # type: ignore[operator]
        b"\x00\x03" + s("consumer") + i32(1) + b"\xff\xff\xff\xff" + i64(0) + i32(1) + b"\xff\xff",  # null member id
        b"\x00\x03" + s("consumer") + i32(1) + b"\xff\xff\xff\xff" + i64(0) + b"\xff\xff\xff\xff",  # null members
        b"\x00\x04" + b"\x00",  # flexible: null protocol type
        b"\x00\x04" + b"\xff\xff\xff\xff\xff\x01",  # flexible: varint too long
    ],
)
def test_corrupt_group_values_raise_a_typed_error(data: bytes) -> None:
    with pytest.raises(OffsetsRecordError):
        decode_value(GroupMetadataKey("g"), data)


def test_a_string_too_long_for_the_format_is_refused_on_encode() -> None:
    with pytest.raises(InvalidRequestError):
        encode_key(GroupMetadataKey("g" * 32768))
    with pytest.raises(InvalidRequestError):
        encode_key(OffsetCommitKey("g", "t", 2**31))


# ---- the JSON view ----


def test_describe_an_offset_commit() -> None:
    key = encode_key(OffsetCommitKey("g", "t", 1))
    value = encode_value(OffsetCommitValue(5, "m", 1000, 2))
    assert describe_record(key, value) == {
        "type": "offset_commit",
        "key": {"version": 1, "group": "g", "topic": "t", "partition": 1},
        "value": {"version": 3, "offset": 5, "leader_epoch": 2, "metadata": "m", "commit_timestamp": 1000},
    }
    assert describe_record(key, None)["value"] is None


def test_describe_group_metadata() -> None:
    view = describe_record(encode_key(GroupMetadataKey("g")), encode_value(GROUP), binary="hex")
    assert view["type"] == "group_metadata"
    assert view["key"] == {"version": 2, "group": "g"}
    assert view["value"] == {
        "version": 3,
        "protocol_type": "consumer",
        "generation": 1,
        "protocol": "range",
        "leader": "m1",
        "current_state_timestamp": 1000,
        "members": [
            {
                "member_id": "m1",
                "group_instance_id": None,
                "client_id": "c",
                "client_host": "/h",
                "rebalance_timeout": 300_000,
                "session_timeout": 45_000,
                "subscription": "01",
                "assignment": "",
            }
        ],
    }
    base64_view = describe_record(encode_key(GroupMetadataKey("g")), encode_value(GROUP))
    assert base64_view["value"]["members"][0]["subscription"] == "AQ=="  # type: ignore[index]
