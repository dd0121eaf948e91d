"""The transaction service: the transaction APIs as every listener serves them.

AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions and ListTransactions are the transaction
coordinator's (``TransactionCoordinator``); WriteTxnMarkers and DescribeProducers are served by partition leaders and
go to a ``PartitionTxnHandler``, which the broker's data plane provides. Each method takes one typed request
(``requests``) and the ``RequestContext`` of its caller, checks the caller's ACLs as Kafka does, and answers a typed
answer; the listeners' adapters (the gRPC ``TransactionsService``, the Kafka listener's handlers) only translate.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from odradek.broker.transactions.coordinator import TransactionCoordinator
from odradek.broker.transactions.metadata import TxnMetadata
from odradek.broker.transactions.requests import (
    AddOffsetsToTxn,
    AddOffsetsToTxnAnswer,
    AddPartitionsToTxn,
    AddPartitionsToTxnAnswer,
    DescribeProducers,
    DescribeProducersAnswer,
    DescribeTransactions,
    DescribeTransactionsAnswer,
    EndTxn,
    EndTxnAnswer,
    ListedTransaction,
    ListTransactions,
    ListTransactionsAnswer,
    MarkerResult,
    PartitionProducers,
    PartitionResult,
    ProducersTopic,
    TopicResults,
    TransactionDescription,
    TxnTopic,
    WriteTxnMarkers,
    WriteTxnMarkersAnswer,
)
from odradek.client.common.access import OPEN, AccessControl
from odradek.client.common.acls import AclOperation, ResourceType
from odradek.client.common.request_context import RequestContext
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition


class PartitionTxnHandler(Protocol):
    """The partition leader's side: markers into the logs, and the logs' active producers."""

    async def write_txn_markers(self, request: WriteTxnMarkers) -> WriteTxnMarkersAnswer: ...

    def describe_producers(self, request: DescribeProducers) -> DescribeProducersAnswer: ...


def partitions_of(topics: Iterable[TxnTopic]) -> list[TopicPartition]:
    return [TopicPartition(t.name, p) for t in topics for p in t.partitions]


def txn_topics(partitions: Iterable[TopicPartition]) -> tuple[TxnTopic, ...]:
    """The partitions by topic, both sorted."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return tuple(TxnTopic(t, tuple(sorted(ps))) for t, ps in sorted(by_topic.items()))


def description(md: TxnMetadata, coordinator_id: int, hidden: Iterable[str]) -> TransactionDescription:
    """The transaction as DescribeTransactions answers it, without the partitions of the ``hidden`` topics."""
    hidden = set(hidden)
    return TransactionDescription(
        transactional_id=md.transactional_id,
        state=md.state.value,
        transaction_timeout_ms=md.timeout_ms,
        transaction_start_time_ms=md.txn_start_ms,
        producer_id=md.producer_id,
        producer_epoch=md.producer_epoch,
        topics=txn_topics(tp for tp in md.partitions if tp.topic not in hidden),
        coordinator_id=coordinator_id,
        last_update_time_ms=md.last_update_ms,
    )


_TXN_DENIED = int(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)


