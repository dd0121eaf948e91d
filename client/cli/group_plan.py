"""The pure part of ``odradek group describe`` and ``group reset-offsets``: per-partition lag rows and the reset
plan, computed from offsets the command has fetched (no I/O here, so they are unit-tested directly).

The rules follow Kafka's kafka-consumer-groups: lag is the log end offset (the high watermark) minus the committed
offset, never below 0, and unknown (null, shown '-') for a partition with no commit; ``--shift-by`` and
``--to-offset`` are clamped into [log start, log end]; ``--to-datetime`` goes to the first record at or after the
time, or to the log end when no record is that recent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from odradek.client.cli.common import CommandError
from odradek.client.structs import TopicPartition

RESET_KINDS = ("to-earliest", "to-latest", "to-offset", "to-datetime", "shift-by")


@dataclass(frozen=True)
class PartitionOffsets:
    """What the plan needs of one partition: its log range, the group's commit (None: none) and, for
    ``--to-datetime``, the first offset at or after the time (None: no record that recent)."""

    log_start: int
    log_end: int
    committed: int | None
    at_time: int | None = None


def parse_topic_spec(spec: str) -> tuple[str, list[int] | None]:
    """``T`` (every partition) or ``T:P[,P...]``."""
    topic, colon, rest = spec.partition(":")
    if not topic:
        raise CommandError(f"--topic {spec!r}: give T or T:P[,P]")
    if not colon:
        return topic, None
    try:
        partitions = sorted({int(p) for p in rest.split(",") if p.strip()})
    except ValueError:
        raise CommandError(f"--topic {spec!r}: partitions must be integers, as in T:0,1") from None
    if not partitions or partitions[0] < 0:
        raise CommandError(f"--topic {spec!r}: give partitions >= 0, as in T:0,1")
    return topic, partitions


def reset_target(kind: str, value: int | None, p: PartitionOffsets, tp: TopicPartition) -> int:
    """The new committed offset of one partition."""
    if kind == "to-earliest":
        return p.log_start
    if kind == "to-latest":
        return p.log_end
    if kind == "to-offset":
        assert value is not None
        return min(max(value, p.log_start), p.log_end)
    if kind == "to-datetime":
        return p.log_end if p.at_time is None else min(max(p.at_time, p.log_start), p.log_end)
    if kind == "shift-by":
        assert value is not None
        if p.committed is None:
            raise CommandError(f"cannot shift {tp.topic}:{tp.partition}: the group has no committed offset there")
        return min(max(p.committed + value, p.log_start), p.log_end)
    raise CommandError(f"unknown reset {kind!r}: one of {', '.join(RESET_KINDS)}")


def reset_plan(
    kind: str, value: int | None, partitions: Mapping[TopicPartition, PartitionOffsets]
) -> list[dict[str, Any]]:
    """One row per partition, sorted: ``{topic, partition, current_offset, new_offset}`` (current None: none)."""
    return [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "current_offset": p.committed,
            "new_offset": reset_target(kind, value, p, tp),
        }
        for tp, p in sorted(partitions.items())
    ]


def lag(committed: int | None, log_end: int) -> int | None:
    if committed is None or log_end < 0:
        return None
    return max(0, log_end - committed)


def offset_rows(
    partitions: Sequence[TopicPartition],
    committed: Mapping[TopicPartition, int],
    log_ends: Mapping[TopicPartition, int],
    owners: Mapping[TopicPartition, str],
) -> list[dict[str, Any]]:
    """``group describe``'s per-partition rows: committed offset (None: none), log end offset (None: unknown),
    lag and the owning member (None: unassigned)."""
    rows = []
    for tp in sorted(set(partitions)):
        end = log_ends.get(tp, -1)
        rows.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "committed_offset": committed.get(tp),
                "log_end_offset": end if end >= 0 else None,
                "lag": lag(committed.get(tp), end),
                "member_id": owners.get(tp),
            }
        )
    return rows
