"""The producer: ``AsyncProducer`` and the synchronous ``Producer`` facade.

``send()`` is the hot path (≈1 µs of Python per record): validate, pick the partition, append under the
accumulator's lock, return a two-slot future. It never awaits. When it needs something that is not there yet,
metadata for a new topic or buffer memory, the sync facade blocks the caller's thread up to ``max.block.ms``, like
Kafka's ``KafkaProducer.send``; code on the event loop cannot block, so there the record is deferred instead: it
gets a ``DeferredRecordFuture`` and is appended, in order with the records sent after it, as soon as the metadata
or memory arrives (and fails with ClientTimeoutError after ``max.block.ms``).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any, NamedTuple, TypeVar, cast, overload

from odradek.client.authentication import sasl_credentials
from odradek.client.background import BackgroundLoop
from odradek.client.config import ProducerConfig, with_client_id
from odradek.client.connection import DEFAULT_MAX_MESSAGE_BYTES, ChannelPool
from odradek.client.errors import (
    ClientTimeoutError,
    InvalidTxnStateError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
)
from odradek.client.metadata import Metadata
from odradek.client.producer.accumulator import FIRST_RESERVATION, RecordAccumulator
from odradek.client.producer.batch import DeferredRecordFuture, Headers, RecordFuture
from odradek.client.producer.partitioner import StickyPartitioner, murmur2
from odradek.client.producer.sender import Sender
from odradek.client.producer.transactions import TransactionAbortedError, TxnState
from odradek.client.producer.txn_client import TransactionClient
from odradek.client.record.header import HEADER_SIZE
from odradek.client.serialization import serializers
from odradek.client.structs import GroupMetadata, OffsetAndMetadata, RecordMetadata, TopicPartition
from odradek.client.throttle import throttle_metrics

# Estimated framing of one record: length, attributes, timestamp and offset deltas, key and value lengths and the
# header count take 8-12 bytes for records below 8 KiB. Used for batch.size and memory accounting only.
RECORD_OVERHEAD = 12
HEADER_OVERHEAD = 6  # per header: name and value lengths

DeliveryFuture = RecordFuture | DeferredRecordFuture
Value = bytes | str | None

_time_ns = time.time_ns
T = TypeVar("T")


class _Blocked(Exception):
    """``send()`` needs metadata or buffer memory and must not block for it."""


class _Deferred(NamedTuple):
    args: tuple[Any, ...]
    future: DeferredRecordFuture
    deadline: float


@overload
def _to_bytes(value: None, what: str) -> None: ...
@overload
def _to_bytes(value: bytes | str, what: str) -> bytes: ...
@overload
def _to_bytes(value: object, what: str) -> bytes | None: ...
def _to_bytes(value: object, what: str) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    raise TypeError(f"{what} must be bytes, str or None, not {type(value).__name__}")


def _headers(headers: Iterable[tuple[str, Value]]) -> tuple[Headers | None, int]:
    """Validated headers (values as bytes) and their estimated encoded size."""
    checked: Headers = []
    size = 0
    for name, value in headers:
        if not isinstance(name, str):
            raise TypeError(f"header name must be str, not {type(name).__name__}")
        value = _to_bytes(value, f"header {name!r}")
        checked.append((name, value))
        size += len(name.encode()) + (len(value) if value else 0) + HEADER_OVERHEAD
    return checked or None, size


class AsyncProducer:
    """Create inside a running event loop; ``send`` from that loop's thread, everything else awaited."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        cfg = with_client_id(config, ProducerConfig.from_mapping(config))
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError("create AsyncProducer inside a running event loop (or use Producer)") from None
        self._loop_thread = threading.get_ident()
        self._pool = ChannelPool(
            max(DEFAULT_MAX_MESSAGE_BYTES, cfg.max_request_size + 65_536),
            cfg.client_id,
            security=cfg.tls_files(),
            sasl=sasl_credentials(cfg),
        )
        self._metadata = Metadata(cfg, self._pool, allow_auto_topic_creation=True)  # as Kafka's producers
        self._accumulator = RecordAccumulator(cfg, self._wake_sender)
        self._txn = TransactionClient(cfg, self._metadata, self._pool) if cfg.transactional_id is not None else None
        self._txn_manager = None if self._txn is None else self._txn.manager
        self._sender = Sender(cfg, self._metadata, self._accumulator, self._txn)
        self._counts = self._metadata.partition_counts
        self._sticky = StickyPartitioner()
        self._sticky_current = self._sticky.current
        self._ignore_keys = cfg.partitioner_ignore_keys
        self._batch_size = cfg.batch_size
        self._max_record = min(cfg.max_request_size, cfg.buffer_memory) - HEADER_SIZE
        self._max_block = cfg.max_block_ms / 1000
        self._may_block = False  # the sync facade sets it: its callers' threads may wait
        self._deferred: deque[_Deferred] = deque()
        self._replaying = False
        self._replay: asyncio.Task[None] | None = None
        self._closed = False
        serde = serializers(cfg)
        if serde is not None:
            self._key_serializer, self._value_serializer = serde
            self.__dict__["send"] = self._serialize_and_send  # the plain send() keeps its direct path otherwise

    async def __aenter__(self) -> AsyncProducer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _wake_sender(self) -> None:
        self._loop.call_soon_threadsafe(self._sender.wakeup)

    def send(
        self,
        topic: str,
        value: Value,
        key: Value = None,
        partition: int | None = None,
        headers: Iterable[tuple[str, Value]] | None = None,
        timestamp: int | None = None,
    ) -> DeliveryFuture:
        """Queue a record and return its delivery future (awaitable, or ``.result(timeout)``).

        ``value``, ``key`` and header values are bytes, str (sent as UTF-8) or None; ``timestamp`` is in ms (now
        if None). Without ``partition``, a key picks the partition as Kafka does and key-less records stick to one.
        Raises TypeError/ValueError for bad arguments, RecordTooLargeError for a record above max.request.size or
        buffer.memory, UnknownTopicOrPartitionError for a partition the topic lacks: all before anything is sent.
        With a transactional.id, only between begin_transaction() and commit or abort (InvalidTxnStateError
        otherwise; TransactionAbortableError after the transaction failed; the fatal error once fenced).
        """
        txn = self._txn_manager
        if txn is not None and not self._replaying:  # a deferred record was checked when it was sent
            txn.check_send()
        if value.__class__ is bytes:
            size = len(value) + RECORD_OVERHEAD
        else:
            value = _to_bytes(value, "value")
            size = RECORD_OVERHEAD if value is None else len(value) + RECORD_OVERHEAD
        if key is not None:
            if key.__class__ is not bytes:
                key = _to_bytes(key, "key")
            size += len(key)
        if headers is not None:
            headers, header_size = _headers(headers)
            size += header_size
        if timestamp is None:
            timestamp = _time_ns() // 1_000_000
        elif timestamp.__class__ is not int or timestamp < 0:
            raise ValueError(f"timestamp must be a non-negative int (ms), not {timestamp!r}")
        if size > self._max_record:
            raise RecordTooLargeError(
                f"the record is about {size + HEADER_SIZE} bytes as a batch, above max.request.size or buffer.memory"
            )
        try:
            if self._deferred and not self._replaying:
                raise _Blocked  # records deferred before this one go first
            count = self._counts.get(topic)
            if count is None:
                count = self._wait_for_topic(topic)
            accumulator = self._accumulator
            if partition is None:
                if key is None or self._ignore_keys:
                    partition = self._sticky_current.get(topic)
                    if partition is not None:
                        future = accumulator.try_append(topic, partition, key, value, headers, timestamp, size)
                        if future is not None:
                            return future
                    # No open batch on the sticky partition (it filled, or was sent): move on (KIP-480).
                    partition = self._sticky.next(topic, count, self._metadata.available_partitions(topic), partition)
                else:
                    partition = (murmur2(key) & 0x7FFFFFFF) % count
            elif partition.__class__ is not int or not 0 <= partition < count:
                beyond = partition.__class__ is int and partition >= count  # CreatePartitions may have added it
                if not beyond or not self._can_block():
                    if beyond:
                        self._metadata.request_refresh()  # a later send may find it
                    raise UnknownTopicOrPartitionError(f"partition {partition!r} of {topic}: it has {count} partitions")
                count = self._blocking(self._metadata.wait_for_partition(topic, partition, self._max_block))
            future = accumulator.try_append(topic, partition, key, value, headers, timestamp, size)
            if future is not None:
                return future
            # What the record needs, at least FIRST_RESERVATION: the batch reserves more as it fills (accumulator.py).
            reserved = max(min(self._batch_size, FIRST_RESERVATION), size + HEADER_SIZE)
            if not accumulator.try_reserve(reserved):
                if not self._can_block():
                    raise _Blocked
                accumulator.reserve(reserved, self._max_block)
            return accumulator.append_new(topic, partition, key, value, headers, timestamp, size, reserved)
        except _Blocked:
            if self._replaying:
                raise
            return self._defer((topic, value, key, partition, headers, timestamp))

    def _can_block(self) -> bool:
        return self._may_block and threading.get_ident() != self._loop_thread

    def _serialize_and_send(
        self,
        topic: str,
        value: Any,
        key: Any = None,
        partition: int | None = None,
        headers: Iterable[tuple[str, Value]] | None = None,
        timestamp: int | None = None,
    ) -> DeliveryFuture:
        """``send`` with key.serializer and value.serializer applied first (SerializationError: nothing is sent).
        The first record of a registry format's subject asks the registry (a blocking HTTP call), later ones not."""
        return AsyncProducer.send(
            self,
            topic,
            self._value_serializer.serialize(topic, value),
            self._key_serializer.serialize(topic, key),
            partition,
            headers,
            timestamp,
        )

    def _wait_for_topic(self, topic: str) -> int:
        if self._closed:
            raise RuntimeError("the producer is closed")
        if not self._can_block():
            raise _Blocked
        return self._blocking(self._metadata.wait_for_topic(topic, self._max_block))

    def _blocking(self, wait: Coroutine[Any, Any, int]) -> int:
        """``wait`` run on the client's loop, from a caller's thread that may block."""
        return asyncio.run_coroutine_threadsafe(wait, self._loop).result()

    # ---- deferred records ----

    def _defer(self, args: tuple[Any, ...]) -> DeferredRecordFuture:
        if self._closed:
            raise RuntimeError("the producer is closed")
        future = DeferredRecordFuture()
        self._deferred.append(_Deferred(args, future, time.monotonic() + self._max_block))
        if threading.get_ident() == self._loop_thread:
            self._start_replay()
        else:
            self._loop.call_soon_threadsafe(self._start_replay)
        return future

    def _start_replay(self) -> None:
        if self._replay is None or self._replay.done():
            self._replay = self._loop.create_task(self._replay_deferred())

    async def _replay_deferred(self) -> None:
        deferred = self._deferred
        while deferred:
            entry = deferred[0]
            try:
                future = await self._send_deferred(entry)
            except Exception as e:
                entry.future.set_exception(e)
            else:
                entry.future.follow(future)
            deferred.popleft()

    async def _send_deferred(self, entry: _Deferred) -> RecordFuture:
        topic = entry.args[0]
        while True:
            self._replaying = True
            try:
                # The class's send: a deferred record was serialized when it was sent.
                return cast(RecordFuture, AsyncProducer.send(self, *entry.args))  # never deferred again here
            except _Blocked:
                pass
            finally:
                self._replaying = False
            remaining = entry.deadline - time.monotonic()
            if topic not in self._counts:
                await self._metadata.wait_for_topic(topic, max(0.0, remaining), budget=self._max_block)
                continue
            try:
                async with asyncio.timeout(max(0.0, remaining)):
                    await self._accumulator.memory_freed()
            except TimeoutError:
                raise ClientTimeoutError(
                    f"failed to allocate buffer.memory within max.block.ms ({self._max_block * 1000:.0f} ms)"
                ) from None

    # ---- transactions ----

    def _transactions(self) -> TransactionClient:
        if self._txn is None:
            raise InvalidTxnStateError("transactions need the transactional.id config")
        if self._closed:
            raise RuntimeError("the producer is closed")
        return self._txn

    def _deadline(self, timeout: float | None) -> float:
        return time.monotonic() + (self._max_block if timeout is None else timeout)

    async def init_transactions(self, timeout: float | None = None) -> None:
        """Register the transactional.id with its coordinator and get the producer id and epoch: fences any older
        producer with the same id and completes or aborts what it left open. Call once, first. ``timeout`` in
        seconds (max.block.ms if None); after ClientTimeoutError it may be called again."""
        txn = self._transactions()
        async with txn.lock:
            await txn.init(self._deadline(timeout))

    def begin_transaction(self) -> None:
        """Start a transaction: records sent from now on are committed or aborted together. Local only; the
        coordinator learns of the transaction with its first partition or offsets."""
        self._transactions().manager.begin()

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        group_metadata: GroupMetadata,
        timeout: float | None = None,
    ) -> None:
        """Commit a consumer group's positions (the offset of the next record to read, per partition) as part of
        the transaction: visible to the group only if the transaction commits. ``group_metadata`` is the
        consuming ``Consumer.group_metadata()``: the coordinator refuses the offsets of a member that is no longer
        in that generation (CommitFailedError; abort and rewind)."""
        if not isinstance(group_metadata, GroupMetadata):
            raise TypeError(f"group_metadata must be Consumer.group_metadata(), not {type(group_metadata).__name__}")
        checked: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, om in offsets.items():
            if isinstance(om, int) and not isinstance(om, bool):
                om = OffsetAndMetadata(om)
            if not isinstance(om, OffsetAndMetadata) or om.offset < 0:
                raise ValueError(f"offset for {tp} must be a non-negative int or OffsetAndMetadata, not {om!r}")
            checked[TopicPartition(*tp)] = om
        txn = self._transactions()
        async with txn.lock:
            if not checked:
                txn.manager.check_send()  # still only inside a transaction
                return
            await txn.send_offsets(checked, group_metadata, self._deadline(timeout))

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Deliver every record of the transaction (flush), then commit it. On TransactionAbortableError (or any
        error but the fatal ones) call abort_transaction(); on ProducerFencedError close the producer. After
        ClientTimeoutError it may be called again."""
        txn = self._transactions()
        deadline = self._deadline(timeout)
        async with txn.lock:
            manager = txn.manager
            manager.begin_commit()
            await self.flush(max(0.0, deadline - time.monotonic()))
            if manager.has_error:
                raise manager.refusal("commit_transaction()") from manager.error
            await txn.end(deadline)

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: records not yet sent are dropped (their futures fail with
        TransactionAbortedError), those sent are hidden from read_committed readers, offsets sent to it are not
        committed. The way out of a failed (abortable) transaction."""
        txn = self._transactions()
        deadline = self._deadline(timeout)
        async with txn.lock:
            txn.manager.begin_abort()
            await self._drop_deferred(TransactionAbortedError("record dropped unsent: the transaction was aborted"))
            self._sender.abort_unsent()
            await self._wait_in_flight(max(0.0, deadline - time.monotonic()))
            await txn.end(deadline)

    async def _drop_deferred(self, error: BaseException) -> None:
        if self._replay is not None:
            self._replay.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._replay
        while self._deferred:
            self._deferred.popleft().future.set_exception(error)

    async def _wait_in_flight(self, timeout: float) -> None:
        """Wait for the batches already sent to be answered (an abort must not overtake them)."""
        batches = self._accumulator.begin_flush()
        try:
            async with asyncio.timeout(timeout):
                for batch in batches:
                    await batch.wait()
        except TimeoutError:
            raise ClientTimeoutError(f"records in flight not answered within {timeout} s") from None
        finally:
            self._accumulator.end_flush()

    # ---- the rest of the API ----

    async def send_and_wait(
        self,
        topic: str,
        value: Value,
        key: Value = None,
        partition: int | None = None,
        headers: Iterable[tuple[str, Value]] | None = None,
        timestamp: int | None = None,
    ) -> RecordMetadata:
        return await self.send(topic, value, key, partition, headers, timestamp)

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now, without waiting for linger.ms, and wait until it is delivered or failed."""
        try:
            async with asyncio.timeout(timeout):
                while self._deferred:
                    self._start_replay()
                    await asyncio.shield(self._replay)  # type: ignore[arg-type]
                batches = self._accumulator.begin_flush()
                try:
                    for batch in batches:
                        await batch.wait()
                finally:
                    self._accumulator.end_flush()
        except TimeoutError:
            raise ClientTimeoutError(f"flush did not complete within {timeout} s") from None

    async def partitions_for(self, topic: str) -> list[int]:
        """The topic's partitions, waiting up to max.block.ms for its metadata."""
        count = await self._metadata.wait_for_topic(topic, self._max_block)
        return list(range(count))

    def metrics(self) -> dict[str, float]:
        """The producer's metrics by Kafka's names: ``produce-throttle-time-avg`` and ``-max``, the throttle time
        (ms) brokers reported on Produce responses over the last 30 to 60 s (NaN when none came; see
        odradek.client.metrics)."""
        return throttle_metrics("produce", self._sender.throttles, time.monotonic())

    async def close(self, timeout: float | None = None) -> None:
        """Deliver what was sent (waiting up to ``timeout`` seconds, forever if None), then stop; records still
        undelivered fail with ClientTimeoutError."""
        if self._closed:
            return
        manager = self._txn_manager
        if manager is not None and manager.state in (TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR):
            # As Kafka: an open transaction is aborted rather than left to time out at the coordinator.
            with contextlib.suppress(Exception):
                await self.abort_transaction(timeout)
        with contextlib.suppress(ClientTimeoutError):
            await self.flush(timeout)
        self._closed = True
        self._counts = {}  # every later send() takes the slow path, which refuses
        if self._replay is not None:
            self._replay.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._replay
        while self._deferred:
            self._deferred.popleft().future.set_exception(ClientTimeoutError("producer closed before sending"))
        await self._sender.stop()
        if self._txn is not None:
            await self._txn.close()
        await self._metadata.close()
        await self._pool.close()


