"""The transaction state machine's rules, one test each, on a simulated clock (tests/transactions/txn_harness.py)."""

from __future__ import annotations

from dataclasses import replace

from txn_harness import A0, A1, B0, TIMEOUT, Harness, error, ok

from odradek.broker.groups.partitioner import offsets_partition_for
from odradek.broker.transactions.core import TxnCoreConfig
from odradek.broker.transactions.metadata import MAX_PRODUCER_EPOCH, TxnState, can_transition
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition


def committed_txn(h: Harness, pid: int, epoch: int, *tps: TopicPartition) -> tuple[int, int]:
    ok(h.add(pid, epoch, *tps))
    nxt = ok(h.end(pid, epoch, True))
    h.write_markers()
    return nxt


def test_init_gives_a_new_producer_id_then_bumps_its_epoch() -> None:
    h = Harness()
    pid, epoch = ok(h.init())
    assert epoch == 0 and h.md().state is TxnState.EMPTY
    assert ok(h.init()) == (pid, 1)
    # A new instance's bump leaves nothing to retry: the instance it fenced is not answered with its epoch.
    assert h.md().last_producer_epoch == -1
    assert error(h.init(pid=pid, epoch=0)) == ErrorCode.PRODUCER_FENCED


def test_a_transaction_end_bumps_the_epoch_and_markers_carry_the_bumped_one() -> None:
    h = Harness()
    pid, epoch = ok(h.init())
    ok(h.add(pid, epoch, A0, B0))
    assert h.md().state is TxnState.ONGOING and h.md().partitions == {A0, B0}
    assert ok(h.end(pid, epoch, True)) == (pid, epoch + 1)
    md = h.md()
    assert (md.state, md.producer_epoch, md.last_producer_epoch) == (TxnState.PREPARE_COMMIT, epoch + 1, epoch)
    [m] = h.markers
    assert (m.producer_id, m.producer_epoch, m.committed, m.partitions) == (pid, epoch + 1, True, {A0, B0})
    h.write_markers()
    assert h.md().state is TxnState.COMPLETE_COMMIT and h.md().partitions == frozenset()
    assert h.completed == [True]
    # the next transaction runs at the bumped epoch; the old one is refused
    ok(h.add(pid, epoch + 1, A1))
    assert error(h.add(pid, epoch, A1)) == ErrorCode.PRODUCER_FENCED


def test_the_start_time_is_the_first_add_and_outlives_the_transactions_end() -> None:
    """As Kafka's TransactionMetadata: prepareAddPartitions starts the clock, prepareComplete keeps it (so
    DescribeTransactions shows when the last transaction began), and only InitProducerId clears it."""
    h = Harness(now=1_000)
    pid, epoch = ok(h.init())
    assert h.md().txn_start_ms == -1
    ok(h.add(pid, epoch, A0))
    h.now = 2_000
    ok(h.add(pid, epoch, A1))  # a later add does not move it
    assert h.md().txn_start_ms == 1_000
    h.now = 3_000
    _, epoch = ok(h.end(pid, epoch, False))
    h.write_markers()
    md = h.md()
    assert (md.state, md.txn_start_ms, md.last_update_ms) == (TxnState.COMPLETE_ABORT, 1_000, 3_000)
    assert h.log[-1][1] == md  # durable so, for the next coordinator
    h.now = 4_000
    ok(h.add(pid, epoch, B0))
    assert h.md().txn_start_ms == 4_000  # the next transaction's own
    _, epoch = committed_txn(h, pid, epoch)
    assert (h.md().state, h.md().txn_start_ms) == (TxnState.COMPLETE_COMMIT, 4_000)
    ok(h.init(pid=pid, epoch=epoch))
    assert (h.md().state, h.md().txn_start_ms) == (TxnState.EMPTY, -1)


