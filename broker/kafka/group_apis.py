"""The group APIs on the Kafka listener: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, OffsetDelete, DescribeGroups, ListGroups and DeleteGroups, each translated into the
group service's typed request (``broker/groups/requests.py``) and its answer back. Every rule is the service's and
the coordinator's; what is here is only how each Kafka version spells the request and the answer.

Served versions, and why not more (a version that needs what the coordinator lacks is not served at all):

- FindCoordinator 0-5. v6 adds share groups (KIP-932), which odradek has not.
- JoinGroup 4-9. Below v4 a new member joins without first being handed its id (MEMBER_ID_REQUIRED, KIP-394); the
  coordinator always hands it out first, which a v0-v3 client does not understand. librdkafka, aiokafka, kafka-python
  and the Java clients all speak v4 or later. A static leader that rejoins below v9 (no SkipAssignment) gets the
  member list and assigns again; the group is Stable, so its SyncGroup is answered with the stored assignment.
- SyncGroup 0-5, Heartbeat 0-4, LeaveGroup 0-5, DeleteGroups 0-2: every version.
- OffsetCommit 2-9. v9 is the first of the KIP-848 consumer protocol: the generation field carries a consumer
  group member's epoch (STALE_MEMBER_EPOCH when it is not the current one), and a member of that protocol must
  use it (UNSUPPORTED_VERSION below, as Kafka); v10 names topics by id and is not served. v0-v1 are gone from
  kafka-python's definitions. v2-v4 carry a retention time: odradek keeps offsets per broker setting only, so any
  value but -1 (the broker's) is refused with INVALID_REQUEST rather than ignored.
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

from odradek.broker.groups.messages import LeavingMember
from odradek.broker.groups.requests import (
    GROUP_KEY,
    CommitPartition,
    CommitTopic,
    Coordinator,
    DeleteGroups,
    DescribeGroups,
    FetchedTopic,
    FindCoordinator,
    Heartbeat,
    JoinGroup,
    LeaveGroup,
    ListGroups,
    OffsetCommit,
    OffsetDelete,
    OffsetFetch,
    OffsetFetchAnswer,
    SyncGroup,
    TopicPartitions,
)
from odradek.broker.kafka.apis import ApiRegistry, schema_api
from odradek.broker.kafka.backend import KafkaBackend
from odradek.broker.kafka.wire import KafkaContext
from odradek.client.errors import ErrorCode

NONE = int(ErrorCode.NONE)
DEFAULT_RETENTION_MS = -1  # OffsetCommit v2-v4: the broker's offsets retention


def commit_topics(topics: Iterable[Any], with_epoch: bool) -> tuple[CommitTopic, ...]:
    """The offsets of an OffsetCommit or TxnOffsetCommit request as the group service takes them (the leader epoch
    only from the versions that carry it)."""
    return tuple(
        CommitTopic(
            t.name,
            tuple(
                CommitPartition(
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch if with_epoch else -1,
                    p.committed_metadata or "",
                )
                for p in t.partitions
            ),
        )
        for t in topics
    )


def _fetched_topics(topic_cls: Any, partition_cls: Any, topics: Iterable[FetchedTopic]) -> list[Any]:
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
                    error_code=p.error,
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

    # ---- FindCoordinator ----

    def _coordinator(self, c: Coordinator) -> tuple[int, str | None, int, str, int]:
        """(error, message, node, host, port) with the coordinator's address on the Kafka listener: a client given
        the gRPC address would speak the wrong protocol to it."""
        if c.error != ErrorCode.NONE:
            return c.error, c.error_message or None, -1, "", -1
        endpoint = self.backend.endpoint(c.node_id)
        if endpoint is None:
            message = f"broker {c.node_id} coordinates {c.key!r} but has no Kafka listener"
            return int(ErrorCode.COORDINATOR_NOT_AVAILABLE), message, -1, "", -1
        return NONE, None, c.node_id, endpoint[0], endpoint[1]

    async def find_coordinator(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        keys = list(req.coordinator_keys) if v >= 4 else [req.key]
        key_type = req.key_type if v >= 1 else GROUP_KEY
        answer = await self.groups.find_coordinator(FindCoordinator(key_type, tuple(keys)), ctx.request_context)
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
        request = JoinGroup(
            group_id=req.group_id,
            member_id=req.member_id,
            group_instance_id=req.group_instance_id if v >= 5 else None,
            protocol_type=req.protocol_type,
            protocols=tuple((p.name, p.metadata) for p in req.protocols),
            session_timeout_ms=req.session_timeout_ms,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            reason=(req.reason or "") if v >= 8 else "",
            client_id=ctx.client_id,
        )
        r = await self.groups.join_group(request, ctx.request_context)
        Member = JoinGroupResponse.JoinGroupResponseMember
        return JoinGroupResponse(
            version=v,
            error_code=int(r.error),
            generation_id=r.generation_id,
            protocol_type=r.protocol_type or None,
            # Nullable from v7 on; before, an empty string stands for "none chosen".
            protocol_name=(r.protocol_name or None) if v >= 7 else (r.protocol_name or ""),
            leader=r.leader,
            skip_assignment=r.skip_assignment,
            member_id=r.member_id,
            members=[
                Member(member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata)
                for m in r.members
            ],
        )

    async def sync_group(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        request = SyncGroup(
            group_id=req.group_id,
            member_id=req.member_id,
            group_instance_id=req.group_instance_id if v >= 3 else None,
            generation_id=req.generation_id,
            protocol_type=(req.protocol_type or None) if v >= 5 else None,
            protocol_name=(req.protocol_name or None) if v >= 5 else None,
            assignments=tuple((a.member_id, a.assignment) for a in req.assignments),
        )
        r = await self.groups.sync_group(request, ctx.request_context)
        return SyncGroupResponse(
            version=v,
            error_code=int(r.error),
            protocol_type=r.protocol_type or None,
            protocol_name=r.protocol_name or None,
            assignment=r.assignment,
        )

    async def heartbeat(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        instance = req.group_instance_id if v >= 3 else None
        request = Heartbeat(req.group_id, req.member_id, instance, req.generation_id)
        r = await self.groups.heartbeat(request, ctx.request_context)
        return HeartbeatResponse(version=v, error_code=int(r.error))

    async def leave_group(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        if v >= 3:
            members = tuple(
                LeavingMember(m.member_id, m.group_instance_id, (m.reason or "") if v >= 5 else "") for m in req.members
            )
        else:
            members = (LeavingMember(req.member_id),)
        r = await self.groups.leave_group(LeaveGroup(req.group_id, members), ctx.request_context)
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
                MemberResponse(member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=int(m.error))
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
        request = OffsetCommit(
            group_id=req.group_id,
            generation_id=req.generation_id_or_member_epoch,
            member_id=req.member_id,
            group_instance_id=req.group_instance_id if v >= 7 else None,
            topics=commit_topics(req.topics, with_epoch=v >= 6),
            api_version=v,
        )
        r = await self.groups.offset_commit(request, ctx.request_context)
        topics = [
            Topic(
                name=t.name,
                partitions=[Partition(partition_index=p.partition, error_code=p.error) for p in t.partitions],
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
    ) -> OffsetFetchAnswer:
        member_id, member_epoch = member
        request = OffsetFetch(
            group_id=group_id,
            topics=None if topics is None else tuple(TopicPartitions(name, tuple(ps)) for name, ps in topics),
            require_stable=require_stable,
            member_id=member_id,
            member_epoch=member_epoch if member_epoch >= 0 else -1,
        )
        return await self.groups.offset_fetch(request, ctx.request_context)

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
                groups.append(Group(group_id=g.group_id, topics=topics, error_code=r.error))
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
                        Partition(partition_index=p, committed_offset=-1, metadata="", error_code=r.error)
                        for p in partitions
                    ],
                )
                for name, partitions in wanted or ()
            ]
            return OffsetFetchResponse(version=v, topics=topics)
        topics = _fetched_topics(Topic, Partition, r.topics)
        return OffsetFetchResponse(version=v, topics=topics, error_code=r.error)

    async def offset_delete(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        request = OffsetDelete(
            req.group_id,
            tuple(TopicPartitions(t.name, tuple(p.partition_index for p in t.partitions)) for t in req.topics),
        )
        r = await self.groups.offset_delete(request, ctx.request_context)
        if r.error != ErrorCode.NONE:  # the group's error is the whole answer, as Kafka's
            return OffsetDeleteResponse(version=v, error_code=r.error, topics=[])
        errors = {(t.name, p.partition): p.error for t in r.topics for p in t.partitions}
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
        r = await self.groups.describe_groups(DescribeGroups(tuple(req.groups)), ctx.request_context)
        Group = DescribeGroupsResponse.DescribedGroup
        Member = Group.DescribedGroupMember
        groups = [
            Group(
                error_code=g.error,
                group_id=g.group_id,
                group_state=g.group_state,
                protocol_type=g.protocol_type,
                protocol_data=g.protocol_data,
                members=[
                    Member(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
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
        states = tuple(req.states_filter) if v >= 4 else ()
        types = tuple(req.types_filter) if v >= 5 else ()
        r = await self.groups.list_groups(ListGroups(states, types), ctx.request_context)
        Listed = ListGroupsResponse.ListedGroup
        return ListGroupsResponse(
            version=v,
            error_code=r.error,
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
        r = await self.groups.delete_groups(DeleteGroups(tuple(req.groups_names)), ctx.request_context)
        Result = DeleteGroupsResponse.DeletableGroupResult
        return DeleteGroupsResponse(
            version=v, results=[Result(group_id=g.group_id, error_code=g.error) for g in r.results]
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
