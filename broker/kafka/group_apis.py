"""The group APIs on the Kafka listener: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, OffsetDelete, DescribeGroups, ListGroups and DeleteGroups, each translated into the
``GroupCoordinatorService`` call the gRPC listener makes and its answer back. Every rule is the coordinator's; what
is here is only how each Kafka version spells the request and the answer.

Served versions, and why not more (a version that needs what the coordinator lacks is not served at all):

- FindCoordinator 0-5. v6 adds share groups (KIP-932), which odradek has not.
- JoinGroup 4-9. Below v4 a new member joins without first being handed its id (MEMBER_ID_REQUIRED, KIP-394); the
  coordinator always hands it out first, which a v0-v3 client does not understand. librdkafka, aiokafka, kafka-python
  and the Java clients all speak v4 or later. A static leader that rejoins below v9 (no SkipAssignment) gets the
  member list and assigns again; the group is Stable, so its SyncGroup is answered with the stored assignment.
- SyncGroup 0-5, Heartbeat 0-4, LeaveGroup 0-5, DeleteGroups 0-2: every version.
- OffsetCommit 2-9. v9 is the first of the KIP-848 consumer protocol: the generation field carries a consumer
  group member's epoch (STALE_MEMBER_EPOCH when it is not the current one); v10 names topics by id and is not
  served. v0-v1 are gone from kafka-python's definitions. v2-v4 carry a retention time: odradek keeps offsets per
  broker setting only, so any value but -1 (the broker's) is refused with INVALID_REQUEST rather than ignored.
- OffsetFetch 1-9. v9 adds a consumer group member's id and epoch, checked as OffsetCommit's (v10, by topic id, is
  not served).
- OffsetDelete 0, its only version.
- DescribeGroups 0-5. v6 answers GROUP_ID_NOT_FOUND for an unknown group (KIP-1043); the coordinator describes it
  as Dead, the older versions' answer. Authorized operations (v3+) are left unknown: odradek has no ACLs yet.
- ListGroups 0-5. v5 filters by group type and names each group's (``classic`` or ``consumer``, KIP-848).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafka.protocol.admin.groups import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

from odradek.broker.kafka.apis import ApiRegistry, schema_api
from odradek.broker.kafka.backend import KafkaBackend
from odradek.broker.kafka.wire import KafkaContext, ServiceContext
from odradek.client.connection import CLIENT_ID_KEY
from odradek.client.errors import ErrorCode
from odradek.proto import group_pb2 as gpb

NONE = int(ErrorCode.NONE)
DEFAULT_RETENTION_MS = -1  # OffsetCommit v2-v4: the broker's offsets retention


def _nullable(value: str) -> str | None:
    """A nullable Kafka string from a proto string, where the proto's empty string stands for null."""
    return value or None


def _instance_id(message: Any) -> str | None:
    return message.group_instance_id if message.HasField("group_instance_id") else None


def commit_topics(topics: Iterable[Any], with_epoch: bool) -> list[gpb.OffsetCommitTopic]:
    """The offsets of an OffsetCommit or TxnOffsetCommit request as the group service takes them (the leader epoch
    only from the versions that carry it)."""
    return [
        gpb.OffsetCommitTopic(
            name=t.name,
            partitions=[
                gpb.OffsetCommitPartition(
                    partition=p.partition_index,
                    committed_offset=p.committed_offset,
                    committed_leader_epoch=p.committed_leader_epoch if with_epoch else -1,
                    committed_metadata=p.committed_metadata or "",
                )
                for p in t.partitions
            ],
        )
        for t in topics
    ]


def _fetched_topics(topic_cls: Any, partition_cls: Any, topics: Iterable[gpb.OffsetFetchTopicResponse]) -> list[Any]:
    """The group service's committed offsets as OffsetFetch answers them (per group from v8, the one group before)."""
    return [
        topic_cls(
            name=t.name,
            partitions=[
                partition_cls(
                    partition_index=p.partition,
                    committed_offset=p.committed_offset,
                    committed_leader_epoch=p.committed_leader_epoch,
                    metadata=p.metadata,
                    error_code=int(p.error),
                )
                for p in t.partitions
            ],
        )
        for t in topics
    ]


