"""The transaction admin APIs on the Kafka listener (broker/kafka/txn_admin_apis.py): DescribeProducers,
DescribeTransactions and ListTransactions at each served version, encoded and decoded by kafka-python, reach the
transaction service as its typed requests, and its typed answer comes back in Kafka's spelling. The service is a
recorder with chosen answers: only the translation, and what the listener checks itself, is tested."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
)
from kafka_harness import Recorder, call, served

from odradek.broker.kafka import txn_admin_apis
from odradek.broker.kafka.apis import ApiRegistry
from odradek.broker.kafka.backend import KafkaBackend
from odradek.broker.log.log import ActiveProducer
from odradek.broker.transactions.requests import (
    DescribeProducers,
    DescribeProducersAnswer,
    DescribeTransactions,
    DescribeTransactionsAnswer,
    ListedTransaction,
    ListTransactionsAnswer,
    PartitionProducers,
    ProducersTopic,
    TransactionDescription,
    TxnTopic,
)
from odradek.client.errors import ErrorCode


def registry_with(transactions: Recorder) -> ApiRegistry:
    backend = KafkaBackend(
        broker_id=1,
        cluster_id="c",
        listener="KAFKA",
        image=lambda: None,  # type: ignore[arg-type,return-value]
        controller_id=lambda: 1,
        endpoint=lambda node: None,
        data=None,  # type: ignore[arg-type]
        groups=None,  # type: ignore[arg-type]
        transactions=transactions,  # type: ignore[arg-type]
        admin=None,  # type: ignore[arg-type]
    )
    registry = ApiRegistry()
    txn_admin_apis.register(registry, backend)
    return registry


def test_served_versions() -> None:
    registry = registry_with(Recorder())
    assert {s.name: (s.min_version, s.max_version, s.flexible_from) for s in registry.specs()} == {
        "DescribeProducers": (0, 0, 0),
        "DescribeTransactions": (0, 0, 0),
        "ListTransactions": (0, 1, 0),
    }


# ---- DescribeProducers ----


def _producers(request: DescribeProducers) -> DescribeProducersAnswer:
    """The service's answer: t-0 has a transactional producer with an open transaction and an idempotent one, t-1
    is led elsewhere, t-7 does not exist, and "secret" is refused by its ACL (the service puts refused topics last)."""
    open_txn = ActiveProducer(4000, 2, 9, 1_700_000_000_123, 5, 42)
    idempotent = ActiveProducer(4001, 0, -1, -1, -1, -1)
    answers = {
        0: PartitionProducers(0, active_producers=(open_txn, idempotent)),
        1: PartitionProducers(1, ErrorCode.NOT_LEADER_OR_FOLLOWER, "broker 1 does not lead t-1"),
        7: PartitionProducers(7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "?"),
    }
    allowed = [
        ProducersTopic(t.name, tuple(answers[p] for p in t.partitions)) for t in request.topics if t.name != "secret"
    ]
    refused = [
        ProducersTopic(t.name, (PartitionProducers(0, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "no"),))
        for t in request.topics
        if t.name == "secret"
    ]
    return DescribeProducersAnswer(tuple(allowed + refused))


@pytest.mark.parametrize("version", served(registry_with(Recorder()), DescribeProducersRequest))
async def test_describe_producers(version: int) -> None:
    transactions = Recorder(describe_producers=_producers)
    Topic = DescribeProducersRequest.TopicRequest
    request = DescribeProducersRequest(
        topics=[
            Topic(name="secret", partition_indexes=[0]),
            Topic(name="t", partition_indexes=[0, 1, 7]),
            Topic(name="no/such:name", partition_indexes=[0, 1]),
        ]
    )
    r = await call(registry_with(transactions), request, version)
    ((_, sent, context),) = transactions.calls
    # A name no topic may have is refused here, before any ACL check, as Kafka's broker does.
    assert [(t.name, list(t.partitions)) for t in sent.topics] == [("secret", [0]), ("t", [0, 1, 7])]
    assert context.client_id == "test-client"
    assert [t.name for t in r.topics] == ["secret", "t", "no/such:name"]  # the request's order
    secret, t, bad = r.topics
    assert [(p.partition_index, p.error_code) for p in secret.partitions] == [(0, ErrorCode.TOPIC_AUTHORIZATION_FAILED)]
    p0, p1, p7 = t.partitions
    assert (p0.partition_index, p0.error_code, p0.error_message) == (0, 0, None)
    assert [
        (
            s.producer_id,
            s.producer_epoch,
            s.last_sequence,
            s.last_timestamp,
            s.coordinator_epoch,
            s.current_txn_start_offset,
        )
        for s in p0.active_producers
    ] == [(4000, 2, 9, 1_700_000_000_123, 5, 42), (4001, 0, -1, -1, -1, -1)]
    assert (p1.error_code, p1.error_message, p1.active_producers) == (
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        "broker 1 does not lead t-1",
        [],
    )
    assert (p7.partition_index, p7.error_code) == (7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert [(p.partition_index, p.error_code) for p in bad.partitions] == [
        (0, ErrorCode.INVALID_TOPIC_EXCEPTION),
        (1, ErrorCode.INVALID_TOPIC_EXCEPTION),
    ]
    assert "no/such:name" in bad.partitions[0].error_message


# ---- DescribeTransactions ----

ONGOING = TransactionDescription(
    transactional_id="tx-1",
    state="Ongoing",
    transaction_timeout_ms=60_000,
    transaction_start_time_ms=1_700_000_000_000,
    producer_id=4000,
    producer_epoch=3,
    topics=(TxnTopic("t", (0, 2)), TxnTopic("u", (1,))),
    coordinator_id=1,
)


def _described(request: DescribeTransactions) -> DescribeTransactionsAnswer:
    """tx-1 is ongoing here; the other ids are each answered with the error named after them."""
    errors = {"tx-gone": ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, "tx-far": ErrorCode.NOT_COORDINATOR}
    return DescribeTransactionsAnswer(
        tuple(
            ONGOING if txn_id == ONGOING.transactional_id else TransactionDescription(txn_id, errors[txn_id])
            for txn_id in request.transactional_ids
        )
    )


def _described_topics(state: Any) -> list[tuple[str, list[int]]]:
    return [(t.topic, list(t.partitions)) for t in state.topics]


@pytest.mark.parametrize("version", served(registry_with(Recorder()), DescribeTransactionsRequest))
async def test_describe_transactions(version: int) -> None:
    transactions = Recorder(describe_transactions=_described)
    request = DescribeTransactionsRequest(transactional_ids=["tx-gone", "tx-1", "tx-far"])
    r = await call(registry_with(transactions), request, version)
    (sent,) = transactions.requests("describe_transactions")
    assert list(sent.transactional_ids) == ["tx-gone", "tx-1", "tx-far"]
    gone, ongoing, far = r.transaction_states
    assert (gone.transactional_id, gone.error_code) == ("tx-gone", ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
    assert (far.transactional_id, far.error_code, far.topics) == ("tx-far", ErrorCode.NOT_COORDINATOR, [])
    assert (
        ongoing.error_code,
        ongoing.transactional_id,
        ongoing.transaction_state,
        ongoing.transaction_timeout_ms,
        ongoing.transaction_start_time_ms,
        ongoing.producer_id,
        ongoing.producer_epoch,
    ) == (0, "tx-1", "Ongoing", 60_000, 1_700_000_000_000, 4000, 3)
    assert _described_topics(ongoing) == [("t", [0, 2]), ("u", [1])]


# ---- ListTransactions ----


def _listed(error: int = ErrorCode.NONE) -> ListTransactionsAnswer:
    return ListTransactionsAnswer(
        error,
        ("Bogus",),
        (ListedTransaction("tx-1", 4000, "Ongoing", 1), ListedTransaction("tx-2", 4002, "PrepareAbort", 1)),
    )


@pytest.mark.parametrize("version", served(registry_with(Recorder()), ListTransactionsRequest))
async def test_list_transactions(version: int) -> None:
    transactions = Recorder(list_transactions=_listed())
    request = ListTransactionsRequest(
        state_filters=["Ongoing", "PrepareAbort", "Bogus"], producer_id_filters=[4000, 4002], duration_filter=5000
    )
    r = await call(registry_with(transactions), request, version)
    (sent,) = transactions.requests("list_transactions")
    assert list(sent.state_filters) == ["Ongoing", "PrepareAbort", "Bogus"]
    assert list(sent.producer_id_filters) == [4000, 4002]
    # v0 has no duration filter: every transaction, whatever its age.
    assert sent.duration_filter_ms == (5000 if version >= 1 else -1)
    assert (r.error_code, r.unknown_state_filters) == (0, ["Bogus"])
    assert [(t.transactional_id, t.producer_id, t.transaction_state) for t in r.transaction_states] == [
        ("tx-1", 4000, "Ongoing"),
        ("tx-2", 4002, "PrepareAbort"),
    ]


@pytest.mark.parametrize("version", served(registry_with(Recorder()), ListTransactionsRequest))
async def test_list_transactions_default_duration_filter_is_none(version: int) -> None:
    transactions = Recorder(list_transactions=_listed())
    await call(registry_with(transactions), ListTransactionsRequest(state_filters=[], producer_id_filters=[]), version)
    (sent,) = transactions.requests("list_transactions")
    assert (list(sent.state_filters), list(sent.producer_id_filters), sent.duration_filter_ms) == ([], [], -1)


@pytest.mark.parametrize("version", served(registry_with(Recorder()), ListTransactionsRequest))
async def test_list_transactions_error_comes_without_transactions(version: int) -> None:
    """While one of its partitions loads a coordinator answers COORDINATOR_LOAD_IN_PROGRESS and lists nothing, as
    Kafka's (the admin client retries)."""
    transactions = Recorder(list_transactions=_listed(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
    request = ListTransactionsRequest(state_filters=["Bogus"], producer_id_filters=[])
    r = await call(registry_with(transactions), request, version)
    assert (r.error_code, r.unknown_state_filters, r.transaction_states) == (
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        [],
        [],
    )
