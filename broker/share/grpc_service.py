"""The ``ShareGroups`` gRPC service on the broker listener: the gRPC adapter of the ``ShareService`` calls the Kafka
listener's ShareGroupDescribe and share group offset APIs make (``broker/kafka/share_apis.py``,
``share_offset_apis.py``), so both listeners apply the same rules, ACL checks and error codes. A broker that does
not coordinate the group answers NOT_COORDINATOR, as the group coordinator's gRPC calls do; the client looks the
coordinator up again.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.broker.groups.consumer_records import Partitions, by_topic
from odradek.broker.security.grpc_auth import grpc_request_context
from odradek.broker.share.group_offsets import OffsetsAnswer
from odradek.broker.share.service import ShareService
from odradek.proto import share_group_pb2 as sgpb
from odradek.proto import share_group_pb2_grpc


def _assignment(partitions: Partitions, names: Mapping[bytes, str]) -> list[sgpb.ShareTopicPartitions]:
    return [
        sgpb.ShareTopicPartitions(topic_name=names.get(t, ""), topic_id=t, partitions=ps)
        for t, ps in by_topic(partitions)
    ]


def _topics(answer: OffsetsAnswer) -> list[sgpb.ShareOffsetTopic]:
    return [
        sgpb.ShareOffsetTopic(
            topic_name=t.name,
            topic_id=t.topic_id,
            error=t.error,
            error_message=t.message or "",
            partitions=[
                sgpb.ShareOffsetPartition(
                    partition=p.partition,
                    start_offset=p.start_offset,
                    leader_epoch=p.leader_epoch,
                    error=p.error,
                    error_message=p.message or "",
                )
                for p in t.partitions
            ],
        )
        for t in answer.topics
    ]


class ShareGroupsService(share_group_pb2_grpc.ShareGroupsServicer):
    def __init__(self, share: ShareService) -> None:
        self.share = share

    async def DescribeShareGroups(self, request, context):
        ctx = grpc_request_context(context)
        response = sgpb.DescribeShareGroupsResponse()
        for group_id in request.group_ids:
            d = self.share.describe(group_id, ctx)
            described = response.groups.add(error=d.error, error_message=d.message or "", group_id=group_id)
            g = d.group
            if g is None:
                continue
            described.group_state = g.state
            described.group_epoch = g.group_epoch
            described.assignment_epoch = g.assignment_epoch
            described.assignor_name = g.assignor_name
            for m in g.members:
                member = described.members.add(
                    member_id=m.member_id,
                    member_epoch=m.member_epoch,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=m.subscribed_topic_names,
                    assignment=_assignment(m.assignment, d.topic_names),
                )
                if m.rack_id is not None:
                    member.rack_id = m.rack_id
        return response

    async def DescribeShareGroupOffsets(self, request, context):
        topics = None if request.all_topics else [(t.topic_name, list(t.partitions)) for t in request.topics]
        answer = await self.share.describe_offsets(request.group_id, topics, grpc_request_context(context))
        return sgpb.DescribeShareGroupOffsetsResponse(
            error=answer.error, error_message=answer.message or "", topics=_topics(answer)
        )

    async def AlterShareGroupOffsets(self, request, context):
        merged: dict[str, dict[int, int]] = {}
        for t in request.topics:
            merged.setdefault(t.topic_name, {}).update((p.partition, p.start_offset) for p in t.partitions)
        topics = [(name, list(ps.items())) for name, ps in merged.items()]
        answer = await self.share.alter_offsets(request.group_id, topics, grpc_request_context(context))
        return sgpb.AlterShareGroupOffsetsResponse(
            error=answer.error, error_message=answer.message or "", topics=_topics(answer)
        )

    async def DeleteShareGroupOffsets(self, request, context):
        answer = await self.share.delete_offsets(
            request.group_id, list(request.topic_names), grpc_request_context(context)
        )
        return sgpb.DeleteShareGroupOffsetsResponse(
            error=answer.error, error_message=answer.message or "", topics=_topics(answer)
        )
