"""The decisions of moving a replica between this broker's log dirs (AlterReplicaLogDirs, KIP-113), without I/O.

``decide`` answers one partition of a request, as Kafka's ReplicaManager does. ``FutureCopy`` drives the copy of
the current log into the future log: the future log is a follower whose leader is the local current log, so each
round reads what follows the future's log end, checked against the future's last epoch (``Log.read_for_copy``),
and the answer becomes an action: append (then take the current log's high watermark and log start, as a follower
takes its leader's), truncate where the logs diverge (the current log was truncated, as a follower, since the copy
read it), restart at the current log start (retention or DeleteRecords passed the copy's end), or swap once the
future holds everything. Compaction of the current log needs nothing: offsets stay, so a read returns the cleaned
batches with gaps, which a follower append accepts. The swap itself happens only where no append can come between
the check and the swap (the shell does the last rounds and the swap on its event loop).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from odradek.client.errors import ErrorCode

UNDEFINED_EPOCH = -1
MAX_FUTURE_DIR_NAME = 255  # a future dir's name must fit a file name (Kafka refuses longer topic names, KAFKA-4893)


class Placement(NamedTuple):
    """What this broker holds of one partition named in a request."""

    known: bool  # the partition is in the metadata
    current_dir: Path | None  # the dir of its log; None when this broker hosts no replica of it
    current_offline: bool  # its replica here is offline (its log dir failed)
    future_dir: Path | None  # where it is moving to; None when it is not moving


class Decision(NamedTuple):
    error: int
    cancel: bool = False  # remove the future log first: the request replaces a move to another dir
    start: Path | None = None  # start moving the replica to this dir
    prefer: Path | None = None  # create the replica in this dir when it comes to this broker


def decide(
    topic: str,
    partition: int,
    destination: Path | None,
    destination_online: bool,
    any_dir_offline: bool,
    at: Placement,
) -> Decision:
    """One partition of an AlterReplicaLogDirs request, in Kafka's order: a name too long for a future dir, a
    destination that is not a log dir (LOG_DIR_NOT_FOUND) or offline, an offline replica (KAFKA_STORAGE_ERROR); a
    move elsewhere is cancelled; a partition not hosted keeps the destination for when it comes and answers
    REPLICA_NOT_AVAILABLE (UNKNOWN_TOPIC_OR_PARTITION if the metadata does not have it); the current dir is a
    no-op; a new future log is refused while any dir is offline, as Kafka refuses to create a log then."""
    if len(f"{topic}-{partition}.{'0' * 32}-future") > MAX_FUTURE_DIR_NAME:
        return Decision(ErrorCode.INVALID_TOPIC_EXCEPTION)
    if destination is None:
        return Decision(ErrorCode.LOG_DIR_NOT_FOUND)
    if not destination_online:
        return Decision(ErrorCode.KAFKA_STORAGE_ERROR)
    if at.current_offline:
        return Decision(ErrorCode.KAFKA_STORAGE_ERROR)
    if at.current_dir is None:
        error = ErrorCode.REPLICA_NOT_AVAILABLE if at.known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return Decision(error, prefer=destination)
    cancel = at.future_dir is not None and at.future_dir != destination
    if at.current_dir == destination or at.future_dir == destination:
        return Decision(ErrorCode.NONE, cancel=cancel)
    if any_dir_offline:
        return Decision(ErrorCode.KAFKA_STORAGE_ERROR, cancel=cancel)
    return Decision(ErrorCode.NONE, cancel=cancel, start=destination)


class Position(NamedTuple):
    """A log's offsets as one read of them saw them."""

    log_start: int
    log_end: int
    high_watermark: int
    latest_epoch: int | None


class Append(NamedTuple):
    """Append the records read at ``fetch_offset``, then take the current log's high watermark and log start as
    far as the future log reaches. ``near_end``: the read reached the current log's end, so little is left: the
    shell finishes on its event loop."""

    fetch_offset: int
    high_watermark: int
    log_start: int
    near_end: bool


class Truncate(NamedTuple):
    offset: int


class StartAt(NamedTuple):
    """Empty the future log and restart it at ``offset`` (the current log's start passed its end)."""

    offset: int


class CaughtUp(NamedTuple):
    """The future log ends where the current one does: swap (under the partition's exclusion)."""


class Idle(NamedTuple):
    """Behind, with nothing to read yet: the current log's last batches before its end were compacted away, and
    the copy continues with the next append."""


CopyAction = Append | Truncate | StartAt | CaughtUp | Idle


class FutureCopy:
    """The copy of one partition's log into its future log in ``destination``; ``lag`` is the offsets it is behind
    (DescribeLogDirs' offset lag of a future replica, -1 before the first round)."""

    def __init__(self, topic: str, partition: int, destination: Path, max_bytes: int) -> None:
        self.topic = topic
        self.partition = partition
        self.destination = destination
        self.max_bytes = max_bytes
        self.lag = -1

    def on_read(self, future: Position, current: Position, size: int) -> CopyAction:
        """The current log answered a read from the future's log end with ``size`` bytes of batches."""
        self.lag = max(0, current.log_end - future.log_end)
        if size:
            return Append(future.log_end, current.high_watermark, current.log_start, size < self.max_bytes)
        if future.log_end == current.log_end:
            return CaughtUp()
        return Idle()

    def on_diverging(self, future: Position, epoch: int, end_offset: int, local: tuple[int, int]) -> CopyAction:
        """The current log ends ``epoch`` at ``end_offset``, before the future's end: truncate to where both agree,
        the smaller of that and the future's own end for the epoch (``local``, as Kafka's followers do)."""
        local_epoch, local_end = local
        target = end_offset if local_epoch == UNDEFINED_EPOCH else min(end_offset, local_end)
        if target < future.log_start:
            return StartAt(max(target, 0))
        return Truncate(target)

    def on_out_of_range(self, future: Position, current: Position) -> CopyAction:
        """The future's end is outside the current log: below its start (retention, DeleteRecords, a follower
        restarting at its leader's start), or above its end (a truncation the epochs could not show)."""
        self.lag = max(0, current.log_end - future.log_end)
        if future.log_end < current.log_start or current.log_end < future.log_start:
            return StartAt(current.log_start)
        return Truncate(current.log_end)
