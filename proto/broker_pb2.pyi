from odradek.proto import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class IsolationLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    READ_UNCOMMITTED: _ClassVar[IsolationLevel]
    READ_COMMITTED: _ClassVar[IsolationLevel]
READ_UNCOMMITTED: IsolationLevel
READ_COMMITTED: IsolationLevel

class MetadataRequest(_message.Message):
    __slots__ = ("topics", "all_topics", "allow_auto_topic_creation")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    ALL_TOPICS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_AUTO_TOPIC_CREATION_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    all_topics: bool
    allow_auto_topic_creation: bool
    def __init__(self, topics: _Optional[_Iterable[str]] = ..., all_topics: _Optional[bool] = ..., allow_auto_topic_creation: _Optional[bool] = ...) -> None: ...

class PartitionMetadata(_message.Message):
    __slots__ = ("partition", "error", "leader", "leader_epoch", "replicas", "isr", "offline_replicas")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    OFFLINE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    partition: int
    error: _common_pb2.ErrorCode
    leader: int
    leader_epoch: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    isr: _containers.RepeatedScalarFieldContainer[int]
    offline_replicas: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, partition: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., leader: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., isr: _Optional[_Iterable[int]] = ..., offline_replicas: _Optional[_Iterable[int]] = ...) -> None: ...

class TopicMetadata(_message.Message):
    __slots__ = ("name", "error", "topic_id", "is_internal", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    IS_INTERNAL_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    error: _common_pb2.ErrorCode
    topic_id: bytes
    is_internal: bool
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionMetadata]
    def __init__(self, name: _Optional[str] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., topic_id: _Optional[bytes] = ..., is_internal: _Optional[bool] = ..., partitions: _Optional[_Iterable[_Union[PartitionMetadata, _Mapping]]] = ...) -> None: ...

class MetadataResponse(_message.Message):
    __slots__ = ("brokers", "cluster_id", "controller_id", "topics", "metadata_offset", "throttle_time_ms")
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    brokers: _containers.RepeatedCompositeFieldContainer[_common_pb2.Node]
    cluster_id: str
    controller_id: int
    topics: _containers.RepeatedCompositeFieldContainer[TopicMetadata]
    metadata_offset: int
    throttle_time_ms: int
    def __init__(self, brokers: _Optional[_Iterable[_Union[_common_pb2.Node, _Mapping]]] = ..., cluster_id: _Optional[str] = ..., controller_id: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[TopicMetadata, _Mapping]]] = ..., metadata_offset: _Optional[int] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class ProducePartition(_message.Message):
    __slots__ = ("partition", "records")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    partition: int
    records: bytes
    def __init__(self, partition: _Optional[int] = ..., records: _Optional[bytes] = ...) -> None: ...

class ProduceTopic(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[ProducePartition]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[ProducePartition, _Mapping]]] = ...) -> None: ...

class ProduceRequest(_message.Message):
    __slots__ = ("acks", "timeout_ms", "transactional_id", "topics", "client_id")
    ACKS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    acks: int
    timeout_ms: int
    transactional_id: str
    topics: _containers.RepeatedCompositeFieldContainer[ProduceTopic]
    client_id: str
    def __init__(self, acks: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., transactional_id: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[ProduceTopic, _Mapping]]] = ..., client_id: _Optional[str] = ...) -> None: ...

class ProducePartitionResponse(_message.Message):
    __slots__ = ("partition", "error", "base_offset", "log_append_time_ms", "log_start_offset", "error_message", "current_leader")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    BASE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_APPEND_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_FIELD_NUMBER: _ClassVar[int]
    partition: int
    error: _common_pb2.ErrorCode
    base_offset: int
    log_append_time_ms: int
    log_start_offset: int
    error_message: str
    current_leader: _common_pb2.LeaderHint
    def __init__(self, partition: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., base_offset: _Optional[int] = ..., log_append_time_ms: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., error_message: _Optional[str] = ..., current_leader: _Optional[_Union[_common_pb2.LeaderHint, _Mapping]] = ...) -> None: ...

class ProduceTopicResponse(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[ProducePartitionResponse]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[ProducePartitionResponse, _Mapping]]] = ...) -> None: ...

