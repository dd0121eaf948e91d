"""One partition replica on this broker: its log, its role at its leader epoch, and the purgatories around it.

The replication rules live in the sans-I/O ``LeaderState`` (replication.py); this shell applies its answers to
the log (high watermark) and to the futures parked on the partition:

- consumer fetches, woken when the high watermark moves (only records below it are visible);
- follower fetches, woken by every local append (followers read up to the log end offset);
- ``acks=all`` produces, completed once the high watermark covers their batch.

A follower applies what its fetcher brings (``apply_fetched``): it truncates where the leader says its log
diverges (leader-epoch truncation, never to the high watermark), appends, and takes the leader's high watermark
as far as its own log reaches.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import NamedTuple, Protocol

from odradek.broker.log.log import AbortedTxn, AppendInfo, AppendOrigin, FetchData, Log
from odradek.broker.log.producer_state import VerificationGuard
from odradek.broker.log.rewrite import rewrite_for_append
from odradek.broker.replication import IsrChange, LeaderState, Progress
from odradek.client.common import clock
from odradek.client.common.file_slice import FileSlice
from odradek.client.common.metadata_image import NO_LEADER, PartitionRegistration
from odradek.client.errors import (
    ErrorCode,
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetNotAvailableError,
    OffsetOutOfRangeError,
    UnknownLeaderEpochError,
)

logger = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
HIGH_WATERMARK = -1
# Reads for the Kafka listener (``as_file``) smaller than this come as bytes: a FileSlice costs a duplicate fd, its
# close and a sendfile of its own, more than one pread into the response's single sendmsg, for a small batch.
SENDFILE_MIN_BYTES = 32 << 10  # DeleteRecords' offset meaning "up to the high watermark", as Kafka's


class SessionWatcher(Protocol):
    """A fetch session as a partition sees it (fetch_session.FetchSession)."""

    closed: bool

    def changed(self, key: tuple[str, int], wake_replica: bool = True) -> None: ...


class Divergence(NamedTuple):
    """The leader's answer to a follower whose log diverges: its end offset for the largest epoch <= the
    follower's last fetched epoch."""

    epoch: int
    end_offset: int


class FollowerRead(NamedTuple):
    data: FetchData | None
    diverging: Divergence | None
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    all_replicas_offset: int = -1  # the offset every replica holds durably (LeaderState.all_replicas_offset)
    last_stable_offset: int = -1  # consumers: the last stable offset (-1: the high watermark, for followers)
    aborted: list[AbortedTxn] | None = None  # read_committed consumers: the aborted transactions read


class CommittedRead(NamedTuple):
    """A read_committed consumer's read: batches below the last stable offset, that offset, and the aborted
    transactions overlapping what was read (the consumer drops their records)."""

    data: FetchData
    last_stable_offset: int
    aborted: list[AbortedTxn]


class LowWatermark(NamedTuple):
    """How a DeleteRecords wait ended: its error code and, on success, the low watermark then reached."""

    error: int
    low_watermark: int = -1


