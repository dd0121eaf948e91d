"""The producer-id and transaction APIs on the Kafka listener: InitProducerId (the producer id service),
AddPartitionsToTxn, AddOffsetsToTxn and EndTxn (the transaction service) and TxnOffsetCommit (the group service), each
translated into the service's typed request and its answer back. Every rule is the services'.

Served versions, and why not more (a version that needs what the services lack is not served at all):

- InitProducerId 0-5. v6 is two-phase commit (KIP-939), which odradek has not.
- AddPartitionsToTxn 0-5: v0-v3 are the clients' form; v4-v5 the brokers' batched form (one call per transaction,
  with verify_only as the partition leaders' check).
- AddOffsetsToTxn 0-4.
- EndTxn 0-5. v5 is the version whose answer carries a new epoch: the coordinator bumps the producer epoch at
  that transaction end (KIP-890 part 2), as it does for odradek's own clients. A v0-v4 client keeps its epoch for
  the next transaction, so its transactions end at their own epoch, as Kafka ended them before KIP-890.
- TxnOffsetCommit 0-4. v5 commits in a transaction the producer did not add the group to (KIP-890 part 2 makes it
  add the offsets partition implicitly); odradek's group coordinator does not add it, so v5 is not served.

Errors a version predates are answered as Kafka answers that version: PRODUCER_FENCED (KIP-588) as
INVALID_PRODUCER_EPOCH, TRANSACTION_ABORTABLE (KIP-890) as INVALID_TXN_STATE.
"""

from __future__ import annotations

from typing import Any

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

from odradek.broker.api.producer_ids import InitProducerIdRequest as ProducerIdRequest
from odradek.broker.groups.requests import TxnOffsetCommit
from odradek.broker.kafka.apis import ApiRegistry, schema_api
from odradek.broker.kafka.backend import KafkaBackend
from odradek.broker.kafka.group_apis import commit_topics
from odradek.broker.kafka.wire import NO_VERSION, KafkaContext
from odradek.broker.transactions.requests import AddOffsetsToTxn, AddPartitionsToTxn, EndTxn
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition

NONE = int(ErrorCode.NONE)
NO_PRODUCER_ID = NO_PRODUCER_EPOCH = -1


def compat_error(code: int, version: int, fenced_from: int, abortable_from: int) -> int:
    """``code`` as a client of ``version`` understands it: the API's first version that knows PRODUCER_FENCED and
    TRANSACTION_ABORTABLE are ``fenced_from`` and ``abortable_from`` (NO_VERSION: none)."""
    if code == ErrorCode.PRODUCER_FENCED and version < fenced_from:
        return int(ErrorCode.INVALID_PRODUCER_EPOCH)
    if code == ErrorCode.TRANSACTION_ABORTABLE and version < abortable_from:
        return int(ErrorCode.INVALID_TXN_STATE)
    return int(code)


