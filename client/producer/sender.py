"""The sender: drains ready batches into Produce RPCs and completes them from the responses.

It runs on the producer's event loop. Each wakeup drains every sendable batch grouped by leader, one request per
leader holding many partitions and batches (a Python gRPC server pays ~0.3 ms per RPC whatever its size),
with at most ``max.in.flight.requests.per.connection`` requests outstanding per broker (fewer when they only
carry lingered, small batches) and one per partition. Encoding happens here, once per batch. Retriable errors put
a batch back at the front of its partition's queue for ``retry.backoff.ms``; leader errors first re-route it (a
leader hint from the response, or a metadata refresh). A batch fails for good on a non-retriable error, after
``retries`` retries, or once ``delivery.timeout.ms`` has passed since it was created.
A broker's ``throttle_time_ms`` (its quota, KIP-219) holds every Produce to it until it has passed: its batches
wait in the accumulator meanwhile, and the drain pass sleeps until the throttle ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time

import grpc

from odradek.client.config import ProducerConfig
from odradek.client.errors import (
    ClientTimeoutError,
    ErrorCode,
    NetworkError,
    OdradekError,
    error_for_code,
    error_name,
)
from odradek.client.metadata import Metadata, rpc_error
from odradek.client.producer.accumulator import RecordAccumulator
from odradek.client.producer.batch import ProducerBatch
from odradek.client.producer.idempotence import ProducerIdentity
from odradek.client.producer.transactions import TransactionAbortedError, TxnState
from odradek.client.producer.txn_client import TransactionClient
from odradek.client.structs import TopicPartition
from odradek.client.throttle import NodeThrottles
from odradek.proto import broker_pb2 as pb

logger = logging.getLogger(__name__)

# Requests of lingered, not-full batches allowed in flight per broker: enough to overlap one round trip with the
# next at a moderate rate (measured at 10k records/s against a Python broker: p99 lower than with 1 or 5).
SMALL_REQUESTS_IN_FLIGHT = 2
# How often a request without an answer makes the sender look for a leader change (see Sender._watch_stalled).
STALL_CHECK_S = 0.5
# Errors that mean the request went to the wrong broker: re-route before retrying.
LEADER_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)

_ProduceCall = grpc.aio.UnaryUnaryCall[pb.ProduceRequest, pb.ProduceResponse]


class Sender:
    def __init__(
        self,
        config: ProducerConfig,
        metadata: Metadata,
        accumulator: RecordAccumulator,
        txn: TransactionClient | None = None,
    ) -> None:
        self._metadata = metadata
        self._accumulator = accumulator
        self._acks = config.acks
        self._timeout_ms = config.request_timeout_ms
        self._retries = config.retries
        self._backoff = config.retry_backoff_ms / 1000
        self._delivery_timeout = config.delivery_timeout_ms / 1000
        self._max_in_flight = config.max_in_flight_requests_per_connection
        self._max_small_in_flight = min(SMALL_REQUESTS_IN_FLIGHT, self._max_in_flight)
        self._max_request_size = config.max_request_size
        self._compression = config.compression_type
        self._client_id = config.client_id
        self._in_flight: dict[int, int] = {}
        # Partitions with a request in flight. gRPC gives no order between concurrent RPCs (a broker may start a
        # later, smaller request first), so a partition's next batches wait for the answer: that is what keeps
        # each partition's records in send order, retries included. Requests still pipeline across partitions.
        self._muted: set[TopicPartition] = set()
        # Per broker, when its quota throttle ends (KIP-219): its partitions' batches wait in the accumulator until
        # then (the drain pass wakes at the end, not before), and the throttle times feed metrics().
        self.throttles = NodeThrottles()
        self._requests: set[asyncio.Task[None]] = set()
        self._identity = ProducerIdentity() if config.enable_idempotence else None
        # A transactional producer: its identity comes from init_transactions() and every EndTxn, never from a
        # local epoch bump; a partition's batches wait until the partition is in the transaction.
        self._txn = txn
        self._transactional_id = ""
        if txn is not None:
            self._identity = txn.identity
            self._transactional_id = txn.manager.transactional_id
            txn.wake_sender = self.wakeup
        self._init_task: asyncio.Task[None] | None = None
        self._calls: dict[_ProduceCall, tuple[int, list[ProducerBatch], float]] = {}
        self._abandoned: set[_ProduceCall] = set()
        self._watchdog: asyncio.Task[None] | None = None
        self._loop = asyncio.get_running_loop()
        self._wakeup: asyncio.Future[None] | None = None
        metadata.on_update(self.wakeup)
        self._task = self._loop.create_task(self._run())

    def wakeup(self) -> None:
        """On the loop: run a drain pass now."""
        waiter = self._wakeup
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def stop(self) -> None:
        """Stop sending: cancel requests in flight and fail every batch not yet delivered."""
        for task in (self._watchdog, self._init_task):
            if task is not None:
                task.cancel()
        self._task.cancel()
        for task in list(self._requests):
            task.cancel()
        await asyncio.gather(self._task, *self._requests, return_exceptions=True)
        for batch in self._accumulator.unsent():
            self._fail(batch, ClientTimeoutError("producer closed before the record was sent"))

    def _can_send(self, node: int, full: bool) -> bool:
        """Full batches pipeline up to max.in.flight.requests.per.connection; lingered small ones only up to
        SMALL_REQUESTS_IN_FLIGHT, then gather behind them (a Python broker pays ~0.3 ms per RPC, so many small
        requests in flight would only queue there and raise everyone's latency)."""
        in_flight = self._in_flight.get(node, 0)
        if in_flight >= (self._max_in_flight if full else self._max_small_in_flight):
            return False
        return self.throttles.until(node) <= time.monotonic()

    async def _run(self) -> None:
        loop = self._loop
        while True:
            try:
                wake_at = self._drain()
            except Exception:  # a bug here must not silently stop all sending
                logger.exception("producer sender pass failed")
                wake_at = time.monotonic() + self._backoff
            self._wakeup = waiter = loop.create_future()
            delay = wake_at - time.monotonic()
            timer = loop.call_later(max(0.0, delay), self.wakeup) if delay != float("inf") else None
            try:
                await waiter
            finally:
                self._wakeup = None
                if timer is not None:
                    timer.cancel()

    def _drain(self) -> float:
        """One pass: fail expired batches and start requests, one per ready leader per round, until the ready
        batches or the in-flight allowances run out; return when to run again (unless woken earlier by an
        append, a response or a metadata update)."""
        accumulator = self._accumulator
        accumulator.wakeup_pending = False
        now = time.monotonic()
        identity = self._identity
        txn = self._txn
        allowed = None
        if txn is not None:
            self._drop_if_ending(txn)
            allowed = txn.manager.send_allowed
        elif identity is not None and (not identity.ready or identity.needs_new_id):
            if self._init_task is None:
                self._init_task = self._loop.create_task(self._init_producer_id())
            return float("inf")  # woken when the producer id arrives
        while True:
            by_node, expired, next_ready, unknown_leader = accumulator.drain(
                now,
                self._metadata.leader,
                self._can_send,
                self._max_request_size,
                self._muted,
                identity is not None,
                allowed,
            )
            if txn is not None:
                txn.maybe_add_partitions()
            for batch in expired:
                self._fail(batch, ClientTimeoutError(self._expiry_message(batch, now)))
            if unknown_leader:
                self._metadata.request_refresh()
            for node, batches in by_node.items():
                if identity is not None:
                    for batch in batches:
                        identity.assign(batch)
                self._in_flight[node] = self._in_flight.get(node, 0) + 1
                self._muted.update(TopicPartition(b.topic, b.partition) for b in batches)
                task = self._loop.create_task(self._produce(node, batches))
                self._requests.add(task)
                task.add_done_callback(self._requests.discard)
            if not by_node:
                return min(next_ready, self.throttles.next_end(now))

    def _drop_if_ending(self, txn: TransactionClient) -> None:
        """While the transaction is being aborted, or has failed, its unsent batches (retries included) are
        dropped: they must not reach a partition now."""
        manager = txn.manager
        if manager.state not in (TxnState.ABORTING_TRANSACTION, TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR):
            return
        unsent = self._accumulator.unsent()
        if unsent:
            reason = "aborted" if manager.error is None else f"failed: {manager.error}"
            error = TransactionAbortedError(f"record dropped unsent: the transaction {reason}")
            for batch in unsent:
                self._fail(batch, error)

    def abort_unsent(self) -> None:
        """On abort_transaction(): drop the unsent batches now (the next drain would too)."""
        if self._txn is not None:
            self._drop_if_ending(self._txn)

    async def _init_producer_id(self) -> None:
        """Get a producer id (or, past the largest epoch, a new one) from any broker; retry until one answers."""
        identity = self._identity
        assert identity is not None
        try:
            while True:
                nodes = list(self._metadata.brokers)
                stub = self._metadata.stub(random.choice(nodes)) if nodes else None
                if stub is None:
                    with contextlib.suppress(OdradekError):
                        await self._metadata.refresh()
                else:
                    try:
                        response = await stub.InitProducerId(
                            pb.InitProducerIdRequest(producer_id=-1, producer_epoch=-1), timeout=self._timeout_ms / 1000
                        )
                    except grpc.aio.AioRpcError as e:
                        logger.debug("InitProducerId failed: %s", e.code().name)
                    else:
                        if response.error == ErrorCode.NONE:
                            identity.reset(response.producer_id, response.producer_epoch)
                            logger.debug("producer id %d epoch %d", response.producer_id, response.producer_epoch)
                            return
                        logger.debug("InitProducerId refused: %s", error_name(response.error))
                await asyncio.sleep(self._backoff)
        finally:
            self._init_task = None
            self.wakeup()

    def _expiry_message(self, batch: ProducerBatch, now: float) -> str:
        """Kafka's wording, plus the error that made the batch wait for a retry: a batch that expires between
        attempts would otherwise hide why the cluster did not take it."""
        message = (
            f"expiring {batch.record_count} record(s) for {batch.topic}-{batch.partition}: "
            f"{(now - batch.created) * 1000:.0f} ms has passed since batch creation (delivery.timeout.ms)"
        )
        if batch.last_error is not None:
            message += f"; the last attempt failed: {batch.last_error}"
        return message

    def _request(self, batches: list[ProducerBatch]) -> pb.ProduceRequest:
        compression = self._compression
        topics: dict[str, dict[int, list[ProducerBatch]]] = {}
        for batch in batches:
            topics.setdefault(batch.topic, {}).setdefault(batch.partition, []).append(batch)
        transactional = self._txn is not None
        return pb.ProduceRequest(
            acks=self._acks,
            transactional_id=self._transactional_id,
            timeout_ms=self._timeout_ms,
            client_id=self._client_id,
            topics=[
                pb.ProduceTopic(
                    name=topic,
                    partitions=[
                        pb.ProducePartition(
                            partition=partition,
                            records=b"".join([b.encode(compression, transactional) for b in group]),
                        )
                        for partition, group in partitions.items()
                    ],
                )
                for topic, partitions in topics.items()
            ],
        )

    async def _produce(self, node: int, batches: list[ProducerBatch]) -> None:
        call = None
        try:
            stub = self._metadata.stub(node)
            if stub is None:
                raise NetworkError(f"broker {node} is not in the metadata")
            call = stub.Produce(self._request(batches), timeout=self._timeout_ms / 1000)
            self._calls[call] = (node, batches, time.monotonic())
            if self._watchdog is None:
                self._watchdog = self._loop.create_task(self._watch_stalled())
            response = await call
        except grpc.aio.AioRpcError as e:
            self._metadata.request_refresh()
            self._retry_or_fail(batches, rpc_error(self._metadata.brokers.get(node, str(node)), e))
        except NetworkError as e:
            self._metadata.request_refresh()
            self._retry_or_fail(batches, e)
        except asyncio.CancelledError:
            if call is not None and call in self._abandoned:
                self._retry_or_fail(batches, NetworkError(f"broker {node} stopped leading while the request waited"))
                return
            for batch in batches:
                self._fail(batch, ClientTimeoutError("producer closed with the record in flight"))
            raise
        except Exception as e:  # e.g. a compression library failing: the batches cannot be sent as they are
            logger.exception("produce request to broker %d failed", node)
            for batch in batches:
                self._fail(batch, e)
        else:
            self._complete(node, response, batches)
        finally:
            if call is not None:
                self._calls.pop(call, None)
                self._abandoned.discard(call)
            self._in_flight[node] -= 1
            self._muted.difference_update(TopicPartition(b.topic, b.partition) for b in batches)
            self.wakeup()

    async def _watch_stalled(self) -> None:
        """While a request goes unanswered, refresh metadata every STALL_CHECK_S; once every partition in it has
        another leader, abandon it and retry there. A paused or partitioned old leader would otherwise hold the
        partitions for a whole request.timeout.ms (it cannot commit them at acks=all: it is fenced)."""
        try:
            while self._calls:
                await asyncio.sleep(STALL_CHECK_S)
                now = time.monotonic()
                stalled = False
                for call, (node, batches, started) in list(self._calls.items()):
                    if now - started < STALL_CHECK_S:
                        continue
                    stalled = True
                    if all(self._metadata.leader(b.topic, b.partition) != node for b in batches):
                        self._abandoned.add(call)
                        call.cancel()
                if stalled:
                    self._metadata.request_refresh()
        finally:
            self._watchdog = None

    def _complete(self, node: int, response: pb.ProduceResponse, batches: list[ProducerBatch]) -> None:
        self.throttles.record(node, response.throttle_time_ms, time.monotonic())
        groups: dict[tuple[str, int], list[ProducerBatch]] = {}
        for batch in batches:
            groups.setdefault((batch.topic, batch.partition), []).append(batch)
        done: list[ProducerBatch] = []  # their memory returned together, with one lock for the response
        for t in response.topics:
            for p in t.partitions:
                group = groups.pop((t.name, p.partition), None)
                if group is None:
                    continue
                if p.error == ErrorCode.NONE:
                    # The broker appends a partition's batches contiguously: each starts where the previous ends.
                    offset = p.base_offset if self._acks != 0 else -1
                    for batch in group:
                        batch.complete(offset, p.log_append_time_ms)
                        if offset >= 0:
                            offset += batch.record_count
                    done.extend(group)
                    continue
                if p.error in LEADER_ERRORS:
                    if p.HasField("current_leader"):
                        self._metadata.apply_leader_hint(t.name, p.partition, p.current_leader)
                    else:
                        self._metadata.request_refresh()
                message = f"produce to {t.name}-{p.partition}: {p.error_message or error_name(p.error)}"
                self._retry_or_fail(group, error_for_code(p.error, message))
        if done:
            self._accumulator.release_all(done)
        for group in groups.values():
            self._retry_or_fail(group, OdradekError(f"broker {node} did not answer for this partition"))

    def _retry_or_fail(self, batches: list[ProducerBatch], error: OdradekError) -> None:
        now = time.monotonic()
        retry = []
        for batch in batches:
            if (
                error.retriable
                and batch.attempts < self._retries
                and now + self._backoff < batch.created + self._delivery_timeout
            ):
                batch.attempts += 1
                batch.retry_at = now + self._backoff
                batch.last_error = error
                retry.append(batch)
            else:
                self._fail(batch, error)
        if retry:
            logger.debug("retrying %d batch(es) after %s", len(retry), error)
            self._accumulator.reenqueue(retry)

    def _fail(self, batch: ProducerBatch, error: BaseException) -> None:
        if self._txn is not None:
            # The transaction cannot commit now; its abort bumps the epoch at the coordinator (sequences restart).
            self._txn.manager.on_batch_failed(error)
        elif self._identity is not None:
            self._identity.bump_epoch(batch)  # the broker's view of its sequence is unknown now
        batch.fail(error)
        self._accumulator.release(batch)
