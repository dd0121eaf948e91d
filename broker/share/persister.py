"""How a partition leader reads and writes its share-partitions' durable state (Kafka's Persister): through the
share coordinator of each share-partition's key, this broker's own (a direct call) or another broker's
ShareCoordinator service on its broker listener (gRPC, as the transaction coordinator reaches partition leaders).

A call that finds no coordinator, or one that moved, is still loading, timed out or could not be reached is retried
after a backoff until ``retry_ms`` has passed: a coordinator failing over is a passing state, and the leader's
write is idempotent (it sets the states of ranges of offsets and the start offset). Any other answer is final.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import grpc

from odradek.broker.share.state_coordinator import (
    ShareStateCoordinator,
    StateAnswer,
    batch_messages,
    batches_of,
    key_message,
)
from odradek.broker.share.state_records import SharePartitionKey, ShareState, StateWrite
from odradek.client.connection import ChannelPool
from odradek.client.errors import ErrorCode
from odradek.proto import share_pb2 as spb
from odradek.proto import share_pb2_grpc

logger = logging.getLogger(__name__)

RETRIED = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    }
)
BACKOFF_S = (0.05, 0.1, 0.2, 0.5)


class SharePersister:
    """``local``: this broker's share coordinator; ``pool``: channels to the other brokers' broker listeners."""

    def __init__(
        self,
        broker_id: int,
        local: ShareStateCoordinator,
        pool: ChannelPool,
        rpc_timeout_s: float,
        retry_ms: int,
    ) -> None:
        self.broker_id = broker_id
        self.local = local
        self.pool = pool
        self.rpc_timeout_s = rpc_timeout_s
        self.retry_s = retry_ms / 1000

    async def read(self, key: SharePartitionKey, leader_epoch: int) -> StateAnswer:
        async def remote(stub: share_pb2_grpc.ShareCoordinatorAsyncStub) -> StateAnswer:
            request = spb.ReadShareGroupStateRequest(key=key_message(key), leader_epoch=leader_epoch)
            r = await stub.ReadShareGroupState(request, timeout=self.rpc_timeout_s)
            if r.error != ErrorCode.NONE or not r.found:
                return StateAnswer(r.error, r.error_message)
            state = ShareState(r.state_epoch, r.start_offset, batches_of(r.batches))
            return StateAnswer(r.error, r.error_message, state)

        return await self._call(key, lambda: self.local.read(key, leader_epoch), remote)

    async def summary(self, key: SharePartitionKey) -> StateAnswer:
        """The stored start offset and epochs, fencing no leader (DescribeShareGroupOffsets)."""

        async def remote(stub: share_pb2_grpc.ShareCoordinatorAsyncStub) -> StateAnswer:
            request = spb.ReadShareGroupStateSummaryRequest(key=key_message(key))
            r = await stub.ReadShareGroupStateSummary(request, timeout=self.rpc_timeout_s)
            if r.error != ErrorCode.NONE or not r.found:
                return StateAnswer(r.error, r.error_message, leader_epoch=r.leader_epoch)
            state = ShareState(r.state_epoch, r.start_offset, ())
            return StateAnswer(r.error, r.error_message, state, leader_epoch=r.leader_epoch)

        return await self._call(key, lambda: self.local.read_summary(key), remote)

    async def write(
        self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, write: StateWrite
    ) -> StateAnswer:
        async def remote(stub: share_pb2_grpc.ShareCoordinatorAsyncStub) -> StateAnswer:
            request = spb.WriteShareGroupStateRequest(
                key=key_message(key),
                state_epoch=state_epoch,
                leader_epoch=leader_epoch,
                start_offset=write.start_offset,
                batches=batch_messages(write.batches),
            )
            r = await stub.WriteShareGroupState(request, timeout=self.rpc_timeout_s)
            return StateAnswer(r.error, r.error_message)

        return await self._call(key, lambda: self.local.write(key, state_epoch, leader_epoch, write), remote)

    async def initialize(self, key: SharePartitionKey, start_offset: int) -> StateAnswer:
        async def remote(stub: share_pb2_grpc.ShareCoordinatorAsyncStub) -> StateAnswer:
            request = spb.InitializeShareGroupStateRequest(key=key_message(key), start_offset=start_offset)
            r = await stub.InitializeShareGroupState(request, timeout=self.rpc_timeout_s)
            return StateAnswer(r.error, r.error_message, state_epoch=r.state_epoch)

        return await self._call(key, lambda: self.local.initialize(key, start_offset), remote)

    async def _call(
        self,
        key: SharePartitionKey,
        local: Callable[[], Awaitable[StateAnswer]],
        remote: Callable[[share_pb2_grpc.ShareCoordinatorAsyncStub], Awaitable[StateAnswer]],
    ) -> StateAnswer:
        deadline = time.monotonic() + self.retry_s
        attempt = 0
        while True:
            answer = await self._once(key, local, remote)
            if answer.error not in RETRIED or time.monotonic() >= deadline:
                return answer
            await asyncio.sleep(BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)])
            attempt += 1

    async def _once(
        self,
        key: SharePartitionKey,
        local: Callable[[], Awaitable[StateAnswer]],
        remote: Callable[[share_pb2_grpc.ShareCoordinatorAsyncStub], Awaitable[StateAnswer]],
    ) -> StateAnswer:
        error, node, host, port = self.local.find(key)
        if error != ErrorCode.NONE:
            return StateAnswer(error, "no share coordinator is available")
        if node == self.broker_id:
            return await local()
        try:
            return await remote(share_pb2_grpc.ShareCoordinatorStub(self.pool.get(f"{host}:{port}")))
        except grpc.aio.AioRpcError as e:
            logger.debug("share coordinator %d at %s:%d unreachable: %s", node, host, port, e.code())
            return StateAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"broker {node} could not be reached")
