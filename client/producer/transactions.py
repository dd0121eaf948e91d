"""The transactional producer's state machine (Kafka's TransactionManager), without I/O.

It decides; the asyncio shell (txn_coordinator.py) and the sender do the requests. The shell asks it for the next
request, sends it, and hands back the response; each ``on_*`` answers with an ``Outcome``: done, retry after the
backoff, retry after finding the coordinator again, or an error that moved the producer to ABORTABLE_ERROR (the
application aborts and may go on) or FATAL_ERROR (the producer is fenced or misconfigured: close it). ``error``
then holds the exception to raise.

A partition's batches are not drained until the coordinator has added the partition to the transaction
(``send_allowed``): the partition leader would otherwise refuse them (KIP-890 verification). Every transaction end
answers with the producer id and epoch for the next one (the epoch bumped, KIP-890): the producer's sequences
restart at 0 under it, so a delayed request of this transaction can never land in the next.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from odradek.client.errors import (
    CommitFailedError,
    ErrorCode,
    InvalidTxnStateError,
    OdradekError,
    ProducerFencedError,
    TransactionAbortableError,
    error_for_code,
    error_name,
)
from odradek.client.group_requests import commit_topics
from odradek.client.structs import GroupMetadata, OffsetAndMetadata, TopicPartition
from odradek.proto import broker_pb2 as pb
from odradek.proto import group_pb2 as gpb
from odradek.proto import transaction_pb2 as tpb


class TransactionAbortedError(OdradekError):
    """The record was dropped unsent because the application aborted its transaction (Kafka's
    TransactionAbortedException). Raised by the client only, never sent on the wire."""

    code = ErrorCode.TRANSACTION_ABORTABLE

    @property
    def retriable(self) -> bool:
        return False


class TxnState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


S = TxnState
# Allowed transitions (any state may also go to FATAL_ERROR). A state may "move" to itself where an operation that
# timed out is called again and resumes (init, commit, abort), or a second error arrives while aborting is due.
TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    S.UNINITIALIZED: frozenset({S.INITIALIZING}),
    S.INITIALIZING: frozenset({S.INITIALIZING, S.READY}),
    S.READY: frozenset({S.IN_TRANSACTION}),
    S.IN_TRANSACTION: frozenset({S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION, S.ABORTABLE_ERROR}),
    S.COMMITTING_TRANSACTION: frozenset({S.COMMITTING_TRANSACTION, S.READY, S.ABORTABLE_ERROR}),
    S.ABORTING_TRANSACTION: frozenset({S.ABORTING_TRANSACTION, S.READY}),
    S.ABORTABLE_ERROR: frozenset({S.ABORTABLE_ERROR, S.ABORTING_TRANSACTION}),
    S.FATAL_ERROR: frozenset(),
}


class Outcome(enum.Enum):
    OK = "ok"
    RETRY = "retry"  # after retry.backoff.ms, to the same coordinator
    FIND_COORDINATOR = "find_coordinator"  # after the backoff, to the coordinator found again
    ABORTABLE = "abortable"  # the producer is in ABORTABLE_ERROR; ``error`` says why
    FATAL = "fatal"  # the producer is in FATAL_ERROR; ``error`` says why


# A producer of the same transactional id took over, or the coordinator ended this one's transaction and bumped the
# epoch (transaction.timeout.ms): this producer is a zombie, whichever of these codes says so.
FENCING_CODES = frozenset(
    {
        ErrorCode.PRODUCER_FENCED,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.INVALID_PRODUCER_ID_MAPPING,
        ErrorCode.TRANSACTION_COORDINATOR_FENCED,
    }
)
FIND_COORDINATOR_CODES = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
RETRY_CODES = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,  # metadata of a new topic not everywhere yet
    }
)
# TxnOffsetCommit: the consumer that read the offsets is no longer the group's member of that generation (KIP-447).
GENERATION_CODES = frozenset(
    {ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.REBALANCE_IN_PROGRESS}
)

_WORKING = (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION)


def classify(code: int) -> Outcome:
    """The default split of a coordinator's error code; each request adjusts it where Kafka does."""
    if code == ErrorCode.NONE:
        return Outcome.OK
    if code in FENCING_CODES:
        return Outcome.FATAL
    if code in FIND_COORDINATOR_CODES:
        return Outcome.FIND_COORDINATOR
    if code in RETRY_CODES:
        return Outcome.RETRY
    return Outcome.ABORTABLE