class Partition:
    def __init__(
        self,
        topic: str,
        partition: int,
        log: Log,
        broker_id: int,
        request_isr_change: Callable[[Partition, IsrChange], None] = lambda p, c: None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.log = log
        self.broker_id = broker_id
        self.request_isr_change = request_isr_change
        self.leader_id = NO_LEADER
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.min_isr = 1
        self.leader_state: LeaderState | None = None
        self.ack_before_replication = False  # the chaos checker's injected bug (unsafe.testing.bug)
        self._waiters: list[asyncio.Future] = []  # consumer fetches
        self._replica_waiters: list[asyncio.Future] = []  # follower fetches
        # Fetch sessions holding this partition (fetch_session.py): told of every change a fetch could see, so an
        # idle session round reads nothing. Closed sessions are dropped at the next change.
        self._sessions: set[SessionWatcher] = set()
        self._acks: list[tuple[int, asyncio.Future]] = []  # (offset the HW must reach, future) of acks=all
        # DeleteRecords answers: (log start every ISR replica must reach, future of the error code)
        self._low_watermark_waiters: list[tuple[int, asyncio.Future[LowWatermark]]] = []
        # As a follower: the offset every replica holds durably, as the leader last told (tombstone_horizon); 0 again
        # when committed metadata changes the leader epoch or the replica set (``update``).
        self._all_replicas_offset = 0

    def __repr__(self) -> str:
        return f"Partition({self.topic}-{self.partition}, leader={self.leader_id}@{self.leader_epoch})"

    @property
    def name(self) -> str:
        """topic-partition, as logs and tools print it."""
        return f"{self.topic}-{self.partition}"

    @property
    def is_leader(self) -> bool:
        return self.leader_state is not None

    @property
    def is_follower(self) -> bool:
        return self.leader_state is None and self.leader_id not in (NO_LEADER, self.broker_id)

    def tombstone_horizon(self) -> int:
        """The offset below which this replica's log cleaner may remove tombstones: the offset every replica of
        the partition holds durably (fsynced), as this leader tracks it or as the leader last told this follower
        (capped by our high watermark); 0 without a leader. Read from the cleaner thread: plain attribute reads."""
        state = self.leader_state
        if state is not None:
            return state.all_replicas_offset(self.log.recovery_point)
        if self.is_follower:
            return min(self._all_replicas_offset, self.log.high_watermark)
        return 0

    # -- metadata ------------------------------------------------------------------------------------------------

    def update(self, state: PartitionRegistration, min_isr: int, now_ms: int) -> bool:
        """Apply the committed partition state; True when the role or leader changed (a new leader epoch)."""
        if min_isr != self.min_isr:
            self.min_isr = min_isr
            if self.leader_state is not None:
                self._apply(self.leader_state.set_min_isr(min_isr, self.log.log_end_offset))
        if state.leader_epoch < self.leader_epoch or (
            state.leader_epoch == self.leader_epoch and state.partition_epoch <= self.partition_epoch
        ):
            return False
        new_epoch = state.leader_epoch > self.leader_epoch
        if new_epoch or state.replicas != self.replicas:
            # The leader's last word counted another leader's view or another replica set (an added replica has
            # reached nothing we know of): nothing is safe to remove until its next fetch answer.
            self._all_replicas_offset = 0
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.replicas = state.replicas
        self.isr = state.isr
        self.partition_epoch = state.partition_epoch
        if new_epoch:
            self._become(now_ms)
            return True
        if self.leader_state is not None:
            self._apply(
                self.leader_state.on_metadata(
                    state.partition_epoch, state.replicas, state.isr, self.log.log_end_offset, now_ms
                )
            )
            if len(self.isr) < self.min_isr:
                self._fail_acks(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
            self._complete_low_watermark_waiters()  # a lagging replica left the ISR
        return False

    def _become(self, now_ms: int) -> None:
        if self.leader_id == self.broker_id:
            self.log.start_leader_epoch(self.leader_epoch)
            self.leader_state = LeaderState(
                self.broker_id,
                self.leader_epoch,
                self.partition_epoch,
                self.replicas,
                self.isr,
                epoch_start_offset=self.log.log_end_offset,
                high_watermark=self.log.high_watermark,
                min_isr=self.min_isr,
                now_ms=now_ms,
            )
            logger.info("%s: leader at epoch %d, ISR %s", self, self.leader_epoch, list(self.isr))
            # A leader alone in the ISR holds all that is committed: its high watermark is its log end at once
            # (else a restarted single replica would answer OFFSET_NOT_AVAILABLE until its next append).
            self._apply(self.leader_state.on_append(self.log.log_end_offset))
        else:
            self.leader_state = None
            self._fail_acks(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            self._fail_low_watermark_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            logger.info("%s: following at epoch %d", self, self.leader_epoch)
        # Parked fetches re-check against the new role and answer with its error or data.
        self._wake(self._waiters)
        self._wake(self._replica_waiters)
        self._changed()

    # -- leader --------------------------------------------------------------------------------------------------

    def check_leader(self, client_epoch: int = -1) -> LeaderState:
        """The leader state, or the typed error a client must see when this replica cannot serve as leader."""
        if client_epoch >= 0:
            if client_epoch < self.leader_epoch:
                raise FencedLeaderEpochError(f"leader epoch {client_epoch} is older than {self.leader_epoch}")
            if client_epoch > self.leader_epoch:
                raise UnknownLeaderEpochError(f"leader epoch {client_epoch} is newer than {self.leader_epoch}")
        state = self.leader_state
        if state is None:
            raise NotLeaderOrFollowerError(f"broker {self.broker_id} does not lead {self.topic}-{self.partition}")
        return state

    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        max_message_bytes: int | None = None,
        acks: int = 1,
        now_ms: int | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification: VerificationGuard | None = None,
    ) -> AppendInfo:
        """Append a producer's batches; each must fit ``max_message_bytes``, by default the topic's
        max.message.bytes (the broker's message.max.bytes unless the topic overrides it). The topic's
        message.timestamp.type and compression.type are applied first (stamped at ``now_ms``, default the wall
        clock), so the log, and the followers copying it, hold the batches as the topic says. ``origin``
        COORDINATOR is the group coordinator's own transactional offset commits; ``verification`` is the produce
        path's KIP-890 guard (both: Log.append_as_leader)."""
        state = self.check_leader()
        if acks == -1 and len(self.isr) < self.min_isr:
            raise NotEnoughReplicasError(
                f"{self.topic}-{self.partition}: ISR {list(self.isr)} is smaller than min.insync.replicas "
                f"{self.min_isr}"
            )
        config = self.log.config
        records = rewrite_for_append(
            records,
            config.message_timestamp_type,
            config.compression_type,
            clock.wall_ms() if now_ms is None else now_ms,
        )
        info = self.log.append_as_leader(
            records, self.leader_epoch, max_message_bytes, origin=origin, verification=verification
        )
        self._wake(self._replica_waiters)
        self._changed()
        self._apply(state.on_append(self.log.log_end_offset))
        return info

    def wait_for_commit(self, offset: int) -> asyncio.Future:
        """A future of the error code for an acks=all batch ending before ``offset``: NONE once the high watermark
        reaches it, or why it never will at this epoch."""
        future = asyncio.get_running_loop().create_future()
        if self.log.high_watermark >= offset or self.ack_before_replication:
            future.set_result(ErrorCode.NONE)
        elif self.leader_state is None:
            future.set_result(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        else:
            self._acks.append((offset, future))
        return future

    def visible_high_watermark(self, client_epoch: int = -1) -> int:
        """The high watermark clients may see (consumer fetches, ListOffsets).

        A new leader starts with the high watermark it had as a follower, which lags the previous leader's; it
        catches up once its followers fetch at the new epoch. Until it reaches the start of this leader epoch it
        answers OFFSET_NOT_AVAILABLE (retriable), as Kafka does, so no client ever sees the end of the partition
        move backwards or committed records disappear."""
        state = self.check_leader(client_epoch)
        hw = self.log.high_watermark
        if hw < state.epoch_start_offset:
            raise OffsetNotAvailableError(
                f"{self.topic}-{self.partition}: high watermark {hw} is below {state.epoch_start_offset}, the start of"
                f" leader epoch {self.leader_epoch}"
            )
        return hw

    def read(self, offset: int, max_bytes: int, client_epoch: int = -1, as_file: bool = False) -> FetchData:
        """A consumer read: whole batches below the high watermark (OFFSET_NOT_AVAILABLE while a new leader's
        high watermark catches up, see ``visible_high_watermark``). ``as_file``: see ``Log.read``."""
        hw = self.visible_high_watermark(client_epoch)
        return self.log.read(offset, max_bytes, max_offset=hw, as_file=as_file, file_min_bytes=SENDFILE_MIN_BYTES)

    # -- transactions ---------------------------------------------------------------------------------------------

    def last_stable_offset(self, client_epoch: int = -1) -> int:
        """The end of what read_committed consumers may read: the high watermark clients may see, lowered to the
        first offset of a transaction not yet decided (or decided by a marker not yet replicated)."""
        return min(self.visible_high_watermark(client_epoch), self.log.last_stable_offset)

    def read_committed(
        self, offset: int, max_bytes: int, client_epoch: int = -1, as_file: bool = False
    ) -> CommittedRead:
        """A read_committed consumer's read: whole batches below the last stable offset and the aborted
        transactions among them. The offset only moves up, so reading after computing it is safe. ``as_file``:
        see ``Log.read`` (the slice is closed here if the aborted-transaction lookup fails)."""
        lso = self.last_stable_offset(client_epoch)
        data = self.log.read(offset, max_bytes, max_offset=lso, as_file=as_file, file_min_bytes=SENDFILE_MIN_BYTES)
        try:
            aborted = self.log.aborted_transactions(offset, min(data.next_offset, lso)) if len(data.records) else []
        except BaseException:
            if isinstance(data.records, FileSlice):
                data.records.close()
            raise
        return CommittedRead(data, lso, aborted)

    def append_marker(
        self, committed: bool, producer_id: int, producer_epoch: int, coordinator_epoch: int, now_ms: int | None = None
    ) -> AppendInfo:
        """Append a transaction's COMMIT or ABORT marker as the leader (the coordinator's WriteTxnMarkers). Like
        Kafka, a marker is an acks=all write: refused (NOT_ENOUGH_REPLICAS, retried by the coordinator) while the
        ISR is below min.insync.replicas."""
        state = self.check_leader()
        if len(self.isr) < self.min_isr:
            raise NotEnoughReplicasError(
                f"{self.topic}-{self.partition}: ISR {list(self.isr)} is smaller than min.insync.replicas "
                f"{self.min_isr}"
            )
        info = self.log.append_marker(
            committed,
            producer_id,
            producer_epoch,
            coordinator_epoch,
            self.leader_epoch,
            clock.wall_ms() if now_ms is None else now_ms,
        )
        self._wake(self._replica_waiters)
        self._changed()
        self._apply(state.on_append(self.log.log_end_offset))
        return info

    def read_for_follower(
        self,
        replica_id: int,
        fetch_offset: int,
        last_fetched_epoch: int,
        max_bytes: int,
        client_epoch: int,
        now_ms: int,
        log_start_offset: int = -1,
        durable_offset: int = -1,
        as_file: bool = False,
    ) -> FollowerRead:
        """A follower's fetch: check its log against ours, record its progress (its log end offset, and its log
        start and durable offsets as it reports them), read up to the log end offset. ``as_file``: see
        ``Log.read``."""
        state = self.check_leader(client_epoch)
        if replica_id not in self.replicas:
            raise NotLeaderOrFollowerError(f"broker {replica_id} is not a replica of {self.topic}-{self.partition}")
        log_ = self.log
        leo = log_.log_end_offset
        # A follower at our own leader epoch, not past our end, cannot diverge: our latest epoch is the one we lead
        # at (``_become``) and it ends at our log end. Only other epochs need the epoch cache (and its lock).
        if last_fetched_epoch != UNDEFINED_EPOCH and (last_fetched_epoch != self.leader_epoch or fetch_offset > leo):
            epoch, end = log_.end_offset_for_epoch(last_fetched_epoch)
            if epoch == UNDEFINED_EPOCH:
                epoch, end = last_fetched_epoch, log_.log_start_offset
            if epoch != last_fetched_epoch or end < fetch_offset:
                return FollowerRead(
                    None,
                    Divergence(epoch, end),
                    log_.high_watermark,
                    log_.log_start_offset,
                    log_.log_end_offset,
                )
        if fetch_offset > leo or fetch_offset < log_.log_start_offset:
            raise OffsetOutOfRangeError(
                f"fetch offset {fetch_offset} outside [{log_.log_start_offset}, {leo}] of {self.topic}-{self.partition}"
            )
        self._apply(state.on_follower_fetch(replica_id, fetch_offset, leo, now_ms, log_start_offset, durable_offset))
        self._complete_low_watermark_waiters()
        if fetch_offset == leo and not log_.offline and not log_.closed:
            # Caught up (the follower reporting its new position): nothing to read, so no read under the lock.
            data: FetchData = FetchData(b"", leo, leo, log_.high_watermark, log_.log_start_offset, leo)
        else:
            data = log_.read(fetch_offset, max_bytes, as_file=as_file, file_min_bytes=SENDFILE_MIN_BYTES)
        everyone = state.all_replicas_offset(log_.recovery_point)
        return FollowerRead(data, None, log_.high_watermark, log_.log_start_offset, leo, everyone)

    def follower_still_at(
        self,
        replica_id: int,
        fetch_offset: int,
        client_epoch: int,
        now_ms: int,
        log_start_offset: int = -1,
        durable_offset: int = -1,
    ) -> None:
        """A follower's fetch session round that did not read this partition (nothing changed since its last read):
        the follower still fetches from ``fetch_offset``, as a full fetch would have told, so its caught-up time
        moves on (``read_for_follower``'s bookkeeping without the read). Ignored when the session's view is not
        this leader's (the partition's next read answers the error)."""
        state = self.leader_state
        if state is None or client_epoch != self.leader_epoch or replica_id not in self.replicas:
            return
        leo = self.log.log_end_offset
        if self.log.log_start_offset <= fetch_offset <= leo:
            progress = state.on_follower_fetch(replica_id, fetch_offset, leo, now_ms, log_start_offset, durable_offset)
            self._apply(progress)

    # -- DeleteRecords -------------------------------------------------------------------------------------------

    def delete_records(self, offset: int) -> int:
        """Advance the log start offset to ``offset`` (``HIGH_WATERMARK``: the high watermark), as the leader;
        returns the offset asked for. Only committed records can be deleted: beyond the high watermark is
        OFFSET_OUT_OF_RANGE. An offset at or below the log start changes nothing. Followers learn the new log start
        from their fetch answers (woken now rather than at their long poll's end) and advance theirs. A new leader
        whose high watermark still catches up answers OFFSET_NOT_AVAILABLE (retriable), as for ListOffsets, rather
        than trim to, or refuse against, a high watermark older than the one clients have seen."""
        hw = self.visible_high_watermark()
        target = hw if offset == HIGH_WATERMARK else offset
        if target < 0 or target > hw:
            raise OffsetOutOfRangeError(
                f"{self.topic}-{self.partition}: cannot delete records up to {offset}: the high watermark is {hw}"
            )
        if self.log.increment_log_start_offset(target):
            logger.info("%s: log start offset advanced to %d (DeleteRecords)", self, target)
            self._wake(self._replica_waiters)
            self._changed()
        return target

    def low_watermark(self) -> int:
        """The lowest log start offset over the ISR, as the leader knows it (-1 when some member is not known)."""
        return self.check_leader().low_watermark(self.log.log_start_offset)

    def wait_for_low_watermark(self, offset: int) -> asyncio.Future[LowWatermark]:
        """A future of the answer to a DeleteRecords up to ``offset``: NONE with the low watermark reached, once
        every ISR replica's log starts at or after it; NOT_LEADER_OR_FOLLOWER if this replica stops leading first.
        The low watermark is the one of that instant: a replica rejoining the ISR afterwards, which has not yet
        reported its new log start, must not make the answer look as if the records were still there."""
        future: asyncio.Future[LowWatermark] = asyncio.get_running_loop().create_future()
        state = self.leader_state
        if state is None:
            future.set_result(LowWatermark(ErrorCode.NOT_LEADER_OR_FOLLOWER))
        elif (low := state.low_watermark(self.log.log_start_offset)) >= offset:
            future.set_result(LowWatermark(ErrorCode.NONE, low))
        else:
            self._low_watermark_waiters.append((offset, future))
        return future

    def _complete_low_watermark_waiters(self) -> None:
        if not self._low_watermark_waiters or self.leader_state is None:
            return
        low = self.leader_state.low_watermark(self.log.log_start_offset)
        waiting = []
        for offset, future in self._low_watermark_waiters:
            if future.done():
                continue
            if offset <= low:
                future.set_result(LowWatermark(ErrorCode.NONE, low))
            else:
                waiting.append((offset, future))
        self._low_watermark_waiters = waiting

    def _fail_low_watermark_waiters(self, code: int) -> None:
        waiters, self._low_watermark_waiters = self._low_watermark_waiters, []
        for _, future in waiters:
            if not future.done():
                future.set_result(LowWatermark(code))

    def on_leader_stall(self, now_ms: int) -> None:
        if self.leader_state is not None:
            restarted = self.leader_state.on_stall(now_ms)
            if restarted is not None:
                logger.info("%s", restarted.describe(self.name))

    def check_lagging(self, now_ms: int, lag_max_ms: int) -> None:
        if self.leader_state is not None:
            self._apply(self.leader_state.check_lagging(self.log.log_end_offset, now_ms, lag_max_ms))

    def isr_change_failed(self, change: IsrChange) -> None:
        if self.leader_state is not None and self.leader_state.pending == change:
            self._apply(self.leader_state.on_change_failed(self.log.log_end_offset))

    def follower_lag(self) -> dict[int, int]:
        return {} if self.leader_state is None else self.leader_state.follower_lag(self.log.log_end_offset)

    def _apply(self, progress: Progress) -> None:
        for event in progress.events:
            logger.info("%s", event.describe(self.name))
        if progress.high_watermark is not None:
            self.log.high_watermark = progress.high_watermark
            self._wake(self._waiters)
            self._changed(wake_replica=False)  # consumers see new records; followers learn it with their next data
            self._complete_acks()
        if progress.isr_change is not None:
            self.request_isr_change(self, progress.isr_change)

    def _complete_acks(self) -> None:
        hw = self.log.high_watermark
        if not self._acks:
            return
        waiting = []
        for offset, future in self._acks:
            if offset <= hw:
                if not future.done():
                    future.set_result(ErrorCode.NONE)
            else:
                waiting.append((offset, future))
        self._acks = waiting

    def _fail_acks(self, code: int) -> None:
        acks, self._acks = self._acks, []
        for _, future in acks:
            if not future.done():
                future.set_result(code)

    # -- follower ------------------------------------------------------------------------------------------------

    def fetch_position(self) -> tuple[int, int]:
        """(fetch offset, last fetched epoch) for the next fetch from the leader."""
        epoch = self.log.latest_epoch
        return self.log.log_end_offset, UNDEFINED_EPOCH if epoch is None else epoch

    def truncate_to_leader(self, diverging: Divergence) -> int:
        """Truncate where the leader says the logs diverge: to the smaller of the leader's end offset for the
        epoch and our own end offset for it. Returns the new log end offset."""
        local_epoch, local_end = self.log.end_offset_for_epoch(diverging.epoch)
        target = diverging.end_offset if local_epoch == UNDEFINED_EPOCH else min(diverging.end_offset, local_end)
        if target < self.log.log_start_offset:
            self.log.truncate_fully_and_start_at(max(target, 0))
        elif self.log.truncate_to(target):
            logger.info("%s: truncated to %d (diverged at epoch %d)", self, target, diverging.epoch)
        return self.log.log_end_offset

    def append_as_follower(
        self,
        records: bytes,
        leader_high_watermark: int,
        leader_log_start: int = -1,
        all_replicas_offset: int = -1,
        fetch_offset: int | None = None,
    ) -> AppendInfo | None:
        """Append what the leader sent in answer to a fetch from ``fetch_offset`` (given, the records may skip
        offsets the leader's cleaner removed: Log.append_as_follower), take its high watermark as far as our log
        reaches, and its log start offset (DeleteRecords, retention on the leader) as far as our high watermark,
        as Kafka's followers do; keep the offset every replica holds durably for our cleaner
        (``tombstone_horizon``)."""
        info = self.log.append_as_follower(records, fetch_offset) if records else None
        if all_replicas_offset >= 0:
            self._all_replicas_offset = all_replicas_offset
        self.log.high_watermark = min(leader_high_watermark, self.log.log_end_offset)
        start = min(leader_log_start, self.log.high_watermark)
        if start > self.log.log_start_offset and self.log.increment_log_start_offset(start):
            logger.info("%s: log start offset advanced to the leader's %d", self, start)
        return info

    def reset_to_leader_start(self, leader_log_start: int) -> None:
        """Our fetch offset is below the leader's log start (retention deleted it there): start over there."""
        logger.info("%s: restarting the log at the leader's log start %d", self, leader_log_start)
        self.log.truncate_fully_and_start_at(leader_log_start)

    # -- purgatory -----------------------------------------------------------------------------------------------

    def add_waiter(self, future: asyncio.Future, replica: bool = False) -> None:
        (self._replica_waiters if replica else self._waiters).append(future)

    def remove_waiter(self, future: asyncio.Future, replica: bool = False) -> None:
        waiters = self._replica_waiters if replica else self._waiters
        if future in waiters:
            waiters.remove(future)

    @property
    def waiter_count(self) -> int:
        """Parked fetches (consumers and followers)."""
        return len(self._waiters) + len(self._replica_waiters)

    @property
    def acks_waiter_count(self) -> int:
        """Parked acks=all produces."""
        return len(self._acks)

    def close(self) -> None:
        """The replica is going away (deleted or moved): release everything parked on it."""
        self.leader_state = None
        self._fail_acks(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self._fail_low_watermark_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self._wake(self._waiters)
        self._wake(self._replica_waiters)
        self._changed()

    def watch(self, session: SessionWatcher) -> None:
        self._sessions.add(session)

    def unwatch(self, session: SessionWatcher) -> None:
        self._sessions.discard(session)

    def _changed(self, wake_replica: bool = True) -> None:
        """Tell the fetch sessions holding this partition that a fetch of it may find something new
        (``wake_replica``: see FetchSession.changed)."""
        if not self._sessions:
            return
        key = (self.topic, self.partition)
        for session in list(self._sessions):
            if session.closed:
                self._sessions.discard(session)
            else:
                session.changed(key, wake_replica)

    @staticmethod
    def _wake(waiters: list[asyncio.Future]) -> None:
        if not waiters:
            return
        pending = waiters[:]
        waiters.clear()
        for future in pending:
            if not future.done():
                future.set_result(None)
