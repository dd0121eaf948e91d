"""The producer-id and transaction APIs on the Kafka listener (broker/kafka/txn_apis.py): each served version's
request, encoded by kafka-python, reaches the producer id, transaction or group service as its typed request, and
the service's answer comes back in kafka-python's decoding of that version. The services are recorders with chosen
answers: only the translation is tested here."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from kafka_harness import Recorder

from odradek.broker.api.producer_ids import InitProducerIdAnswer
from odradek.broker.groups.requests import OffsetCommitAnswer, PartitionError, TopicErrors
from odradek.broker.kafka import txn_apis
from odradek.broker.kafka.apis import ApiRegistry
from odradek.broker.kafka.backend import KafkaBackend
from odradek.broker.kafka.wire import ConnectionInfo, KafkaContext, RequestHeader
from odradek.broker.transactions.requests import (
    AddOffsetsToTxnAnswer,
    AddPartitionsToTxn,
    AddPartitionsToTxnAnswer,
    EndTxnAnswer,
)
from odradek.client.common.request_context import KAFKA, RequestContext
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition

CTX = KafkaContext(ConnectionInfo(3, "KAFKA", "10.0.0.9", 4444), "txn-app")


def txn_registry(
    data: Recorder | None = None, transactions: Recorder | None = None, groups: Recorder | None = None
) -> ApiRegistry:
    backend = KafkaBackend(
        broker_id=1,
        cluster_id="c",
        listener="KAFKA",
        image=lambda: None,  # type: ignore[arg-type,return-value]
        controller_id=lambda: 1,
        endpoint=lambda node: None,
        data=SimpleNamespace(producer_id_service=data or Recorder()),  # type: ignore[arg-type]
        groups=groups or Recorder(),  # type: ignore[arg-type]
        transactions=transactions or Recorder(),  # type: ignore[arg-type]
        admin=None,  # type: ignore[arg-type]
    )
    registry = ApiRegistry()
    txn_apis.register(registry, backend)
    return registry


async def txn_roundtrip(
    registry: ApiRegistry, request: Any, response_cls: Any, version: int, throttle_ms: int = 0
) -> Any:
    """Encode ``request`` at ``version`` with kafka-python, serve it, and decode the reply's bytes likewise."""
    found = registry.get(request.API_KEY)
    assert found is not None
    spec, handler = found
    assert spec.serves(version)
    header = RequestHeader(request.API_KEY, version, 9, CTX.client_id, 0)
    reply = await handler(CTX, header, memoryview(bytes(request.encode(version=version))))
    assert reply is not None
    return response_cls.decode(b"".join(bytes(c) for c in reply.encode(throttle_ms)), version=version)  # type: ignore[arg-type]


def test_served_versions() -> None:
    served = {spec.name: (spec.min_version, spec.max_version) for spec in txn_registry().specs()}
    assert served == {
        "InitProducerId": (0, 5),
        "AddPartitionsToTxn": (0, 5),
        "AddOffsetsToTxn": (0, 4),
        "EndTxn": (0, 5),
        "TxnOffsetCommit": (0, 4),
    }


# ---- InitProducerId ----


@pytest.mark.parametrize("version", range(0, 6))
async def test_init_producer_id_transactional(version: int) -> None:
    data = Recorder(init_producer_id=InitProducerIdAnswer(ErrorCode.NONE, 4000, 3))
    request = InitProducerIdRequest(
        transactional_id="tx-1", transaction_timeout_ms=60_000, producer_id=4000, producer_epoch=2
    )
    r = await txn_roundtrip(txn_registry(data=data), request, InitProducerIdResponse, version, throttle_ms=12)
    ((_, sent, context),) = data.calls
    assert (sent.transactional_id, sent.transaction_timeout_ms) == ("tx-1", 60_000)
    assert (sent.producer_id, sent.producer_epoch) == ((4000, 2) if version >= 3 else (-1, -1))
    assert context == RequestContext("User:ANONYMOUS", "txn-app", "ipv4:10.0.0.9:4444", KAFKA)
    assert (r.error_code, r.producer_id, r.producer_epoch, r.throttle_time_ms) == (0, 4000, 3, 12)


