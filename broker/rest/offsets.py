"""Resetting a consumer group's offsets, without I/O: which partitions a reset covers and the offset each gets, as
Kafka's ``kafka-consumer-groups --reset-offsets`` chooses them (an offset outside the log is moved to its nearest
bound; a time after the last record resets to the end)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from odradek.broker.rest import errors
from odradek.broker.rest.requests import ResetGroupOffsets
from odradek.client.structs import TopicPartition

EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1  # ListOffsets' special timestamps


def covered(
    r: ResetGroupOffsets, committed: Iterable[TopicPartition], partitions_of: Mapping[str, int]
) -> list[TopicPartition]:
    """The partitions the reset moves: every partition of the topics named (all the group has committed on when
    none is), only ``r.partitions`` of a single one when given; a topic or partition that does not exist is 404."""
    topics = r.topics or tuple(sorted({tp.topic for tp in committed}))
    if not topics:
        raise errors.bad_request(f"group {r.group} has committed no offsets: name the topics to reset")
    for topic in topics:
        if topic not in partitions_of:
            raise errors.unknown_topic(topic)
    if r.partitions:
        if len(topics) != 1:
            raise errors.bad_request("'partitions' needs exactly one topic in 'topics'")
        for p in r.partitions:
            if not 0 <= p < partitions_of[topics[0]]:
                raise errors.partition_not_found(topics[0], p)
        return [TopicPartition(topics[0], p) for p in sorted(set(r.partitions))]
    return [TopicPartition(t, p) for t in topics for p in range(partitions_of[t])]


def lookup_timestamp(r: ResetGroupOffsets) -> int | None:
    """The ListOffsets timestamp the target needs besides the log's bounds (None: the bounds are enough)."""
    return r.timestamp_ms if r.to == "timestamp" else None


def targets(
    r: ResetGroupOffsets,
    partitions: Iterable[TopicPartition],
    starts: Mapping[TopicPartition, int],
    ends: Mapping[TopicPartition, int],
    at_time: Mapping[TopicPartition, int],
) -> dict[TopicPartition, int]:
    """Each partition's new offset: its log start, its end, ``r.offset`` moved within the two, or the first offset at
    or after ``r.timestamp_ms`` (the end when there is none: ``at_time`` answers -1)."""
    out = {}
    for tp in partitions:
        start, end = starts[tp], ends[tp]
        if r.to == "earliest":
            out[tp] = start
        elif r.to == "latest":
            out[tp] = end
        elif r.to == "offset":
            out[tp] = min(max(r.offset, start), end)
        else:
            found = at_time[tp]
            out[tp] = end if found < 0 else found
    return out
