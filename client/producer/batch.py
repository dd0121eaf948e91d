"""A producer batch and the per-record futures that read their result from it.

Records stay Python objects while a batch is open and are encoded together when it is drained: ``encode_batch``
over a batch's value list is several times faster than encoding record by record. Delivery is decided per batch
(one base offset or one error for all its records), so a record's future is two slots, batch and index, and a
batch completes all of its records at once; RecordMetadata is only built when someone asks for it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections import deque
from collections.abc import Callable, Generator
from typing import Any

from odradek.client.errors import ClientTimeoutError
from odradek.client.record.builder import encode_batch
from odradek.client.record.header import HEADER_SIZE
from odradek.client.structs import RecordMetadata

logger = logging.getLogger(__name__)

Headers = list[tuple[str, bytes | None]]

# Serializes a batch's completion with blocking waits from other threads. Taken once per batch on completion and
# never on the append path, so one lock for all batches is enough.
_LOCK = threading.Lock()


class ProducerBatch:
    """One partition's records, appended under the accumulator's lock until the batch is closed."""

    __slots__ = (
        "_event",
        "_waiters",
        "attempts",
        "base_offset",
        "base_sequence",
        "callbacks",
        "closed",
        "created",
        "done",
        "encoded",
        "error",
        "headers",
        "keys",
        "last_error",
        "log_append_time",
        "partition",
        "producer_epoch",
        "producer_id",
        "reserved",
        "retry_at",
        "size",
        "timestamps",
        "topic",
        "values",
    )

    def __init__(self, topic: str, partition: int, created: float, reserved: int) -> None:
        self.topic = topic
        self.partition = partition
        self.values: list[bytes | None] = []
        self.keys: list[bytes | None] = []
        self.timestamps: list[int] = []
        self.headers: list[Headers] | None = None  # created at the first record with headers
        self.size = HEADER_SIZE  # estimated encoded size
        self.reserved = reserved  # bytes of buffer.memory this batch holds until it completes
        self.created = created
        self.closed = False  # no more appends: full, lingered out, or drained
        self.attempts = 0
        self.retry_at = 0.0
        self.last_error: BaseException | None = None  # the retriable error of the last attempt, for expiry
        self.encoded: bytes | None = None
        # Set once, by the idempotent producer when the batch is first drained (idempotence.py).
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        self.done = False
        self._event: threading.Event | None = None
        self._waiters: list[asyncio.Future[None]] | None = None
        # Registered from any thread without a lock: deque appends and poplefts are atomic, so each callback runs
        # exactly once, whether completion or a late registration drains it.
        self.callbacks: deque[tuple[RecordFuture, Callable[[RecordFuture], Any]]] = deque()

    @property
    def record_count(self) -> int:
        return len(self.values)

    def encode(self, compression: str, transactional: bool = False) -> bytes:
        """The v2 batch, encoded once (a retry resends the same bytes). One timestamp for the batch and no keys
        or headers when that is what the records have: ``encode_batch``'s fastest path. ``transactional`` sets
        the batch's transactional flag (a transactional producer's records, hidden from read_committed readers
        until the transaction commits)."""
        if self.encoded is None:
            values, keys, timestamps = self.values, self.keys, self.timestamps
            first = timestamps[0]
            self.encoded = encode_batch(
                values,
                None if keys.count(None) == len(keys) else keys,
                first if timestamps.count(first) == len(timestamps) else timestamps,
                self.headers,
                compression=compression,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                base_sequence=self.base_sequence,
                is_transactional=transactional,
            )
        return self.encoded

    def metadata(self, index: int) -> RecordMetadata:
        offset = self.base_offset + index if self.base_offset >= 0 else -1
        timestamp = self.log_append_time if self.log_append_time >= 0 else self.timestamps[index]
        return RecordMetadata(self.topic, self.partition, offset, timestamp)

    # ---- completion (on the sender's loop) ----

    def complete(self, base_offset: int, log_append_time: int) -> None:
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self._finish()

    def fail(self, error: BaseException) -> None:
        self.error = error
        self._finish()

    def _finish(self) -> None:
        self.done = True
        with _LOCK:
            event = self._event
        if event is not None:
            event.set()
        for waiter in self._waiters or ():
            if not waiter.done():
                waiter.set_result(None)
        self.run_callbacks()

    def run_callbacks(self) -> None:
        """Run the registered callbacks (after ``done`` is set), each once."""
        callbacks = self.callbacks
        while True:
            try:
                future, callback = callbacks.popleft()
            except IndexError:
                return
            try:
                callback(future)
            except Exception:
                logger.exception("producer callback %r raised", callback)

    # ---- waiting ----

    def wait_blocking(self, timeout: float | None) -> None:
        """Block the calling thread (never the sender's loop) until the batch completes."""
        with _LOCK:
            if self.done:
                return
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        if not event.wait(timeout):
            raise ClientTimeoutError(f"record to {self.topic}-{self.partition} not delivered within {timeout} s")

    async def wait(self) -> None:
        """Wait on the sender's loop (the only loop that completes batches)."""
        if not self.done:
            waiter = asyncio.get_running_loop().create_future()
            if self._waiters is None:
                self._waiters = []
            self._waiters.append(waiter)
            await waiter


class RecordFuture:
    """The delivery of one record: ``result(timeout)`` blocks, ``await`` waits on the loop, callbacks run on the
    client loop thread (like Kafka's, they should be quick), or at once on the caller's if the record is already
    delivered. One is made per record, by the accumulator setting the two slots: no ``__init__`` on the hot path."""

    __slots__ = ("_batch", "_index")
    _batch: ProducerBatch
    _index: int

    def done(self) -> bool:
        return self._batch.done

    def result(self, timeout: float | None = None) -> RecordMetadata:
        batch = self._batch
        if not batch.done:
            batch.wait_blocking(timeout)
        if batch.error is not None:
            raise batch.error
        return batch.metadata(self._index)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        batch = self._batch
        if not batch.done:
            batch.wait_blocking(timeout)
        return batch.error

    def add_done_callback(self, callback: Callable[[RecordFuture], Any]) -> None:
        """Call ``callback(future)`` once the record is delivered or failed (now, if it already is)."""
        batch = self._batch
        batch.callbacks.append((self, callback))
        if batch.done:  # completion may have drained the callbacks before this one arrived
            batch.run_callbacks()

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        batch = self._batch
        if not batch.done:
            yield from batch.wait().__await__()
        return self.result()


class DeferredRecordFuture(concurrent.futures.Future[RecordMetadata]):
    """The future of a record that could not be appended at once (its topic's metadata was unknown, or the buffer
    was full) by a caller that must not block: the producer appends it later, in order, and chains the result."""

    def follow(self, future: RecordFuture) -> None:
        future.add_done_callback(self._copy)

    def _copy(self, future: RecordFuture) -> None:
        error = future.exception()
        if error is None:
            self.set_result(future.result())
        else:
            self.set_exception(error)

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        return (yield from asyncio.wrap_future(self).__await__())