class TxnApis:
    """The handlers, one per API: (context, version, decoded request) -> response of that version."""

    def __init__(self, backend: KafkaBackend) -> None:
        self.backend = backend

    async def init_producer_id(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        def error(code: int, throttle_ms: int = 0) -> Any:
            return InitProducerIdResponse(
                version=v,
                throttle_time_ms=throttle_ms,
                error_code=compat_error(code, v, 4, 5),
                producer_id=NO_PRODUCER_ID,
                producer_epoch=NO_PRODUCER_EPOCH,
            )

        # Kafka tells null (an idempotent producer) from "" (refused); the service's empty string means null.
        if req.transactional_id == "":
            return error(int(ErrorCode.INVALID_REQUEST))
        r = await self.backend.data.producer_id_service.init_producer_id(
            ProducerIdRequest(
                transactional_id=req.transactional_id or "",
                transaction_timeout_ms=req.transaction_timeout_ms,
                producer_id=req.producer_id if v >= 3 else NO_PRODUCER_ID,
                producer_epoch=req.producer_epoch if v >= 3 else NO_PRODUCER_EPOCH,
            ),
            ctx.request_context,
        )
        if r.error != ErrorCode.NONE:
            return error(int(r.error))
        return InitProducerIdResponse(
            version=v,
            throttle_time_ms=0,
            error_code=NONE,
            producer_id=r.producer_id,
            producer_epoch=r.producer_epoch,
        )

    async def _add_partitions(
        self, ctx: KafkaContext, v: int, txn_id: str, pid: int, epoch: int, topics: Any, verify_only: bool
    ) -> list[Any]:
        """One transaction's per-topic results (every partition asked for, in request order)."""
        partitions = tuple(TopicPartition(t.name, p) for t in topics for p in t.partitions)
        r = await self.backend.transactions.add_partitions_to_txn(
            AddPartitionsToTxn(txn_id, pid, epoch, partitions, verify_only), ctx.request_context
        )
        # A request-level error (NOT_COORDINATOR, ...) comes without results: it is every partition's error, as
        # Kafka answers it.
        Topic = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
        Partition = Topic.AddPartitionsToTxnPartitionResult
        return [
            Topic(
                name=t.name,
                results_by_partition=[
                    Partition(
                        partition_index=p,
                        partition_error_code=compat_error(
                            r.partitions.get(TopicPartition(t.name, p), r.error), v, 2, 5
                        ),
                    )
                    for p in t.partitions
                ],
            )
            for t in topics
        ]

    async def add_partitions_to_txn(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        if v <= 3:
            results = await self._add_partitions(
                ctx,
                v,
                req.v3_and_below_transactional_id,
                req.v3_and_below_producer_id,
                req.v3_and_below_producer_epoch,
                req.v3_and_below_topics,
                False,
            )
            return AddPartitionsToTxnResponse(version=v, throttle_time_ms=0, results_by_topic_v3_and_below=results)
        by_txn = []
        Result = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
        for t in req.transactions:
            results = await self._add_partitions(
                ctx, v, t.transactional_id, t.producer_id, t.producer_epoch, t.topics, bool(t.verify_only)
            )
            by_txn.append(Result(transactional_id=t.transactional_id, topic_results=results))
        return AddPartitionsToTxnResponse(version=v, throttle_time_ms=0, error_code=NONE, results_by_transaction=by_txn)

    async def add_offsets_to_txn(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        r = await self.backend.transactions.add_offsets_to_txn(
            AddOffsetsToTxn(req.transactional_id, req.producer_id, req.producer_epoch, req.group_id),
            ctx.request_context,
        )
        return AddOffsetsToTxnResponse(version=v, throttle_time_ms=0, error_code=compat_error(r.error, v, 2, 4))

    async def end_txn(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        r = await self.backend.transactions.end_txn(
            EndTxn(req.transactional_id, req.producer_id, req.producer_epoch, bool(req.committed), keep_epoch=v < 5),
            ctx.request_context,
        )
        return EndTxnResponse(
            version=v,
            throttle_time_ms=0,
            error_code=compat_error(r.error, v, 2, 4),
            # -1 on an error, as Kafka answers; the service leaves them 0 then.
            producer_id=r.producer_id if r.error == ErrorCode.NONE else NO_PRODUCER_ID,
            producer_epoch=r.producer_epoch if r.error == ErrorCode.NONE else NO_PRODUCER_EPOCH,
        )

    async def txn_offset_commit(self, ctx: KafkaContext, v: int, req: Any) -> Any:
        request = TxnOffsetCommit(
            transactional_id=req.transactional_id,
            group_id=req.group_id,
            producer_id=req.producer_id,
            producer_epoch=req.producer_epoch,
            generation_id=req.generation_id if v >= 3 else -1,
            member_id=req.member_id if v >= 3 else "",
            group_instance_id=req.group_instance_id if v >= 3 else None,
            topics=commit_topics(req.topics, with_epoch=v >= 2),
        )
        r = await self.backend.groups.txn_offset_commit(request, ctx.request_context)
        Topic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
        Partition = Topic.TxnOffsetCommitResponsePartition
        return TxnOffsetCommitResponse(
            version=v,
            throttle_time_ms=0,
            topics=[
                Topic(
                    name=t.name,
                    partitions=[
                        # No TxnOffsetCommit version knows PRODUCER_FENCED: Kafka answers a fenced producer here
                        # with INVALID_PRODUCER_EPOCH at every version.
                        Partition(partition_index=p.partition, error_code=compat_error(p.error, v, NO_VERSION, 4))
                        for p in t.partitions
                    ],
                )
                for t in r.topics
            ],
        )


def register(registry: ApiRegistry, backend: KafkaBackend) -> None:
    """Adds the producer-id and transaction APIs at the versions the module docstring gives."""
    apis = TxnApis(backend)
    registry.add(*schema_api(InitProducerIdRequest, 0, 5, apis.init_producer_id))
    registry.add(*schema_api(AddPartitionsToTxnRequest, 0, 5, apis.add_partitions_to_txn))
    registry.add(*schema_api(AddOffsetsToTxnRequest, 0, 4, apis.add_offsets_to_txn))
    registry.add(*schema_api(EndTxnRequest, 0, 5, apis.end_txn))
    registry.add(*schema_api(TxnOffsetCommitRequest, 0, 4, apis.txn_offset_commit))