@pytest.mark.parametrize("version", range(0, 6))
async def test_init_producer_id_idempotent(version: int) -> None:
    """A null transactional id is an idempotent producer: the service's empty string."""
    data = Recorder(init_producer_id=InitProducerIdAnswer(ErrorCode.NONE, 77, 0))
    request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=0)
    r = await txn_roundtrip(txn_registry(data=data), request, InitProducerIdResponse, version)
    (sent,) = data.requests("init_producer_id")
    assert (sent.transactional_id, sent.producer_id, sent.producer_epoch) == ("", -1, -1)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, 77, 0)


async def test_init_producer_id_empty_transactional_id_is_refused() -> None:
    data = Recorder(init_producer_id=InitProducerIdAnswer(ErrorCode.NONE, 77, 0))
    request = InitProducerIdRequest(transactional_id="", transaction_timeout_ms=1000)
    r = await txn_roundtrip(txn_registry(data=data), request, InitProducerIdResponse, 4)
    assert data.calls == []
    assert (r.error_code, r.producer_id, r.producer_epoch) == (ErrorCode.INVALID_REQUEST, -1, -1)


@pytest.mark.parametrize("version", range(0, 6))
async def test_init_producer_id_fenced(version: int) -> None:
    """PRODUCER_FENCED exists from v4 (KIP-588); older clients get INVALID_PRODUCER_EPOCH, as Kafka answers."""
    answer = InitProducerIdAnswer(ErrorCode.PRODUCER_FENCED, -1, -1)
    request = InitProducerIdRequest(transactional_id="tx-1", transaction_timeout_ms=1000)
    r = await txn_roundtrip(
        txn_registry(data=Recorder(init_producer_id=answer)), request, InitProducerIdResponse, version
    )
    expected = ErrorCode.PRODUCER_FENCED if version >= 4 else ErrorCode.INVALID_PRODUCER_EPOCH
    assert (r.error_code, r.producer_id, r.producer_epoch) == (expected, -1, -1)


# ---- AddPartitionsToTxn ----


def _add_answer(request: AddPartitionsToTxn) -> AddPartitionsToTxnAnswer:
    if request.transactional_id == "elsewhere":
        return AddPartitionsToTxnAnswer(ErrorCode.NOT_COORDINATOR, {})
    errors = {}
    for tp in request.partitions:
        error = ErrorCode.NONE
        if tp.partition == 1:
            error = ErrorCode.TRANSACTION_ABORTABLE if request.verify_only else ErrorCode.PRODUCER_FENCED
        errors[tp] = int(error)
    return AddPartitionsToTxnAnswer(ErrorCode.NONE, errors)


def _partition_errors(topic_results: Any) -> list[tuple[str, int, int]]:
    return [(t.name, p.partition_index, p.partition_error_code) for t in topic_results for p in t.results_by_partition]


@pytest.mark.parametrize("version", range(0, 4))
async def test_add_partitions_to_txn_client_form(version: int) -> None:
    transactions = Recorder(add_partitions_to_txn=_add_answer)
    registry = txn_registry(transactions=transactions)
    Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    request = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx-1",
        v3_and_below_producer_id=4000,
        v3_and_below_producer_epoch=2,
        v3_and_below_topics=[Topic(name="t", partitions=[0, 1]), Topic(name="u", partitions=[2])],
    )
    r = await txn_roundtrip(registry, request, AddPartitionsToTxnResponse, version, throttle_ms=5)
    ((_, sent, context),) = transactions.calls
    assert (sent.transactional_id, sent.producer_id, sent.producer_epoch, sent.verify_only) == ("tx-1", 4000, 2, False)
    assert sent.partitions == (TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 2))
    assert context == RequestContext("User:ANONYMOUS", "txn-app", "ipv4:10.0.0.9:4444", KAFKA)
    fenced = ErrorCode.PRODUCER_FENCED if version >= 2 else ErrorCode.INVALID_PRODUCER_EPOCH
    assert _partition_errors(r.results_by_topic_v3_and_below) == [("t", 0, 0), ("t", 1, fenced), ("u", 2, 0)]
    assert r.throttle_time_ms == 5

    # A request-level error is every partition's.
    request.v3_and_below_transactional_id = "elsewhere"
    r = await txn_roundtrip(registry, request, AddPartitionsToTxnResponse, version)
    assert _partition_errors(r.results_by_topic_v3_and_below) == [
        ("t", 0, ErrorCode.NOT_COORDINATOR),
        ("t", 1, ErrorCode.NOT_COORDINATOR),
        ("u", 2, ErrorCode.NOT_COORDINATOR),
    ]


