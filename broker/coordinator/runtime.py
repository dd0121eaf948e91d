"""The coordinator runtime: the asyncio machinery the group and the transaction coordinators share around their
sans-I/O cores (Kafka's CoordinatorRuntime).

A coordinator keeps its state in the partitions of an internal topic (``__consumer_offsets``,
``__transaction_state``); a broker coordinates the keys of the partitions it leads. For each such partition the
runtime keeps a ``CoordinatorPartition``, which carries the coordinator's state of it (its shard), and

- loads it when this broker becomes its leader: feeds the log from its start to its end offset to the
  coordinator's ``replay``, then serves once the high watermark reached that end, so nothing it serves can be
  truncated away; unloads it when this broker stops leading it or leads it at a new epoch (a load in progress for
  an old epoch is abandoned);
- routes: a key's partition answers NOT_COORDINATOR where this broker does not lead it at the epoch it loaded,
  COORDINATOR_LOAD_IN_PROGRESS while it loads (``owner``);
- appends the batches a request handler asks for as leader appends and waits for the high watermark (acks=all) up to
  ``append_timeout_ms``, the outcome going back to the handler (``append``) or to the core (``persist``);
- parks requests until their core answers them (``park``; an unload answers them None);
- runs one timer task a partition, which fires what is due (the coordinator's ``fire_timers``) and sleeps until the
  next deadline or until a request may have moved it (``wake``); it and every task spawned for the partition are
  cancelled when it unloads.

The decisions among these (the leadership plan, the routing answer, the timers' sleep) are pure functions in
``decisions.py``; every decision about groups, offsets and transactions stays in the coordinators' cores.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, Generic, Protocol, TypeVar

from odradek.broker.coordinator.decisions import coordinator_address, plan_leadership, routing_error
from odradek.broker.groups.partitioner import offsets_partition_for
from odradek.broker.log.log import AppendOrigin
from odradek.broker.partition import Partition
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.errors import ErrorCode, OdradekError
from odradek.client.record.batch import Bytes

logger = logging.getLogger(__name__)

LOAD_READ_BYTES = 1 << 20
RESPONSE_HW_POLL_S = 1.0  # a loading partition re-checks its high watermark at least this often

S = TypeVar("S")  # a coordinator's state of one partition: its shard
A = TypeVar("A")  # what the core answers a parked request with


class CoordinatorPartition(Generic[S, A]):
    """One partition of a coordinator's topic that this broker leads, from loading to unloading: the coordinator's
    shard of it and the runtime's bookkeeping."""

    def __init__(self, topic: str, index: int, epoch: int, partition: Partition, shard: S) -> None:
        self.topic = topic
        self.index = index
        self.epoch = epoch  # the leader epoch it loaded at (the coordinator epoch transaction markers carry)
        self.partition = partition
        self.shard = shard
        self.replayed = False  # the load has read the log up to the end it started at
        self.loaded = False  # and the high watermark reached that end: it serves
        self.unloaded = False
        self.wake = asyncio.Event()  # a request may have moved a timer's deadline
        self.tasks: set[asyncio.Task[None]] = set()
        self.waiters: dict[int, asyncio.Future[A | None]] = {}

    def current(self) -> bool:
        """Still the leader at the epoch it loaded (else nothing it holds may be acted on)."""
        p = self.partition
        return not self.unloaded and p.is_leader and p.leader_epoch == self.epoch

    def acknowledged(self, code: int) -> int:
        """An append's outcome as a request may report it: one that succeeded after the partition stopped being
        current is NOT_LEADER_OR_FOLLOWER, its fate the next coordinator's."""
        return ErrorCode.NOT_LEADER_OR_FOLLOWER if code == ErrorCode.NONE and not self.current() else code

    def answer(self, token: int, value: A) -> None:
        """The core's answer to the request parked under ``token`` (gone already: nothing to do)."""
        future = self.waiters.pop(token, None)
        if future is not None and not future.done():
            future.set_result(value)

    def spawn(self, coro: Awaitable[None], name: str) -> None:
        """Run ``coro`` as a task of this partition: cancelled when it unloads, logged if it fails."""
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        task.set_name(name)
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("%s-%d: %s failed", self.topic, self.index, task.get_name(), exc_info=task.exception())