def test_a_retried_end_txn_succeeds_with_the_current_epoch_and_the_other_result_is_refused() -> None:
    h = Harness()
    pid, epoch = ok(h.init())
    ok(h.add(pid, epoch))
    ok(h.end(pid, epoch, True))
    assert ok(h.end(pid, epoch, True)) == (pid, epoch + 1)  # PrepareCommit
    assert error(h.end(pid, epoch, False)) == ErrorCode.INVALID_TXN_STATE
    h.write_markers()
    assert ok(h.end(pid, epoch, True)) == (pid, epoch + 1)  # CompleteCommit
    assert error(h.end(pid, epoch, False)) == ErrorCode.INVALID_TXN_STATE
    assert h.md().state is TxnState.COMPLETE_COMMIT


def test_a_delayed_end_txn_of_transaction_n_never_ends_transaction_n_plus_1() -> None:
    h = Harness()
    pid, e0 = ok(h.init())
    _, e1 = committed_txn(h, pid, e0, A0)
    ok(h.add(pid, e1, A1))  # transaction N+1 is Ongoing
    assert error(h.end(pid, e0, True)) == ErrorCode.PRODUCER_FENCED
    assert error(h.end(pid, e0, False)) == ErrorCode.PRODUCER_FENCED
    assert h.md().state is TxnState.ONGOING and h.md().producer_epoch == e1
    assert h.markers == []


def test_an_end_keeping_the_epoch_writes_markers_at_it_and_the_next_transaction_runs_at_it() -> None:
    h = Harness()
    pid, epoch = ok(h.init())
    ok(h.add(pid, epoch, A0))
    assert ok(h.end(pid, epoch, True, bump=False)) == (pid, epoch)
    md = h.md()
    assert (md.state, md.producer_epoch, md.last_producer_epoch) == (TxnState.PREPARE_COMMIT, epoch, -1)
    assert not md.overflowed
    [m] = h.markers
    assert (m.producer_id, m.producer_epoch, m.committed) == (pid, epoch, True)
    h.write_markers()
    assert h.md().state is TxnState.COMPLETE_COMMIT and h.completed == [True]
    ok(h.add(pid, epoch, A1))
    assert ok(h.end(pid, epoch, False, bump=False)) == (pid, epoch)
    h.write_markers()
    assert h.md().state is TxnState.COMPLETE_ABORT and h.completed == [True, False]


def test_a_repeated_end_keeping_the_epoch_waits_for_the_markers_then_succeeds() -> None:
    h = Harness()
    pid, epoch = ok(h.init())
    ok(h.add(pid, epoch))
    ok(h.end(pid, epoch, True, bump=False))
    assert error(h.end(pid, epoch, True, bump=False)) == ErrorCode.CONCURRENT_TRANSACTIONS  # PrepareCommit
    assert error(h.end(pid, epoch, False, bump=False)) == ErrorCode.INVALID_TXN_STATE
    h.write_markers()
    assert ok(h.end(pid, epoch, True, bump=False)) == (pid, epoch)  # CompleteCommit
    assert error(h.end(pid, epoch, False, bump=False)) == ErrorCode.INVALID_TXN_STATE
    assert h.markers == [] and h.md().state is TxnState.COMPLETE_COMMIT


def test_an_end_keeping_the_epoch_is_fenced_like_any_other_request() -> None:
    h = Harness()
    pid, e0 = ok(h.init())
    ok(h.add(pid, e0))
    h.now = TIMEOUT + 1
    h.tick(h.now)  # the timeout aborts it and bumps the epoch
    h.write_markers()
    assert error(h.end(pid, e0, True, bump=False)) == ErrorCode.PRODUCER_FENCED
    assert error(h.end(pid + 1, e0, True, bump=False)) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert error(h.end(pid, h.md().producer_epoch + 1, True, bump=False)) == ErrorCode.INVALID_PRODUCER_EPOCH
    pid2, e2 = ok(h.init())
    assert error(h.end(pid2, e2, True, bump=False)) == ErrorCode.INVALID_TXN_STATE  # no transaction open


