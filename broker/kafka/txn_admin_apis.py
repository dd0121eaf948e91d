"""Kafka's transaction admin APIs on the Kafka listener (KIP-664: what ``kafka-transactions.sh`` list, describe,
describe-producers and find-hanging send): DescribeProducers, DescribeTransactions and ListTransactions, each
translated into the transaction service's typed request and its answer back. odradek's state names
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
from odradek.broker.kafka.wire import KafkaContext
from odradek.broker.transactions.coordinator import NO_DURATION_FILTER
from odradek.broker.transactions.requests import (
    DescribeProducers,
    DescribeTransactions,
    ListTransactions,
    PartitionProducers,
    TxnTopic,
)
from odradek.client.common.topic_rules import validate_topic_name
from odradek.client.errors import ErrorCode

_Partition = DescribeProducersResponse.TopicResponse.PartitionResponse


def _producers(p: PartitionProducers) -> Any:
    """One partition's answer as DescribeProducers spells it (a null message where the service has none)."""
    return _Partition(
        partition_index=p.partition,
        error_code=p.error,
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
        asked = tuple(TxnTopic(t.name, tuple(t.partition_indexes)) for t in req.topics if t.name not in invalid)
        r = await self.transactions.describe_producers(DescribeProducers(asked), ctx.request_context)
        answers = {(t.name, p.partition): p for t in r.topics for p in t.partitions}

        def answer(topic: str, partition: int) -> PartitionProducers:
            problem = invalid.get(topic)
            if problem is None:
                return answers[(topic, partition)]
            return PartitionProducers(partition, int(ErrorCode.INVALID_TOPIC_EXCEPTION), problem)

        Topic = DescribeProducersResponse.TopicResponse
        return DescribeProducersResponse(
            version=v,
            throttle_time_ms=0,
            topics=[
                Topic(name=t.name, partitions=[_producers(answer(t.name, i)) for i in t.partition_indexes])
                for t in req.topics
            ],
        )

    async def describe_transactions(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        r = await self.transactions.describe_transactions(
            DescribeTransactions(tuple(req.transactional_ids)), ctx.request_context
        )
        State = DescribeTransactionsResponse.TransactionState
        return DescribeTransactionsResponse(
            version=v,
            throttle_time_ms=0,
            transaction_states=[
                State(
                    error_code=d.error,
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
        r = await self.transactions.list_transactions(
            ListTransactions(
                tuple(req.state_filters),
                tuple(req.producer_id_filters),
                req.duration_filter if v >= 1 else NO_DURATION_FILTER,
            ),
            ctx.request_context,
        )
        # An error comes without transactions, as Kafka answers it.
        ok = r.error == ErrorCode.NONE
        State = ListTransactionsResponse.TransactionState
        return ListTransactionsResponse(
            version=v,
            throttle_time_ms=0,
            error_code=r.error,
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