class Coordinator(Protocol[S, A]):
    """What a coordinator plugs into the runtime. The runtime calls these on the event loop; each gets the partition
    whose shard it concerns."""

    def new_shard(self, index: int) -> S:
        """The empty state of partition ``index``, about to load."""
        ...

    def replay(self, cp: CoordinatorPartition[S, A], records: Bytes) -> None:
        """Apply whole batches read from the partition's log, in log order."""
        ...

    def on_replayed(self, cp: CoordinatorPartition[S, A]) -> None:
        """The log is read up to the end the load started at; the high watermark may still be below it."""
        ...

    def on_loaded(self, cp: CoordinatorPartition[S, A]) -> None:
        """The partition serves; its timers start right after."""
        ...

    def on_unloaded(self, cp: CoordinatorPartition[S, A]) -> None:
        """The partition is no longer coordinated here and its tasks are cancelled; its parked requests are
        answered None after this."""
        ...

    def fire_timers(self, cp: CoordinatorPartition[S, A]) -> float | None:
        """Fire what is due; the seconds until the next deadline (None: sleep until woken)."""
        ...

    def summary(self, shard: S) -> str:
        """What a loaded shard holds, for the log."""
        ...


class CoordinatorRuntime(Generic[S, A]):
    """The partitions of ``topic`` that this broker coordinates for ``coordinator``. ``create_topic(partitions,
    replication_factor)`` asks the active controller for the topic; appends wait for the high watermark up to
    ``append_timeout_ms``."""

    def __init__(
        self,
        coordinator: Coordinator[S, A],
        topic: str,
        image: Callable[[], MetadataImage],
        num_partitions: int,
        replication_factor: int,
        create_topic: Callable[[int, int], Coroutine[Any, Any, None]],
        append_timeout_ms: int,
    ) -> None:
        self.coordinator = coordinator
        self.topic = topic
        self._image = image
        self._num_partitions = num_partitions
        self._replication_factor = replication_factor
        self._create_topic = create_topic
        self._append_timeout_s = append_timeout_ms / 1000
        self.partitions: dict[int, CoordinatorPartition[S, A]] = {}
        self._create_task: asyncio.Task[None] | None = None
        self._tokens = itertools.count(1)

    # -- leadership ------------------------------------------------------------------------------------------------

    def on_leadership(self, partitions: Mapping[tuple[str, int], Partition]) -> None:
        """Load the partitions of the topic this broker now leads, unload those it stopped leading or leads at a new
        epoch (the replica manager's leadership listener, called after every metadata change)."""
        leading = {i: p.leader_epoch for (t, i), p in partitions.items() if t == self.topic and p.is_leader}
        unload, load = plan_leadership({i: cp.epoch for i, cp in self.partitions.items()}, leading)
        for index in unload:
            self._unload(self.partitions.pop(index))
        for index, epoch in load:
            partition = partitions[(self.topic, index)]
            cp: CoordinatorPartition[S, A] = CoordinatorPartition(
                self.topic, index, epoch, partition, self.coordinator.new_shard(index)
            )
            self.partitions[index] = cp
            logger.info("loading %s-%d at leader epoch %d", self.topic, index, epoch)
            cp.spawn(self._load(cp), f"load-{self.topic}-{index}")

    async def _load(self, cp: CoordinatorPartition[S, A]) -> None:
        # The partition's log is read afresh after each await: a move to another log dir replaces it.
        end = cp.partition.log.log_end_offset
        offset = cp.partition.log.log_start_offset
        started = time.monotonic()
        while offset < end:
            if not cp.current():
                return
            data = cp.partition.log.read(offset, LOAD_READ_BYTES, max_offset=end)
            if not len(data.records):
                break
            self.coordinator.replay(cp, data.records)
            offset = data.next_offset
            await asyncio.sleep(0)
        cp.replayed = True
        self.coordinator.on_replayed(cp)
        loop = asyncio.get_running_loop()
        while cp.partition.log.high_watermark < end:  # serve only what is committed
            if not cp.current():
                return
            future: asyncio.Future[None] = loop.create_future()
            cp.partition.add_waiter(future)
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(future, RESPONSE_HW_POLL_S)
            finally:
                cp.partition.remove_waiter(future)
        if not cp.current():
            return
        cp.loaded = True
        logger.info(
            "%s-%d loaded at leader epoch %d, up to offset %d, in %.2f s: %s",
            cp.topic,
            cp.index,
            cp.epoch,
            end,
            time.monotonic() - started,
            self.coordinator.summary(cp.shard),
        )
        self.coordinator.on_loaded(cp)
        cp.spawn(self._timers(cp), f"timers-{cp.topic}-{cp.index}")

    def _unload(self, cp: CoordinatorPartition[S, A]) -> None:
        cp.unloaded = True
        for task in list(cp.tasks):
            task.cancel()
        self.coordinator.on_unloaded(cp)
        for future in cp.waiters.values():
            if not future.done():
                future.set_result(None)
        cp.waiters.clear()
        logger.info("unloaded %s-%d (epoch %d)", cp.topic, cp.index, cp.epoch)

    async def close(self) -> None:
        for cp in list(self.partitions.values()):
            self._unload(cp)
            await asyncio.gather(*cp.tasks, return_exceptions=True)
        self.partitions.clear()
        if self._create_task is not None:
            self._create_task.cancel()

    # -- routing ---------------------------------------------------------------------------------------------------

    def partition_count(self) -> int:
        """The topic's partitions; the configured count while it does not exist yet."""
        topic = self._image().topic(self.topic)
        return len(topic.partitions) if topic is not None and topic.partitions else self._num_partitions

    def partition_of(self, key: str) -> int:
        return offsets_partition_for(key, self.partition_count())

    def find_coordinator(self, key: str) -> tuple[ErrorCode.ValueType, int, str, int]:
        """(error, node id, host, port) of the leader of the key's partition; creates the topic on first use
        (COORDINATOR_NOT_AVAILABLE until it exists and the partition has a live leader)."""
        found = coordinator_address(self._image(), self.topic, key)
        if found is None:
            self.ensure_topic()
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        return found

    def ensure_topic(self) -> None:
        """Ask the controller for the topic, unless a request for it is under way."""
        if self._create_task is not None and not self._create_task.done():
            return
        self._create_task = asyncio.create_task(
            self._create_topic(self._num_partitions, self._replication_factor), name=f"create-{self.topic}"
        )

    def owner(self, key: str) -> tuple[ErrorCode.ValueType, CoordinatorPartition[S, A] | None]:
        """The key's partition as loaded here, or why a request for it cannot be served here (``routing_error``)."""
        cp = self.partitions.get(self.partition_of(key))
        error = routing_error(cp is not None and cp.current(), cp is not None and cp.loaded)
        return error, cp if error == ErrorCode.NONE else None

    def serving(self) -> list[CoordinatorPartition[S, A]]:
        """The partitions loaded here and still current."""
        return [cp for cp in self.partitions.values() if cp.loaded and cp.current()]

    def loading(self) -> bool:
        """Whether a partition led here is still loading (listings answer COORDINATOR_LOAD_IN_PROGRESS then)."""
        return any(cp.current() and not cp.loaded for cp in self.partitions.values())

    # -- requests --------------------------------------------------------------------------------------------------

    async def park(self, cp: CoordinatorPartition[S, A], start: Callable[[int], object]) -> A | None:
        """Step the core with ``start(token)`` and wait for its answer to ``token`` (``CoordinatorPartition.answer``);
        None if the partition unloads first."""
        token = next(self._tokens)
        future: asyncio.Future[A | None] = asyncio.get_running_loop().create_future()
        cp.waiters[token] = future
        try:
            start(token)
            return await future
        finally:
            cp.waiters.pop(token, None)

    def append(self, cp: CoordinatorPartition[S, A], batch: bytes) -> Awaitable[int]:
        """Append ``batch`` as the leader now, so that batches land in the order they were asked for, and give the
        error code of its outcome: NONE once the high watermark reached it (acks=all), REQUEST_TIMED_OUT after
        ``append_timeout_ms``, or why the append failed."""
        if not cp.current():
            return _resolved(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        try:
            # The coordinator's own append: a transactional offsets batch carries no sequence to check.
            info = cp.partition.append_as_leader(batch, acks=-1, origin=AppendOrigin.COORDINATOR)
        except OdradekError as e:
            return _resolved(e.code)
        return self._committed(cp.partition.wait_for_commit(info.last_offset + 1))

    async def _committed(self, future: asyncio.Future[int]) -> int:
        try:
            code: int = await asyncio.wait_for(future, self._append_timeout_s)
        except TimeoutError:
            return ErrorCode.REQUEST_TIMED_OUT
        return code

    def persist(self, cp: CoordinatorPartition[S, A], batch: bytes, report: Callable[[int], None], name: str) -> None:
        """``append`` for a core that asked to persist: ``report`` gets the outcome (``acknowledged``) in a task,
        unless the partition unloaded meanwhile (what its shard held is gone)."""
        cp.spawn(self._report(cp, self.append(cp, batch), report), name)

    @staticmethod
    async def _report(cp: CoordinatorPartition[S, A], outcome: Awaitable[int], report: Callable[[int], None]) -> None:
        code = cp.acknowledged(await outcome)
        if not cp.unloaded:
            report(code)

    # -- timers ----------------------------------------------------------------------------------------------------

    async def _timers(self, cp: CoordinatorPartition[S, A]) -> None:
        """Fire what is due; sleep until the next deadline or until a request may have moved it."""
        while cp.current():
            cp.wake.clear()
            wait = self.coordinator.fire_timers(cp)
            cp.wake.clear()  # firing set it: the deadlines were just read
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(cp.wake.wait(), wait)


def _resolved(code: int) -> asyncio.Future[int]:
    future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    future.set_result(code)
    return future