def test_an_end_keeping_epoch_zero_after_a_new_producer_id_is_not_taken_for_an_overflow() -> None:
    h = Harness()
    pid, _ = ok(h.init())
    h.core.replay("t", replace(h.md(), producer_epoch=MAX_PRODUCER_EPOCH - 1))
    new_pid, epoch = ok(h.init())  # exhausted: a new producer id at epoch 0, the old id remembered
    assert (epoch, h.md().last_producer_id) == (0, pid)
    ok(h.add(new_pid, 0, A0))
    assert ok(h.end(new_pid, 0, True, bump=False)) == (new_pid, 0)
    [m] = h.markers
    assert (m.producer_id, m.producer_epoch) == (new_pid, 0)
    h.write_markers()
    assert h.md().state is TxnState.COMPLETE_COMMIT


def test_an_exhausted_epoch_moves_the_producer_to_a_new_id_and_markers_use_the_old_one() -> None:
    h = Harness()
    pid, _ = ok(h.init())
    near = MAX_PRODUCER_EPOCH - 1
    h.core.replay("t", replace(h.md(), producer_epoch=near))
    ok(h.add(pid, near))
    new_pid, new_epoch = ok(h.end(pid, near, True))
    assert new_pid != pid and new_epoch == 0
    md = h.md()
    assert (md.last_producer_id, md.last_producer_epoch) == (pid, near)
    [m] = h.markers
    assert (m.producer_id, m.producer_epoch, m.committed) == (pid, MAX_PRODUCER_EPOCH, True)
    assert ok(h.end(pid, near, True)) == (new_pid, 0)  # the retry finds the same answer
    h.write_markers()
    assert h.md().state is TxnState.COMPLETE_COMMIT
    assert error(h.add(pid, near)) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    ok(h.add(new_pid, 0))


def test_init_at_an_exhausted_epoch_allocates_a_new_producer_id() -> None:
    h = Harness()
    pid, _ = ok(h.init())
    h.core.replay("t", replace(h.md(), producer_epoch=MAX_PRODUCER_EPOCH - 1))
    new_pid, epoch = ok(h.init())
    assert new_pid != pid and epoch == 0 and h.md().last_producer_id == pid


def test_a_retried_init_after_a_move_to_a_new_producer_id_gets_the_same_answer() -> None:
    """KIP-360 as Kafka: the move records the old producer id and the epoch the producer presented, so the same
    InitProducerId again (its answer lost) gets the new id at epoch 0, also from a coordinator that reloaded."""
    h = Harness()
    pid, _ = ok(h.init())
    near = MAX_PRODUCER_EPOCH - 1
    h.core.replay("t", replace(h.md(), producer_epoch=near))
    new_pid, epoch = ok(h.init(pid=pid, epoch=near))
    assert new_pid != pid and epoch == 0
    md = h.md()
    assert (md.state, md.last_producer_id, md.last_producer_epoch) == (TxnState.EMPTY, pid, near)
    written = len(h.log)
    assert ok(h.init(pid=pid, epoch=near)) == (new_pid, 0)
    assert len(h.log) == written  # answered from the state, nothing written
    h.core = h.reloaded()
    assert ok(h.init(pid=pid, epoch=near)) == (new_pid, 0)
    assert error(h.init(pid=pid, epoch=near - 1)) == ErrorCode.PRODUCER_FENCED
    assert error(h.init(pid=new_pid, epoch=near)) == ErrorCode.INVALID_PRODUCER_EPOCH  # not the new id's epoch
    ok(h.add(new_pid, 0, A0))  # the new id began a transaction: the old one is fenced for good
    assert error(h.init(pid=pid, epoch=near)) == ErrorCode.PRODUCER_FENCED


def test_a_move_to_a_new_producer_id_by_a_new_instance_leaves_no_retry() -> None:
    """InitProducerId without the producer's id (a new instance) records no last epoch, as Kafka's
    prepareProducerIdRotation: the earlier instance presenting its exhausted epoch is fenced, not answered."""
    h = Harness()
    pid, _ = ok(h.init())
    near = MAX_PRODUCER_EPOCH - 1
    h.core.replay("t", replace(h.md(), producer_epoch=near))
    new_pid, epoch = ok(h.init())
    assert new_pid != pid and epoch == 0 and h.md().last_producer_epoch == -1
    assert error(h.init(pid=pid, epoch=near)) == ErrorCode.PRODUCER_FENCED