async def _call(method: Callable[[], T]) -> T:
    """Run a plain method on the client loop (its state is the loop's)."""
    return method()


class Producer:
    """Synchronous facade: the same API, blocking where Kafka's does (``send`` for metadata and memory, up to
    max.block.ms). The async core runs on a background loop; ``send`` appends from the caller's thread and is the
    core's own method, so it costs no thread hop. Callbacks run on the client loop thread (shared by the process's
    synchronous clients)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._loop = BackgroundLoop("odradek-producer")
        try:
            self._core = self._loop.run(self._create(config))
        except BaseException:
            self._loop.stop()
            raise
        # The core's bound method shadows ``send`` below (same signature): one call less on the hot path.
        self.__dict__["send"] = self._core.send
        self._closed = False

    @staticmethod
    async def _create(config: Mapping[str, Any]) -> AsyncProducer:
        core = AsyncProducer(config)
        core._may_block = True
        return core

    def send(
        self,
        topic: str,
        value: Value,
        key: Value = None,
        partition: int | None = None,
        headers: Iterable[tuple[str, Value]] | None = None,
        timestamp: int | None = None,
    ) -> DeliveryFuture:
        """As ``AsyncProducer.send`` (replaced per instance by the core's bound method)."""
        return self._core.send(topic, value, key, partition, headers, timestamp)

    def send_and_wait(
        self,
        topic: str,
        value: Value,
        key: Value = None,
        partition: int | None = None,
        headers: Iterable[tuple[str, Value]] | None = None,
        timestamp: int | None = None,
        timeout: float | None = None,
    ) -> RecordMetadata:
        return self.send(topic, value, key, partition, headers, timestamp).result(timeout)

    def flush(self, timeout: float | None = None) -> None:
        self._loop.run(self._core.flush(timeout))

    def init_transactions(self, timeout: float | None = None) -> None:
        self._loop.run(self._core.init_transactions(timeout))

    def begin_transaction(self) -> None:
        self._loop.run(self._begin())

    async def _begin(self) -> None:
        self._core.begin_transaction()  # on the loop, where the transaction's state changes

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        group_metadata: GroupMetadata,
        timeout: float | None = None,
    ) -> None:
        self._loop.run(self._core.send_offsets_to_transaction(offsets, group_metadata, timeout))

    def commit_transaction(self, timeout: float | None = None) -> None:
        self._loop.run(self._core.commit_transaction(timeout))

    def abort_transaction(self, timeout: float | None = None) -> None:
        self._loop.run(self._core.abort_transaction(timeout))

    def partitions_for(self, topic: str) -> list[int]:
        return self._loop.run(self._core.partitions_for(topic))

    def metrics(self) -> dict[str, float]:
        """As ``AsyncProducer.metrics`` (read on the client loop while it runs)."""
        if self._closed:
            return self._core.metrics()
        return self._loop.run(_call(self._core.metrics))

    def close(self, timeout: float | None = None) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._loop.run(self._core.close(timeout))
        finally:
            self._loop.stop()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
