"""Kafka's transaction admin APIs on the Kafka listener (KIP-664: what ``kafka-transactions.sh`` list, describe,
describe-producers and find-hanging send): DescribeProducers, DescribeTransactions and ListTransactions, each
translated into the ``TransactionsService`` call the gRPC listener makes and its answer back. odradek's state names
are Kafka's (``TxnState``), so they pass unchanged.

Served versions, and why not more:

- DescribeProducers 0 and DescribeTransactions 0, their only versions.
- ListTransactions 0-1 (v1 adds the duration filter, KIP-994). v2 filters by a transactional-id pattern
  (KIP-1152), which Kafka matches with RE2/J; the service has no such filter, and Python's regular expressions are
  not RE2's, so no answer here could be trusted to be Kafka's.

What Kafka's broker decides itself, before asking its replica or coordinator, and the service does not, is done
here: DescribeProducers answers a name no topic may have INVALID_TOPIC_EXCEPTION (before the ACL check);
ListTransactions answers an error (COORDINATOR_LOAD_IN_PROGRESS while a partition loads) without transactions.

DescribeProducers is answered by the partition's leader only (the service's rule): a follower answers
NOT_LEADER_OR_FOLLOWER, where Kafka's follower would describe its own replica's producers.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)

from odradek.broker.kafka.apis import ApiRegistry, schema_api
from odradek.broker.kafka.backend import KafkaBackend
from odradek.broker.kafka.metadata_apis import service_context
from odradek.broker.kafka.wire import KafkaContext
from odradek.broker.transactions.coordinator import NO_DURATION_FILTER
from odradek.client.common.topic_rules import validate_topic_name
from odradek.client.errors import ErrorCode
from odradek.proto import transaction_pb2 as tpb

_Partition = DescribeProducersResponse.TopicResponse.PartitionResponse


def _producers(p: tpb.DescribeProducersPartition) -> Any:
    """One partition's answer as DescribeProducers spells it (a null message where the service has none)."""
    return _Partition(
        partition_index=p.partition,
        error_code=int(p.error),
        error_message=p.error_message or None,
        active_producers=[
            _Partition.ProducerState(
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


class TxnAdminApis:
    """The handlers, one per API: (context, version, decoded request) -> response of that version."""

    def __init__(self, backend: KafkaBackend) -> None:
        self.backend = backend
        self.transactions = backend.transactions

    async def describe_producers(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        invalid = {t.name: problem for t in req.topics if (problem := validate_topic_name(t.name)) is not None}
        asked = [tpb.TxnTopic(name=t.name, partitions=t.partition_indexes) for t in req.topics if t.name not in invalid]
        r = await self.transactions.DescribeProducers(tpb.DescribeProducersRequest(topics=asked), service_context(ctx))
        answers = {(t.name, p.partition): p for t in r.topics for p in t.partitions}

        def answer(topic: str, partition: int) -> tpb.DescribeProducersPartition:
            problem = invalid.get(topic)
            if problem is None:
                return answers[(topic, partition)]
            return tpb.DescribeProducersPartition(
                partition=partition, error=ErrorCode.INVALID_TOPIC_EXCEPTION, error_message=problem
            )

        Topic = DescribeProducersResponse.TopicResponse
        return DescribeProducersResponse(
            version=v,
            throttle_time_ms=r.throttle_time_ms,
            topics=[
                Topic(name=t.name, partitions=[_producers(answer(t.name, i)) for i in t.partition_indexes])
                for t in req.topics
            ],
        )

    async def describe_transactions(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        r = await self.transactions.DescribeTransactions(
            tpb.DescribeTransactionsRequest(transactional_ids=req.transactional_ids), service_context(ctx)
        )
        State = DescribeTransactionsResponse.TransactionState
        return DescribeTransactionsResponse(
            version=v,
            throttle_time_ms=r.throttle_time_ms,
            transaction_states=[
                State(
                    error_code=int(d.error),
                    transactional_id=d.transactional_id,
                    transaction_state=d.state,
                    transaction_timeout_ms=d.transaction_timeout_ms,
                    transaction_start_time_ms=d.transaction_start_time_ms,
                    producer_id=d.producer_id,
                    producer_epoch=d.producer_epoch,
                    topics=[State.TopicData(topic=t.name, partitions=list(t.partitions)) for t in d.topics],
                )
                for d in r.transactions
            ],
        )

    async def list_transactions(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        r = await self.transactions.ListTransactions(
            tpb.ListTransactionsRequest(
                state_filters=req.state_filters,
                producer_id_filters=req.producer_id_filters,
                duration_filter_ms=req.duration_filter if v >= 1 else NO_DURATION_FILTER,
            ),
            service_context(ctx),
        )
        # An error comes without transactions, as Kafka answers it.
        ok = r.error == ErrorCode.NONE
        State = ListTransactionsResponse.TransactionState
        return ListTransactionsResponse(
            version=v,
            throttle_time_ms=r.throttle_time_ms,
            error_code=int(r.error),
            unknown_state_filters=list(r.unknown_state_filters if ok else ()),
            transaction_states=[
                State(transactional_id=t.transactional_id, producer_id=t.producer_id, transaction_state=t.state)
                for t in (r.transactions if ok else ())
            ],
        )


def register(registry: ApiRegistry, backend: KafkaBackend) -> None:
    """Adds the transaction admin APIs at the versions the module docstring gives."""
    apis = TxnAdminApis(backend)
    registry.add(*schema_api(DescribeProducersRequest, 0, 0, apis.describe_producers))
    registry.add(*schema_api(DescribeTransactionsRequest, 0, 0, apis.describe_transactions))
    registry.add(*schema_api(ListTransactionsRequest, 0, 1, apis.list_transactions))
