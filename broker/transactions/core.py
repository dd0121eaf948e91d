"""The transaction state machine of one ``__transaction_state`` partition, without I/O.

Requests come in with a token (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn), with the clock's
``now``; what to do comes out as actions: ``Persist`` a new metadata record (acks=all), ``WriteMarkers`` to the
partitions of a transaction, ``Reply`` to a token. The outcomes come back in: ``on_persisted`` and
``on_markers_written``. A change takes effect only once its record is durable, so ``txns`` is always what the
partition's log says, and a coordinator that loads the log resumes exactly there (``replay`` then ``resume``).

The rules (Kafka's, with KIP-890's epoch bump at every transaction end):

- While a record is being written for an id, every request for it answers CONCURRENT_TRANSACTIONS (Kafka's
  pending state), as do AddPartitions/AddOffsets/InitProducerId while its markers are being written (Prepare*).
- EndTxn at epoch E of an Ongoing transaction writes Prepare* with epoch E+1 (last epoch E) and answers (id, E+1);
  from epoch 32766 on, the producer moves to a new producer id at epoch 0 instead (the markers still go to the old
  id at 32767). Repeating that EndTxn (epoch E, same result) succeeds again; any other stale epoch is fenced.
- EndTxn with ``bump_epoch=False`` is the rule before KIP-890, for clients that send EndTxn below v5: Prepare*
  keeps epoch E and the answer is (id, E). Repeated, it answers CONCURRENT_TRANSACTIONS while the markers are
  written and succeeds once the transaction is complete; the other result is an invalid state.
- InitProducerId bumps the epoch; on an Ongoing transaction it first fences it: Prepare* abort with the bumped
  epoch and no retryable last epoch, answering CONCURRENT_TRANSACTIONS until the abort is complete. A timed-out
  transaction is aborted the same way. From epoch 32766 on it moves the producer to a new producer id at epoch 0.
  A producer presenting its own id and epoch (KIP-360) that sends the same InitProducerId again while the id is
  still Empty gets the same answer, also after a move to a new producer id (the old id and epoch are recorded).
- Verification (AddPartitionsToTxn verify_only) answers whether a partition is in the Ongoing transaction at that
  epoch: TRANSACTION_ABORTABLE if not, PRODUCER_FENCED for an older epoch, CONCURRENT_TRANSACTIONS (retriable)
  while the markers of the transaction at that epoch are being written (Prepare*), as AddPartitionsToTxn.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from odradek.broker.groups.partitioner import offsets_partition_for
from odradek.broker.groups.records import OFFSETS_TOPIC
from odradek.broker.transactions.metadata import (
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TxnMetadata,
    TxnState,
    can_transition,
)
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition

NONE = int(ErrorCode.NONE)


@dataclass(frozen=True, slots=True)
class TxnCoreConfig:
    """transaction.max.timeout.ms and transactional.id.expiration.ms."""

    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 604_800_000


@dataclass(frozen=True, slots=True)
class Persist:
    """Append this record (None: a tombstone) with acks=all, then call ``on_persisted(persist_id, error)``."""

    persist_id: int
    transactional_id: str
    metadata: TxnMetadata | None


@dataclass(frozen=True, slots=True)
class WriteMarkers:
    """Write COMMIT/ABORT markers for the producer to every partition, then call ``on_markers_written``."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class Reply:
    """The answer to a request's token: an error code and, when it succeeded, the producer id and epoch."""

    token: int
    error: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


Action = Persist | WriteMarkers | Reply


@dataclass
class Output:
    """Actions in the order to carry out; ``events`` for the shell's log; ``completed`` one bool per transaction
    that reached Complete* (True: committed)."""

    actions: list[Action] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    completed: list[bool] = field(default_factory=list)

    def reply(
        self, token: int, error: int, producer_id: int = NO_PRODUCER_ID, epoch: int = NO_PRODUCER_EPOCH
    ) -> Output:
        self.actions.append(Reply(token, int(error), producer_id, epoch))
        return self

    def extend(self, other: Output) -> Output:
        self.actions += other.actions
        self.events += other.events
        self.completed += other.completed
        return self


