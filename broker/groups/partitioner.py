"""Which ``__consumer_offsets`` partition holds a group: exactly Kafka's choice, so both agree on a group's home.

Kafka computes ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions``: Java's ``String.hashCode``
(``h = 31 * h + c`` over the UTF-16 code units, wrapping at 32 bits) and ``Utils.abs``, which maps
``Integer.MIN_VALUE`` (whose ``Math.abs`` is itself) to 0. Python's ``hash()`` is salted per process, so it cannot
serve here.
"""

from __future__ import annotations

_INT32_MIN = -(2**31)


def java_string_hashcode(s: str) -> int:
    """Java's ``String.hashCode`` as a signed 32-bit int (characters outside the BMP count as two code units)."""
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: the absolute value, except ``Integer.MIN_VALUE`` gives 0."""
    return 0 if n == _INT32_MIN else abs(n)


def offsets_partition_for(group: str, num_partitions: int) -> int:
    """The offsets-topic partition of ``group`` among ``num_partitions`` (at least 1)."""
    if num_partitions < 1:
        raise ValueError(f"the offsets topic needs at least one partition, not {num_partitions}")
    return kafka_abs(java_string_hashcode(group)) % num_partitions
