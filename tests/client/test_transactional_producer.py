"""The transactional producer against fake brokers with a fake transaction coordinator (fake_txn.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_txn import TxnCluster

from odradek.client import ConsumerGroupMetadata, OffsetAndMetadata, Producer, TopicPartition
from odradek.client.config import ProducerConfig
from odradek.client.errors import (
    CommitFailedError,
    ConfigError,
    ErrorCode,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    ProducerFencedError,
    TransactionAbortableError,
)
from odradek.client.producer import TransactionAbortedError

GROUP = ConsumerGroupMetadata("g", 7, "member-1", "instance-1")


@pytest.fixture
def txn_cluster() -> Iterator[TxnCluster]:
    c = TxnCluster(3)
    c.create_topic("t", 3)
    yield c
    c.stop()


def producer(cluster: TxnCluster, txn_id: str = "copier-0", **extra: object) -> Producer:
    return Producer(
        {"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id, "retry.backoff.ms": 10, **extra}
    )


# ---- config ----


def test_transactional_config_defaults_and_validation() -> None:
    servers = {"bootstrap.servers": "localhost:1"}
    c = ProducerConfig.from_mapping({**servers, "transactional.id": "x"})
    assert (c.transactional_id, c.transaction_timeout_ms, c.enable_idempotence) == ("x", 60_000, True)
    c = ProducerConfig.from_mapping({**servers, "transactional.id": "x", "transaction.timeout.ms": "900"})
    assert c.transaction_timeout_ms == 900
    assert ProducerConfig.from_mapping(servers).transactional_id is None
    for bad, message in [
        ({"transactional.id": ""}, "transactional.id must be a non-empty string"),
        ({"transactional.id": "x", "enable.idempotence": False}, "transactional.id needs enable.idempotence=true"),
        ({"transactional.id": "x", "acks": 1}, "transactional.id needs: acks must be all"),
        ({"transactional.id": "x", "transaction.timeout.ms": 0}, "transaction.timeout.ms must be an integer"),
        ({"transaction.timeout.ms": 1000}, "transaction.timeout.ms needs a transactional.id"),
    ]:
        with pytest.raises(ConfigError) as info:
            ProducerConfig.from_mapping({**servers, **bad})
        assert message in str(info.value)


def test_transaction_timeout_is_sent_with_init_producer_id(txn_cluster: TxnCluster) -> None:
    with producer(txn_cluster, **{"transaction.timeout.ms": 12_000}) as p:
        p.init_transactions()
    request = txn_cluster.last_request["InitProducerId"]
    assert (request.transactional_id, request.transaction_timeout_ms) == ("copier-0", 12_000)


def test_read_committed_consumers_fetch_with_that_isolation_level(txn_cluster: TxnCluster) -> None:
    from odradek.client import Consumer
    from odradek.proto import broker_pb2 as pb

    for level, wire in (("read_committed", pb.READ_COMMITTED), ("read_uncommitted", pb.READ_UNCOMMITTED)):
        with Consumer({"bootstrap.servers": txn_cluster.bootstrap, "isolation.level": level}) as c:
            c.assign([TopicPartition("t", 0)])
            c.seek(TopicPartition("t", 0), 0)
            c.poll(200)
        assert txn_cluster.last_request["Fetch"].isolation_level == wire


# ---- the happy path ----


def test_a_committed_transaction_adds_partitions_sends_offsets_and_bumps_the_epoch(txn_cluster: TxnCluster) -> None:
    with producer(txn_cluster, **{"transaction.timeout.ms": 12_000}) as p:
        p.init_transactions()
        assert txn_cluster.rpc_count("FindCoordinator/TRANSACTION") >= 1
        txn = txn_cluster.txns["copier-0"]
        pid = txn.producer_id
        p.begin_transaction()
        futures = [p.send("t", f"v{i}".encode(), partition=i % 2) for i in range(6)]
        p.send_offsets_to_transaction(
            {TopicPartition("in", 0): 42, TopicPartition("in", 1): OffsetAndMetadata(7)}, GROUP
        )
        p.commit_transaction()
        assert all(f.result(5).offset >= 0 for f in futures)
        offsets_request = txn_cluster.last_request["TxnOffsetCommit"]
        assert (offsets_request.generation_id, offsets_request.member_id, offsets_request.group_instance_id) == (
            7,
            "member-1",
            "instance-1",
        )
        assert txn_cluster.committed_offsets == {("g", "in", 0): 42, ("g", "in", 1): 7}
        assert txn_cluster.ended == [("copier-0", pid, 1, True, frozenset({("t", 0), ("t", 1)}))]
        produce = txn_cluster.last_request["Produce"]
        assert produce.transactional_id == "copier-0" and produce.acks == -1
        assert {(pid, 0, True)} == {(b[2], b[3], b[4]) for b in txn_cluster.transactional_batches}

        # The next transaction runs under the epoch EndTxn answered, sequences from 0 again.
        p.begin_transaction()
        p.send("t", b"next", partition=0).result(5)
        p.commit_transaction()
        assert txn_cluster.transactional_batches[-1][2:] == (pid, 1, True)
        assert txn_cluster.ended[-1][:4] == ("copier-0", pid, 2, True)
        assert [r.value for r in txn_cluster.records("t", 0)] == [b"v0", b"v2", b"v4", b"next"]


def test_an_empty_transaction_commits_without_the_coordinator(txn_cluster: TxnCluster) -> None:
    with producer(txn_cluster) as p:
        p.init_transactions()
        p.begin_transaction()
        p.commit_transaction()
        p.begin_transaction()
        p.abort_transaction()
        assert txn_cluster.rpc_count("EndTxn") == 0 and txn_cluster.rpc_count("AddPartitionsToTxn") == 0


# ---- refusals ----


def test_send_outside_a_transaction_is_a_typed_error_and_sends_nothing(txn_cluster: TxnCluster) -> None:
    with producer(txn_cluster) as p:
        with pytest.raises(InvalidTxnStateError):
            p.send("t", b"before init")
        with pytest.raises(InvalidTxnStateError):
            p.begin_transaction()
        p.init_transactions()
        with pytest.raises(InvalidTxnStateError):
            p.send("t", b"no transaction")
        with pytest.raises(InvalidTxnStateError):
            p.commit_transaction()
        with pytest.raises(InvalidTxnStateError):
            p.send_offsets_to_transaction({TopicPartition("in", 0): 1}, GROUP)
        p.begin_transaction()
        p.send("t", b"in", partition=0)
        p.commit_transaction()
        with pytest.raises(InvalidTxnStateError):
            p.send("t", b"after commit")
    assert [r.value for r in txn_cluster.records("t", 0)] == [b"in"]


def test_transactions_without_a_transactional_id_are_refused(txn_cluster: TxnCluster) -> None:
    with Producer({"bootstrap.servers": txn_cluster.bootstrap}) as p:
        with pytest.raises(InvalidTxnStateError, match=r"transactional\.id"):
            p.init_transactions()
        p.send("t", b"plain", partition=0).result(5)


def test_a_timeout_above_the_maximum_fails_init_with_a_typed_error(txn_cluster: TxnCluster) -> None:
    txn_cluster.inject("InitProducerId", ErrorCode.INVALID_TRANSACTION_TIMEOUT)
    with producer(txn_cluster) as p:
        with pytest.raises(InvalidTransactionTimeoutError):
            p.init_transactions()
        with pytest.raises(InvalidTransactionTimeoutError):
            p.begin_transaction()


# ---- retriable ----


def test_retriable_coordinator_errors_are_retried(txn_cluster: TxnCluster) -> None:
    txn_cluster.inject("InitProducerId", ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NOT_COORDINATOR)
    txn_cluster.inject("AddPartitionsToTxn", ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    txn_cluster.inject("EndTxn", ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NOT_COORDINATOR)
    with producer(txn_cluster) as p:
        p.init_transactions()
        p.begin_transaction()
        future = p.send("t", b"x", partition=1)
        p.commit_transaction()
        assert future.result(5).offset == 0
    assert txn_cluster.rpc_count("InitProducerId") == 3
    assert txn_cluster.rpc_count("AddPartitionsToTxn") == 3
    assert txn_cluster.rpc_count("EndTxn") == 3
    assert txn_cluster.rpc_count("FindCoordinator/TRANSACTION") >= 3  # found again after NOT_COORDINATOR
    assert txn_cluster.ended[-1][3] is True


# ---- abortable ----


def test_a_refused_batch_makes_commit_fail_abortable_and_abort_recovers(txn_cluster: TxnCluster) -> None:
    with producer(txn_cluster) as p:
        p.init_transactions()
        p.begin_transaction()
        txn_cluster.inject_produce_error("t", 0, ErrorCode.TRANSACTION_ABORTABLE)
        failed = p.send("t", b"refused", partition=0)
        with pytest.raises(TransactionAbortableError):
            p.commit_transaction()
        assert failed.exception(5) is not None
        with pytest.raises(TransactionAbortableError):
            p.send("t", b"more")
        p.abort_transaction()
        assert txn_cluster.ended[-1][3] is False
        p.begin_transaction()  # the producer goes on
        p.send("t", b"ok", partition=0)
        p.commit_transaction()
        assert txn_cluster.ended[-1][3] is True


def test_abort_drops_records_not_yet_sent(txn_cluster: TxnCluster) -> None:
    with producer(txn_cluster, **{"linger.ms": 60_000, "delivery.timeout.ms": 120_000}) as p:
        p.init_transactions()
        p.begin_transaction()
        future = p.send("t", b"lingering", partition=2)
        p.abort_transaction()
        assert isinstance(future.exception(5), TransactionAbortedError)
    assert txn_cluster.records("t", 2) == []


def test_offsets_of_a_stale_generation_are_refused_abortable(txn_cluster: TxnCluster) -> None:
    with producer(txn_cluster) as p:
        p.init_transactions()
        p.begin_transaction()
        with pytest.raises(CommitFailedError):
            p.send_offsets_to_transaction({TopicPartition("in", 0): 5}, GROUP._replace(generation_id=6))
        with pytest.raises(TransactionAbortableError):
            p.commit_transaction()
        p.abort_transaction()
    assert txn_cluster.committed_offsets == {}


# ---- fatal ----


def test_a_second_producer_with_the_same_id_fences_the_first(txn_cluster: TxnCluster) -> None:
    first = producer(txn_cluster)
    try:
        first.init_transactions()
        first.begin_transaction()
        first.send("t", b"zombie", partition=0).result(5)
        with producer(txn_cluster) as second:
            second.init_transactions()  # bumps the epoch: the first one's transaction is aborted
            assert txn_cluster.ended[-1][3] is False
            with pytest.raises(ProducerFencedError):
                first.commit_transaction()
            with pytest.raises(ProducerFencedError):
                first.abort_transaction()
            with pytest.raises(ProducerFencedError):
                first.begin_transaction()
            second.begin_transaction()
            second.send("t", b"live", partition=0)
            second.commit_transaction()
    finally:
        first.close()
