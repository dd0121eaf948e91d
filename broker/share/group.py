"""One share group (KIP-932): its members, what they subscribe to, and which partitions each fetches from, driven
by ShareGroupHeartbeat.

A share group is a KIP-848 group without reconciliation: partitions are shared, not owned, so a member is told its
new assignment at its next heartbeat and nothing is revoked first (records a member holds are protected by their
acquisition locks, not by partition ownership). The rules, as Kafka's group coordinator applies them:

- A member makes its own id (a UUID) and joins with epoch 0 and its subscribed topic names; it leaves with epoch -1.
  Any other heartbeat carries its member epoch.
- The **group epoch** counts changes of what the assignment depends on: a member joining or leaving, a member's
  subscribed topics changing, a subscribed topic created, deleted or given more partitions (seen at the next
  heartbeat, whose topics are the cluster's). When it passes the **assignment epoch**, the ``simple`` assignor
  (``assignor``) computes the target assignment at the group epoch.
- At its next heartbeat a member moves straight to the assignment epoch and its target partitions (its previous
  epoch is kept: a member whose answer was lost may heartbeat with it). The answer carries the assignment when the
  member joins and when its partitions changed; otherwise null (unchanged).
- A heartbeat with an epoch newer than the member's, or older than it and not its previous one, is
  FENCED_MEMBER_EPOCH; one from an unknown member id (other than a join) is UNKNOWN_MEMBER_ID. The member then
  rejoins with epoch 0: a known member joining again (fenced, or its join's answer lost) is given the current
  assignment at the assignment epoch, like a new one, without a new group epoch.
- A member without a heartbeat for ``group.share.session.timeout.ms`` (45 s) is removed; ``group.share.max.size``
  (200) caps the members (GROUP_MAX_SIZE_REACHED).
- A removed member (left, or timed out) is in the result's ``removed``: the shell closes its share sessions, which
  releases the records it holds on the share-partitions this broker leads (``SharePartition.release_member``).

The group is Empty without members, Stable with some, and Dead once deleted.

**Stored as Kafka stores it.** Each step's result carries the records (``share_records``, Kafka's ShareGroup*
records of ``__consumer_offsets``) that take the stored group to the new state: only what changed, tombstones for
what went (a member leaving or expiring loses its three records). The shell answers once they are stored, and a
coordinator that takes over rebuilds the group from them (``restore``): the same epochs, members and assignments,
each member's session starting at load time, so members keep heartbeating with their epochs or time out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from odradek.broker.groups.consumer_messages import JOIN_EPOCH, LEAVE_EPOCH, Topics
from odradek.broker.groups.consumer_records import NO_PARTITIONS, Partitions, TopicId, TopicMetadata
from odradek.broker.groups.server_assignors import AssignmentMember, ServerAssignor
from odradek.broker.groups.share_records import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupPartitionMetadataKey,
    ShareGroupPartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    ShareRecord,
    ShareRecordKey,
    ShareRecordValue,
)
from odradek.broker.share.assignor import SimpleAssignor
from odradek.client.errors import ErrorCode


class ShareGroupState(Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ShareGroupConfig:
    """The broker settings the group reads (Kafka's names and defaults)."""

    session_timeout_ms: int = 45_000  # group.share.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.share.heartbeat.interval.ms
    max_size: int = 200  # group.share.max.size

    def __post_init__(self) -> None:
        if not 0 < self.heartbeat_interval_ms < self.session_timeout_ms:
            raise ValueError("need 0 < group.share.heartbeat.interval.ms < group.share.session.timeout.ms")
        if self.max_size < 1:
            raise ValueError("group.share.max.size must be >= 1")


@dataclass(frozen=True, slots=True)
class ShareHeartbeatRequest:
    """ShareGroupHeartbeat; null fields (None) mean "unchanged"."""

    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class ShareHeartbeatResponse:
    error: ErrorCode.ValueType
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None  # None: unchanged


@dataclass(frozen=True, slots=True)
class ShareGroupResult:
    """A heartbeat's answer (None for a timer), the members removed, what happened for the shell's log, and the
    records to store before the answer."""

    response: ShareHeartbeatResponse | None = None
    removed: tuple[str, ...] = ()
    events: tuple[str, ...] = ()
    records: tuple[ShareRecord, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareMemberDescription:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: Partitions


@dataclass(frozen=True, slots=True)
class ShareGroupDescription:
    """What ShareGroupDescribe answers of a group."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: tuple[ShareMemberDescription, ...]


@dataclass(slots=True)
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = JOIN_EPOCH
    previous_member_epoch: int = JOIN_EPOCH
    assigned: Partitions = NO_PARTITIONS
    session_deadline_ms: int | None = None


class _Refused(Exception):
    def __init__(self, error: ErrorCode.ValueType, message: str) -> None:
        super().__init__(message)
        self.error = error


@dataclass(slots=True)
class _Output:
    removed: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)

    def result(self, response: ShareHeartbeatResponse | None, records: tuple[ShareRecord, ...]) -> ShareGroupResult:
        return ShareGroupResult(response, tuple(self.removed), tuple(self.events), records)


def changes(
    before: Mapping[ShareRecordKey, ShareRecordValue], after: Mapping[ShareRecordKey, ShareRecordValue]
) -> tuple[ShareRecord, ...]:
    """The records that take ``before`` to ``after``: tombstones for the keys gone (a member's current assignment
    first, as Kafka writes them), then the values new or changed."""
    gone: list[ShareRecord] = [(key, None) for key in reversed(list(before)) if key not in after]
    return (*gone, *((key, value) for key, value in after.items() if before.get(key) != value))


class ShareGroup:
    def __init__(
        self, group_id: str, config: ShareGroupConfig | None = None, assignor: ServerAssignor | None = None
    ) -> None:
        self.group_id = group_id
        self.config = config or ShareGroupConfig()
        self.assignor: ServerAssignor = assignor or SimpleAssignor()
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.subscribed_topics: tuple[TopicMetadata, ...] = ()
        self.members: dict[str, ShareMember] = {}
        self.targets: dict[str, Partitions] = {}
        self.dead = False

    @classmethod
    def restore(
        cls,
        group_id: str,
        records: Mapping[ShareRecordKey, ShareRecordValue],
        now_ms: int,
        config: ShareGroupConfig | None = None,
    ) -> ShareGroup:
        """The group a coordinator that takes over rebuilds from its stored records; sessions start now."""
        group = cls(group_id, config)
        for key, value in records.items():
            group._replay(key, value)
        for member in group.members.values():
            member.session_deadline_ms = now_ms + group.config.session_timeout_ms
        return group

    def _replay(self, key: ShareRecordKey, value: ShareRecordValue) -> None:
        if isinstance(value, ShareGroupMetadataValue):
            self.group_epoch = value.epoch
        elif isinstance(value, ShareGroupPartitionMetadataValue):
            self.subscribed_topics = value.topics
        elif isinstance(value, ShareGroupTargetAssignmentMetadataValue):
            self.assignment_epoch = value.assignment_epoch
        elif isinstance(value, ShareGroupTargetAssignmentMemberValue):
            assert isinstance(key, ShareGroupTargetAssignmentMemberKey)
            self.targets[key.member_id] = value.partitions
        elif isinstance(value, ShareGroupMemberMetadataValue):
            assert isinstance(key, ShareGroupMemberMetadataKey)
            member = self.members.setdefault(key.member_id, ShareMember(key.member_id))
            member.rack_id, member.client_id, member.client_host = value.rack_id, value.client_id, value.client_host
            member.subscribed_topic_names = value.subscribed_topic_names
        elif isinstance(value, ShareGroupCurrentMemberAssignmentValue):
            assert isinstance(key, ShareGroupCurrentMemberAssignmentKey)
            member = self.members.setdefault(key.member_id, ShareMember(key.member_id))
            member.member_epoch, member.previous_member_epoch = value.member_epoch, value.previous_member_epoch
            member.assigned = value.assigned

    def records(self) -> dict[ShareRecordKey, ShareRecordValue]:
        """The group as its stored records, in the order Kafka writes a new member's: what a step changed is the
        difference of this before and after it (``changes``)."""
        g = self.group_id
        members = sorted(self.members.values(), key=lambda m: m.member_id)
        out: dict[ShareRecordKey, ShareRecordValue] = {}
        for m in members:
            out[ShareGroupMemberMetadataKey(g, m.member_id)] = ShareGroupMemberMetadataValue(
                m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names
            )
        out[ShareGroupPartitionMetadataKey(g)] = ShareGroupPartitionMetadataValue(self.subscribed_topics)
        out[ShareGroupMetadataKey(g)] = ShareGroupMetadataValue(self.group_epoch)
        for member_id in sorted(self.targets):
            out[ShareGroupTargetAssignmentMemberKey(g, member_id)] = ShareGroupTargetAssignmentMemberValue(
                self.targets[member_id]
            )
        out[ShareGroupTargetAssignmentMetadataKey(g)] = ShareGroupTargetAssignmentMetadataValue(self.assignment_epoch)
        for m in members:
            out[ShareGroupCurrentMemberAssignmentKey(g, m.member_id)] = ShareGroupCurrentMemberAssignmentValue(
                m.member_epoch, m.previous_member_epoch, m.assigned
            )
        return out

    # -- views ---------------------------------------------------------------------------------------------------

    @property
    def state(self) -> ShareGroupState:
        if self.dead:
            return ShareGroupState.DEAD
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def next_deadline_ms(self) -> int | None:
        deadlines = (m.session_deadline_ms for m in self.members.values())
        return min((d for d in deadlines if d is not None), default=None)

    def describe(self) -> ShareGroupDescription:
        return ShareGroupDescription(
            group_id=self.group_id,
            state=self.state.value,
            group_epoch=self.group_epoch,
            assignment_epoch=self.assignment_epoch,
            assignor_name=self.assignor.name,
            members=tuple(
                ShareMemberDescription(
                    m.member_id,
                    m.rack_id,
                    m.member_epoch,
                    m.client_id,
                    m.client_host,
                    m.subscribed_topic_names,
                    m.assigned,
                )
                for m in sorted(self.members.values(), key=lambda m: m.member_id)
            ),
        )

    # -- inputs --------------------------------------------------------------------------------------------------

    def heartbeat(self, request: ShareHeartbeatRequest, now_ms: int, topics: Topics) -> ShareGroupResult:
        """A ShareGroupHeartbeat, with the cluster's topics as of the request."""
        out = _Output()
        before = self.records() if self.group_epoch else {}
        try:
            self._validate(request)
            if request.member_epoch == LEAVE_EPOCH:
                response = self._leave(out, request, topics)
            else:
                response = self._heartbeat(out, request, now_ms, topics)
        except _Refused as refused:
            return out.result(ShareHeartbeatResponse(refused.error, str(refused)), ())
        return out.result(response, changes(before, self.records()))

    def tick(self, now_ms: int) -> ShareGroupResult:
        """Remove the members whose session expired."""
        out = _Output()
        before = self.records()
        for m in list(self.members.values()):
            if m.session_deadline_ms is not None and m.session_deadline_ms <= now_ms:
                out.events.append(f"member {m.member_id} removed: its session expired")
                self._remove(out, m.member_id, None)
        return out.result(None, changes(before, self.records()) if out.removed else ())

    def delete(self) -> ErrorCode.ValueType:
        """DeleteGroups: only an Empty group may go (it is then Dead: the shell drops it)."""
        if self.members:
            return ErrorCode.NON_EMPTY_GROUP
        self.dead = True
        return ErrorCode.NONE

    # -- heartbeats ----------------------------------------------------------------------------------------------

    def _validate(self, r: ShareHeartbeatRequest) -> None:
        if self.dead:
            raise _Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {self.group_id} was deleted.")
        if not r.member_id:
            raise _Refused(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if r.rack_id == "":
            raise _Refused(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
        if r.member_epoch < LEAVE_EPOCH:
            raise _Refused(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")
        if r.member_epoch == JOIN_EPOCH and not r.subscribed_topic_names:
            raise _Refused(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")

    def _leave(self, out: _Output, r: ShareHeartbeatRequest, topics: Topics) -> ShareHeartbeatResponse:
        if r.member_id not in self.members:
            raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {r.member_id} is not a member of the group.")
        out.events.append(f"member {r.member_id} left")
        self._remove(out, r.member_id, topics)
        return ShareHeartbeatResponse(ErrorCode.NONE, member_id=r.member_id, member_epoch=LEAVE_EPOCH)

    def _heartbeat(self, out: _Output, r: ShareHeartbeatRequest, now_ms: int, topics: Topics) -> ShareHeartbeatResponse:
        member = self.members.get(r.member_id)
        if member is None:
            if r.member_epoch != JOIN_EPOCH:
                raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {r.member_id} is not a member of the group.")
            if len(self.members) >= self.config.max_size:
                raise _Refused(
                    ErrorCode.GROUP_MAX_SIZE_REACHED,
                    f"The share group has reached its maximum capacity of {self.config.max_size} members.",
                )
            member = ShareMember(r.member_id)
            out.events.append(f"member {r.member_id} joined")
        elif r.member_epoch == JOIN_EPOCH:
            member.member_epoch = member.previous_member_epoch = JOIN_EPOCH
            out.events.append(f"member {r.member_id} rejoined")
        elif r.member_epoch > member.member_epoch or (
            r.member_epoch < member.member_epoch and r.member_epoch != member.previous_member_epoch
        ):
            raise _Refused(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The share group member has epoch {r.member_epoch}, not {member.member_epoch}. "
                "The member must abandon all its partitions and rejoin.",
            )
        bump = r.member_id not in self.members
        if r.subscribed_topic_names is not None:
            names = tuple(sorted(set(r.subscribed_topic_names)))
            bump = bump or names != member.subscribed_topic_names
            member.subscribed_topic_names = names
        if r.rack_id is not None:
            member.rack_id = r.rack_id
        member.client_id, member.client_host = r.client_id, r.client_host
        self.members[member.member_id] = member
        self._refresh_subscriptions(topics, bump)
        self._update_target(out)
        before = member.assigned
        if member.member_epoch != self.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = self.assignment_epoch
            member.assigned = self.targets.get(member.member_id, NO_PARTITIONS)
            out.events.append(f"member {member.member_id} at epoch {member.member_epoch}")
        member.session_deadline_ms = now_ms + self.config.session_timeout_ms
        changed = r.member_epoch == JOIN_EPOCH or member.assigned != before
        return ShareHeartbeatResponse(
            ErrorCode.NONE,
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            assignment=member.assigned if changed else None,
        )

    def _remove(self, out: _Output, member_id: str, topics: Topics | None) -> None:
        del self.members[member_id]
        self.targets.pop(member_id, None)
        out.removed.append(member_id)
        self._refresh_subscriptions(topics, bump=True)

    def _refresh_subscriptions(self, topics: Topics | None, bump: bool) -> None:
        """The subscribed topics' metadata (with ``topics`` None, only those no member subscribes to any more are
        dropped); a change bumps the group epoch, as does ``bump``."""
        names = {n for m in self.members.values() for n in m.subscribed_topic_names}
        if topics is None:
            subscribed = tuple(t for t in self.subscribed_topics if t.name in names)
        else:
            subscribed = tuple(
                TopicMetadata(topics[n].topic_id, n, topics[n].num_partitions) for n in sorted(names) if n in topics
            )
        if subscribed != self.subscribed_topics:
            self.subscribed_topics = subscribed
            bump = True
        if bump:
            self.group_epoch += 1

    def _update_target(self, out: _Output) -> None:
        """A new target assignment at the group epoch, when the epoch has moved past it."""
        if self.group_epoch <= self.assignment_epoch:
            return
        ids = {t.name: t.topic_id for t in self.subscribed_topics}
        members = [
            AssignmentMember(m.member_id, None, frozenset(ids[n] for n in m.subscribed_topic_names if n in ids))
            for m in self.members.values()
        ]
        counts: dict[TopicId, int] = {t.topic_id: t.num_partitions for t in self.subscribed_topics}
        self.targets = self.assignor.assign(members, counts, self.targets)
        self.assignment_epoch = self.group_epoch
        out.events.append(f"target assignment of epoch {self.group_epoch} computed by {self.assignor.name}")
