"""One KIP-848 consumer group: the coordinator-driven rebalance protocol of ConsumerGroupHeartbeat.

Sans-I/O: the shell calls ``heartbeat`` with each request, the cluster's topics and the time, ``tick`` when
``next_deadline_ms()`` is due, and ``replay`` with every stored record when it loads the group. Each call returns
the records to store (``ConsumerGroupResult``); a heartbeat's answer is delivered once they are.

The group's state changes only by replaying records, the ones it just produced included, as Kafka's coordinator
does: so a coordinator that loads the records ends in exactly the state that wrote them, and a shell whose append
failed can rebuild the group from the records that were stored. Timers (sessions, rebalance timeouts) are not
stored; a loaded group's sessions start at load time.

The protocol, as KIP-848 and Kafka's group coordinator define it:

- The **group epoch** counts changes of what the assignment depends on: a member joining or leaving, a member's
  subscription or server assignor changing, the subscribed topics' partition counts changing.
- When the group epoch passes the **target assignment epoch**, the server assignor (``server_assignors``) computes
  a new target assignment at the group epoch.
- Each **member epoch** follows the target epoch one member at a time (``reconciliation``): a member first revokes
  what it must give up (it stays at its epoch until a heartbeat reports them gone), then moves to the target epoch
  and gets its new partitions as soon as their previous owners released them.
- A heartbeat whose epoch is newer than the member's, or older than the member's previous one, is **fenced**
  (FENCED_MEMBER_EPOCH): the member must drop its partitions and rejoin with epoch 0. An unknown member id gets
  UNKNOWN_MEMBER_ID.
- A member whose **session** (``group.consumer.session.timeout.ms``, since its last heartbeat) expires, or that
  does not revoke within its **rebalance timeout**, is removed and the group epoch bumped.
- A **static** member (``group.instance.id``) that leaves with epoch -2 keeps its partitions until its session
  expires; the same instance joining again with a new member id takes its place, epoch and assignment without a
  rebalance. While the old member is still in the group, the instance id is UNRELEASED_INSTANCE_ID; the old member
  id of a replaced instance is FENCED_INSTANCE_ID.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import Enum

from odradek.broker.groups.consumer_messages import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    UNCHANGED_TIMEOUT,
    ConsumerGroupDescription,
    ConsumerGroupResult,
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResponse,
    ConsumerMemberDescription,
    Topics,
)
from odradek.broker.groups.consumer_records import (
    NO_PARTITIONS,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerRecord,
    ConsumerRecordKey,
    ConsumerRecordValue,
    MemberState,
    Partitions,
    TopicId,
    TopicMetadata,
)
from odradek.broker.groups.members import MemberIdFactory, SequentialMemberIds
from odradek.broker.groups.messages import GroupDescription, GroupListing, MemberDescription
from odradek.broker.groups.reconciliation import CurrentAssignment, FencedByUnknownState, reconcile
from odradek.broker.groups.server_assignors import RANGE, SERVER_ASSIGNORS, UNIFORM, AssignmentMember, ServerAssignor
from odradek.client.consumer.protocol import Assignment, Subscription
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})  # never matched by a regex subscription
GROUP_TYPE = "consumer"  # Kafka's group type of KIP-848 groups (ListGroups v5, the CLI)
CONSUMER_PROTOCOL_TYPE = "consumer"


class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"  # the group epoch is ahead of the target assignment
    RECONCILING = "Reconciling"  # some member has not reached the target assignment
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    """The broker settings the protocol reads (Kafka's names and defaults)."""

    session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    max_size: int = 2**31 - 1  # group.consumer.max.size
    assignors: tuple[str, ...] = (UNIFORM, RANGE)  # group.consumer.assignors: the first is the default

    def __post_init__(self) -> None:
        if not 0 < self.heartbeat_interval_ms < self.session_timeout_ms:
            raise ValueError("need 0 < group.consumer.heartbeat.interval.ms < group.consumer.session.timeout.ms")
        if self.max_size < 1:
            raise ValueError("group.consumer.max.size must be >= 1")
        if not self.assignors or not set(self.assignors) <= set(SERVER_ASSIGNORS):
            raise ValueError(f"group.consumer.assignors must name some of {', '.join(SERVER_ASSIGNORS)}")


class _Refused(Exception):
    """A heartbeat refused with a Kafka error; nothing was changed."""

    def __init__(self, error: ErrorCode.ValueType, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


@dataclass(slots=True)
class ConsumerMember:
    """A member: what its records say (its metadata, its current assignment) and its timers, which are not stored."""

    member_id: str
    metadata: ConsumerGroupMemberMetadataValue
    current: CurrentAssignment
    session_deadline_ms: int | None = None
    rebalance_deadline_ms: int | None = None


_NO_METADATA = ConsumerGroupMemberMetadataValue(None, None, "", "", (), None, UNCHANGED_TIMEOUT, None)
_JOINING = CurrentAssignment(JOIN_EPOCH, JOIN_EPOCH, MemberState.STABLE)


class ConsumerGroup:
    def __init__(
        self,
        group_id: str,
        config: ConsumerGroupConfig | None = None,
        member_ids: MemberIdFactory | None = None,
        assignors: Mapping[str, ServerAssignor] | None = None,
    ) -> None:
        self.group_id = group_id
        self.config = config or ConsumerGroupConfig()
        self.member_ids = member_ids or SequentialMemberIds()
        self.assignors = (
            dict(assignors) if assignors is not None else {n: SERVER_ASSIGNORS[n]() for n in self.config.assignors}
        )
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.subscribed_topics: tuple[TopicMetadata, ...] = ()
        self.members: dict[str, ConsumerMember] = {}
        self.targets: dict[str, Partitions] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.owners: dict[tuple[TopicId, int], str] = {}  # partition -> the member holding or revoking it

    @classmethod
    def restore(
        cls,
        group_id: str,
        records: Mapping[ConsumerRecordKey, ConsumerRecordValue],
        now_ms: int,
        config: ConsumerGroupConfig | None = None,
        member_ids: MemberIdFactory | None = None,
        assignors: Mapping[str, ServerAssignor] | None = None,
    ) -> ConsumerGroup:
        """The group a loading coordinator rebuilds from its live records; its members' sessions start now."""
        group = cls(group_id, config, member_ids, assignors)
        for key, value in records.items():
            group.replay(key, value)
        group.start_sessions(now_ms)
        return group

    # -- views ---------------------------------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.current.member_epoch != self.assignment_epoch or m.current.state is not MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def preferred_assignor(self) -> str:
        """The server assignor most members ask for (a tie goes to the first configured), else the first one."""
        votes = Counter(m.metadata.server_assignor for m in self.members.values() if m.metadata.server_assignor)
        if not votes:
            return next(iter(self.assignors))
        best = max(votes.values())
        return next(name for name in self.assignors if votes.get(name) == best)

    def subscribed_topic_ids(self, metadata: ConsumerGroupMemberMetadataValue) -> frozenset[TopicId]:
        """The member's subscribed topics among the group's: named, or matched by its regular expression."""
        return frozenset(t.topic_id for t in self.subscribed_topics if _subscribes(metadata, t.name))

    def describe(self) -> ConsumerGroupDescription:
        return ConsumerGroupDescription(
            group_id=self.group_id,
            state=self.state.value,
            group_epoch=self.group_epoch,
            assignment_epoch=self.assignment_epoch,
            assignor_name=self.preferred_assignor(),
            members=tuple(
                ConsumerMemberDescription(
                    member_id=m.member_id,
                    instance_id=m.metadata.instance_id,
                    rack_id=m.metadata.rack_id,
                    member_epoch=m.current.member_epoch,
                    client_id=m.metadata.client_id,
                    client_host=m.metadata.client_host,
                    subscribed_topic_names=m.metadata.subscribed_topic_names,
                    subscribed_topic_regex=m.metadata.subscribed_topic_regex,
                    assignment=m.current.assigned,
                    target_assignment=self.targets.get(m.member_id, NO_PARTITIONS),
                )
                for m in self.members.values()
            ),
        )

    def classic_description(self) -> GroupDescription:
        """The group as DescribeGroups (and ``odradek group describe``) show a group: protocol type ``consumer``,
        the server assignor as the protocol, the group epoch as the generation, and each member's subscription and
        current assignment in the consumer protocol's bytes, so tools that read classic groups read this one."""
        names = {t.topic_id: t.name for t in self.subscribed_topics}
        return GroupDescription(
            group_id=self.group_id,
            state=self.state.value,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=self.preferred_assignor(),
            generation_id=self.group_epoch,
            leader="",
            members=tuple(
                MemberDescription(
                    member_id=m.member_id,
                    group_instance_id=m.metadata.instance_id,
                    client_id=m.metadata.client_id,
                    client_host=m.metadata.client_host,
                    metadata=Subscription(m.metadata.subscribed_topic_names).encode(),
                    assignment=Assignment(
                        tuple(TopicPartition(names[t], p) for t, p in m.current.assigned if t in names)
                    ).encode(),
                )
                for m in self.members.values()
            ),
            group_type=GROUP_TYPE,
        )

    def listing(self) -> GroupListing:
        return GroupListing(self.group_id, CONSUMER_PROTOCOL_TYPE, self.state.value, GROUP_TYPE)

    def next_deadline_ms(self) -> int | None:
        deadlines = [
            d for m in self.members.values() for d in (m.session_deadline_ms, m.rebalance_deadline_ms) if d is not None
        ]
        return min(deadlines, default=None)

    # -- offsets -------------------------------------------------------------------------------------------------

    def validate_offset_commit(
        self, member_id: str, member_epoch: int, instance_id: str | None = None, transactional: bool = False
    ) -> ErrorCode.ValueType:
        """OffsetCommit (v9+) and TxnOffsetCommit of this group: a member's commit carries its current epoch; a
        commit without a member (epoch -1) is accepted only while the group has no members, or, for TxnOffsetCommit,
        when it names no member, epoch or instance at all (a producer that sends no group metadata)."""
        if member_epoch < 0 and not self.members:
            return ErrorCode.NONE
        if transactional and member_epoch < 0 and not member_id and instance_id is None:
            return ErrorCode.NONE
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.current.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode.ValueType:
        """OffsetFetch (v9+): a fetch that names a member must carry its current epoch."""
        if member_epoch < 0 and not member_id:
            return ErrorCode.NONE
        member = self.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.current.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    # -- inputs --------------------------------------------------------------------------------------------------

    def heartbeat(self, request: ConsumerHeartbeatRequest, now_ms: int, topics: Topics) -> ConsumerGroupResult:
        out = _Output(self)
        try:
            self._validate(request)
            if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                response = self._leave(out, request, now_ms, topics)
            else:
                response = self._heartbeat(out, request, now_ms, topics)
        except _Refused as refused:
            out.rollback()
            response = ConsumerHeartbeatResponse(refused.error, refused.message)
        return ConsumerGroupResult(response, tuple(out.records), tuple(out.events))

    def tick(self, now_ms: int) -> ConsumerGroupResult:
        """Remove the members whose session or rebalance timeout passed."""
        out = _Output(self)
        for m in list(self.members.values()):
            if m.session_deadline_ms is not None and m.session_deadline_ms <= now_ms:
                out.events.append(f"member {m.member_id} removed: its session expired")
            elif m.rebalance_deadline_ms is not None and m.rebalance_deadline_ms <= now_ms:
                out.events.append(f"member {m.member_id} removed: it did not revoke within its rebalance timeout")
            else:
                continue
            self._remove_member(out, m.member_id, None)
        return ConsumerGroupResult(None, tuple(out.records), tuple(out.events))

    def start_sessions(self, now_ms: int) -> None:
        """A loaded group's timers start from now (they are not stored): every member's session, and the rebalance
        timeout of each member that still has partitions to revoke."""
        for m in self.members.values():
            m.session_deadline_ms = now_ms + self.config.session_timeout_ms
            revoking = m.current.state is MemberState.UNREVOKED_PARTITIONS
            m.rebalance_deadline_ms = now_ms + m.metadata.rebalance_timeout_ms if revoking else None

    # -- heartbeats ----------------------------------------------------------------------------------------------

    def _validate(self, r: ConsumerHeartbeatRequest) -> None:
        invalid = ErrorCode.INVALID_REQUEST
        if r.member_id_required and not r.member_id:
            raise _Refused(invalid, "MemberId can't be empty.")
        if r.member_epoch == JOIN_EPOCH:
            if r.rebalance_timeout_ms == UNCHANGED_TIMEOUT:
                raise _Refused(invalid, "RebalanceTimeoutMs must be provided in first request.")
            if r.owned is None or r.owned:
                raise _Refused(invalid, "TopicPartitions must be empty when (re-)joining.")
            if r.subscribed_topic_names is None and r.subscribed_topic_regex is None:
                raise _Refused(invalid, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif not r.member_id:
            raise _Refused(invalid, "MemberId can't be empty.")
        if r.member_epoch == STATIC_LEAVE_EPOCH and r.instance_id is None:
            raise _Refused(invalid, "InstanceId can't be null.")
        if r.member_epoch < STATIC_LEAVE_EPOCH:
            raise _Refused(invalid, f"MemberEpoch {r.member_epoch} is invalid.")
        if r.rebalance_timeout_ms < UNCHANGED_TIMEOUT or r.rebalance_timeout_ms == 0:
            raise _Refused(invalid, f"RebalanceTimeoutMs {r.rebalance_timeout_ms} is invalid.")
        if r.subscribed_topic_regex:
            try:
                re.compile(r.subscribed_topic_regex)
            except re.error as e:
                raise _Refused(
                    ErrorCode.INVALID_REGULAR_EXPRESSION,
                    f"SubscribedTopicRegex `{r.subscribed_topic_regex}` is not a valid regular expression: {e}.",
                ) from None
        if r.server_assignor is not None and r.server_assignor not in self.assignors:
            raise _Refused(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {r.server_assignor} is not supported. "
                f"Supported assignors: {', '.join(self.assignors)}.",
            )

    def _heartbeat(
        self, out: _Output, r: ConsumerHeartbeatRequest, now_ms: int, topics: Topics
    ) -> ConsumerHeartbeatResponse:
        member = self._member_for(out, r)
        before = member.current
        metadata = ConsumerGroupMemberMetadataValue(
            instance_id=r.instance_id if r.instance_id is not None else member.metadata.instance_id,
            rack_id=r.rack_id if r.rack_id is not None else member.metadata.rack_id,
            client_id=r.client_id,
            client_host=r.client_host,
            subscribed_topic_names=(
                tuple(sorted(set(r.subscribed_topic_names)))
                if r.subscribed_topic_names is not None
                else member.metadata.subscribed_topic_names
            ),
            subscribed_topic_regex=(
                (r.subscribed_topic_regex or None)
                if r.subscribed_topic_regex is not None
                else member.metadata.subscribed_topic_regex
            ),
            rebalance_timeout_ms=(
                r.rebalance_timeout_ms
                if r.rebalance_timeout_ms != UNCHANGED_TIMEOUT
                else member.metadata.rebalance_timeout_ms
            ),
            server_assignor=r.server_assignor if r.server_assignor is not None else member.metadata.server_assignor,
        )
        bump = member.metadata is _NO_METADATA
        if metadata != member.metadata:
            old = member.metadata
            bump = bump or (
                old.subscribed_topic_names,
                old.subscribed_topic_regex,
                old.server_assignor,
                old.rack_id,
            ) != (
                metadata.subscribed_topic_names,
                metadata.subscribed_topic_regex,
                metadata.server_assignor,
                metadata.rack_id,
            )
            out.write(ConsumerGroupMemberMetadataKey(self.group_id, member.member_id), metadata)
            member = self.members[member.member_id]  # a new member exists once its record is replayed
        self._refresh_subscriptions(out, topics, bump)
        self._update_target(out)
        try:
            current = reconcile(
                member.current,
                self.assignment_epoch,
                self.targets.get(member.member_id, NO_PARTITIONS),
                self.subscribed_topic_ids(metadata),
                r.owned,
                lambda tp: self.owners.get(tp, member.member_id) != member.member_id,
            )
        except FencedByUnknownState:
            raise _Refused(
                ErrorCode.FENCED_MEMBER_EPOCH,
                "The consumer group member is in a unknown state. "
                "The member must abandon all its partitions and rejoin.",
            ) from None
        if current != member.current:
            out.write(ConsumerGroupCurrentMemberAssignmentKey(self.group_id, member.member_id), _stored(current))
            out.events.append(
                f"member {member.member_id} at epoch {current.member_epoch} ({current.state.name.lower()})"
            )
        member.session_deadline_ms = now_ms + self.config.session_timeout_ms
        if current.state is MemberState.UNREVOKED_PARTITIONS:
            if (
                before.state is not MemberState.UNREVOKED_PARTITIONS
                or before.pending_revocation != current.pending_revocation
            ):
                member.rebalance_deadline_ms = now_ms + metadata.rebalance_timeout_ms
        else:
            member.rebalance_deadline_ms = None
        full = (
            r.rebalance_timeout_ms != UNCHANGED_TIMEOUT
            and (r.subscribed_topic_names is not None or r.subscribed_topic_regex is not None)
            and r.owned is not None
        )
        send_assignment = r.member_epoch == JOIN_EPOCH or full or current.assigned != before.assigned
        return ConsumerHeartbeatResponse(
            ErrorCode.NONE,
            member_id=member.member_id,
            member_epoch=current.member_epoch,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            assignment=current.assigned if send_assignment else None,
        )

    def _member_for(self, out: _Output, r: ConsumerHeartbeatRequest) -> ConsumerMember:
        """The member this heartbeat is from, made, reset or taken over as the request's epoch says."""
        if r.instance_id is not None:
            holder_id = self.static_members.get(r.instance_id)
            if holder_id is not None and holder_id != r.member_id:
                if r.member_epoch != JOIN_EPOCH:
                    raise _Refused(
                        ErrorCode.FENCED_INSTANCE_ID,
                        f"Static member {r.member_id} with instance id {r.instance_id} was fenced by {holder_id}.",
                    )
                holder = self.members[holder_id]
                if holder.current.member_epoch != STATIC_LEAVE_EPOCH:
                    raise _Refused(
                        ErrorCode.UNRELEASED_INSTANCE_ID,
                        f"Static member {holder_id} with instance id {r.instance_id} is not released yet.",
                    )
                return self._replace_static(out, holder, r.member_id or self.member_ids(r.instance_id))
            if holder_id is None and r.member_epoch != JOIN_EPOCH:
                raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {r.instance_id} is unknown.")
        member = self.members.get(r.member_id) if r.member_id else None
        if r.member_epoch == JOIN_EPOCH:
            if member is None:
                if len(self.members) >= self.config.max_size:
                    raise _Refused(
                        ErrorCode.GROUP_MAX_SIZE_REACHED,
                        f"The consumer group has reached its maximum capacity of {self.config.max_size} members.",
                    )
                member_id = r.member_id or self.member_ids(r.client_id or "consumer")
                out.events.append(f"member {member_id} joined")
                return ConsumerMember(member_id, _NO_METADATA, _JOINING)
            if member.current != _JOINING:
                # A member rejoining under its id after a fence has dropped its partitions: it starts over.
                out.write(ConsumerGroupCurrentMemberAssignmentKey(self.group_id, member.member_id), _stored(_JOINING))
                out.events.append(f"member {member.member_id} rejoined")
            return member
        if member is None:
            raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {r.member_id} is not a member of the group.")
        self._check_epoch(member, r)
        return member

    @staticmethod
    def _check_epoch(member: ConsumerMember, r: ConsumerHeartbeatRequest) -> None:
        current = member.current
        if r.member_epoch > current.member_epoch:
            raise _Refused(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a greater member epoch ({r.member_epoch}) than the one known by the "
                f"group coordinator ({current.member_epoch}). The member must abandon all its partitions and rejoin.",
            )
        # The answer that bumped the member may have been lost: its previous epoch is accepted while what it reports
        # owning is part of what it has.
        lost_answer = (
            r.member_epoch == current.previous_member_epoch and r.owned is not None and r.owned <= current.assigned
        )
        if r.member_epoch < current.member_epoch and not lost_answer:
            raise _Refused(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a smaller member epoch ({r.member_epoch}) than the one known by "
                f"the group coordinator ({current.member_epoch}). The member must abandon all its partitions "
                "and rejoin.",
            )

    def _replace_static(self, out: _Output, old: ConsumerMember, new_id: str) -> ConsumerMember:
        """A static member's new process takes the old member's place: its assignment, target and epoch, so the
        rest of the group notices nothing."""
        target = self.targets.get(old.member_id)
        current = old.current
        metadata = old.metadata
        self._remove_records(out, old.member_id)
        out.write(ConsumerGroupMemberMetadataKey(self.group_id, new_id), metadata)
        if target is not None:
            out.write(
                ConsumerGroupTargetAssignmentMemberKey(self.group_id, new_id),
                ConsumerGroupTargetAssignmentMemberValue(target),
            )
        restored = replace(current, member_epoch=current.previous_member_epoch)
        out.write(ConsumerGroupCurrentMemberAssignmentKey(self.group_id, new_id), _stored(restored))
        out.events.append(f"member {new_id} replaced static member {old.member_id} ({metadata.instance_id})")
        return self.members[new_id]

    def _leave(
        self, out: _Output, r: ConsumerHeartbeatRequest, now_ms: int, topics: Topics
    ) -> ConsumerHeartbeatResponse:
        if r.instance_id is not None:
            holder_id = self.static_members.get(r.instance_id)
            if holder_id is None:
                raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {r.instance_id} is unknown.")
            if holder_id != r.member_id:
                raise _Refused(
                    ErrorCode.FENCED_INSTANCE_ID,
                    f"Static member {r.member_id} with instance id {r.instance_id} was fenced by {holder_id}.",
                )
        member = self.members.get(r.member_id)
        if member is None:
            raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {r.member_id} is not a member of the group.")
        if r.member_epoch == STATIC_LEAVE_EPOCH:
            current = member.current.advanced(
                STATIC_LEAVE_EPOCH, member.current.state, member.current.assigned, member.current.pending_revocation
            )
            out.write(ConsumerGroupCurrentMemberAssignmentKey(self.group_id, member.member_id), _stored(current))
            out.events.append(f"static member {member.member_id} left for now; it keeps its partitions")
            member.session_deadline_ms = now_ms + self.config.session_timeout_ms
            member.rebalance_deadline_ms = None
        else:
            out.events.append(f"member {member.member_id} left")
            self._remove_member(out, member.member_id, topics)
        return ConsumerHeartbeatResponse(ErrorCode.NONE, member_id=member.member_id, member_epoch=r.member_epoch)

    # -- group changes -------------------------------------------------------------------------------------------

    def _remove_member(self, out: _Output, member_id: str, topics: Topics | None) -> None:
        """Remove a member and bump the group epoch; its partitions become free for the others."""
        self._remove_records(out, member_id)
        self._refresh_subscriptions(out, topics, bump=True)

    def _remove_records(self, out: _Output, member_id: str) -> None:
        out.write(ConsumerGroupCurrentMemberAssignmentKey(self.group_id, member_id), None)
        if member_id in self.targets:
            out.write(ConsumerGroupTargetAssignmentMemberKey(self.group_id, member_id), None)
        out.write(ConsumerGroupMemberMetadataKey(self.group_id, member_id), None)

    def _refresh_subscriptions(self, out: _Output, topics: Topics | None, bump: bool) -> None:
        """Store the subscribed topics' metadata when it changed (with ``topics`` None, only topics no member
        subscribes to any more are dropped), and bump the group epoch when that or the membership changed."""
        metadata = [m.metadata for m in self.members.values()]
        if topics is None:
            subscribed = tuple(t for t in self.subscribed_topics if any(_subscribes(m, t.name) for m in metadata))
        else:
            names = {n for m in metadata for n in m.subscribed_topic_names}
            regexes = {m.subscribed_topic_regex for m in metadata if m.subscribed_topic_regex}
            if regexes:
                names.update(n for n in topics if n not in INTERNAL_TOPICS and any(re.fullmatch(x, n) for x in regexes))
            subscribed = tuple(
                TopicMetadata(topics[n].topic_id, n, topics[n].num_partitions) for n in sorted(names) if n in topics
            )
        if subscribed != self.subscribed_topics:
            out.write(ConsumerGroupPartitionMetadataKey(self.group_id), ConsumerGroupPartitionMetadataValue(subscribed))
            bump = True
        if bump:
            out.write(ConsumerGroupMetadataKey(self.group_id), ConsumerGroupMetadataValue(self.group_epoch + 1))

    def _update_target(self, out: _Output) -> None:
        """A new target assignment at the group epoch, when the epoch has moved past it."""
        if self.group_epoch <= self.assignment_epoch:
            return
        members = [
            AssignmentMember(m.member_id, m.metadata.instance_id, self.subscribed_topic_ids(m.metadata))
            for m in self.members.values()
        ]
        counts = {t.topic_id: t.num_partitions for t in self.subscribed_topics}
        assignor = self.preferred_assignor()
        target = self.assignors[assignor].assign(members, counts, self.targets)
        for member_id in sorted(target):
            if target[member_id] != self.targets.get(member_id, NO_PARTITIONS):
                value = ConsumerGroupTargetAssignmentMemberValue(target[member_id])
                out.write(ConsumerGroupTargetAssignmentMemberKey(self.group_id, member_id), value)
        out.write(
            ConsumerGroupTargetAssignmentMetadataKey(self.group_id),
            ConsumerGroupTargetAssignmentMetadataValue(self.group_epoch),
        )
        out.events.append(f"target assignment of epoch {self.group_epoch} computed by {assignor}")

    # -- replay --------------------------------------------------------------------------------------------------

    def replay(self, key: ConsumerRecordKey, value: ConsumerRecordValue | None) -> None:
        """Apply one stored record (the only way the group's state changes)."""
        if isinstance(key, ConsumerGroupMetadataKey):
            self.group_epoch = value.epoch if isinstance(value, ConsumerGroupMetadataValue) else 0
        elif isinstance(key, ConsumerGroupPartitionMetadataKey):
            self.subscribed_topics = value.topics if isinstance(value, ConsumerGroupPartitionMetadataValue) else ()
        elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
            self.assignment_epoch = (
                value.assignment_epoch if isinstance(value, ConsumerGroupTargetAssignmentMetadataValue) else 0
            )
        elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
            if isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
                self.targets[key.member_id] = value.partitions
            else:
                self.targets.pop(key.member_id, None)
        elif isinstance(key, ConsumerGroupMemberMetadataKey):
            self._replay_member(key.member_id, value)
        elif isinstance(key, ConsumerGroupCurrentMemberAssignmentKey):
            if value is None and key.member_id not in self.members:
                return
            member = self._member(key.member_id)
            self._release(member)
            if isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
                member.current = CurrentAssignment(
                    value.member_epoch,
                    value.previous_member_epoch,
                    value.state,
                    value.assigned,
                    value.pending_revocation,
                )
                for tp in value.assigned | value.pending_revocation:
                    self.owners[tp] = key.member_id
            else:
                member.current = _JOINING

    def _replay_member(self, member_id: str, value: ConsumerRecordValue | None) -> None:
        if isinstance(value, ConsumerGroupMemberMetadataValue):
            member = self._member(member_id)
            if member.metadata.instance_id is not None:
                self.static_members.pop(member.metadata.instance_id, None)
            member.metadata = value
            if value.instance_id is not None:
                self.static_members[value.instance_id] = member_id
            return
        removed = self.members.pop(member_id, None)
        if removed is not None:
            self._release(removed)
            instance_id = removed.metadata.instance_id
            if instance_id is not None and self.static_members.get(instance_id) == member_id:
                del self.static_members[instance_id]

    def _member(self, member_id: str) -> ConsumerMember:
        member = self.members.get(member_id)
        if member is None:
            member = self.members[member_id] = ConsumerMember(member_id, _NO_METADATA, _JOINING)
        return member

    def _release(self, member: ConsumerMember) -> None:
        for tp in member.current.assigned | member.current.pending_revocation:
            if self.owners.get(tp) == member.member_id:
                del self.owners[tp]


def _subscribes(metadata: ConsumerGroupMemberMetadataValue, topic: str) -> bool:
    """Whether a member subscribes to ``topic``: by name, or by its regular expression (matching the whole name,
    never an internal topic)."""
    if topic in metadata.subscribed_topic_names:
        return True
    regex = metadata.subscribed_topic_regex
    return regex is not None and topic not in INTERNAL_TOPICS and re.fullmatch(regex, topic) is not None


def _stored(current: CurrentAssignment) -> ConsumerGroupCurrentMemberAssignmentValue:
    return ConsumerGroupCurrentMemberAssignmentValue(
        current.member_epoch, current.previous_member_epoch, current.state, current.assigned, current.pending_revocation
    )


class _Output:
    """The records one input produces, each replayed into the group as it is written; ``rollback`` undoes them
    all when the input is refused part way (the group gets back the records it had)."""

    def __init__(self, group: ConsumerGroup) -> None:
        self.group = group
        self.records: list[ConsumerRecord] = []
        self.events: list[str] = []
        self._undo: list[ConsumerRecord] = []

    def write(self, key: ConsumerRecordKey, value: ConsumerRecordValue | None) -> None:
        """Write a record; one this input wrote earlier under the same key is dropped (the batch is atomic)."""
        self._undo.append((key, _stored_value(self.group, key)))
        self.records = [r for r in self.records if r[0] != key]
        self.records.append((key, value))
        self.group.replay(key, value)

    def rollback(self) -> None:
        for key, value in reversed(self._undo):
            self.group.replay(key, value)
        self.records.clear()
        self.events.clear()
        self._undo.clear()


def _stored_value(group: ConsumerGroup, key: ConsumerRecordKey) -> ConsumerRecordValue | None:
    """What the group holds under ``key`` now: the record that puts it back."""
    if isinstance(key, ConsumerGroupMetadataKey):
        return ConsumerGroupMetadataValue(group.group_epoch) if group.group_epoch else None
    if isinstance(key, ConsumerGroupPartitionMetadataKey):
        return ConsumerGroupPartitionMetadataValue(group.subscribed_topics) if group.subscribed_topics else None
    if isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
        epoch = group.assignment_epoch
        return ConsumerGroupTargetAssignmentMetadataValue(epoch) if epoch else None
    if isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
        target = group.targets.get(key.member_id)
        return None if target is None else ConsumerGroupTargetAssignmentMemberValue(target)
    member = group.members.get(key.member_id)
    if member is None:
        return None
    if isinstance(key, ConsumerGroupMemberMetadataKey):
        return None if member.metadata is _NO_METADATA else member.metadata
    return None if member.current == _JOINING else _stored(member.current)