def fencing_error(code: int, what: str) -> ProducerFencedError:
    return ProducerFencedError(
        f"{what}: {error_name(code)}: another producer with this transactional.id took over, or the coordinator "
        "ended the transaction (transaction.timeout.ms); close this producer"
    )


def _topics(partitions: set[TopicPartition]) -> list[tpb.TxnTopic]:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return [tpb.TxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()]


class TransactionManager:
    def __init__(self, transactional_id: str, timeout_ms: int) -> None:
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self.state = S.UNINITIALIZED
        self.producer_id = -1
        self.epoch = -1
        self.error: OdradekError | None = None  # why the producer is in ABORTABLE_ERROR or FATAL_ERROR
        self.partitions: set[TopicPartition] = set()  # added to the ongoing transaction
        self.pending: set[TopicPartition] = set()  # batches wait for them to be added
        self.adding: set[TopicPartition] = set()  # in the AddPartitionsToTxn in flight
        self.groups: set[str] = set()  # groups whose offsets are in the transaction (AddOffsetsToTxn done)
        self.pending_offsets: dict[TopicPartition, OffsetAndMetadata] = {}  # TxnOffsetCommit not yet acknowledged

    # ---- states ----

    def _transition(self, target: TxnState, error: OdradekError | None = None) -> None:
        if target is not S.FATAL_ERROR and target not in TRANSITIONS[self.state]:
            raise InvalidTxnStateError(f"transactional producer: cannot go from {self.state.name} to {target.name}")
        self.state = target
        if error is not None:
            self.error = error
        elif target is S.READY:
            self.error = None

    def _fail(self, outcome: Outcome, error: OdradekError) -> Outcome:
        """Enter the error state of ``outcome`` (ABORTABLE or FATAL). Fatal wins over abortable; an abortable error
        while aborting changes nothing (the transaction is being aborted anyway)."""
        if outcome is Outcome.FATAL:
            self._transition(S.FATAL_ERROR, error)
        elif self.state in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR):
            self._transition(S.ABORTABLE_ERROR, error)
        return outcome

    def refusal(self, operation: str) -> OdradekError:
        """The error for ``operation`` called in a state that does not allow it."""
        if self.state is S.FATAL_ERROR:
            assert self.error is not None
            return self.error
        if self.state is S.ABORTABLE_ERROR:
            return TransactionAbortableError(
                f"{operation}: the transaction failed ({self.error}); abort_transaction() first"
            )
        return InvalidTxnStateError(f"{operation} is not allowed in state {self.state.name}")

    @property
    def has_error(self) -> bool:
        return self.state in (S.ABORTABLE_ERROR, S.FATAL_ERROR)

    @property
    def ready(self) -> bool:
        return self.producer_id >= 0 and self.state is not S.INITIALIZING

    # ---- FindCoordinator ----

    def on_coordinator_refused(self, code: int, key: str) -> Outcome:
        """FindCoordinator answered an authorization error for ``key``, which no retry can cure: without Describe
        on the transactional id the producer cannot go on (fatal, as Kafka's); without it on a group only this
        transaction's offsets fail (abortable)."""
        error = error_for_code(code, f"FindCoordinator {key!r}: {error_name(code)}")
        if code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            return self._fail(Outcome.FATAL, error)
        return self._fail(Outcome.ABORTABLE, error)

    # ---- InitProducerId ----

    def init_request(self) -> pb.InitProducerIdRequest:
        """Start (or, after a timeout, resume) init_transactions."""
        if self.state not in (S.UNINITIALIZED, S.INITIALIZING):
            raise self.refusal("init_transactions()")
        self._transition(S.INITIALIZING)
        return pb.InitProducerIdRequest(
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self.timeout_ms,
            producer_id=-1,
            producer_epoch=-1,
        )

    def on_init_response(self, response: pb.InitProducerIdResponse) -> Outcome:
        outcome = classify(response.error)
        if outcome is Outcome.OK:
            self.producer_id, self.epoch = response.producer_id, response.producer_epoch
            self._transition(S.READY)
            return outcome
        if outcome in (Outcome.RETRY, Outcome.FIND_COORDINATOR):
            return outcome
        # Nothing to abort yet: whatever refused the producer id (a timeout above the broker's maximum, ...) is
        # fatal.
        if response.error in FENCING_CODES:
            return self._fail(Outcome.FATAL, fencing_error(response.error, "InitProducerId"))
        return self._fail(
            Outcome.FATAL, error_for_code(response.error, f"InitProducerId: {error_name(response.error)}")
        )

    # ---- the transaction ----

    def begin(self) -> None:
        if self.state is not S.READY:
            raise self.refusal("begin_transaction()")
        self.partitions.clear()
        self.pending.clear()
        self.groups.clear()
        self.pending_offsets.clear()
        self._transition(S.IN_TRANSACTION)

    def check_send(self) -> None:
        """Raise unless a record may be sent now (inside a transaction, before its commit or abort began)."""
        if self.state is not S.IN_TRANSACTION:
            raise self.refusal("send()")

    # ---- partitions (AddPartitionsToTxn) ----

    def send_allowed(self, tp: TopicPartition) -> bool:
        """Whether the sender may drain ``tp``'s batches: only once it is in the transaction. Otherwise it is noted
        for the next AddPartitionsToTxn."""
        if tp in self.partitions:
            return self.state in _WORKING
        if self.state in _WORKING and tp not in self.adding:
            self.pending.add(tp)
        return False

    def add_partitions_request(self) -> tpb.AddPartitionsToTxnRequest | None:
        """The next AddPartitionsToTxn, or None (nothing waits, one is in flight, or the transaction is ending
        without being committed)."""
        if not self.pending or self.adding or self.state not in _WORKING:
            return None
        self.adding, self.pending = self.pending, set()
        return tpb.AddPartitionsToTxnRequest(
            transactional_id=self.transactional_id,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            topics=_topics(self.adding),
        )

    def on_add_partitions_failed(self) -> Outcome:
        """The request got no answer: its partitions wait for the next one."""
        self.pending |= self.adding
        self.adding = set()
        return Outcome.FIND_COORDINATOR

    def on_add_partitions_response(self, response: tpb.AddPartitionsToTxnResponse) -> Outcome:
        adding, self.adding = self.adding, set()
        codes: dict[TopicPartition, int] = {
            TopicPartition(t.name, p.partition): p.error for t in response.results for p in t.partitions
        }
        if response.error != ErrorCode.NONE:
            codes = dict.fromkeys(adding, response.error)
        worst = Outcome.OK
        for tp in adding:
            code = codes.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
            outcome = classify(code)
            if outcome is Outcome.OK:
                self.partitions.add(tp)
                continue
            if outcome in (Outcome.RETRY, Outcome.FIND_COORDINATOR):
                self.pending.add(tp)
                if worst is Outcome.OK or (worst is Outcome.RETRY and outcome is Outcome.FIND_COORDINATOR):
                    worst = outcome
                continue
            message = f"AddPartitionsToTxn {tp.topic}-{tp.partition}: {error_name(code)}"
            if outcome is Outcome.FATAL:
                return self._fail(Outcome.FATAL, fencing_error(code, message))
            worst = self._fail(Outcome.ABORTABLE, error_for_code(code, message))
        return worst

    # ---- offsets (AddOffsetsToTxn, then TxnOffsetCommit to the group coordinator) ----

    def add_offsets_request(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], group: GroupMetadata
    ) -> tpb.AddOffsetsToTxnRequest | None:
        """Start send_offsets_to_transaction; None when the group is already in the transaction (then the offsets
        go straight to TxnOffsetCommit)."""
        if self.state is not S.IN_TRANSACTION:
            raise self.refusal("send_offsets_to_transaction()")
        self.pending_offsets.update(offsets)
        if group.group_id in self.groups:
            return None
        return tpb.AddOffsetsToTxnRequest(
            transactional_id=self.transactional_id,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            group_id=group.group_id,
        )

    def on_add_offsets_response(self, group_id: str, response: tpb.AddOffsetsToTxnResponse) -> Outcome:
        outcome = classify(response.error)
        if outcome is Outcome.OK:
            self.groups.add(group_id)
            return outcome
        if outcome in (Outcome.RETRY, Outcome.FIND_COORDINATOR):
            return outcome
        message = f"AddOffsetsToTxn {group_id!r}: {error_name(response.error)}"
        if outcome is Outcome.FATAL:
            return self._fail(outcome, fencing_error(response.error, message))
        return self._fail(outcome, error_for_code(response.error, message))

    def txn_offset_commit_request(self, group: GroupMetadata) -> gpb.TxnOffsetCommitRequest:
        return gpb.TxnOffsetCommitRequest(
            transactional_id=self.transactional_id,
            group_id=group.group_id,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            generation_id=group.generation_id,
            member_id=group.member_id,
            group_instance_id=group.group_instance_id,
            topics=commit_topics(self.pending_offsets),
        )

    def on_txn_offset_commit_response(self, group_id: str, response: gpb.TxnOffsetCommitResponse) -> Outcome:
        """Acknowledged partitions leave ``pending_offsets``; the rest are retried, or fail the transaction."""
        worst = Outcome.OK
        for t in response.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition)
                if tp not in self.pending_offsets:
                    continue
                code = p.error
                if code == ErrorCode.NONE:
                    del self.pending_offsets[tp]
                    continue
                message = f"TxnOffsetCommit {group_id!r} {tp.topic}-{tp.partition}: {error_name(code)}"
                if code in GENERATION_CODES:
                    return self._fail(
                        Outcome.ABORTABLE,
                        CommitFailedError(f"{message}: the consumer is no longer in that generation", code=code),
                    )
                outcome = classify(code)
                if outcome is Outcome.FATAL:
                    return self._fail(outcome, fencing_error(code, message))
                if outcome is Outcome.ABORTABLE:
                    return self._fail(outcome, error_for_code(code, message))
                if worst is not Outcome.FIND_COORDINATOR:
                    worst = outcome
        if worst is Outcome.OK and self.pending_offsets:
            worst = Outcome.RETRY  # a partition without an answer
        return worst

    # ---- produce results (from the sender) ----

    def on_batch_failed(self, error: BaseException) -> None:
        """A batch of the transaction failed for good: the transaction cannot commit (abortable), unless the error
        says this producer is fenced (fatal)."""
        if isinstance(error, TransactionAbortedError) or self.state not in (*_WORKING, S.ABORTABLE_ERROR):
            return
        code = error.code if isinstance(error, OdradekError) else ErrorCode.UNKNOWN_SERVER_ERROR
        if code in FENCING_CODES:
            self._fail(Outcome.FATAL, fencing_error(code, f"produce: {error}"))
        elif self.state is not S.ABORTABLE_ERROR:
            wrapped = error if isinstance(error, OdradekError) else OdradekError(f"produce: {error!r}")
            self._fail(Outcome.ABORTABLE, wrapped)

    # ---- ending (EndTxn) ----

    def begin_commit(self) -> None:
        if self.state not in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION):
            raise self.refusal("commit_transaction()")
        self._transition(S.COMMITTING_TRANSACTION)

    def begin_abort(self) -> None:
        if self.state not in (S.IN_TRANSACTION, S.ABORTABLE_ERROR, S.ABORTING_TRANSACTION):
            raise self.refusal("abort_transaction()")
        self._transition(S.ABORTING_TRANSACTION)
        self.pending.clear()  # their batches are dropped unsent
        self.pending_offsets.clear()

    def end_txn_request(self) -> tpb.EndTxnRequest | None:
        """EndTxn for the commit or abort under way, or None when the coordinator knows of nothing to end (no
        partition or group was added): then the transaction is over now. Call it once no AddPartitionsToTxn is in
        flight."""
        if self.state is S.COMMITTING_TRANSACTION and self.pending_offsets:
            raise InvalidTxnStateError("commit_transaction(): offsets of the transaction were not acknowledged")
        if self.state not in (S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION):
            raise self.refusal("EndTxn")
        if not self.partitions and not self.groups:
            self._complete()
            return None
        return tpb.EndTxnRequest(
            transactional_id=self.transactional_id,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            committed=self.state is S.COMMITTING_TRANSACTION,
        )

    def on_end_txn_response(self, response: tpb.EndTxnResponse) -> Outcome:
        outcome = classify(response.error)
        committing = self.state is S.COMMITTING_TRANSACTION
        what = "EndTxn (commit)" if committing else "EndTxn (abort)"
        if outcome is Outcome.OK:
            # The epoch for the next transaction (KIP-890); a new producer id when the epoch ran out.
            if response.producer_id >= 0 and response.producer_epoch >= 0:
                self.producer_id, self.epoch = response.producer_id, response.producer_epoch
            self._complete()
            return outcome
        if outcome in (Outcome.RETRY, Outcome.FIND_COORDINATOR):
            return outcome
        if outcome is Outcome.FATAL:
            return self._fail(outcome, fencing_error(response.error, what))
        if response.error == ErrorCode.TRANSACTION_ABORTABLE and committing:
            return self._fail(Outcome.ABORTABLE, error_for_code(response.error, f"{what}: TRANSACTION_ABORTABLE"))
        # INVALID_TXN_STATE and the like: the coordinator's transaction is not the one this producer believes in.
        return self._fail(Outcome.FATAL, error_for_code(response.error, f"{what}: {error_name(response.error)}"))

    def _complete(self) -> None:
        self.partitions.clear()
        self.pending.clear()
        self.groups.clear()
        self.pending_offsets.clear()
        self._transition(S.READY)
