"""The per-topic lists of the group rpcs' requests, built the same way for the consumer and the admin client."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from odradek.client.structs import OffsetAndMetadata, TopicPartition
from odradek.proto import group_pb2 as gpb


def commit_topics(offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> list[gpb.OffsetCommitTopic]:
    """OffsetCommit's topics, partitions in order; an unknown leader epoch is sent as -1."""
    by_topic: dict[str, list[gpb.OffsetCommitPartition]] = {}
    for tp, om in sorted(offsets.items()):
        by_topic.setdefault(tp.topic, []).append(
            gpb.OffsetCommitPartition(
                partition=tp.partition,
                committed_offset=om.offset,
                committed_leader_epoch=-1 if om.leader_epoch is None else om.leader_epoch,
                committed_metadata=om.metadata,
            )
        )
    return [gpb.OffsetCommitTopic(name=t, partitions=ps) for t, ps in by_topic.items()]


def partitions_by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """Partition numbers grouped by topic, for OffsetFetch and OffsetDelete."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return by_topic