@pytest.mark.parametrize("version", [4, 5])
async def test_add_partitions_to_txn_batched_form(version: int) -> None:
    transactions = Recorder(add_partitions_to_txn=_add_answer)
    Txn = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
    Topic = Txn.AddPartitionsToTxnTopic
    request = AddPartitionsToTxnRequest(
        transactions=[
            Txn(
                transactional_id="tx-1",
                producer_id=1,
                producer_epoch=0,
                verify_only=True,
                topics=[Topic(name="t", partitions=[0, 1])],
            ),
            Txn(
                transactional_id="elsewhere",
                producer_id=2,
                producer_epoch=5,
                verify_only=False,
                topics=[Topic(name="u", partitions=[3])],
            ),
        ]
    )
    r = await txn_roundtrip(
        txn_registry(transactions=transactions), request, AddPartitionsToTxnResponse, version, throttle_ms=5
    )
    first, second = transactions.requests("add_partitions_to_txn")
    assert (first.transactional_id, first.producer_id, first.producer_epoch, first.verify_only) == ("tx-1", 1, 0, True)
    assert (second.transactional_id, second.producer_id, second.producer_epoch, second.verify_only) == (
        "elsewhere",
        2,
        5,
        False,
    )
    assert r.error_code == 0 and r.throttle_time_ms == 5
    (a, b) = r.results_by_transaction
    # TRANSACTION_ABORTABLE exists from v5 (KIP-890); v4 answers INVALID_TXN_STATE.
    abortable = ErrorCode.TRANSACTION_ABORTABLE if version >= 5 else ErrorCode.INVALID_TXN_STATE
    assert a.transactional_id == "tx-1" and _partition_errors(a.topic_results) == [("t", 0, 0), ("t", 1, abortable)]
    assert b.transactional_id == "elsewhere" and _partition_errors(b.topic_results) == [
        ("u", 3, ErrorCode.NOT_COORDINATOR)
    ]


# ---- AddOffsetsToTxn, EndTxn ----


@pytest.mark.parametrize("version", range(0, 5))
async def test_add_offsets_to_txn(version: int) -> None:
    transactions = Recorder(add_offsets_to_txn=AddOffsetsToTxnAnswer(ErrorCode.PRODUCER_FENCED))
    request = AddOffsetsToTxnRequest(transactional_id="tx-1", producer_id=4000, producer_epoch=2, group_id="g")
    registry = txn_registry(transactions=transactions)
    r = await txn_roundtrip(registry, request, AddOffsetsToTxnResponse, version, throttle_ms=4)
    (sent,) = transactions.requests("add_offsets_to_txn")
    assert (sent.transactional_id, sent.producer_id, sent.producer_epoch, sent.group_id) == ("tx-1", 4000, 2, "g")
    fenced = ErrorCode.PRODUCER_FENCED if version >= 2 else ErrorCode.INVALID_PRODUCER_EPOCH
    assert (r.error_code, r.throttle_time_ms) == (fenced, 4)


@pytest.mark.parametrize("committed", [True, False])
async def test_end_txn_v5_bumps_the_epoch(committed: bool) -> None:
    transactions = Recorder(end_txn=EndTxnAnswer(ErrorCode.NONE, 4000, 3))
    registry = txn_registry(transactions=transactions)
    request = EndTxnRequest(transactional_id="tx-1", producer_id=4000, producer_epoch=2, committed=committed)
    r = await txn_roundtrip(registry, request, EndTxnResponse, 5, throttle_ms=2)
    (sent,) = transactions.requests("end_txn")
    assert (sent.transactional_id, sent.producer_id, sent.producer_epoch, sent.committed, sent.keep_epoch) == (
        "tx-1",
        4000,
        2,
        committed,
        False,
    )
    assert (r.error_code, r.producer_id, r.producer_epoch, r.throttle_time_ms) == (0, 4000, 3, 2)


