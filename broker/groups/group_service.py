"""The group service: the group APIs (FindCoordinator, the classic protocol, KIP-848's heartbeat and describe,
offsets, and the admin's list, describe and delete) as every listener serves them, over the ``GroupCoordinator``.

Each method takes one typed request (``requests``) and the ``RequestContext`` of its caller, checks the caller's
ACLs as Kafka does, and answers a typed answer; the listeners' adapters (the gRPC ``GroupCoordinatorService``, the
Kafka listener's handlers, the HTTP API) only translate. A request the coordinator cannot serve here is answered
with the code its ``CoordinatorError`` carries (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, INVALID_GROUP_ID,
...). A classic member's client host is the caller's address, as Kafka takes it from the connection.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from odradek.broker.groups.consumer_messages import ConsumerHeartbeatResponse
from odradek.broker.groups.coordinator import CoordinatorError, GroupCoordinator
from odradek.broker.groups.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from odradek.broker.groups.offsets import NO_OFFSET, OffsetAndMetadata
from odradek.broker.groups.requests import (
    GROUP_KEY,
    NONE,
    TRANSACTION_KEY,
    CommitTopic,
    ConsumerGroupDescribe,
    ConsumerGroupDescribeAnswer,
    ConsumerGroupHeartbeat,
    Coordinator,
    DeletedGroup,
    DeleteGroups,
    DeleteGroupsAnswer,
    DescribedConsumerGroup,
    DescribedGroup,
    DescribedMember,
    DescribeGroups,
    DescribeGroupsAnswer,
    FetchedPartition,
    FetchedTopic,
    FindCoordinator,
    FindCoordinatorAnswer,
    Heartbeat,
    JoinGroup,
    LeaveGroup,
    ListedGroup,
    ListGroups,
    ListGroupsAnswer,
    OffsetCommit,
    OffsetCommitAnswer,
    OffsetDelete,
    OffsetDeleteAnswer,
    OffsetFetch,
    OffsetFetchAnswer,
    PartitionError,
    SyncGroup,
    TopicErrors,
    TxnOffsetCommit,
)
from odradek.client.common.access import OPEN, AccessControl, denial_code
from odradek.client.common.acls import AclOperation, ResourceType
from odradek.client.common.request_context import RequestContext
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition

FindTxnCoordinator = Callable[[str], tuple[int, int, str, int]]
"""transactional id -> (error, node id, host, port) of its coordinator."""

_GROUP_DENIED = int(ErrorCode.GROUP_AUTHORIZATION_FAILED)
_TOPIC_DENIED = int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)


def client_host(peer: str) -> str:
    """The client's address from a gRPC-style peer string (``ipv4:1.2.3.4:5678``, ``ipv6:[::1]:5678``), as a group
    member's host; the address itself for another kind of peer, empty for none."""
    if not peer:
        return ""
    kind, _, address = peer.partition(":")
    if kind not in ("ipv4", "ipv6"):
        return address or peer
    host = address.rpartition(":")[0]
    return host.strip("[]")


def _commit_offsets(topics: Iterable[CommitTopic]) -> dict[TopicPartition, OffsetAndMetadata]:
    return {
        TopicPartition(t.name, p.partition): OffsetAndMetadata(
            p.committed_offset, p.committed_leader_epoch, p.committed_metadata
        )
        for t in topics
        for p in t.partitions
    }


def _in_request_order(topics: Iterable[CommitTopic], errors: dict[TopicPartition, int]) -> OffsetCommitAnswer:
    return OffsetCommitAnswer(
        tuple(
            TopicErrors(
                t.name,
                tuple(
                    PartitionError(p.partition, int(errors[TopicPartition(t.name, p.partition)])) for p in t.partitions
                ),
            )
            for t in topics
        )
    )


