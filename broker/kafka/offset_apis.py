"""Kafka's ListOffsets and OffsetForLeaderEpoch on the Kafka listener.

Both go to the broker's data service (broker/api/data.py), which the gRPC listener's ListOffsets calls too.
ListOffsets is served at v1-v9, as Kafka 3.9 serves it: the service answers earliest (-2), latest (-1), a
timestamp, the record with the largest timestamp (-3, which v7 announces), the local log start (-4, v8) and the
end of tiered storage (-5, v9: -1, as Kafka answers for a topic without it), with the isolation level (v2+) and
leader-epoch fencing (v4+). v10 (Kafka 4.0) is left out: kafka-python reads a broker that serves it as Kafka 4.0.

OffsetForLeaderEpoch (v2-v4) has no gRPC method (followers find their divergence in their fetch answers): the
service answers it from the partition's own checks and its log's epoch cache, which the follower path uses too,
for a caller that may describe the topic (TOPIC_AUTHORIZATION_FAILED otherwise, as Kafka).
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer.offsets import (
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)

from odradek.broker.api import data as api
from odradek.broker.kafka.apis import ApiRegistry, schema_api
from odradek.broker.kafka.backend import KafkaBackend
from odradek.broker.kafka.wire import KafkaContext
from odradek.client.errors import ErrorCode

LIST_OFFSETS_VERSIONS = (1, 9)
OFFSET_FOR_LEADER_EPOCH_VERSIONS = (2, 4)

# ListOffsets v5 introduced OFFSET_NOT_AVAILABLE (a new leader's high watermark catching up); older clients get
# LEADER_NOT_AVAILABLE for it, as from Kafka, which they also retry.
_OFFSET_NOT_AVAILABLE_FROM = 5


def register(registry: ApiRegistry, backend: KafkaBackend) -> None:
    registry.add(*schema_api(ListOffsetsRequest, *LIST_OFFSETS_VERSIONS, _list_offsets_handler(backend)))
    registry.add(
        *schema_api(OffsetForLeaderEpochRequest, *OFFSET_FOR_LEADER_EPOCH_VERSIONS, _offset_for_epoch_handler(backend))
    )


def _list_offsets_handler(backend: KafkaBackend):
    async def list_offsets(ctx: KafkaContext, version: int, request: Any) -> Any:
        asked = api.ListOffsetsRequest(
            request.isolation_level,
            [
                (
                    t.name,
                    [api.OffsetQuery(p.partition_index, p.timestamp, p.current_leader_epoch) for p in t.partitions],
                )
                for t in request.topics
            ],
        )
        answer = await backend.data.service.list_offsets(asked, ctx.request_context)
        topic_cls = ListOffsetsResponse.ListOffsetsTopicResponse
        partition_cls = topic_cls.ListOffsetsPartitionResponse
        return ListOffsetsResponse(
            version=version,
            throttle_time_ms=0,
            topics=[
                topic_cls(
                    name=name,
                    partitions=[
                        partition_cls(
                            partition_index=o.partition,
                            error_code=_list_offsets_error(o.error.code if o.error else 0, version),
                            timestamp=o.timestamp if o.error is None else -1,
                            offset=o.offset if o.error is None else -1,
                            leader_epoch=o.leader_epoch if o.error is None else -1,
                        )
                        for o in listed
                    ],
                )
                for name, listed in answer
            ],
        )

    return list_offsets


def _query(p: Any) -> api.OffsetQuery:
    return api.OffsetQuery(p.partition_index, p.timestamp, p.current_leader_epoch)


def _list_offsets_error(code: int, version: int) -> int:
    if code == ErrorCode.OFFSET_NOT_AVAILABLE and version < _OFFSET_NOT_AVAILABLE_FROM:
        return ErrorCode.LEADER_NOT_AVAILABLE
    return code


def _offset_for_epoch_handler(backend: KafkaBackend):
    async def offset_for_leader_epoch(ctx: KafkaContext, version: int, request: Any) -> Any:
        """Each partition's end offset of the largest epoch <= the one asked, as its leader knows it.

        Only the leader answers, after the same current-leader-epoch check as ListOffsets and Fetch (FENCED_ /
        UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER). ``replica_id`` (v3+) is not used: odradek's followers
        replicate over gRPC, so every asker here is a consumer validating its position, as Kafka serves it
        (from the leader)."""
        asked = [
            (t.topic, [api.EpochQuery(p.partition, p.leader_epoch, p.current_leader_epoch) for p in t.partitions])
            for t in request.topics
        ]
        answer = await backend.data.service.end_offsets_for_epochs(asked, ctx.request_context)
        topic_cls = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
        partition_cls = topic_cls.EpochEndOffset
        topics = [
            topic_cls(
                topic=name,
                partitions=[
                    partition_cls(
                        error_code=e.error.code if e.error else 0,
                        partition=e.partition,
                        leader_epoch=e.leader_epoch,
                        end_offset=e.end_offset,
                    )
                    for e in ends
                ],
            )
            for name, ends in answer
        ]
        return OffsetForLeaderEpochResponse(version=version, throttle_time_ms=0, topics=topics)

    return offset_for_leader_epoch
