"""The ``GroupCoordinator`` gRPC service on the broker listener: the gRPC listener's adapter of the group service
(``group_service.GroupService``). Each call's protobuf request becomes the service's typed request, the call's
context its ``RequestContext``, and the typed answer the protobuf response; every decision is the service's.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.groups.group_service import GroupService
from odradek.broker.groups.messages import LeavingMember
from odradek.broker.groups.requests import (
    CommitPartition,
    CommitTopic,
    DeleteGroups,
    DescribeGroups,
    FindCoordinator,
    Heartbeat,
    JoinGroup,
    LeaveGroup,
    ListGroups,
    OffsetCommit,
    OffsetCommitAnswer,
    OffsetDelete,
    OffsetFetch,
    SyncGroup,
    TopicPartitions,
    TxnOffsetCommit,
)
from odradek.broker.security.grpc_auth import grpc_request_context
from odradek.client.errors import ErrorCode
from odradek.proto import group_pb2 as gpb
from odradek.proto import group_pb2_grpc


def _optional(message: Any, name: str) -> str | None:
    return getattr(message, name) if message.HasField(name) else None


def _code(code: int) -> ErrorCode.ValueType:
    return ErrorCode.ValueType(code)


def _commit_topics(topics: Any) -> tuple[CommitTopic, ...]:
    return tuple(
        CommitTopic(
            t.name,
            tuple(
                CommitPartition(p.partition, p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
                for p in t.partitions
            ),
        )
        for t in topics
    )


def _commit_results(answer: OffsetCommitAnswer) -> list[gpb.OffsetCommitTopicResponse]:
    return [
        gpb.OffsetCommitTopicResponse(
            name=t.name,
            partitions=[
                gpb.OffsetCommitPartitionResponse(partition=p.partition, error=_code(p.error)) for p in t.partitions
            ],
        )
        for t in answer.topics
    ]


class GroupCoordinatorService(group_pb2_grpc.GroupCoordinatorServicer):
    def __init__(self, service: GroupService) -> None:
        self.service = service

    async def FindCoordinator(self, request, context):
        answer = await self.service.find_coordinator(
            FindCoordinator(int(request.key_type), tuple(request.keys)), grpc_request_context(context)
        )
        return gpb.FindCoordinatorResponse(
            coordinators=[
                gpb.Coordinator(
                    key=c.key,
                    error=_code(c.error),
                    error_message=c.error_message or "",
                    node_id=c.node_id,
                    host=c.host,
                    port=c.port,
                )
                for c in answer.coordinators
            ]
        )

    async def JoinGroup(self, request, context):
        r = await self.service.join_group(
            JoinGroup(
                group_id=request.group_id,
                member_id=request.member_id,
                group_instance_id=_optional(request, "group_instance_id"),
                protocol_type=request.protocol_type,
                protocols=tuple((p.name, p.metadata) for p in request.protocols),
                session_timeout_ms=request.session_timeout_ms,
                rebalance_timeout_ms=request.rebalance_timeout_ms,
                reason=request.reason,
                client_id=request.client_id,
            ),
            grpc_request_context(context),
        )
        response = gpb.JoinGroupResponse(
            error=_code(r.error),
            generation_id=r.generation_id,
            protocol_type=r.protocol_type or "",
            protocol_name=r.protocol_name or "",
            leader=r.leader,
            skip_assignment=r.skip_assignment,
            member_id=r.member_id,
        )
        for m in r.members:
            member = response.members.add(member_id=m.member_id, metadata=m.metadata)
            if m.group_instance_id is not None:
                member.group_instance_id = m.group_instance_id
        return response

    async def SyncGroup(self, request, context):
        r = await self.service.sync_group(
            SyncGroup(
                group_id=request.group_id,
                member_id=request.member_id,
                group_instance_id=_optional(request, "group_instance_id"),
                generation_id=request.generation_id,
                protocol_type=request.protocol_type or None,
                protocol_name=request.protocol_name or None,
                assignments=tuple((a.member_id, a.assignment) for a in request.assignments),
            ),
            grpc_request_context(context),
        )
        return gpb.SyncGroupResponse(
            error=_code(r.error),
            protocol_type=r.protocol_type or "",
            protocol_name=r.protocol_name or "",
            assignment=r.assignment,
        )

    async def Heartbeat(self, request, context):
        r = await self.service.heartbeat(
            Heartbeat(
                request.group_id, request.member_id, _optional(request, "group_instance_id"), request.generation_id
            ),
            grpc_request_context(context),
        )
        return gpb.HeartbeatResponse(error=_code(r.error))

    async def LeaveGroup(self, request, context):
        leaving = tuple(
            LeavingMember(m.member_id, _optional(m, "group_instance_id"), m.reason) for m in request.members
        )
        r = await self.service.leave_group(LeaveGroup(request.group_id, leaving), grpc_request_context(context))
        response = gpb.LeaveGroupResponse(error=_code(r.error))
        for m in r.members:
            left = response.members.add(member_id=m.member_id, error=_code(m.error))
            if m.group_instance_id is not None:
                left.group_instance_id = m.group_instance_id
        return response

    async def OffsetCommit(self, request, context):
        answer = await self.service.offset_commit(
            OffsetCommit(
                group_id=request.group_id,
                generation_id=request.generation_id,
                member_id=request.member_id,
                group_instance_id=_optional(request, "group_instance_id"),
                topics=_commit_topics(request.topics),
            ),
            grpc_request_context(context),
        )
        return gpb.OffsetCommitResponse(topics=_commit_results(answer))

    async def TxnOffsetCommit(self, request, context):
        answer = await self.service.txn_offset_commit(
            TxnOffsetCommit(
                transactional_id=request.transactional_id,
                group_id=request.group_id,
                producer_id=request.producer_id,
                producer_epoch=request.producer_epoch,
                generation_id=request.generation_id,
                member_id=request.member_id,
                group_instance_id=_optional(request, "group_instance_id"),
                topics=_commit_topics(request.topics),
            ),
            grpc_request_context(context),
        )
        return gpb.TxnOffsetCommitResponse(topics=_commit_results(answer))

    async def OffsetFetch(self, request, context):
        answer = await self.service.offset_fetch(
            OffsetFetch(
                group_id=request.group_id,
                topics=None
                if request.all_topics
                else tuple(TopicPartitions(t.name, tuple(t.partitions)) for t in request.topics),
                require_stable=request.require_stable,
                member_id=_optional(request, "member_id"),
                member_epoch=request.member_epoch if request.HasField("member_epoch") else -1,
            ),
            grpc_request_context(context),
        )
        return gpb.OffsetFetchResponse(
            error=_code(answer.error),
            topics=[
                gpb.OffsetFetchTopicResponse(
                    name=t.name,
                    partitions=[
                        gpb.OffsetFetchPartitionResponse(
                            partition=p.partition,
                            committed_offset=p.committed_offset,
                            committed_leader_epoch=p.committed_leader_epoch,
                            metadata=p.metadata,
                            error=_code(p.error),
                        )
                        for p in t.partitions
                    ],
                )
                for t in answer.topics
            ],
        )

    async def OffsetDelete(self, request, context):
        answer = await self.service.offset_delete(
            OffsetDelete(request.group_id, tuple(TopicPartitions(t.name, tuple(t.partitions)) for t in request.topics)),
            grpc_request_context(context),
        )
        return gpb.OffsetDeleteResponse(
            error=_code(answer.error),
            topics=[
                gpb.OffsetDeleteTopicResponse(
                    name=t.name,
                    partitions=[
                        gpb.OffsetDeletePartitionResponse(partition=p.partition, error=_code(p.error))
                        for p in t.partitions
                    ],
                )
                for t in answer.topics
            ],
        )

    async def ListGroups(self, request, context):
        answer = await self.service.list_groups(
            ListGroups(tuple(request.states_filter), tuple(request.types_filter)), grpc_request_context(context)
        )
        return gpb.ListGroupsResponse(
            error=_code(answer.error),
            groups=[
                gpb.ListedGroup(
                    group_id=g.group_id,
                    protocol_type=g.protocol_type,
                    group_state=g.group_state,
                    group_type=g.group_type,
                )
                for g in answer.groups
            ],
        )

    async def DescribeGroups(self, request, context):
        answer = await self.service.describe_groups(
            DescribeGroups(tuple(request.groups)), grpc_request_context(context)
        )
        response = gpb.DescribeGroupsResponse()
        for g in answer.groups:
            described = response.groups.add(
                error=_code(g.error),
                group_id=g.group_id,
                group_state=g.group_state,
                protocol_type=g.protocol_type,
                protocol_data=g.protocol_data,
                generation_id=g.generation_id,
                leader=g.leader,
                group_type=g.group_type,
            )
            for m in g.members:
                member = described.members.add(
                    member_id=m.member_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.member_metadata,
                    member_assignment=m.member_assignment,
                )
                if m.group_instance_id is not None:
                    member.group_instance_id = m.group_instance_id
        return response

    async def DeleteGroups(self, request, context):
        answer = await self.service.delete_groups(DeleteGroups(tuple(request.groups)), grpc_request_context(context))
        return gpb.DeleteGroupsResponse(
            results=[gpb.DeletedGroup(group_id=r.group_id, error=_code(r.error)) for r in answer.results]
        )
