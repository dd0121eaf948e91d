"""Choosing a partition: Kafka's murmur2 for keyed records, sticky partitioning for the rest.

A keyed record goes where Kafka's Java producer would send it, ``toPositive(murmur2(key)) % numPartitions``, so
odradek and Kafka clients agree on which partition holds a key. Records without a key stick to one partition until
its batch is full, then move to another one chosen at random (KIP-480): whole batches instead of one record per
partition per batch, at the same spread over time.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable

_WORDS: dict[int, Callable[[bytes], tuple[int, ...]]] = {}  # key length // 4 -> unpacker of its 32-bit words


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: the 32-bit MurmurHash2 of ``data`` with Kafka's seed, as a signed Java int.

    Constants are inlined and each word's two multiplications masked once: Python ints do not overflow, and
    masking after the xor equals masking each operand."""
    length = len(data)
    h = 0x9747B28C ^ length
    n = length >> 2
    words = _WORDS.get(n)
    if words is None:
        words = _WORDS[n] = struct.Struct(f"<{n}I").unpack_from
    for k in words(data):
        k = (k * 0x5BD1E995) & 0xFFFFFFFF
        h = ((h * 0x5BD1E995) ^ ((k ^ (k >> 24)) * 0x5BD1E995)) & 0xFFFFFFFF
    tail = length & 3
    if tail:
        base = length - tail
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h = ((h ^ data[base]) * 0x5BD1E995) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0x5BD1E995) & 0xFFFFFFFF
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key``."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class StickyPartitioner:
    """The current partition for key-less records, per topic. ``current`` is read on every send without a lock (a
    dict lookup is atomic); ``next`` runs only when the accumulator reports that the sticky batch is full."""

    __slots__ = ("current",)

    def __init__(self) -> None:
        self.current: dict[str, int] = {}

    def next(self, topic: str, num_partitions: int, available: list[int], previous: int | None = None) -> int:
        """Move ``topic`` to a partition other than ``previous``, preferring ones with a leader."""
        choices = [p for p in available if p < num_partitions] or list(range(num_partitions))
        if len(choices) > 1 and previous is not None:
            choices = [p for p in choices if p != previous] or choices
        partition = self.current[topic] = random.choice(choices)
        return partition
