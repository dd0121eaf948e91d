"""The classic consumer group protocol for one group: membership, rebalances, generations and static members.

Sans-I/O: the coordinator's shell calls ``join``/``sync``/``heartbeat``/``leave`` with each request and the time,
``tick`` when ``next_deadline_ms()`` is due, and ``on_persisted`` when a ``PersistGroup`` append finished. Each
call returns a ``GroupResult`` with the answers to deliver (``Respond``), the appends to make (``PersistGroup``)
and transition events to log. The rules are Kafka's classic group coordinator's; docs/groups.md tells them in
prose. The points that need care:

- A completed rebalance is only announced once it is durable: the SyncGroup answers of generation g (the leader's
  and the followers') are released when the append of g's assignment succeeded. A failed append answers them with
  an error and starts a new rebalance, so no member ever acts on an assignment a new coordinator would not know.
- A static member (``group.instance.id``) that restarts gets a new member id that replaces the old one (fencing
  the old process); in a Stable group whose selected protocol and subscription stay the same it keeps its
  assignment and no rebalance happens, once the new member id is durable.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from enum import Enum

from odradek.client.consumer.protocol import ConsumerProtocolError, Subscription
from odradek.client.errors import ErrorCode

from .members import Member, MemberIdFactory, SequentialMemberIds
from .messages import (
    NO_GENERATION,
    UNKNOWN_MEMBER,
    Action,
    GroupDescription,
    GroupListing,
    GroupResult,
    GroupSnapshot,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeftMember,
    MemberDescription,
    MemberSnapshot,
    PersistGroup,
    Protocol,
    Respond,
    SyncGroupRequest,
    SyncGroupResponse,
    Token,
)


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """The broker settings the protocol reads (Kafka's names and defaults)."""

    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    max_size: int = 2**31 - 1  # group.max.size
    # How long a new member's parked JoinGroup may wait before it is dropped (it cannot heartbeat meanwhile).
    new_member_join_timeout_ms: int = 300_000

    def __post_init__(self) -> None:
        if self.initial_rebalance_delay_ms < 0:
            raise ValueError("group.initial.rebalance.delay.ms must be >= 0")
        if not 0 < self.min_session_timeout_ms <= self.max_session_timeout_ms:
            raise ValueError("need 0 < group.min.session.timeout.ms <= group.max.session.timeout.ms")
        if self.max_size < 1:
            raise ValueError("group.max.size must be >= 1")
        if self.new_member_join_timeout_ms <= 0:
            raise ValueError("the new member join timeout must be > 0")


def append_error_to_response_error(error: ErrorCode.ValueType) -> ErrorCode.ValueType:
    """What members are told when the group's append failed with ``error`` (as Kafka maps it)."""
    if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error


# -- timers and pending appends ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _InitialDelay:
    """The initial rebalance of an Empty group: wait ``delay_ms`` more while members keep arriving, up to
    ``remaining_ms`` beyond it."""

    deadline_ms: int
    delay_ms: int
    remaining_ms: int


@dataclass(frozen=True, slots=True)
class _JoinTimeout:
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class _SyncTimeout:
    deadline_ms: int
    generation_id: int


@dataclass(frozen=True, slots=True)
class _AssignmentAppend:
    generation_id: int
    assignment: dict[str, bytes]


@dataclass(frozen=True, slots=True)
class _StaticReplaceAppend:
    instance_id: str
    old_member_id: str
    new_member_id: str
    old_protocols: tuple[Protocol, ...]
    old_rebalance_timeout_ms: int
    old_session_timeout_ms: int
    old_leader: str | None


@dataclass(frozen=True, slots=True)
class _PlainAppend:
    generation_id: int


_PendingAppend = _AssignmentAppend | _StaticReplaceAppend | _PlainAppend

_MAX_TIMER_FIRINGS = 10_000  # per tick: every firing removes a member or a timer, so far fewer ever run


class ClassicGroup:
    """One classic group's state machine. Tokens of JoinGroup/SyncGroup requests must not be None."""

    def __init__(
        self,
        group_id: str,
        config: GroupConfig | None = None,
        member_ids: MemberIdFactory | None = None,
        now_ms: int = 0,
    ) -> None:
        self.group_id = group_id
        self.config = config or GroupConfig()
        self._member_ids: MemberIdFactory = member_ids or SequentialMemberIds()
        self.state = GroupState.EMPTY
        self.previous_state = GroupState.EMPTY
        self.state_timestamp_ms: int | None = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group instance id -> member id
        self.pending_members: dict[str, int] = {}  # member ids handed out by MEMBER_ID_REQUIRED -> expiry
        self.pending_sync: set[str] = set()
        self.new_member_added = False
        self._join_timer: _InitialDelay | _JoinTimeout | None = None
        self._sync_timer: _SyncTimeout | None = None
        self._appends: dict[int, _PendingAppend] = {}
        self._next_persist_id = 0
        self._now = now_ms
        self._actions: list[Action] = []
        self._events: list[str] = []

    # -- loading ---------------------------------------------------------------------------------------------------

    @classmethod
    def restore(
        cls,
        snapshot: GroupSnapshot,
        now_ms: int,
        config: GroupConfig | None = None,
        member_ids: MemberIdFactory | None = None,
    ) -> ClassicGroup:
        """The group as a newly elected coordinator rebuilds it from its last persisted metadata: Stable with its
        members (each session starting now) or Empty, at the persisted generation."""
        group = cls(snapshot.group_id, config, member_ids, now_ms)
        group.generation_id = snapshot.generation_id
        group.protocol_type = snapshot.protocol_type or None
        group.protocol_name = snapshot.protocol_name or None
        group.state_timestamp_ms = snapshot.current_state_timestamp_ms
        for m in snapshot.members:
            protocols = ((group.protocol_name, m.subscription),) if group.protocol_name is not None else ()
            group.members[m.member_id] = Member(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                protocol_type=group.protocol_type or "",
                protocols=protocols,
                assignment=m.assignment,
                session_deadline_ms=now_ms + m.session_timeout_ms,
            )
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        if group.members:
            group.state = GroupState.STABLE
            leader = snapshot.leader
            group.leader_id = leader if leader in group.members else next(iter(group.members))
        return group

    # -- queries ---------------------------------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        """When ``tick`` next has something to do (None: nothing scheduled)."""
        deadlines = [m.session_deadline_ms for m in self.members.values() if m.session_deadline_ms is not None]
        deadlines.extend(self.pending_members.values())
        if self._join_timer is not None:
            deadlines.append(self._join_timer.deadline_ms)
        if self._sync_timer is not None:
            deadlines.append(self._sync_timer.deadline_ms)
        return min(deadlines, default=None)

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def is_empty(self) -> bool:
        return self.state is GroupState.EMPTY

    def describe(self) -> GroupDescription:
        stable = self.state is GroupState.STABLE
        return GroupDescription(
            group_id=self.group_id,
            state=self.state.value,
            protocol_type=self.protocol_type or "",
            protocol_name=(self.protocol_name or "") if stable else "",
            generation_id=self.generation_id,
            leader=self.leader_id or "",
            members=tuple(
                MemberDescription(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    metadata=m.metadata(self.protocol_name) if stable else b"",
                    assignment=m.assignment if stable else b"",
                )
                for m in self.members.values()
            ),
        )

    def listing(self) -> GroupListing:
        return GroupListing(self.group_id, self.protocol_type or "", self.state.value)

    def snapshot(self, assignment: dict[str, bytes] | None = None) -> GroupSnapshot:
        """The metadata to persist; ``assignment`` overrides the members' current ones (a pending sync's)."""
        return GroupSnapshot(
            group_id=self.group_id,
            protocol_type=self.protocol_type,
            generation_id=self.generation_id,
            protocol_name=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp_ms=self.state_timestamp_ms,
            members=tuple(
                MemberSnapshot(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    subscription=m.metadata(self.protocol_name),
                    assignment=m.assignment if assignment is None else assignment.get(m.member_id, b""),
                )
                for m in self.members.values()
            ),
        )

    # -- offset validation -----------------------------------------------------------------------------------------

    def validate_offset_commit(
        self, member_id: str, instance_id: str | None, generation_id: int
    ) -> ErrorCode.ValueType:
        """Whether an OffsetCommit may write for this group. A commit with no generation, member or instance id
        (a consumer using ``assign``, or an admin) is accepted only while the group is Empty."""
        if self.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and self.state is GroupState.EMPTY:
            return ErrorCode.NONE
        if generation_id >= 0 or member_id or instance_id is not None:
            error = self._validate_committer(member_id, instance_id, generation_id)
            if error != ErrorCode.NONE:
                return error
        elif self.state is not GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if self.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def validate_txn_offset_commit(
        self, member_id: str, instance_id: str | None, generation_id: int
    ) -> ErrorCode.ValueType:
        """Whether a TxnOffsetCommit may write for this group (KIP-447), as Kafka checks it: a request that names a
        member, an instance or a generation must be the current member at the current generation (a static member
        replaced by a newer process is fenced; the zombie of an earlier generation refused); one that names none
        (a producer that sends no group metadata) passes in any state. Unlike OffsetCommit, a rebalance in progress
        does not refuse it."""
        if self.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id >= 0 or member_id or instance_id is not None:
            return self._validate_committer(member_id, instance_id, generation_id)
        return ErrorCode.NONE

    def _validate_committer(self, member_id: str, instance_id: str | None, generation_id: int) -> ErrorCode.ValueType:
        """A commit that names a member, an instance or a generation: the current member at the current one."""
        error = self._validate_member(member_id, instance_id)
        if error == ErrorCode.NONE and generation_id != self.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return error

    def validate_offset_fetch(self) -> ErrorCode.ValueType:
        """A classic group checks no membership on OffsetFetch; only a deleted (Dead) group is refused."""
        return ErrorCode.GROUP_ID_NOT_FOUND if self.state is GroupState.DEAD else ErrorCode.NONE

    # -- JoinGroup -------------------------------------------------------------------------------------------------

    def join(self, request: JoinGroupRequest, now_ms: int) -> GroupResult:
        self._now = now_ms
        if request.token is None:
            raise ValueError("a JoinGroup request needs a token")
        member_id = request.member_id
        if not self.config.min_session_timeout_ms <= request.session_timeout_ms <= self.config.max_session_timeout_ms:
            self._respond_join(request.token, ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        elif self.state is GroupState.DEAD:
            self._respond_join(request.token, ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
        elif not self._accepts_joining_member(member_id):
            if member_id in self.members or member_id in self.pending_members:
                self._remove_member(member_id, ErrorCode.GROUP_MAX_SIZE_REACHED, "the group is full")
            self._respond_join(request.token, ErrorCode.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER)
            self._maybe_complete_join_phase()
        elif member_id == UNKNOWN_MEMBER:
            self._join_new_member(request)
        else:
            self._join_existing_member(request)
        return self._flush()

    def _accepts_joining_member(self, member_id: str) -> bool:
        if self.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if self.state is GroupState.PREPARING_REBALANCE:
            # Counting the members already rejoined (not all members) lets a shrunk max size turn away the last
            # members to rejoin.
            member = self.members.get(member_id)
            awaiting = sum(1 for m in self.members.values() if m.awaiting_join)
            return (member is not None and member.awaiting_join) or awaiting < self.config.max_size
        return member_id in self.members or len(self.members) < self.config.max_size

    def _supports_protocols(self, protocol_type: str, protocols: tuple[Protocol, ...]) -> bool:
        names = {name for name, _ in protocols}
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and bool(names & self._candidate_protocols())

    def _candidate_protocols(self) -> set[str]:
        """The protocols every member supports."""
        sets = [set(m.protocol_names()) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that all members support; most votes wins (a tie goes
        to the name that sorts first, so the choice does not depend on member order)."""
        candidates = self._candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return min(votes, key=lambda name: (-votes[name], name))

    def _join_new_member(self, request: JoinGroupRequest) -> None:
        if not self._supports_protocols(request.protocol_type, request.protocols):
            self._respond_join(request.token, ErrorCode.INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER)
            return
        instance_id = request.group_instance_id
        new_id = self._new_member_id(instance_id if instance_id is not None else request.client_id)
        if instance_id is not None:
            old_id = self.static_members.get(instance_id)
            if old_id is not None:
                self._replace_static_member_and_rebalance(request, old_id, new_id)
            else:
                self._add_member_and_rebalance(request, new_id)
        else:
            # The member must come back with this id: a client that never does leaves no member behind.
            self.pending_members[new_id] = self._now + request.session_timeout_ms
            self._respond_join(request.token, ErrorCode.MEMBER_ID_REQUIRED, new_id)

    def _new_member_id(self, prefix: str) -> str:
        for _ in range(100):
            candidate = self._member_ids(prefix)
            if candidate and candidate not in self.members and candidate not in self.pending_members:
                return candidate
        raise RuntimeError(f"the member id factory keeps returning ids in use in group {self.group_id}")

    def _join_existing_member(self, request: JoinGroupRequest) -> None:
        member_id = request.member_id
        instance_id = request.group_instance_id
        if not self._supports_protocols(request.protocol_type, request.protocols):
            self._respond_join(request.token, ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
            return
        if member_id in self.pending_members:
            if instance_id is not None and instance_id in self.static_members:
                self._respond_join(request.token, ErrorCode.FENCED_INSTANCE_ID, member_id)
            else:
                self._add_member_and_rebalance(request, member_id)
            return
        error = self._validate_member(member_id, instance_id)
        if error != ErrorCode.NONE:
            self._respond_join(request.token, error, member_id)
            return
        member = self.members[member_id]
        if self.state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(member, request, f"member {member_id} rejoined")
        elif self.state is GroupState.COMPLETING_REBALANCE:
            if member.matches(request.protocols):
                # It likely lost the JoinGroup answer: tell it the current generation again.
                self._respond_current_generation(request.token, member_id)
            else:
                self._update_member_and_rebalance(member, request, f"member {member_id} changed its metadata")
        elif self.state is GroupState.STABLE:
            if member_id == self.leader_id:
                # The leader may rejoin to rebalance for changes the member metadata does not show (new
                # partitions of a subscribed topic).
                self._update_member_and_rebalance(member, request, f"leader {member_id} rejoined")
            elif not member.matches(request.protocols):
                self._update_member_and_rebalance(member, request, f"member {member_id} changed its metadata")
            else:
                self._respond_current_generation(request.token, member_id, with_members=False)
        else:
            self._respond_join(request.token, ErrorCode.UNKNOWN_MEMBER_ID, member_id)

    def _respond_current_generation(self, token: Token, member_id: str, with_members: bool = True) -> None:
        """A successful JoinGroup answer: the generation, protocol and leader, and for the leader every member."""
        self._respond_join(
            token,
            ErrorCode.NONE,
            member_id,
            generation_id=self.generation_id,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader=self.leader_id or "",
            members=self._join_members() if with_members and member_id == self.leader_id else (),
        )

    def _join_members(self) -> tuple[JoinGroupMember, ...]:
        return tuple(
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        )

    def _add_member_and_rebalance(self, request: JoinGroupRequest, member_id: str) -> None:
        member = Member(
            member_id=member_id,
            group_instance_id=request.group_instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=request.protocols,
            join_token=request.token,
            # A new member cannot heartbeat while its join is parked; it gets this long to be answered.
            session_deadline_ms=self._now + self.config.new_member_join_timeout_ms,
            is_new=True,
        )
        if self.state is GroupState.PREPARING_REBALANCE and self.previous_state is GroupState.EMPTY:
            self.new_member_added = True
        if not self.members:
            self.protocol_type = request.protocol_type
        self.members[member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member_id
        if self.leader_id is None:
            self.leader_id = member_id
        self.pending_members.pop(member_id, None)
        kind = f"static member {member_id} ({member.group_instance_id})" if member.is_static else f"member {member_id}"
        self._maybe_prepare_rebalance_or_complete_join(f"{kind} joined")

    def _update_member(
        self,
        member: Member,
        protocols: tuple[Protocol, ...],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        token: Token | None,
    ) -> None:
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if member.join_token is not None and token is not None and member.join_token != token:
            # A retried JoinGroup supersedes the parked one; that caller has most likely given up already.
            self._respond_join(member.join_token, ErrorCode.REBALANCE_IN_PROGRESS, member.member_id)
        member.join_token = token

    def _update_member_and_rebalance(self, member: Member, request: JoinGroupRequest, reason: str) -> None:
        self._update_member(
            member, request.protocols, request.rebalance_timeout_ms, request.session_timeout_ms, request.token
        )
        self._maybe_prepare_rebalance_or_complete_join(reason)

    def _replace_static_member_and_rebalance(self, request: JoinGroupRequest, old_id: str, new_id: str) -> None:
        instance_id = request.group_instance_id
        assert instance_id is not None
        old_leader = self.leader_id
        member = self._replace_static_member(instance_id, old_id, new_id, ErrorCode.FENCED_INSTANCE_ID)
        member.session_deadline_ms = self._now + member.session_timeout_ms
        saved = _StaticReplaceAppend(
            instance_id,
            old_id,
            new_id,
            member.protocols,
            member.rebalance_timeout_ms,
            member.session_timeout_ms,
            old_leader,
        )
        old_metadata = member.metadata(self.protocol_name)
        self._update_member(
            member, request.protocols, request.rebalance_timeout_ms, request.session_timeout_ms, request.token
        )
        self._event(f"static member {instance_id} rejoined as {new_id}, replacing (fencing) {old_id}")
        if self.state is GroupState.STABLE:
            same = self.select_protocol() == self.protocol_name and _same_subscription(
                self.protocol_type, old_metadata, member.metadata(self.protocol_name)
            )
            if same:
                # Nothing the assignment depends on changed: keep it, once the new member id is durable.
                self._persist(saved)
            else:
                self._maybe_prepare_rebalance_or_complete_join(
                    f"static member {instance_id} rejoined as {new_id} with a different protocol or subscription"
                )
        elif self.state is GroupState.COMPLETING_REBALANCE:
            # The leader may be assigning to the old member id right now: assign again.
            self._prepare_rebalance(f"static member {instance_id} rejoined as {new_id} during a rebalance")
        else:
            self._maybe_complete_join_phase()

    def _replace_static_member(self, instance_id: str, old_id: str, new_id: str, error: ErrorCode.ValueType) -> Member:
        """Move the member to its new id, answering the old id's parked calls with ``error``."""
        old = self.members.pop(old_id)
        if old.join_token is not None:
            self._respond_join(old.join_token, error, old_id)
        if old.sync_token is not None:
            self._respond_sync(old.sync_token, error)
        member = replace(old, member_id=new_id, join_token=None, sync_token=None)
        self.members[new_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        self.static_members[instance_id] = new_id
        return member

    # -- rebalance phases ------------------------------------------------------------------------------------------

    def _maybe_prepare_rebalance_or_complete_join(self, reason: str) -> None:
        if self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]:
            self._prepare_rebalance(reason)
        else:
            self._maybe_complete_join_phase()

    def _prepare_rebalance(self, reason: str) -> None:
        if self.state is GroupState.COMPLETING_REBALANCE:
            self._reset_and_propagate_assignment(ErrorCode.REBALANCE_IN_PROGRESS)
        self.pending_sync.clear()
        self._sync_timer = None
        initial = self.state is GroupState.EMPTY
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(self.rebalance_timeout_ms() - delay, 0)
            self._join_timer = _InitialDelay(self._now + delay, delay, remaining)
        self._transition(GroupState.PREPARING_REBALANCE, reason)
        if not initial:
            if self._all_members_joined():
                self._complete_join()
            else:
                self._join_timer = _JoinTimeout(self._now + self.rebalance_timeout_ms())

    def _all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def _maybe_complete_join_phase(self) -> None:
        if (
            self.state is GroupState.PREPARING_REBALANCE
            and self.previous_state is not GroupState.EMPTY  # the initial delay runs its course
            and self._all_members_joined()
        ):
            self._complete_join()

    def _complete_join(self) -> None:
        self._join_timer = None
        gone = [m for m in self.members.values() if not m.awaiting_join and not m.is_static]
        for m in gone:
            self._remove_member(m.member_id, ErrorCode.UNKNOWN_MEMBER_ID, "it did not rejoin in time")
        if self.state is GroupState.DEAD:
            return
        if self.members and not self._elect_joined_leader():
            # Only static members that did not rejoin are left: wait another rebalance timeout for them.
            self._join_timer = _JoinTimeout(self._now + self.rebalance_timeout_ms())
            return
        self.generation_id += 1
        self.pending_sync.clear()
        if not self.members:
            self.protocol_name = None
            self._transition(GroupState.EMPTY, f"generation {self.generation_id} has no members")
            self._persist(_PlainAppend(self.generation_id))
            return
        self.protocol_name = self.select_protocol()
        self._transition(
            GroupState.COMPLETING_REBALANCE,
            f"generation {self.generation_id} formed with {len(self.members)} members, "
            f"protocol {self.protocol_name}, leader {self.leader_id}",
        )
        for m in self.members.values():
            if m.join_token is not None:
                token, m.join_token = m.join_token, None
                self._respond_current_generation(token, m.member_id)
            m.session_deadline_ms = self._now + m.session_timeout_ms
            m.is_new = False
            self.pending_sync.add(m.member_id)
        self._sync_timer = _SyncTimeout(self._now + self.rebalance_timeout_ms(), self.generation_id)

    def _elect_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did; False when none did."""
        leader = self.members.get(self.leader_id or "")
        if leader is not None and leader.awaiting_join:
            return True
        for m in self.members.values():
            if m.awaiting_join:
                self._event(f"leader {self.leader_id} did not rejoin; {m.member_id} leads instead")
                self.leader_id = m.member_id
                return True
        return False

    def _reset_and_propagate_assignment(self, error: ErrorCode.ValueType) -> None:
        for m in self.members.values():
            m.assignment = b""
        self._propagate_assignment(error)

    def _propagate_assignment(self, error: ErrorCode.ValueType) -> None:
        ok = error == ErrorCode.NONE
        for m in self.members.values():
            if m.sync_token is not None:
                token, m.sync_token = m.sync_token, None
                self._respond_sync(
                    token,
                    error,
                    self.protocol_type if ok else None,
                    self.protocol_name if ok else None,
                    m.assignment if ok else b"",
                )
                # Its session was not enforced while it waited: start it afresh.
                m.session_deadline_ms = self._now + m.session_timeout_ms

    # -- SyncGroup -------------------------------------------------------------------------------------------------

    def sync(self, request: SyncGroupRequest, now_ms: int) -> GroupResult:
        self._now = now_ms
        if request.token is None:
            raise ValueError("a SyncGroup request needs a token")
        error = self._validate_sync(request)
        if error != ErrorCode.NONE:
            self._respond_sync(request.token, error)
        elif self.state is GroupState.PREPARING_REBALANCE:
            self._respond_sync(request.token, ErrorCode.REBALANCE_IN_PROGRESS)
        elif self.state is GroupState.COMPLETING_REBALANCE:
            member = self.members[request.member_id]
            if member.sync_token is not None and member.sync_token != request.token:
                self._respond_sync(member.sync_token, ErrorCode.REBALANCE_IN_PROGRESS)
            member.sync_token = request.token
            self._synced(request.member_id)
            if request.member_id == self.leader_id:
                assignment = dict(request.assignments)
                for m in self.members:
                    assignment.setdefault(m, b"")
                self._event(f"leader {request.member_id} sent the assignment of generation {self.generation_id}")
                self._persist(_AssignmentAppend(self.generation_id, assignment), assignment)
        elif self.state is GroupState.STABLE:
            self._synced(request.member_id)
            member = self.members[request.member_id]
            self._respond_sync(request.token, ErrorCode.NONE, self.protocol_type, self.protocol_name, member.assignment)
        return self._flush()

    def _validate_sync(self, request: SyncGroupRequest) -> ErrorCode.ValueType:
        if self.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.state is GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        error = self._validate_member(request.member_id, request.group_instance_id)
        if error != ErrorCode.NONE:
            return error
        if request.generation_id != self.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if _inconsistent(request.protocol_type, self.protocol_type) or _inconsistent(
            request.protocol_name, self.protocol_name
        ):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return ErrorCode.NONE

    def _synced(self, member_id: str) -> None:
        self.pending_sync.discard(member_id)
        if not self.pending_sync:
            self._sync_timer = None

    # -- appends ---------------------------------------------------------------------------------------------------

    def _persist(self, pending: _PendingAppend, assignment: dict[str, bytes] | None = None) -> None:
        self._next_persist_id += 1
        self._appends[self._next_persist_id] = pending
        self._actions.append(PersistGroup(self._next_persist_id, self.snapshot(assignment)))

    def on_persisted(self, persist_id: int, now_ms: int, error: ErrorCode.ValueType = ErrorCode.NONE) -> GroupResult:
        """The append of ``PersistGroup(persist_id)`` finished: ``error`` NONE if it is committed (acks=all)."""
        self._now = now_ms
        pending = self._appends.pop(persist_id, None)
        failed = error != ErrorCode.NONE
        if isinstance(pending, _AssignmentAppend):
            # The group may have moved on while the append was in flight: then the outcome no longer matters.
            current = self.state is GroupState.COMPLETING_REBALANCE and pending.generation_id == self.generation_id
            if current and failed:
                reply = append_error_to_response_error(error)
                self._event(f"storing the assignment of generation {self.generation_id} failed: {reply}")
                self._reset_and_propagate_assignment(reply)
                self._maybe_prepare_rebalance_or_complete_join(f"storing the assignment failed ({reply})")
            elif current:
                for m in self.members.values():
                    m.assignment = pending.assignment.get(m.member_id, b"")
                self._propagate_assignment(ErrorCode.NONE)
                self._transition(GroupState.STABLE, f"generation {self.generation_id} is stored")
        elif isinstance(pending, _StaticReplaceAppend):
            self._static_replace_persisted(pending, error)
        elif isinstance(pending, _PlainAppend) and failed:
            self._event(f"storing empty generation {pending.generation_id} failed: {error}")
        return self._flush()

    def _static_replace_persisted(self, pending: _StaticReplaceAppend, error: ErrorCode.ValueType) -> None:
        member = self.members.get(pending.new_member_id)
        if member is None or self.static_members.get(pending.instance_id) != pending.new_member_id:
            return  # removed or replaced again meanwhile; its parked join was answered then
        if error != ErrorCode.NONE:
            reply = append_error_to_response_error(error)
            token, member.join_token = member.join_token, None
            self._update_member(
                member, pending.old_protocols, pending.old_rebalance_timeout_ms, pending.old_session_timeout_ms, None
            )
            restored = self._replace_static_member(
                pending.instance_id, pending.new_member_id, pending.old_member_id, ErrorCode.FENCED_INSTANCE_ID
            )
            restored.session_deadline_ms = self._now + restored.session_timeout_ms
            self._event(
                f"storing static member {pending.instance_id}'s new id {pending.new_member_id} failed ({reply}); "
                f"it is {pending.old_member_id} again"
            )
            if token is not None:
                self._respond_join(
                    token,
                    reply,
                    UNKNOWN_MEMBER,
                    generation_id=self.generation_id,
                    protocol_type=self.protocol_type,
                    protocol_name=self.protocol_name,
                    leader=pending.old_leader or "",
                )
            return
        if self.state is GroupState.STABLE and member.join_token is not None:
            token, member.join_token = member.join_token, None
            leader = member.member_id == self.leader_id
            self._respond_join(
                token,
                ErrorCode.NONE,
                member.member_id,
                generation_id=self.generation_id,
                protocol_type=self.protocol_type,
                protocol_name=self.protocol_name,
                leader=self.leader_id or "",
                members=self._join_members() if leader else (),
                skip_assignment=leader,
            )

    # -- Heartbeat -------------------------------------------------------------------------------------------------

    def heartbeat(self, request: HeartbeatRequest, now_ms: int) -> HeartbeatResponse:
        """Refreshes the member's session; REBALANCE_IN_PROGRESS tells it to rejoin."""
        self._now = now_ms
        if self.state is GroupState.DEAD:
            return HeartbeatResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        error = self._validate_member(request.member_id, request.group_instance_id)
        if error != ErrorCode.NONE:
            return HeartbeatResponse(error)
        if request.generation_id != self.generation_id:
            return HeartbeatResponse(ErrorCode.ILLEGAL_GENERATION)
        if self.state is GroupState.EMPTY:
            return HeartbeatResponse(ErrorCode.UNKNOWN_MEMBER_ID)
        member = self.members[request.member_id]
        member.session_deadline_ms = now_ms + member.session_timeout_ms
        if self.state is GroupState.PREPARING_REBALANCE:
            return HeartbeatResponse(ErrorCode.REBALANCE_IN_PROGRESS)
        return HeartbeatResponse(ErrorCode.NONE)

    # -- LeaveGroup ------------------------------------------------------------------------------------------------

    def leave(self, request: LeaveGroupRequest, now_ms: int) -> tuple[LeaveGroupResponse, GroupResult]:
        """Removes each listed member (an admin names a static member by instance id alone); one rebalance for all."""
        self._now = now_ms
        if self.state is GroupState.DEAD:
            return LeaveGroupResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE), self._flush()
        answers: list[LeftMember] = []
        left: list[str] = []
        for leaving in request.members:
            member_id, instance_id = leaving.member_id, leaving.group_instance_id
            why = f"it left ({leaving.reason})" if leaving.reason else "it left"
            if member_id == UNKNOWN_MEMBER:
                static_id = self.static_members.get(instance_id) if instance_id is not None else None
                if static_id is None:
                    answers.append(LeftMember(member_id, instance_id, ErrorCode.UNKNOWN_MEMBER_ID))
                    continue
                self._remove_member(static_id, ErrorCode.UNKNOWN_MEMBER_ID, why)
            elif member_id in self.pending_members:
                del self.pending_members[member_id]
            else:
                error = self._validate_member(member_id, instance_id)
                if error != ErrorCode.NONE:
                    answers.append(LeftMember(member_id, instance_id, error))
                    continue
                self._remove_member(member_id, ErrorCode.UNKNOWN_MEMBER_ID, why)
            answers.append(LeftMember(member_id, instance_id, ErrorCode.NONE))
            left.append(member_id or f"instance {instance_id}")
        if left:
            if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(f"{', '.join(left)} left")
            elif self.state is GroupState.PREPARING_REBALANCE:
                self._maybe_complete_join_phase()
        return LeaveGroupResponse(ErrorCode.NONE, tuple(answers)), self._flush()

    # -- timers ----------------------------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> GroupResult:
        """Fire every timer due by ``now_ms``, earliest first."""
        self._now = now_ms
        for _ in range(_MAX_TIMER_FIRINGS):
            if not self._fire_earliest(now_ms):
                break
        return self._flush()

    def _fire_earliest(self, now_ms: int) -> bool:
        due: list[tuple[int, int, str]] = []  # (deadline, kind order, key)
        if self._join_timer is not None and self._join_timer.deadline_ms <= now_ms:
            due.append((self._join_timer.deadline_ms, 0, ""))
        if self._sync_timer is not None and self._sync_timer.deadline_ms <= now_ms:
            due.append((self._sync_timer.deadline_ms, 1, ""))
        for member_id, deadline in self.pending_members.items():
            if deadline <= now_ms:
                due.append((deadline, 2, member_id))
        for m in self.members.values():
            if m.session_deadline_ms is not None and m.session_deadline_ms <= now_ms:
                due.append((m.session_deadline_ms, 3, m.member_id))
        if not due:
            return False
        _, kind, key = min(due)
        if kind == 0:
            self._fire_join_timer()
        elif kind == 1:
            self._fire_sync_timer()
        elif kind == 2:
            del self.pending_members[key]
            self._event(f"pending member {key} never joined within its session timeout")
            if self.state is GroupState.PREPARING_REBALANCE and self._all_members_joined():
                self._complete_join()
        else:
            self._expire_session(self.members[key])
        return True

    def _fire_join_timer(self) -> None:
        timer = self._join_timer
        self._join_timer = None
        if isinstance(timer, _InitialDelay) and self.new_member_added and timer.remaining_ms > 0:
            # Members keep arriving: wait once more, within the rebalance timeout.
            self.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, timer.remaining_ms)
            remaining = max(timer.remaining_ms - timer.delay_ms, 0)
            self._join_timer = _InitialDelay(self._now + delay, delay, remaining)
        else:
            self._complete_join()

    def _fire_sync_timer(self) -> None:
        timer = self._sync_timer
        self._sync_timer = None
        if (
            timer is None
            or timer.generation_id != self.generation_id
            or self.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
            or not self.pending_sync
        ):
            return
        late = sorted(self.pending_sync)
        for member_id in late:
            self._remove_member(member_id, ErrorCode.UNKNOWN_MEMBER_ID, "it did not sync in time")
        self._prepare_rebalance(f"{', '.join(late)} did not send SyncGroup within the rebalance timeout")

    def _expire_session(self, member: Member) -> None:
        if member.has_satisfied_heartbeat():
            # Parked in a join or sync: its session restarts when the coordinator answers it.
            member.session_deadline_ms = None
            return
        self._remove_member(member.member_id, ErrorCode.UNKNOWN_MEMBER_ID, "its session expired")
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(f"member {member.member_id}'s session expired")
        elif self.state is GroupState.PREPARING_REBALANCE and self._all_members_joined():
            self._complete_join()

    # -- lifecycle -------------------------------------------------------------------------------------------------

    def unload(self, now_ms: int) -> GroupResult:
        """This broker no longer coordinates the group: it goes Dead and parked calls learn NOT_COORDINATOR."""
        self._now = now_ms
        if self.state is not GroupState.DEAD:
            for m in self.members.values():
                if m.join_token is not None:
                    token, m.join_token = m.join_token, None
                    self._respond_join(token, ErrorCode.NOT_COORDINATOR, m.member_id)
                if m.sync_token is not None:
                    token, m.sync_token = m.sync_token, None
                    self._respond_sync(token, ErrorCode.NOT_COORDINATOR)
            self._transition(GroupState.DEAD, "unloaded")
        self._join_timer = self._sync_timer = None
        self.pending_members.clear()
        for m in self.members.values():
            m.session_deadline_ms = None
        return self._flush()

    def hand_over(self, now_ms: int) -> GroupResult:
        """The group is becoming a consumer group (an online upgrade): its parked JoinGroup and SyncGroup calls
        learn REBALANCE_IN_PROGRESS, so their members rejoin the consumer group. Nothing else changes: should the
        upgrade not be stored, the group goes on as it was and those members rejoin it."""
        self._now = now_ms
        for m in self.members.values():
            if m.join_token is not None:
                token, m.join_token = m.join_token, None
                self._respond_join(token, ErrorCode.REBALANCE_IN_PROGRESS, m.member_id)
            if m.sync_token is not None:
                token, m.sync_token = m.sync_token, None
                self._respond_sync(token, ErrorCode.REBALANCE_IN_PROGRESS)
        return self._flush()

    def rebalance(self, now_ms: int, reason: str) -> GroupResult:
        """Start a rebalance of a Stable group (the members learn it from their heartbeats), as a group downgraded
        from the consumer protocol does at once."""
        self._now = now_ms
        if self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE] and self.state is not GroupState.EMPTY:
            self._prepare_rebalance(reason)
        return self._flush()

    def delete(self, now_ms: int) -> tuple[ErrorCode.ValueType, GroupResult]:
        """DeleteGroups: only an Empty group (no members) may go; the shell then writes its tombstone."""
        self._now = now_ms
        if self.state is GroupState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND, self._flush()
        if self.state is not GroupState.EMPTY:
            return ErrorCode.NON_EMPTY_GROUP, self._flush()
        self._join_timer = self._sync_timer = None
        self.pending_members.clear()
        self._transition(GroupState.DEAD, "deleted")
        return ErrorCode.NONE, self._flush()

    # -- helpers ---------------------------------------------------------------------------------------------------

    def _validate_member(self, member_id: str, instance_id: str | None) -> ErrorCode.ValueType:
        """A known instance id must map to this member id (else the caller is an older, fenced process)."""
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        return ErrorCode.NONE if member_id in self.members else ErrorCode.UNKNOWN_MEMBER_ID

    def _remove_member(self, member_id: str, error: ErrorCode.ValueType, why: str) -> None:
        """Drop a member (or pending member), answering its parked calls with ``error``."""
        self.pending_members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        member = self.members.pop(member_id, None)
        if member is None:
            return
        if member.join_token is not None:
            self._respond_join(member.join_token, error, UNKNOWN_MEMBER)
        if member.sync_token is not None:
            self._respond_sync(member.sync_token, error)
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self._event(f"group {self.group_id} removed member {member_id}: {why}")

    def _transition(self, state: GroupState, reason: str) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise AssertionError(f"group {self.group_id}: illegal transition {self.state.value} -> {state.value}")
        self.previous_state, self.state = self.state, state
        self.state_timestamp_ms = self._now
        self._event(f"group {self.group_id} moved to {state.value}: {reason}")

    def _respond_join(
        self,
        token: Token,
        error: ErrorCode.ValueType,
        member_id: str,
        *,
        generation_id: int = NO_GENERATION,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        leader: str = "",
        members: tuple[JoinGroupMember, ...] = (),
        skip_assignment: bool = False,
    ) -> None:
        response = JoinGroupResponse(
            error, member_id, generation_id, protocol_type, protocol_name, leader, skip_assignment, members
        )
        self._actions.append(Respond(token, response))

    def _respond_sync(
        self,
        token: Token,
        error: ErrorCode.ValueType,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        assignment: bytes = b"",
    ) -> None:
        self._actions.append(Respond(token, SyncGroupResponse(error, protocol_type, protocol_name, assignment)))

    def _event(self, text: str) -> None:
        self._events.append(text)

    def _flush(self) -> GroupResult:
        result = GroupResult(tuple(self._actions), tuple(self._events))
        self._actions.clear()
        self._events.clear()
        return result


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current


def _same_subscription(protocol_type: str | None, old: bytes, new: bytes) -> bool:
    """Whether a static member that restarted still subscribes to what the assignment was made for. For consumers
    that is its topics and rack: the rest of the subscription (the generation it last saw, its owned partitions,
    an assignor's user data) differs with every restart, and comparing it would turn each restart into the
    rebalance static membership exists to avoid. Kafka itself checks only the selected protocol; comparing the
    topics also rebalances for a restarted member that subscribes to other topics, which no one else would notice.
    Other protocol types embed data of their own: only the selected protocol counts, as in Kafka."""
    if protocol_type != "consumer":
        return True
    try:
        before, after = Subscription.decode(old), Subscription.decode(new)
    except ConsumerProtocolError:
        return old == new
    return (set(before.topics), before.rack_id) == (set(after.topics), after.rack_id)
