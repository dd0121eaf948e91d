"""Conversion between the Raft core's message dataclasses and the ``odradek.v1.Raft`` protobufs.

The core's messages are one-way (each names src and dst); on the wire a request and its response travel as one
unary RPC. Fields a response only echoes from its request (fetch position, correlation id, the pre-vote flag)
are not sent: the caller fills them from the request it made.
"""

from __future__ import annotations

from odradek.controller.raft.log import Entry
from odradek.controller.raft.messages import (
    BeginQuorumEpoch,
    BeginQuorumEpochResponse,
    DivergingEpoch,
    EndQuorumEpoch,
    EndQuorumEpochResponse,
    Fetch,
    FetchResponse,
    FetchSnapshot,
    FetchSnapshotResponse,
    Vote,
    VoteResponse,
)
from odradek.controller.raft.snapshot import SnapshotId
from odradek.proto import common_pb2
from odradek.proto import raft_pb2 as pb

NO_ID = -1


def _opt(node: int | None) -> int:
    return NO_ID if node is None else node


def _node(value: int) -> int | None:
    return None if value < 0 else value


# ---- requests: message -> proto (the sender) and proto -> message (the receiver) ----


def vote_request(m: Vote, cluster_id: str) -> pb.VoteRequest:
    return pb.VoteRequest(
        cluster_id=cluster_id,
        candidate_id=m.src,
        voter_id=m.dst,
        candidate_epoch=m.candidate_epoch,
        last_offset_epoch=m.last_epoch,
        last_offset=m.end_offset,
        pre_vote=m.pre_vote,
    )


def vote_from(r: pb.VoteRequest, me: int) -> Vote:
    return Vote(r.candidate_id, me, r.candidate_epoch, r.last_offset_epoch, r.last_offset, r.pre_vote)


def begin_request(m: BeginQuorumEpoch, cluster_id: str) -> pb.BeginQuorumEpochRequest:
    return pb.BeginQuorumEpochRequest(cluster_id=cluster_id, leader_id=m.src, leader_epoch=m.epoch, voter_id=m.dst)


def begin_from(r: pb.BeginQuorumEpochRequest, me: int) -> BeginQuorumEpoch:
    return BeginQuorumEpoch(r.leader_id, me, r.leader_epoch)


def end_request(m: EndQuorumEpoch, cluster_id: str) -> pb.EndQuorumEpochRequest:
    return pb.EndQuorumEpochRequest(
        cluster_id=cluster_id, leader_id=m.src, leader_epoch=m.epoch, preferred_successors=m.preferred_successors
    )


def end_from(r: pb.EndQuorumEpochRequest, me: int) -> EndQuorumEpoch:
    return EndQuorumEpoch(r.leader_id, me, r.leader_epoch, tuple(r.preferred_successors))


def fetch_request(m: Fetch, cluster_id: str, max_bytes: int) -> pb.RaftFetchRequest:
    return pb.RaftFetchRequest(
        cluster_id=cluster_id,
        replica_id=m.src,
        leader_epoch=m.epoch,
        fetch_offset=m.fetch_offset,
        last_fetched_epoch=m.last_fetched_epoch,
        max_wait_ms=m.max_wait_ms,
        max_bytes=max_bytes,
        high_watermark=m.high_watermark,
    )


def fetch_from(r: pb.RaftFetchRequest, me: int, correlation_id: int) -> Fetch:
    return Fetch(
        r.replica_id,
        me,
        r.leader_epoch,
        r.fetch_offset,
        r.last_fetched_epoch,
        r.high_watermark,
        r.max_wait_ms,
        correlation_id,
    )


def snapshot_request(m: FetchSnapshot, cluster_id: str) -> pb.FetchSnapshotRequest:
    return pb.FetchSnapshotRequest(
        cluster_id=cluster_id,
        replica_id=m.src,
        leader_epoch=m.epoch,
        snapshot_id=pb.SnapshotId(end_offset=m.snapshot_id.end_offset, epoch=m.snapshot_id.epoch),
        position=m.position,
        max_bytes=m.max_bytes,
    )


def snapshot_from(r: pb.FetchSnapshotRequest, me: int, correlation_id: int) -> FetchSnapshot:
    sid = SnapshotId(r.snapshot_id.end_offset, r.snapshot_id.epoch)
    return FetchSnapshot(r.replica_id, me, r.leader_epoch, sid, r.position, r.max_bytes, correlation_id)


