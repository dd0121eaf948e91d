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

Members of the classic protocol (Kafka's online migration, ``group.consumer.migration.policy``):

- A ConsumerGroupHeartbeat to a classic group with members **upgrades** it (``from_classic``): each classic member
  becomes a member of the consumer group at the classic generation, its current and target assignment the one it
  was given; the joining member then bumps the group epoch like any other.
- A **classic member** of a consumer group keeps speaking JoinGroup, SyncGroup and Heartbeat (``classic_join``,
  ``classic_sync``, ``classic_heartbeat``, ``classic_leave``): a JoinGroup is a heartbeat that reports the
  subscription and owned partitions of its metadata and is answered at once with the member epoch as generation;
  a SyncGroup gets the member's current assignment; its Heartbeat answers REBALANCE_IN_PROGRESS when it must
  rejoin to move on (the group epoch passed its epoch, it has partitions to revoke, or the partitions it waits
  for are free). It has no rebalance timeout but a join timeout (rejoin within its rebalance timeout once told to)
  and a sync timeout (sync within it after a join), and its own session timeout.
- When the last member of the consumer protocol leaves (or is fenced) and the others all use the classic
  protocol, the group is **downgraded** (``ClassicDowngrade``): the shell replaces it with a classic group of
  those members at the group epoch, holding their target assignments, which rebalances at once.
"""

from __future__ import annotations

import re
import struct
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import TYPE_CHECKING

from odradek.broker.groups.consumer_messages import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    UNCHANGED_TIMEOUT,
    ClassicDowngrade,
    ClassicResponse,
    ConsumerGroupDescription,
    ConsumerGroupResult,
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResponse,
    ConsumerMemberDescription,
    Topics,
)
from odradek.broker.groups.consumer_records import (
    NO_PARTITIONS,
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
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
from odradek.broker.groups.messages import (
    UNKNOWN_MEMBER,
    GroupDescription,
    GroupListing,
    GroupSnapshot,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeftMember,
    MemberDescription,
    MemberSnapshot,
    SyncGroupRequest,
    SyncGroupResponse,
)
from odradek.broker.groups.reconciliation import CurrentAssignment, FencedByUnknownState, reconcile
from odradek.broker.groups.server_assignors import RANGE, SERVER_ASSIGNORS, UNIFORM, AssignmentMember, ServerAssignor
from odradek.client.consumer.protocol import ASSIGNMENT_VERSION, Assignment, ConsumerProtocolError, Subscription
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition

if TYPE_CHECKING:
    from odradek.broker.groups.group import ClassicGroup

# never matched by a regex subscription
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
GROUP_TYPE = "consumer"  # Kafka's group type of KIP-848 groups (ListGroups v5, the CLI)
CONSUMER_PROTOCOL_TYPE = "consumer"
# group.consumer.migration.policy: which conversions between the classic and the consumer protocol run online.
MIGRATION_POLICIES = {"bidirectional": (True, True), "upgrade": (True, False), "downgrade": (False, True)}
MIGRATION_POLICIES["disabled"] = (False, False)


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
    migration_policy: str = "bidirectional"  # group.consumer.migration.policy
    classic_max_size: int = 2**31 - 1  # group.max.size: a downgrade needs the classic group to fit

    @property
    def upgrade_enabled(self) -> bool:
        return MIGRATION_POLICIES[self.migration_policy][0]

    @property
    def downgrade_enabled(self) -> bool:
        return MIGRATION_POLICIES[self.migration_policy][1]

    def __post_init__(self) -> None:
        if self.migration_policy not in MIGRATION_POLICIES:
            raise ValueError(f"group.consumer.migration.policy must be one of {', '.join(MIGRATION_POLICIES)}")
        if not 0 < self.heartbeat_interval_ms < self.session_timeout_ms:
            raise ValueError("need 0 < group.consumer.heartbeat.interval.ms < group.consumer.session.timeout.ms")
        if self.max_size < 1:
            raise ValueError("group.consumer.max.size must be >= 1")
        if not self.assignors or not set(self.assignors) <= set(SERVER_ASSIGNORS):
            raise ValueError(f"group.consumer.assignors must name some of {', '.join(SERVER_ASSIGNORS)}")


class MigrationRefused(Exception):
    """A classic group that cannot become a consumer group; the message says why."""


def upgrade_refusal(classic: ClassicGroup, config: ConsumerGroupConfig) -> str | None:
    """Why a classic group with members may not be upgraded by a member of the consumer protocol joining (Kafka's
    validateOnlineUpgrade), or None."""
    group_id = classic.group_id
    if not config.upgrade_enabled:
        return f"Cannot upgrade classic group {group_id} to consumer group because the online upgrade is disabled."
    if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return (
            f"Cannot upgrade classic group {group_id} to consumer group because the group does not use the consumer "
            "embedded protocol."
        )
    if len(classic.members) > config.max_size:
        return (
            f"Cannot upgrade classic group {group_id} to consumer group because the group size exceeds the "
            "consumer group maximum size."
        )
    return None


class _Refused(Exception):
    """A heartbeat refused with a Kafka error; nothing was changed."""

    def __init__(self, error: ErrorCode.ValueType, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


@dataclass(frozen=True, slots=True)
class GroupOverrides:
    """A group's own configs (Kafka's GROUP config resource, KIP-848): None where the broker's setting applies."""

    session_timeout_ms: int | None = None  # consumer.session.timeout.ms
    heartbeat_interval_ms: int | None = None  # consumer.heartbeat.interval.ms