def test_init_fences_an_ongoing_transaction_aborts_it_and_answers_concurrent_until_done() -> None:
    h = Harness()
    pid, e = ok(h.init())
    ok(h.add(pid, e, A0))
    assert error(h.init()) == ErrorCode.CONCURRENT_TRANSACTIONS
    md = h.md()
    assert (md.state, md.producer_epoch, md.last_producer_epoch) == (TxnState.PREPARE_ABORT, e + 1, -1)
    [m] = h.markers
    assert (m.producer_id, m.producer_epoch, m.committed, m.partitions) == (pid, e + 1, False, {A0})
    assert error(h.init()) == ErrorCode.CONCURRENT_TRANSACTIONS  # markers not written yet
    h.write_markers()
    assert h.md().state is TxnState.COMPLETE_ABORT and h.completed == [False]
    assert ok(h.init()) == (pid, e + 2)
    # the fenced producer
    assert error(h.end(pid, e, True)) == ErrorCode.PRODUCER_FENCED
    assert error(h.add(pid, e, A1)) == ErrorCode.PRODUCER_FENCED
    assert error(h.add_offsets(pid, e, "g")) == ErrorCode.PRODUCER_FENCED


def test_requests_answer_concurrent_transactions_while_markers_are_written() -> None:
    h = Harness()
    pid, e = ok(h.init())
    ok(h.add(pid, e))
    ok(h.end(pid, e, False))
    assert h.md().state is TxnState.PREPARE_ABORT
    assert error(h.add(pid, e + 1, A1)) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert error(h.add_offsets(pid, e + 1, "g")) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert error(h.end(pid, e + 1, True)) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert error(h.init()) == ErrorCode.CONCURRENT_TRANSACTIONS
    h.write_markers()
    ok(h.add(pid, e + 1, A1))


def test_a_request_while_a_record_is_being_written_answers_concurrent_transactions() -> None:
    h = Harness()
    pid, e = ok(h.init())
    h.auto = False
    assert h.add(pid, e, A0) is None  # waiting for its record
    assert error(h.add(pid, e, A1)) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert error(h.end(pid, e, True)) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert error(h.init()) == ErrorCode.CONCURRENT_TRANSACTIONS
    h.flush()
    assert h.md().partitions == {A0}


