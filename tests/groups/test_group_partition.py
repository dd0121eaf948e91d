"""A group's offsets partition (broker/groups/partitioner.py) is Kafka's: Utils.abs(groupId.hashCode()) % n.

The hash codes are what a JVM's ``String.hashCode`` returns for these strings (checked with jshell).
"""

from __future__ import annotations

import pytest

from odradek.broker.groups.partitioner import java_string_hashcode, kafka_abs, offsets_partition_for


@pytest.mark.parametrize(
    ("text", "hashcode"),
    [
        ("", 0),
        ("a", 97),
        ("ab", 97 * 31 + 98),
        ("my-group", -1906497762),
        ("consumerGroup1", -983959256),
        ("console-consumer-12345", 158455506),
        ("test-group", 627841412),
        ("grüße-€", 426799350),  # non-ASCII: UTF-16 code units, not UTF-8 bytes
        ("g😀", 1871882),  # outside the BMP: a surrogate pair counts as two units
        ("polygenelubricants", -(2**31)),
    ],
)
def test_java_string_hashcode(text: str, hashcode: int) -> None:
    assert java_string_hashcode(text) == hashcode


def test_kafka_abs_maps_int_min_to_zero() -> None:
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-5) == 5
    assert kafka_abs(7) == 7


@pytest.mark.parametrize(
    ("group", "partitions", "expected"),
    [
        ("my-group", 50, 1906497762 % 50),  # 12; a bit mask (h & 0x7fffffff) would give 36
        ("consumerGroup1", 50, 6),
        ("test-group", 50, 12),
        ("polygenelubricants", 50, 0),  # Integer.MIN_VALUE: Math.abs would stay negative, Utils.abs gives 0
        ("anything", 1, 0),
    ],
)
def test_offsets_partition_for(group: str, partitions: int, expected: int) -> None:
    assert offsets_partition_for(group, partitions) == expected


def test_the_partition_count_must_be_positive() -> None:
    with pytest.raises(ValueError):
        offsets_partition_for("g", 0)
