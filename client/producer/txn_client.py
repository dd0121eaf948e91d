"""The transactional producer's requests to its coordinators: the asyncio shell around ``TransactionManager``.

The transaction coordinator is found with FindCoordinator (key type TRANSACTION, the transactional id) and asked
InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn; the group's coordinator (FindCoordinator, GROUP) is
sent TxnOffsetCommit. Retriable answers are retried after retry.backoff.ms, NOT_COORDINATOR and unreachable
coordinators after finding the coordinator again, until the operation's deadline (max.block.ms, as Kafka's
initTransactions/commitTransaction/abortTransaction). An operation that timed out may be called again: it
resumes where it stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping

import grpc

from odradek.client.config import ProducerConfig
from odradek.client.connection import ChannelPool
from odradek.client.errors import ClientTimeoutError, ErrorCode, error_name
from odradek.client.metadata import Metadata, rpc_error
from odradek.client.producer.idempotence import ProducerIdentity
from odradek.client.producer.transactions import Outcome, TransactionManager, TxnState
from odradek.client.structs import GroupMetadata, OffsetAndMetadata, TopicPartition
from odradek.proto import broker_pb2_grpc, group_pb2_grpc, transaction_pb2_grpc
from odradek.proto import group_pb2 as gpb

logger = logging.getLogger(__name__)

# The first AddPartitionsToTxn of a transaction often meets the previous one still writing its markers
# (CONCURRENT_TRANSACTIONS): retry it sooner than retry.backoff.ms, as Kafka does.
ADD_PARTITIONS_RETRY_S = 0.02


class _NotFound(Exception):
    """No broker could say where the coordinator is now."""


class _Refused(Exception):
    """A broker refused to say where the coordinator is: the caller may not describe the key."""

    def __init__(self, code: int, key: str) -> None:
        super().__init__(code, key)
        self.code = code
        self.key = key


# FindCoordinator answers that no retry can cure.
_REFUSALS = frozenset({ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED})


class TransactionClient:
    """Created on the producer's loop when transactional.id is set. The sender reads ``manager`` and ``identity``
    and calls ``maybe_add_partitions`` after each drain; the producer's API awaits the other methods, one at a
    time (``lock``)."""

    def __init__(self, config: ProducerConfig, metadata: Metadata, pool: ChannelPool) -> None:
        assert config.transactional_id is not None
        self.manager = TransactionManager(config.transactional_id, config.transaction_timeout_ms)
        self.identity = ProducerIdentity()
        self.wake_sender: Callable[[], None] = lambda: None  # set by the sender
        self.lock = asyncio.Lock()
        self._metadata = metadata
        self._pool = pool
        self._timeout = config.request_timeout_ms / 1000
        self._backoff = config.retry_backoff_ms / 1000
        self._coordinator: str | None = None
        self._group_coordinators: dict[str, str] = {}
        self._add_task: asyncio.Task[None] | None = None

    # ---- coordinators ----

    async def _find(self, key_type: gpb.CoordinatorType.ValueType, key: str) -> str:
        request = gpb.FindCoordinatorRequest(key_type=key_type, keys=[key])
        for address in self._metadata.nodes():
            stub = group_pb2_grpc.GroupCoordinatorStub(self._pool.get(address))
            try:
                response = await stub.FindCoordinator(request, timeout=self._timeout)
            except grpc.aio.AioRpcError as e:
                logger.debug("FindCoordinator to %s failed: %s", address, rpc_error(address, e))
                continue
            for found in response.coordinators:
                if found.key == key and found.error == ErrorCode.NONE:
                    return f"{found.host}:{found.port}"
                if found.key == key and found.error in _REFUSALS:
                    raise _Refused(found.error, key)
                if found.key == key:
                    logger.debug("FindCoordinator %r: %s", key, error_name(found.error))
            break  # the broker answered: no coordinator yet
        raise _NotFound

    async def _txn_coordinator(self) -> str:
        if self._coordinator is None:
            self._coordinator = await self._find(gpb.TRANSACTION, self.manager.transactional_id)
        return self._coordinator

    async def _group_coordinator(self, group_id: str) -> str:
        address = self._group_coordinators.get(group_id)
        if address is None:
            address = self._group_coordinators[group_id] = await self._find(gpb.GROUP, group_id)
        return address

    def _transactions(self, address: str) -> transaction_pb2_grpc.TransactionsAsyncStub:
        return transaction_pb2_grpc.TransactionsStub(self._pool.get(address))

    # ---- the retry loop ----

    async def _attempt(self, call: Callable[[], Awaitable[Outcome]], forget: Callable[[], None]) -> Outcome:
        try:
            outcome = await call()
        except _NotFound:
            return Outcome.RETRY
        except _Refused as refused:
            return self.manager.on_coordinator_refused(refused.code, refused.key)
        except grpc.aio.AioRpcError as e:
            logger.debug("transaction coordinator request failed: %s", e.code().name)
            outcome = Outcome.FIND_COORDINATOR
        if outcome is Outcome.FIND_COORDINATOR:
            forget()
        return outcome

    async def _run(
        self, what: str, call: Callable[[], Awaitable[Outcome]], deadline: float, group: str | None = None
    ) -> None:
        """Repeat ``call`` until it succeeds; raise the manager's error, or ClientTimeoutError at ``deadline``."""

        def forget() -> None:
            if group is None:
                self._coordinator = None
            else:
                self._group_coordinators.pop(group, None)

        while True:
            outcome = await self._attempt(call, forget)
            if outcome is Outcome.OK:
                return
            if outcome in (Outcome.ABORTABLE, Outcome.FATAL):
                assert self.manager.error is not None
                raise self.manager.error
            if time.monotonic() + self._backoff >= deadline:
                raise ClientTimeoutError(f"{what} did not complete in time (max.block.ms or the timeout given)")
            await asyncio.sleep(self._backoff)

    def _forget_coordinator(self) -> None:
        self._coordinator = None

    def _rpc_timeout(self, deadline: float) -> float:
        return max(0.001, min(self._timeout, deadline - time.monotonic()))

    # ---- operations ----

    async def init(self, deadline: float) -> None:
        request = self.manager.init_request()

        async def call() -> Outcome:
            stub = broker_pb2_grpc.BrokerStub(self._pool.get(await self._txn_coordinator()))
            response = await stub.InitProducerId(request, timeout=self._rpc_timeout(deadline))
            return self.manager.on_init_response(response)

        await self._run("init_transactions()", call, deadline)
        self.identity.reset(self.manager.producer_id, self.manager.epoch)
        logger.debug("transactional producer id %d epoch %d", self.manager.producer_id, self.manager.epoch)
        self.wake_sender()

    async def send_offsets(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], group: GroupMetadata, deadline: float
    ) -> None:
        manager = self.manager
        add = manager.add_offsets_request(offsets, group)
        if add is not None:

            async def add_offsets() -> Outcome:
                stub = self._transactions(await self._txn_coordinator())
                response = await stub.AddOffsetsToTxn(add, timeout=self._rpc_timeout(deadline))
                return manager.on_add_offsets_response(group.group_id, response)

            await self._run("AddOffsetsToTxn", add_offsets, deadline)

        async def commit() -> Outcome:
            stub = group_pb2_grpc.GroupCoordinatorStub(self._pool.get(await self._group_coordinator(group.group_id)))
            request = manager.txn_offset_commit_request(group)
            response = await stub.TxnOffsetCommit(request, timeout=self._rpc_timeout(deadline))
            return manager.on_txn_offset_commit_response(group.group_id, response)

        await self._run("TxnOffsetCommit", commit, deadline, group=group.group_id)

    async def end(self, deadline: float) -> None:
        """EndTxn for the commit or abort the manager has begun (nothing when the coordinator has no transaction);
        the producer continues under the epoch it answers."""
        await self.wait_adding()
        request = self.manager.end_txn_request()
        if request is None:
            return

        async def call() -> Outcome:
            stub = self._transactions(await self._txn_coordinator())
            response = await stub.EndTxn(request, timeout=self._rpc_timeout(deadline))
            return self.manager.on_end_txn_response(response)

        await self._run("EndTxn", call, deadline)
        self.identity.reset(self.manager.producer_id, self.manager.epoch)  # sequences restart at 0
        logger.debug("transaction ended; next epoch %d of producer id %d", self.manager.epoch, self.manager.producer_id)

    # ---- partitions, on the sender's behalf ----

    def maybe_add_partitions(self) -> None:
        manager = self.manager
        working = manager.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING_TRANSACTION)
        if self._add_task is None and manager.pending and not manager.adding and working:
            self._add_task = asyncio.get_running_loop().create_task(self._add_partitions())

    async def wait_adding(self) -> None:
        task = self._add_task
        if task is not None:
            await asyncio.shield(task)

    async def _add_partitions(self) -> None:
        manager = self.manager
        try:
            while True:
                request = manager.add_partitions_request()
                if request is None:
                    return
                try:
                    stub = self._transactions(await self._txn_coordinator())
                    response = await stub.AddPartitionsToTxn(request, timeout=self._timeout)
                except _NotFound:
                    manager.on_add_partitions_failed()
                    outcome = Outcome.RETRY
                except grpc.aio.AioRpcError as e:
                    logger.debug("AddPartitionsToTxn failed: %s", e.code().name)
                    outcome = manager.on_add_partitions_failed()
                else:
                    outcome = manager.on_add_partitions_response(response)
                if outcome is Outcome.FIND_COORDINATOR:
                    self._forget_coordinator()
                if outcome in (Outcome.ABORTABLE, Outcome.FATAL):
                    logger.debug("AddPartitionsToTxn: %s", manager.error)
                    return
                self.wake_sender()  # the added partitions may drain now
                if outcome is not Outcome.OK:
                    first = not manager.partitions and outcome is Outcome.RETRY
                    await asyncio.sleep(min(self._backoff, ADD_PARTITIONS_RETRY_S) if first else self._backoff)
        finally:
            self._add_task = None
            self.wake_sender()

    async def close(self) -> None:
        task = self._add_task
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
