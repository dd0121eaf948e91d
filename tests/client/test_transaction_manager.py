"""The transactional producer's state machine, without I/O: transitions, partition-add gating, the epoch from
EndTxn, and Kafka's split of errors into retriable, abortable and fatal."""

from __future__ import annotations

import pytest

from odradek.client.errors import (
    CommitFailedError,
    ErrorCode,
    GroupAuthorizationFailedError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    OdradekError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionalIdAuthorizationFailedError,
)
from odradek.client.producer.transactions import (
    TRANSITIONS,
    Outcome,
    TransactionAbortedError,
    TransactionManager,
    TxnState,
)
from odradek.client.structs import GroupMetadata, OffsetAndMetadata, TopicPartition
from odradek.proto import broker_pb2 as pb
from odradek.proto import group_pb2 as gpb
from odradek.proto import transaction_pb2 as tpb

S = TxnState
TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)
GROUP = GroupMetadata("g", 7, "member-1", None)


def ready(pid: int = 5, epoch: int = 3) -> TransactionManager:
    m = TransactionManager("txn-a", 60_000)
    m.init_request()
    assert m.on_init_response(pb.InitProducerIdResponse(producer_id=pid, producer_epoch=epoch)) is Outcome.OK
    return m


def in_txn() -> TransactionManager:
    m = ready()
    m.begin()
    return m


def added(m: TransactionManager, *tps: TopicPartition) -> None:
    for tp in tps:
        assert not m.send_allowed(tp)
    request = m.add_partitions_request()
    assert request is not None
    response = tpb.AddPartitionsToTxnResponse(
        results=[
            tpb.TxnTopicResult(name="t", partitions=[tpb.TxnPartitionResult(partition=tp.partition) for tp in tps])
        ]
    )
    assert m.on_add_partitions_response(response) is Outcome.OK


def add_response(code: int, *tps: TopicPartition) -> tpb.AddPartitionsToTxnResponse:
    return tpb.AddPartitionsToTxnResponse(
        results=[
            tpb.TxnTopicResult(
                name="t", partitions=[tpb.TxnPartitionResult(partition=tp.partition, error=code) for tp in tps]
            )
        ]
    )


# ---- init ----


def test_init_request_carries_the_id_and_timeout_and_the_answer_makes_it_ready() -> None:
    m = TransactionManager("txn-a", 12_345)
    assert m.state is S.UNINITIALIZED and not m.ready
    request = m.init_request()
    assert (request.transactional_id, request.transaction_timeout_ms, request.producer_id, request.producer_epoch) == (
        "txn-a",
        12_345,
        -1,
        -1,
    )
    assert m.state is S.INITIALIZING and not m.ready
    assert m.on_init_response(pb.InitProducerIdResponse(producer_id=9, producer_epoch=2)) is Outcome.OK
    assert (m.state, m.producer_id, m.epoch, m.ready) == (S.READY, 9, 2, True)


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        (ErrorCode.CONCURRENT_TRANSACTIONS, Outcome.RETRY),
        (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, Outcome.RETRY),
        (ErrorCode.NOT_COORDINATOR, Outcome.FIND_COORDINATOR),
        (ErrorCode.COORDINATOR_NOT_AVAILABLE, Outcome.FIND_COORDINATOR),
    ],
)
def test_init_retries_retriable_errors_and_may_be_resumed(code: int, outcome: Outcome) -> None:
    m = TransactionManager("txn-a", 60_000)
    m.init_request()
    assert m.on_init_response(pb.InitProducerIdResponse(error=code)) is outcome
    assert m.state is S.INITIALIZING
    m.init_request()  # called again (after a timeout): resumes
    assert m.on_init_response(pb.InitProducerIdResponse(producer_id=1, producer_epoch=0)) is Outcome.OK


def test_init_with_a_timeout_above_the_maximum_is_fatal_and_typed() -> None:
    m = TransactionManager("txn-a", 10**9)
    m.init_request()
    assert m.on_init_response(pb.InitProducerIdResponse(error=ErrorCode.INVALID_TRANSACTION_TIMEOUT)) is Outcome.FATAL
    assert m.state is S.FATAL_ERROR
    assert isinstance(m.error, InvalidTransactionTimeoutError)
    with pytest.raises(InvalidTransactionTimeoutError):
        m.begin()


