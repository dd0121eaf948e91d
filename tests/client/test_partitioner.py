import random
import warnings

import pytest

from odradek.client.producer.partitioner import StickyPartitioner, murmur2, partition_for_key

with warnings.catch_warnings():  # kafka-python's protocol package uses deprecated importlib.resources calls
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import DefaultPartitioner
    from kafka.partitioner.default import murmur2 as kafka_murmur2

# Utils.murmur2 outputs printed by Kafka's Java code (as collected by kafkajs' Java-compatible partitioner tests).
JAVA_MURMUR2 = {
    b"0": 971027396,
    b"1": -1993445489,
    b"128": -326012175,
    b"2187": -1508407203,
    b"16384": -325739742,
    b"78125": -1654490814,
    b"279936": 1462227128,
    b"823543": -2014198330,
    b"2097152": 607668903,
    b"4782969": -1182699775,
    b"10000000": -1830336757,
    b"19487171": -1603849305,
    b"35831808": -857013643,
    b"62748517": -1167431028,
    b"105413504": -381294639,
    b"170859375": -1658323481,
    b"100:48069": 1009543857,
}
# Partitions out of 1000, from Kafka's Java partitioner (kafka-python's compatibility test vectors).
JAVA_PARTITIONS_OF_1000 = {b"": 681, b"a": 524, b"ab": 434, b"abc": 107, b"123456789": 566, b"\x00 ": 742}


@pytest.mark.parametrize(("key", "expected"), JAVA_MURMUR2.items())
def test_murmur2_matches_kafkas_java_output(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


@pytest.mark.parametrize(("key", "expected"), JAVA_PARTITIONS_OF_1000.items())
def test_keyed_partition_matches_kafkas(key: bytes, expected: int) -> None:
    assert partition_for_key(key, 1000) == expected


class _Cluster:
    """The three methods kafka-python's DefaultPartitioner asks of its cluster metadata."""

    def __init__(self, partitions: int) -> None:
        self.partitions = set(range(partitions))

    def topics(self) -> set[str]:
        return {"t"}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return self.partitions

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return self.partitions


def test_random_keys_agree_with_kafka_python() -> None:
    rng = random.Random(480)
    partitioner = DefaultPartitioner()
    for _ in range(3000):
        key = rng.randbytes(rng.randrange(0, 64))
        count = rng.randrange(1, 200)
        unsigned = murmur2(key) & 0xFFFFFFFF
        assert unsigned == kafka_murmur2(key)
        assert partition_for_key(key, count) == partitioner.partition("t", None, key, None, None, _Cluster(count))


def test_sticky_partition_moves_to_another_available_one() -> None:
    sticky = StickyPartitioner()
    first = sticky.next("t", 3, [0, 1, 2])
    assert sticky.current["t"] == first
    for _ in range(50):
        previous = sticky.current["t"]
        assert sticky.next("t", 3, [0, 1, 2], previous) != previous
    assert {sticky.next("t", 4, [3]) for _ in range(20)} == {3}  # only partition 3 has a leader
    assert {sticky.next("t", 2, []) for _ in range(50)} == {0, 1}  # none has one: any partition
    assert sticky.next("t", 1, [0], 0) == 0
