"""The ``Transactions`` gRPC service on the broker listener: request and response translation only.

AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions and ListTransactions are the transaction
coordinator's (``TransactionCoordinator``); WriteTxnMarkers and DescribeProducers are served by partition leaders
and go to a ``PartitionTxnHandler``, which the broker's data plane provides.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from odradek.broker.transactions.coordinator import TransactionCoordinator
from odradek.broker.transactions.metadata import TxnMetadata
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition
from odradek.proto import transaction_pb2 as tpb
from odradek.proto import transaction_pb2_grpc


class PartitionTxnHandler(Protocol):
    """The partition leader's side: markers into the logs, and the logs' active producers."""

    async def write_txn_markers(self, request: tpb.WriteTxnMarkersRequest) -> tpb.WriteTxnMarkersResponse: ...

    def describe_producers(self, request: tpb.DescribeProducersRequest) -> tpb.DescribeProducersResponse: ...


def partitions_of(topics: Iterable[tpb.TxnTopic]) -> list[TopicPartition]:
    return [TopicPartition(t.name, p) for t in topics for p in t.partitions]


def topic_results(errors: Mapping[TopicPartition, int]) -> list[tpb.TxnTopicResult]:
    by_topic: dict[str, list[tpb.TxnPartitionResult]] = defaultdict(list)
    for tp, error in sorted(errors.items()):
        by_topic[tp.topic].append(tpb.TxnPartitionResult(partition=tp.partition, error=ErrorCode.ValueType(error)))
    return [tpb.TxnTopicResult(name=name, partitions=parts) for name, parts in by_topic.items()]


def txn_topics(partitions: Iterable[TopicPartition]) -> list[tpb.TxnTopic]:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in partitions:
        by_topic[tp.topic].append(tp.partition)
    return [tpb.TxnTopic(name=t, partitions=sorted(ps)) for t, ps in sorted(by_topic.items())]


def description(md: TxnMetadata, coordinator_id: int) -> tpb.TransactionDescription:
    return tpb.TransactionDescription(
        transactional_id=md.transactional_id,
        error=ErrorCode.NONE,
        state=md.state.value,
        transaction_timeout_ms=md.timeout_ms,
        transaction_start_time_ms=md.txn_start_ms,
        producer_id=md.producer_id,
        producer_epoch=md.producer_epoch,
        topics=txn_topics(md.partitions),
        coordinator_id=coordinator_id,
        last_update_time_ms=md.last_update_ms,
    )


class TransactionsService(transaction_pb2_grpc.TransactionsServicer):
    def __init__(self, coordinator: TransactionCoordinator, partitions: PartitionTxnHandler) -> None:
        self.coordinator = coordinator
        self.partitions = partitions

    async def AddPartitionsToTxn(
        self, request: tpb.AddPartitionsToTxnRequest, context: Any
    ) -> tpb.AddPartitionsToTxnResponse:
        partitions = partitions_of(request.topics)
        c = self.coordinator
        if request.verify_only:
            error, errors = c.verify(request.transactional_id, request.producer_id, request.producer_epoch, partitions)
        else:
            error, errors = await c.add_partitions(
                request.transactional_id, request.producer_id, request.producer_epoch, partitions
            )
        return tpb.AddPartitionsToTxnResponse(error=ErrorCode.ValueType(error), results=topic_results(errors))

    async def AddOffsetsToTxn(self, request: tpb.AddOffsetsToTxnRequest, context: Any) -> tpb.AddOffsetsToTxnResponse:
        error = await self.coordinator.add_offsets(
            request.transactional_id, request.producer_id, request.producer_epoch, request.group_id
        )
        return tpb.AddOffsetsToTxnResponse(error=ErrorCode.ValueType(error))

    async def EndTxn(self, request: tpb.EndTxnRequest, context: Any) -> tpb.EndTxnResponse:
        error, pid, epoch = await self.coordinator.end_txn(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.committed,
            bump_epoch=not request.keep_epoch,
        )
        return tpb.EndTxnResponse(error=ErrorCode.ValueType(error), producer_id=pid, producer_epoch=epoch)

    async def WriteTxnMarkers(self, request: tpb.WriteTxnMarkersRequest, context: Any) -> tpb.WriteTxnMarkersResponse:
        return await self.partitions.write_txn_markers(request)

    async def DescribeTransactions(
        self, request: tpb.DescribeTransactionsRequest, context: Any
    ) -> tpb.DescribeTransactionsResponse:
        out = []
        for txn_id in request.transactional_ids:
            error, md = self.coordinator.describe(txn_id)
            if md is None:
                out.append(tpb.TransactionDescription(transactional_id=txn_id, error=ErrorCode.ValueType(error)))
            else:
                out.append(description(md, self.coordinator.broker_id))
        return tpb.DescribeTransactionsResponse(transactions=out)

    async def ListTransactions(
        self, request: tpb.ListTransactionsRequest, context: Any
    ) -> tpb.ListTransactionsResponse:
        error, unknown, txns = self.coordinator.list_transactions(
            request.state_filters, request.producer_id_filters, request.duration_filter_ms
        )
        return tpb.ListTransactionsResponse(
            error=ErrorCode.ValueType(error),
            unknown_state_filters=unknown,
            transactions=[
                tpb.ListedTransaction(
                    transactional_id=md.transactional_id,
                    producer_id=md.producer_id,
                    state=md.state.value,
                    coordinator_id=self.coordinator.broker_id,
                )
                for md in txns
            ],
        )

    async def DescribeProducers(
        self, request: tpb.DescribeProducersRequest, context: Any
    ) -> tpb.DescribeProducersResponse:
        return self.partitions.describe_producers(request)