class ProduceResponse(_message.Message):
    __slots__ = ("topics", "throttle_time_ms")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[ProduceTopicResponse]
    throttle_time_ms: int
    def __init__(self, topics: _Optional[_Iterable[_Union[ProduceTopicResponse, _Mapping]]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class FetchPartition(_message.Message):
    __slots__ = ("partition", "current_leader_epoch", "fetch_offset", "last_fetched_epoch", "log_start_offset", "partition_max_bytes")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    FETCH_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_FETCHED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    PARTITION_MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    partition: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int
    def __init__(self, partition: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ..., fetch_offset: _Optional[int] = ..., last_fetched_epoch: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., partition_max_bytes: _Optional[int] = ...) -> None: ...

class FetchTopic(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[FetchPartition]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[FetchPartition, _Mapping]]] = ...) -> None: ...

class FetchRequest(_message.Message):
    __slots__ = ("replica_id", "max_wait_ms", "min_bytes", "max_bytes", "isolation_level", "topics", "client_id", "replica_epoch")
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    MIN_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    REPLICA_EPOCH_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: IsolationLevel
    topics: _containers.RepeatedCompositeFieldContainer[FetchTopic]
    client_id: str
    replica_epoch: int
    def __init__(self, replica_id: _Optional[int] = ..., max_wait_ms: _Optional[int] = ..., min_bytes: _Optional[int] = ..., max_bytes: _Optional[int] = ..., isolation_level: _Optional[_Union[IsolationLevel, str]] = ..., topics: _Optional[_Iterable[_Union[FetchTopic, _Mapping]]] = ..., client_id: _Optional[str] = ..., replica_epoch: _Optional[int] = ...) -> None: ...

class AbortedTransaction(_message.Message):
    __slots__ = ("producer_id", "first_offset")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    FIRST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    first_offset: int
    def __init__(self, producer_id: _Optional[int] = ..., first_offset: _Optional[int] = ...) -> None: ...

class FetchPartitionResponse(_message.Message):
    __slots__ = ("partition", "error", "high_watermark", "last_stable_offset", "log_start_offset", "diverging_epoch", "current_leader", "aborted_transactions", "records", "log_end_offset")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LAST_STABLE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DIVERGING_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_FIELD_NUMBER: _ClassVar[int]
    ABORTED_TRANSACTIONS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    partition: int
    error: _common_pb2.ErrorCode
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    diverging_epoch: _common_pb2.EpochEndOffset
    current_leader: _common_pb2.LeaderHint
    aborted_transactions: _containers.RepeatedCompositeFieldContainer[AbortedTransaction]
    records: bytes
    log_end_offset: int
    def __init__(self, partition: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., high_watermark: _Optional[int] = ..., last_stable_offset: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., diverging_epoch: _Optional[_Union[_common_pb2.EpochEndOffset, _Mapping]] = ..., current_leader: _Optional[_Union[_common_pb2.LeaderHint, _Mapping]] = ..., aborted_transactions: _Optional[_Iterable[_Union[AbortedTransaction, _Mapping]]] = ..., records: _Optional[bytes] = ..., log_end_offset: _Optional[int] = ...) -> None: ...

class FetchTopicResponse(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[FetchPartitionResponse]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[FetchPartitionResponse, _Mapping]]] = ...) -> None: ...

class FetchResponse(_message.Message):
    __slots__ = ("error", "throttle_time_ms", "topics")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    throttle_time_ms: int
    topics: _containers.RepeatedCompositeFieldContainer[FetchTopicResponse]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., throttle_time_ms: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[FetchTopicResponse, _Mapping]]] = ...) -> None: ...

class ListOffsetsPartition(_message.Message):
    __slots__ = ("partition", "current_leader_epoch", "timestamp")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    partition: int
    current_leader_epoch: int
    timestamp: int
    def __init__(self, partition: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ..., timestamp: _Optional[int] = ...) -> None: ...

class ListOffsetsTopic(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[ListOffsetsPartition]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[ListOffsetsPartition, _Mapping]]] = ...) -> None: ...

class ListOffsetsRequest(_message.Message):
    __slots__ = ("replica_id", "isolation_level", "topics")
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    isolation_level: IsolationLevel
    topics: _containers.RepeatedCompositeFieldContainer[ListOffsetsTopic]
    def __init__(self, replica_id: _Optional[int] = ..., isolation_level: _Optional[_Union[IsolationLevel, str]] = ..., topics: _Optional[_Iterable[_Union[ListOffsetsTopic, _Mapping]]] = ...) -> None: ...

class ListOffsetsPartitionResponse(_message.Message):
    __slots__ = ("partition", "error", "timestamp", "offset", "leader_epoch", "current_leader")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_FIELD_NUMBER: _ClassVar[int]
    partition: int
    error: _common_pb2.ErrorCode
    timestamp: int
    offset: int
    leader_epoch: int
    current_leader: _common_pb2.LeaderHint
    def __init__(self, partition: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., timestamp: _Optional[int] = ..., offset: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., current_leader: _Optional[_Union[_common_pb2.LeaderHint, _Mapping]] = ...) -> None: ...

