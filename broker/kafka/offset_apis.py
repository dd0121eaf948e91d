"""Kafka's ListOffsets and OffsetForLeaderEpoch on the Kafka listener.

ListOffsets goes to the broker's ``ListOffsets`` service, the gRPC listener's. It is served at v1-v9, as Kafka 3.9
serves it: the service answers earliest (-2), latest (-1), a timestamp, the record with the largest timestamp (-3,
which v7 announces), the local log start (-4, v8) and the end of tiered storage (-5, v9: -1, as Kafka answers for a
topic without it), with the isolation level (v2+) and leader-epoch fencing (v4+). v10 (Kafka 4.0) is left out:
kafka-python reads a broker that serves it as Kafka 4.0.

OffsetForLeaderEpoch (v2-v4) has no gRPC service (followers find their divergence in their fetch answers): it is
answered by the partition's own checks and its log's epoch cache, which is what the follower path uses too.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer.offsets import (
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)

from odradek.broker.kafka.apis import ApiRegistry, schema_api
from odradek.broker.kafka.backend import KafkaBackend
from odradek.broker.kafka.metadata_apis import service_context
from odradek.broker.kafka.wire import KafkaContext
from odradek.client.errors import ErrorCode, OdradekError
from odradek.proto import broker_pb2 as pb

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
        answer = await backend.data.ListOffsets(
            pb.ListOffsetsRequest(
                replica_id=request.replica_id,
                isolation_level=pb.READ_COMMITTED if request.isolation_level == 1 else pb.READ_UNCOMMITTED,
                topics=[
                    pb.ListOffsetsTopic(
                        name=t.name,
                        partitions=[
                            pb.ListOffsetsPartition(
                                partition=p.partition_index,
                                current_leader_epoch=p.current_leader_epoch,
                                timestamp=p.timestamp,
                            )
                            for p in t.partitions
                        ],
                    )
                    for t in request.topics
                ],
            ),
            service_context(ctx),
        )
        topic_cls = ListOffsetsResponse.ListOffsetsTopicResponse
        partition_cls = topic_cls.ListOffsetsPartitionResponse
        return ListOffsetsResponse(
            version=version,
            throttle_time_ms=answer.throttle_time_ms,
            topics=[
                topic_cls(
                    name=t.name,
                    partitions=[
                        partition_cls(
                            partition_index=p.partition,
                            error_code=_list_offsets_error(int(p.error), version),
                            timestamp=p.timestamp,
                            offset=p.offset,
                            leader_epoch=p.leader_epoch if p.error == ErrorCode.NONE else -1,
                        )
                        for p in t.partitions
                    ],
                )
                for t in answer.topics
            ],
        )

    return list_offsets


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
        replicas = backend.data.replicas
        topic_cls = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
        partition_cls = topic_cls.EpochEndOffset
        topics = []
        for t in request.topics:
            results = []
            for p in t.partitions:
                try:
                    partition = replicas.get(t.topic, p.partition)
                    partition.check_leader(p.current_leader_epoch)
                    epoch, end = partition.log.end_offset_for_epoch(p.leader_epoch)
                except OdradekError as e:
                    results.append(
                        partition_cls(error_code=int(e.code), partition=p.partition, leader_epoch=-1, end_offset=-1)
                    )
                    continue
                results.append(partition_cls(error_code=0, partition=p.partition, leader_epoch=epoch, end_offset=end))
            topics.append(topic_cls(topic=t.topic, partitions=results))
        return OffsetForLeaderEpochResponse(version=version, throttle_time_ms=0, topics=topics)

    return offset_for_leader_epoch