class TxnService:
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

    def _allowed(self, ctx: RequestContext, operation: AclOperation, kind: ResourceType, name: str, api: str) -> bool:
        access = self.access
        return not access.enabled or access.allows(ctx.caller, operation, kind, name, api=api)

    def _cluster_action(self, ctx: RequestContext, api: str) -> bool:
        access = self.access
        return not access.enabled or access.allows_cluster(ctx.caller, AclOperation.CLUSTER_ACTION, api=api)

    def _denied_topics(self, ctx: RequestContext, operation: AclOperation, names: Iterable[str], api: str) -> set[str]:
        access = self.access
        if not access.enabled:
            return set()
        return access.denied(ctx.caller, operation, ResourceType.TOPIC, names, api=api)

    # ---- a producer's transaction ----

    async def add_partitions_to_txn(self, request: AddPartitionsToTxn, ctx: RequestContext) -> AddPartitionsToTxnAnswer:
        partitions = list(request.partitions)
        refused = self._add_partitions_refusals(request, partitions, ctx)
        if refused is not None:
            return AddPartitionsToTxnAnswer(int(ErrorCode.NONE), refused)
        c = self.coordinator
        if request.verify_only:
            error, errors = c.verify(request.transactional_id, request.producer_id, request.producer_epoch, partitions)
        else:
            error, errors = await c.add_partitions(
                request.transactional_id, request.producer_id, request.producer_epoch, partitions
            )
        return AddPartitionsToTxnAnswer(int(error), errors)

    def _add_partitions_refusals(
        self, request: AddPartitionsToTxn, partitions: list[TopicPartition], ctx: RequestContext
    ) -> dict[TopicPartition, int] | None:
        """Each partition's error when the caller may not make the request, None when it may. A broker verifying
        a producer's first transactional write needs cluster ClusterAction; a producer needs Write on its
        transactional id, and on every topic: otherwise nothing is added (OPERATION_NOT_ATTEMPTED for the
        partitions of topics it may write), as Kafka answers."""
        api = "AddPartitionsToTxn"
        if request.verify_only:
            if self._cluster_action(ctx, api):
                return None
            return dict.fromkeys(partitions, int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
        if not self._allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id, api):
            return dict.fromkeys(partitions, _TXN_DENIED)
        denied = self._denied_topics(ctx, AclOperation.WRITE, (tp.topic for tp in partitions), api)
        if not denied:
            return None
        return {
            tp: int(ErrorCode.TOPIC_AUTHORIZATION_FAILED if tp.topic in denied else ErrorCode.OPERATION_NOT_ATTEMPTED)
            for tp in partitions
        }

    async def add_offsets_to_txn(self, request: AddOffsetsToTxn, ctx: RequestContext) -> AddOffsetsToTxnAnswer:
        api = "AddOffsetsToTxn"
        if not self._allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id, api):
            return AddOffsetsToTxnAnswer(_TXN_DENIED)
        if not self._allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id, api):
            return AddOffsetsToTxnAnswer(int(ErrorCode.GROUP_AUTHORIZATION_FAILED))
        error = await self.coordinator.add_offsets(
            request.transactional_id, request.producer_id, request.producer_epoch, request.group_id
        )
        return AddOffsetsToTxnAnswer(int(error))

    async def end_txn(self, request: EndTxn, ctx: RequestContext) -> EndTxnAnswer:
        if not self._allowed(
            ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id, "EndTxn"
        ):
            return EndTxnAnswer(_TXN_DENIED, -1, -1)
        error, pid, epoch = await self.coordinator.end_txn(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.committed,
            bump_epoch=not request.keep_epoch,
        )
        return EndTxnAnswer(int(error), pid, epoch)

    # ---- the partition leaders' ----

    async def write_txn_markers(self, request: WriteTxnMarkers, ctx: RequestContext) -> WriteTxnMarkersAnswer:
        if not self._cluster_action(ctx, "WriteTxnMarkers"):
            denied = int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            return WriteTxnMarkersAnswer(
                tuple(
                    MarkerResult(
                        m.producer_id,
                        tuple(
                            TopicResults(t.name, tuple(PartitionResult(p, denied) for p in t.partitions))
                            for t in txn_topics(dict.fromkeys(partitions_of(m.topics)))
                        ),
                    )
                    for m in request.markers
                )
            )
        return await self.partitions.write_txn_markers(request)

    async def describe_producers(self, request: DescribeProducers, ctx: RequestContext) -> DescribeProducersAnswer:
        denied = self._denied_topics(ctx, AclOperation.READ, (t.name for t in request.topics), "DescribeProducers")
        if not denied:
            return self.partitions.describe_producers(request)
        allowed = tuple(t for t in request.topics if t.name not in denied)
        answer = self.partitions.describe_producers(DescribeProducers(allowed))
        refused = tuple(
            ProducersTopic(
                t.name,
                tuple(
                    PartitionProducers(p, int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), "not authorized")
                    for p in t.partitions
                ),
            )
            for t in request.topics
            if t.name in denied
        )
        return DescribeProducersAnswer(answer.topics + refused)

    # ---- the admin's ----

    async def describe_transactions(
        self, request: DescribeTransactions, ctx: RequestContext
    ) -> DescribeTransactionsAnswer:
        out = []
        for txn_id in request.transactional_ids:
            if not self._allowed(
                ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id, "DescribeTransactions"
            ):
                out.append(TransactionDescription(txn_id, _TXN_DENIED))
                continue
            error, md = self.coordinator.describe(txn_id)
            if md is None:
                out.append(TransactionDescription(txn_id, int(error)))
            else:
                hidden = self._denied_topics(
                    ctx, AclOperation.DESCRIBE, {tp.topic for tp in md.partitions}, "DescribeTransactions"
                )
                out.append(description(md, self.coordinator.broker_id, hidden))
        return DescribeTransactionsAnswer(tuple(out))

    async def list_transactions(self, request: ListTransactions, ctx: RequestContext) -> ListTransactionsAnswer:
        error, unknown, txns = self.coordinator.list_transactions(
            request.state_filters, request.producer_id_filters, request.duration_filter_ms
        )
        access = self.access
        if access.enabled:  # only the transactions the caller may describe
            caller = ctx.caller
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
        return ListTransactionsAnswer(
            int(error),
            tuple(unknown),
            tuple(
                ListedTransaction(md.transactional_id, md.producer_id, md.state.value, self.coordinator.broker_id)
                for md in txns
            ),
        )
