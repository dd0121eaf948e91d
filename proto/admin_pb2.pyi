from odradek.proto import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ElectionType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PREFERRED: _ClassVar[ElectionType]
    UNCLEAN: _ClassVar[ElectionType]

class ConfigSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONFIG_SOURCE_UNKNOWN: _ClassVar[ConfigSource]
    DEFAULT_CONFIG: _ClassVar[ConfigSource]
    STATIC_BROKER_CONFIG: _ClassVar[ConfigSource]
    TOPIC_CONFIG: _ClassVar[ConfigSource]
PREFERRED: ElectionType
UNCLEAN: ElectionType
CONFIG_SOURCE_UNKNOWN: ConfigSource
DEFAULT_CONFIG: ConfigSource
STATIC_BROKER_CONFIG: ConfigSource
TOPIC_CONFIG: ConfigSource

class BrokerInfo(_message.Message):
    __slots__ = ("node_id", "host", "port", "rack", "fenced", "epoch", "in_controlled_shutdown")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    FENCED_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    IN_CONTROLLED_SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    host: str
    port: int
    rack: str
    fenced: bool
    epoch: int
    in_controlled_shutdown: bool
    def __init__(self, node_id: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., rack: _Optional[str] = ..., fenced: _Optional[bool] = ..., epoch: _Optional[int] = ..., in_controlled_shutdown: _Optional[bool] = ...) -> None: ...

class DescribeClusterRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeClusterResponse(_message.Message):
    __slots__ = ("error", "cluster_id", "controller_id", "brokers", "controllers")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLERS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    cluster_id: str
    controller_id: int
    brokers: _containers.RepeatedCompositeFieldContainer[BrokerInfo]
    controllers: _containers.RepeatedCompositeFieldContainer[_common_pb2.Node]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., cluster_id: _Optional[str] = ..., controller_id: _Optional[int] = ..., brokers: _Optional[_Iterable[_Union[BrokerInfo, _Mapping]]] = ..., controllers: _Optional[_Iterable[_Union[_common_pb2.Node, _Mapping]]] = ...) -> None: ...

class DescribeQuorumRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReplicaState(_message.Message):
    __slots__ = ("node_id", "log_end_offset", "last_fetch_timestamp_ms", "last_caught_up_timestamp_ms")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_FETCH_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_CAUGHT_UP_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    log_end_offset: int
    last_fetch_timestamp_ms: int
    last_caught_up_timestamp_ms: int
    def __init__(self, node_id: _Optional[int] = ..., log_end_offset: _Optional[int] = ..., last_fetch_timestamp_ms: _Optional[int] = ..., last_caught_up_timestamp_ms: _Optional[int] = ...) -> None: ...

class DescribeQuorumResponse(_message.Message):
    __slots__ = ("error", "leader_id", "leader_epoch", "high_watermark", "voters", "observers")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    OBSERVERS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: _containers.RepeatedCompositeFieldContainer[ReplicaState]
    observers: _containers.RepeatedCompositeFieldContainer[ReplicaState]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., high_watermark: _Optional[int] = ..., voters: _Optional[_Iterable[_Union[ReplicaState, _Mapping]]] = ..., observers: _Optional[_Iterable[_Union[ReplicaState, _Mapping]]] = ...) -> None: ...

class ConfigEntry(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class CreatableTopic(_message.Message):
    __slots__ = ("name", "num_partitions", "replication_factor", "configs", "assignments")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    num_partitions: int
    replication_factor: int
    configs: _containers.RepeatedCompositeFieldContainer[ConfigEntry]
    assignments: _containers.RepeatedCompositeFieldContainer[ReplicaList]
    def __init__(self, name: _Optional[str] = ..., num_partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ..., configs: _Optional[_Iterable[_Union[ConfigEntry, _Mapping]]] = ..., assignments: _Optional[_Iterable[_Union[ReplicaList, _Mapping]]] = ...) -> None: ...

class ReplicaList(_message.Message):
    __slots__ = ("replicas",)
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    replicas: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, replicas: _Optional[_Iterable[int]] = ...) -> None: ...

class CreateTopicsRequest(_message.Message):
    __slots__ = ("topics", "timeout_ms", "validate_only")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[CreatableTopic]
    timeout_ms: int
    validate_only: bool
    def __init__(self, topics: _Optional[_Iterable[_Union[CreatableTopic, _Mapping]]] = ..., timeout_ms: _Optional[int] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class TopicResult(_message.Message):
    __slots__ = ("name", "error", "error_message", "topic_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    error: _common_pb2.ErrorCode
    error_message: str
    topic_id: bytes
    def __init__(self, name: _Optional[str] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., topic_id: _Optional[bytes] = ...) -> None: ...

class CreateTopicsResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "topics")
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    topics: _containers.RepeatedCompositeFieldContainer[TopicResult]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[TopicResult, _Mapping]]] = ...) -> None: ...

class DeleteTopicsRequest(_message.Message):
    __slots__ = ("names", "timeout_ms")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    timeout_ms: int
    def __init__(self, names: _Optional[_Iterable[str]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class DeleteTopicsResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "topics")
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    topics: _containers.RepeatedCompositeFieldContainer[TopicResult]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[TopicResult, _Mapping]]] = ...) -> None: ...

class DescribeTopicsRequest(_message.Message):
    __slots__ = ("names", "include_internal", "include_offsets")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_INTERNAL_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    include_internal: bool
    include_offsets: bool
    def __init__(self, names: _Optional[_Iterable[str]] = ..., include_internal: _Optional[bool] = ..., include_offsets: _Optional[bool] = ...) -> None: ...

