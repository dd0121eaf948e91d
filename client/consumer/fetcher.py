"""The fetcher: partition positions, the fetch loop, and the buffer ``poll()`` drains.

The fetch loop runs on the consumer's event loop and keeps one Fetch RPC in flight per leader broker, covering all
of that broker's fetchable partitions (few, large RPCs), long-polling with ``fetch.min.bytes`` /
``fetch.max.wait.ms``. It prefetches: a partition is fetched again as soon as at most one response of it is
buffered, from the end of that response, so the next data is on its way while the application processes the
current poll. Positions without a value are resolved with ListOffsets (``auto.offset.reset``, ``seek_to_*``).
A broker's ``throttle_time_ms`` (its quota, KIP-219) holds every Fetch and ListOffsets to it until it has passed.

``poll()`` may run on another thread (the sync facade decodes on the caller's thread), so the partition states are
guarded by one lock; a generation number per partition discards responses that a seek made stale.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from typing import Any

import grpc

from odradek.client.config import ConsumerConfig
from odradek.client.consumer.completed_fetch import CompletedFetch
from odradek.client.errors import (
    ClientTimeoutError,
    ErrorCode,
    NoOffsetForPartitionError,
    OdradekError,
    OffsetOutOfRangeError,
    error_for_code,
)
from odradek.client.metadata import Metadata, rpc_error
from odradek.client.offsets import EARLIEST, LATEST, list_offsets
from odradek.client.structs import ConsumerRecord, OffsetAndMetadata, TopicPartition
from odradek.client.throttle import NodeThrottles
from odradek.proto import broker_pb2 as pb

logger = logging.getLogger(__name__)

CONSUMER_REPLICA_ID = -1
CommittedLookup = Callable[[set[TopicPartition]], Awaitable[Mapping[TopicPartition, OffsetAndMetadata | None]]]
PREFETCH_DEPTH = 1  # fetch a partition again while this many of its responses are still buffered
# Past the long-poll wait, how often an unanswered fetch looks for a leader change (see _await_unless_deposed).
STALL_S = 0.5
# Errors after which the partition's leader must be looked up again before fetching it.
LEADER_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.OFFSET_NOT_AVAILABLE,
    }
)


class AssignedPartition:
    __slots__ = (
        "buffered",
        "error",
        "fetchable_end",
        "from_committed",
        "generation",
        "high_watermark",
        "in_flight",
        "paused",
        "position",
        "position_epoch",
        "queued",
        "reset",
        "retry_at",
        "tp",
    )

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.position: int | None = None  # the next offset poll() returns
        self.position_epoch: int | None = None  # leader epoch of the record before it, committed with it
        self.reset: int | None = None  # EARLIEST/LATEST requested by seek_to_*, else auto.offset.reset applies
        self.from_committed = False  # look up the group's committed offset before auto.offset.reset applies
        self.generation = 0  # bumped by every seek: answers to older requests are dropped
        self.paused = False
        self.in_flight = False  # a Fetch or ListOffsets for this partition is outstanding
        self.buffered: deque[CompletedFetch] = deque()
        self.queued = False  # in the fetcher's queue of partitions with buffered data
        self.error: OdradekError | None = None  # raised by the next poll()
        self.high_watermark = -1
        # Where the broker's readable records end (the high watermark, the last stable offset with
        # read_committed), as of its last answer; -1 until then. A fetch from there on waits for new records.
        self.fetchable_end = -1
        self.retry_at = 0.0

    def seek(self, position: int | None, reset: int | None = None, epoch: int | None = None) -> None:
        self.position = position
        self.position_epoch = epoch
        self.reset = reset
        self.from_committed = False
        self.generation += 1
        self.buffered.clear()
        self.error = None
        self.retry_at = 0.0


class Fetcher:
    def __init__(self, config: ConsumerConfig, metadata: Metadata, committed: CommittedLookup | None = None) -> None:
        """``committed`` looks up the group's committed offsets (a consumer with a group.id): where a partition
        given to ``assign(..., from_committed=True)`` starts, before auto.offset.reset applies."""
        self._metadata = metadata
        self._committed = committed
        # Committed offsets are looked up only once the application polls or asks a position, as Kafka's consumer
        # resolves positions: an assign() followed by seek() then sends no OffsetFetch.
        self._lookups_allowed = False
        self._lock = threading.Lock()
        self._states: dict[TopicPartition, AssignedPartition] = {}
        self._with_data: deque[AssignedPartition] = deque()  # partitions with buffered responses, in arrival order
        self._failed: deque[AssignedPartition] = deque()  # partitions with an error for poll() to raise
        # Fetches in flight, at most one per broker and lane. The lanes: partitions caught up with the broker's
        # readable end (True; that fetch long-polls for up to fetch.max.wait.ms) and partitions with records to
        # read (False; answered at once). Apart, a partition that caught up does not hold back the others' next
        # fetch for the whole long poll.
        self._lanes_in_flight: set[tuple[int, bool]] = set()
        # Per broker, when its quota throttle ends (KIP-219): no Fetch or ListOffsets goes to it before; the Fetch
        # throttle times feed metrics().
        self.throttles = NodeThrottles()
        self._default_reset = {"earliest": EARLIEST, "latest": LATEST}.get(config.auto_offset_reset)
        self._isolation = pb.READ_COMMITTED if config.isolation_level == "read_committed" else pb.READ_UNCOMMITTED
        self._check_crcs = config.check_crcs
        self._timeout = config.request_timeout_ms / 1000
        self._backoff = config.retry_backoff_ms / 1000
        self._max_wait_ms = config.fetch_max_wait_ms
        self._min_bytes = config.fetch_min_bytes
        self._max_bytes = config.fetch_max_bytes
        self._partition_max_bytes = config.max_partition_fetch_bytes
        self._client_id = config.client_id
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self.data_ready = asyncio.Event()  # set when poll() may find records or an error
        self.positions_changed = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        metadata.on_update(self._wake.set)
        self._task = self._loop.create_task(self._run())

    def wakeup(self) -> None:
        """From any thread: run a fetch pass."""
        self._loop.call_soon_threadsafe(self._wake.set)

    # ---- the application's side (any thread) ----

    def assign(self, partitions: set[TopicPartition], from_committed: bool = False) -> None:
        """Replace the assignment; partitions kept keep their position. New ones start at the group's committed
        offset with ``from_committed`` (and a committed lookup), else where auto.offset.reset says."""
        with self._lock:
            states = {}
            for tp in partitions:
                state = self._states.get(tp)
                if state is None:
                    state = AssignedPartition(tp)
                    state.from_committed = from_committed and self._committed is not None
                    self._lookups_allowed = self._lookups_allowed and not state.from_committed
                states[tp] = state
            self._states = states
        self._loop.call_soon_threadsafe(self._metadata.add_topics, {tp.topic for tp in partitions})
        self.wakeup()

    def assignment(self) -> set[TopicPartition]:
        return set(self._states)

    def _state(self, tp: TopicPartition) -> AssignedPartition:
        state = self._states.get(tp)
        if state is None:
            raise ValueError(f"{tp.topic}-{tp.partition} is not assigned to this consumer")
        return state

    def seek(self, tp: TopicPartition, offset: int | None, reset: int | None = None, epoch: int | None = None) -> None:
        """Move the position (None: look it up by ``reset``); ``epoch`` is the leader epoch of the record before
        ``offset`` where known (a committed offset's), carried by the next commit until a record is consumed."""
        if offset is not None and offset < 0:
            raise ValueError(f"seek offset must be >= 0, got {offset}")
        with self._lock:
            self._state(tp).seek(offset, reset, epoch)
        self.wakeup()

    def position(self, tp: TopicPartition) -> int | None:
        """The position, or None while it is being looked up; raises the partition's offset error if it has one."""
        with self._lock:
            state = self._state(tp)
            if state.position is None and isinstance(state.error, OffsetOutOfRangeError):
                raise state.error
            return state.position

    def allow_committed_lookups(self) -> None:
        """The application polls or asks a position: partitions waiting for their committed offset look it up."""
        if not self._lookups_allowed:
            self._lookups_allowed = True
            self.wakeup()

    def position_with_epoch(self, tp: TopicPartition) -> tuple[int | None, int | None]:
        """The position and the leader epoch of the record before it (None: unknown), read together for a
        commit; raises as ``position``."""
        with self._lock:
            state = self._state(tp)
            if state.position is None and isinstance(state.error, OffsetOutOfRangeError):
                raise state.error
            return state.position, state.position_epoch

    def set_paused(self, partitions: tuple[TopicPartition, ...], paused: bool) -> None:
        """Paused partitions are not fetched, and their buffered records stay buffered until resumed."""
        with self._lock:
            for tp in partitions:
                self._state(tp).paused = paused
        self.wakeup()

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, state in self._states.items() if state.paused}

    def high_watermark(self, tp: TopicPartition) -> int:
        return self._state(tp).high_watermark

    def drain(self, max_records: int) -> list[ConsumerRecord]:
        """Take up to ``max_records`` buffered records, oldest response first, advancing positions. With nothing to
        return, raise the first pending partition error instead."""
        out: list[ConsumerRecord] = []
        wake = False
        with self._lock:
            queue = self._with_data
            skipped = []
            while queue and len(out) < max_records:
                state = queue[0]
                if state.paused or not state.buffered or self._states.get(state.tp) is not state:
                    queue.popleft()
                    if state.paused and state.buffered:
                        skipped.append(state)  # kept for resume()
                    else:
                        state.queued = False
                    continue
                fetch = state.buffered[0]
                try:
                    out += fetch.take(max_records - len(out))
                except OdradekError as e:  # a corrupt batch: report it, and refetch from the position
                    self._fail(state, e)
                    state.buffered.clear()
                    queue.popleft()
                    state.queued = False
                    wake = True
                    continue
                state.position = fetch.position
                if fetch.position_epoch is not None:
                    state.position_epoch = fetch.position_epoch
                if not fetch.exhausted:
                    break  # out is full: the rest waits for the next poll
                state.buffered.popleft()
                wake = True  # room for the next prefetch
                queue.popleft()
                if state.buffered:
                    queue.append(state)  # its next response waits behind the other partitions'
                else:
                    state.queued = False
            queue.extend(skipped)
            if not out:
                self._raise_error()
        if wake:
            self.wakeup()
        return out

    def _raise_error(self) -> None:
        """Raise the first pending error. Offset errors stay until a seek (every poll raises them, as in Kafka);
        others are raised once, and the partition is fetched again."""
        while self._failed:
            state = self._failed[0]
            error = state.error
            if error is None or self._states.get(state.tp) is not state:
                self._failed.popleft()
                continue
            if not isinstance(error, OffsetOutOfRangeError):
                state.error = None
                self._failed.popleft()
            raise error

    def _fail(self, state: AssignedPartition, error: OdradekError) -> None:
        """Record an error for poll() to raise (under the lock); the partition is not fetched until then."""
        state.error = error
        state.retry_at = time.monotonic() + self._backoff
        if state not in self._failed:
            self._failed.append(state)

    # ---- the fetch loop (on the loop) ----

    async def close(self) -> None:
        self._task.cancel()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(self._task, *self._tasks, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                wake_at = self._step()
            except Exception:
                logger.exception("consumer fetch pass failed")
                wake_at = time.monotonic() + self._backoff
            delay = wake_at - time.monotonic()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(None if delay == float("inf") else delay):
                        await self._wake.wait()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _step(self) -> float:
        """Start the ListOffsets and Fetch requests that can go now; return when a backoff ends."""
        now = time.monotonic()
        wake_at = float("inf")
        resets: list[tuple[AssignedPartition, int, int]] = []
        lookups: list[tuple[AssignedPartition, int]] = []
        fetches: dict[tuple[int, bool], list[tuple[AssignedPartition, int, int]]] = {}
        unknown_leader = failed = False
        leader = self._metadata.leader
        with self._lock:
            for state in self._states.values():
                if state.in_flight or state.paused or state.error is not None:
                    continue
                if state.retry_at > now:
                    wake_at = min(wake_at, state.retry_at)
                    continue
                if state.position is None and state.from_committed:
                    if not self._lookups_allowed:
                        continue
                    state.in_flight = True
                    lookups.append((state, state.generation))
                    continue
                if state.position is None:
                    strategy = state.reset if state.reset is not None else self._default_reset
                    if strategy is None:
                        tp = state.tp
                        message = f"no position for {tp.topic}-{tp.partition} and auto.offset.reset is none"
                        self._fail(state, NoOffsetForPartitionError(message))
                        failed = True
                        continue
                    state.in_flight = True
                    resets.append((state, state.generation, strategy))
                    continue
                if len(state.buffered) > PREFETCH_DEPTH:
                    continue
                node = leader(state.tp.topic, state.tp.partition)
                if node < 0:
                    unknown_leader = True
                    continue
                offset = state.buffered[-1].fetch_end if state.buffered else state.position
                lane = node, 0 <= state.fetchable_end <= offset
                if lane in self._lanes_in_flight:
                    continue
                throttled_until = self.throttles.until(node)
                if throttled_until > now:
                    wake_at = min(wake_at, throttled_until)
                    continue
                fetches.setdefault(lane, []).append((state, state.generation, offset))
            for lane, partitions in fetches.items():
                self._lanes_in_flight.add(lane)
                for state, _, _ in partitions:
                    state.in_flight = True
        if unknown_leader:
            self._metadata.request_refresh()
        if failed:
            self.data_ready.set()
            self.positions_changed.set()
        if resets:
            self._spawn(self._reset(resets))
        if lookups:
            self._spawn(self._start_from_committed(lookups))
        for lane, partitions in fetches.items():
            self._spawn(self._fetch(lane, partitions))
        return wake_at

    async def _reset(self, resets: list[tuple[AssignedPartition, int, int]]) -> None:
        """Resolve positions with ListOffsets: auto.offset.reset, or a seek to the beginning or end."""
        timestamps = {state.tp: strategy for state, _, strategy in resets}
        try:
            offsets = await list_offsets(
                self._metadata,
                timestamps,
                timeout=self._timeout,
                backoff=self._backoff,
                isolation_level=self._isolation,
                throttles=self.throttles,
            )
        except OdradekError as e:
            logger.debug("offset reset of %s failed: %s", sorted(timestamps), e)
            offsets = {}
            error: OdradekError | None = e
        else:
            error = None
        with self._lock:
            for state, generation, _ in resets:
                state.in_flight = False
                if state.generation != generation:
                    continue
                offset = offsets.get(state.tp)
                if offset is not None and offset >= 0:
                    state.position = offset
                    state.reset = None
                elif error is not None and not error.retriable:
                    self._fail(state, error)
                else:
                    state.retry_at = time.monotonic() + self._backoff
        self.positions_changed.set()
        self.data_ready.set()
        self._wake.set()

    async def _start_from_committed(self, lookups: list[tuple[AssignedPartition, int]]) -> None:
        """Start partitions at the group's committed offsets; those without one go on to auto.offset.reset."""
        assert self._committed is not None
        committed: Mapping[TopicPartition, OffsetAndMetadata | None] = {}
        error: OdradekError | None = None
        try:
            committed = await self._committed({state.tp for state, _ in lookups})
        except OdradekError as e:
            logger.debug("committed offsets of %s not fetched: %s", sorted(s.tp for s, _ in lookups), e)
            error = e
        with self._lock:
            for state, generation in lookups:
                state.in_flight = False
                if state.generation != generation:
                    continue
                if error is not None:
                    if error.retriable:
                        state.retry_at = time.monotonic() + self._backoff
                    else:
                        self._fail(state, error)
                    continue
                state.from_committed = False
                om = committed.get(state.tp)
                if om is not None:
                    state.position, state.position_epoch = om.offset, om.leader_epoch
        self.positions_changed.set()
        self.wakeup()

    def _request(self, partitions: list[tuple[AssignedPartition, int, int]]) -> pb.FetchRequest:
        topics: dict[str, list[pb.FetchPartition]] = {}
        leader_epoch = self._metadata.leader_epoch
        for state, _, offset in partitions:
            topic, partition = state.tp
            topics.setdefault(topic, []).append(
                pb.FetchPartition(
                    partition=partition,
                    current_leader_epoch=leader_epoch(topic, partition),
                    fetch_offset=offset,
                    last_fetched_epoch=-1,
                    log_start_offset=-1,
                    partition_max_bytes=self._partition_max_bytes,
                )
            )
        return pb.FetchRequest(
            replica_id=CONSUMER_REPLICA_ID,
            max_wait_ms=self._max_wait_ms,
            min_bytes=self._min_bytes,
            max_bytes=self._max_bytes,
            isolation_level=self._isolation,
            client_id=self._client_id,
            topics=[pb.FetchTopic(name=name, partitions=parts) for name, parts in topics.items()],
        )

    async def _fetch(self, lane: tuple[int, bool], partitions: list[tuple[AssignedPartition, int, int]]) -> None:
        node = lane[0]
        response = None
        try:
            stub = self._metadata.stub(node)
            if stub is None:
                self._metadata.request_refresh()
            else:
                call = stub.Fetch(self._request(partitions), timeout=self._timeout + self._max_wait_ms / 1000)
                response = await self._await_unless_deposed(call, node, partitions)
        except grpc.aio.AioRpcError as e:
            logger.debug("fetch from broker %d failed: %s", node, rpc_error(self._metadata.brokers.get(node, ""), e))
            self._metadata.request_refresh()
        except Exception:
            logger.exception("fetch from broker %d failed", node)
        finally:
            with self._lock:
                self._lanes_in_flight.discard(lane)
                for state, _, _ in partitions:
                    state.in_flight = False
                if response is None:
                    retry_at = time.monotonic() + self._backoff
                    for state, _, _ in partitions:
                        state.retry_at = retry_at
                else:
                    self._handle(node, response, partitions)
            self._wake.set()
            self.data_ready.set()

    async def _await_unless_deposed(
        self,
        call: grpc.aio.UnaryUnaryCall[pb.FetchRequest, pb.FetchResponse],
        node: int,
        partitions: list[tuple[AssignedPartition, int, int]],
    ) -> pb.FetchResponse | None:
        """The fetch's answer; but past the long-poll wait plus STALL_S, refresh metadata every STALL_S, and give
        up (None) once every partition has another leader: a paused old leader would hold them for a whole
        request timeout."""
        task = asyncio.ensure_future(call)
        limit = self._max_wait_ms / 1000 + STALL_S
        while True:
            try:
                async with asyncio.timeout(limit):
                    return await asyncio.shield(task)
            except TimeoutError:
                if all(self._metadata.leader(s.tp.topic, s.tp.partition) != node for s, _, _ in partitions):
                    task.cancel()
                    return None
                self._metadata.request_refresh()
                limit = STALL_S

    def _handle(
        self, node: int, response: pb.FetchResponse, partitions: list[tuple[AssignedPartition, int, int]]
    ) -> None:
        """Apply a Fetch response (under the lock)."""
        now = time.monotonic()
        self.throttles.record(node, response.throttle_time_ms, now)
        asked = {state.tp: (state, generation, offset) for state, generation, offset in partitions}
        if response.error != ErrorCode.NONE:
            for state, _, _ in partitions:
                state.retry_at = now + self._backoff
            return
        for t in response.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition)
                entry = asked.get(tp)
                if entry is None:
                    continue
                state, generation, offset = entry
                if self._states.get(tp) is not state or state.generation != generation:
                    continue  # unassigned or sought since the request went out
                if p.error == ErrorCode.NONE:
                    state.high_watermark = p.high_watermark
                    state.fetchable_end = (
                        p.last_stable_offset if self._isolation == pb.READ_COMMITTED else p.high_watermark
                    )
                    records = p.records  # read once: protobuf copies a bytes field on every access
                    if records:
                        self._buffer(state, records, p.aborted_transactions, offset)
                elif p.error == ErrorCode.OFFSET_OUT_OF_RANGE:
                    self._out_of_range(state, offset)
                elif p.error in LEADER_ERRORS:
                    self._reroute(tp, p)
                    state.retry_at = now + self._backoff if self._metadata.leader(*tp) == node else 0.0
                else:
                    self._fail(state, error_for_code(p.error, f"fetch of {t.name}-{p.partition} at offset {offset}"))

    def _reroute(self, tp: TopicPartition, p: pb.FetchPartitionResponse) -> None:
        if p.HasField("current_leader"):
            self._metadata.apply_leader_hint(tp.topic, tp.partition, p.current_leader)
        else:
            self._metadata.request_refresh()

    def _buffer(
        self,
        state: AssignedPartition,
        records: bytes,
        aborted: Iterable[pb.AbortedTransaction],
        offset: int,
    ) -> None:
        try:
            fetch = CompletedFetch(
                state.tp,
                records,
                offset,
                state.generation,
                check_crcs=self._check_crcs,
                read_committed=self._isolation == pb.READ_COMMITTED,
                aborted=[(a.producer_id, a.first_offset) for a in aborted],
            )
        except OdradekError as e:
            self._fail(state, e)
            return
        state.buffered.append(fetch)
        if not state.queued:
            state.queued = True
            self._with_data.append(state)

    def _out_of_range(self, state: AssignedPartition, offset: int) -> None:
        strategy = state.reset if state.reset is not None else self._default_reset
        if strategy is None:
            state.buffered.clear()
            tp = state.tp
            self._fail(state, OffsetOutOfRangeError(f"offset {offset} is out of range for {tp.topic}-{tp.partition}"))
            return
        logger.info("offset %d out of range for %s, resetting (auto.offset.reset)", offset, state.tp)
        state.seek(None, strategy)


async def wait_for_position(fetcher: Fetcher, tp: TopicPartition, timeout: float) -> int:
    """The partition's position, waiting for a pending offset lookup (ClientTimeoutError after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while (position := fetcher.position(tp)) is None:
        fetcher.positions_changed.clear()
        fetcher.wakeup()
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ClientTimeoutError(f"no position for {tp.topic}-{tp.partition} within {timeout * 1000:.0f} ms")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(remaining):
                await fetcher.positions_changed.wait()
    return position
