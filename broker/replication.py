"""The leader's replication state of one partition: follower progress, the ISR and the high watermark.

Sans-I/O: the partition shell feeds it events (a local append, a follower fetch, a committed
metadata change, a periodic lag check) with the time and the leader's log end offset, and gets back the new high
watermark and ISR changes to ask the controller for. Rules, as Kafka's leader keeps them:

- A follower's log end offset is the offset it fetches from. It is *caught up* at a fetch that reaches the
  leader's log end offset of that moment; a fetch that reaches the leader's log end offset of the follower's
  previous fetch proves it was caught up then (so a follower that keeps pace with a steady stream of appends
  is not declared lagging just because new records keep arriving).
- High watermark = min log end offset over the *maximal* ISR: the committed ISR plus a pending expansion
  (conservative while the change is in flight: a member being removed still counts until the removal commits,
  and one being added counts as soon as it is asked for). It never moves backwards, and (KIP-966) it does not
  move at all while the committed ISR is smaller than ``min.insync.replicas`` (capped at the replica count):
  a record that was never on enough replicas is never shown to consumers, whatever acks its producer used.
- Beyond Kafka, the offset every replica holds durably (the log cleaners' tombstone horizon): the high watermark,
  capped by the leader's recovery point and each follower's *durable offset*, the recovery point its last fetch
  reported. Acks and the high watermark do not wait for fsync; what a replica may lose to a power loss does not
  count here.
- Shrink: an ISR follower not caught up for ``replica.lag.time.max.ms``, counted only while the leader itself ran:
  after a stall of the leader (a pause, a frozen process; the shell notices its periodic check woke late) the
  followers it could not hear from meanwhile get a new window from then. Expand: a follower whose log end
  offset reached both the high watermark and the start of the current leader epoch. One change is in flight
  at a time; it takes effect only when the controller commits it and the metadata reaches this broker.

Each answer also carries events (an ISR change asked for and why, one committed, a new lag window after a stall)
that the shell writes to the broker's log, since this module neither logs nor reads a clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

UNKNOWN_OFFSET = -1


@dataclass(slots=True)
class RemoteReplica:
    """The leader's view of one follower replica: what its fetches proved and when."""

    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_leo: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET  # as its last fetch reported it (DeleteRecords waits on it)
    durable_offset: int = UNKNOWN_OFFSET  # its recovery point as its last fetch reported it (the tombstone horizon)


@dataclass(frozen=True, slots=True)
class IsrChange:
    """An AlterPartition item: the ISR the leader wants, at the epochs it holds."""

    new_isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int


def _ids(replicas: Iterable[int]) -> str:
    return ",".join(str(r) for r in replicas) or "none"


@dataclass(frozen=True, slots=True)
class IsrShrinkRequested:
    """ISR followers not caught up for the lag window; `lagging` is (replica, ms since it last was)."""

    new_isr: tuple[int, ...]
    lagging: tuple[tuple[int, int], ...]

    def describe(self, partition: str) -> str:
        why = ", ".join(f"{r} lagging {ms / 1000:.1f} s" for r, ms in self.lagging)
        return f"ISR of {partition} shrinks to {_ids(self.new_isr)}: {why} (asking the controller)"


@dataclass(frozen=True, slots=True)
class IsrExpandRequested:
    """A follower outside the ISR reached the high watermark and the start of the leader epoch."""

    new_isr: tuple[int, ...]
    replica: int
    log_end_offset: int

    def describe(self, partition: str) -> str:
        return (
            f"ISR of {partition} grows to {_ids(self.new_isr)}: {self.replica} caught up at offset "
            f"{self.log_end_offset} (asking the controller)"
        )


@dataclass(frozen=True, slots=True)
class IsrCommitted:
    """Committed metadata changed the ISR this leader works with."""

    old_isr: tuple[int, ...]
    new_isr: tuple[int, ...]

    def describe(self, partition: str) -> str:
        old, new = set(self.old_isr), set(self.new_isr)
        verb = "shrank" if new < old else "grew" if new > old else "changed"
        return f"ISR of {partition} {verb} to {_ids(self.new_isr)} (was {_ids(self.old_isr)})"


@dataclass(frozen=True, slots=True)
class LagWindowRestarted:
    """The leader stalled: these followers' lag windows start again at `now_ms`."""

    followers: tuple[int, ...]
    now_ms: int

    def describe(self, partition: str) -> str:
        return f"{partition}: leader stalled: followers {_ids(self.followers)} get a new lag window"


