"""The consumer: ``AsyncConsumer`` and the synchronous ``Consumer`` facade.

A consumer either ``assign``s partitions by hand or ``subscribe``s to topics as a member of the group named by
``group.id`` (coordinator.py), which shares the topics' partitions among its members. With a group.id, positions
can be committed to the cluster (``commit``, ``enable.auto.commit``), and a newly assigned partition starts at its
committed offset (``auto.offset.reset`` applies only where none is committed). Rebalance listener callbacks run
inside ``poll()`` (and ``unsubscribe``/``close``) on the caller's thread or task, as in Kafka. Like Kafka's, a
consumer is used from one thread at a time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import re
import time
from collections.abc import Awaitable, Iterable, Mapping
from typing import Any, Literal, overload

from odradek.client.authentication import sasl_credentials
from odradek.client.background import BackgroundLoop
from odradek.client.config import ConsumerConfig, with_client_id
from odradek.client.connection import DEFAULT_MAX_MESSAGE_BYTES, ChannelPool
from odradek.client.consumer.coordinator import ConsumerCoordinator
from odradek.client.consumer.fetcher import Fetcher, wait_for_position
from odradek.client.consumer.membership import validate_pattern
from odradek.client.consumer.rebalance import Callback, RebalanceStep
from odradek.client.errors import ConfigError, InvalidRequestError, OdradekError
from odradek.client.metadata import Metadata
from odradek.client.offsets import EARLIEST, LATEST, list_offsets, list_offsets_and_timestamps
from odradek.client.serialization import deserialized, deserializers
from odradek.client.structs import (
    ConsumerRecord,
    GroupMetadata,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
)
from odradek.client.throttle import throttle_metrics
from odradek.proto import broker_pb2 as pb

logger = logging.getLogger(__name__)

PartitionLike = TopicPartition | tuple[str, int]
# A mapping's key type is invariant, so a dict keyed by TopicPartition is no Mapping[PartitionLike, int].
PartitionTimestamps = Mapping[TopicPartition, int] | Mapping[tuple[str, int], int]
Offsets = Mapping[TopicPartition, "int | OffsetAndMetadata"]
Topics = Iterable[str] | re.Pattern[str] | str
MAX_REBALANCE_STEPS = 8  # steps one poll() may run (prepare, complete, a cooperative follow-up, ...)


class ConsumerRebalanceListener:
    """Override the callbacks you need. They run inside ``poll()`` (and ``unsubscribe``/``close``) on the caller's
    thread, or task for ``AsyncConsumer`` (where they may also be ``async def``).

    - ``on_partitions_revoked``: the consumer gives these up in an orderly rebalance; positions are still valid,
      so this is the place to commit them. Under the eager protocol it precedes every rebalance (possibly empty).
    - ``on_partitions_assigned``: the consumer now owns these (newly added ones; under eager, everything). Called
      after every completed rebalance, possibly empty.
    - ``on_partitions_lost``: the consumer learned it was no longer in the group (session expired, poll timeout,
      fenced): someone else may already own these, so do not commit them. By default calls
      ``on_partitions_revoked``, as Kafka does.
    """

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> Awaitable[None] | None:
        return None

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> Awaitable[None] | None:
        return None

    def on_partitions_lost(self, lost: set[TopicPartition]) -> Awaitable[None] | None:
        return self.on_partitions_revoked(lost)


def _offset(value: int | OffsetAndMetadata) -> OffsetAndMetadata:
    if isinstance(value, OffsetAndMetadata):
        om = value
    elif isinstance(value, int) and not isinstance(value, bool):
        om = OffsetAndMetadata(value)
    else:
        raise TypeError(f"a commit offset is an int or OffsetAndMetadata, not {value!r}")
    if not isinstance(om.offset, int) or om.offset < 0 or not isinstance(om.metadata, str):
        raise ValueError(f"a committed offset must be >= 0 with str metadata, got {value!r}")
    return om


def _pattern_or_topics(topics: Topics) -> list[str] | re.Pattern[str]:
    if isinstance(topics, str | re.Pattern):
        return validate_pattern(topics)
    out = list(topics)
    if not all(isinstance(t, str) and t for t in out):
        raise TypeError(f"subscribe takes topic names (non-empty str), a str pattern or a re.Pattern, not {topics!r}")
    return out


def _tp(partition: PartitionLike) -> TopicPartition:
    topic, number = partition
    if not isinstance(topic, str) or not isinstance(number, int) or number < 0:
        raise TypeError(f"a partition is (topic: str, partition: int >= 0), not {partition!r}")
    return TopicPartition(topic, number)


class AsyncConsumer:
    """Create inside a running event loop. ``poll`` returns up to ``max.poll.records`` records, fetching ahead."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        cfg = with_client_id(config, ConsumerConfig.from_mapping(config))
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError("create AsyncConsumer inside a running event loop (or use Consumer)") from None
        self._config = cfg
        self._max_poll_records = cfg.max_poll_records
        self._timeout = cfg.request_timeout_ms / 1000
        self._isolation = pb.READ_COMMITTED if cfg.isolation_level == "read_committed" else pb.READ_UNCOMMITTED
        self._pool = ChannelPool(
            max(DEFAULT_MAX_MESSAGE_BYTES, cfg.fetch_max_bytes + 1_048_576),
            cfg.client_id,
            security=cfg.tls_files(),
            sasl=sasl_credentials(cfg),
        )
        self._metadata = Metadata(cfg, self._pool, allow_auto_topic_creation=cfg.allow_auto_create_topics)
        self._coordinator = ConsumerCoordinator(cfg, self._metadata, self._pool) if cfg.group_id else None
        self._fetcher = Fetcher(cfg, self._metadata, self._coordinator.committed if self._coordinator else None)
        self._listener: ConsumerRebalanceListener | None = None
        self._auto_commit = cfg.enable_auto_commit
        self._auto_commit_interval = cfg.auto_commit_interval_ms / 1000
        self._next_auto_commit = time.monotonic() + self._auto_commit_interval
        self._serde = deserializers(cfg)
        self._closed = False

    async def __aenter__(self) -> AsyncConsumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def assign(self, partitions: Iterable[PartitionLike]) -> None:
        """Consume exactly these partitions (replacing the previous assignment; kept ones keep their position).
        With a group.id a new partition starts at the group's committed offset, as a subscribed one does, and
        auto.offset.reset applies where there is none. Not while subscribed (InvalidRequestError): the group
        decides the assignment then."""
        if self._coordinator is not None and self._coordinator.subscribed:
            raise InvalidRequestError("assign() while subscribed: call unsubscribe() first")
        self._fetcher.assign({_tp(p) for p in partitions}, from_committed=True)

    # ---- consumer groups ----

    def _group(self) -> ConsumerCoordinator:
        if self._coordinator is None:
            raise ConfigError("consumer groups and commits need group.id in the consumer config")
        return self._coordinator

    def subscribe(self, topics: Topics, listener: ConsumerRebalanceListener | None = None) -> None:
        """Join the group for these topics (a list of names) or every topic matching a pattern (a ``re.Pattern``
        or a ``str``, matched against whole topic names; internal topics never match). The join happens in the
        next ``poll()``. A new call replaces the subscription and listener. Needs group.id; not after ``assign``
        (InvalidRequestError) unless ``unsubscribe()`` (or ``assign([])``) came first."""
        coordinator = self._group()
        parsed = _pattern_or_topics(topics)
        if self._fetcher.assignment() and not coordinator.subscribed:
            raise InvalidRequestError("subscribe() after assign(): call unsubscribe() first")
        if not isinstance(parsed, re.Pattern) and not parsed:
            raise InvalidRequestError("subscribe() with no topics: call unsubscribe() instead")
        self._listener = listener
        coordinator.subscribe(parsed)

    def subscription(self) -> set[str]:
        """The topics currently subscribed (a pattern's matches as of the latest metadata)."""
        return self._coordinator.subscription() if self._coordinator is not None else set()

    async def unsubscribe(self) -> None:
        """Give up every partition (listener: revoked, or lost if the generation is gone) and leave the group (a
        static member keeps its place until its session times out). Also clears a manual assignment."""
        coordinator = self._coordinator
        if coordinator is not None and coordinator.subscribed:
            await self._auto_commit_now("before unsubscribe")
            error = await self._invoke(coordinator.unsubscribe_step(), before=True)
            await coordinator.unsubscribe()
            self._listener = None
            if error is not None:
                self._fetcher.assign(set())
                raise error
        self._fetcher.assign(set())

    def group_metadata(self) -> GroupMetadata:
        """The group id, generation, member id and instance id (generation -1 while not in a generation)."""
        return self._group().group_metadata()

    @overload
    async def commit(self, offsets: Offsets | None = None, asynchronous: Literal[False] = False) -> None: ...

    @overload
    async def commit(self, offsets: Offsets | None = None, *, asynchronous: Literal[True]) -> asyncio.Task[None]: ...

    async def commit(self, offsets: Offsets | None = None, asynchronous: bool = False) -> asyncio.Task[None] | None:
        """Commit ``offsets`` (None: the current position of every owned partition) to the group. Waits for the
        acknowledgement, or with ``asynchronous=True`` returns at once an ``asyncio.Task`` that completes with it
        (the offsets are taken when called). A group member whose generation is gone gets CommitFailedError; a
        consumer using ``assign`` commits without a generation (Kafka's simple commit)."""
        resolved = self.commit_offsets(offsets)
        coordinator = self._group()
        if asynchronous:
            return asyncio.get_running_loop().create_task(coordinator.commit(resolved))
        await coordinator.commit(resolved)
        return None

    def commit_offsets(self, offsets: Offsets | None) -> dict[TopicPartition, OffsetAndMetadata]:
        """The offsets a commit sends: the given ones, or the known positions of the assigned partitions."""
        self._group()
        if offsets is not None:
            return {_tp(tp): _offset(v) for tp, v in offsets.items()}
        out: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp in self._fetcher.assignment():
            try:
                position, epoch = self._fetcher.position_with_epoch(tp)
            except (OdradekError, ValueError):
                continue
            if position is not None:
                out[tp] = OffsetAndMetadata(position, "", epoch)
        return out

    async def committed(self, partitions: Iterable[PartitionLike]) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed position of each partition (None where nothing is committed)."""
        return await self._group().committed(_tp(p) for p in partitions)

    async def _group_poll(self, timeout: float) -> None:
        coordinator = self._coordinator
        if coordinator is None:
            return
        coordinator.polled()
        deadline = time.monotonic() + timeout
        for _ in range(MAX_REBALANCE_STEPS):
            step = await coordinator.next_step(deadline - time.monotonic())
            if step is None:
                break
            await self._prepare_step(step)
            error = await self._invoke(step, before=True)
            await self._apply_step(step)
            after = await self._invoke(step, before=False)
            error = error or after
            if error is not None:
                raise error
        if coordinator.subscribed and coordinator.owned - self._fetcher.assignment():
            await self._reconcile()
        self._maybe_auto_commit()

    async def _prepare_step(self, step: RebalanceStep) -> None:
        """Auto-commit what is about to be revoked (not lost), before the listener hears of it, as Kafka."""
        if step.revoked:
            await self._auto_commit_now("before revoking partitions", set(step.revoked))

    async def _auto_commit_now(self, why: str, partitions: set[TopicPartition] | None = None) -> None:
        coordinator = self._coordinator
        if coordinator is None or not self._auto_commit or coordinator.commit_refusal() is not None:
            return
        offsets = self.commit_offsets(None)
        if partitions is not None:
            offsets = {tp: om for tp, om in offsets.items() if tp in partitions}
        try:
            await coordinator.commit(offsets)
        except OdradekError as e:
            logger.warning("group %s: auto-commit %s failed: %s", coordinator.group_id, why, e)

    def _maybe_auto_commit(self) -> None:
        """Every auto.commit.interval.ms, from poll(): commit the positions in the background."""
        if not self._auto_commit or time.monotonic() < self._next_auto_commit:
            return
        self._next_auto_commit = time.monotonic() + self._auto_commit_interval
        coordinator = self._coordinator
        if coordinator is None or coordinator.commit_refusal() is not None:
            return
        task = asyncio.get_running_loop().create_task(coordinator.commit(self.commit_offsets(None)))
        task.add_done_callback(_log_auto_commit)

    async def _apply_step(self, step: RebalanceStep) -> None:
        """After the revoked/lost callbacks: drop what the member gave up, then add what it gained, each starting
        at its committed offset."""
        coordinator = self._group()
        coordinator.apply(step)
        self._fetcher.assign(self._fetcher.assignment() & coordinator.owned)
        await self._reconcile()

    async def _reconcile(self) -> None:
        """Owned partitions not yet fetched: look up their committed offsets, then start them there (before any
        fetch can apply auto.offset.reset). A failed lookup is retried at the next poll."""
        coordinator = self._group()
        missing = coordinator.owned - self._fetcher.assignment()
        if not missing:
            return
        try:
            committed = await coordinator.committed(missing)
        except OdradekError as e:
            logger.warning("group %s: committed offsets of %s not fetched: %s", coordinator.group_id, missing, e)
            return
        missing &= coordinator.owned  # the group may have moved on while the lookup ran
        self._fetcher.assign(self._fetcher.assignment() | missing)
        for tp in missing:
            om = committed.get(tp)
            if om is not None:
                self._fetcher.seek(tp, om.offset, epoch=om.leader_epoch)

    async def _invoke(self, step: RebalanceStep, before: bool) -> BaseException | None:
        """Run the listener's callbacks of one half of the step; return the first exception (raised by poll after
        the step is complete, so the member's state stays consistent)."""
        error: BaseException | None = None
        for name, partitions in _half(step, before):
            if self._listener is None:
                continue
            try:
                result = getattr(self._listener, name)(set(partitions))
                if inspect.isawaitable(result):
                    await result
            except Exception as e:
                logger.error("rebalance listener %s failed: %s", name, e)
                error = error or e
        return error

    def assignment(self) -> set[TopicPartition]:
        return self._fetcher.assignment()

    def seek(self, partition: PartitionLike, offset: int) -> None:
        """Make the next poll start at ``offset`` (reset by auto.offset.reset if it is out of range)."""
        self._fetcher.seek(_tp(partition), offset)

    def seek_to_beginning(self, *partitions: PartitionLike) -> None:
        """Move to the log start of these partitions (all assigned ones if none given), looked up lazily."""
        for tp in self._targets(partitions):
            self._fetcher.seek(tp, None, EARLIEST)

    def seek_to_end(self, *partitions: PartitionLike) -> None:
        """Move to the end (high watermark) of these partitions (all assigned ones if none given), lazily."""
        for tp in self._targets(partitions):
            self._fetcher.seek(tp, None, LATEST)

    def _targets(self, partitions: tuple[PartitionLike, ...]) -> list[TopicPartition]:
        return [_tp(p) for p in partitions] if partitions else sorted(self.assignment())

    async def position(self, partition: PartitionLike) -> int:
        """The offset of the next record poll() returns for the partition, looking it up if needed."""
        self._fetcher.allow_committed_lookups()
        return await wait_for_position(self._fetcher, _tp(partition), self._timeout)

    def pause(self, *partitions: PartitionLike) -> None:
        self._fetcher.set_paused(tuple(_tp(p) for p in partitions), True)

    def resume(self, *partitions: PartitionLike) -> None:
        self._fetcher.set_paused(tuple(_tp(p) for p in partitions), False)

    def paused(self) -> set[TopicPartition]:
        return self._fetcher.paused()

    def highwater(self, partition: PartitionLike) -> int:
        """The partition's high watermark as of the last fetch (-1 before one)."""
        return self._fetcher.high_watermark(_tp(partition))

    async def poll(self, timeout_ms: int = 0) -> list[ConsumerRecord]:
        """Records from the assigned, unpaused partitions, waiting up to ``timeout_ms`` for some. Raises a
        partition's error (e.g. OffsetOutOfRangeError with auto.offset.reset=none) when there are no records.
        When subscribed, it first takes part in the group: joins, runs the rebalance listener, auto-commits."""
        fetcher = self._fetcher
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        await self._group_poll(timeout_ms / 1000)
        fetcher.allow_committed_lookups()
        while True:
            fetcher.data_ready.clear()
            records = fetcher.drain(self._max_poll_records)
            if records:
                return self._deserialized(records)
            remaining = deadline - loop.time()
            if remaining <= 0:
                await asyncio.sleep(0)  # poll(0) in a loop must still let the fetcher run
                return records
            try:
                async with asyncio.timeout(remaining):
                    await fetcher.data_ready.wait()
            except TimeoutError:
                return self._deserialized(fetcher.drain(self._max_poll_records))

    def _deserialized(self, records: list[ConsumerRecord]) -> list[ConsumerRecord]:
        """The records through key.deserializer and value.deserializer. At the first that fails, as Kafka's
        consumer: each partition's position goes back to its first record not returned, and the failure is raised
        now if no record precedes it, else by the next poll (which meets the record again)."""
        if self._serde is None or not records:
            return records
        out, failure = deserialized(records, self._serde)
        if failure is None:
            return out
        first: dict[TopicPartition, int] = {}
        for r in records[len(out) :]:
            first.setdefault(TopicPartition(r.topic, r.partition), r.offset)
        for tp, offset in first.items():
            self._fetcher.seek(tp, offset)
        if out:
            return out
        raise failure

    async def partitions_for(self, topic: str) -> list[int]:
        """The topic's partitions (UnknownTopicOrPartitionError if it does not appear within request.timeout.ms)."""
        return list(range(await self._metadata.wait_for_topic(topic, self._timeout)))

    async def beginning_offsets(self, partitions: Iterable[PartitionLike]) -> dict[TopicPartition, int]:
        return await self._list_offsets(partitions, EARLIEST)

    async def end_offsets(self, partitions: Iterable[PartitionLike]) -> dict[TopicPartition, int]:
        """The high watermark (last stable offset with read_committed) of each partition."""
        return await self._list_offsets(partitions, LATEST)

    async def offsets_for_times(
        self, timestamps: PartitionTimestamps
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the earliest offset whose timestamp is at or after the given one (ms since the
        epoch), or None if no record is that recent; named as in kafka-python and confluent-kafka."""
        targets: dict[TopicPartition, int] = {}
        for partition, timestamp in timestamps.items():
            if not isinstance(timestamp, int) or isinstance(timestamp, bool) or timestamp < 0:
                raise ValueError(f"a timestamp is an int of ms since the epoch (>= 0), not {timestamp!r}")
            targets[_tp(partition)] = timestamp
        found = await list_offsets_and_timestamps(
            self._metadata,
            targets,
            timeout=self._timeout,
            backoff=self._config.retry_backoff_ms / 1000,
            isolation_level=self._isolation,
            throttles=self._fetcher.throttles,
        )
        return {
            tp: OffsetAndTimestamp(offset, timestamp) if offset >= 0 else None
            for tp, (offset, timestamp) in found.items()
        }

    async def _list_offsets(self, partitions: Iterable[PartitionLike], timestamp: int) -> dict[TopicPartition, int]:
        targets = dict.fromkeys((_tp(p) for p in partitions), timestamp)
        return await list_offsets(
            self._metadata,
            targets,
            timeout=self._timeout,
            backoff=self._config.retry_backoff_ms / 1000,
            isolation_level=self._isolation,
            throttles=self._fetcher.throttles,
        )

    def metrics(self) -> dict[str, float]:
        """The consumer's metrics by Kafka's names: ``fetch-throttle-time-avg`` and ``-max``, the throttle time
        (ms) brokers reported on Fetch responses over the last 30 to 60 s (NaN when none came; see
        odradek.client.metrics)."""
        return throttle_metrics("fetch", self._fetcher.throttles, time.monotonic())

    async def close(self, *, leave_group: bool | None = None) -> None:
        """Commit the positions (enable.auto.commit), leave the group, and release everything.

        The listener hears the revocation of every owned partition first, whichever the choice. ``leave_group`` is
        Kafka's ``CloseOptions`` membership choice. None (the default): a dynamic member sends LeaveGroup, so its
        partitions move at once, and a static one keeps its place until session.timeout.ms, so a restart within it
        changes nothing. True: a static member leaves too (LeaveGroup naming its instance id removes it at once).
        False: a dynamic member stays too: the group moves its partitions when its session times out, as after a
        crash."""
        if self._closed:
            return
        error = await self._close_group(leave_group) if self._coordinator is not None else None
        await self._finish_close()
        if error is not None:
            raise error

    async def _close_group(self, leave_group: bool | None) -> BaseException | None:
        coordinator = self._group()
        await self._auto_commit_now("on close")
        error = None
        if coordinator.subscribed:
            error = await self._invoke(coordinator.unsubscribe_step(), before=True)
            await coordinator.leave("the consumer is closing", send=_sends_leave(coordinator, leave_group))
        return error

    async def _finish_close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._coordinator is not None:
            await self._coordinator.close()
        await self._fetcher.close()
        await self._metadata.close()
        await self._pool.close()


def _sends_leave(coordinator: ConsumerCoordinator, leave_group: bool | None) -> bool:
    """Whether a closing member sends LeaveGroup (see ``close``)."""
    return coordinator.instance_id is None if leave_group is None else leave_group


def _half(step: RebalanceStep, before: bool) -> list[tuple[Callback, tuple[TopicPartition, ...]]]:
    """The step's callbacks before the member's owned set changes (lost, revoked) or after it (assigned)."""
    return [(name, tps) for name, tps in step.callbacks() if (name != "on_partitions_assigned") == before]


def _log_auto_commit(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.warning("auto-commit failed: %s", task.exception())


async def _awaited(awaitable: Awaitable[None]) -> None:
    await awaitable


async def _call(method: Any, *args: Any) -> Any:
    """Run a plain method on the client loop (it touches loop-bound objects such as metadata events)."""
    return method(*args)


class Consumer:
    """Synchronous facade over ``AsyncConsumer``. ``poll`` takes buffered records on the caller's thread (no thread
    hop while the prefetch keeps up) and only waits through the background loop when the buffer is empty."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._loop = BackgroundLoop("odradek-consumer")
        try:
            self._core: AsyncConsumer = self._loop.run(self._create(config))
        except BaseException:
            self._loop.stop()
            raise
        self._fetcher = self._core._fetcher
        self._max_poll_records = self._core._max_poll_records
        self._closed = False

    @staticmethod
    async def _create(config: Mapping[str, Any]) -> AsyncConsumer:
        return AsyncConsumer(config)

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def assign(self, partitions: Iterable[PartitionLike]) -> None:
        self._core.assign(partitions)

    def assignment(self) -> set[TopicPartition]:
        return self._core.assignment()

    def seek(self, partition: PartitionLike, offset: int) -> None:
        self._core.seek(partition, offset)

    def seek_to_beginning(self, *partitions: PartitionLike) -> None:
        self._core.seek_to_beginning(*partitions)

    def seek_to_end(self, *partitions: PartitionLike) -> None:
        self._core.seek_to_end(*partitions)

    def position(self, partition: PartitionLike) -> int:
        return self._loop.run(self._core.position(partition))

    def pause(self, *partitions: PartitionLike) -> None:
        self._core.pause(*partitions)

    def resume(self, *partitions: PartitionLike) -> None:
        self._core.resume(*partitions)

    def paused(self) -> set[TopicPartition]:
        return self._core.paused()

    def highwater(self, partition: PartitionLike) -> int:
        return self._core.highwater(partition)

    def poll(self, timeout_ms: int = 0) -> list[ConsumerRecord]:
        """As ``AsyncConsumer.poll``; the rebalance listener runs on this (the caller's) thread."""
        coordinator = self._core._coordinator
        if coordinator is not None:
            coordinator.polled()
            if coordinator.needs_attention() or coordinator.owned - self._fetcher.assignment():
                self._group_poll(timeout_ms / 1000)
            if self._core._auto_commit:
                self._loop.loop.call_soon_threadsafe(self._core._maybe_auto_commit)
        records = self._fetcher.drain(self._max_poll_records)
        if records or timeout_ms <= 0:
            return self._core._deserialized(records)
        return self._loop.run(self._core.poll(timeout_ms))

    def _group_poll(self, timeout: float) -> None:
        """AsyncConsumer._group_poll with the listener called here, between steps run on the client loop."""
        core = self._core
        coordinator = core._group()
        deadline = time.monotonic() + timeout
        for _ in range(MAX_REBALANCE_STEPS):
            step = self._loop.run(coordinator.next_step(deadline - time.monotonic()))
            if step is None:
                break
            self._loop.run(core._prepare_step(step))
            error = self._invoke(step, before=True)
            self._loop.run(core._apply_step(step))
            after = self._invoke(step, before=False)
            error = error or after
            if error is not None:
                raise error

    def _invoke(self, step: RebalanceStep, before: bool) -> BaseException | None:
        listener = self._core._listener
        error: BaseException | None = None
        for name, partitions in _half(step, before):
            if listener is None:
                continue
            try:
                result = getattr(listener, name)(set(partitions))
                if inspect.isawaitable(result):
                    self._loop.run(_awaited(result))
            except Exception as e:
                logger.error("rebalance listener %s failed: %s", name, e)
                error = error or e
        return error

    def subscribe(self, topics: Topics, listener: ConsumerRebalanceListener | None = None) -> None:
        self._loop.run(_call(self._core.subscribe, topics, listener))

    def subscription(self) -> set[str]:
        return self._core.subscription()

    def unsubscribe(self) -> None:
        core = self._core
        coordinator = core._coordinator
        if coordinator is not None and coordinator.subscribed:
            self._loop.run(core._auto_commit_now("before unsubscribe"))
            error = self._invoke(coordinator.unsubscribe_step(), before=True)
            core._listener = None
            self._loop.run(coordinator.unsubscribe())
            self._fetcher.assign(set())
            if error is not None:
                raise error
        self._fetcher.assign(set())

    def group_metadata(self) -> GroupMetadata:
        return self._core.group_metadata()

    @overload
    def commit(self, offsets: Offsets | None = None, asynchronous: Literal[False] = False) -> None: ...

    @overload
    def commit(
        self, offsets: Offsets | None = None, *, asynchronous: Literal[True]
    ) -> concurrent.futures.Future[None]: ...

    def commit(
        self, offsets: Offsets | None = None, asynchronous: bool = False
    ) -> concurrent.futures.Future[None] | None:
        """As ``AsyncConsumer.commit``; with ``asynchronous=True`` returns a ``concurrent.futures.Future``."""
        resolved = self._core.commit_offsets(offsets)
        commit = self._core._group().commit(resolved)
        if asynchronous:
            return asyncio.run_coroutine_threadsafe(commit, self._loop.loop)
        self._loop.run(commit)
        return None

    def committed(self, partitions: Iterable[PartitionLike]) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return self._loop.run(self._core.committed(list(partitions)))

    def partitions_for(self, topic: str) -> list[int]:
        return self._loop.run(self._core.partitions_for(topic))

    def beginning_offsets(self, partitions: Iterable[PartitionLike]) -> dict[TopicPartition, int]:
        return self._loop.run(self._core.beginning_offsets(partitions))

    def end_offsets(self, partitions: Iterable[PartitionLike]) -> dict[TopicPartition, int]:
        return self._loop.run(self._core.end_offsets(partitions))

    def offsets_for_times(self, timestamps: PartitionTimestamps) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return self._loop.run(self._core.offsets_for_times(timestamps))

    def metrics(self) -> dict[str, float]:
        """As ``AsyncConsumer.metrics`` (read on the client loop while it runs)."""
        if self._closed:
            return self._core.metrics()
        result: dict[str, float] = self._loop.run(_call(self._core.metrics))
        return result

    def close(self, *, leave_group: bool | None = None) -> None:
        """As ``AsyncConsumer.close``; the listener runs on this thread."""
        if self._closed:
            return
        self._closed = True
        core = self._core
        try:
            coordinator = core._coordinator
            error: BaseException | None = None
            if coordinator is not None:
                self._loop.run(core._auto_commit_now("on close"))
                if coordinator.subscribed:
                    error = self._invoke(coordinator.unsubscribe_step(), before=True)
                    send = _sends_leave(coordinator, leave_group)
                    self._loop.run(coordinator.leave("the consumer is closing", send=send))
            self._loop.run(core._finish_close())
            if error is not None:
                raise error
        finally:
            self._loop.stop()