def test_init_fenced_is_producer_fenced() -> None:
    m = TransactionManager("txn-a", 60_000)
    m.init_request()
    assert m.on_init_response(pb.InitProducerIdResponse(error=ErrorCode.PRODUCER_FENCED)) is Outcome.FATAL
    assert isinstance(m.error, ProducerFencedError)


def test_init_twice_is_refused() -> None:
    m = ready()
    with pytest.raises(InvalidTxnStateError):
        m.init_request()


# ---- begin, send ----


def test_operations_before_init_or_outside_a_transaction_are_refused_with_a_typed_error() -> None:
    m = TransactionManager("txn-a", 60_000)
    with pytest.raises(InvalidTxnStateError):
        m.begin()
    with pytest.raises(InvalidTxnStateError):
        m.check_send()
    m = ready()
    with pytest.raises(InvalidTxnStateError):
        m.check_send()
    with pytest.raises(InvalidTxnStateError):
        m.begin_commit()
    with pytest.raises(InvalidTxnStateError):
        m.begin_abort()
    with pytest.raises(InvalidTxnStateError):
        m.add_offsets_request({TP0: OffsetAndMetadata(1)}, GROUP)
    m.begin()
    m.check_send()
    with pytest.raises(InvalidTxnStateError):
        m.begin()  # no nested transactions
    m.begin_commit()
    with pytest.raises(InvalidTxnStateError):
        m.check_send()  # not while committing


# ---- partitions ----


def test_a_partition_is_not_drained_until_the_coordinator_added_it() -> None:
    m = in_txn()
    assert not m.send_allowed(TP0)
    assert not m.send_allowed(TP1)
    assert m.pending == {TP0, TP1}
    request = m.add_partitions_request()
    assert request is not None
    assert (request.transactional_id, request.producer_id, request.producer_epoch, request.verify_only) == (
        "txn-a",
        5,
        3,
        False,
    )
    assert [(t.name, list(t.partitions)) for t in request.topics] == [("t", [0, 1])]
    assert m.add_partitions_request() is None  # one at a time
    assert not m.send_allowed(TP0)  # in flight: still waiting, and not asked again
    assert m.pending == set()
    assert m.on_add_partitions_response(add_response(ErrorCode.NONE, TP0, TP1)) is Outcome.OK
    assert m.send_allowed(TP0) and m.send_allowed(TP1)
    assert m.add_partitions_request() is None


def test_a_partition_noted_while_an_add_is_in_flight_goes_in_the_next_request() -> None:
    m = in_txn()
    m.send_allowed(TP0)
    m.add_partitions_request()
    assert not m.send_allowed(TP1)
    assert m.on_add_partitions_response(add_response(ErrorCode.NONE, TP0)) is Outcome.OK
    request = m.add_partitions_request()
    assert request is not None and [list(t.partitions) for t in request.topics] == [[1]]


@pytest.mark.parametrize(
    ("code", "outcome"),
    [(ErrorCode.CONCURRENT_TRANSACTIONS, Outcome.RETRY), (ErrorCode.NOT_COORDINATOR, Outcome.FIND_COORDINATOR)],
)
def test_retriable_add_partitions_errors_keep_the_partitions_pending(code: int, outcome: Outcome) -> None:
    m = in_txn()
    m.send_allowed(TP0)
    m.add_partitions_request()
    assert m.on_add_partitions_response(tpb.AddPartitionsToTxnResponse(error=code)) is outcome
    assert m.pending == {TP0} and m.state is S.IN_TRANSACTION and not m.send_allowed(TP0)
    assert m.add_partitions_request() is not None


def test_an_unanswered_add_partitions_keeps_them_pending() -> None:
    m = in_txn()
    m.send_allowed(TP0)
    m.add_partitions_request()
    assert m.on_add_partitions_failed() is Outcome.FIND_COORDINATOR
    assert m.pending == {TP0}


