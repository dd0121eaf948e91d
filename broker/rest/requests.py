"""The HTTP API's requests, typed: what the router (routes.py) makes of a request and the service (service.py)
serves. Every resource lives under one cluster (``/v3/clusters/{cluster_id}``), whose id the router checks apart."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.client.common.acls import AclBinding, AclBindingFilter


@dataclass(frozen=True, slots=True)
class OpenApi:
    pass


# ---- cluster and brokers ----


@dataclass(frozen=True, slots=True)
class ListClusters:
    pass


@dataclass(frozen=True, slots=True)
class GetCluster:
    pass


@dataclass(frozen=True, slots=True)
class ListClusterConfigs:
    """The cluster-wide dynamic broker configs (Confluent's ``broker-configs``)."""


@dataclass(frozen=True, slots=True)
class GetClusterConfig:
    name: str


@dataclass(frozen=True, slots=True)
class ListBrokers:
    pass


@dataclass(frozen=True, slots=True)
class GetBroker:
    broker_id: int


@dataclass(frozen=True, slots=True)
class ListBrokerConfigs:
    """A broker's configs, as that broker runs with them: answered by it."""

    broker_id: int


@dataclass(frozen=True, slots=True)
class GetBrokerConfig:
    broker_id: int
    name: str


@dataclass(frozen=True, slots=True)
class ListBrokerReplicas:
    broker_id: int


# ---- topics, partitions, configs ----


@dataclass(frozen=True, slots=True)
class ListTopics:
    pass


@dataclass(frozen=True, slots=True)
class CreateTopic:
    topic: str
    partitions: int = -1  # -1: the cluster's num.partitions
    replication_factor: int = -1  # -1: default.replication.factor
    configs: tuple[tuple[str, str], ...] = ()
    assignments: tuple[tuple[int, ...], ...] = ()  # replicas of partition 0, 1, ... (replicas_assignments)
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class GetTopic:
    topic: str


@dataclass(frozen=True, slots=True)
class DeleteTopic:
    topic: str


@dataclass(frozen=True, slots=True)
class ListPartitions:
    topic: str


@dataclass(frozen=True, slots=True)
class GetPartition:
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class ListReplicas:
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GetReplica:
    topic: str
    partition: int
    broker_id: int


@dataclass(frozen=True, slots=True)
class ListReassignments:
    """Partitions being reassigned (adding or removing replicas): of one topic, or of every one (None)."""

    topic: str | None = None


@dataclass(frozen=True, slots=True)
class GetReassignment:
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class ListTopicConfigs:
    topic: str


@dataclass(frozen=True, slots=True)
class GetTopicConfig:
    topic: str
    name: str


@dataclass(frozen=True, slots=True)
class ConfigChange:
    name: str
    operation: str  # SET, DELETE, APPEND or SUBTRACT (Kafka's IncrementalAlterConfigs operations)
    value: str = ""


@dataclass(frozen=True, slots=True)
class AlterTopicConfigs:
    """PUT and DELETE of one config and the ``:alter`` batch; the changes apply together or not at all."""

    topic: str
    changes: tuple[ConfigChange, ...]
    validate_only: bool = False


# ---- records ----


@dataclass(frozen=True, slots=True)
class Payload:
    """A produce request's key or value: its bytes (None: null) and the type it was given in."""

    data: bytes | None
    type: str  # BINARY, JSON or STRING


@dataclass(frozen=True, slots=True)
class ProduceRecord:
    topic: str
    partition: int | None = None  # None: by the key's hash (Kafka's murmur2), any partition for a null key
    key: Payload | None = None
    value: Payload | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_ms: int | None = None  # None: now


EARLIEST, LATEST = "earliest", "latest"


@dataclass(frozen=True, slots=True)
class ReadRecords:
    """odradek's own bounded read of one partition (Confluent's v3 API has none): from ``offset`` (a number,
    ``earliest`` or ``latest``) or from the first record at or after ``timestamp_ms``, at most ``max_records``
    records and about ``max_bytes`` bytes, waiting at most ``timeout_ms`` for a first record."""

    topic: str
    partition: int
    offset: int | str = EARLIEST
    timestamp_ms: int | None = None
    max_records: int = 100
    max_bytes: int = 1024 * 1024
    timeout_ms: int = 1000


# ---- consumer groups ----


@dataclass(frozen=True, slots=True)
class ListGroups:
    pass


@dataclass(frozen=True, slots=True)
class GetGroup:
    group: str


@dataclass(frozen=True, slots=True)
class ListConsumers:
    group: str


@dataclass(frozen=True, slots=True)
class GetConsumer:
    group: str
    consumer: str


@dataclass(frozen=True, slots=True)
class ListAssignments:
    group: str
    consumer: str


@dataclass(frozen=True, slots=True)
class GetAssignment:
    group: str
    consumer: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class ListLags:
    group: str


@dataclass(frozen=True, slots=True)
class GetLag:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GetLagSummary:
    group: str


# ---- ACLs ----


@dataclass(frozen=True, slots=True)
class SearchAcls:
    filter: AclBindingFilter


@dataclass(frozen=True, slots=True)
class CreateAcl:
    binding: AclBinding


@dataclass(frozen=True, slots=True)
class DeleteAcls:
    filter: AclBindingFilter


GROUP_REQUESTS = (
    GetGroup,
    ListConsumers,
    GetConsumer,
    ListAssignments,
    GetAssignment,
    ListLags,
    GetLag,
    GetLagSummary,
)

Request = (
    OpenApi
    | ListClusters
    | GetCluster
    | ListClusterConfigs
    | GetClusterConfig
    | ListBrokers
    | GetBroker
    | ListBrokerConfigs
    | GetBrokerConfig
    | ListBrokerReplicas
    | ListTopics
    | CreateTopic
    | GetTopic
    | DeleteTopic
    | ListPartitions
    | GetPartition
    | ListReplicas
    | GetReplica
    | ListReassignments
    | GetReassignment
    | ListTopicConfigs
    | GetTopicConfig
    | AlterTopicConfigs
    | ProduceRecord
    | ReadRecords
    | ListGroups
    | GetGroup
    | ListConsumers
    | GetConsumer
    | ListAssignments
    | GetAssignment
    | ListLags
    | GetLag
    | GetLagSummary
    | SearchAcls
    | CreateAcl
    | DeleteAcls
)