@pytest.mark.parametrize("version", range(0, 5))
async def test_end_txn_before_v5_keeps_the_epoch(version: int) -> None:
    transactions = Recorder(end_txn=EndTxnAnswer(ErrorCode.PRODUCER_FENCED, 0, 0))
    registry = txn_registry(transactions=transactions)
    request = EndTxnRequest(transactional_id="tx-1", producer_id=4000, producer_epoch=2, committed=True)
    r = await txn_roundtrip(registry, request, EndTxnResponse, version, throttle_ms=2)
    (sent,) = transactions.requests("end_txn")
    assert (sent.producer_id, sent.producer_epoch, sent.committed, sent.keep_epoch) == (4000, 2, True, True)
    fenced = ErrorCode.PRODUCER_FENCED if version >= 2 else ErrorCode.INVALID_PRODUCER_EPOCH
    assert (r.error_code, r.throttle_time_ms) == (fenced, 2)


async def test_end_txn_error_answers_no_producer() -> None:
    transactions = Recorder(end_txn=EndTxnAnswer(ErrorCode.INVALID_TXN_STATE, 0, 0))
    request = EndTxnRequest(transactional_id="tx-1", producer_id=4000, producer_epoch=2, committed=True)
    r = await txn_roundtrip(txn_registry(transactions=transactions), request, EndTxnResponse, 5)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (ErrorCode.INVALID_TXN_STATE, -1, -1)


# ---- TxnOffsetCommit ----


@pytest.mark.parametrize("version", range(0, 5))
async def test_txn_offset_commit(version: int) -> None:
    errors = (
        ErrorCode.NONE,
        ErrorCode.ILLEGAL_GENERATION,
        ErrorCode.PRODUCER_FENCED,
        ErrorCode.TRANSACTION_ABORTABLE,
    )
    answer = OffsetCommitAnswer((TopicErrors("t", tuple(PartitionError(p, e) for p, e in enumerate(errors))),))
    groups = Recorder(txn_offset_commit=answer)
    Topic = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    Partition = Topic.TxnOffsetCommitRequestPartition
    request = TxnOffsetCommitRequest(
        transactional_id="tx-1",
        group_id="g",
        producer_id=4000,
        producer_epoch=2,
        generation_id=7,
        member_id="m-1",
        group_instance_id="i-1",
        topics=[
            Topic(
                name="t",
                partitions=[
                    Partition(
                        partition_index=0, committed_offset=10, committed_leader_epoch=3, committed_metadata="md"
                    ),
                    Partition(partition_index=1, committed_offset=11, committed_metadata=None),
                    Partition(partition_index=2, committed_offset=12, committed_metadata=""),
                ],
            )
        ],
    )
    r = await txn_roundtrip(txn_registry(groups=groups), request, TxnOffsetCommitResponse, version, throttle_ms=6)
    (sent,) = groups.requests("txn_offset_commit")
    assert (sent.transactional_id, sent.group_id, sent.producer_id, sent.producer_epoch) == ("tx-1", "g", 4000, 2)
    if version >= 3:
        assert (sent.generation_id, sent.member_id, sent.group_instance_id) == (7, "m-1", "i-1")
    else:
        assert (sent.generation_id, sent.member_id, sent.group_instance_id) == (-1, "", None)
    got = [
        (p.partition, p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
        for t in sent.topics
        for p in t.partitions
    ]
    epoch = 3 if version >= 2 else -1
    assert got == [(0, 10, epoch, "md"), (1, 11, -1, ""), (2, 12, -1, "")]
    assert r.throttle_time_ms == 6
    assert [(t.name, p.partition_index, p.error_code) for t in r.topics for p in t.partitions] == [
        ("t", 0, 0),
        ("t", 1, ErrorCode.ILLEGAL_GENERATION),
        ("t", 2, ErrorCode.INVALID_PRODUCER_EPOCH),  # no TxnOffsetCommit version knows PRODUCER_FENCED
        ("t", 3, ErrorCode.TRANSACTION_ABORTABLE if version >= 4 else ErrorCode.INVALID_TXN_STATE),
    ]
