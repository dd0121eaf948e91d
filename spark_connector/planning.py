"""Turning offset bounds into Spark input partitions, with the sizing rules of Spark's Kafka source.

Pure functions over resolved offsets (no -2/-1 sentinels): the driver lists offsets through the client, then
plans here, so the arithmetic that decides what a micro-batch reads is testable without Spark or a broker.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from odradek.client.structs import TopicPartition

__all__ = ["DataLoss", "OffsetRange", "cap_offsets", "data_loss", "plan_ranges", "split_ranges"]


@dataclass(frozen=True)
class OffsetRange:
    """Records ``[start, end)`` of one partition: what one Spark input partition reads."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class DataLoss:
    """A partition whose planned start can no longer be read; ``available`` is None if the partition is gone."""

    topic: str
    partition: int
    requested: int
    available: int | None

    @property
    def message(self) -> str:
        where = f"{self.topic}-{self.partition}"
        if self.available is None:
            cause = f"partition {where} no longer exists"
        else:
            cause = f"offset {self.requested} of {where} is gone, the earliest available is {self.available}"
        return (
            f"{cause}; some data may have been lost (aged out by retention, or the topic was deleted before it was "
            'read). Set the source option "failOnDataLoss" to "false" to continue from the earliest offset instead.'
        )


def plan_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    min_partitions: int | None,
    max_offsets: int | None,
) -> tuple[list[OffsetRange], dict[TopicPartition, int]]:
    """The ranges of one batch from ``start`` to ``end``, and the end actually planned (the next batch's start).

    Every partition of ``end`` needs a start: the caller starts new partitions at their earliest offset, as Spark
    does. ``max_offsets`` lowers the end first (:func:`cap_offsets`), then ``min_partitions`` splits ranges
    (:func:`split_ranges`). A partition whose end is below its start (the log was truncated or the topic
    re-created) is skipped and moved to its new end; :func:`data_loss` is how the caller notices that.
    """
    missing = sorted(set(end) - set(start))
    if missing:
        raise ValueError(f"no start offset for {missing}: start new partitions at their earliest offset")
    for name, offsets in (("start", start), ("end", end)):
        negative = sorted(tp for tp in end if offsets[tp] < 0)
        if negative:
            raise ValueError(f"{name} offsets must be resolved (>= 0), got {[(tp, offsets[tp]) for tp in negative]}")
    new_end = dict(end) if max_offsets is None else cap_offsets(start, end, max_offsets)
    ranges = [OffsetRange(tp.topic, tp.partition, start[tp], new_end[tp]) for tp in sorted(new_end)]
    return split_ranges([r for r in ranges if r.size > 0], min_partitions), new_end


def cap_offsets(
    start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int], max_offsets: int
) -> dict[TopicPartition, int]:
    """Lower ``end`` so the batch holds ``max_offsets`` records, shared in proportion to each partition's backlog.

    Spark's KafkaSource.rateLimit gives a partition ``max_offsets * backlog / total`` records, rounded down, but up
    to 1 when the share is below 1 so that small partitions are never starved. Rounding that way can leave the batch
    short of the cap (floors) or over it (the 1s); this reconciles the rounding, largest-remainder style, so the
    batch holds exactly ``min(max_offsets, total)`` records. The one exception is Spark's own: with more partitions
    having data than ``max_offsets``, each still gets 1 record, so the batch holds one per partition.
    """
    if max_offsets <= 0:
        raise ValueError(f"max_offsets must be positive, got {max_offsets}")
    sizes = {tp: end[tp] - start[tp] for tp in sorted(end) if end[tp] > start[tp]}
    total = sum(sizes.values())
    if total <= max_offsets:
        return dict(end)
    exact = {tp: max_offsets * size / total for tp, size in sizes.items()}
    shares = {tp: math.ceil(x) if x < 1 else math.floor(x) for tp, x in exact.items()}
    given = sum(shares.values())
    # Short of the cap: one more record each to the partitions that lost most to rounding down.
    for tp in sorted(shares, key=lambda tp: shares[tp] - exact[tp])[: max(0, max_offsets - given)]:
        shares[tp] += 1  # the share was rounded down from a fraction below its size, so there is room
    # Over the cap (small shares raised to 1): take back from the largest shares, never below 1.
    for _ in range(given - max_offsets):
        reducible = [tp for tp in shares if shares[tp] > 1]
        if not reducible:
            break
        shares[max(reducible, key=lambda tp: shares[tp] - exact[tp])] -= 1
    return {tp: start[tp] + shares[tp] if tp in shares else offset for tp, offset in end.items()}


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Split large ranges so there are at least ``min_partitions`` of them (if there are that many records).

    As Spark's KafkaOffsetRangeCalculator: a range gets ``round(size / total * min_partitions)`` parts (at least 1),
    and ranges left whole are taken out of the proportion given to the others; each range splits into contiguous,
    near-equal parts (sizes differ by at most 1). Spark's rounding can fall short of ``min_partitions``; here the
    range with the largest parts gets one more part until there are enough, or every part is one record.
    """
    ranges = [r for r in ranges if r.size > 0]
    if not ranges or min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    whole = {r for r in ranges if _part_count(r.size, total, min_partitions) == 1}
    split_total = total - sum(r.size for r in whole)
    split_min = max(min_partitions - len(whole), 1)
    parts = [1 if r in whole else _part_count(r.size, split_total, split_min) for r in ranges]
    while sum(parts) < min_partitions:
        i = max(range(len(ranges)), key=lambda i: ranges[i].size / parts[i])
        if ranges[i].size <= parts[i]:
            break  # every part is already a single record
        parts[i] += 1
    out: list[OffsetRange] = []
    for r, n in zip(ranges, parts):
        offset, remaining = r.start, r.size
        for k in range(n):
            size = remaining // (n - k)  # integer division, the later parts absorb the remainder
            out.append(OffsetRange(r.topic, r.partition, offset, offset + size))
            offset, remaining = offset + size, remaining - size
    return [r for r in out if r.size > 0]


def _part_count(size: int, total: int, min_parts: int) -> int:
    """Spark's ``max(Math.round(size / total * min_parts), 1)``; Math.round rounds halves up, Python's round doesn't."""
    return max(math.floor(size / total * min_parts + 0.5), 1)


def data_loss(start: Mapping[TopicPartition, int], earliest: Mapping[TopicPartition, int]) -> list[DataLoss]:
    """Partitions whose requested start is below the earliest offset still in the log, or that no longer exist.

    With failOnDataLoss the query fails with their messages; without it, reading resumes at ``earliest``.
    Negative starts are sentinels (-2 earliest, -1 latest) and cannot be lost.
    """
    lost = []
    for tp in sorted(start):
        requested = start[tp]
        if requested < 0:
            continue
        if tp not in earliest:
            lost.append(DataLoss(tp.topic, tp.partition, requested, None))
        elif requested < earliest[tp]:
            lost.append(DataLoss(tp.topic, tp.partition, requested, earliest[tp]))
    return lost
