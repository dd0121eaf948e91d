"""The record accumulator: per-partition queues of batches between ``send()`` and the sender.

``send()`` appends from the caller's thread under one lock, as Kafka's Java producer does, and the sender drains
from the event loop. The sender is woken only when a batch is created (to arm its linger timer) or closes full,
and at most once until it runs: never per record, since a cross-thread wakeup costs more than an append.

Memory is accounted per batch: a new batch reserves what its first record needs, at least FIRST_RESERVATION bytes
(never more than ``batch.size`` unless the record is larger), and doubles its reservation up to ``batch.size`` as
records fill it, all held until the batch completes; a batch that cannot grow when memory is short closes
(sendable) and the record goes to a new one. Kafka's producer reserves ``batch.size`` for every batch: with its
defaults (16 KiB in 32 MiB) a producer spreading records over 2,048 partitions or more has no memory left for its
open batches, so each goes out with one record and every ``send()`` blocks. When memory runs out, every batch
becomes sendable and a blocking caller waits up to ``max.block.ms``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable, Collection

from odradek.client.config import ProducerConfig
from odradek.client.errors import ClientTimeoutError
from odradek.client.producer.batch import Headers, ProducerBatch, RecordFuture
from odradek.client.structs import TopicPartition

# Batches of one partition an idempotent producer sends in one request: the broker remembers the last eight batches
# of each producer (MAX_RETAINED_BATCHES in broker/log/producer_state.py), so a retry of any of them is still
# recognised as a duplicate.
IDEMPOTENT_BATCHES = 8

_new = object.__new__
# The least a new batch reserves (``batch.size`` if smaller): a few small records, before the first doubling.
FIRST_RESERVATION = 1024


class RecordAccumulator:
    def __init__(self, config: ProducerConfig, notify: Callable[[], None]) -> None:
        """``notify`` wakes the sender; it must be callable from any thread."""
        self._lock = threading.Lock()
        self._memory = threading.Condition(self._lock)
        self._batch_size = config.batch_size
        self._linger = config.linger_ms / 1000
        self._delivery_timeout = config.delivery_timeout_ms / 1000
        self._free = config.buffer_memory
        self._notify = notify
        self.wakeup_pending = False  # cleared by the sender before each drain
        self._open: dict[str, dict[int, ProducerBatch]] = {}  # the batch appends go to, per topic and partition
        # Unsent batches, oldest first; only partitions that have some (a drain pass walks these, so a producer
        # spreading over thousands of partitions pays per waiting batch, not per partition it ever wrote).
        self._queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._incomplete: set[ProducerBatch] = set()
        self._drain_start = 0
        # No queued batch can expire before this (monotonic seconds): drains skip the per-partition expiry check
        # until then. Heads only get newer, so the oldest head found by a check bounds every batch queued later;
        # a retry goes back to the front with its old creation time and makes the next drain check again.
        self._expiry_due = 0.0
        self._flushing = 0
        self._blocked_threads = 0
        self._memory_waiters: list[asyncio.Future[None]] = []
        self.closing = False

    # ---- appending (any thread) ----

    def try_append(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None,
        timestamp: int,
        size: int,
    ) -> RecordFuture | None:
        """Append to the partition's open batch if the record fits. None when a new batch is needed: the caller
        then reserves memory and calls ``append_new`` (or, for a sticky partition, moves on first).

        The hot path of ``send()``: ``_append`` inlined, and the lock taken without a context manager."""
        lock = self._lock
        lock.acquire()
        try:
            batches = self._open.get(topic)
            if batches is None:
                return None
            batch = batches.get(partition)
            if batch is None:
                return None
            need = batch.size + size
            if need > self._batch_size:
                self._close(batches, batch)
                return None
            if need > batch.reserved:
                grow = min(max(need, 2 * batch.reserved), self._batch_size) - batch.reserved
                if grow > self._free:  # memory is short: send this batch, the record takes a new one
                    self._close(batches, batch)
                    return None
                self._free -= grow
                batch.reserved += grow
            values = batch.values
            future = _new(RecordFuture)
            future._batch = batch
            future._index = len(values)
            values.append(value)
            batch.keys.append(key)
            batch.timestamps.append(timestamp)
            if headers is not None or batch.headers is not None:
                self._append_headers(batch, headers)
            batch.size += size
            return future
        finally:
            lock.release()

    def append_new(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None,
        timestamp: int,
        size: int,
        reserved: int,
    ) -> RecordFuture:
        """Append into a new batch holding the ``reserved`` bytes, or into an open batch another thread created
        meanwhile (returning the reservation)."""
        with self._lock:
            batches = self._open.get(topic)
            if batches is None:
                batches = self._open[topic] = {}
            batch = batches.get(partition)
            if batch is not None and batch.size + size <= self._batch_size:
                if batch.size + size > batch.reserved:
                    batch.reserved += reserved  # the reservation covers the record wherever it goes
                else:
                    self._free += reserved
                    if self._blocked_threads:
                        self._memory.notify_all()
                return self._append(batch, key, value, headers, timestamp, size)
            if batch is not None:
                self._close(batches, batch)
            batch = batches[partition] = ProducerBatch(topic, partition, time.monotonic(), reserved)
            tp = TopicPartition(topic, partition)
            queue = self._queues.get(tp)
            if queue is None:
                queue = self._queues[tp] = deque()
            queue.append(batch)
            self._incomplete.add(batch)
            self._wake_sender()  # to arm the linger timer
            return self._append(batch, key, value, headers, timestamp, size)

    def _append(
        self,
        batch: ProducerBatch,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None,
        timestamp: int,
        size: int,
    ) -> RecordFuture:
        future = _new(RecordFuture)
        future._batch = batch
        future._index = len(batch.values)
        batch.values.append(value)
        batch.keys.append(key)
        batch.timestamps.append(timestamp)
        if headers is not None or batch.headers is not None:
            self._append_headers(batch, headers)
        batch.size += size
        return future

    @staticmethod
    def _append_headers(batch: ProducerBatch, headers: Headers | None) -> None:
        """Headers are kept per record only once a record in the batch has some."""
        if batch.headers is None:
            batch.headers = [[] for _ in range(len(batch.values) - 1)]
        batch.headers.append(headers or [])

    def _close(self, batches: dict[int, ProducerBatch], batch: ProducerBatch) -> None:
        """No more appends: the batch is sendable now."""
        batch.closed = True
        del batches[batch.partition]
        self._wake_sender()

    def _wake_sender(self) -> None:
        if not self.wakeup_pending:
            self.wakeup_pending = True
            self._notify()

    # ---- memory ----

    def try_reserve(self, nbytes: int) -> bool:
        with self._lock:
            if self._free >= nbytes:
                self._free -= nbytes
                return True
            return False

    def reserve(self, nbytes: int, timeout: float) -> None:
        """Take ``nbytes`` of buffer.memory, blocking the calling thread (never the loop) up to ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._memory:
            if self._free < nbytes:
                self._blocked_threads += 1
                self._wake_sender()  # exhausted memory makes every batch sendable
                try:
                    while self._free < nbytes:
                        remaining = deadline - time.monotonic()
                        if remaining <= 0:
                            raise ClientTimeoutError(
                                f"failed to allocate {nbytes} bytes of buffer.memory within max.block.ms "
                                f"({timeout * 1000:.0f} ms)"
                            )
                        self._memory.wait(remaining)
                finally:
                    self._blocked_threads -= 1
            self._free -= nbytes

    def memory_freed(self) -> asyncio.Future[None]:
        """On the loop: a future resolved when the next batch returns its memory."""
        waiter = asyncio.get_running_loop().create_future()
        self._memory_waiters.append(waiter)
        self._wake_sender()
        return waiter

    def release(self, batch: ProducerBatch) -> None:
        """A batch completed (on the loop): return its memory."""
        self.release_all((batch,))

    def release_all(self, batches: Collection[ProducerBatch]) -> None:
        """Batches completed (on the loop): return their memory, with one lock and one notify for all of them."""
        with self._lock:
            incomplete = self._incomplete
            for batch in batches:
                self._free += batch.reserved
                batch.reserved = 0
                incomplete.discard(batch)
            if self._blocked_threads:
                self._memory.notify_all()
        waiters, self._memory_waiters = self._memory_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    # ---- draining (on the loop) ----

    def drain(
        self,
        now: float,
        leader_of: Callable[[str, int], int],
        can_send: Callable[[int, bool], bool],
        max_bytes: int,
        muted: Collection[TopicPartition] = (),
        idempotent: bool = False,
        allowed: Callable[[TopicPartition], bool] | None = None,
    ) -> tuple[dict[int, list[ProducerBatch]], list[ProducerBatch], float, bool]:
        """Take the batches to send now, grouped by leader. Returns them, the batches that expired
        (``delivery.timeout.ms``), when the next waiting batch becomes sendable, and whether a sendable batch has
        no known leader.

        A partition is sendable when its first batch is full (closed: full, or a retry; or batches queue behind
        it), when a flush, close or memory shortage wants everything out, or when it has lingered ``linger.ms``;
        never while it backs off. ``can_send(leader, full)`` says whether its leader takes a request now: the
        sender pipelines full batches further than lingered, small ones, so that at a moderate rate records
        gather behind the requests in flight instead of each making its own RPC. As in Kafka, a leader with one
        sendable partition gets the waiting batches of all its partitions in the same request, up to
        ``max_bytes`` (at least one batch). ``muted`` partitions (a request of theirs is in flight) wait. For the
        ``idempotent`` producer a request takes at most IDEMPOTENT_BATCHES of a partition (the broker remembers that
        many per producer, so a retry of any of them is recognised), and a retried batch goes alone (a duplicate is
        answered with its original offsets, which batches after it would not follow). A transactional producer
        passes ``allowed``: a partition not yet added to its transaction waits (``allowed`` notes it for adding)."""
        by_node: dict[int, list[ProducerBatch]] = {}
        sizes: dict[int, int] = {}
        expired: list[ProducerBatch] = []
        next_ready = float("inf")
        unknown_leader = False
        linger, expiry = self._linger, now - self._delivery_timeout
        with self._lock:
            rush = bool(self._flushing or self.closing or self._blocked_threads or self._memory_waiters)
            queues = list(self._queues.items())
            start = self._drain_start = (self._drain_start + 1) % max(1, len(queues))
            queues = queues[start:] + queues[:start]  # rotate, so no partition always comes last
            check_expiry = now >= self._expiry_due
            oldest = now
            candidates: list[tuple[TopicPartition, deque[ProducerBatch], int]] = []  # for the second pass
            ready: set[int] = set()
            for tp, queue in queues:
                if check_expiry:
                    while queue and queue[0].created <= expiry:
                        expired.append(self._pop(queue))
                    if queue and queue[0].created < oldest:
                        oldest = queue[0].created
                if not queue:
                    del self._queues[tp]  # expired to the last batch
                    continue
                if tp in muted or (allowed is not None and not allowed(tp)):
                    continue
                leader = leader_of(tp.topic, tp.partition)
                head = queue[0]
                full = head.closed or len(queue) > 1 or rush
                if head.retry_at > now:
                    next_ready = min(next_ready, head.retry_at)
                elif not (full or now >= head.created + linger):
                    next_ready = min(next_ready, head.created + linger)
                elif leader < 0:
                    unknown_leader = True
                    next_ready = min(next_ready, head.created + self._delivery_timeout)  # to expire it
                elif leader not in ready and can_send(leader, full):
                    ready.add(leader)
                if leader >= 0:
                    candidates.append((tp, queue, leader))
            if check_expiry:
                self._expiry_due = oldest + self._delivery_timeout
            for tp, queue, leader in candidates if ready else ():
                if leader not in ready:
                    continue
                batches = by_node.get(leader)
                if batches is None:
                    batches = by_node[leader] = []
                size = sizes.get(leader, 0)
                taken = 0
                while queue and queue[0].retry_at <= now and (not batches or size + queue[0].size <= max_bytes):
                    retry = queue[0].attempts > 0
                    if idempotent and taken and (retry or taken == IDEMPOTENT_BATCHES):
                        break
                    size += queue[0].size
                    batches.append(self._pop(queue))
                    taken += 1
                    if idempotent and retry:
                        break
                sizes[leader] = size
                if not queue:
                    del self._queues[tp]
        return by_node, expired, next_ready, unknown_leader

    def _pop(self, queue: deque[ProducerBatch]) -> ProducerBatch:
        batch = queue.popleft()
        if not batch.closed:
            batch.closed = True
            del self._open[batch.topic][batch.partition]
        return batch

    def reenqueue(self, batches: list[ProducerBatch]) -> None:
        """Put batches back at the front of their queues (to retry), keeping their order."""
        with self._lock:
            self._expiry_due = 0.0  # their creation times may be older than any queued batch's

            for batch in reversed(batches):
                tp = TopicPartition(batch.topic, batch.partition)
                queue = self._queues.get(tp)
                if queue is None:
                    queue = self._queues[tp] = deque()
                queue.appendleft(batch)

    def unsent(self) -> list[ProducerBatch]:
        """Take every queued batch (on close, to fail them)."""
        with self._lock:
            batches = []
            for queue in self._queues.values():
                while queue:
                    batches.append(self._pop(queue))
            self._queues.clear()
            return batches

    # ---- flushing ----

    def begin_flush(self) -> list[ProducerBatch]:
        """Make every batch sendable until ``end_flush``; return the incomplete batches to wait for."""
        with self._lock:
            self._flushing += 1
            self._wake_sender()
            return list(self._incomplete)

    def end_flush(self) -> None:
        with self._lock:
            self._flushing -= 1

    def has_incomplete(self) -> bool:
        with self._lock:
            return bool(self._incomplete)
