"""What a follower does with one partition's answer to its Fetch: the decision, free of asyncio and gRPC.

A fetch carries the partition's position when the request was built (``FetchPosition``: fetch offset, last
fetched epoch, leader epoch). Its answer is only meaningful for that position. If the partition moved meanwhile
(truncated on a divergence, restarted at the leader's log start, a new leader epoch), the answer is stale: its
records no longer continue the log and its divergence or range error was about a log that no longer exists, so
it is dropped and the next fetch asks again from the current position. Otherwise: truncate where the leader says
the logs diverge, append and take the leader's high watermark and log start offset, or restart at the leader's
log start.

``decide`` is the pure rule; ``apply_fetched`` runs it against a ``Partition`` (the fetcher's asyncio loop and a
simulation both call it). ``ReplicaFetchRequest`` is what a follower asks, whatever the transport (gRPC or the Kafka
listener) carries it; each transport turns the leader's answer into ``FetchedPartition`` values.
"""

from __future__ import annotations

from typing import NamedTuple

from odradek.broker.partition import UNDEFINED_EPOCH, Divergence, Partition
from odradek.client.errors import ErrorCode
from odradek.proto import broker_pb2 as pb


class FetchPosition(NamedTuple):
    """Where a follower fetches from: what its request carries for one partition."""

    fetch_offset: int
    last_fetched_epoch: int
    leader_epoch: int


class PartitionFetch(NamedTuple):
    """One partition of a follower's request: its position and what the fetcher asks of the leader for it."""

    partition: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int
    durable_offset: int = -1  # our recovery point: the leader's tombstone horizon counts only what survives our crash


class ReplicaFetchRequest(NamedTuple):
    """A follower's fetch of every partition it follows at one leader, before any transport encodes it."""

    replica_id: int
    replica_epoch: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    topics: list[tuple[str, list[PartitionFetch]]]


class FetchFailedError(Exception):
    """A fetch got no usable answer (connection, timeout, a malformed answer): the fetcher retries after its
    backoff."""


class FetchRefusedError(Exception):
    """The leader refused a whole fetch (a stale broker epoch): the fetcher retries after its backoff."""

    def __init__(self, code: int) -> None:
        super().__init__(ErrorCode.Name(code) if code in ErrorCode.values() else f"error {code}")  # type: ignore[arg-type]
        self.code = code


class FetchedPartition(NamedTuple):
    """One partition of a Fetch answer, as plain values."""

    error: int
    records: bytes = b""
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    diverging: Divergence | None = None
    all_replicas_offset: int = -1

    @classmethod
    def from_proto(cls, r: pb.FetchPartitionResponse) -> FetchedPartition:
        diverging = None
        if r.HasField("diverging_epoch"):
            diverging = Divergence(r.diverging_epoch.epoch, r.diverging_epoch.end_offset)
        return cls(
            r.error, r.records, r.high_watermark, r.log_start_offset, r.log_end_offset, diverging, r.all_replicas_offset
        )


class Stale(NamedTuple):
    """The partition moved since the request was sent: drop the answer, fetch again from ``current``."""

    sent: FetchPosition
    current: FetchPosition


class Truncate(NamedTuple):
    """Truncate where the leader says the logs diverge (or to the leader's end when we are ahead of it)."""

    diverging: Divergence


class Append(NamedTuple):
    """Append the records (possibly none) and take the leader's high watermark and log start offset."""

    records: bytes
    high_watermark: int
    leader_log_end_offset: int
    leader_log_start_offset: int = -1
    all_replicas_offset: int = -1


class RestartAt(NamedTuple):
    """Our fetch offset is below the leader's log start: empty the log and start it there."""

    log_start_offset: int


class Refused(NamedTuple):
    """The leader refused the partition (not leader, epoch mismatch, ...): wait for metadata or the backoff."""

    error: ErrorCode.ValueType


FetchAction = Stale | Truncate | Append | RestartAt | Refused


def position_of(p: Partition) -> FetchPosition:
    """The partition's position now (raises the log's StorageError if the log is offline)."""
    offset, epoch = p.fetch_position()
    return FetchPosition(offset, epoch, p.leader_epoch)


def decide(sent: FetchPosition, current: FetchPosition, r: FetchedPartition) -> FetchAction:
    """What answer ``r`` to a fetch sent at ``sent`` means for a partition now at ``current``."""
    if sent != current:
        return Stale(sent, current)
    if r.error == ErrorCode.NONE:
        if r.diverging is not None:
            return Truncate(r.diverging)
        return Append(r.records, r.high_watermark, r.log_end_offset, r.log_start_offset, r.all_replicas_offset)
    if r.error == ErrorCode.OFFSET_OUT_OF_RANGE:
        if current.fetch_offset < r.log_start_offset:
            return RestartAt(r.log_start_offset)
        # Ahead of the leader without a divergence answer: keep only what the leader has.
        return Truncate(Divergence(UNDEFINED_EPOCH, r.log_end_offset))
    return Refused(ErrorCode.ValueType(r.error))


def apply_fetched(p: Partition, sent: FetchPosition, r: FetchedPartition) -> FetchAction:
    """Decide on ``r`` against ``p``'s current position and apply the answer to ``p``; returns what was done.

    Raises the log's typed errors (StorageError when the log is offline, UnexpectedAppendOffsetError should the
    records still not continue the log)."""
    action = decide(sent, position_of(p), r)
    if isinstance(action, Truncate):
        p.truncate_to_leader(action.diverging)
    elif isinstance(action, Append):
        p.append_as_follower(
            action.records,
            action.high_watermark,
            action.leader_log_start_offset,
            action.all_replicas_offset,
            fetch_offset=sent.fetch_offset,
        )
    elif isinstance(action, RestartAt):
        p.reset_to_leader_start(action.log_start_offset)
    return action