def test_verification_answers_abortable_unless_the_partition_is_in_the_ongoing_transaction() -> None:
    h = Harness()
    pid, e = ok(h.init())
    assert h.core.verify("t", pid, e, [A0]) == {A0: ErrorCode.TRANSACTION_ABORTABLE}  # no transaction
    ok(h.add(pid, e, A0))
    assert h.core.verify("t", pid, e, [A0, A1]) == {A0: ErrorCode.NONE, A1: ErrorCode.TRANSACTION_ABORTABLE}
    assert h.core.verify("t", pid + 1, e, [A0]) == {A0: ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    assert h.core.verify("nope", pid, e, [A0]) == {A0: ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    h.auto = False
    h.end(pid, e, True)  # its end is being written: no longer open
    assert h.core.verify("t", pid, e, [A0]) == {A0: ErrorCode.TRANSACTION_ABORTABLE}
    h.flush()
    assert h.core.verify("t", pid, e, [A0]) == {A0: ErrorCode.PRODUCER_FENCED}  # an older epoch
    h.write_markers()
    h.flush()
    assert h.core.verify("t", pid, e + 1, [A0]) == {A0: ErrorCode.TRANSACTION_ABORTABLE}  # the next is not open


def test_verification_answers_concurrent_transactions_while_the_markers_are_written() -> None:
    """Kafka's handleVerifyPartitionsInTransaction: PrepareCommit/PrepareAbort at the presented epoch is
    CONCURRENT_TRANSACTIONS for every partition (retriable), until Complete* is durable."""
    h = Harness()
    pid, e = ok(h.init())
    ok(h.add(pid, e, A0))
    ok(h.end(pid, e, True))  # PrepareCommit at e + 1
    concurrent = {A0: ErrorCode.CONCURRENT_TRANSACTIONS, A1: ErrorCode.CONCURRENT_TRANSACTIONS}
    assert h.core.verify("t", pid, e + 1, [A0, A1]) == concurrent
    assert h.core.verify("t", pid, e, [A0]) == {A0: ErrorCode.PRODUCER_FENCED}  # the epoch checks come first
    assert h.core.verify("t", pid + 1, e + 1, [A0]) == {A0: ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    h.auto = False
    h.write_markers()  # CompleteCommit in flight: still PrepareCommit
    assert h.core.verify("t", pid, e + 1, [A0]) == {A0: ErrorCode.CONCURRENT_TRANSACTIONS}
    h.flush()
    assert h.core.verify("t", pid, e + 1, [A0]) == {A0: ErrorCode.TRANSACTION_ABORTABLE}
    # an end that keeps the epoch (before KIP-890): PrepareAbort at the epoch the transaction ran at
    h.auto = True
    ok(h.add(pid, e + 1, A0))
    ok(h.end(pid, e + 1, False, bump=False))
    assert h.md().state is TxnState.PREPARE_ABORT
    assert h.core.verify("t", pid, e + 1, [A0]) == {A0: ErrorCode.CONCURRENT_TRANSACTIONS}
    h.write_markers()
    assert h.core.verify("t", pid, e + 1, [A0]) == {A0: ErrorCode.TRANSACTION_ABORTABLE}


def test_add_offsets_adds_the_groups_offsets_partition() -> None:
    h = Harness()
    pid, e = ok(h.init())
    ok(h.add_offsets(pid, e, "billing", partitions=7))
    tp = TopicPartition("__consumer_offsets", offsets_partition_for("billing", 7))
    assert h.md().partitions == {tp} and h.md().state is TxnState.ONGOING
    ok(h.end(pid, e, True))
    assert h.markers[0].partitions == {tp}


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced() -> None:
    h = Harness()
    pid, e = ok(h.init(timeout=5000))
    h.now = 1000
    ok(h.add(pid, e, A0))
    h.tick(5999)
    assert h.md().state is TxnState.ONGOING
    h.tick(6000)
    md = h.md()
    assert (md.state, md.producer_epoch, md.last_producer_epoch) == (TxnState.PREPARE_ABORT, e + 1, -1)
    assert h.markers[0].committed is False and h.markers[0].producer_epoch == e + 1
    h.write_markers()
    assert error(h.end(pid, e, True)) == ErrorCode.PRODUCER_FENCED  # not a retry: the bump was not its own
    assert error(h.end(pid, e, False)) == ErrorCode.PRODUCER_FENCED


def test_an_unused_id_expires_but_not_one_with_a_transaction() -> None:
    h = Harness(TxnCoreConfig(id_expiration_ms=10_000))
    ok(h.init("idle"))
    pid, e = ok(h.init("busy", timeout=900_000))
    ok(h.add(pid, e, txn_id="busy"))
    h.tick(9_999)
    assert set(h.core.txns) == {"idle", "busy"}
    h.tick(10_000)
    assert set(h.core.txns) == {"busy"}
    assert h.log[-1] == ("idle", None)  # a tombstone
    assert ok(h.init("idle"))[1] == 0  # a new producer


def test_end_txn_without_a_transaction_is_an_invalid_state() -> None:
    h = Harness()
    pid, e = ok(h.init())
    assert error(h.end(pid, e, True)) == ErrorCode.INVALID_TXN_STATE
    assert error(h.end(pid, e, False)) == ErrorCode.INVALID_TXN_STATE
    assert h.md().state is TxnState.EMPTY and h.log[-1][1] == h.md()


def test_a_timeout_above_the_maximum_is_refused() -> None:
    h = Harness(TxnCoreConfig(max_timeout_ms=1000))
    assert error(h.init(timeout=1001)) == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert error(h.init(timeout=0)) == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert h.core.txns == {} and h.log == []
    ok(h.init(timeout=1000))


def test_an_unknown_id_or_another_producer_id_is_an_invalid_mapping() -> None:
    h = Harness()
    assert error(h.add(5, 0)) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert error(h.end(5, 0)) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    pid, e = ok(h.init())
    assert error(h.add(pid + 1, e)) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert error(h.end(pid + 1, e)) == ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_init_with_the_producers_own_id_and_epoch_checks_them() -> None:
    h = Harness()
    pid, e = ok(h.init())
    assert ok(h.init(pid=pid, epoch=e)) == (pid, e + 1)
    assert ok(h.init(pid=pid, epoch=e)) == (pid, e + 1)  # a retry of that bump
    assert error(h.init(pid=pid, epoch=e + 5)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert error(h.init(pid=pid + 9, epoch=0)) == ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_a_failed_write_changes_nothing_and_is_answered_with_the_coordinator_error() -> None:
    h = Harness()
    pid, e = ok(h.init())
    ok(h.add(pid, e))
    h.auto = False
    h.end(pid, e, True)
    h.persisted(h.pending[0], ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert list(h.replies.values())[-1].error == ErrorCode.NOT_COORDINATOR
    assert h.md().state is TxnState.ONGOING and h.markers == []
    h.end(pid, e, True)
    h.persisted(h.pending[0], ErrorCode.REQUEST_TIMED_OUT)
    assert list(h.replies.values())[-1].error == ErrorCode.COORDINATOR_NOT_AVAILABLE


def test_a_failed_complete_write_is_retried() -> None:
    h = Harness()
    pid, e = ok(h.init())
    ok(h.add(pid, e))
    ok(h.end(pid, e, True))
    h.auto = False
    h.write_markers()
    h.persisted(h.pending[0], ErrorCode.NOT_ENOUGH_REPLICAS)
    assert h.md().state is TxnState.PREPARE_COMMIT and h.core.completions_to_retry()
    h.auto = True
    h.tick(1)
    assert h.md().state is TxnState.COMPLETE_COMMIT and not h.core.completions_to_retry()


def test_a_late_marker_report_for_another_transaction_changes_nothing() -> None:
    h = Harness()
    pid, e = ok(h.init())
    ok(h.add(pid, e))
    ok(h.end(pid, e, True))
    h.take(h.core.on_markers_written("t", pid, e, h.now))  # the data epoch, not the markers'
    h.take(h.core.on_markers_written("other", pid, e + 1, h.now))
    assert h.md().state is TxnState.PREPARE_COMMIT


def test_a_reloaded_coordinator_resends_the_markers_of_prepared_transactions() -> None:
    h = Harness()
    pid, e = ok(h.init())
    ok(h.add(pid, e, A0, B0))
    ok(h.end(pid, e, False))
    core = h.reloaded()
    assert core.txns == h.core.txns
    [m] = [a for a in core.resume().actions]
    assert m == h.markers[0]


def test_the_transition_table_is_kafkas() -> None:
    assert can_transition(TxnState.ONGOING, TxnState.PREPARE_COMMIT)
    assert not can_transition(TxnState.EMPTY, TxnState.PREPARE_COMMIT)
    assert not can_transition(TxnState.PREPARE_COMMIT, TxnState.COMPLETE_ABORT)
    assert can_transition(TxnState.PREPARE_EPOCH_FENCE, TxnState.PREPARE_ABORT)
    assert not can_transition(TxnState.ONGOING, TxnState.DEAD)


def test_the_timeout_is_kept_per_id() -> None:
    h = Harness()
    ok(h.init(timeout=TIMEOUT))
    assert h.md().timeout_ms == TIMEOUT
