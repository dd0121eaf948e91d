"""The ``GroupCoordinator`` gRPC service on the broker listener: request and response translation only.

Every decision is the ``GroupCoordinator``'s (and its cores'); a request it cannot serve here raises
``CoordinatorError`` with the code to answer (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, INVALID_GROUP_ID, ...).
The client host of a JoinGroup is the gRPC peer's address, as Kafka takes it from the connection.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from odradek.broker.groups.consumer_messages import (
    ConsumerGroupDescription,
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResponse,
)
from odradek.broker.groups.coordinator import CoordinatorError, GroupCoordinator
from odradek.broker.groups.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeavingMember,
    SyncGroupRequest,
)
from odradek.broker.groups.offsets import NO_OFFSET, OffsetAndMetadata
from odradek.client.common.access import OPEN, AccessControl, denial_code
from odradek.client.common.acls import AclOperation, ResourceType
from odradek.client.common.caller import caller_of
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition
from odradek.proto import group_pb2 as gpb
from odradek.proto import group_pb2_grpc


def peer_host(context: Any) -> str:
    """The client's address from a gRPC peer string (``ipv4:1.2.3.4:5678``, ``ipv6:[::1]:5678``)."""
    peer = context.peer() if context is not None else ""
    if not peer:
        return ""
    kind, _, address = peer.partition(":")
    if kind not in ("ipv4", "ipv6"):
        return address or peer
    host = address.rpartition(":")[0]
    return host.strip("[]")


FindTxnCoordinator = Callable[[str], tuple[int, int, str, int]]
"""transactional id -> (error, node id, host, port) of its coordinator."""


def _optional(message: Any, name: str) -> str | None:
    return getattr(message, name) if message.HasField(name) else None


def _code(code: int) -> ErrorCode.ValueType:
    return ErrorCode.ValueType(code)


def _commit_offsets(topics: Iterable[gpb.OffsetCommitTopic]) -> dict[TopicPartition, OffsetAndMetadata]:
    return {
        TopicPartition(t.name, p.partition): OffsetAndMetadata(
            p.committed_offset, p.committed_leader_epoch, p.committed_metadata
        )
        for t in topics
        for p in t.partitions
    }


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroup:
    error: ErrorCode.ValueType
    message: str | None
    group: ConsumerGroupDescription | None
    topic_names: Mapping[bytes, str]  # topic id -> name, to name the topics of its assignments


_GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
_TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED


