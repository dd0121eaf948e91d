"""What goes in and out of the classic group state machine: requests, responses, actions and the persisted view.

All frozen, so the shell can hand them across tasks and tests can compare them. A JoinGroup or SyncGroup may be
answered later than it arrives (a join waits for the rest of the group, a sync for the leader's assignment and its
append), so those requests carry an opaque ``token`` and their answers come back as ``Respond`` actions naming it;
the shell routes each to the waiting call. Every token gets exactly one answer (an error when it is superseded, its
member removed or the group unloaded). Heartbeat and LeaveGroup are answered at once.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from odradek.client.errors import ErrorCode

Token = Hashable
# One protocol a member supports, in its order of preference: (name, metadata), e.g. ("range", subscription bytes).
Protocol = tuple[str, bytes]

UNKNOWN_MEMBER = ""
NO_GENERATION = -1


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    token: Token
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    reason: str = ""


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    """One member as the leader sees it: its metadata for the selected protocol."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResponse:
    error: ErrorCode.ValueType
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    # True for a static leader that rejoined a Stable group without a rebalance: it must not assign again.
    skip_assignment: bool = False
    members: tuple[JoinGroupMember, ...] = ()  # only for the leader


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    token: Token
    member_id: str
    group_instance_id: str | None
    generation_id: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[tuple[str, bytes], ...] = ()  # (member id, assignment); only the leader sends them


@dataclass(frozen=True, slots=True)
class SyncGroupResponse:
    error: ErrorCode.ValueType
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    member_id: str
    group_instance_id: str | None
    generation_id: int


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    error: ErrorCode.ValueType


@dataclass(frozen=True, slots=True)
class LeavingMember:
    """One member of a LeaveGroup batch. An admin removes a static member by instance id with an empty member id."""

    member_id: str
    group_instance_id: str | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class LeaveGroupRequest:
    members: tuple[LeavingMember, ...]


@dataclass(frozen=True, slots=True)
class LeftMember:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode.ValueType


@dataclass(frozen=True, slots=True)
class LeaveGroupResponse:
    error: ErrorCode.ValueType  # for the whole request (the group is gone); per-member errors are in members
    members: tuple[LeftMember, ...] = ()


# -- the persisted view ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemberSnapshot:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes  # the member's metadata for the group's selected protocol
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    """A group's metadata as written to the offsets topic, and as a loading coordinator reads it back."""

    group_id: str
    protocol_type: str | None
    generation_id: int
    protocol_name: str | None
    leader: str | None
    current_state_timestamp_ms: int | None
    members: tuple[MemberSnapshot, ...]


# -- actions -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Respond:
    """Deliver this answer to the JoinGroup or SyncGroup call that carried ``token``."""

    token: Token
    response: JoinGroupResponse | SyncGroupResponse


@dataclass(frozen=True, slots=True)
class PersistGroup:
    """Append the group's metadata to its offsets partition (acks=all), then report the outcome with
    ``ClassicGroup.on_persisted(persist_id, ...)``. Answers that depend on it wait until then."""

    persist_id: int
    group: GroupSnapshot


Action = Respond | PersistGroup


@dataclass(frozen=True, slots=True)
class GroupResult:
    """What one input caused: actions for the shell, in order, and transition events for its log."""

    actions: tuple[Action, ...] = ()
    events: tuple[str, ...] = ()


# -- views -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes  # empty unless the group is Stable
    assignment: bytes  # empty unless the group is Stable


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol_name: str
    generation_id: int
    leader: str
    members: tuple[MemberDescription, ...]
    group_type: str = "classic"  # or "consumer": a KIP-848 group (generation: its group epoch)


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"
