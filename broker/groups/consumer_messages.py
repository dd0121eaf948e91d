"""What goes in and out of the KIP-848 consumer group state machine (``consumer_group``).

A ConsumerGroupHeartbeat is answered at once, but only after the records it caused are stored: the shell appends
``ConsumerGroupResult.records`` (acks=all) and then delivers the response, so no member acts on an epoch or an
assignment a coordinator taking over would not know. Fields a member leaves out of a heartbeat (null, -1) mean
"unchanged", as in Kafka's request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from odradek.broker.groups.consumer_records import NO_PARTITIONS, ConsumerRecord, Partitions, TopicId
from odradek.broker.groups.messages import (
    GroupSnapshot,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    SyncGroupResponse,
)
from odradek.client.errors import ErrorCode

JOIN_EPOCH = 0  # a member (re)joining
LEAVE_EPOCH = -1  # a member leaving
STATIC_LEAVE_EPOCH = -2  # a static member leaving for a while (it keeps its partitions until its session expires)
UNCHANGED_TIMEOUT = -1


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """A topic of the cluster's metadata as the group sees it: with, when the brokers' racks are known, the racks
    of each partition's replicas (index = partition; empty: unknown)."""

    topic_id: TopicId
    name: str
    num_partitions: int
    partition_racks: tuple[frozenset[str], ...] = ()


Topics = Mapping[str, TopicInfo]  # the cluster's topics by name, as of the request


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatRequest:
    member_id: str  # empty: the coordinator makes one (version 0 joins only)
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = UNCHANGED_TIMEOUT
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None  # None: unchanged; empty: no regular expression any more
    server_assignor: str | None = None
    owned: Partitions | None = None  # the partitions the member owns; None: unchanged since the last heartbeat
    client_id: str = ""
    client_host: str = ""
    member_id_required: bool = False  # version 1+: the consumer makes its member id (KIP-1082)


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatResponse:
    error: ErrorCode.ValueType
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Partitions | None = None  # None: unchanged (the member keeps what it has)


@dataclass(frozen=True, slots=True)
class ClassicDowngrade:
    """The group goes back to the classic protocol (its members all use it): once ``records`` (the consumer group's
    tombstones) are stored with ``snapshot``'s metadata record, the shell replaces the consumer group with the
    classic group restored from ``snapshot``, which starts a rebalance when ``rebalance`` is set (a member left;
    not when a classic member took a static member's place)."""

    snapshot: GroupSnapshot
    rebalance: bool


ClassicResponse = JoinGroupResponse | SyncGroupResponse | HeartbeatResponse | LeaveGroupResponse


@dataclass(frozen=True, slots=True)
class ConsumerGroupResult:
    """The answer and the records to store before it is delivered; events say what changed, for the shell's log.
    The answer is a ConsumerGroupHeartbeat's, or a classic request's from a member using the classic protocol."""

    response: ConsumerHeartbeatResponse | ClassicResponse | None = None
    records: tuple[ConsumerRecord, ...] = ()
    events: tuple[str, ...] = ()
    downgrade: ClassicDowngrade | None = None


@dataclass(frozen=True, slots=True)
class ConsumerMemberDescription:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: Partitions
    target_assignment: Partitions = NO_PARTITIONS
    classic: bool = False  # the member uses the classic protocol (ConsumerGroupDescribe v1's member type 0)


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescription:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: tuple[ConsumerMemberDescription, ...]