class GroupCoordinatorService(group_pb2_grpc.GroupCoordinatorServicer):
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

    def _allowed(self, context: Any, operation: AclOperation, kind: ResourceType, name: str, api: str) -> bool:
        access = self.access
        return not access.enabled or access.allows(caller_of(context), operation, kind, name, api=api)

    def _denied_topics(
        self, context: Any, operation: AclOperation, names: Iterable[str], api: str, *, audit_denial: bool = True
    ) -> set[str]:
        access = self.access
        if not access.enabled:
            return set()
        return access.denied(
            caller_of(context), operation, ResourceType.TOPIC, names, api=api, audit_denial=audit_denial
        )

    async def FindCoordinator(self, request, context):
        coordinators = []
        for key in request.keys:
            kind = ResourceType.TRANSACTIONAL_ID if request.key_type == gpb.TRANSACTION else ResourceType.GROUP
            if request.key_type in (gpb.TRANSACTION, gpb.GROUP) and not self._allowed(
                context, AclOperation.DESCRIBE, kind, key, "FindCoordinator"
            ):
                code = ErrorCode.ValueType(denial_code(kind))
                coordinators.append(gpb.Coordinator(key=key, error=code, node_id=-1, port=-1))
                continue
            if request.key_type == gpb.TRANSACTION and self.find_transaction_coordinator is not None:
                if not key:
                    coordinators.append(
                        gpb.Coordinator(
                            key=key,
                            error=ErrorCode.INVALID_REQUEST,
                            error_message="the transactional id is empty",
                            node_id=-1,
                            port=-1,
                        )
                    )
                    continue
                error, node, host, port = self.find_transaction_coordinator(key)
                coordinators.append(gpb.Coordinator(key=key, error=_code(error), node_id=node, host=host, port=port))
                continue
            if request.key_type != gpb.GROUP:
                coordinators.append(
                    gpb.Coordinator(
                        key=key,
                        error=ErrorCode.INVALID_REQUEST,
                        error_message=f"unknown coordinator key type {request.key_type}",
                        node_id=-1,
                        port=-1,
                    )
                )
                continue
            error, node, host, port = self.coordinator.find_coordinator(key)
            coordinators.append(gpb.Coordinator(key=key, error=error, node_id=node, host=host, port=port))
        return gpb.FindCoordinatorResponse(coordinators=coordinators)

    async def JoinGroup(self, request, context):
        if not self._allowed(context, AclOperation.READ, ResourceType.GROUP, request.group_id, "JoinGroup"):
            return gpb.JoinGroupResponse(error=_GROUP_DENIED, generation_id=-1, member_id=request.member_id)
        try:
            r = await self.coordinator.join(
                request.group_id,
                JoinGroupRequest(
                    token=0,
                    member_id=request.member_id,
                    group_instance_id=_optional(request, "group_instance_id"),
                    client_id=request.client_id,
                    client_host=peer_host(context),
                    session_timeout_ms=request.session_timeout_ms,
                    rebalance_timeout_ms=request.rebalance_timeout_ms,
                    protocol_type=request.protocol_type,
                    protocols=tuple((p.name, p.metadata) for p in request.protocols),
                    reason=request.reason,
                ),
            )
        except CoordinatorError as e:
            return gpb.JoinGroupResponse(error=_code(e.code), generation_id=-1, member_id=request.member_id)
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
        if not self._allowed(context, AclOperation.READ, ResourceType.GROUP, request.group_id, "SyncGroup"):
            return gpb.SyncGroupResponse(error=_GROUP_DENIED)
        try:
            r = await self.coordinator.sync(
                request.group_id,
                SyncGroupRequest(
                    token=0,
                    member_id=request.member_id,
                    group_instance_id=_optional(request, "group_instance_id"),
                    generation_id=request.generation_id,
                    protocol_type=request.protocol_type or None,
                    protocol_name=request.protocol_name or None,
                    assignments=tuple((a.member_id, a.assignment) for a in request.assignments),
                ),
            )
        except CoordinatorError as e:
            return gpb.SyncGroupResponse(error=_code(e.code))
        return gpb.SyncGroupResponse(
            error=_code(r.error),
            protocol_type=r.protocol_type or "",
            protocol_name=r.protocol_name or "",
            assignment=r.assignment,
        )

    async def Heartbeat(self, request, context):
        if not self._allowed(context, AclOperation.READ, ResourceType.GROUP, request.group_id, "Heartbeat"):
            return gpb.HeartbeatResponse(error=_GROUP_DENIED)
        try:
            r = await self.coordinator.heartbeat(
                request.group_id,
                HeartbeatRequest(request.member_id, _optional(request, "group_instance_id"), request.generation_id),
            )
        except CoordinatorError as e:
            return gpb.HeartbeatResponse(error=_code(e.code))
        return gpb.HeartbeatResponse(error=_code(r.error))

    async def LeaveGroup(self, request, context):
        if not self._allowed(context, AclOperation.READ, ResourceType.GROUP, request.group_id, "LeaveGroup"):
            return gpb.LeaveGroupResponse(error=_GROUP_DENIED)
        leaving = tuple(
            LeavingMember(m.member_id, _optional(m, "group_instance_id"), m.reason) for m in request.members
        )
        try:
            r = await self.coordinator.leave(request.group_id, LeaveGroupRequest(leaving))
        except CoordinatorError as e:
            return gpb.LeaveGroupResponse(error=_code(e.code))
        response = gpb.LeaveGroupResponse(error=_code(r.error))
        for m in r.members:
            left = response.members.add(member_id=m.member_id, error=_code(m.error))
            if m.group_instance_id is not None:
                left.group_instance_id = m.group_instance_id
        return response

    async def OffsetCommit(self, request, context):
        offsets = _commit_offsets(request.topics)
        refused = self._commit_refusals(context, request.group_id, offsets, "OffsetCommit")
        allowed = {tp: o for tp, o in offsets.items() if tp not in refused}
        try:
            errors = (
                await self.coordinator.commit_offsets(
                    request.group_id,
                    request.member_id,
                    _optional(request, "group_instance_id"),
                    request.generation_id,
                    allowed,
                )
                if allowed or not refused
                else {}
            )
        except CoordinatorError as e:
            errors = dict.fromkeys(allowed, _code(e.code))
        errors.update(refused)
        response = gpb.OffsetCommitResponse()
        for t in request.topics:
            topic = response.topics.add(name=t.name)
            for p in t.partitions:
                topic.partitions.add(partition=p.partition, error=errors[TopicPartition(t.name, p.partition)])
        return response

    def _commit_refusals(
        self, context: Any, group_id: str, offsets: dict[TopicPartition, OffsetAndMetadata], api: str
    ) -> dict[TopicPartition, ErrorCode.ValueType]:
        """The partitions whose commit the caller may not make, with their errors: all of them without group
        Read, those of topics it may not Read otherwise."""
        if not self.access.enabled:
            return {}
        if not self._allowed(context, AclOperation.READ, ResourceType.GROUP, group_id, api):
            return dict.fromkeys(offsets, _GROUP_DENIED)
        denied = self._denied_topics(context, AclOperation.READ, (tp.topic for tp in offsets), api)
        return {tp: _TOPIC_DENIED for tp in offsets if tp.topic in denied}

    async def TxnOffsetCommit(self, request, context):
        offsets = _commit_offsets(request.topics)
        if not self._allowed(
            context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id, "TxnOffsetCommit"
        ):
            refused = dict.fromkeys(offsets, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        else:
            refused = self._commit_refusals(context, request.group_id, offsets, "TxnOffsetCommit")
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
                    _optional(request, "group_instance_id"),
                    allowed,
                )
            except CoordinatorError as e:
                errors = dict.fromkeys(allowed, int(e.code))
        errors.update(refused)
        response = gpb.TxnOffsetCommitResponse()
        for t in request.topics:
            topic = response.topics.add(name=t.name)
            for p in t.partitions:
                topic.partitions.add(partition=p.partition, error=_code(errors[TopicPartition(t.name, p.partition)]))
        return response

    async def OffsetFetch(self, request, context):
        if not self._allowed(context, AclOperation.DESCRIBE, ResourceType.GROUP, request.group_id, "OffsetFetch"):
            return gpb.OffsetFetchResponse(error=_GROUP_DENIED)
        wanted = (
            None if request.all_topics else [TopicPartition(t.name, p) for t in request.topics for p in t.partitions]
        )
        hidden: set[str] = set()  # topics the caller may not describe: refused by name, left out of "all"
        if wanted is not None:
            hidden = self._denied_topics(
                context, AclOperation.DESCRIBE, (t.name for t in request.topics), "OffsetFetch"
            )
            wanted = [tp for tp in wanted if tp.topic not in hidden]
        try:
            error, offsets = self.coordinator.fetch_offsets(
                request.group_id,
                wanted,
                _optional(request, "member_id"),
                request.member_epoch if request.HasField("member_epoch") else -1,
            )
            unstable = (
                self.coordinator.unstable_partitions(request.group_id, wanted)
                if request.require_stable and error == ErrorCode.NONE
                else set()
            )
        except CoordinatorError as e:
            return gpb.OffsetFetchResponse(error=_code(e.code))
        response = gpb.OffsetFetchResponse(error=error)
        by_topic: dict[str, gpb.OffsetFetchTopicResponse] = {}
        for tp in unstable:  # KIP-447: an offset about to change is not answered (a retriable error instead)
            offsets[tp] = NO_OFFSET
        if wanted is None and self.access.enabled:
            topics = {tp.topic for tp in offsets}
            hidden = self._denied_topics(context, AclOperation.DESCRIBE, topics, "OffsetFetch", audit_denial=False)
            offsets = {tp: value for tp, value in offsets.items() if tp.topic not in hidden}
        elif hidden:
            for t in request.topics:
                if t.name in hidden:
                    refused = response.topics.add(name=t.name)
                    for p in t.partitions:
                        refused.partitions.add(
                            partition=p, committed_offset=-1, committed_leader_epoch=-1, error=_TOPIC_DENIED
                        )
        for tp, value in sorted(offsets.items()):
            topic = by_topic.get(tp.topic)
            if topic is None:
                topic = by_topic[tp.topic] = response.topics.add(name=tp.topic)
            topic.partitions.add(
                partition=tp.partition,
                committed_offset=value.offset,
                committed_leader_epoch=value.leader_epoch,
                metadata=value.metadata,
                error=ErrorCode.UNSTABLE_OFFSET_COMMIT if tp in unstable else ErrorCode.NONE,
            )
        return response

    async def OffsetDelete(self, request, context):
        if not self._allowed(context, AclOperation.DELETE, ResourceType.GROUP, request.group_id, "OffsetDelete"):
            return gpb.OffsetDeleteResponse(error=_GROUP_DENIED)
        partitions = [TopicPartition(t.name, p) for t in request.topics for p in t.partitions]
        denied = self._denied_topics(context, AclOperation.READ, (t.name for t in request.topics), "OffsetDelete")
        try:
            error, errors = await self.coordinator.delete_offsets(
                request.group_id, [tp for tp in partitions if tp.topic not in denied]
            )
        except CoordinatorError as e:
            return gpb.OffsetDeleteResponse(error=_code(e.code))
        errors.update((tp, _TOPIC_DENIED) for tp in partitions if tp.topic in denied)
        response = gpb.OffsetDeleteResponse(error=error)
        if error == ErrorCode.NONE:
            for t in request.topics:
                topic = response.topics.add(name=t.name)
                for p in t.partitions:
                    topic.partitions.add(partition=p, error=errors[TopicPartition(t.name, p)])
        return response

    # ---- KIP-848: called by the Kafka listener with the cores' typed requests (no gRPC rpc yet) ----

    async def consumer_group_heartbeat(
        self, group_id: str, request: ConsumerHeartbeatRequest, context: Any
    ) -> ConsumerHeartbeatResponse:
        """ConsumerGroupHeartbeat: group Read, and Describe of every subscribed topic named (as Kafka's). With an
        authorizer, a regular expression resolves only to the topics the caller may describe (Kafka's
        filterTopicDescribeAuthorizedTopics, which does not audit the denials)."""
        api = "ConsumerGroupHeartbeat"
        if not self._allowed(context, AclOperation.READ, ResourceType.GROUP, group_id, api):
            return ConsumerHeartbeatResponse(_GROUP_DENIED)
        names = request.subscribed_topic_names or ()
        if names and self._denied_topics(context, AclOperation.DESCRIBE, names, api):
            return ConsumerHeartbeatResponse(_TOPIC_DENIED)
        authorized = None
        if self.access.enabled:

            def authorized(topics: Sequence[str]) -> set[str]:
                denied = self._denied_topics(context, AclOperation.DESCRIBE, topics, api, audit_denial=False)
                return set(topics) - denied

        try:
            return await self.coordinator.consumer_heartbeat(
                group_id, replace(request, client_host=peer_host(context)), authorized
            )
        except CoordinatorError as e:
            return ConsumerHeartbeatResponse(_code(e.code), str(e))

    def consumer_group_describe(self, group_id: str, context: Any) -> DescribedConsumerGroup:
        """ConsumerGroupDescribe of one group (group Describe), with the name of each assigned topic; a group whose
        members' subscriptions or assignments name a topic the caller may not describe is TOPIC_AUTHORIZATION_FAILED
        (as Kafka's)."""
        api = "ConsumerGroupDescribe"
        if not self._allowed(context, AclOperation.DESCRIBE, ResourceType.GROUP, group_id, api):
            return DescribedConsumerGroup(_GROUP_DENIED, None, None, {})
        try:
            error, message, description = self.coordinator.describe_consumer_group(group_id)
        except CoordinatorError as e:
            return DescribedConsumerGroup(_code(e.code), str(e), None, {})
        names = self.coordinator.topic_names()
        if description is not None and self.access.enabled:
            topics = {n for m in description.members for n in m.subscribed_topic_names}
            topics.update(
                names[t] for m in description.members for t, _ in m.assignment | m.target_assignment if t in names
            )
            if self._denied_topics(context, AclOperation.DESCRIBE, topics, api):
                message = "The group has described topic(s) that the client is not authorized to describe."
                return DescribedConsumerGroup(_TOPIC_DENIED, message, None, {})
        return DescribedConsumerGroup(error, message, description, names)

    async def ListGroups(self, request, context):
        error, groups = self.coordinator.list_groups(request.states_filter, request.types_filter)
        access = self.access
        if access.enabled:  # every group with cluster Describe, else those the caller may describe
            caller = caller_of(context)
            if not access.allows_cluster(caller, AclOperation.DESCRIBE, api="ListGroups", audit_denial=False):
                groups = [
                    g
                    for g in groups
                    if access.allows(caller, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id, audit_denial=False)
                ]
        return gpb.ListGroupsResponse(
            error=error,
            groups=[
                gpb.ListedGroup(
                    group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state, group_type=g.group_type
                )
                for g in groups
            ],
        )

    async def DescribeGroups(self, request, context):
        response = gpb.DescribeGroupsResponse()
        for group_id in request.groups:
            if not self._allowed(context, AclOperation.DESCRIBE, ResourceType.GROUP, group_id, "DescribeGroups"):
                response.groups.add(error=_GROUP_DENIED, group_id=group_id, generation_id=-1)
                continue
            try:
                d = self.coordinator.describe(group_id)
            except CoordinatorError as e:
                response.groups.add(error=_code(e.code), group_id=group_id, generation_id=-1)
                continue
            described = response.groups.add(
                group_id=d.group_id,
                group_state=d.state,
                protocol_type=d.protocol_type,
                protocol_data=d.protocol_name,
                generation_id=d.generation_id,
                leader=d.leader,
                group_type=d.group_type,
            )
            for m in d.members:
                member = described.members.add(
                    member_id=m.member_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata,
                    member_assignment=m.assignment,
                )
                if m.group_instance_id is not None:
                    member.group_instance_id = m.group_instance_id
        return response

    async def DeleteGroups(self, request, context):
        response = gpb.DeleteGroupsResponse()
        for group_id in request.groups:
            if not self._allowed(context, AclOperation.DELETE, ResourceType.GROUP, group_id, "DeleteGroups"):
                response.results.add(group_id=group_id, error=_GROUP_DENIED)
                continue
            try:
                error = await self.coordinator.delete_group(group_id)
            except CoordinatorError as e:
                error = _code(e.code)
            response.results.add(group_id=group_id, error=error)
        return response
