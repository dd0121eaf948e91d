from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class ErrorCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NONE: _ClassVar[ErrorCode]
    UNKNOWN_SERVER_ERROR: _ClassVar[ErrorCode]
    OFFSET_OUT_OF_RANGE: _ClassVar[ErrorCode]
    CORRUPT_MESSAGE: _ClassVar[ErrorCode]
    UNKNOWN_TOPIC_OR_PARTITION: _ClassVar[ErrorCode]
    INVALID_FETCH_SIZE: _ClassVar[ErrorCode]
    LEADER_NOT_AVAILABLE: _ClassVar[ErrorCode]
    NOT_LEADER_OR_FOLLOWER: _ClassVar[ErrorCode]
    REQUEST_TIMED_OUT: _ClassVar[ErrorCode]
    BROKER_NOT_AVAILABLE: _ClassVar[ErrorCode]
    REPLICA_NOT_AVAILABLE: _ClassVar[ErrorCode]
    MESSAGE_TOO_LARGE: _ClassVar[ErrorCode]
    STALE_CONTROLLER_EPOCH: _ClassVar[ErrorCode]
    NETWORK_EXCEPTION: _ClassVar[ErrorCode]
    COORDINATOR_LOAD_IN_PROGRESS: _ClassVar[ErrorCode]
    COORDINATOR_NOT_AVAILABLE: _ClassVar[ErrorCode]
    NOT_COORDINATOR: _ClassVar[ErrorCode]
    INVALID_TOPIC_EXCEPTION: _ClassVar[ErrorCode]
    RECORD_LIST_TOO_LARGE: _ClassVar[ErrorCode]
    NOT_ENOUGH_REPLICAS: _ClassVar[ErrorCode]
    NOT_ENOUGH_REPLICAS_AFTER_APPEND: _ClassVar[ErrorCode]
    INVALID_REQUIRED_ACKS: _ClassVar[ErrorCode]
    ILLEGAL_GENERATION: _ClassVar[ErrorCode]
    INCONSISTENT_GROUP_PROTOCOL: _ClassVar[ErrorCode]
    INVALID_GROUP_ID: _ClassVar[ErrorCode]
    UNKNOWN_MEMBER_ID: _ClassVar[ErrorCode]
    INVALID_SESSION_TIMEOUT: _ClassVar[ErrorCode]
    REBALANCE_IN_PROGRESS: _ClassVar[ErrorCode]
    INVALID_COMMIT_OFFSET_SIZE: _ClassVar[ErrorCode]
    INVALID_TIMESTAMP: _ClassVar[ErrorCode]
    UNSUPPORTED_VERSION: _ClassVar[ErrorCode]
    TOPIC_ALREADY_EXISTS: _ClassVar[ErrorCode]
    INVALID_PARTITIONS: _ClassVar[ErrorCode]
    INVALID_REPLICATION_FACTOR: _ClassVar[ErrorCode]
    INVALID_REPLICA_ASSIGNMENT: _ClassVar[ErrorCode]
    INVALID_CONFIG: _ClassVar[ErrorCode]
    NOT_CONTROLLER: _ClassVar[ErrorCode]
    INVALID_REQUEST: _ClassVar[ErrorCode]
    POLICY_VIOLATION: _ClassVar[ErrorCode]
    OUT_OF_ORDER_SEQUENCE_NUMBER: _ClassVar[ErrorCode]
    DUPLICATE_SEQUENCE_NUMBER: _ClassVar[ErrorCode]
    INVALID_PRODUCER_EPOCH: _ClassVar[ErrorCode]
    INVALID_TXN_STATE: _ClassVar[ErrorCode]
    INVALID_PRODUCER_ID_MAPPING: _ClassVar[ErrorCode]
    INVALID_TRANSACTION_TIMEOUT: _ClassVar[ErrorCode]
    CONCURRENT_TRANSACTIONS: _ClassVar[ErrorCode]
    TRANSACTION_COORDINATOR_FENCED: _ClassVar[ErrorCode]
    KAFKA_STORAGE_ERROR: _ClassVar[ErrorCode]
    FENCED_LEADER_EPOCH: _ClassVar[ErrorCode]
    UNKNOWN_LEADER_EPOCH: _ClassVar[ErrorCode]
    STALE_BROKER_EPOCH: _ClassVar[ErrorCode]
    OFFSET_NOT_AVAILABLE: _ClassVar[ErrorCode]
    PREFERRED_LEADER_NOT_AVAILABLE: _ClassVar[ErrorCode]
    FENCED_INSTANCE_ID: _ClassVar[ErrorCode]
    ELIGIBLE_LEADERS_NOT_AVAILABLE: _ClassVar[ErrorCode]
    ELECTION_NOT_NEEDED: _ClassVar[ErrorCode]
    NO_REASSIGNMENT_IN_PROGRESS: _ClassVar[ErrorCode]
    INVALID_RECORD: _ClassVar[ErrorCode]
    UNSTABLE_OFFSET_COMMIT: _ClassVar[ErrorCode]
    THROTTLING_QUOTA_EXCEEDED: _ClassVar[ErrorCode]
    PRODUCER_FENCED: _ClassVar[ErrorCode]
    INCONSISTENT_VOTER_SET: _ClassVar[ErrorCode]
    INVALID_UPDATE_VERSION: _ClassVar[ErrorCode]
    DUPLICATE_BROKER_REGISTRATION: _ClassVar[ErrorCode]
    BROKER_ID_NOT_REGISTERED: _ClassVar[ErrorCode]
    INCONSISTENT_CLUSTER_ID: _ClassVar[ErrorCode]
    INELIGIBLE_REPLICA: _ClassVar[ErrorCode]
    NEW_LEADER_ELECTED: _ClassVar[ErrorCode]
