"""Partition verification (KIP-890): before a leader appends a producer's first transactional batch of a
transaction, it asks the transaction coordinator whether the partition is in that producer's ongoing transaction.

Without this check a produce request delayed in the network could arrive after its transaction ended and open a
transaction on the partition that no coordinator knows of: no marker would ever end it, and the last stable offset
(and with it every read_committed consumer) would stop there forever. Once a batch of the transaction is in the
log the partition itself knows the transaction is open, so only the first batch per transaction and partition
pays this round trip.

The answer can be stale by the time the batch is appended: the coordinator may end the transaction and write its
marker to the partition while the answer travels or the request waits. So the leader takes a verification guard
from the partition's producer state before asking (Log.start_transaction_verification) and the append presents it:
a marker of that producer drops the guard, and the append, which checks it under the log's lock, refuses the batch
(INVALID_TXN_STATE) instead of opening a transaction after the marker.

The coordinator's answers are mapped to what a producer understands: coordinator moves and loads become
NOT_ENOUGH_REPLICAS (retriable: the producer retries the batch, as Kafka answers), a partition not in the
transaction TRANSACTION_ABORTABLE, a stale epoch INVALID_PRODUCER_EPOCH (the producer was fenced).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable

import grpc

from odradek.client.connection import ChannelPool
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition
from odradek.proto import transaction_pb2 as tpb
from odradek.proto import transaction_pb2_grpc

logger = logging.getLogger(__name__)

VERIFY_TIMEOUT_S = 5.0

_RETRIABLE = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NETWORK_EXCEPTION,
    }
)
_FENCED = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})


def produce_error(code: int) -> int:
    """The produce error for a partition the coordinator answered ``code`` for."""
    if code == ErrorCode.NONE:
        return ErrorCode.NONE
    if code in _RETRIABLE:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    if code in _FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code in (ErrorCode.INVALID_TXN_STATE, ErrorCode.TRANSACTION_ABORTABLE):
        return ErrorCode.TRANSACTION_ABORTABLE
    return code


Coordinate = Callable[[str], tuple[int, int, str, int]]
"""transactional id -> (error, node id, host, port) of its coordinator."""
LocalVerify = Callable[[str, int, int, list[TopicPartition]], Awaitable[dict[TopicPartition, int]]]


class TxnVerifier:
    """Asks ``find_coordinator``'s answer: this broker's own coordinator through ``local_verify``, another broker
    through its Transactions service (AddPartitionsToTxn with verify_only)."""

    def __init__(self, broker_id: int, find_coordinator: Coordinate, local_verify: LocalVerify) -> None:
        self.broker_id = broker_id
        self.find_coordinator = find_coordinator
        self.local_verify = local_verify
        self._pool = ChannelPool(inter_broker=True)

    async def verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """The produce error for each of ``partitions`` (NONE: append)."""
        tps = list(partitions)
        error, node, host, port = self.find_coordinator(transactional_id)
        if error != ErrorCode.NONE:
            return dict.fromkeys(tps, produce_error(error))
        if node == self.broker_id:
            answers = await self.local_verify(transactional_id, producer_id, producer_epoch, tps)
        else:
            answers = await self._remote(f"{host}:{port}", transactional_id, producer_id, producer_epoch, tps)
        return {tp: produce_error(answers.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)) for tp in tps}

    async def _remote(
        self, address: str, transactional_id: str, producer_id: int, producer_epoch: int, tps: list[TopicPartition]
    ) -> dict[TopicPartition, int]:
        request = tpb.AddPartitionsToTxnRequest(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch, verify_only=True
        )
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        for topic, indexes in by_topic.items():
            request.topics.add(name=topic, partitions=indexes)
        stub = transaction_pb2_grpc.TransactionsStub(self._pool.get(address))
        try:
            response = await stub.AddPartitionsToTxn(request, timeout=VERIFY_TIMEOUT_S)
        except grpc.aio.AioRpcError as e:
            logger.debug("verifying %s with the coordinator at %s failed: %s", transactional_id, address, e.code())
            return dict.fromkeys(tps, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if response.error != ErrorCode.NONE:
            return dict.fromkeys(tps, response.error)
        return {TopicPartition(t.name, p.partition): p.error for t in response.results for p in t.partitions}

    async def close(self) -> None:
        await self._pool.close()