@pytest.mark.parametrize("code", [ErrorCode.INVALID_TXN_STATE, ErrorCode.TRANSACTION_ABORTABLE])
def test_abortable_add_partitions_errors(code: int) -> None:
    m = in_txn()
    m.send_allowed(TP0)
    m.add_partitions_request()
    assert m.on_add_partitions_response(add_response(code, TP0)) is Outcome.ABORTABLE
    assert m.state is S.ABORTABLE_ERROR
    assert isinstance(m.error, OdradekError) and m.error.code == code
    assert not m.send_allowed(TP0) and m.add_partitions_request() is None
    with pytest.raises(TransactionAbortableError):
        m.check_send()
    with pytest.raises(TransactionAbortableError):
        m.begin_commit()
    m.begin_abort()  # the only way on
    assert m.state is S.ABORTING_TRANSACTION


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.PRODUCER_FENCED,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.INVALID_PRODUCER_ID_MAPPING,
        ErrorCode.TRANSACTION_COORDINATOR_FENCED,
    ],
)
def test_fencing_errors_are_fatal_producer_fenced(code: int) -> None:
    m = in_txn()
    m.send_allowed(TP0)
    m.add_partitions_request()
    assert m.on_add_partitions_response(add_response(code, TP0)) is Outcome.FATAL
    assert m.state is S.FATAL_ERROR
    assert isinstance(m.error, ProducerFencedError)
    for operation in (m.check_send, m.begin_commit, m.begin_abort, m.begin):
        with pytest.raises(ProducerFencedError):
            operation()


# ---- produce errors ----


def test_a_failed_batch_makes_the_transaction_abortable() -> None:
    m = in_txn()
    added(m, TP0)
    m.on_batch_failed(OutOfOrderSequenceError("gap"))
    assert m.state is S.ABORTABLE_ERROR and isinstance(m.error, OutOfOrderSequenceError)
    m.on_batch_failed(TimeoutError("later"))  # the first error stays the reason
    assert isinstance(m.error, OutOfOrderSequenceError)
    m.on_batch_failed(OdradekError("fenced", code=ErrorCode.INVALID_PRODUCER_EPOCH))  # but fencing wins
    assert m.state is S.FATAL_ERROR and isinstance(m.error, ProducerFencedError)


def test_a_failed_batch_while_committing_fails_the_commit() -> None:
    m = in_txn()
    added(m, TP0)
    m.begin_commit()
    m.on_batch_failed(OdradekError("refused", code=ErrorCode.TRANSACTION_ABORTABLE))
    assert m.state is S.ABORTABLE_ERROR
    with pytest.raises(TransactionAbortableError):
        m.begin_commit()


def test_batches_dropped_by_an_abort_change_nothing() -> None:
    m = in_txn()
    added(m, TP0)
    m.begin_abort()
    m.on_batch_failed(TransactionAbortedError("dropped"))
    m.on_batch_failed(OutOfOrderSequenceError("late"))
    assert m.state is S.ABORTING_TRANSACTION


# ---- ending: the epoch bump ----


def test_commit_uses_the_epoch_endtxn_answers_for_the_next_transaction() -> None:
    m = in_txn()
    added(m, TP0)
    m.begin_commit()
    assert not m.send_allowed(TopicPartition("t", 2))  # no new partitions while committing...
    assert m.send_allowed(TP0)  # ...but the added ones still drain (the commit flushes them)
    request = m.end_txn_request()
    assert request is not None
    assert (request.producer_id, request.producer_epoch, request.committed) == (5, 3, True)
    response = tpb.EndTxnResponse(producer_id=5, producer_epoch=4)
    assert m.on_end_txn_response(response) is Outcome.OK
    assert (m.state, m.producer_id, m.epoch) == (S.READY, 5, 4)
    assert m.partitions == set()
    m.begin()
    assert not m.send_allowed(TP0)  # every transaction adds its partitions again
    request2 = m.add_partitions_request()
    assert request2 is not None and request2.producer_epoch == 4


def test_abort_bumps_the_epoch_too_and_a_new_producer_id_past_the_last_epoch() -> None:
    m = in_txn()
    added(m, TP0)
    m.begin_abort()
    request = m.end_txn_request()
    assert request is not None and not request.committed
    assert m.on_end_txn_response(tpb.EndTxnResponse(producer_id=77, producer_epoch=0)) is Outcome.OK
    assert (m.state, m.producer_id, m.epoch) == (S.READY, 77, 0)


