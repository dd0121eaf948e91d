"""The decisions of moving a replica between this broker's log dirs (AlterReplicaLogDirs, KIP-113), without I/O.

``decide`` answers one partition of a request, as Kafka's ReplicaManager does. ``FutureCopy`` drives the copy of
the current log into the future log: the future log is a follower whose leader is the local current log, so each
round reads what follows the future's log end, checked against the future's last epoch (``Log.read_for_copy``),
and the answer becomes an action: append (then take the current log's high watermark and log start, as a follower
takes its leader's), truncate where the logs diverge (the current log was truncated, as a follower, since the copy
read it), restart at the current log start (retention or DeleteRecords passed the copy's end), or swap once the
future holds every batch the current log holds. Compaction of the current log needs nothing: offsets stay, so a
read returns the cleaned batches with gaps, which a follower append accepts; and when cleaning removed the current
log's last batches before its end (an empty active segment after them), an empty read below its end means the
future already holds everything, and the swap gives the future log the current one's end. The swap itself happens
only where no append can come between the check and the swap (the shell does the last rounds and the swap on its
event loop).

``CopyThrottle`` is ``replica.alter.log.dirs.io.max.bytes.per.second``: how many bytes the next round may copy, and
how long to wait before it, given the broker's budget and the time the shell tells it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

from odradek.client.errors import ErrorCode

UNDEFINED_EPOCH = -1
UNTHROTTLED = 2**63 - 1  # Kafka's Long.MAX: replica.alter.log.dirs.io.max.bytes.per.second's default, no limit
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
    """Append the ``size`` bytes of records read at ``fetch_offset``, then take the current log's high watermark and
    log start as far as the future log reaches. ``near_end``: the read was shorter than it could be, so little is
    left: the shell finishes on its event loop."""

    fetch_offset: int
    high_watermark: int
    log_start: int
    near_end: bool
    size: int


class Truncate(NamedTuple):
    offset: int


class StartAt(NamedTuple):
    """Empty the future log and restart it at ``offset`` (the current log's start passed its end)."""

    offset: int


class CaughtUp(NamedTuple):
    """The future log holds every batch the current one holds: swap (under the partition's exclusion). It ends
    where the current one does, or before when cleaning removed the current log's last batches (nothing is left to
    read from the future's end): the swap then moves the future's end to the current's."""


CopyAction = Append | Truncate | StartAt | CaughtUp


class FutureCopy:
    """The copy of one partition's log into its future log in ``destination``; ``lag`` is the offsets it is behind
    (DescribeLogDirs' offset lag of a future replica, -1 before the first round)."""

    def __init__(self, topic: str, partition: int, destination: Path, max_bytes: int) -> None:
        self.topic = topic
        self.partition = partition
        self.destination = destination
        self.max_bytes = max_bytes
        self.lag = -1

    def on_read(self, future: Position, current: Position, size: int, asked: int | None = None) -> CopyAction:
        """The current log answered a read of at most ``asked`` bytes (``max_bytes`` when not told: the throttle
        may grant less) from the future's log end with ``size`` bytes of batches. An empty answer below the current
        log's end is not a wait for more: a read from the future's end finds any batch after it, so there is none
        (cleaning removed the last ones, and the current log's active segment is empty); the copy is complete."""
        if size:
            self.lag = max(0, current.log_end - future.log_end)
            near_end = size < (self.max_bytes if asked is None else asked)
            return Append(future.log_end, current.high_watermark, current.log_start, near_end, size)
        self.lag = 0
        return CaughtUp()

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


_CREDIT_SLACK = 1e-6  # bytes of credit that float rounding may lose: a wait for less would not move the clock


class Grant(NamedTuple):
    """What a copy round may read: ``bytes`` (0: none yet), after waiting ``wait_s`` seconds (0.0: at once; inf:
    never, at a rate of 0)."""

    bytes: int
    wait_s: float


class CopyThrottle:
    """``replica.alter.log.dirs.io.max.bytes.per.second``: the bytes per second the copies of every move of this
    broker may read from their current logs (and so write to their future logs), as Kafka's ReplicaAlterLogDirs
    quota. A token bucket holding at most one second of the rate, so that a copy that waited cannot burst above it;
    ``UNTHROTTLED`` (the default) grants every round in full. Times are the caller's seconds (a monotonic clock).

    A round asks ``grant`` for the bytes it wants: it is granted them, or the one second's worth of the rate when
    that is less, once that much credit has come (else ``wait_s`` says how long until then); the grant is taken from
    the bucket at once, so that moves asking in turn share it. ``spent`` then tells what the round copied: a read
    answers whole batches, at least one, so a round can copy more than it was granted, and the debt delays the
    next grant; what it did not use goes back."""

    def __init__(self, bytes_per_second: int, now_s: float) -> None:
        if bytes_per_second < 0:
            raise ValueError(f"the copy rate must be at least 0, got {bytes_per_second}")
        self.rate = bytes_per_second
        self._tokens = float(bytes_per_second)
        self._last_s = now_s

    @property
    def unthrottled(self) -> bool:
        return self.rate >= UNTHROTTLED

    def _refill(self, now_s: float) -> None:
        elapsed = max(0.0, now_s - self._last_s)
        self._last_s = max(self._last_s, now_s)
        self._tokens = min(float(self.rate), self._tokens + elapsed * self.rate)

    def grant(self, want: int, now_s: float) -> Grant:
        """The bytes the next round may read, or how long to wait for them."""
        if self.unthrottled:
            return Grant(want, 0.0)
        self._refill(now_s)
        need = min(want, self.rate)
        if need <= 0:
            return Grant(0, math.inf)
        if self._tokens < need - _CREDIT_SLACK:
            return Grant(0, (need - self._tokens) / self.rate)
        self._tokens -= need
        return Grant(need, 0.0)

    def spent(self, granted: int, used: int, now_s: float) -> None:
        """A round granted ``granted`` bytes copied ``used`` (the rounds that finish a move are granted nothing:
        they copy what came since, on the event loop, and only count)."""
        if self.unthrottled:
            return
        self._refill(now_s)
        self._tokens += granted - used
