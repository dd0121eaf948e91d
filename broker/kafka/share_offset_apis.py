"""The KIP-932 share group offset admin APIs on the Kafka listener: DescribeShareGroupOffsets (90),
AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92), translated into the ``ShareService``'s calls (the
rules are ``broker/share/group_offsets.py``'s). A client sends them to the group's coordinator (FindCoordinator);
elsewhere the answer is NOT_COORDINATOR.

Served versions: 0 of each, as Kafka 4.1 serves them (its version 1 of DescribeShareGroupOffsets, with the lag, is
Kafka 4.2's). kafka-python has no definitions of them: they are in ``schemas/``.
"""

from __future__ import annotations

import uuid
from typing import Any

from kafka.protocol.api_message import ApiMessage

from odradek.broker.kafka import schemas
from odradek.broker.kafka.apis import ApiRegistry, schema_api
from odradek.broker.kafka.backend import KafkaBackend
from odradek.broker.kafka.wire import KafkaContext
from odradek.broker.share.service import ShareService

VERSION = 0


class DescribeShareGroupOffsetsRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class DescribeShareGroupOffsetsResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class AlterShareGroupOffsetsRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class AlterShareGroupOffsetsResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class DeleteShareGroupOffsetsRequest(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class DeleteShareGroupOffsetsResponse(ApiMessage, load_json=schemas):  # type: ignore[call-arg]
    pass


class ShareOffsetApis:
    def __init__(self, share: ShareService) -> None:
        self.share = share

    async def describe(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        R = DescribeShareGroupOffsetsResponse
        Group = R.DescribeShareGroupOffsetsResponseGroup
        Topic = Group.DescribeShareGroupOffsetsResponseTopic
        Partition = Topic.DescribeShareGroupOffsetsResponsePartition
        groups = []
        for g in req.groups:
            topics = None if g.topics is None else [(t.topic_name, list(t.partitions)) for t in g.topics]
            answer = await self.share.describe_offsets(g.group_id, topics, ctx.request_context)
            groups.append(
                Group(
                    group_id=g.group_id,
                    topics=[
                        Topic(
                            topic_name=t.name,
                            topic_id=uuid.UUID(bytes=t.topic_id),
                            partitions=[
                                Partition(
                                    partition_index=p.partition,
                                    start_offset=p.start_offset,
                                    leader_epoch=p.leader_epoch,
                                    error_code=int(p.error),
                                    error_message=p.message,
                                )
                                for p in t.partitions
                            ],
                        )
                        for t in answer.topics
                    ],
                    error_code=int(answer.error),
                    error_message=answer.message,
                )
            )
        return R(version=v, throttle_time_ms=0, groups=groups)

    async def alter(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        R = AlterShareGroupOffsetsResponse
        Topic = R.AlterShareGroupOffsetsResponseTopic
        Partition = Topic.AlterShareGroupOffsetsResponsePartition
        merged: dict[str, dict[int, int]] = {}
        for t in req.topics:
            merged.setdefault(t.topic_name, {}).update((p.partition_index, p.start_offset) for p in t.partitions)
        topics = [(name, list(ps.items())) for name, ps in merged.items()]
        answer = await self.share.alter_offsets(req.group_id, topics, ctx.request_context)
        return R(
            version=v,
            throttle_time_ms=0,
            error_code=int(answer.error),
            error_message=answer.message,
            responses=[
                Topic(
                    topic_name=t.name,
                    topic_id=uuid.UUID(bytes=t.topic_id),
                    partitions=[
                        Partition(partition_index=p.partition, error_code=int(p.error), error_message=p.message)
                        for p in t.partitions
                    ],
                )
                for t in answer.topics
            ],
        )

    async def delete(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        R = DeleteShareGroupOffsetsResponse
        Topic = R.DeleteShareGroupOffsetsResponseTopic
        names = [t.topic_name for t in req.topics]
        answer = await self.share.delete_offsets(req.group_id, names, ctx.request_context)
        return R(
            version=v,
            throttle_time_ms=0,
            error_code=int(answer.error),
            error_message=answer.message,
            responses=[
                Topic(
                    topic_name=t.name,
                    topic_id=uuid.UUID(bytes=t.topic_id),
                    error_code=int(t.error),
                    error_message=t.message,
                )
                for t in answer.topics
            ],
        )


def register(registry: ApiRegistry, backend: KafkaBackend) -> None:
    """Registered (so advertised) only where the broker runs share groups."""
    if backend.share is None:
        return
    apis = ShareOffsetApis(backend.share)
    registry.add(*schema_api(DescribeShareGroupOffsetsRequest, VERSION, VERSION, apis.describe))
    registry.add(*schema_api(AlterShareGroupOffsetsRequest, VERSION, VERSION, apis.alter))
    registry.add(*schema_api(DeleteShareGroupOffsetsRequest, VERSION, VERSION, apis.delete))