def test_an_empty_transaction_ends_without_endtxn() -> None:
    m = in_txn()
    m.begin_commit()
    assert m.end_txn_request() is None
    assert (m.state, m.epoch) == (S.READY, 3)
    m.begin()
    m.send_allowed(TP0)  # noted, never added
    m.begin_abort()
    assert m.pending == set()
    assert m.end_txn_request() is None and m.state is S.READY


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        (ErrorCode.CONCURRENT_TRANSACTIONS, Outcome.RETRY),
        (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, Outcome.RETRY),
        (ErrorCode.NOT_COORDINATOR, Outcome.FIND_COORDINATOR),
    ],
)
def test_endtxn_retriable_errors_keep_the_state_and_a_retry_sends_the_same_epoch(code: int, outcome: Outcome) -> None:
    m = in_txn()
    added(m, TP0)
    m.begin_commit()
    m.end_txn_request()
    assert m.on_end_txn_response(tpb.EndTxnResponse(error=code)) is outcome
    assert m.state is S.COMMITTING_TRANSACTION
    m.begin_commit()  # commit_transaction() called again after a timeout resumes
    request = m.end_txn_request()
    assert request is not None and (request.producer_epoch, request.committed) == (3, True)


def test_endtxn_fenced_is_fatal_and_invalid_state_too() -> None:
    m = in_txn()
    added(m, TP0)
    m.begin_commit()
    m.end_txn_request()
    assert m.on_end_txn_response(tpb.EndTxnResponse(error=ErrorCode.PRODUCER_FENCED)) is Outcome.FATAL
    assert isinstance(m.error, ProducerFencedError)
    m = in_txn()
    added(m, TP0)
    m.begin_abort()
    m.end_txn_request()
    assert m.on_end_txn_response(tpb.EndTxnResponse(error=ErrorCode.INVALID_TXN_STATE)) is Outcome.FATAL
    assert isinstance(m.error, InvalidTxnStateError) and m.state is S.FATAL_ERROR


def test_endtxn_commit_answered_transaction_abortable_lets_the_application_abort() -> None:
    m = in_txn()
    added(m, TP0)
    m.begin_commit()
    m.end_txn_request()
    assert m.on_end_txn_response(tpb.EndTxnResponse(error=ErrorCode.TRANSACTION_ABORTABLE)) is Outcome.ABORTABLE
    m.begin_abort()
    assert m.end_txn_request() is not None


# ---- offsets ----


def test_offsets_add_the_group_once_then_commit_with_the_generation() -> None:
    m = in_txn()
    request = m.add_offsets_request({TP0: OffsetAndMetadata(10, "meta")}, GROUP)
    assert request is not None and (request.group_id, request.producer_epoch) == ("g", 3)
    assert m.on_add_offsets_response("g", tpb.AddOffsetsToTxnResponse()) is Outcome.OK
    commit = m.txn_offset_commit_request(GROUP)
    assert (commit.group_id, commit.generation_id, commit.member_id, commit.HasField("group_instance_id")) == (
        "g",
        7,
        "member-1",
        False,
    )
    assert (commit.producer_id, commit.producer_epoch, commit.transactional_id) == (5, 3, "txn-a")
    p = commit.topics[0].partitions[0]
    assert (commit.topics[0].name, p.partition, p.committed_offset, p.committed_metadata) == ("t", 0, 10, "meta")
    ok = gpb.TxnOffsetCommitResponse(
        topics=[gpb.OffsetCommitTopicResponse(name="t", partitions=[gpb.OffsetCommitPartitionResponse(partition=0)])]
    )
    assert m.on_txn_offset_commit_response("g", ok) is Outcome.OK
    assert m.pending_offsets == {}
    assert m.add_offsets_request({TP1: OffsetAndMetadata(3)}, GROUP) is None  # the group is in already
    # A transaction with only offsets still needs EndTxn.
    m.pending_offsets.clear()
    m.begin_commit()
    assert m.end_txn_request() is not None


def _offset_response(code: int) -> gpb.TxnOffsetCommitResponse:
    return gpb.TxnOffsetCommitResponse(
        topics=[
            gpb.OffsetCommitTopicResponse(
                name="t", partitions=[gpb.OffsetCommitPartitionResponse(partition=0, error=code)]
            )
        ]
    )