class GroupApis:
    """The handlers, one per API: (context, version, decoded request) -> response of that version."""

    def __init__(self, backend: KafkaBackend) -> None:
        self.backend = backend
        self.groups = backend.groups

    @staticmethod
    def _ctx(ctx: KafkaContext) -> ServiceContext:
        return ServiceContext(ctx, CLIENT_ID_KEY)

    # ---- FindCoordinator ----

    def _coordinator(self, c: gpb.Coordinator) -> tuple[int, str | None, int, str, int]:
        """(error, message, node, host, port) with the coordinator's address on the Kafka listener: a client given
        the gRPC address would speak the wrong protocol to it."""
        if c.error != ErrorCode.NONE:
            return int(c.error), _nullable(c.error_message), -1, "", -1
        endpoint = self.backend.endpoint(c.node_id)
        if endpoint is None:
            message = f"broker {c.node_id} coordinates {c.key!r} but has no Kafka listener"
            return int(ErrorCode.COORDINATOR_NOT_AVAILABLE), message, -1, "", -1
        return NONE, None, c.node_id, endpoint[0], endpoint[1]

    async def find_coordinator(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        keys = list(req.coordinator_keys) if v >= 4 else [req.key]
        key_type = req.key_type if v >= 1 else gpb.GROUP
        answer = await self.groups.FindCoordinator(
            gpb.FindCoordinatorRequest(key_type=key_type, keys=keys), self._ctx(ctx)
        )
        found = {c.key: self._coordinator(c) for c in answer.coordinators}
        missing = (int(ErrorCode.COORDINATOR_NOT_AVAILABLE), None, -1, "", -1)
        if v >= 4:
            Coordinator = FindCoordinatorResponse.Coordinator
            coordinators = []
            for key in keys:
                error, message, node, host, port = found.get(key, missing)
                coordinators.append(
                    Coordinator(key=key, node_id=node, host=host, port=port, error_code=error, error_message=message)
                )
            return FindCoordinatorResponse(version=v, coordinators=coordinators)
        error, message, node, host, port = found.get(keys[0], missing)
        return FindCoordinatorResponse(
            version=v, error_code=error, error_message=message, node_id=node, host=host, port=port
        )

    # ---- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ----

    async def join_group(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        request = gpb.JoinGroupRequest(
            group_id=req.group_id,
            session_timeout_ms=req.session_timeout_ms,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            member_id=req.member_id,
            protocol_type=req.protocol_type,
            protocols=[gpb.JoinGroupProtocol(name=p.name, metadata=p.metadata) for p in req.protocols],
            reason=(req.reason or "") if v >= 8 else "",
            client_id=ctx.client_id,
        )
        if v >= 5 and req.group_instance_id is not None:
            request.group_instance_id = req.group_instance_id
        r = await self.groups.JoinGroup(request, self._ctx(ctx))
        Member = JoinGroupResponse.JoinGroupResponseMember
        return JoinGroupResponse(
            version=v,
            error_code=int(r.error),
            generation_id=r.generation_id,
            protocol_type=_nullable(r.protocol_type),
            # Nullable from v7 on; before, an empty string stands for "none chosen".
            protocol_name=_nullable(r.protocol_name) if v >= 7 else r.protocol_name,
            leader=r.leader,
            skip_assignment=r.skip_assignment,
            member_id=r.member_id,
            members=[
                Member(member_id=m.member_id, group_instance_id=_instance_id(m), metadata=m.metadata) for m in r.members
            ],
        )

    async def sync_group(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        request = gpb.SyncGroupRequest(
            group_id=req.group_id,
            generation_id=req.generation_id,
            member_id=req.member_id,
            assignments=[
                gpb.SyncGroupAssignment(member_id=a.member_id, assignment=a.assignment) for a in req.assignments
            ],
        )
        if v >= 3 and req.group_instance_id is not None:
            request.group_instance_id = req.group_instance_id
        if v >= 5:
            request.protocol_type = req.protocol_type or ""
            request.protocol_name = req.protocol_name or ""
        r = await self.groups.SyncGroup(request, self._ctx(ctx))
        return SyncGroupResponse(
            version=v,
            error_code=int(r.error),
            protocol_type=_nullable(r.protocol_type),
            protocol_name=_nullable(r.protocol_name),
            assignment=r.assignment,
        )

    async def heartbeat(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        request = gpb.HeartbeatRequest(group_id=req.group_id, generation_id=req.generation_id, member_id=req.member_id)
        if v >= 3 and req.group_instance_id is not None:
            request.group_instance_id = req.group_instance_id
        r = await self.groups.Heartbeat(request, self._ctx(ctx))
        return HeartbeatResponse(version=v, error_code=int(r.error))

    async def leave_group(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        request = gpb.LeaveGroupRequest(group_id=req.group_id)
        if v >= 3:
            for m in req.members:
                leaving = request.members.add(member_id=m.member_id, reason=(m.reason or "") if v >= 5 else "")
                if m.group_instance_id is not None:
                    leaving.group_instance_id = m.group_instance_id
        else:
            request.members.add(member_id=req.member_id)
        r = await self.groups.LeaveGroup(request, self._ctx(ctx))
        if v < 3:
            # One member and one error: the group's if it has one, else the member's (as Kafka answers v0-v2).
            error = int(r.error)
            if error == NONE and r.members:
                error = int(r.members[0].error)
            return LeaveGroupResponse(version=v, error_code=error)
        MemberResponse = LeaveGroupResponse.MemberResponse
        return LeaveGroupResponse(
            version=v,
            error_code=int(r.error),
            members=[
                MemberResponse(member_id=m.member_id, group_instance_id=_instance_id(m), error_code=int(m.error))
                for m in r.members
            ],
        )

    # ---- OffsetCommit, OffsetFetch, OffsetDelete ----

    async def offset_commit(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        Topic = OffsetCommitResponse.OffsetCommitResponseTopic
        Partition = Topic.OffsetCommitResponsePartition
        if v <= 4 and req.retention_time_ms != DEFAULT_RETENTION_MS:
            # A per-request retention the coordinator cannot honour: refused, not silently ignored.
            refused = int(ErrorCode.INVALID_REQUEST)
            topics = [
                Topic(
                    name=t.name,
                    partitions=[Partition(partition_index=p.partition_index, error_code=refused) for p in t.partitions],
                )
                for t in req.topics
            ]
            return OffsetCommitResponse(version=v, topics=topics)
        request = gpb.OffsetCommitRequest(
            group_id=req.group_id,
            generation_id=req.generation_id_or_member_epoch,
            member_id=req.member_id,
            topics=commit_topics(req.topics, with_epoch=v >= 6),
        )
        if v >= 7 and req.group_instance_id is not None:
            request.group_instance_id = req.group_instance_id
        r = await self.groups.OffsetCommit(request, self._ctx(ctx))
        topics = [
            Topic(
                name=t.name,
                partitions=[Partition(partition_index=p.partition, error_code=int(p.error)) for p in t.partitions],
            )
            for t in r.topics
        ]
        return OffsetCommitResponse(version=v, topics=topics)

    async def _fetch_offsets(
        self,
        ctx: KafkaContext,
        group_id: str,
        topics: Iterable[tuple[str, list[int]]] | None,
        require_stable: bool,
        member: tuple[str | None, int] = (None, -1),
    ) -> gpb.OffsetFetchResponse:
        request = gpb.OffsetFetchRequest(group_id=group_id, all_topics=topics is None, require_stable=require_stable)
        member_id, member_epoch = member
        if member_id is not None:
            request.member_id = member_id
        if member_epoch >= 0:
            request.member_epoch = member_epoch
        for name, partitions in topics or ():
            request.topics.add(name=name, partitions=partitions)
        return await self.groups.OffsetFetch(request, self._ctx(ctx))

    async def offset_fetch(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        require_stable = bool(req.require_stable) if v >= 7 else False
        if v >= 8:
            Group = OffsetFetchResponse.OffsetFetchResponseGroup
            Topics = Group.OffsetFetchResponseTopics
            Partitions = Topics.OffsetFetchResponsePartitions
            groups = []
            for g in req.groups:
                wanted = None if g.topics is None else [(t.name, list(t.partition_indexes)) for t in g.topics]
                member = (g.member_id, g.member_epoch) if v >= 9 else (None, -1)
                r = await self._fetch_offsets(ctx, g.group_id, wanted, require_stable, member)
                topics = _fetched_topics(Topics, Partitions, r.topics)
                groups.append(Group(group_id=g.group_id, topics=topics, error_code=int(r.error)))
            return OffsetFetchResponse(version=v, groups=groups)
        wanted = None if req.topics is None else [(t.name, list(t.partition_indexes)) for t in req.topics]
        r = await self._fetch_offsets(ctx, req.group_id, wanted, require_stable)
        Topic = OffsetFetchResponse.OffsetFetchResponseTopic
        Partition = Topic.OffsetFetchResponsePartition
        if v < 2 and r.error != ErrorCode.NONE:
            # v1 has no group-level error: it goes on every partition asked for, as Kafka answers.
            topics = [
                Topic(
                    name=name,
                    partitions=[
                        Partition(partition_index=p, committed_offset=-1, metadata="", error_code=int(r.error))
                        for p in partitions
                    ],
                )
                for name, partitions in wanted or ()
            ]
            return OffsetFetchResponse(version=v, topics=topics)
        topics = _fetched_topics(Topic, Partition, r.topics)
        return OffsetFetchResponse(version=v, topics=topics, error_code=int(r.error))

    async def offset_delete(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        request = gpb.OffsetDeleteRequest(
            group_id=req.group_id,
            topics=[
                gpb.OffsetDeleteTopic(name=t.name, partitions=[p.partition_index for p in t.partitions])
                for t in req.topics
            ],
        )
        r = await self.groups.OffsetDelete(request, self._ctx(ctx))
        if r.error != ErrorCode.NONE:  # the group's error is the whole answer, as Kafka's
            return OffsetDeleteResponse(version=v, error_code=int(r.error), topics=[])
        errors = {(t.name, p.partition): int(p.error) for t in r.topics for p in t.partitions}
        Topic = OffsetDeleteResponse.OffsetDeleteResponseTopic
        Partition = Topic.OffsetDeleteResponsePartition
        topics = [
            Topic(
                name=t.name,
                partitions=[
                    Partition(partition_index=p.partition_index, error_code=errors[(t.name, p.partition_index)])
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ]
        return OffsetDeleteResponse(version=v, error_code=NONE, topics=topics)

    # ---- DescribeGroups, ListGroups, DeleteGroups ----

    async def describe_groups(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        r = await self.groups.DescribeGroups(gpb.DescribeGroupsRequest(groups=list(req.groups)), self._ctx(ctx))
        Group = DescribeGroupsResponse.DescribedGroup
        Member = Group.DescribedGroupMember
        groups = [
            Group(
                error_code=int(g.error),
                group_id=g.group_id,
                group_state=g.group_state,
                protocol_type=g.protocol_type,
                protocol_data=g.protocol_data,
                members=[
                    Member(
                        member_id=m.member_id,
                        group_instance_id=_instance_id(m),
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.member_metadata,
                        member_assignment=m.member_assignment,
                    )
                    for m in g.members
                ],
            )
            for g in r.groups
        ]
        return DescribeGroupsResponse(version=v, groups=groups)

    async def list_groups(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        states = list(req.states_filter) if v >= 4 else []
        types = list(req.types_filter) if v >= 5 else []
        request = gpb.ListGroupsRequest(states_filter=states, types_filter=types)
        r = await self.groups.ListGroups(request, self._ctx(ctx))
        Listed = ListGroupsResponse.ListedGroup
        return ListGroupsResponse(
            version=v,
            error_code=int(r.error),
            groups=[
                Listed(
                    group_id=g.group_id,
                    protocol_type=g.protocol_type,
                    group_state=g.group_state,
                    group_type=g.group_type or "classic",
                )
                for g in r.groups
            ],
        )

    async def delete_groups(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        r = await self.groups.DeleteGroups(gpb.DeleteGroupsRequest(groups=list(req.groups_names)), self._ctx(ctx))
        Result = DeleteGroupsResponse.DeletableGroupResult
        return DeleteGroupsResponse(
            version=v, results=[Result(group_id=g.group_id, error_code=int(g.error)) for g in r.results]
        )


def register(registry: ApiRegistry, backend: KafkaBackend) -> None:
    """Adds the group APIs at the versions the module docstring gives."""
    apis = GroupApis(backend)
    registry.add(*schema_api(FindCoordinatorRequest, 0, 5, apis.find_coordinator))
    registry.add(*schema_api(JoinGroupRequest, 4, 9, apis.join_group))
    registry.add(*schema_api(SyncGroupRequest, 0, 5, apis.sync_group))
    registry.add(*schema_api(HeartbeatRequest, 0, 4, apis.heartbeat))
    registry.add(*schema_api(LeaveGroupRequest, 0, 5, apis.leave_group))
    registry.add(*schema_api(OffsetCommitRequest, 2, 9, apis.offset_commit))
    registry.add(*schema_api(OffsetFetchRequest, 1, 9, apis.offset_fetch))
    registry.add(*schema_api(OffsetDeleteRequest, 0, 0, apis.offset_delete))
    registry.add(*schema_api(DescribeGroupsRequest, 0, 5, apis.describe_groups))
    registry.add(*schema_api(ListGroupsRequest, 0, 5, apis.list_groups))
    registry.add(*schema_api(DeleteGroupsRequest, 0, 2, apis.delete_groups))