ReplicationEvent = IsrShrinkRequested | IsrExpandRequested | IsrCommitted | LagWindowRestarted


@dataclass(frozen=True, slots=True)
class Progress:
    """What one event changed: the new high watermark (None if unchanged), an ISR change to request, and the
    transitions to log."""

    high_watermark: int | None = None
    isr_change: IsrChange | None = None
    events: tuple[ReplicationEvent, ...] = ()


NO_PROGRESS = Progress()


class LeaderState:
    def __init__(
        self,
        broker_id: int,
        leader_epoch: int,
        partition_epoch: int,
        replicas: tuple[int, ...],
        isr: tuple[int, ...],
        epoch_start_offset: int,
        high_watermark: int,
        min_isr: int,
        now_ms: int,
    ) -> None:
        self.broker_id = broker_id
        self.min_isr = min_isr
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = replicas
        self.isr = isr
        self.epoch_start_offset = epoch_start_offset
        self.high_watermark = high_watermark
        self.pending: IsrChange | None = None
        # ISR members start caught up as of the epoch start, so a new leader does not drop them at once.
        self.followers = {
            r: RemoteReplica(last_caught_up_ms=now_ms if r in isr else 0) for r in replicas if r != broker_id
        }

    # -- views ---------------------------------------------------------------------------------------------------

    @property
    def maximal_isr(self) -> frozenset[int]:
        members = set(self.isr)
        if self.pending is not None:
            members.update(self.pending.new_isr)
        return frozenset(members)

    def low_watermark(self, leader_log_start: int) -> int:
        """The lowest log start offset over the ISR (this leader's included): DeleteRecords is done once it has
        reached the new log start, i.e. every in-sync replica has dropped the records below it (Kafka counts
        every live replica; counting the ISR means a replica that is out of it cannot hold the answer back)."""
        low = leader_log_start
        for r in self.isr:
            if r != self.broker_id:
                f = self.followers.get(r)
                low = min(low, f.log_start_offset if f is not None else UNKNOWN_OFFSET)
        return low

    def all_replicas_offset(self, leader_durable_offset: int) -> int:
        """The offset every replica of the partition holds durably: the high watermark, capped by this leader's
        durable offset (its recovery point) and each follower's as it reported it (0 until it has fetched from this
        leader). The log cleaners remove tombstones only below it, so a replica that was away, however long, still
        meets every delete when it catches up, and so does one that lost power: acks count records not yet
        fsynced, and a replica that loses them may keep an older value whose tombstone the others removed."""
        offset = min(self.high_watermark, leader_durable_offset)
        for f in self.followers.values():
            offset = min(offset, max(f.durable_offset, 0))
        return max(offset, 0)

    def follower_lag(self, leader_leo: int) -> dict[int, int]:
        """Offsets each follower is behind (its log end offset unknown = the whole log)."""
        return {r: leader_leo - max(f.log_end_offset, 0) for r, f in self.followers.items()}

    # -- events --------------------------------------------------------------------------------------------------

    def on_append(self, leader_leo: int) -> Progress:
        return self._progress(leader_leo, None)

    def on_follower_fetch(
        self,
        replica_id: int,
        fetch_offset: int,
        leader_leo: int,
        now_ms: int,
        log_start_offset: int = UNKNOWN_OFFSET,
        durable_offset: int = UNKNOWN_OFFSET,
    ) -> Progress:
        """A follower fetched from ``fetch_offset``: everything before it is on the follower's log, everything
        before ``durable_offset`` (its recovery point, as it reported it) survives its crash, and nothing below
        ``log_start_offset`` (its own log start, as it reported it) is left."""
        f = self.followers.get(replica_id)
        if f is None:
            return NO_PROGRESS
        f.log_end_offset = fetch_offset
        f.log_start_offset = log_start_offset
        f.durable_offset = min(durable_offset, fetch_offset)
        if fetch_offset >= leader_leo:
            f.last_caught_up_ms = now_ms
        elif fetch_offset >= f.last_fetch_leader_leo >= 0:
            f.last_caught_up_ms = max(f.last_caught_up_ms, f.last_fetch_ms)
        f.last_fetch_ms = now_ms
        f.last_fetch_leader_leo = leader_leo
        change = None
        events: tuple[ReplicationEvent, ...] = ()
        if self.pending is None and replica_id not in self.isr and self._may_join(f):
            change = self._request(tuple(r for r in self.replicas if r in self.isr or r == replica_id))
            events = (IsrExpandRequested(change.new_isr, replica_id, fetch_offset),)
        return self._progress(leader_leo, change, events)

    def check_lagging(self, leader_leo: int, now_ms: int, lag_max_ms: int) -> Progress:
        """Periodic: ask to drop ISR followers not caught up within ``lag_max_ms``."""
        if self.pending is not None:
            return NO_PROGRESS
        lagging = {
            r
            for r in self.isr
            if r != self.broker_id
            and (f := self.followers.get(r)) is not None
            and f.log_end_offset < leader_leo
            and now_ms - f.last_caught_up_ms > lag_max_ms
        }
        if not lagging:
            return NO_PROGRESS
        change = self._request(tuple(r for r in self.isr if r not in lagging))
        why = tuple((r, now_ms - self.followers[r].last_caught_up_ms) for r in sorted(lagging))
        return self._progress(leader_leo, change, (IsrShrinkRequested(change.new_isr, why),))

    def on_stall(self, now_ms: int) -> LagWindowRestarted | None:
        """The leader was not running for a while: followers' silence during it proves nothing about them.
        Returns which followers got a new window (None if none needed one)."""
        restarted = []
        for r, f in sorted(self.followers.items()):
            if f.last_caught_up_ms < now_ms:
                f.last_caught_up_ms = now_ms
                restarted.append(r)
        return LagWindowRestarted(tuple(restarted), now_ms) if restarted else None

    def on_metadata(
        self, partition_epoch: int, replicas: tuple[int, ...], isr: tuple[int, ...], leader_leo: int, now_ms: int
    ) -> Progress:
        """A committed change at the same leader epoch (ISR or replica set); a pending request is settled by it."""
        if partition_epoch <= self.partition_epoch:
            return NO_PROGRESS
        self.partition_epoch = partition_epoch
        events = (IsrCommitted(self.isr, isr),) if isr != self.isr else ()
        self.isr = isr
        self.pending = None
        if replicas != self.replicas:
            self.replicas = replicas
            old = self.followers
            self.followers = {
                r: old.get(r) or RemoteReplica(last_caught_up_ms=now_ms if r in isr else 0)
                for r in replicas
                if r != self.broker_id
            }
        return self._progress(leader_leo, None, events)

    def set_min_isr(self, min_isr: int, leader_leo: int) -> Progress:
        self.min_isr = min_isr
        return self._progress(leader_leo, None)

    def on_change_failed(self, leader_leo: int) -> Progress:
        """The controller answered that it applied nothing of the pending change: allow a new request (the next
        event decides again). Never called for a lost or ambiguous answer: the change may have been committed.

        A refused expansion leaves the maximal ISR, so the high watermark may move now: a follower asked for (one
        shutting down, say) held it back, and no later append or fetch need come to move it (acks=all producers
        waiting on one connection send nothing more until they are answered)."""
        self.pending = None
        return self._progress(leader_leo, None)

    # -- internals -----------------------------------------------------------------------------------------------

    def _may_join(self, f: RemoteReplica) -> bool:
        return f.log_end_offset >= self.high_watermark and f.log_end_offset >= self.epoch_start_offset

    def _request(self, new_isr: tuple[int, ...]) -> IsrChange:
        self.pending = IsrChange(new_isr, self.leader_epoch, self.partition_epoch)
        return self.pending

    def _progress(
        self, leader_leo: int, change: IsrChange | None, events: tuple[ReplicationEvent, ...] = ()
    ) -> Progress:
        if len(self.isr) < min(self.min_isr, len(self.replicas)):
            return Progress(None, change, events) if change is not None or events else NO_PROGRESS
        # min over the maximal ISR, walked as its two parts (a member in both counts twice, harmlessly): called
        # on every append and follower fetch, so no set is built.
        hw = leader_leo
        me, followers = self.broker_id, self.followers
        for r in self.isr:
            if r != me:
                f = followers.get(r)
                if f is None or f.log_end_offset < hw:
                    hw = UNKNOWN_OFFSET if f is None else f.log_end_offset
        if self.pending is not None:
            for r in self.pending.new_isr:
                if r != me:
                    f = followers.get(r)
                    if f is None or f.log_end_offset < hw:
                        hw = UNKNOWN_OFFSET if f is None else f.log_end_offset
        if hw > self.high_watermark:
            self.high_watermark = hw
            return Progress(hw, change, events)
        return Progress(None, change, events) if change is not None or events else NO_PROGRESS
