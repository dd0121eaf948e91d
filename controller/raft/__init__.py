"""Raft for the metadata quorum, as a sans-I/O state machine (KIP-595 style: pull-based replication).

Drive a `RaftNode` with `step`, `tick`, `propose`; drain `ready()`, act on it as ready.py describes, then
`advance` it.
"""

from odradek.controller.raft.config import Faults, RaftConfig
from odradek.controller.raft.events import RaftEvent
from odradek.controller.raft.log import Entry, RaftLog
from odradek.controller.raft.node import NotLeaderError, PeerProgress, RaftNode, RaftSafetyError
from odradek.controller.raft.ready import LeaderAndEpoch, Ready
from odradek.controller.raft.snapshot import EMPTY_SNAPSHOT, SnapshotChunk, SnapshotId
from odradek.controller.raft.state import IllegalTransition, PersistentState, QuorumState, Role

__all__ = [
    "EMPTY_SNAPSHOT",
    "Entry",
    "Faults",
    "IllegalTransition",
    "LeaderAndEpoch",
    "NotLeaderError",
    "PeerProgress",
    "PersistentState",
    "QuorumState",
    "RaftConfig",
    "RaftEvent",
    "RaftLog",
    "RaftNode",
    "RaftSafetyError",
    "Ready",
    "Role",
    "SnapshotChunk",
    "SnapshotId",
]
