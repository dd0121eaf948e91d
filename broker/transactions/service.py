"""The ``Transactions`` gRPC service on the broker listener: the gRPC listener's adapter of the transaction service
(``txn_service.TxnService``). Each call's protobuf request becomes the service's typed request, the call's context
its ``RequestContext``, and the typed answer the protobuf response; every decision is the service's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from odradek.broker.security.grpc_auth import grpc_request_context
from odradek.broker.transactions.requests import (
    AddOffsetsToTxn,
    AddPartitionsToTxn,
    DescribeProducers,
    DescribeTransactions,
    EndTxn,
    ListTransactions,
    TopicResults,
    TxnMarker,
    TxnTopic,
    WriteTxnMarkers,
)
from odradek.broker.transactions.txn_service import TxnService, partitions_of
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition
from odradek.proto import transaction_pb2 as tpb
from odradek.proto import transaction_pb2_grpc


def _code(code: int) -> ErrorCode.ValueType:
    return ErrorCode.ValueType(code)


def _topics(topics: Iterable[tpb.TxnTopic]) -> tuple[TxnTopic, ...]:
    return tuple(TxnTopic(t.name, tuple(t.partitions)) for t in topics)


def topic_results(errors: Mapping[TopicPartition, int]) -> list[tpb.TxnTopicResult]:
    """Each partition's error, by topic, both sorted."""
    by_topic: dict[str, list[tpb.TxnPartitionResult]] = defaultdict(list)
    for tp, error in sorted(errors.items()):
        by_topic[tp.topic].append(tpb.TxnPartitionResult(partition=tp.partition, error=_code(error)))
    return [tpb.TxnTopicResult(name=name, partitions=parts) for name, parts in by_topic.items()]


def _results(topics: Iterable[TopicResults]) -> list[tpb.TxnTopicResult]:
    return [
        tpb.TxnTopicResult(
            name=t.name,
            partitions=[
                tpb.TxnPartitionResult(partition=p.partition, error=_code(p.error), error_message=p.error_message)
                for p in t.partitions
            ],
        )
        for t in topics
    ]


class TransactionsService(transaction_pb2_grpc.TransactionsServicer):
    def __init__(self, service: TxnService) -> None:
        self.service = service

    async def AddPartitionsToTxn(
        self, request: tpb.AddPartitionsToTxnRequest, context: Any
    ) -> tpb.AddPartitionsToTxnResponse:
        answer = await self.service.add_partitions_to_txn(
            AddPartitionsToTxn(
                request.transactional_id,
                request.producer_id,
                request.producer_epoch,
                tuple(partitions_of(_topics(request.topics))),
                request.verify_only,
            ),
            grpc_request_context(context),
        )
        return tpb.AddPartitionsToTxnResponse(error=_code(answer.error), results=topic_results(answer.partitions))

    async def AddOffsetsToTxn(self, request: tpb.AddOffsetsToTxnRequest, context: Any) -> tpb.AddOffsetsToTxnResponse:
        answer = await self.service.add_offsets_to_txn(
            AddOffsetsToTxn(request.transactional_id, request.producer_id, request.producer_epoch, request.group_id),
            grpc_request_context(context),
        )
        return tpb.AddOffsetsToTxnResponse(error=_code(answer.error))

    async def EndTxn(self, request: tpb.EndTxnRequest, context: Any) -> tpb.EndTxnResponse:
        answer = await self.service.end_txn(
            EndTxn(
                request.transactional_id,
                request.producer_id,
                request.producer_epoch,
                request.committed,
                request.keep_epoch,
            ),
            grpc_request_context(context),
        )
        return tpb.EndTxnResponse(
            error=_code(answer.error), producer_id=answer.producer_id, producer_epoch=answer.producer_epoch
        )

    async def WriteTxnMarkers(self, request: tpb.WriteTxnMarkersRequest, context: Any) -> tpb.WriteTxnMarkersResponse:
        markers = tuple(
            TxnMarker(m.producer_id, m.producer_epoch, m.committed, _topics(m.topics), m.coordinator_epoch)
            for m in request.markers
        )
        answer = await self.service.write_txn_markers(
            WriteTxnMarkers(markers, request.timeout_ms), grpc_request_context(context)
        )
        return tpb.WriteTxnMarkersResponse(
            markers=[tpb.TxnMarkerResult(producer_id=m.producer_id, topics=_results(m.topics)) for m in answer.markers]
        )

    async def DescribeTransactions(
        self, request: tpb.DescribeTransactionsRequest, context: Any
    ) -> tpb.DescribeTransactionsResponse:
        answer = await self.service.describe_transactions(
            DescribeTransactions(tuple(request.transactional_ids)), grpc_request_context(context)
        )
        return tpb.DescribeTransactionsResponse(
            transactions=[
                tpb.TransactionDescription(
                    transactional_id=d.transactional_id,
                    error=_code(d.error),
                    state=d.state,
                    transaction_timeout_ms=d.transaction_timeout_ms,
                    transaction_start_time_ms=d.transaction_start_time_ms,
                    producer_id=d.producer_id,
                    producer_epoch=d.producer_epoch,
                    topics=[tpb.TxnTopic(name=t.name, partitions=t.partitions) for t in d.topics],
                    coordinator_id=d.coordinator_id,
                    last_update_time_ms=d.last_update_time_ms,
                )
                for d in answer.transactions
            ]
        )

    async def ListTransactions(
        self, request: tpb.ListTransactionsRequest, context: Any
    ) -> tpb.ListTransactionsResponse:
        answer = await self.service.list_transactions(
            ListTransactions(
                tuple(request.state_filters), tuple(request.producer_id_filters), request.duration_filter_ms
            ),
            grpc_request_context(context),
        )
        return tpb.ListTransactionsResponse(
            error=_code(answer.error),
            unknown_state_filters=answer.unknown_state_filters,
            transactions=[
                tpb.ListedTransaction(
                    transactional_id=t.transactional_id,
                    producer_id=t.producer_id,
                    state=t.state,
                    coordinator_id=t.coordinator_id,
                )
                for t in answer.transactions
            ],
        )

    async def DescribeProducers(
        self, request: tpb.DescribeProducersRequest, context: Any
    ) -> tpb.DescribeProducersResponse:
        answer = await self.service.describe_producers(
            DescribeProducers(_topics(request.topics)), grpc_request_context(context)
        )
        return tpb.DescribeProducersResponse(
            topics=[
                tpb.DescribeProducersTopic(
                    name=t.name,
                    partitions=[
                        tpb.DescribeProducersPartition(
                            partition=p.partition,
                            error=_code(p.error),
                            error_message=p.error_message,
                            active_producers=[
                                tpb.ProducerDescription(
                                    producer_id=s.producer_id,
                                    producer_epoch=s.producer_epoch,
                                    last_sequence=s.last_sequence,
                                    last_timestamp=s.last_timestamp,
                                    coordinator_epoch=s.coordinator_epoch,
                                    current_txn_start_offset=s.current_txn_start_offset,
                                )
                                for s in p.active_producers
                            ],
                        )
                        for p in t.partitions
                    ],
                )
                for t in answer.topics
            ]
        )