class GroupService:
    """``find_transaction_coordinator`` answers FindCoordinator for transactional ids (key type TRANSACTION).
    ``access``: each API's ACL checks, as Kafka's (group Read to take part in a group and commit, Describe to read
    its offsets or describe it, Delete to delete it or its offsets; topic Read to commit, Describe to read offsets).
    """

    def __init__(
        self,
        coordinator: GroupCoordinator,
        find_transaction_coordinator: FindTxnCoordinator | None = None,
        access: AccessControl = OPEN,
    ):
        self.coordinator = coordinator
        self.find_transaction_coordinator = find_transaction_coordinator
        self.access = access

    def _allowed(self, ctx: RequestContext, operation: AclOperation, kind: ResourceType, name: str, api: str) -> bool:
        access = self.access
        return not access.enabled or access.allows(ctx.caller, operation, kind, name, api=api)

    def _denied_topics(
        self,
        ctx: RequestContext,
        operation: AclOperation,
        names: Iterable[str],
        api: str,
        *,
        audit_denial: bool = True,
    ) -> set[str]:
        access = self.access
        if not access.enabled:
            return set()
        return access.denied(ctx.caller, operation, ResourceType.TOPIC, names, api=api, audit_denial=audit_denial)

    # ---- FindCoordinator ----

    async def find_coordinator(self, request: FindCoordinator, ctx: RequestContext) -> FindCoordinatorAnswer:
        """Each key's coordinator, with its address on the broker listener (the Kafka listener's adapter answers its
        own)."""
        return FindCoordinatorAnswer(tuple(self._coordinator(request.key_type, key, ctx) for key in request.keys))

    def _coordinator(self, key_type: int, key: str, ctx: RequestContext) -> Coordinator:
        kind = ResourceType.TRANSACTIONAL_ID if key_type == TRANSACTION_KEY else ResourceType.GROUP
        if key_type in (TRANSACTION_KEY, GROUP_KEY) and not self._allowed(
            ctx, AclOperation.DESCRIBE, kind, key, "FindCoordinator"
        ):
            return Coordinator(key, int(denial_code(kind)))
        if key_type == TRANSACTION_KEY and self.find_transaction_coordinator is not None:
            if not key:
                return Coordinator(key, int(ErrorCode.INVALID_REQUEST), error_message="the transactional id is empty")
            error, node, host, port = self.find_transaction_coordinator(key)
            return Coordinator(key, int(error), node, host, port)
        if key_type != GROUP_KEY:
            message = f"unknown coordinator key type {key_type}"
            return Coordinator(key, int(ErrorCode.INVALID_REQUEST), error_message=message)
        error, node, host, port = self.coordinator.find_coordinator(key)
        return Coordinator(key, int(error), node, host, port)

    # ---- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ----

    async def join_group(self, request: JoinGroup, ctx: RequestContext) -> JoinGroupResponse:
        if not self._allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id, "JoinGroup"):
            return JoinGroupResponse(ErrorCode.GROUP_AUTHORIZATION_FAILED, request.member_id)
        try:
            return await self.coordinator.join(
                request.group_id,
                JoinGroupRequest(
                    token=0,
                    member_id=request.member_id,
                    group_instance_id=request.group_instance_id,
                    client_id=request.client_id,
                    client_host=client_host(ctx.peer),
                    session_timeout_ms=request.session_timeout_ms,
                    rebalance_timeout_ms=request.rebalance_timeout_ms,
                    protocol_type=request.protocol_type,
                    protocols=request.protocols,
                    reason=request.reason,
                ),
            )
        except CoordinatorError as e:
            return JoinGroupResponse(ErrorCode.ValueType(e.code), request.member_id)

    async def sync_group(self, request: SyncGroup, ctx: RequestContext) -> SyncGroupResponse:
        if not self._allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id, "SyncGroup"):
            return SyncGroupResponse(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        try:
            return await self.coordinator.sync(
                request.group_id,
                SyncGroupRequest(
                    token=0,
                    member_id=request.member_id,
                    group_instance_id=request.group_instance_id,
                    generation_id=request.generation_id,
                    protocol_type=request.protocol_type,
                    protocol_name=request.protocol_name,
                    assignments=request.assignments,
                ),
            )
        except CoordinatorError as e:
            return SyncGroupResponse(ErrorCode.ValueType(e.code))

    async def heartbeat(self, request: Heartbeat, ctx: RequestContext) -> HeartbeatResponse:
        if not self._allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id, "Heartbeat"):
            return HeartbeatResponse(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        try:
            return await self.coordinator.heartbeat(
                request.group_id,
                HeartbeatRequest(request.member_id, request.group_instance_id, request.generation_id),
            )
        except CoordinatorError as e:
            return HeartbeatResponse(ErrorCode.ValueType(e.code))

    async def leave_group(self, request: LeaveGroup, ctx: RequestContext) -> LeaveGroupResponse:
        if not self._allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id, "LeaveGroup"):
            return LeaveGroupResponse(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        try:
            return await self.coordinator.leave(request.group_id, LeaveGroupRequest(request.members))
        except CoordinatorError as e:
            return LeaveGroupResponse(ErrorCode.ValueType(e.code))

    # ---- OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete ----

    async def offset_commit(self, request: OffsetCommit, ctx: RequestContext) -> OffsetCommitAnswer:
        offsets = _commit_offsets(request.topics)
        refused = self._commit_refusals(ctx, request.group_id, offsets, "OffsetCommit")
        allowed = {tp: o for tp, o in offsets.items() if tp not in refused}
        errors: dict[TopicPartition, int] = {}
        try:
            if allowed or not refused:
                made = await self.coordinator.commit_offsets(
                    request.group_id,
                    request.member_id,
                    request.group_instance_id,
                    request.generation_id,
                    allowed,
                    api_version=request.api_version,
                )
                errors = {tp: int(error) for tp, error in made.items()}
        except CoordinatorError as e:
            errors = dict.fromkeys(allowed, int(e.code))
        errors.update(refused)
        return _in_request_order(request.topics, errors)

    def _commit_refusals(
        self, ctx: RequestContext, group_id: str, offsets: dict[TopicPartition, OffsetAndMetadata], api: str
    ) -> dict[TopicPartition, int]:
        """The partitions whose commit the caller may not make, with their errors: all of them without group
        Read, those of topics it may not Read otherwise."""
        if not self.access.enabled:
            return {}
        if not self._allowed(ctx, AclOperation.READ, ResourceType.GROUP, group_id, api):
            return dict.fromkeys(offsets, _GROUP_DENIED)
        denied = self._denied_topics(ctx, AclOperation.READ, (tp.topic for tp in offsets), api)
        return {tp: _TOPIC_DENIED for tp in offsets if tp.topic in denied}

    async def txn_offset_commit(self, request: TxnOffsetCommit, ctx: RequestContext) -> OffsetCommitAnswer:
        offsets = _commit_offsets(request.topics)
        if not self._allowed(
            ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id, "TxnOffsetCommit"
        ):
            refused = dict.fromkeys(offsets, int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
        else:
            refused = self._commit_refusals(ctx, request.group_id, offsets, "TxnOffsetCommit")
        allowed = {tp: o for tp, o in offsets.items() if tp not in refused}
        errors: dict[TopicPartition, int] = {}
        if allowed or not refused:
            try:
                errors = await self.coordinator.txn_commit_offsets(
                    request.group_id,
                    request.transactional_id,
                    request.producer_id,
                    request.producer_epoch,
                    request.generation_id,
                    request.member_id,
                    request.group_instance_id,
                    allowed,
                )
            except CoordinatorError as e:
                errors = dict.fromkeys(allowed, int(e.code))
        errors.update(refused)
        return _in_request_order(request.topics, errors)

    async def offset_fetch(self, request: OffsetFetch, ctx: RequestContext) -> OffsetFetchAnswer:
        if not self._allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, request.group_id, "OffsetFetch"):
            return OffsetFetchAnswer(_GROUP_DENIED)
        asked = request.topics
        wanted: list[TopicPartition] | None = None  # None: every partition the group has committed
        hidden: set[str] = set()  # topics the caller may not describe: refused by name, left out of "all"
        if asked is not None:
            hidden = self._denied_topics(ctx, AclOperation.DESCRIBE, (t.name for t in asked), "OffsetFetch")
            wanted = [TopicPartition(t.name, p) for t in asked if t.name not in hidden for p in t.partitions]
        try:
            error, offsets = self.coordinator.fetch_offsets(
                request.group_id, wanted, request.member_id, request.member_epoch
            )
            unstable = (
                self.coordinator.unstable_partitions(request.group_id, wanted)
                if request.require_stable and error == ErrorCode.NONE
                else set()
            )
        except CoordinatorError as e:
            return OffsetFetchAnswer(int(e.code))
        topics: list[FetchedTopic] = []
        for tp in unstable:  # KIP-447: an offset about to change is not answered (a retriable error instead)
            offsets[tp] = NO_OFFSET
        if asked is None and self.access.enabled:
            names = {tp.topic for tp in offsets}
            hidden = self._denied_topics(ctx, AclOperation.DESCRIBE, names, "OffsetFetch", audit_denial=False)
            offsets = {tp: value for tp, value in offsets.items() if tp.topic not in hidden}
        elif asked is not None and hidden:
            topics += [
                FetchedTopic(t.name, tuple(FetchedPartition(p, -1, -1, error=_TOPIC_DENIED) for p in t.partitions))
                for t in asked
                if t.name in hidden
            ]
        by_topic: dict[str, list[FetchedPartition]] = {}
        for tp, value in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append(
                FetchedPartition(
                    tp.partition,
                    value.offset,
                    value.leader_epoch,
                    value.metadata,
                    int(ErrorCode.UNSTABLE_OFFSET_COMMIT) if tp in unstable else NONE,
                )
            )
        topics += [FetchedTopic(name, tuple(partitions)) for name, partitions in by_topic.items()]
        return OffsetFetchAnswer(int(error), tuple(topics))

    async def offset_delete(self, request: OffsetDelete, ctx: RequestContext) -> OffsetDeleteAnswer:
        if not self._allowed(ctx, AclOperation.DELETE, ResourceType.GROUP, request.group_id, "OffsetDelete"):
            return OffsetDeleteAnswer(_GROUP_DENIED)
        partitions = [TopicPartition(t.name, p) for t in request.topics for p in t.partitions]
        denied = self._denied_topics(ctx, AclOperation.READ, (t.name for t in request.topics), "OffsetDelete")
        try:
            error, deleted = await self.coordinator.delete_offsets(
                request.group_id, [tp for tp in partitions if tp.topic not in denied]
            )
        except CoordinatorError as e:
            return OffsetDeleteAnswer(int(e.code))
        if error != ErrorCode.NONE:
            return OffsetDeleteAnswer(int(error))
        errors = {tp: int(code) for tp, code in deleted.items()}
        errors.update((tp, _TOPIC_DENIED) for tp in partitions if tp.topic in denied)
        topics = tuple(
            TopicErrors(t.name, tuple(PartitionError(p, errors[TopicPartition(t.name, p)]) for p in t.partitions))
            for t in request.topics
        )
        return OffsetDeleteAnswer(NONE, topics)

    # ---- KIP-848: ConsumerGroupHeartbeat, ConsumerGroupDescribe ----

    async def consumer_group_heartbeat(
        self, request: ConsumerGroupHeartbeat, ctx: RequestContext
    ) -> ConsumerHeartbeatResponse:
        """ConsumerGroupHeartbeat: group Read, and Describe of every subscribed topic named (as Kafka's). With an
        authorizer, a regular expression resolves only to the topics the caller may describe (Kafka's
        filterTopicDescribeAuthorizedTopics, which does not audit the denials)."""
        api = "ConsumerGroupHeartbeat"
        group_id, heartbeat = request.group_id, request.heartbeat
        if not self._allowed(ctx, AclOperation.READ, ResourceType.GROUP, group_id, api):
            return ConsumerHeartbeatResponse(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        names = heartbeat.subscribed_topic_names or ()
        if names and self._denied_topics(ctx, AclOperation.DESCRIBE, names, api):
            return ConsumerHeartbeatResponse(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        authorized = None
        if self.access.enabled:

            def authorized(topics: Sequence[str]) -> set[str]:
                denied = self._denied_topics(ctx, AclOperation.DESCRIBE, topics, api, audit_denial=False)
                return set(topics) - denied

        try:
            return await self.coordinator.consumer_heartbeat(
                group_id, replace(heartbeat, client_host=client_host(ctx.peer)), authorized
            )
        except CoordinatorError as e:
            return ConsumerHeartbeatResponse(ErrorCode.ValueType(e.code), str(e))

    async def consumer_group_describe(
        self, request: ConsumerGroupDescribe, ctx: RequestContext
    ) -> ConsumerGroupDescribeAnswer:
        return ConsumerGroupDescribeAnswer(tuple(self._describe_consumer_group(g, ctx) for g in request.group_ids))

    def _describe_consumer_group(self, group_id: str, ctx: RequestContext) -> DescribedConsumerGroup:
        """One group (group Describe), with the name of each assigned topic; a group whose members' subscriptions or
        assignments name a topic the caller may not describe is TOPIC_AUTHORIZATION_FAILED (as Kafka's)."""
        api = "ConsumerGroupDescribe"
        if not self._allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id, api):
            return DescribedConsumerGroup(_GROUP_DENIED, None, None, {})
        try:
            error, message, description = self.coordinator.describe_consumer_group(group_id)
        except CoordinatorError as e:
            return DescribedConsumerGroup(int(e.code), str(e), None, {})
        names = self.coordinator.topic_names()
        if description is not None and self.access.enabled:
            topics = {n for m in description.members for n in m.subscribed_topic_names}
            topics.update(
                names[t] for m in description.members for t, _ in m.assignment | m.target_assignment if t in names
            )
            if self._denied_topics(ctx, AclOperation.DESCRIBE, topics, api):
                message = "The group has described topic(s) that the client is not authorized to describe."
                return DescribedConsumerGroup(_TOPIC_DENIED, message, None, {})
        return DescribedConsumerGroup(int(error), message, description, names)

    # ---- ListGroups, DescribeGroups, DeleteGroups ----

    async def list_groups(self, request: ListGroups, ctx: RequestContext) -> ListGroupsAnswer:
        error, groups = self.coordinator.list_groups(request.states_filter, request.types_filter)
        access = self.access
        if access.enabled:  # every group with cluster Describe, else those the caller may describe
            caller = ctx.caller
            if not access.allows_cluster(caller, AclOperation.DESCRIBE, api="ListGroups", audit_denial=False):
                groups = [
                    g
                    for g in groups
                    if access.allows(caller, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id, audit_denial=False)
                ]
        return ListGroupsAnswer(
            int(error), tuple(ListedGroup(g.group_id, g.protocol_type, g.state, g.group_type) for g in groups)
        )

    async def describe_groups(self, request: DescribeGroups, ctx: RequestContext) -> DescribeGroupsAnswer:
        return DescribeGroupsAnswer(tuple(self._describe(group_id, ctx) for group_id in request.groups))

    def _describe(self, group_id: str, ctx: RequestContext) -> DescribedGroup:
        if not self._allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id, "DescribeGroups"):
            return DescribedGroup(group_id, _GROUP_DENIED)
        try:
            d = self.coordinator.describe(group_id)
        except CoordinatorError as e:
            return DescribedGroup(group_id, int(e.code))
        return DescribedGroup(
            group_id=d.group_id,
            group_state=d.state,
            protocol_type=d.protocol_type,
            protocol_data=d.protocol_name,
            generation_id=d.generation_id,
            leader=d.leader,
            group_type=d.group_type,
            members=tuple(
                DescribedMember(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.metadata, m.assignment)
                for m in d.members
            ),
        )

    async def delete_groups(self, request: DeleteGroups, ctx: RequestContext) -> DeleteGroupsAnswer:
        results = []
        for group_id in request.groups:
            if not self._allowed(ctx, AclOperation.DELETE, ResourceType.GROUP, group_id, "DeleteGroups"):
                results.append(DeletedGroup(group_id, _GROUP_DENIED))
                continue
            try:
                error = int(await self.coordinator.delete_group(group_id))
            except CoordinatorError as e:
                error = int(e.code)
            results.append(DeletedGroup(group_id, error))
        return DeleteGroupsAnswer(tuple(results))
