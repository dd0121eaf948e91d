from odradek.proto import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ResourceType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESOURCE_UNKNOWN: _ClassVar[ResourceType]
    TOPIC: _ClassVar[ResourceType]
    BROKER: _ClassVar[ResourceType]

class AlterOp(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SET: _ClassVar[AlterOp]
    DELETE: _ClassVar[AlterOp]

class ElectionType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PREFERRED: _ClassVar[ElectionType]
    UNCLEAN: _ClassVar[ElectionType]
RESOURCE_UNKNOWN: ResourceType
TOPIC: ResourceType
BROKER: ResourceType
SET: AlterOp
DELETE: AlterOp
PREFERRED: ElectionType
UNCLEAN: ElectionType

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

class ConfigResource(_message.Message):
    __slots__ = ("type", "name")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    type: ResourceType
    name: str
    def __init__(self, type: _Optional[_Union[ResourceType, str]] = ..., name: _Optional[str] = ...) -> None: ...

class DescribeConfigsRequest(_message.Message):
    __slots__ = ("resources",)
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[ConfigResource]
    def __init__(self, resources: _Optional[_Iterable[_Union[ConfigResource, _Mapping]]] = ...) -> None: ...

class ResourceConfigs(_message.Message):
    __slots__ = ("resource", "error", "error_message", "configs")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    resource: ConfigResource
    error: _common_pb2.ErrorCode
    error_message: str
    configs: _containers.RepeatedCompositeFieldContainer[ConfigEntry]
    def __init__(self, resource: _Optional[_Union[ConfigResource, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., configs: _Optional[_Iterable[_Union[ConfigEntry, _Mapping]]] = ...) -> None: ...

class DescribeConfigsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ResourceConfigs]
    def __init__(self, results: _Optional[_Iterable[_Union[ResourceConfigs, _Mapping]]] = ...) -> None: ...

class AlterableConfig(_message.Message):
    __slots__ = ("name", "value", "op")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    op: AlterOp
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., op: _Optional[_Union[AlterOp, str]] = ...) -> None: ...

class AlterConfigsResource(_message.Message):
    __slots__ = ("resource", "configs")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    resource: ConfigResource
    configs: _containers.RepeatedCompositeFieldContainer[AlterableConfig]
    def __init__(self, resource: _Optional[_Union[ConfigResource, _Mapping]] = ..., configs: _Optional[_Iterable[_Union[AlterableConfig, _Mapping]]] = ...) -> None: ...

class AlterConfigsRequest(_message.Message):
    __slots__ = ("resources", "validate_only")
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[AlterConfigsResource]
    validate_only: bool
    def __init__(self, resources: _Optional[_Iterable[_Union[AlterConfigsResource, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class AlterConfigsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ResourceConfigs]
    def __init__(self, results: _Optional[_Iterable[_Union[ResourceConfigs, _Mapping]]] = ...) -> None: ...

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

class QuotaEntity(_message.Message):
    __slots__ = ("user", "user_default", "client_id", "client_id_default", "has_user", "has_client_id")
    USER_FIELD_NUMBER: _ClassVar[int]
    USER_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    HAS_USER_FIELD_NUMBER: _ClassVar[int]
    HAS_CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    user: str
    user_default: bool
    client_id: str
    client_id_default: bool
    has_user: bool
    has_client_id: bool
    def __init__(self, user: _Optional[str] = ..., user_default: _Optional[bool] = ..., client_id: _Optional[str] = ..., client_id_default: _Optional[bool] = ..., has_user: _Optional[bool] = ..., has_client_id: _Optional[bool] = ...) -> None: ...

class QuotaValue(_message.Message):
    __slots__ = ("key", "value", "remove")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: float
    remove: bool
    def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ..., remove: _Optional[bool] = ...) -> None: ...

class DescribeClientQuotasRequest(_message.Message):
    __slots__ = ("entities",)
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    entities: _containers.RepeatedCompositeFieldContainer[QuotaEntity]
    def __init__(self, entities: _Optional[_Iterable[_Union[QuotaEntity, _Mapping]]] = ...) -> None: ...

class ClientQuota(_message.Message):
    __slots__ = ("entity", "values")
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    entity: QuotaEntity
    values: _containers.RepeatedCompositeFieldContainer[QuotaValue]
    def __init__(self, entity: _Optional[_Union[QuotaEntity, _Mapping]] = ..., values: _Optional[_Iterable[_Union[QuotaValue, _Mapping]]] = ...) -> None: ...

class DescribeClientQuotasResponse(_message.Message):
    __slots__ = ("error", "quotas")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    QUOTAS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    quotas: _containers.RepeatedCompositeFieldContainer[ClientQuota]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., quotas: _Optional[_Iterable[_Union[ClientQuota, _Mapping]]] = ...) -> None: ...

class AlterClientQuotasRequest(_message.Message):
    __slots__ = ("alterations", "validate_only")
    ALTERATIONS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    alterations: _containers.RepeatedCompositeFieldContainer[ClientQuota]
    validate_only: bool
    def __init__(self, alterations: _Optional[_Iterable[_Union[ClientQuota, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class AlterClientQuotasResponse(_message.Message):
    __slots__ = ("error", "error_message")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    error_message: str
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class ListGroupsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GroupListing(_message.Message):
    __slots__ = ("group_id", "state", "protocol_type", "coordinator")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    state: str
    protocol_type: str
    coordinator: int
    def __init__(self, group_id: _Optional[str] = ..., state: _Optional[str] = ..., protocol_type: _Optional[str] = ..., coordinator: _Optional[int] = ...) -> None: ...

class ListGroupsResponse(_message.Message):
    __slots__ = ("error", "groups")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    groups: _containers.RepeatedCompositeFieldContainer[GroupListing]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., groups: _Optional[_Iterable[_Union[GroupListing, _Mapping]]] = ...) -> None: ...

class DescribeGroupsRequest(_message.Message):
    __slots__ = ("group_ids",)
    GROUP_IDS_FIELD_NUMBER: _ClassVar[int]
    group_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, group_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class GroupMember(_message.Message):
    __slots__ = ("member_id", "group_instance_id", "client_id", "host", "assignment")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    group_instance_id: str
    client_id: str
    host: str
    assignment: bytes
    def __init__(self, member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., client_id: _Optional[str] = ..., host: _Optional[str] = ..., assignment: _Optional[bytes] = ...) -> None: ...

class GroupDescription(_message.Message):
    __slots__ = ("group_id", "error", "state", "protocol_type", "protocol", "generation_id", "members", "coordinator")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    error: _common_pb2.ErrorCode
    state: str
    protocol_type: str
    protocol: str
    generation_id: int
    members: _containers.RepeatedCompositeFieldContainer[GroupMember]
    coordinator: int
    def __init__(self, group_id: _Optional[str] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., state: _Optional[str] = ..., protocol_type: _Optional[str] = ..., protocol: _Optional[str] = ..., generation_id: _Optional[int] = ..., members: _Optional[_Iterable[_Union[GroupMember, _Mapping]]] = ..., coordinator: _Optional[int] = ...) -> None: ...

class DescribeGroupsResponse(_message.Message):
    __slots__ = ("groups",)
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[GroupDescription]
    def __init__(self, groups: _Optional[_Iterable[_Union[GroupDescription, _Mapping]]] = ...) -> None: ...