NONE: ErrorCode
UNKNOWN_SERVER_ERROR: ErrorCode
OFFSET_OUT_OF_RANGE: ErrorCode
CORRUPT_MESSAGE: ErrorCode
UNKNOWN_TOPIC_OR_PARTITION: ErrorCode
INVALID_FETCH_SIZE: ErrorCode
LEADER_NOT_AVAILABLE: ErrorCode
NOT_LEADER_OR_FOLLOWER: ErrorCode
REQUEST_TIMED_OUT: ErrorCode
BROKER_NOT_AVAILABLE: ErrorCode
REPLICA_NOT_AVAILABLE: ErrorCode
MESSAGE_TOO_LARGE: ErrorCode
STALE_CONTROLLER_EPOCH: ErrorCode
NETWORK_EXCEPTION: ErrorCode
COORDINATOR_LOAD_IN_PROGRESS: ErrorCode
COORDINATOR_NOT_AVAILABLE: ErrorCode
NOT_COORDINATOR: ErrorCode
INVALID_TOPIC_EXCEPTION: ErrorCode
RECORD_LIST_TOO_LARGE: ErrorCode
NOT_ENOUGH_REPLICAS: ErrorCode
NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode
INVALID_REQUIRED_ACKS: ErrorCode
ILLEGAL_GENERATION: ErrorCode
INCONSISTENT_GROUP_PROTOCOL: ErrorCode
INVALID_GROUP_ID: ErrorCode
UNKNOWN_MEMBER_ID: ErrorCode
INVALID_SESSION_TIMEOUT: ErrorCode
REBALANCE_IN_PROGRESS: ErrorCode
INVALID_COMMIT_OFFSET_SIZE: ErrorCode
INVALID_TIMESTAMP: ErrorCode
UNSUPPORTED_VERSION: ErrorCode
TOPIC_ALREADY_EXISTS: ErrorCode
INVALID_PARTITIONS: ErrorCode
INVALID_REPLICATION_FACTOR: ErrorCode
INVALID_REPLICA_ASSIGNMENT: ErrorCode
INVALID_CONFIG: ErrorCode
NOT_CONTROLLER: ErrorCode
INVALID_REQUEST: ErrorCode
POLICY_VIOLATION: ErrorCode
OUT_OF_ORDER_SEQUENCE_NUMBER: ErrorCode
DUPLICATE_SEQUENCE_NUMBER: ErrorCode
INVALID_PRODUCER_EPOCH: ErrorCode
INVALID_TXN_STATE: ErrorCode
INVALID_PRODUCER_ID_MAPPING: ErrorCode
INVALID_TRANSACTION_TIMEOUT: ErrorCode
CONCURRENT_TRANSACTIONS: ErrorCode
TRANSACTION_COORDINATOR_FENCED: ErrorCode
KAFKA_STORAGE_ERROR: ErrorCode
FENCED_LEADER_EPOCH: ErrorCode
UNKNOWN_LEADER_EPOCH: ErrorCode
STALE_BROKER_EPOCH: ErrorCode
OFFSET_NOT_AVAILABLE: ErrorCode
PREFERRED_LEADER_NOT_AVAILABLE: ErrorCode
FENCED_INSTANCE_ID: ErrorCode
ELIGIBLE_LEADERS_NOT_AVAILABLE: ErrorCode
ELECTION_NOT_NEEDED: ErrorCode
NO_REASSIGNMENT_IN_PROGRESS: ErrorCode
INVALID_RECORD: ErrorCode
UNSTABLE_OFFSET_COMMIT: ErrorCode
THROTTLING_QUOTA_EXCEEDED: ErrorCode
PRODUCER_FENCED: ErrorCode
INCONSISTENT_VOTER_SET: ErrorCode
INVALID_UPDATE_VERSION: ErrorCode
DUPLICATE_BROKER_REGISTRATION: ErrorCode
BROKER_ID_NOT_REGISTERED: ErrorCode
INCONSISTENT_CLUSTER_ID: ErrorCode
INELIGIBLE_REPLICA: ErrorCode
NEW_LEADER_ELECTED: ErrorCode

class Node(_message.Message):
    __slots__ = ("node_id", "host", "port", "rack")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    host: str
    port: int
    rack: str
    def __init__(self, node_id: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., rack: _Optional[str] = ...) -> None: ...

class EpochEndOffset(_message.Message):
    __slots__ = ("epoch", "end_offset")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    end_offset: int
    def __init__(self, epoch: _Optional[int] = ..., end_offset: _Optional[int] = ...) -> None: ...

class LeaderHint(_message.Message):
    __slots__ = ("leader_id", "leader_epoch")
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    leader_id: int
    leader_epoch: int
    def __init__(self, leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ...) -> None: ...
