"""Topics: CreateTopics, DeleteTopics, CreatePartitions and DescribeTopics. Results keep the order of the request."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.client.common.admin.configs import ConfigEntry
from odradek.client.errors import ErrorCode

NONE = int(ErrorCode.NONE)
DEFAULT = -1  # a partition count or replication factor left to the cluster's default, as Kafka's -1


@dataclass(frozen=True, slots=True)
class CreatableTopic:
    """A topic to create. With ``assignments`` (the replicas of each partition, in partition order) both counts
    must be DEFAULT, as Kafka requires; 0 and other negatives are refused."""

    name: str
    num_partitions: int = DEFAULT
    replication_factor: int = DEFAULT
    configs: tuple[ConfigEntry, ...] = ()  # of a name given twice the last counts
    assignments: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class CreateTopics:
    topics: tuple[CreatableTopic, ...]
    timeout_ms: int = 0  # how long the active controller may take; 0: the service's own default
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class TopicResult:
    """One topic's outcome. CreateTopics, for a topic created (or that would be, validate_only): its id, partition
    count and replication factor (0: not said, as by a node before these were answered)."""

    name: str
    error: int = NONE
    error_message: str = ""
    topic_id: bytes = b""
    num_partitions: int = 0
    replication_factor: int = 0


@dataclass(frozen=True, slots=True)
class CreateTopicsAnswer:
    topics: tuple[TopicResult, ...]
    metadata_offset: int | None = None


@dataclass(frozen=True, slots=True)
class DeleteTopics:
    names: tuple[str, ...]
    timeout_ms: int = 0


@dataclass(frozen=True, slots=True)
class DeleteTopicsAnswer:
    topics: tuple[TopicResult, ...]
    metadata_offset: int | None = None


@dataclass(frozen=True, slots=True)
class CreatePartitionsTopic:
    """Grow ``name`` to ``count`` partitions in all (never fewer); ``assignments``: the replicas of each new
    partition, in partition order (empty: the controller places them)."""

    name: str
    count: int
    assignments: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class CreatePartitions:
    topics: tuple[CreatePartitionsTopic, ...]
    timeout_ms: int = 0
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class CreatePartitionsAnswer:
    topics: tuple[TopicResult, ...]
    metadata_offset: int | None = None


@dataclass(frozen=True, slots=True)
class DescribeTopics:
    names: tuple[str, ...] = ()  # empty: every topic (the caller may describe)
    include_internal: bool = False  # with every topic: Kafka's internal topics too
    include_offsets: bool = False  # not served: log start offsets and high watermarks are -1


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    eligible_leader_replicas: tuple[int, ...] = ()
    log_start_offset: int = -1
    high_watermark: int = -1
    under_replicated: bool = False
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    error: int = NONE
    last_known_elr: tuple[int, ...] = ()  # the replicas that last held everything committed (offline partitions)
    last_known_leader: int = -1  # the leader before the partition went offline


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    error: int = NONE
    error_message: str = ""
    topic_id: bytes = b""
    is_internal: bool = False
    configs: tuple[ConfigEntry, ...] = ()  # the topic's own configs
    partitions: tuple[PartitionDescription, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribeTopicsAnswer:
    topics: tuple[TopicDescription, ...]
