"""Republishing records from one topic to another, without I/O: which offsets of which source partitions to read,
the destination partition of each record, and the batches each destination partition is sent.

Records keep their key, value and headers (and, when asked, their timestamps); each destination partition receives
its records in their source order (by partition, then offset), in batches of at most ``BATCH_BYTES``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from odradek.broker.rest import errors
from odradek.broker.rest.requests import RepublishRecords
from odradek.client.producer.partitioner import partition_for_key
from odradek.client.record.batch import Record
from odradek.client.record.builder import BatchBuilder

MAX_RECORDS = 10_000  # one republish, selected or in a range
BATCH_BYTES = 512 * 1024  # below the default max.message.bytes (1 MiB) with room for headers


@dataclass(frozen=True, slots=True)
class SourceRange:
    """What to read of one source partition: offsets ``start`` up to ``end`` (excluded), keeping ``wanted`` (None:
    every record in the range)."""

    partition: int
    start: int
    end: int
    wanted: frozenset[int] | None = None

    def keeps(self, offset: int) -> bool:
        return self.start <= offset < self.end and (self.wanted is None or offset in self.wanted)


def plan(r: RepublishRecords) -> list[SourceRange]:
    """The source partitions' ranges to read, by partition."""
    if r.partition is not None:
        return [SourceRange(r.partition, r.start_offset, r.end_offset)]
    by_partition: dict[int, set[int]] = {}
    for partition, offset in r.records:
        by_partition.setdefault(partition, set()).add(offset)
    return [SourceRange(p, min(found), max(found) + 1, frozenset(found)) for p, found in sorted(by_partition.items())]


def missing(ranges: Sequence[SourceRange], found: Mapping[int, Sequence[Record]]) -> list[tuple[int, int]]:
    """The selected records that were not read (removed by retention or compaction, or never written), as
    (partition, offset) pairs; a range's gaps are not missing records."""
    out = []
    for source in ranges:
        if source.wanted is None:
            continue
        seen = {r.offset for r in found.get(source.partition, ())}
        out += [(source.partition, o) for o in sorted(source.wanted - seen)]
    return out


def destination(
    source_partition: int, key: bytes | None, partitions: int, same_partition: bool, pick: Callable[[int], int]
) -> int:
    """The destination partition of a record: the same number as its source's (refused where the destination has
    fewer partitions), else the key's as a Kafka producer chooses it (murmur2), else ``pick(partitions)``."""
    if same_partition:
        if source_partition >= partitions:
            raise errors.bad_request(
                f"same_partition: the destination has {partitions} partitions, no partition {source_partition}"
            )
        return source_partition
    return partition_for_key(key, partitions) if key is not None else pick(partitions)


def route(
    records: Iterable[tuple[int, Record]], partitions: int, same_partition: bool, pick: Callable[[int], int]
) -> dict[int, list[Record]]:
    """Source (partition, record) pairs by destination partition, each list in source order."""
    out: dict[int, list[Record]] = {}
    for source_partition, r in records:
        out.setdefault(destination(source_partition, r.key, partitions, same_partition, pick), []).append(r)
    return out


def batches(records: Sequence[Record], now_ms: int, keep_timestamps: bool) -> list[bytes]:
    """The records as batches of at most ``BATCH_BYTES`` (a larger record alone in one), timestamped now unless
    ``keep_timestamps``."""
    out: list[bytes] = []
    builder = BatchBuilder(batch_size=BATCH_BYTES)
    for r in records:
        timestamp = r.timestamp if keep_timestamps else now_ms
        if builder.append(timestamp, r.key, r.value, r.headers) is None:
            out.append(builder.build())
            builder = BatchBuilder(batch_size=BATCH_BYTES)
            builder.append(timestamp, r.key, r.value, r.headers)
    if builder.records_count:
        out.append(builder.build())
    return out
