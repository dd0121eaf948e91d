"""The cluster and its metadata quorum: DescribeCluster (answered from the node's own image) and DescribeQuorum (as
the active controller knows the quorum)."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.client.errors import ErrorCode

NONE = int(ErrorCode.NONE)


@dataclass(frozen=True, slots=True)
class DescribeCluster:
    pass


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str  # the broker listener's (gRPC) address
    port: int
    rack: str = ""
    fenced: bool = False
    epoch: int = 0  # the metadata offset of its latest registration
    in_controlled_shutdown: bool = False
    listeners: tuple[tuple[str, str, int], ...] = ()  # its other advertised listeners: (name, host, port)


@dataclass(frozen=True, slots=True)
class ControllerNode:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class DescribeClusterAnswer:
    error: int = NONE
    cluster_id: str = ""
    controller_id: int = -1  # the active controller (the Raft leader), -1 when unknown
    brokers: tuple[BrokerInfo, ...] = ()
    controllers: tuple[ControllerNode, ...] = ()  # the voters


@dataclass(frozen=True, slots=True)
class DescribeQuorum:
    pass


@dataclass(frozen=True, slots=True)
class ReplicaState:
    node_id: int
    log_end_offset: int
    last_fetch_timestamp_ms: int  # wall-clock ms; -1 for never
    last_caught_up_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class DescribeQuorumAnswer:
    error: int = NONE
    leader_id: int = 0
    leader_epoch: int = 0
    high_watermark: int = 0
    voters: tuple[ReplicaState, ...] = ()
    observers: tuple[ReplicaState, ...] = ()
