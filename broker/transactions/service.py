"""The ``Transactions`` gRPC service on the broker listener: request and response translation only.

AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions and ListTransactions are the transaction
coordinator's (``TransactionCoordinator``); WriteTxnMarkers and DescribeProducers are served by partition leaders
and go to a ``PartitionTxnHandler``, which the broker's data plane provides.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Protocol

from odradek.broker.transactions.coordinator import TransactionCoordinator
from odradek.broker.transactions.metadata import TxnMetadata
from odradek.client.common.access import OPEN, AccessControl
from odradek.client.common.acls import AclOperation, ResourceType
from odradek.client.common.caller import caller_of
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


def description(md: TxnMetadata, coordinator_id: int, hidden: Collection[str]) -> tpb.TransactionDescription:
    """The transaction as DescribeTransactions answers it, without the partitions of the ``hidden`` topics."""
    return tpb.TransactionDescription(
        transactional_id=md.transactional_id,
        error=ErrorCode.NONE,
        state=md.state.value,
        transaction_timeout_ms=md.timeout_ms,
        transaction_start_time_ms=md.txn_start_ms,
        producer_id=md.producer_id,
        producer_epoch=md.producer_epoch,
        topics=txn_topics(tp for tp in md.partitions if tp.topic not in hidden),
        coordinator_id=coordinator_id,
        last_update_time_ms=md.last_update_ms,
    )


_TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


class TransactionsService(transaction_pb2_grpc.TransactionsServicer):
    """``access``: each API's ACL checks, as Kafka's (transactional-id Write for a producer's transaction calls,
    with topic Write on added partitions and group Read on added offsets; Describe to see a transaction, whose
    partitions show only for the topics the caller may describe; cluster ClusterAction for the brokers' own calls:
    markers and verification)."""

    def __init__(
        self, coordinator: TransactionCoordinator, partitions: PartitionTxnHandler, access: AccessControl = OPEN
    ) -> None:
        self.coordinator = coordinator
        self.partitions = partitions
        self.access = access

    def _allowed(self, context: Any, operation: AclOperation, kind: ResourceType, name: str, api: str) -> bool:
        access = self.access
        return not access.enabled or access.allows(caller_of(context), operation, kind, name, api=api)

    def _cluster_action(self, context: Any, api: str) -> bool:
        access = self.access
        return not access.enabled or access.allows_cluster(caller_of(context), AclOperation.CLUSTER_ACTION, api=api)

    def _denied_topics(self, context: Any, operation: AclOperation, names: Iterable[str], api: str) -> set[str]:
        access = self.access
        if not access.enabled:
            return set()
        return access.denied(caller_of(context), operation, ResourceType.TOPIC, names, api=api)

    async def AddPartitionsToTxn(
        self, request: tpb.AddPartitionsToTxnRequest, context: Any
    ) -> tpb.AddPartitionsToTxnResponse:
        partitions = partitions_of(request.topics)
        refused = self._add_partitions_refusals(request, partitions, context)
        if refused is not None:
            return tpb.AddPartitionsToTxnResponse(results=topic_results(refused))
        c = self.coordinator
        if request.verify_only:
            error, errors = c.verify(request.transactional_id, request.producer_id, request.producer_epoch, partitions)
        else:
            error, errors = await c.add_partitions(
                request.transactional_id, request.producer_id, request.producer_epoch, partitions
            )
        return tpb.AddPartitionsToTxnResponse(error=ErrorCode.ValueType(error), results=topic_results(errors))

    def _add_partitions_refusals(
        self, request: tpb.AddPartitionsToTxnRequest, partitions: list[TopicPartition], context: Any
    ) -> dict[TopicPartition, int] | None:
        """Each partition's error when the caller may not make the request, None when it may. A broker verifying
        a producer's first transactional write needs cluster ClusterAction; a producer needs Write on its
        transactional id, and on every topic: otherwise nothing is added (OPERATION_NOT_ATTEMPTED for the
        partitions of topics it may write), as Kafka answers."""
        api = "AddPartitionsToTxn"
        if request.verify_only:
            if self._cluster_action(context, api):
                return None
            return dict.fromkeys(partitions, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        if not self._allowed(context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id, api):
            return dict.fromkeys(partitions, _TXN_DENIED)
        denied = self._denied_topics(context, AclOperation.WRITE, (tp.topic for tp in partitions), api)
        if not denied:
            return None
        return {
            tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED if tp.topic in denied else ErrorCode.OPERATION_NOT_ATTEMPTED
            for tp in partitions
        }

    async def AddOffsetsToTxn(self, request: tpb.AddOffsetsToTxnRequest, context: Any) -> tpb.AddOffsetsToTxnResponse:
        api = "AddOffsetsToTxn"
        if not self._allowed(context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id, api):
            return tpb.AddOffsetsToTxnResponse(error=_TXN_DENIED)
        if not self._allowed(context, AclOperation.READ, ResourceType.GROUP, request.group_id, api):
            return tpb.AddOffsetsToTxnResponse(error=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        error = await self.coordinator.add_offsets(
            request.transactional_id, request.producer_id, request.producer_epoch, request.group_id
        )
        return tpb.AddOffsetsToTxnResponse(error=ErrorCode.ValueType(error))

    async def EndTxn(self, request: tpb.EndTxnRequest, context: Any) -> tpb.EndTxnResponse:
        if not self._allowed(
            context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id, "EndTxn"
        ):
            return tpb.EndTxnResponse(error=_TXN_DENIED, producer_id=-1, producer_epoch=-1)
        error, pid, epoch = await self.coordinator.end_txn(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.committed,
            bump_epoch=not request.keep_epoch,
        )
        return tpb.EndTxnResponse(error=ErrorCode.ValueType(error), producer_id=pid, producer_epoch=epoch)

    async def WriteTxnMarkers(self, request: tpb.WriteTxnMarkersRequest, context: Any) -> tpb.WriteTxnMarkersResponse:
        if not self._cluster_action(context, "WriteTxnMarkers"):
            denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return tpb.WriteTxnMarkersResponse(
                markers=[
                    tpb.TxnMarkerResult(
                        producer_id=m.producer_id,
                        topics=topic_results(dict.fromkeys(partitions_of(m.topics), denied)),
                    )
                    for m in request.markers
                ]
            )
        return await self.partitions.write_txn_markers(request)

    async def DescribeTransactions(
        self, request: tpb.DescribeTransactionsRequest, context: Any
    ) -> tpb.DescribeTransactionsResponse:
        out = []
        for txn_id in request.transactional_ids:
            if not self._allowed(
                context, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id, "DescribeTransactions"
            ):
                out.append(tpb.TransactionDescription(transactional_id=txn_id, error=_TXN_DENIED))
                continue
            error, md = self.coordinator.describe(txn_id)
            if md is None:
                out.append(tpb.TransactionDescription(transactional_id=txn_id, error=ErrorCode.ValueType(error)))
            else:
                hidden = self._denied_topics(
                    context, AclOperation.DESCRIBE, {tp.topic for tp in md.partitions}, "DescribeTransactions"
                )
                out.append(description(md, self.coordinator.broker_id, hidden))
        return tpb.DescribeTransactionsResponse(transactions=out)

    async def ListTransactions(
        self, request: tpb.ListTransactionsRequest, context: Any
    ) -> tpb.ListTransactionsResponse:
        error, unknown, txns = self.coordinator.list_transactions(
            request.state_filters, request.producer_id_filters, request.duration_filter_ms
        )
        access = self.access
        if access.enabled:  # only the transactions the caller may describe
            caller = caller_of(context)
            txns = [
                md
                for md in txns
                if access.allows(
                    caller,
                    AclOperation.DESCRIBE,
                    ResourceType.TRANSACTIONAL_ID,
                    md.transactional_id,
                    audit_denial=False,
                )
            ]
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
        denied = self._denied_topics(context, AclOperation.READ, (t.name for t in request.topics), "DescribeProducers")
        if not denied:
            return self.partitions.describe_producers(request)
        allowed = [t for t in request.topics if t.name not in denied]
        response = self.partitions.describe_producers(tpb.DescribeProducersRequest(topics=allowed))
        for t in request.topics:
            if t.name in denied:
                response.topics.add(
                    name=t.name,
                    partitions=[
                        tpb.DescribeProducersPartition(
                            partition=p, error=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message="not authorized"
                        )
                        for p in t.partitions
                    ],
                )
        return response