class PartitionDescription(_message.Message):
    __slots__ = ("partition", "leader", "leader_epoch", "partition_epoch", "replicas", "isr", "eligible_leader_replicas", "log_start_offset", "high_watermark", "under_replicated", "adding_replicas", "removing_replicas", "error", "last_known_elr", "last_known_leader")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    ELIGIBLE_LEADER_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    UNDER_REPLICATED_FIELD_NUMBER: _ClassVar[int]
    ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LAST_KNOWN_ELR_FIELD_NUMBER: _ClassVar[int]
    LAST_KNOWN_LEADER_FIELD_NUMBER: _ClassVar[int]
    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    isr: _containers.RepeatedScalarFieldContainer[int]
    eligible_leader_replicas: _containers.RepeatedScalarFieldContainer[int]
    log_start_offset: int
    high_watermark: int
    under_replicated: bool
    adding_replicas: _containers.RepeatedScalarFieldContainer[int]
    removing_replicas: _containers.RepeatedScalarFieldContainer[int]
    error: _common_pb2.ErrorCode
    last_known_elr: _containers.RepeatedScalarFieldContainer[int]
    last_known_leader: int
    def __init__(self, partition: _Optional[int] = ..., leader: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., partition_epoch: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., isr: _Optional[_Iterable[int]] = ..., eligible_leader_replicas: _Optional[_Iterable[int]] = ..., log_start_offset: _Optional[int] = ..., high_watermark: _Optional[int] = ..., under_replicated: _Optional[bool] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., last_known_elr: _Optional[_Iterable[int]] = ..., last_known_leader: _Optional[int] = ...) -> None: ...

class TopicDescription(_message.Message):
    __slots__ = ("name", "error", "topic_id", "is_internal", "configs", "partitions", "error_message")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    IS_INTERNAL_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    name: str
    error: _common_pb2.ErrorCode
    topic_id: bytes
    is_internal: bool
    configs: _containers.RepeatedCompositeFieldContainer[ConfigEntry]
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionDescription]
    error_message: str
    def __init__(self, name: _Optional[str] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., topic_id: _Optional[bytes] = ..., is_internal: _Optional[bool] = ..., configs: _Optional[_Iterable[_Union[ConfigEntry, _Mapping]]] = ..., partitions: _Optional[_Iterable[_Union[PartitionDescription, _Mapping]]] = ..., error_message: _Optional[str] = ...) -> None: ...

class DescribeTopicsResponse(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[TopicDescription]
    def __init__(self, topics: _Optional[_Iterable[_Union[TopicDescription, _Mapping]]] = ...) -> None: ...

class ElectLeadersRequest(_message.Message):
    __slots__ = ("election_type", "partitions")
    ELECTION_TYPE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    election_type: ElectionType
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionRef]
    def __init__(self, election_type: _Optional[_Union[ElectionType, str]] = ..., partitions: _Optional[_Iterable[_Union[PartitionRef, _Mapping]]] = ...) -> None: ...

class PartitionRef(_message.Message):
    __slots__ = ("topic", "partition")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ...) -> None: ...

class ElectionResult(_message.Message):
    __slots__ = ("topic", "partition", "error", "error_message", "leader")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    error: _common_pb2.ErrorCode
    error_message: str
    leader: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., leader: _Optional[int] = ...) -> None: ...

class ElectLeadersResponse(_message.Message):
    __slots__ = ("error", "results")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    results: _containers.RepeatedCompositeFieldContainer[ElectionResult]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., results: _Optional[_Iterable[_Union[ElectionResult, _Mapping]]] = ...) -> None: ...

class Reassignment(_message.Message):
    __slots__ = ("topic", "partition", "replicas")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ...) -> None: ...

class AlterPartitionReassignmentsRequest(_message.Message):
    __slots__ = ("reassignments",)
    REASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    reassignments: _containers.RepeatedCompositeFieldContainer[Reassignment]
    def __init__(self, reassignments: _Optional[_Iterable[_Union[Reassignment, _Mapping]]] = ...) -> None: ...

class AlterPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("error", "results")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    results: _containers.RepeatedCompositeFieldContainer[ElectionResult]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., results: _Optional[_Iterable[_Union[ElectionResult, _Mapping]]] = ...) -> None: ...

class DescribeConfigsRequest(_message.Message):
    __slots__ = ("topics", "config_names")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_NAMES_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    config_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, topics: _Optional[_Iterable[str]] = ..., config_names: _Optional[_Iterable[str]] = ...) -> None: ...

class DescribedConfig(_message.Message):
    __slots__ = ("name", "value", "source", "read_only", "sensitive")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    SENSITIVE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    source: ConfigSource
    read_only: bool
    sensitive: bool
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., source: _Optional[_Union[ConfigSource, str]] = ..., read_only: _Optional[bool] = ..., sensitive: _Optional[bool] = ...) -> None: ...

class TopicConfigs(_message.Message):
    __slots__ = ("topic", "error", "error_message", "configs")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    error: _common_pb2.ErrorCode
    error_message: str
    configs: _containers.RepeatedCompositeFieldContainer[DescribedConfig]
    def __init__(self, topic: _Optional[str] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., configs: _Optional[_Iterable[_Union[DescribedConfig, _Mapping]]] = ...) -> None: ...

class DescribeConfigsResponse(_message.Message):
    __slots__ = ("error", "node_id", "topics")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    node_id: int
    topics: _containers.RepeatedCompositeFieldContainer[TopicConfigs]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., node_id: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[TopicConfigs, _Mapping]]] = ...) -> None: ...
