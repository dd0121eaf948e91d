from odradek.proto import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class VoteRequest(_message.Message):
    __slots__ = ("cluster_id", "candidate_id", "candidate_epoch", "last_offset_epoch", "last_offset", "pre_vote", "voter_id")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_ID_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LAST_OFFSET_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LAST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    PRE_VOTE_FIELD_NUMBER: _ClassVar[int]
    VOTER_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    candidate_id: int
    candidate_epoch: int
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool
    voter_id: int
    def __init__(self, cluster_id: _Optional[str] = ..., candidate_id: _Optional[int] = ..., candidate_epoch: _Optional[int] = ..., last_offset_epoch: _Optional[int] = ..., last_offset: _Optional[int] = ..., pre_vote: _Optional[bool] = ..., voter_id: _Optional[int] = ...) -> None: ...

class VoteResponse(_message.Message):
    __slots__ = ("error", "leader_id", "leader_epoch", "vote_granted", "voter_id")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    VOTE_GRANTED_FIELD_NUMBER: _ClassVar[int]
    VOTER_ID_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    leader_id: int
    leader_epoch: int
    vote_granted: bool
    voter_id: int
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., vote_granted: _Optional[bool] = ..., voter_id: _Optional[int] = ...) -> None: ...

class BeginQuorumEpochRequest(_message.Message):
    __slots__ = ("cluster_id", "leader_id", "leader_epoch", "voter_id")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    VOTER_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    leader_id: int
    leader_epoch: int
    voter_id: int
    def __init__(self, cluster_id: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., voter_id: _Optional[int] = ...) -> None: ...

class BeginQuorumEpochResponse(_message.Message):
    __slots__ = ("error", "leader_id", "leader_epoch")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    leader_id: int
    leader_epoch: int
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ...) -> None: ...

class EndQuorumEpochRequest(_message.Message):
    __slots__ = ("cluster_id", "leader_id", "leader_epoch", "preferred_successors")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PREFERRED_SUCCESSORS_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    leader_id: int
    leader_epoch: int
    preferred_successors: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, cluster_id: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., preferred_successors: _Optional[_Iterable[int]] = ...) -> None: ...

class EndQuorumEpochResponse(_message.Message):
    __slots__ = ("error", "leader_id", "leader_epoch")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    leader_id: int
    leader_epoch: int
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ...) -> None: ...

class RaftEntry(_message.Message):
    __slots__ = ("offset", "epoch", "data", "control")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    CONTROL_FIELD_NUMBER: _ClassVar[int]
    offset: int
    epoch: int
    data: bytes
    control: bool
    def __init__(self, offset: _Optional[int] = ..., epoch: _Optional[int] = ..., data: _Optional[bytes] = ..., control: _Optional[bool] = ...) -> None: ...

class SnapshotId(_message.Message):
    __slots__ = ("end_offset", "epoch")
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    end_offset: int
    epoch: int
    def __init__(self, end_offset: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class RaftFetchRequest(_message.Message):
    __slots__ = ("cluster_id", "replica_id", "leader_epoch", "fetch_offset", "last_fetched_epoch", "max_wait_ms", "max_bytes", "high_watermark")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    FETCH_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_FETCHED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    replica_id: int
    leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int
    max_bytes: int
    high_watermark: int
    def __init__(self, cluster_id: _Optional[str] = ..., replica_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., fetch_offset: _Optional[int] = ..., last_fetched_epoch: _Optional[int] = ..., max_wait_ms: _Optional[int] = ..., max_bytes: _Optional[int] = ..., high_watermark: _Optional[int] = ...) -> None: ...

class RaftFetchResponse(_message.Message):
    __slots__ = ("error", "leader_id", "leader_epoch", "high_watermark", "log_start_offset", "diverging_epoch", "snapshot_id", "entries")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DIVERGING_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    leader_id: int
    leader_epoch: int
    high_watermark: int
    log_start_offset: int
    diverging_epoch: _common_pb2.EpochEndOffset
    snapshot_id: SnapshotId
    entries: _containers.RepeatedCompositeFieldContainer[RaftEntry]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., high_watermark: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., diverging_epoch: _Optional[_Union[_common_pb2.EpochEndOffset, _Mapping]] = ..., snapshot_id: _Optional[_Union[SnapshotId, _Mapping]] = ..., entries: _Optional[_Iterable[_Union[RaftEntry, _Mapping]]] = ...) -> None: ...

class FetchSnapshotRequest(_message.Message):
    __slots__ = ("cluster_id", "replica_id", "leader_epoch", "snapshot_id", "position", "max_bytes")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    replica_id: int
    leader_epoch: int
    snapshot_id: SnapshotId
    position: int
    max_bytes: int
    def __init__(self, cluster_id: _Optional[str] = ..., replica_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., snapshot_id: _Optional[_Union[SnapshotId, _Mapping]] = ..., position: _Optional[int] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class FetchSnapshotResponse(_message.Message):
    __slots__ = ("error", "leader_id", "leader_epoch", "snapshot_id", "size", "position", "data")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    leader_id: int
    leader_epoch: int
    snapshot_id: SnapshotId
    size: int
    position: int
    data: bytes
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., snapshot_id: _Optional[_Union[SnapshotId, _Mapping]] = ..., size: _Optional[int] = ..., position: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...
