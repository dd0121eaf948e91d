"""The consumer protocol's bytes, checked against layouts written out by hand from Kafka's published schemas
(ConsumerProtocolSubscription / ConsumerProtocolAssignment): int16 version, int32 array counts, int16-length
strings, int32-length bytes, -1 for null."""

from __future__ import annotations

import pytest

from odradek.client.consumer.protocol import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
)
from odradek.client.errors import CorruptRecordError
from odradek.client.structs import TopicPartition as TP

SUBSCRIPTION = Subscription(
    topics=("topic1", "t0"),
    user_data=b"\x01\x02",
    owned_partitions=(TP("topic1", 1), TP("t0", 2), TP("t0", 0)),
    generation_id=7,
    rack_id="r1",
)
SUBSCRIPTION_V3 = bytes.fromhex(
    "0003"  # version 3
    "00000002"
    "0002"
    "7430"
    "0006"
    "746f70696331"  # topics, sorted: "t0", "topic1"
    "00000002"
    "0102"  # user_data
    "00000002"  # owned_partitions: 2 topics, sorted
    "0002"
    "7430"
    "00000002"
    "00000000"
    "00000002"  # "t0": [0, 2]
    "0006"
    "746f70696331"
    "00000001"
    "00000001"  # "topic1": [1]
    "00000007"  # generation_id
    "0002"
    "7231"  # rack_id "r1"
)
ASSIGNMENT = Assignment(partitions=(TP("t1", 1), TP("t0", 0), TP("t1", 0)))
ASSIGNMENT_V3 = bytes.fromhex(
    "0003"
    "00000002"  # two topics, sorted
    "0002"
    "7430"
    "00000001"
    "00000000"  # "t0": [0]
    "0002"
    "7431"
    "00000002"
    "00000000"
    "00000001"  # "t1": [0, 1]
    "ffffffff"  # user_data null
)


def test_subscription_golden_bytes() -> None:
    assert SUBSCRIPTION.encode() == SUBSCRIPTION_V3
    assert Subscription.decode(SUBSCRIPTION_V3) == SUBSCRIPTION


def test_assignment_golden_bytes() -> None:
    assert ASSIGNMENT.encode() == ASSIGNMENT_V3
    assert Assignment.decode(ASSIGNMENT_V3) == ASSIGNMENT
    # Kafka writes a topic's partitions in its list's order; any order reads back as the same assignment.
    unsorted = bytes.fromhex("00030000000200027431000000020000000100000000")
    assert Assignment.decode(unsorted + bytes.fromhex("000274300000000100000000ffffffff")) == ASSIGNMENT
    for version in (0, 1, 2):  # the same layout under every version
        assert Assignment.decode(version.to_bytes(2, "big") + ASSIGNMENT_V3[2:]) == ASSIGNMENT


def test_older_subscription_versions_get_the_defaults() -> None:
    v0 = bytes.fromhex("00000000000100026162ffffffff")
    assert Subscription.decode(v0) == Subscription(topics=("ab",))
    v1 = bytes.fromhex("000100000001000261620000000000000001000261620000000100000003")
    assert Subscription.decode(v1) == Subscription(topics=("ab",), user_data=b"", owned_partitions=(TP("ab", 3),))
    v2 = v1[:2].replace(b"\x00\x01", b"\x00\x02") + v1[2:] + bytes.fromhex("00000009")
    decoded = Subscription.decode(v2)
    assert (decoded.generation_id, decoded.rack_id) == (9, None)


def test_a_newer_version_is_read_with_the_fields_known() -> None:
    newer = b"\x00\x07" + SUBSCRIPTION_V3[2:] + b"future field"
    assert Subscription.decode(newer) == SUBSCRIPTION
    assert Assignment.decode(b"\x00\x04" + ASSIGNMENT_V3[2:] + b"\x00\x01") == ASSIGNMENT


def test_empty_rack_and_null_user_data() -> None:
    sub = Subscription(topics=("t",), rack_id="")
    assert Subscription.decode(sub.encode()).rack_id is None
    assert Subscription.decode(Subscription(topics=()).encode()) == Subscription(topics=())


@pytest.mark.parametrize("cut", range(len(SUBSCRIPTION_V3)))
def test_every_truncation_of_a_subscription_is_a_typed_error(cut: int) -> None:
    with pytest.raises(ConsumerProtocolError):
        Subscription.decode(SUBSCRIPTION_V3[:cut])


@pytest.mark.parametrize("cut", range(len(ASSIGNMENT_V3)))
def test_every_truncation_of_an_assignment_is_a_typed_error(cut: int) -> None:
    with pytest.raises(ConsumerProtocolError):
        Assignment.decode(ASSIGNMENT_V3[:cut])


@pytest.mark.parametrize(
    "data",
    [
        bytes.fromhex("ffff00000000ffffffff"),  # negative version
        bytes.fromhex("0000ffffffffffffffff"),  # null topics array
        bytes.fromhex("000000000001ffffffffffff"),  # null topic name
        bytes.fromhex("000000000001fffeffffffff"),  # negative string length
        bytes.fromhex("0000000000010001ffffffffff"),  # not UTF-8
        bytes.fromhex("000000000000fffffffe"),  # negative bytes length
        bytes.fromhex("000100000000ffffffff0000000100016100000001ffffffff"),  # partition -1
        bytes.fromhex("000000000000ffffffff00"),  # a byte left over in a known version
    ],
)
def test_corrupt_subscriptions(data: bytes) -> None:
    with pytest.raises(ConsumerProtocolError) as caught:
        Subscription.decode(data)
    assert isinstance(caught.value, CorruptRecordError) and not caught.value.retriable


def test_an_assignment_naming_a_partition_twice_is_corrupt() -> None:
    data = bytes.fromhex("000300000001000161000000020000000000000000ffffffff")
    with pytest.raises(ConsumerProtocolError):
        Assignment.decode(data)


def test_values_the_layout_cannot_carry_are_refused() -> None:
    with pytest.raises(ValueError):
        Subscription(topics=("x" * 40_000,))
    with pytest.raises(ValueError):
        Subscription(topics=("t",), generation_id=2**31)
    with pytest.raises(ValueError):
        Assignment(partitions=(TP("t", -1),))


def test_group_instance_id_is_not_in_the_bytes() -> None:
    static = Subscription(topics=("t",), group_instance_id="i-1")
    assert static.encode() == Subscription(topics=("t",)).encode()
    assert Subscription.decode(static.encode()).group_instance_id is None