@dataclass(frozen=True, slots=True)
class _Pending:
    persist_id: int
    target: TxnMetadata | None
    token: int | None


def persist_error(error: int) -> int:
    """What a client is told when its record could not be written (Kafka's mapping)."""
    if error in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
    ):
        return int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return int(ErrorCode.NOT_COORDINATOR)
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return int(ErrorCode.UNKNOWN_SERVER_ERROR)
    return int(error)


def epoch_exhausted(md: TxnMetadata) -> bool:
    """The next bump would reach the epoch only markers may use: the producer needs a new producer id."""
    return md.producer_epoch >= MAX_PRODUCER_EPOCH - 1


def _stale_epoch_error(epoch: int, current: int) -> int:
    return int(ErrorCode.PRODUCER_FENCED if epoch < current else ErrorCode.INVALID_PRODUCER_EPOCH)


class TxnCore:
    """The transactional ids of one ``__transaction_state`` partition (see the module docstring)."""

    def __init__(self, config: TxnCoreConfig = TxnCoreConfig()) -> None:
        self.config = config
        self.txns: dict[str, TxnMetadata] = {}
        self._pending: dict[str, _Pending] = {}
        self._by_persist: dict[int, str] = {}
        self._markers_done: set[str] = set()  # Prepare* ids whose markers are written, Complete* not yet durable
        self._ids = itertools.count(1)

    # -- loading ---------------------------------------------------------------------------------------------------

    def replay(self, transactional_id: str, md: TxnMetadata | None) -> None:
        """A record read from the partition's log, in log order (the last one of an id wins)."""
        if md is None:
            self.txns.pop(transactional_id, None)
        else:
            self.txns[transactional_id] = md

    def resume(self) -> Output:
        """After loading: write the markers of every transaction the previous coordinator left in Prepare*."""
        out = Output()
        for md in self.txns.values():
            if md.state.preparing:
                out.actions.append(self._markers(md))
                out.events.append(f"transaction {md.transactional_id!r}: resending {md.state.value} markers")
        return out

    # -- views -----------------------------------------------------------------------------------------------------

    def pending(self, transactional_id: str) -> bool:
        return transactional_id in self._pending

    def ongoing(self) -> int:
        return sum(md.state is TxnState.ONGOING for md in self.txns.values())

    def needs_producer_id(self, transactional_id: str, *, ending: bool = False) -> bool:
        """Whether an InitProducerId (or with ``ending`` an EndTxn) for the id may have to hand out a new producer
        id (a new id, or an exhausted epoch): the shell then obtains one before the call."""
        md = self.txns.get(transactional_id)
        if ending:
            return md is not None and md.state is TxnState.ONGOING and epoch_exhausted(md)
        return md is None or epoch_exhausted(md)

    def completions_to_retry(self) -> bool:
        """Some transaction has its markers written but its Complete* record not (a failed write)."""
        return any(txn_id not in self._pending for txn_id in self._markers_done)

    # -- requests --------------------------------------------------------------------------------------------------

    def init_producer_id(
        self,
        token: int,
        transactional_id: str,
        timeout_ms: int,
        producer_id: int,
        producer_epoch: int,
        now: int,
        fresh_producer_id: int | None = None,
    ) -> Output:
        """InitProducerId with a transactional id; ``producer_id``/``producer_epoch`` are -1 or the producer's
        current ones (KIP-360: a producer bumping its own epoch)."""
        out = Output()
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            return out.reply(token, ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        if transactional_id in self._pending:
            return out.reply(token, ErrorCode.CONCURRENT_TRANSACTIONS)
        md = self.txns.get(transactional_id)
        if md is None:
            if fresh_producer_id is None:
                return out.reply(token, ErrorCode.CONCURRENT_TRANSACTIONS)
            target = TxnMetadata(
                transactional_id, fresh_producer_id, NO_PRODUCER_ID, 0, NO_PRODUCER_EPOCH, timeout_ms,
                TxnState.EMPTY, frozenset(), -1, now,
            )  # fmt: skip
            return self._persist(out, target, token)
        if producer_id != NO_PRODUCER_ID:
            if self._is_init_retry(md, producer_id, producer_epoch):
                return out.reply(token, NONE, md.producer_id, md.producer_epoch)
            if (producer_id, producer_epoch) != (md.producer_id, md.producer_epoch):
                if producer_id == md.producer_id:
                    return out.reply(token, _stale_epoch_error(producer_epoch, md.producer_epoch))
                if producer_id == md.last_producer_id:
                    return out.reply(token, ErrorCode.PRODUCER_FENCED)
                return out.reply(token, ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if md.state is TxnState.ONGOING:
            self._fence(out, md, now, "fenced by InitProducerId")
            return out.reply(token, ErrorCode.CONCURRENT_TRANSACTIONS)
        if not md.state.idle:
            return out.reply(token, ErrorCode.CONCURRENT_TRANSACTIONS)
        if epoch_exhausted(md):
            if fresh_producer_id is None:
                return out.reply(token, ErrorCode.CONCURRENT_TRANSACTIONS)
            # A producer that presented its own id and exhausted epoch (KIP-360) may send this again if the answer
            # is lost: that epoch is recorded (the old id is) so that the retry is recognised (``_is_init_retry``),
            # as Kafka's prepareProducerIdRotation does. Without an id presented (a new producer instance), none is.
            target = replace(
                md,
                producer_id=fresh_producer_id,
                last_producer_id=md.producer_id,
                producer_epoch=0,
                last_producer_epoch=md.producer_epoch if producer_id != NO_PRODUCER_ID else NO_PRODUCER_EPOCH,
            )
        else:
            # Only a producer that presented its id and epoch may retry this bump: recording the epoch for a new
            # instance (none presented) would let the instance it fences, retrying with that epoch, be answered
            # with the new instance's epoch.
            last = md.producer_epoch if producer_id != NO_PRODUCER_ID else NO_PRODUCER_EPOCH
            target = replace(md, producer_epoch=md.producer_epoch + 1, last_producer_epoch=last)
        target = replace(
            target, state=TxnState.EMPTY, timeout_ms=timeout_ms, partitions=frozenset(), txn_start_ms=-1,
            last_update_ms=now,
        )  # fmt: skip
        return self._persist(out, target, token)

    @staticmethod
    def _is_init_retry(md: TxnMetadata, producer_id: int, producer_epoch: int) -> bool:
        """The KIP-360 InitProducerId that brought the id to this Empty state, sent again (its answer was lost): it
        presented the epoch recorded as the last epoch, with the current producer id, or, when it moved the
        producer to a new id (an exhausted epoch: the new id starts at epoch 0, while any other bump leaves 1 or
        more), with the previous one."""
        if md.state is not TxnState.EMPTY or md.last_producer_epoch < 0 or producer_epoch != md.last_producer_epoch:
            return False
        rotated = md.producer_epoch == 0
        return producer_id == (md.last_producer_id if rotated else md.producer_id)

    def _check_producer(self, md: TxnMetadata | None, producer_id: int, producer_epoch: int) -> int:
        """The error of a request from a producer that is not the id's current one, else NONE."""
        if md is None or md.producer_id != producer_id:
            return int(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if producer_epoch != md.producer_epoch:
            return _stale_epoch_error(producer_epoch, md.producer_epoch)
        return NONE

    def add_partitions(
        self,
        token: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        now: int,
    ) -> Output:
        """AddPartitionsToTxn: all the partitions join the transaction (beginning it if none is open), or none."""
        out = Output()
        md = self.txns.get(transactional_id)
        error = self._check_producer(md, producer_id, producer_epoch)
        if error != NONE or md is None:
            return out.reply(token, error)
        if transactional_id in self._pending or md.state.preparing or md.state is TxnState.PREPARE_EPOCH_FENCE:
            return out.reply(token, ErrorCode.CONCURRENT_TRANSACTIONS)
        added = frozenset(partitions)
        if md.state is TxnState.ONGOING and added <= md.partitions:
            return out.reply(token, NONE, md.producer_id, md.producer_epoch)
        if not (md.state is TxnState.ONGOING or md.state.idle):
            return out.reply(token, ErrorCode.INVALID_TXN_STATE)
        target = replace(
            md,
            state=TxnState.ONGOING,
            partitions=md.partitions | added,
            txn_start_ms=md.txn_start_ms if md.state is TxnState.ONGOING else now,
            last_update_ms=now,
        )
        return self._persist(out, target, token)

    def add_offsets(
        self,
        token: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        group_id: str,
        offsets_partitions: int,
        now: int,
    ) -> Output:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition (among ``offsets_partitions``) joins the
        transaction, so its markers also settle the offsets the group coordinator holds for it."""
        tp = TopicPartition(OFFSETS_TOPIC, offsets_partition_for(group_id, offsets_partitions))
        return self.add_partitions(token, transactional_id, producer_id, producer_epoch, [tp], now)

    def verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """AddPartitionsToTxn with verify_only (a partition leader asking): NONE for each partition in the
        producer's Ongoing transaction at this epoch, TRANSACTION_ABORTABLE for the others. While the markers of
        the producer's transaction are being written (Prepare* durable), every partition answers
        CONCURRENT_TRANSACTIONS, as AddPartitionsToTxn does and as Kafka answers: the leader refuses the batch with
        a retriable error and the producer sends it again once the transaction is complete. A transaction whose
        end record is still being written no longer counts as Ongoing (TRANSACTION_ABORTABLE)."""
        md = self.txns.get(transactional_id)
        error = self._check_producer(md, producer_id, producer_epoch)
        if error != NONE or md is None:
            return dict.fromkeys(partitions, error)
        if md.state.preparing:
            return dict.fromkeys(partitions, int(ErrorCode.CONCURRENT_TRANSACTIONS))
        pending = self._pending.get(transactional_id)
        open_ = md.state is TxnState.ONGOING and (
            pending is None or (pending.target is not None and pending.target.state is TxnState.ONGOING)
        )
        abortable = int(ErrorCode.TRANSACTION_ABORTABLE)
        return {tp: NONE if open_ and tp in md.partitions else abortable for tp in partitions}

    def end_txn(
        self,
        token: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        now: int,
        fresh_producer_id: int | None = None,
        *,
        bump_epoch: bool = True,
    ) -> Output:
        """EndTxn: answered once Prepare* is durable, with the producer id and epoch of the next transaction.
        ``bump_epoch=False`` keeps the epoch (see the module docstring)."""
        out = Output()
        md = self.txns.get(transactional_id)
        if md is None:
            return out.reply(token, ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if not bump_epoch:
            return self._end_keeping_epoch(out, token, md, producer_id, producer_epoch, committed, now)
        if producer_id == md.producer_id and producer_epoch == md.producer_epoch:
            if transactional_id in self._pending or md.state.preparing:
                return out.reply(token, ErrorCode.CONCURRENT_TRANSACTIONS)
            if md.state is not TxnState.ONGOING:
                return out.reply(token, ErrorCode.INVALID_TXN_STATE)
            state = TxnState.PREPARE_COMMIT if committed else TxnState.PREPARE_ABORT
            if epoch_exhausted(md):
                if fresh_producer_id is None:
                    return out.reply(token, ErrorCode.CONCURRENT_TRANSACTIONS)
                target = replace(
                    md, state=state, producer_id=fresh_producer_id, last_producer_id=md.producer_id,
                    producer_epoch=0, last_producer_epoch=md.producer_epoch, last_update_ms=now,
                )  # fmt: skip
            else:
                target = replace(
                    md, state=state, producer_epoch=md.producer_epoch + 1, last_producer_epoch=md.producer_epoch,
                    last_update_ms=now,
                )  # fmt: skip
            return self._persist(out, target, token)
        if self._is_retry(md, producer_id, producer_epoch):
            done = (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)
            if (md.state in done) == committed:
                return out.reply(token, NONE, md.producer_id, md.producer_epoch)
            return out.reply(token, ErrorCode.INVALID_TXN_STATE)
        return out.reply(token, self._other_producer_error(md, producer_id, producer_epoch))

    def _end_keeping_epoch(
        self, out: Output, token: int, md: TxnMetadata, producer_id: int, producer_epoch: int, committed: bool, now: int
    ) -> Output:
        """EndTxn before KIP-890: the transaction ends at the epoch it ran at. ``last_producer_epoch`` is cleared,
        as no bump happened that a later request could claim to retry."""
        if (producer_id, producer_epoch) != (md.producer_id, md.producer_epoch):
            return out.reply(token, self._other_producer_error(md, producer_id, producer_epoch))
        if md.transactional_id in self._pending:
            return out.reply(token, ErrorCode.CONCURRENT_TRANSACTIONS)
        if md.state is TxnState.ONGOING:
            state = TxnState.PREPARE_COMMIT if committed else TxnState.PREPARE_ABORT
            target = replace(md, state=state, last_producer_epoch=NO_PRODUCER_EPOCH, last_update_ms=now)
            return self._persist(out, target, token)
        same = (md.state in (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)) == committed
        if md.state.preparing and same:
            return out.reply(token, ErrorCode.CONCURRENT_TRANSACTIONS)
        if md.state.complete and same:
            return out.reply(token, NONE, md.producer_id, md.producer_epoch)
        return out.reply(token, ErrorCode.INVALID_TXN_STATE)

    @staticmethod
    def _other_producer_error(md: TxnMetadata, producer_id: int, producer_epoch: int) -> int:
        """The error for a request from a producer id or epoch other than the id's current ones."""
        if producer_id == md.producer_id:
            return _stale_epoch_error(producer_epoch, md.producer_epoch)
        if producer_id == md.last_producer_id:
            return int(ErrorCode.PRODUCER_FENCED)
        return int(ErrorCode.INVALID_PRODUCER_ID_MAPPING)

    @staticmethod
    def _is_retry(md: TxnMetadata, producer_id: int, producer_epoch: int) -> bool:
        """The EndTxn that produced this Prepare*/Complete* state, sent again (KIP-890's retry detection)."""
        if not (md.state.preparing or md.state.complete) or md.last_producer_epoch < 0:
            return False
        expected = md.last_producer_id if md.overflowed else md.producer_id
        return producer_id == expected and producer_epoch == md.last_producer_epoch

    # -- timers ----------------------------------------------------------------------------------------------------

    def abort_timed_out(self, now: int) -> Output:
        """Abort every Ongoing transaction older than its timeout, fencing its producer (a non-retryable bump)."""
        out = Output()
        for md in list(self.txns.values()):
            if (
                md.state is TxnState.ONGOING
                and md.transactional_id not in self._pending
                and md.txn_start_ms + md.timeout_ms <= now
            ):
                self._fence(out, md, now, f"timed out after {md.timeout_ms} ms")
        return out

    def expire_ids(self, now: int) -> Output:
        """Tombstones for ids with no transaction that were not used for transactional.id.expiration.ms."""
        out = Output()
        for txn_id, md in list(self.txns.items()):
            if (
                md.state.idle
                and txn_id not in self._pending
                and md.last_update_ms + self.config.id_expiration_ms <= now
            ):
                self._persist(out, None, None, txn_id)
                out.events.append(f"transactional id {txn_id!r} expired")
        return out

    def retry_completions(self, now: int) -> Output:
        """Write Complete* again for transactions whose markers are written but whose Complete* write failed."""
        out = Output()
        for txn_id in sorted(self._markers_done):
            md = self.txns.get(txn_id)
            if md is not None and md.state.preparing and txn_id not in self._pending:
                self._complete(out, md, now)
        return out

    def tick(self, now: int) -> Output:
        return self.abort_timed_out(now).extend(self.retry_completions(now)).extend(self.expire_ids(now))

    # -- outcomes --------------------------------------------------------------------------------------------------

    def on_persisted(self, persist_id: int, error: int, now: int) -> Output:
        out = Output()
        txn_id = self._by_persist.pop(persist_id, None)
        if txn_id is None:
            return out
        pending = self._pending.pop(txn_id)
        target = pending.target
        if error != NONE:
            out.events.append(f"transaction {txn_id!r}: write failed ({error})")
            if pending.token is not None:
                out.reply(pending.token, persist_error(error))
            return out
        if target is None:
            self.txns.pop(txn_id, None)
            self._markers_done.discard(txn_id)
            return out
        old = self.txns.get(txn_id)
        self.txns[txn_id] = target
        if old is None or old.state is not target.state:
            out.events.append(
                f"transaction {txn_id!r}: {old.state.value if old else 'new'} -> {target.state.value}"
                f" (producer {target.producer_id} epoch {target.producer_epoch})"
            )
        if pending.token is not None:
            out.reply(pending.token, NONE, target.producer_id, target.producer_epoch)
        if target.state.preparing:
            out.actions.append(self._markers(target))
        elif target.state.complete:
            self._markers_done.discard(txn_id)
            out.completed.append(target.state is TxnState.COMPLETE_COMMIT)
        return out

    def on_markers_written(self, transactional_id: str, producer_id: int, producer_epoch: int, now: int) -> Output:
        """Every partition's leader has the markers: write Complete*. Ignored unless the id is still in that
        Prepare* (a late report for an older transaction changes nothing)."""
        out = Output()
        md = self.txns.get(transactional_id)
        if (
            md is None
            or not md.state.preparing
            or md.marker_producer != (producer_id, producer_epoch)
            or transactional_id in self._markers_done
        ):
            return out
        self._markers_done.add(transactional_id)
        if transactional_id not in self._pending:
            self._complete(out, md, now)
        return out

    # -- internals -------------------------------------------------------------------------------------------------

    def _persist(self, out: Output, target: TxnMetadata | None, token: int | None, txn_id: str = "") -> Output:
        txn_id = target.transactional_id if target is not None else txn_id
        current = self.txns.get(txn_id)
        if target is not None and current is not None:
            assert can_transition(current.state, target.state), (current.state, target.state)
        persist_id = next(self._ids)
        self._pending[txn_id] = _Pending(persist_id, target, token)
        self._by_persist[persist_id] = txn_id
        out.actions.append(Persist(persist_id, txn_id, target))
        return out

    def _fence(self, out: Output, md: TxnMetadata, now: int, why: str) -> None:
        target = replace(
            md,
            state=TxnState.PREPARE_ABORT,
            producer_epoch=md.producer_epoch + 1,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            last_update_ms=now,
        )
        out.events.append(
            f"transaction {md.transactional_id!r} aborted, producer {md.producer_id} epoch {md.producer_epoch}: {why}"
        )
        self._persist(out, target, None)

    def _complete(self, out: Output, md: TxnMetadata, now: int) -> None:
        state = TxnState.COMPLETE_COMMIT if md.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        # The start time stays: Kafka's prepareComplete keeps it, so DescribeTransactions shows the last one's.
        self._persist(out, replace(md, state=state, partitions=frozenset(), last_update_ms=now), None)

    @staticmethod
    def _markers(md: TxnMetadata) -> WriteMarkers:
        pid, epoch = md.marker_producer
        return WriteMarkers(md.transactional_id, pid, epoch, md.state is TxnState.PREPARE_COMMIT, md.partitions)
