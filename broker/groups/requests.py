"""What the group service (``group_service.GroupService``) takes and answers, whichever listener a request came in
by: odradek's own frozen types, with Kafka's field names and error codes (ints), and none of a protocol's encoding.
Each listener's adapter translates its protocol's request into one of these and the answer back.

The classic protocol's answers are the group core's own (``messages.JoinGroupResponse`` and the like), as is the
KIP-848 heartbeat's (``consumer_messages.ConsumerHeartbeatResponse``). Answers that name topics and partitions keep
the order of the request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from odradek.broker.groups.consumer_messages import ConsumerGroupDescription, ConsumerHeartbeatRequest
from odradek.broker.groups.messages import LeavingMember, Protocol
from odradek.client.errors import ErrorCode

NONE = int(ErrorCode.NONE)

# FindCoordinator's key types, Kafka's values
GROUP_KEY = 0
TRANSACTION_KEY = 1


@dataclass(frozen=True, slots=True)
class TopicPartitions:
    """A topic's partitions by index, as a request names them."""

    name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PartitionError:
    partition: int
    error: int


@dataclass(frozen=True, slots=True)
class TopicErrors:
    name: str
    partitions: tuple[PartitionError, ...]


# ---- FindCoordinator ----


@dataclass(frozen=True, slots=True)
class FindCoordinator:
    key_type: int  # GROUP_KEY or TRANSACTION_KEY; any other is answered INVALID_REQUEST
    keys: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Coordinator:
    """One key's coordinator: its node and that node's address on the broker listener (gRPC)."""

    key: str
    error: int = NONE
    node_id: int = -1
    host: str = ""
    port: int = -1
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class FindCoordinatorAnswer:
    coordinators: tuple[Coordinator, ...]  # one per key, in the request's order


# ---- JoinGroup, SyncGroup, Heartbeat, LeaveGroup (answered with the core's responses) ----


@dataclass(frozen=True, slots=True)
class JoinGroup:
    group_id: str
    member_id: str  # empty on a first join
    group_instance_id: str | None  # set for a static member
    protocol_type: str
    protocols: tuple[Protocol, ...]  # (assignor name, metadata), in the member's order of preference
    session_timeout_ms: int
    rebalance_timeout_ms: int
    reason: str = ""
    client_id: str = ""  # the member's client.id, as the group describes it


@dataclass(frozen=True, slots=True)
class SyncGroup:
    group_id: str
    member_id: str
    group_instance_id: str | None
    generation_id: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[tuple[str, bytes], ...] = ()  # (member id, assignment); only the leader sends them


@dataclass(frozen=True, slots=True)
class Heartbeat:
    group_id: str
    member_id: str
    group_instance_id: str | None
    generation_id: int


@dataclass(frozen=True, slots=True)
class LeaveGroup:
    group_id: str
    members: tuple[LeavingMember, ...]


# ---- OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete ----


@dataclass(frozen=True, slots=True)
class CommitPartition:
    partition: int
    committed_offset: int
    committed_leader_epoch: int = -1  # -1: unknown
    committed_metadata: str = ""


@dataclass(frozen=True, slots=True)
class CommitTopic:
    name: str
    partitions: tuple[CommitPartition, ...]


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    group_id: str
    generation_id: int  # -1 with an empty member id: a simple commit; a consumer group member's epoch (KIP-848)
    member_id: str
    group_instance_id: str | None
    topics: tuple[CommitTopic, ...]
    # The Kafka API version it came in (None: odradek's own API): a member of the consumer protocol needs 9+.
    api_version: int | None = None


@dataclass(frozen=True, slots=True)
class TxnOffsetCommit:
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    generation_id: int
    member_id: str
    group_instance_id: str | None
    topics: tuple[CommitTopic, ...]


@dataclass(frozen=True, slots=True)
class OffsetCommitAnswer:
    """OffsetCommit's and TxnOffsetCommit's: each partition's error, in the request's order."""

    topics: tuple[TopicErrors, ...]


@dataclass(frozen=True, slots=True)
class OffsetFetch:
    group_id: str
    topics: tuple[TopicPartitions, ...] | None  # None: every partition the group has committed
    require_stable: bool = False
    member_id: str | None = None  # a consumer group member's (OffsetFetch v9), checked with its epoch
    member_epoch: int = -1  # -1: none


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    partition: int
    committed_offset: int  # -1: nothing committed
    committed_leader_epoch: int = -1
    metadata: str = ""
    error: int = NONE


@dataclass(frozen=True, slots=True)
class FetchedTopic:
    name: str
    partitions: tuple[FetchedPartition, ...]


@dataclass(frozen=True, slots=True)
class OffsetFetchAnswer:
    """The group's error, or its committed offsets: the topics refused by ACL first, in the request's order, then
    the offsets by topic and partition."""

    error: int
    topics: tuple[FetchedTopic, ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetDelete:
    group_id: str
    topics: tuple[TopicPartitions, ...]


@dataclass(frozen=True, slots=True)
class OffsetDeleteAnswer:
    error: int  # the group's: with an error, no topics
    topics: tuple[TopicErrors, ...] = ()


# ---- ListGroups, DescribeGroups, DeleteGroups ----


@dataclass(frozen=True, slots=True)
class ListGroups:
    states_filter: tuple[str, ...] = ()  # Kafka's state names; empty: every state
    types_filter: tuple[str, ...] = ()  # "classic", "consumer", any case; empty: every type


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    group_state: str
    group_type: str  # "classic" or "consumer" (a KIP-848 group)


@dataclass(frozen=True, slots=True)
class ListGroupsAnswer:
    error: int
    groups: tuple[ListedGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribeGroups:
    groups: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    """A group as DescribeGroups tells it; with an error, only its id (and the error)."""

    group_id: str
    error: int = NONE
    group_state: str = ""
    protocol_type: str = ""
    protocol_data: str = ""  # the selected protocol (assignor) name
    generation_id: int = -1  # not in Kafka's DescribeGroups: odradek's group describe shows it
    leader: str = ""
    group_type: str = ""
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribeGroupsAnswer:
    groups: tuple[DescribedGroup, ...]  # one per group asked for, in the request's order


@dataclass(frozen=True, slots=True)
class DeleteGroups:
    groups: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeletedGroup:
    group_id: str
    error: int


@dataclass(frozen=True, slots=True)
class DeleteGroupsAnswer:
    results: tuple[DeletedGroup, ...]


# ---- KIP-848: ConsumerGroupHeartbeat, ConsumerGroupDescribe ----


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeat:
    """A heartbeat in the core's terms; its ``client_host`` is the service's to fill in, from the caller."""

    group_id: str
    heartbeat: ConsumerHeartbeatRequest


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescribe:
    group_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroup:
    error: int
    message: str | None
    group: ConsumerGroupDescription | None
    topic_names: Mapping[bytes, str]  # topic id -> name, to name the topics of its assignments


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescribeAnswer:
    groups: tuple[DescribedConsumerGroup, ...]  # one per group asked for, in the request's order