# ---- responses: message -> proto (the receiver answers) and proto -> message (the sender reads) ----


def vote_response(m: VoteResponse) -> pb.VoteResponse:
    return pb.VoteResponse(
        error=m.error, leader_id=_opt(m.leader_id), leader_epoch=m.epoch, vote_granted=m.granted, voter_id=m.src
    )


def vote_response_from(r: pb.VoteResponse, request: Vote) -> VoteResponse:
    return VoteResponse(
        request.dst, request.src, r.leader_epoch, _node(r.leader_id), r.vote_granted, request.pre_vote, r.error
    )


def begin_response(m: BeginQuorumEpochResponse) -> pb.BeginQuorumEpochResponse:
    return pb.BeginQuorumEpochResponse(error=m.error, leader_id=_opt(m.leader_id), leader_epoch=m.epoch)


def begin_response_from(r: pb.BeginQuorumEpochResponse, request: BeginQuorumEpoch) -> BeginQuorumEpochResponse:
    return BeginQuorumEpochResponse(request.dst, request.src, r.leader_epoch, _node(r.leader_id), r.error)


def end_response(m: EndQuorumEpochResponse) -> pb.EndQuorumEpochResponse:
    return pb.EndQuorumEpochResponse(error=m.error, leader_id=_opt(m.leader_id), leader_epoch=m.epoch)


def end_response_from(r: pb.EndQuorumEpochResponse, request: EndQuorumEpoch) -> EndQuorumEpochResponse:
    return EndQuorumEpochResponse(request.dst, request.src, r.leader_epoch, _node(r.leader_id), r.error)


def fetch_response(m: FetchResponse, log_start_offset: int) -> pb.RaftFetchResponse:
    r = pb.RaftFetchResponse(
        error=m.error,
        leader_id=_opt(m.leader_id),
        leader_epoch=m.epoch,
        high_watermark=m.high_watermark,
        log_start_offset=log_start_offset,
        entries=[pb.RaftEntry(offset=e.offset, epoch=e.epoch, data=e.data, control=e.control) for e in m.entries],
    )
    if m.diverging_epoch is not None:
        r.diverging_epoch.CopyFrom(
            common_pb2.EpochEndOffset(epoch=m.diverging_epoch.epoch, end_offset=m.diverging_epoch.end_offset)
        )
    if m.snapshot_id is not None:
        r.snapshot_id.CopyFrom(pb.SnapshotId(end_offset=m.snapshot_id.end_offset, epoch=m.snapshot_id.epoch))
    return r


def fetch_response_from(r: pb.RaftFetchResponse, request: Fetch) -> FetchResponse:
    return FetchResponse(
        request.dst,
        request.src,
        r.leader_epoch,
        _node(r.leader_id),
        request.fetch_offset,
        request.last_fetched_epoch,
        r.high_watermark,
        entries=tuple(Entry(e.offset, e.epoch, e.data, e.control) for e in r.entries),
        diverging_epoch=(
            DivergingEpoch(r.diverging_epoch.epoch, r.diverging_epoch.end_offset)
            if r.HasField("diverging_epoch")
            else None
        ),
        snapshot_id=(SnapshotId(r.snapshot_id.end_offset, r.snapshot_id.epoch) if r.HasField("snapshot_id") else None),
        error=r.error,
        correlation_id=request.correlation_id,
    )


def snapshot_response(m: FetchSnapshotResponse) -> pb.FetchSnapshotResponse:
    return pb.FetchSnapshotResponse(
        error=m.error,
        leader_id=_opt(m.leader_id),
        leader_epoch=m.epoch,
        snapshot_id=pb.SnapshotId(end_offset=m.snapshot_id.end_offset, epoch=m.snapshot_id.epoch),
        size=m.size,
        position=m.position,
        data=m.data,
    )


def snapshot_response_from(r: pb.FetchSnapshotResponse, request: FetchSnapshot) -> FetchSnapshotResponse:
    return FetchSnapshotResponse(
        request.dst,
        request.src,
        r.leader_epoch,
        _node(r.leader_id),
        request.snapshot_id,
        r.position,
        r.data,
        r.size,
        r.error,
        request.correlation_id,
    )