@dataclass(slots=True)
class ConsumerMember:
    """A member: what its records say (its metadata, its current assignment) and its timers, which are not stored.
    A classic protocol member has no rebalance timeout but a join and a sync timeout."""

    member_id: str
    metadata: ConsumerGroupMemberMetadataValue
    current: CurrentAssignment
    session_deadline_ms: int | None = None
    rebalance_deadline_ms: int | None = None
    join_deadline_ms: int | None = None
    sync_deadline_ms: int | None = None

    @property
    def classic(self) -> bool:
        return self.metadata.classic is not None

    def deadlines(self) -> list[int]:
        timers = (self.session_deadline_ms, self.rebalance_deadline_ms, self.join_deadline_ms, self.sync_deadline_ms)
        return [d for d in timers if d is not None]


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
        self.overrides = GroupOverrides()  # the group's configs, as the shell last saw them in the metadata
        self.resolved: dict[str, ConsumerGroupRegularExpressionValue] = {}  # regex -> the topics it resolved to

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

    # -- settings ------------------------------------------------------------------------------------------------

    @property
    def session_timeout_ms(self) -> int:
        """Of a consumer protocol member: the group's consumer.session.timeout.ms, else the broker's."""
        own = self.overrides.session_timeout_ms
        return own if own is not None else self.config.session_timeout_ms

    @property
    def heartbeat_interval_ms(self) -> int:
        own = self.overrides.heartbeat_interval_ms
        return own if own is not None else self.config.heartbeat_interval_ms

    def member_session_timeout_ms(self, member: ConsumerMember) -> int:
        """A classic member's session timeout is the one its JoinGroup gave."""
        classic = member.metadata.classic
        return classic.session_timeout_ms if classic is not None else self.session_timeout_ms

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
        """The member's subscribed topics among the group's: named, or resolved from its regular expression."""
        return frozenset(t.topic_id for t in self.subscribed_topics if self._subscribes(metadata, t.name))

    def _subscribes(self, metadata: ConsumerGroupMemberMetadataValue, topic: str) -> bool:
        """Whether a member subscribes to ``topic``: by name, or by its regular expression's resolution."""
        if topic in metadata.subscribed_topic_names:
            return True
        regex = metadata.subscribed_topic_regex
        return regex is not None and topic in self.regex_topics(regex)

    def regex_topics(self, regex: str) -> frozenset[str]:
        """The topics a subscribed regular expression resolved to; for one not resolved yet (a group stored before
        resolutions were), the group's subscribed topics it matches, so a new coordinator changes nothing before
        the member's next heartbeat resolves it."""
        resolved = self.resolved.get(regex)
        if resolved is not None:
            return frozenset(resolved.topics)
        return frozenset(t.name for t in self.subscribed_topics if _matches(regex, t.name))

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
                    classic=m.classic,
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
        return min((d for m in self.members.values() for d in m.deadlines()), default=None)

    # -- offsets -------------------------------------------------------------------------------------------------

    def validate_offset_commit(
        self,
        member_id: str,
        member_epoch: int,
        instance_id: str | None = None,
        transactional: bool = False,
        api_version: int | None = None,
    ) -> ErrorCode.ValueType:
        """OffsetCommit (v9+) and TxnOffsetCommit of this group: a member's commit carries its current epoch; a
        commit without a member (epoch -1) is accepted only while the group has no members, or, for TxnOffsetCommit,
        when it names no member, epoch or instance at all (a producer that sends no group metadata). A member of
        the consumer protocol committing with OffsetCommit below version 9 (``api_version``; None: odradek's own
        API) is UNSUPPORTED_VERSION, as Kafka's ConsumerGroup.validateOffsetCommit answers (not TxnOffsetCommit,
        nor a classic member, whose clients know only the older versions)."""
        if member_epoch < 0 and not self.members:
            return ErrorCode.NONE
        if transactional and member_epoch < 0 and not member_id and instance_id is None:
            return ErrorCode.NONE
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and not member.classic and api_version is not None and api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        return self._validate_member_epoch(member_id, member_epoch)

    def _validate_member_epoch(self, member_id: str, member_epoch: int) -> ErrorCode.ValueType:
        """A member's epoch (or a classic member's generation) must be its current one: STALE_MEMBER_EPOCH, or
        ILLEGAL_GENERATION for a member of the classic protocol, as Kafka answers each."""
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.current.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION if member.classic else ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode.ValueType:
        """OffsetFetch (v9+): a fetch that names a member must carry its current epoch."""
        if member_epoch < 0 and not member_id:
            return ErrorCode.NONE
        return self._validate_member_epoch(member_id or "", member_epoch)

    # -- inputs --------------------------------------------------------------------------------------------------

    def heartbeat(
        self,
        request: ConsumerHeartbeatRequest,
        now_ms: int,
        topics: Topics,
        authorized: Authorized | None = None,
        metadata_version: int | None = None,
    ) -> ConsumerGroupResult:
        """A ConsumerGroupHeartbeat. ``authorized`` (with an authorizer) gives the topics among those asked that
        the member's principal may describe: its regular expression resolves to those only (Kafka's rule);
        ``metadata_version`` (the metadata image's offset) says when the resolution must be done again (topics
        or ACLs changed; None: at every heartbeat)."""
        out = _Output(self)
        try:
            self._validate(request)
            if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                response = self._leave(out, request, now_ms, topics)
            else:
                resolve = _Resolve(authorized, metadata_version, now_ms)
                response = self._heartbeat(out, request, now_ms, topics, resolve)
        except _Refused as refused:
            out.rollback()
            response = ConsumerHeartbeatResponse(refused.error, refused.message)
        return out.result(response)

    def tick(self, now_ms: int) -> ConsumerGroupResult:
        """Remove the members whose session, rebalance, join or sync timeout passed (a removal may downgrade the
        group: then the rest of the members move with it)."""
        out = _Output(self)
        for m in list(self.members.values()):
            if out.downgrade is not None:
                break
            if m.session_deadline_ms is not None and m.session_deadline_ms <= now_ms:
                why = "its session expired"
            elif m.rebalance_deadline_ms is not None and m.rebalance_deadline_ms <= now_ms:
                why = "it did not revoke within its rebalance timeout"
            elif m.join_deadline_ms is not None and m.join_deadline_ms <= now_ms:
                why = "the classic member failed to join within the rebalance timeout"
            elif m.sync_deadline_ms is not None and m.sync_deadline_ms <= now_ms:
                why = "the classic member failed to sync within the rebalance timeout"
            else:
                continue
            out.events.append(f"member {m.member_id} removed: {why}")
            self._fence(out, m, None, now_ms)
        return out.result(None)

    def start_sessions(self, now_ms: int) -> None:
        """A loaded group's timers start from now (they are not stored): every member's session (a classic member's
        own), and the rebalance timeout of each member of the consumer protocol that still has partitions to
        revoke. A classic member's join and sync timeouts start again with its next request."""
        for m in self.members.values():
            m.session_deadline_ms = now_ms + self.member_session_timeout_ms(m)
            revoking = m.current.state is MemberState.UNREVOKED_PARTITIONS and not m.classic
            m.rebalance_deadline_ms = now_ms + m.metadata.rebalance_timeout_ms if revoking else None
            m.join_deadline_ms = None
            m.sync_deadline_ms = None

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
        self, out: _Output, r: ConsumerHeartbeatRequest, now_ms: int, topics: Topics, resolve: _Resolve
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
        member, current = self._update_member(out, member, metadata, r.owned, topics, resolve)
        member.session_deadline_ms = now_ms + self.session_timeout_ms
        if current.state is MemberState.UNREVOKED_PARTITIONS:
            if (
                before.state is not MemberState.UNREVOKED_PARTITIONS
                or before.pending_revocation != current.pending_revocation
            ):
                member.rebalance_deadline_ms = now_ms + metadata.rebalance_timeout_ms
        else:
            member.rebalance_deadline_ms = None
        member.join_deadline_ms = member.sync_deadline_ms = None
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
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            assignment=current.assigned if send_assignment else None,
        )

    def _update_member(
        self,
        out: _Output,
        member: ConsumerMember,
        metadata: ConsumerGroupMemberMetadataValue,
        owned: Partitions | None,
        topics: Topics,
        resolve: _Resolve | None = None,
    ) -> tuple[ConsumerMember, CurrentAssignment]:
        """Store the member's new metadata, bump the group epoch when what the assignment depends on changed,
        compute the target assignment if the epoch moved past it, and move the member towards its target: the
        member (a new one exists once its record is replayed) and its new current assignment."""
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
            member = self.members[member.member_id]
        if resolve is not None and metadata.subscribed_topic_regex:
            self._resolve_regex(out, metadata.subscribed_topic_regex, topics, resolve)
        self._refresh_subscriptions(out, topics, bump)
        self._update_target(out)
        try:
            current = reconcile(
                member.current,
                self.assignment_epoch,
                self.targets.get(member.member_id, NO_PARTITIONS),
                self.subscribed_topic_ids(metadata),
                owned,
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
        return member, current

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
                # A classic member's instance is taken over at once (it never leaves with epoch -2).
                if holder.current.member_epoch != STATIC_LEAVE_EPOCH and not holder.classic:
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
            member.session_deadline_ms = now_ms + self.session_timeout_ms
            member.rebalance_deadline_ms = None
        else:
            out.events.append(f"member {member.member_id} left")
            self._fence(out, member, topics, now_ms)
        return ConsumerHeartbeatResponse(ErrorCode.NONE, member_id=member.member_id, member_epoch=r.member_epoch)

    # -- classic protocol members ----------------------------------------------------------------------------------

    def classic_join(self, request: JoinGroupRequest, now_ms: int, topics: Topics) -> ConsumerGroupResult:
        """JoinGroup from a member of the classic protocol (Kafka's classicGroupJoinToConsumerGroup): answered at
        once, with the member epoch as generation and no member list (it is never the leader)."""
        out = _Output(self)
        try:
            response = self._classic_join(out, request, now_ms, topics)
        except _Refused as refused:
            out.rollback()
            response = JoinGroupResponse(refused.error, request.member_id)
        return out.result(response)

    def _classic_join(self, out: _Output, r: JoinGroupRequest, now_ms: int, topics: Topics) -> JoinGroupResponse:
        unknown = r.member_id == UNKNOWN_MEMBER
        member_id = r.member_id or self.member_ids(r.group_instance_id or r.client_id or "consumer")
        if len(self.members) >= self.config.max_size and member_id not in self.members:
            raise _Refused(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {self.config.max_size} members.",
            )
        if not self._supports_classic_protocols(r.protocol_type, {name for name, _ in r.protocols}):
            raise _Refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"Member {member_id}'s protocols are not supported.")
        if unknown and r.group_instance_id is None:  # KIP-394: a new dynamic member first learns its id
            return JoinGroupResponse(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        subscription = decode_subscription(r.protocols)
        if subscription is None:
            raise _Refused(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"Member {member_id}'s subscription could not be read."
            )
        replaced: ConsumerMember | None = None
        downgrade = False
        if r.group_instance_id is None:
            member = self.members.get(member_id)
            if member is None:
                out.events.append(f"member {member_id} joined with the classic protocol")
                member = ConsumerMember(member_id, _NO_METADATA, _JOINING)
        else:
            holder_id = self.static_members.get(r.group_instance_id)
            if not unknown:
                if holder_id is None:
                    raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {r.group_instance_id} is unknown.")
                if holder_id != member_id:
                    raise _Refused(
                        ErrorCode.FENCED_INSTANCE_ID,
                        f"Static member {member_id} with instance id {r.group_instance_id} was fenced by {holder_id}.",
                    )
                member = self.members[holder_id]
            elif holder_id is None:
                out.events.append(f"static member {member_id} joined with the classic protocol")
                member = ConsumerMember(member_id, _NO_METADATA, _JOINING)
            else:
                replaced = self.members[holder_id]
                downgrade = self._may_downgrade_without(replaced, out)
                member = self._replace_static(out, replaced, member_id)
        metadata = replace(
            member.metadata,
            instance_id=r.group_instance_id if r.group_instance_id is not None else member.metadata.instance_id,
            rack_id=subscription.rack_id if subscription.rack_id is not None else member.metadata.rack_id,
            client_id=r.client_id,
            client_host=r.client_host,
            subscribed_topic_names=tuple(sorted(set(subscription.topics))),
            rebalance_timeout_ms=(
                r.rebalance_timeout_ms
                if r.rebalance_timeout_ms != UNCHANGED_TIMEOUT
                else member.metadata.rebalance_timeout_ms
            ),
            classic=ClassicMemberMetadata(r.session_timeout_ms, tuple(r.protocols)),
        )
        owned = frozenset(
            (topics[tp.topic].topic_id, tp.partition) for tp in subscription.owned_partitions if tp.topic in topics
        )
        member, current = self._update_member(out, member, metadata, owned, topics)
        response = JoinGroupResponse(
            ErrorCode.NONE,
            member.member_id,
            generation_id=current.member_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=r.protocols[0][0],
        )
        if downgrade and replaced is not None:
            # The last member of the consumer protocol was a static member this classic one replaces.
            snapshot = self._classic_snapshot(None, now_ms)
            if snapshot is not None:
                self._tombstone_group(out)
                out.downgrade = ClassicDowngrade(snapshot, rebalance=False)
                out.events.append(
                    f"group downgraded to the classic protocol: {member.member_id} replaced {replaced.member_id}, "
                    "the last member of the consumer protocol"
                )
                return response
        member.session_deadline_ms = now_ms + r.session_timeout_ms
        member.rebalance_deadline_ms = member.join_deadline_ms = None
        member.sync_deadline_ms = now_ms + metadata.rebalance_timeout_ms
        return response

    def _supports_classic_protocols(self, protocol_type: str, names: set[str]) -> bool:
        """Kafka's supportsClassicProtocols: the consumer protocol type, and (unless the group is empty) a protocol
        every classic member supports."""
        if protocol_type != CONSUMER_PROTOCOL_TYPE or not names:
            return False
        for m in self.members.values():
            classic = m.metadata.classic
            if classic is not None:
                names = names & {name for name, _ in classic.supported_protocols}
        return bool(names)

    def _classic_member(self, member_id: str, instance_id: str | None) -> ConsumerMember:
        """The classic member a SyncGroup, Heartbeat or LeaveGroup names (Kafka's validateConsumerGroupMember and
        throwIfMemberDoesNotUseClassicProtocol)."""
        if instance_id is None:
            member = self.members.get(member_id)
            if member is None:
                raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of the group.")
        else:
            holder_id = self.static_members.get(instance_id)
            if holder_id is None:
                raise _Refused(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member with instance id {instance_id} is not a member of group {self.group_id}.",
                )
            if member_id != UNKNOWN_MEMBER and holder_id != member_id:
                raise _Refused(
                    ErrorCode.FENCED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} was fenced by member {holder_id}.",
                )
            member = self.members[holder_id]
        if not member.classic:
            raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member.member_id} does not use the classic protocol.")
        return member

    def _check_generation(self, member: ConsumerMember, generation_id: int) -> None:
        if generation_id != member.current.member_epoch:
            raise _Refused(
                ErrorCode.ILLEGAL_GENERATION,
                f"The request generation id {generation_id} is not equal to the member epoch "
                f"{member.current.member_epoch} of member {member.member_id}.",
            )

    def _must_rejoin(self, member: ConsumerMember, now_ms: int) -> None:
        """REBALANCE_IN_PROGRESS to a classic member that must rejoin to catch up with a new group epoch (unless it
        still has partitions to revoke: its next join reports them gone); its join timeout starts."""
        if (
            self.group_epoch > member.current.member_epoch
            and member.current.state is not MemberState.UNREVOKED_PARTITIONS
        ):
            self._start_join_timeout(member, now_ms)
            raise _Refused(
                ErrorCode.REBALANCE_IN_PROGRESS,
                f"A new rebalance is triggered in group {self.group_id} and member {member.member_id} should rejoin "
                "to catch up.",
            )

    @staticmethod
    def _start_join_timeout(member: ConsumerMember, now_ms: int) -> None:
        if member.join_deadline_ms is None:
            member.join_deadline_ms = now_ms + member.metadata.rebalance_timeout_ms

    def classic_sync(self, request: SyncGroupRequest, now_ms: int, topics: Topics) -> ConsumerGroupResult:
        """SyncGroup from a classic member (Kafka's classicGroupSyncToConsumerGroup): its current assignment."""
        out = _Output(self)
        try:
            if not self.members:
                raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Group {self.group_id} is empty.")
            member = self._classic_member(request.member_id, request.group_instance_id)
            self._check_generation(member, request.generation_id)
            classic = member.metadata.classic
            assert classic is not None
            first_name, first_metadata = classic.supported_protocols[0]
            if request.protocol_type is not None and request.protocol_type != CONSUMER_PROTOCOL_TYPE:
                raise _Refused(
                    ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                    f"The protocol type {request.protocol_type} from member {member.member_id} request is not equal "
                    f"to the group protocol type {CONSUMER_PROTOCOL_TYPE}.",
                )
            if request.protocol_name is not None and request.protocol_name != first_name:
                raise _Refused(
                    ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                    f"The protocol name {request.protocol_name} from member {member.member_id} request is not equal "
                    f"to the protocol name {first_name} returned in the join response.",
                )
            self._must_rejoin(member, now_ms)
            member.sync_deadline_ms = None
            member.session_deadline_ms = now_ms + classic.session_timeout_ms
            names = {t.topic_id: t.name for t in topics.values()}
            response: SyncGroupResponse = SyncGroupResponse(
                ErrorCode.NONE,
                request.protocol_type,
                request.protocol_name,
                encode_assignment(member.current.assigned, names, first_metadata),
            )
        except _Refused as refused:
            response = SyncGroupResponse(refused.error)
        return out.result(response)

    def classic_heartbeat(self, request: HeartbeatRequest, now_ms: int) -> ConsumerGroupResult:
        """Heartbeat from a classic member (Kafka's classicGroupHeartbeatToConsumerGroup): REBALANCE_IN_PROGRESS
        when it must rejoin: its epoch is behind the group's, it must revoke partitions, or the partitions it
        waits for were released."""
        out = _Output(self)
        try:
            member = self._classic_member(request.member_id, request.group_instance_id)
            self._check_generation(member, request.generation_id)
            member.session_deadline_ms = now_ms + self.member_session_timeout_ms(member)
            current = member.current
            if (
                current.member_epoch < self.group_epoch
                or current.state is MemberState.UNREVOKED_PARTITIONS
                or (current.state is MemberState.UNRELEASED_PARTITIONS and not self._waits_for_others(member))
            ):
                self._start_join_timeout(member, now_ms)
                response = HeartbeatResponse(ErrorCode.REBALANCE_IN_PROGRESS)
            else:
                response = HeartbeatResponse(ErrorCode.NONE)
        except _Refused as refused:
            response = HeartbeatResponse(refused.error)
        return out.result(response)

    def _waits_for_others(self, member: ConsumerMember) -> bool:
        """Whether some partition of the member's target that it does not have yet is still another's."""
        target = self.targets.get(member.member_id, NO_PARTITIONS)
        return any(self.owners.get(tp, member.member_id) != member.member_id for tp in target - member.current.assigned)

    def classic_leave(self, request: LeaveGroupRequest, topics: Topics) -> ConsumerGroupResult:
        """LeaveGroup of classic members (Kafka's classicGroupLeaveToConsumerGroup): each one named is removed (an
        admin names a static member by instance id alone); the group epoch is bumped once if any was."""
        out = _Output(self)
        answers = []
        removed = False
        for leaving in request.members:
            try:
                member = self._classic_member(leaving.member_id, leaving.group_instance_id)
            except _Refused as refused:
                answers.append(LeftMember(leaving.member_id, leaving.group_instance_id, refused.error))
                continue
            out.events.append(f"classic member {member.member_id} left: {leaving.reason or 'no reason given'}")
            self._remove_records(out, member.member_id)
            removed = True
            answers.append(LeftMember(member.member_id, leaving.group_instance_id, ErrorCode.NONE))
        if removed:
            self._refresh_subscriptions(out, topics, bump=True)
        return out.result(LeaveGroupResponse(ErrorCode.NONE, tuple(answers)))

    # -- online upgrade --------------------------------------------------------------------------------------------

    @classmethod
    def from_classic(
        cls,
        classic: ClassicGroup,
        topics: Topics,
        now_ms: int,
        config: ConsumerGroupConfig | None = None,
        member_ids: MemberIdFactory | None = None,
        assignors: Mapping[str, ServerAssignor] | None = None,
    ) -> tuple[ConsumerGroup, tuple[ConsumerRecord, ...]]:
        """The consumer group a classic group with members becomes (Kafka's ConsumerGroup.fromClassicGroup), and
        the records that make it: each member at the classic generation, Stable, its current and target
        assignment the one the classic group gave it, its supported protocols kept so it goes on with the
        classic protocol; group and assignment epoch the generation. Raises ``MigrationRefused`` when the group
        cannot be upgraded (``upgrade_refusal``) or a member's subscription or assignment does not decode."""
        config = config or ConsumerGroupConfig()
        problem = upgrade_refusal(classic, config)
        if problem is not None:
            raise MigrationRefused(problem)
        group = cls(classic.group_id, config, member_ids, assignors)
        out = _Output(group)
        generation = classic.generation_id
        members = list(classic.members.values())
        assigned: dict[str, Partitions] = {}
        try:
            for m in members:
                metadata = m.metadata(classic.protocol_name) if classic.protocol_name else b""
                if not metadata and m.protocols:
                    metadata = m.protocols[0][1]
                subscription = Subscription.decode(metadata)
                partitions = Assignment.decode(m.assignment).partitions if m.assignment else ()
                assigned[m.member_id] = frozenset(
                    (topics[tp.topic].topic_id, tp.partition) for tp in partitions if tp.topic in topics
                )
                value = ConsumerGroupMemberMetadataValue(
                    instance_id=m.group_instance_id,
                    rack_id=subscription.rack_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=tuple(sorted(set(subscription.topics))),
                    subscribed_topic_regex=None,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    server_assignor=None,
                    classic=ClassicMemberMetadata(m.session_timeout_ms, tuple(m.protocols)),
                )
                out.write(ConsumerGroupMemberMetadataKey(group.group_id, m.member_id), value)
        except ConsumerProtocolError as e:
            raise MigrationRefused(
                f"Cannot upgrade the classic group {classic.group_id} to consumer group because the embedded "
                f"consumer protocol is malformed: {e}."
            ) from None
        out.write(ConsumerGroupMetadataKey(group.group_id), ConsumerGroupMetadataValue(generation))
        for m in members:
            target = ConsumerGroupTargetAssignmentMemberValue(assigned[m.member_id])
            out.write(ConsumerGroupTargetAssignmentMemberKey(group.group_id, m.member_id), target)
        out.write(
            ConsumerGroupTargetAssignmentMetadataKey(group.group_id),
            ConsumerGroupTargetAssignmentMetadataValue(generation),
        )
        for m in members:
            current = CurrentAssignment(generation, generation, MemberState.STABLE, assigned[m.member_id])
            out.write(ConsumerGroupCurrentMemberAssignmentKey(group.group_id, m.member_id), _stored(current))
        for member in group.members.values():
            member.session_deadline_ms = now_ms + group.member_session_timeout_ms(member)
        return group, tuple(out.records)

    # -- group changes -------------------------------------------------------------------------------------------

    def _fence(self, out: _Output, member: ConsumerMember, topics: Topics | None, now_ms: int) -> None:
        """Remove a member that left or timed out; when it was the last of the consumer protocol among members
        that use the classic protocol, the group goes back to the classic protocol instead (Kafka's online
        downgrade), with the others."""
        if self._may_downgrade_without(member, out):
            snapshot = self._classic_snapshot(member.member_id, now_ms)
            if snapshot is not None:
                self._tombstone_group(out)
                out.downgrade = ClassicDowngrade(snapshot, rebalance=True)
                out.events.append(
                    f"group downgraded to the classic protocol: {member.member_id} was the last member "
                    "of the consumer protocol"
                )
                return
        self._remove_member(out, member.member_id, topics)

    def _may_downgrade_without(self, leaving: ConsumerMember, out: _Output) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMember: every other member uses the classic protocol (and
        there is one), the policy allows downgrades, and the classic group would fit group.max.size."""
        others = [m for m in self.members.values() if m.member_id != leaving.member_id]
        if leaving.classic or not others or not all(m.classic for m in others):
            return False
        if not self.config.downgrade_enabled:
            out.events.append("not downgraded to the classic protocol: the migration policy does not allow it")
            return False
        if len(others) > self.config.classic_max_size:
            out.events.append("not downgraded to the classic protocol: the group would exceed group.max.size")
            return False
        return True

    def _classic_snapshot(self, excluded: str | None, now_ms: int) -> GroupSnapshot | None:
        """The classic group the members but ``excluded`` make (all of the classic protocol), as a stored group
        metadata record describes it: Stable at the group epoch, with the protocol the members vote for (each its
        most preferred one that all support; most votes wins, a tie to the name that sorts first, as a classic
        group selects one) and each member's target assignment in the consumer protocol's bytes, at the version
        of its subscription. None when the members share no protocol."""
        members = [m for m in self.members.values() if m.member_id != excluded and m.metadata.classic is not None]
        protocols = {m.member_id: m.metadata.classic.supported_protocols for m in members if m.metadata.classic}
        candidates = set.intersection(*({name for name, _ in p} for p in protocols.values())) if protocols else set()
        if not candidates:
            return None
        votes = Counter(next(name for name, _ in protocols[m.member_id] if name in candidates) for m in members)
        selected = min(votes, key=lambda name: (-votes[name], name))
        names = {t.topic_id: t.name for t in self.subscribed_topics}
        snapshots = []
        for m in members:
            classic = m.metadata.classic
            assert classic is not None
            subscription = next(metadata for name, metadata in classic.supported_protocols if name == selected)
            target = self.targets.get(m.member_id, NO_PARTITIONS)
            snapshots.append(
                MemberSnapshot(
                    member_id=m.member_id,
                    group_instance_id=m.metadata.instance_id,
                    client_id=m.metadata.client_id,
                    client_host=m.metadata.client_host,
                    rebalance_timeout_ms=m.metadata.rebalance_timeout_ms,
                    session_timeout_ms=classic.session_timeout_ms,
                    subscription=subscription,
                    assignment=encode_assignment(target, names, subscription),
                )
            )
        return GroupSnapshot(
            group_id=self.group_id,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            generation_id=self.group_epoch,
            protocol_name=selected,
            leader=None,
            current_state_timestamp_ms=now_ms,
            members=tuple(snapshots),
        )

    def _tombstone_group(self, out: _Output) -> None:
        """Tombstones for every record of the group (it is about to become a classic group)."""
        for member_id in list(self.members):
            self._remove_records(out, member_id)
        if self.subscribed_topics:
            out.write(ConsumerGroupPartitionMetadataKey(self.group_id), None)
        if self.assignment_epoch:
            out.write(ConsumerGroupTargetAssignmentMetadataKey(self.group_id), None)
        if self.group_epoch:
            out.write(ConsumerGroupMetadataKey(self.group_id), None)

    def _remove_member(self, out: _Output, member_id: str, topics: Topics | None) -> None:
        """Remove a member and bump the group epoch; its partitions become free for the others."""
        self._remove_records(out, member_id)
        self._refresh_subscriptions(out, topics, bump=True)

    def _remove_records(self, out: _Output, member_id: str) -> None:
        out.write(ConsumerGroupCurrentMemberAssignmentKey(self.group_id, member_id), None)
        if member_id in self.targets:
            out.write(ConsumerGroupTargetAssignmentMemberKey(self.group_id, member_id), None)
        out.write(ConsumerGroupMemberMetadataKey(self.group_id, member_id), None)

    def _resolve_regex(self, out: _Output, regex: str, topics: Topics, resolve: _Resolve) -> None:
        """Resolve a member's regular expression against the topics (never an internal one), keeping those its
        principal may describe (Kafka's refreshRegularExpressions and filterTopicDescribeAuthorizedTopics): when
        the expression is new to the group, or the metadata version moved past the one it was resolved at (every
        heartbeat without a version). The resolution is stored with that version when it was done again."""
        current = self.resolved.get(regex)
        version = resolve.version
        if current is not None and version is not None and current.version == version:
            return
        matches = [n for n in sorted(topics) if _matches(regex, n)]
        allowed = matches if resolve.authorized is None else [n for n in matches if n in resolve.authorized(matches)]
        if current is not None and current.topics == tuple(allowed) and current.version == (version or 0):
            return
        value = ConsumerGroupRegularExpressionValue(tuple(allowed), version or 0, resolve.now_ms)
        out.write(ConsumerGroupRegularExpressionKey(self.group_id, regex), value)
        if current is None or current.topics != value.topics:
            hidden = len(matches) - len(allowed)
            out.events.append(
                f"regular expression {regex} resolved to {len(allowed)} topics"
                + (f" ({hidden} it may not describe left out)" if hidden else "")
            )

    def _refresh_subscriptions(self, out: _Output, topics: Topics | None, bump: bool) -> None:
        """Store the subscribed topics' metadata when it changed (with ``topics`` None, only topics no member
        subscribes to any more are dropped), and bump the group epoch when that or the membership changed. The
        resolution of a regular expression no member subscribes with any more is removed."""
        metadata = [m.metadata for m in self.members.values()]
        regexes = {m.subscribed_topic_regex for m in metadata if m.subscribed_topic_regex}
        for regex in sorted(set(self.resolved) - regexes):
            out.write(ConsumerGroupRegularExpressionKey(self.group_id, regex), None)
        if topics is None:
            subscribed = tuple(t for t in self.subscribed_topics if any(self._subscribes(m, t.name) for m in metadata))
        else:
            names = {n for m in metadata for n in m.subscribed_topic_names}
            for regex in regexes:
                names.update(self.regex_topics(regex))
            subscribed = tuple(
                TopicMetadata(topics[n].topic_id, n, topics[n].num_partitions, topics[n].partition_racks)
                for n in sorted(names)
                if n in topics
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
            AssignmentMember(
                m.member_id, m.metadata.instance_id, self.subscribed_topic_ids(m.metadata), m.metadata.rack_id
            )
            for m in self.members.values()
        ]
        counts = {t.topic_id: t.num_partitions for t in self.subscribed_topics}
        racks = {t.topic_id: t.racks for t in self.subscribed_topics if t.racks}
        assignor = self.preferred_assignor()
        target = self.assignors[assignor].assign(members, counts, self.targets, racks)
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
        elif isinstance(key, ConsumerGroupRegularExpressionKey):
            if isinstance(value, ConsumerGroupRegularExpressionValue):
                self.resolved[key.regex] = value
            else:
                self.resolved.pop(key.regex, None)
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


def encode_assignment(partitions: Partitions, names: Mapping[TopicId, str], subscription: bytes) -> bytes:
    """A member's partitions as the consumer protocol's Assignment, at the version of its subscription's bytes, as
    Kafka's coordinator serializes a classic member's assignment (versions 0-3 share one layout)."""
    encoded = Assignment(tuple(TopicPartition(names[t], p) for t, p in partitions if t in names)).encode()
    version = struct.unpack(">h", subscription[:2])[0] if len(subscription) >= 2 else ASSIGNMENT_VERSION
    return struct.pack(">h", min(max(version, 0), ASSIGNMENT_VERSION)) + encoded[2:]


def decode_subscription(protocols: tuple[tuple[str, bytes], ...]) -> Subscription | None:
    """The subscription of a classic member's JoinGroup: the first protocol's metadata that decodes (Kafka's
    deserializeSubscription)."""
    for _, metadata in protocols:
        try:
            return Subscription.decode(metadata)
        except ConsumerProtocolError:
            continue
    return None


def _matches(regex: str, topic: str) -> bool:
    """Whether a regular expression subscription matches ``topic``: its whole name, never an internal topic."""
    return topic not in INTERNAL_TOPICS and re.fullmatch(regex, topic) is not None


Authorized = Callable[[Sequence[str]], Collection[str]]  # of the topics given, those the caller may describe


@dataclass(frozen=True, slots=True)
class _Resolve:
    """How a heartbeat resolves its member's regular expression: with whose authorization, as of which metadata."""

    authorized: Authorized | None
    version: int | None
    now_ms: int


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
        self.downgrade: ClassicDowngrade | None = None
        self._undo: list[ConsumerRecord] = []

    def result(self, response: ConsumerHeartbeatResponse | ClassicResponse | None) -> ConsumerGroupResult:
        return ConsumerGroupResult(response, tuple(self.records), tuple(self.events), self.downgrade)

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
        self.downgrade = None
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
    if isinstance(key, ConsumerGroupRegularExpressionKey):
        return group.resolved.get(key.regex)
    member = group.members.get(key.member_id)
    if member is None:
        return None
    if isinstance(key, ConsumerGroupMemberMetadataKey):
        return None if member.metadata is _NO_METADATA else member.metadata
    return None if member.current == _JOINING else _stored(member.current)