@pytest.mark.parametrize(
    ("code", "outcome", "error"),
    [
        (ErrorCode.ILLEGAL_GENERATION, Outcome.ABORTABLE, CommitFailedError),
        (ErrorCode.UNKNOWN_MEMBER_ID, Outcome.ABORTABLE, CommitFailedError),
        (ErrorCode.FENCED_INSTANCE_ID, Outcome.ABORTABLE, OdradekError),
        (ErrorCode.PRODUCER_FENCED, Outcome.FATAL, ProducerFencedError),
        (ErrorCode.NOT_COORDINATOR, Outcome.FIND_COORDINATOR, None),
        (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, Outcome.RETRY, None),
        (ErrorCode.CONCURRENT_TRANSACTIONS, Outcome.RETRY, None),
    ],
)
def test_txn_offset_commit_errors(code: int, outcome: Outcome, error: type[Exception] | None) -> None:
    m = in_txn()
    m.add_offsets_request({TP0: OffsetAndMetadata(10)}, GROUP)
    m.on_add_offsets_response("g", tpb.AddOffsetsToTxnResponse())
    assert m.on_txn_offset_commit_response("g", _offset_response(code)) is outcome
    if error is None:
        assert m.state is S.IN_TRANSACTION and TP0 in m.pending_offsets
    else:
        assert isinstance(m.error, error)
        if error is not ProducerFencedError:
            assert m.error.code == code


@pytest.mark.parametrize(
    ("code", "outcome", "state"),
    [
        (ErrorCode.CONCURRENT_TRANSACTIONS, Outcome.RETRY, S.IN_TRANSACTION),
        (ErrorCode.NOT_COORDINATOR, Outcome.FIND_COORDINATOR, S.IN_TRANSACTION),
        (ErrorCode.INVALID_TXN_STATE, Outcome.ABORTABLE, S.ABORTABLE_ERROR),
        (ErrorCode.PRODUCER_FENCED, Outcome.FATAL, S.FATAL_ERROR),
    ],
)
def test_add_offsets_errors(code: int, outcome: Outcome, state: TxnState) -> None:
    m = in_txn()
    m.add_offsets_request({TP0: OffsetAndMetadata(10)}, GROUP)
    assert m.on_add_offsets_response("g", tpb.AddOffsetsToTxnResponse(error=code)) is outcome
    assert m.state is state
    assert ("g" in m.groups) is False


def test_abort_drops_offsets_not_yet_committed() -> None:
    m = in_txn()
    m.add_offsets_request({TP0: OffsetAndMetadata(10)}, GROUP)
    m.begin_abort()
    assert m.pending_offsets == {}


# ---- the transition table ----


def test_a_fencing_produce_error_is_fatal_in_a_transaction_and_nothing_leaves_fatal() -> None:
    assert set(TRANSITIONS) == set(TxnState)
    assert TRANSITIONS[S.FATAL_ERROR] == frozenset()
    for state in TxnState:
        m = TransactionManager("x", 1)
        m.state = state
        m.on_batch_failed(OdradekError("", code=ErrorCode.PRODUCER_FENCED))
        working = state in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR)
        assert m.state is (S.FATAL_ERROR if working else state)


def test_only_the_listed_transitions_happen() -> None:
    m = TransactionManager("x", 1)
    m.state = S.READY
    with pytest.raises(InvalidTxnStateError):
        m._transition(S.COMMITTING_TRANSACTION)
    m.state = S.ABORTABLE_ERROR
    with pytest.raises(InvalidTxnStateError):
        m._transition(S.COMMITTING_TRANSACTION)
    m._transition(S.FATAL_ERROR, ProducerFencedError())
    assert m.state is S.FATAL_ERROR


def test_a_refused_transactional_id_lookup_is_fatal_and_a_refused_group_lookup_abortable() -> None:
    m = TransactionManager("txn-a", 60_000)
    m.init_request()
    code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert m.on_coordinator_refused(code, "txn-a") is Outcome.FATAL
    assert m.state is S.FATAL_ERROR and isinstance(m.error, TransactionalIdAuthorizationFailedError)
    with pytest.raises(TransactionalIdAuthorizationFailedError):
        raise m.refusal("begin_transaction()")

    m = in_txn()
    assert m.on_coordinator_refused(ErrorCode.GROUP_AUTHORIZATION_FAILED, "g") is Outcome.ABORTABLE
    assert m.state is S.ABORTABLE_ERROR and isinstance(m.error, GroupAuthorizationFailedError)
    m.begin_abort()  # the application may abort and go on
