"""Every Raft request and response, as frozen dataclasses (KIP-595 RPCs, KIP-996 pre-vote, KIP-630 snapshots).

Messages are one-way: each names its sender (`src`) and receiver (`dst`), and a response is just another
message the shell delivers to `step()`. Responses carry the responder's epoch and known leader so a stale node
catches up from any answer. Error codes are the integers of `odradek.proto.common_pb2.ErrorCode`, so the
gRPC shell copies them without translation; `leader_id` None is -1 on the wire.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.controller.raft.log import Entry
from odradek.controller.raft.snapshot import SnapshotId
from odradek.proto import common_pb2

_E = common_pb2.ErrorCode
NONE: _E.ValueType = _E.NONE
FENCED_LEADER_EPOCH: _E.ValueType = _E.FENCED_LEADER_EPOCH
UNKNOWN_LEADER_EPOCH: _E.ValueType = _E.UNKNOWN_LEADER_EPOCH
NOT_LEADER_OR_FOLLOWER: _E.ValueType = _E.NOT_LEADER_OR_FOLLOWER
INCONSISTENT_VOTER_SET: _E.ValueType = _E.INCONSISTENT_VOTER_SET
#: The proto has no SNAPSHOT_NOT_FOUND / POSITION_OUT_OF_RANGE yet; this code stands for both.
SNAPSHOT_NOT_FOUND: _E.ValueType = _E.OFFSET_OUT_OF_RANGE


@dataclass(frozen=True, slots=True)
class Vote:
    """Ask for a vote in `candidate_epoch`; with `pre_vote` only ask whether one would be granted (KIP-996)."""

    src: int
    dst: int
    candidate_epoch: int
    last_epoch: int
    end_offset: int
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class VoteResponse:
    src: int
    dst: int
    epoch: int
    leader_id: int | None
    granted: bool
    pre_vote: bool
    error: _E.ValueType = NONE


@dataclass(frozen=True, slots=True)
class BeginQuorumEpoch:
    """A new leader (`src`) announcing its epoch to the voters, so they start fetching without waiting."""

    src: int
    dst: int
    epoch: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    src: int
    dst: int
    epoch: int
    leader_id: int | None
    error: _E.ValueType = NONE


@dataclass(frozen=True, slots=True)
class EndQuorumEpoch:
    """A resigning leader (`src`) asking voters to elect a successor now, best candidates first."""

    src: int
    dst: int
    epoch: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    src: int
    dst: int
    epoch: int
    leader_id: int | None
    error: _E.ValueType = NONE


@dataclass(frozen=True, slots=True)
class Fetch:
    """Pull entries from `fetch_offset`; `last_fetched_epoch` is the epoch of the entry just below it.

    `high_watermark` is what the fetcher already knows, so the leader can park a fetch that would bring
    nothing new (as KIP-1166) and answer it once either entries or a higher watermark exist.
    `max_wait_ms` > 0 allows parking at all; the shell owns the wait.
    """

    src: int
    dst: int
    epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    high_watermark: int
    max_wait_ms: int = 0
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class DivergingEpoch:
    """The fetcher's log diverges: the leader's largest epoch <= the fetcher's, and where it ends."""

    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """Entries, or a diverging epoch, or a snapshot to fetch first; echoes the request's position.

    The echo lets the fetcher ignore a duplicated or late answer that no longer fits its log.
    """

    src: int
    dst: int
    epoch: int
    leader_id: int | None
    fetch_offset: int
    last_fetched_epoch: int
    high_watermark: int
    entries: tuple[Entry, ...] = ()
    diverging_epoch: DivergingEpoch | None = None
    snapshot_id: SnapshotId | None = None
    error: _E.ValueType = NONE
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class FetchSnapshot:
    """Read up to `max_bytes` of the leader's snapshot `snapshot_id` from `position`."""

    src: int
    dst: int
    epoch: int
    snapshot_id: SnapshotId
    position: int
    max_bytes: int
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    src: int
    dst: int
    epoch: int
    leader_id: int | None
    snapshot_id: SnapshotId
    position: int
    data: bytes = b""
    size: int = 0
    error: _E.ValueType = NONE
    correlation_id: int = 0


Message = (
    Vote
    | VoteResponse
    | BeginQuorumEpoch
    | BeginQuorumEpochResponse
    | EndQuorumEpoch
    | EndQuorumEpochResponse
    | Fetch
    | FetchResponse
    | FetchSnapshot
    | FetchSnapshotResponse
)