class ListOffsetsTopicResponse(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[ListOffsetsPartitionResponse]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[ListOffsetsPartitionResponse, _Mapping]]] = ...) -> None: ...

class ListOffsetsResponse(_message.Message):
    __slots__ = ("throttle_time_ms", "topics")
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    throttle_time_ms: int
    topics: _containers.RepeatedCompositeFieldContainer[ListOffsetsTopicResponse]
    def __init__(self, throttle_time_ms: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[ListOffsetsTopicResponse, _Mapping]]] = ...) -> None: ...

class InitProducerIdRequest(_message.Message):
    __slots__ = ("transactional_id", "transaction_timeout_ms", "producer_id", "producer_epoch")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    transaction_timeout_ms: int
    producer_id: int
    producer_epoch: int
    def __init__(self, transactional_id: _Optional[str] = ..., transaction_timeout_ms: _Optional[int] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ...) -> None: ...

class InitProducerIdResponse(_message.Message):
    __slots__ = ("error", "producer_id", "producer_epoch", "throttle_time_ms")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    producer_id: int
    producer_epoch: int
    throttle_time_ms: int
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class ReplicaLogInfoTopic(_message.Message):
    __slots__ = ("name", "topic_id", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    topic_id: bytes
    partitions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[bytes] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...

class ReplicaLogInfoRequest(_message.Message):
    __slots__ = ("broker_id", "topics")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    topics: _containers.RepeatedCompositeFieldContainer[ReplicaLogInfoTopic]
    def __init__(self, broker_id: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[ReplicaLogInfoTopic, _Mapping]]] = ...) -> None: ...

class ReplicaLogInfoPartition(_message.Message):
    __slots__ = ("partition", "error", "last_leader_epoch", "log_end_offset")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LAST_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    partition: int
    error: _common_pb2.ErrorCode
    last_leader_epoch: int
    log_end_offset: int
    def __init__(self, partition: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., last_leader_epoch: _Optional[int] = ..., log_end_offset: _Optional[int] = ...) -> None: ...

class ReplicaLogInfoTopicResponse(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[ReplicaLogInfoPartition]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[ReplicaLogInfoPartition, _Mapping]]] = ...) -> None: ...

class ReplicaLogInfoResponse(_message.Message):
    __slots__ = ("error", "broker_epoch", "topics")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    broker_epoch: int
    topics: _containers.RepeatedCompositeFieldContainer[ReplicaLogInfoTopicResponse]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., broker_epoch: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[ReplicaLogInfoTopicResponse, _Mapping]]] = ...) -> None: ...

class DescribeLogDirsRequest(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, topics: _Optional[_Iterable[str]] = ...) -> None: ...

class LogDirReplica(_message.Message):
    __slots__ = ("topic", "partition", "size_bytes", "offset_lag", "log_end_offset", "is_leader")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    OFFSET_LAG_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    IS_LEADER_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    size_bytes: int
    offset_lag: int
    log_end_offset: int
    is_leader: bool
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., size_bytes: _Optional[int] = ..., offset_lag: _Optional[int] = ..., log_end_offset: _Optional[int] = ..., is_leader: _Optional[bool] = ...) -> None: ...

class LogDirDescription(_message.Message):
    __slots__ = ("path", "error", "total_bytes", "free_bytes", "used_bytes", "replicas")
    PATH_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    FREE_BYTES_FIELD_NUMBER: _ClassVar[int]
    USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    path: str
    error: _common_pb2.ErrorCode
    total_bytes: int
    free_bytes: int
    used_bytes: int
    replicas: _containers.RepeatedCompositeFieldContainer[LogDirReplica]
    def __init__(self, path: _Optional[str] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., total_bytes: _Optional[int] = ..., free_bytes: _Optional[int] = ..., used_bytes: _Optional[int] = ..., replicas: _Optional[_Iterable[_Union[LogDirReplica, _Mapping]]] = ...) -> None: ...

class DescribeLogDirsResponse(_message.Message):
    __slots__ = ("error", "broker_id", "dirs")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    DIRS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    broker_id: int
    dirs: _containers.RepeatedCompositeFieldContainer[LogDirDescription]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., broker_id: _Optional[int] = ..., dirs: _Optional[_Iterable[_Union[LogDirDescription, _Mapping]]] = ...) -> None: ...
