"""The HTTP API's requests, typed: what the router (routes.py) makes of a request and the service (service.py)
serves. Every resource lives under one cluster (``/v3/clusters/{cluster_id}``), whose id the router checks apart."""

from __future__ import annotations

from dataclasses import dataclass, field

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


# ---- odradek's own, for the web console (docs/console.md) ----


@dataclass(frozen=True, slots=True)
class GetOverview:
    """The cluster at a glance: brokers, controllers and quorum, partitions without a leader or short of replicas."""


@dataclass(frozen=True, slots=True)
class GetTopicDetails:
    """Every partition of a topic with its leader, replicas, ISR, ELR, offsets and size (from each broker)."""

    topic: str


@dataclass(frozen=True, slots=True)
class AddPartitions:
    """Grow a topic to ``count`` partitions in total (Confluent's PATCH of a topic)."""

    topic: str
    count: int


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """What a searched record must match, every condition given (none: every record). ``json_path`` is parsed
    (``$.a[0].b`` is ``("a", 0, "b")``); ``json_value`` the canonical JSON text the value there must equal (None:
    the path exists)."""

    key: bytes | None = None  # the key's bytes, exactly
    value_contains: bytes | None = None  # a substring of the value's bytes
    json_path: tuple[str | int, ...] | None = None
    json_value: str | None = None
    header: str | None = None  # a header of this name
    header_value: bytes | None = None  # ... with exactly this value


SEARCH_STARTS = ("earliest", "end", "offset", "timestamp")


@dataclass(frozen=True, slots=True)
class SearchRecords:
    """A bounded server-side scan of a topic's partitions (None: all) for records matching ``filter``. It starts at
    ``start`` (earliest, the last ``tail`` records of each partition, ``offset`` or the first record at or after
    ``timestamp_ms``), or where a previous page stopped (``cursor``: partition and offset pairs), and stops at the
    partitions' high watermarks, after ``max_matches`` matches, ``max_scanned`` records or ``timeout_ms``."""

    topic: str
    partitions: tuple[int, ...] | None = None
    start: str = "earliest"
    offset: int = 0
    timestamp_ms: int = 0
    tail: int = 100
    cursor: tuple[tuple[int, int], ...] = ()
    filter: SearchFilter = SearchFilter()
    max_matches: int = 100
    max_scanned: int = 1_000_000
    timeout_ms: int = 10_000
    decode: bool = False  # decode keys and values framed for the schema registry


@dataclass(frozen=True, slots=True)
class RepublishRecords:
    """Copy records of ``topic`` to ``destination`` with their keys, values and headers: the ``records`` chosen
    (partition and offset pairs), or the offsets ``start_offset`` up to ``end_offset`` (excluded) of ``partition``.
    Each goes to its own partition number (``same_partition``) or, as a producer would send it, by its key."""

    topic: str
    destination: str
    records: tuple[tuple[int, int], ...] = ()
    partition: int | None = None
    start_offset: int = 0
    end_offset: int = 0
    same_partition: bool = False
    keep_timestamps: bool = False


RESET_TARGETS = ("earliest", "latest", "offset", "timestamp")


@dataclass(frozen=True, slots=True)
class ResetGroupOffsets:
    """Commit new offsets for a group without members: each partition's ``to`` (earliest, latest, ``offset``
    within the log's bounds, or the first at or after ``timestamp_ms``), on ``topics`` (empty: every topic the
    group has committed on) and ``partitions`` of a single topic (empty: all); ``dry_run`` commits nothing."""

    group: str
    to: str
    offset: int = 0
    timestamp_ms: int = 0
    topics: tuple[str, ...] = ()
    partitions: tuple[int, ...] = ()
    dry_run: bool = False


@dataclass(frozen=True, slots=True)
class ListScramUsers:
    pass


@dataclass(frozen=True, slots=True)
class UpsertScramUser:
    """Create or replace a user's SCRAM credential; the broker salts and hashes the password, never stores it."""

    user: str
    mechanism: str
    password: str = field(repr=False)
    iterations: int


@dataclass(frozen=True, slots=True)
class DeleteScramUser:
    user: str
    mechanism: str


@dataclass(frozen=True, slots=True)
class ListClientQuotas:
    pass


@dataclass(frozen=True, slots=True)
class AlterClientQuota:
    """Set and remove quota values of one entity: (entity type, name) pairs, a None name being the type's default."""

    entity: tuple[tuple[str, str | None], ...]
    set: tuple[tuple[str, float], ...] = ()
    remove: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GetBrokerMetrics:
    """The byte and record counters and group lags of every broker's metrics registry, for the console's charts."""


CONSOLE_REQUESTS = (
    GetOverview,
    GetTopicDetails,
    AddPartitions,
    SearchRecords,
    RepublishRecords,
    ResetGroupOffsets,
    ListScramUsers,
    UpsertScramUser,
    DeleteScramUser,
    ListClientQuotas,
    AlterClientQuota,
    GetBrokerMetrics,
)

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
    | GetOverview
    | GetTopicDetails
    | AddPartitions
    | SearchRecords
    | RepublishRecords
    | ResetGroupOffsets
    | ListScramUsers
    | UpsertScramUser
    | DeleteScramUser
    | ListClientQuotas
    | AlterClientQuota
    | GetBrokerMetrics
)
