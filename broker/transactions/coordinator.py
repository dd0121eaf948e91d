"""The transaction coordinator: the asyncio shell around the ``TxnCore`` of each ``__transaction_state`` partition
this broker leads.

A transactional id lives in partition ``abs(hash(id)) % partitions`` of ``__transaction_state`` (the hash of the
group coordinator, as Kafka); the partition's leader is its coordinator. This shell

- loads a partition when this broker becomes its leader (the replica manager's leadership listener): replays its
  log into a new core, and serves once the high watermark reached the loaded end, so nothing it acts on can be
  truncated away; then resends the markers of every transaction left in Prepare* (a coordinator failover never
  loses a commit or abort). The coordinator epoch, which markers carry, is the partition's leader epoch;
- answers NOT_COORDINATOR where this broker does not lead the id's partition at the epoch it loaded, and
  COORDINATOR_LOAD_IN_PROGRESS while it loads;
- appends the records the core asks for as leader appends with acks=all and reports their outcome back, sends the
  markers it asks for through the ``MarkerChannel``, and answers requests with the core's replies;
- runs the timers: transactions past their timeout are aborted every
  ``transaction.abort.timed.out.transaction.cleanup.interval.ms``, unused ids expire every
  ``transaction.remove.expired.transaction.cleanup.interval.ms``;
- unloads a partition when it stops leading it: its waiting requests answer NOT_COORDINATOR, its marker writes stop
  (the next coordinator resends them).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from odradek.broker.config import NodeConfig
from odradek.broker.groups.coordinator import Clock, coordinator_address
from odradek.broker.groups.loader import plan_leadership
from odradek.broker.groups.partitioner import offsets_partition_for
from odradek.broker.partition import Partition
from odradek.broker.transactions.core import Output, Persist, Reply, TxnCore, TxnCoreConfig, WriteMarkers
from odradek.broker.transactions.markers import MarkerChannel
from odradek.broker.transactions.metadata import TxnMetadata, TxnState
from odradek.broker.transactions.records import TRANSACTION_STATE_TOPIC, ReplayStats, encode_batch, read_records
from odradek.client.errors import ErrorCode, OdradekError
from odradek.client.structs import TopicPartition
from odradek.controller.metadata.image import MetadataImage

logger = logging.getLogger(__name__)

LOAD_READ_BYTES = 1 << 20
HW_POLL_S = 1.0  # a loading partition re-checks its high watermark at least this often
RETRY_COMPLETE_S = 0.2  # how soon a failed Complete* write is tried again
CONCURRENT_HOLD_S = 1.0  # how long AddPartitionsToTxn/AddOffsetsToTxn wait for the previous transaction to complete
NO_DURATION_FILTER = -1  # ListTransactions: any negative duration filter lists every transaction, as in Kafka


class ProducerIds(Protocol):
    """Where new producer ids come from (broker/producer_ids.py's ``ProducerIdManager``)."""

    async def next_id(self) -> int: ...


@dataclass(frozen=True, slots=True)
class TxnCoordinatorConfig:
    """The node settings of the transaction coordinator (Kafka's names and defaults)."""

    num_partitions: int = 50  # transaction.state.log.num.partitions
    replication_factor: int = 3  # transaction.state.log.replication.factor
    min_isr: int = 2  # transaction.state.log.min.isr (the topic's min.insync.replicas)
    segment_bytes: int = 104857600  # transaction.state.log.segment.bytes
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    abort_interval_ms: int = 10_000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    expiration_interval_ms: int = 3_600_000  # transaction.remove.expired.transaction.cleanup.interval.ms
    append_timeout_ms: int = 30_000  # how long an acks=all append of a record may wait for the ISR

    @classmethod
    def from_node(cls, c: NodeConfig) -> TxnCoordinatorConfig:
        return cls(
            num_partitions=c["transaction.state.log.num.partitions"],
            replication_factor=c["transaction.state.log.replication.factor"],
            min_isr=c["transaction.state.log.min.isr"],
            segment_bytes=c["transaction.state.log.segment.bytes"],
            max_timeout_ms=c["transaction.max.timeout.ms"],
            id_expiration_ms=c["transactional.id.expiration.ms"],
            abort_interval_ms=c["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
            expiration_interval_ms=c["transaction.remove.expired.transaction.cleanup.interval.ms"],
        )

    @property
    def core(self) -> TxnCoreConfig:
        return TxnCoreConfig(max_timeout_ms=self.max_timeout_ms, id_expiration_ms=self.id_expiration_ms)


class TxnStatePartition:
    """One ``__transaction_state`` partition this broker leads, from loading to unloading."""

    def __init__(self, index: int, epoch: int, partition: Partition, config: TxnCoordinatorConfig) -> None:
        self.index = index
        self.epoch = epoch  # the coordinator epoch markers carry
        self.partition = partition
        self.core = TxnCore(config.core)
        self.loaded = False
        self.unloaded = False
        self.waiters: dict[int, asyncio.Future[Reply]] = {}
        self.wake = asyncio.Event()
        # Set (and replaced) whenever a write of this partition's log or a transaction's markers completes: requests
        # held on CONCURRENT_TRANSACTIONS try again then (TransactionCoordinator._call_when_settled).
        self.settled = asyncio.Event()
        self.tasks: set[asyncio.Task[None]] = set()

    def current(self) -> bool:
        """Still the leader at the epoch it loaded (else nothing it holds may be acted on)."""
        p = self.partition
        return not self.unloaded and p.is_leader and p.leader_epoch == self.epoch

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error(
                "%s-%d: %s failed", TRANSACTION_STATE_TOPIC, self.index, task.get_name(), exc_info=task.exception()
            )


class TransactionCoordinator:
    """Every transactional id this broker coordinates. ``on_leadership`` is the replica manager's leadership
    listener; ``create_topic(partitions, replication_factor)`` asks the active controller for the
    ``__transaction_state`` topic (with ``config.min_isr`` and ``config.segment_bytes``); ``producer_ids`` hands
    out new producer ids; ``markers`` writes the markers (a ``MarkerChannel``)."""

    def __init__(
        self,
        broker_id: int,
        image: Callable[[], MetadataImage],
        config: TxnCoordinatorConfig,
        create_topic: Callable[[int, int], Coroutine[Any, Any, None]],
        producer_ids: ProducerIds,
        markers: MarkerChannel,
        offsets_partitions: Callable[[], int],
        clock: Callable[[], int] | None = None,
    ) -> None:
        """``offsets_partitions`` gives the offsets topic's partition count for AddOffsetsToTxn (the group
        coordinator's: the configured count while the topic does not exist yet, whose creation it starts)."""
        self.broker_id = broker_id
        self._image = image
        self.config = config
        self._create_topic = create_topic
        self.producer_ids = producer_ids
        self.markers = markers
        self._offsets_partitions = offsets_partitions
        self.clock = clock or Clock(follow_skew=True)
        self.partitions: dict[int, TxnStatePartition] = {}
        self._create_task: asyncio.Task[None] | None = None
        self._tokens = itertools.count(1)
        self.committed = 0
        self.aborted = 0

    # -- leadership ------------------------------------------------------------------------------------------------

    def on_leadership(self, partitions: Mapping[tuple[str, int], Partition]) -> None:
        """Load the partitions this broker now leads, unload those it stopped leading or leads at a new epoch."""
        leading = {
            i: p.leader_epoch for (t, i), p in partitions.items() if t == TRANSACTION_STATE_TOPIC and p.is_leader
        }
        unload, load = plan_leadership({i: tp.epoch for i, tp in self.partitions.items()}, leading)
        for index in unload:
            self._unload(self.partitions.pop(index))
        for index, epoch in load:
            tp = TxnStatePartition(index, epoch, partitions[(TRANSACTION_STATE_TOPIC, index)], self.config)
            self.partitions[index] = tp
            logger.info("loading %s-%d at coordinator epoch %d", TRANSACTION_STATE_TOPIC, index, epoch)
            tp.spawn(self._load(tp), f"load-txn-state-{index}")

    async def _load(self, tp: TxnStatePartition) -> None:
        # The partition's log is read afresh after each await: a move to another log dir replaces it.
        end = tp.partition.log.log_end_offset
        offset = tp.partition.log.log_start_offset
        stats = ReplayStats()
        started = time.monotonic()
        while offset < end:
            if not tp.current():
                return
            data = tp.partition.log.read(offset, LOAD_READ_BYTES, max_offset=end)
            if not len(data.records):
                break
            for txn_id, md in read_records(data.records, stats):
                tp.core.replay(txn_id, md)
            offset = data.next_offset
            await asyncio.sleep(0)
        loop = asyncio.get_running_loop()
        while tp.partition.log.high_watermark < end:  # serve only what is committed
            if not tp.current():
                return
            future: asyncio.Future[None] = loop.create_future()
            tp.partition.add_waiter(future)
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(future, HW_POLL_S)
            finally:
                tp.partition.remove_waiter(future)
        if not tp.current():
            return
        tp.loaded = True
        logger.info(
            "%s-%d loaded at coordinator epoch %d: %d transactional ids (%d records, %d skipped) in %.2f s",
            TRANSACTION_STATE_TOPIC,
            tp.index,
            tp.epoch,
            len(tp.core.txns),
            stats.records,
            stats.skipped,
            time.monotonic() - started,
        )
        self._apply(tp, tp.core.resume())
        tp.spawn(self._timers(tp), f"txn-timers-{tp.index}")

    def _unload(self, tp: TxnStatePartition) -> None:
        tp.unloaded = True
        for task in list(tp.tasks):
            task.cancel()
        for future in tp.waiters.values():
            if not future.done():
                future.set_result(Reply(0, ErrorCode.NOT_COORDINATOR))
        tp.waiters.clear()
        logger.info("unloaded %s-%d (epoch %d)", TRANSACTION_STATE_TOPIC, tp.index, tp.epoch)

    async def close(self) -> None:
        for tp in list(self.partitions.values()):
            self._unload(tp)
            await asyncio.gather(*tp.tasks, return_exceptions=True)
        self.partitions.clear()
        if self._create_task is not None:
            self._create_task.cancel()

    # -- routing ---------------------------------------------------------------------------------------------------

    def partition_count(self) -> int:
        topic = self._image().topic(TRANSACTION_STATE_TOPIC)
        return len(topic.partitions) if topic is not None and topic.partitions else self.config.num_partitions

    def partition_of(self, transactional_id: str) -> int:
        return offsets_partition_for(transactional_id, self.partition_count())

    def find_coordinator(self, transactional_id: str) -> tuple[int, int, str, int]:
        """(error, node id, host, port) of the leader of the id's partition; creates the topic on first use
        (COORDINATOR_NOT_AVAILABLE until it exists and the partition has a live leader)."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, -1, "", -1
        found = coordinator_address(self._image(), TRANSACTION_STATE_TOPIC, transactional_id)
        if found is None:
            self._ensure_topic()
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        return found

    def _ensure_topic(self) -> None:
        if self._create_task is not None and not self._create_task.done():
            return
        self._create_task = asyncio.create_task(
            self._create_topic(self.config.num_partitions, self.config.replication_factor),
            name="create-transaction-state-topic",
        )

    def _route(self, transactional_id: str) -> tuple[int, TxnStatePartition | None]:
        """(error, partition): INVALID_REQUEST for an empty id, COORDINATOR_NOT_AVAILABLE before the topic
        exists (its creation started), else ``_owned``'s."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        if self._image().topic(TRANSACTION_STATE_TOPIC) is None:
            self._ensure_topic()
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        return self._owned(transactional_id)

    def _owned(self, transactional_id: str) -> tuple[int, TxnStatePartition | None]:
        """(error, partition) of the id's partition as loaded here: NOT_COORDINATOR where this broker does not lead
        it at the epoch it loaded (nor where the topic does not exist), COORDINATOR_LOAD_IN_PROGRESS while it
        loads (Kafka's TransactionStateManager.getTransactionState)."""
        tp = self.partitions.get(self.partition_of(transactional_id))
        if tp is None or not tp.current():
            return ErrorCode.NOT_COORDINATOR, None
        if not tp.loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None
        return ErrorCode.NONE, tp

    async def _call(self, tp: TxnStatePartition, request: Callable[[int], Output]) -> Reply:
        token = next(self._tokens)
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        tp.waiters[token] = future
        try:
            self._apply(tp, request(token))
            return await future
        finally:
            tp.waiters.pop(token, None)

    async def _fresh_producer_id(self, needed: bool) -> tuple[int, int | None]:
        if not needed:
            return ErrorCode.NONE, None
        try:
            return ErrorCode.NONE, await self.producer_ids.next_id()
        except OdradekError as e:
            return e.code, None

    # -- requests --------------------------------------------------------------------------------------------------

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int = -1, producer_epoch: int = -1
    ) -> tuple[int, int, int]:
        """InitProducerId with a transactional id: (error, producer id, producer epoch)."""
        error, tp = self._route(transactional_id)
        if tp is None:
            return error, -1, -1
        error, fresh = await self._fresh_producer_id(tp.core.needs_producer_id(transactional_id))
        if error != ErrorCode.NONE:
            return error, -1, -1
        error, tp = self._route(transactional_id)  # it may have moved meanwhile
        if tp is None:
            return error, -1, -1
        core = tp.core
        reply = await self._call(
            tp,
            lambda token: core.init_producer_id(
                token, transactional_id, timeout_ms, producer_id, producer_epoch, self.clock(), fresh
            ),
        )
        return reply.error, reply.producer_id, reply.producer_epoch

    async def add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Sequence[TopicPartition]
    ) -> tuple[int, dict[TopicPartition, int]]:
        """AddPartitionsToTxn: (request error, error of each partition). All are added or none: a partition that
        does not exist gets UNKNOWN_TOPIC_OR_PARTITION and the others INVALID_REQUEST (not attempted)."""
        error, tp = self._route(transactional_id)
        if tp is None:
            return error, {}
        image = self._image()
        unknown = {p for p in partitions if image.partition(p.topic, p.partition) is None}
        if unknown:
            return ErrorCode.NONE, {
                p: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if p in unknown else ErrorCode.INVALID_REQUEST
                for p in partitions
            }
        core = tp.core
        reply = await self._call_when_settled(
            tp,
            lambda token: core.add_partitions(
                token, transactional_id, producer_id, producer_epoch, partitions, self.clock()
            ),
        )
        return ErrorCode.NONE, dict.fromkeys(partitions, reply.error)

    def verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]
    ) -> tuple[int, dict[TopicPartition, int]]:
        """AddPartitionsToTxn with verify_only: (request error, error of each partition); nothing changes."""
        error, tp = self._route(transactional_id)
        if tp is None:
            return error, {}
        return ErrorCode.NONE, tp.core.verify(transactional_id, producer_id, producer_epoch, partitions)

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> int:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the transaction."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        error, tp = self._route(transactional_id)
        if tp is None:
            return error
        count = self._offsets_partitions()
        core = tp.core
        reply = await self._call_when_settled(
            tp,
            lambda token: core.add_offsets(
                token, transactional_id, producer_id, producer_epoch, group_id, count, self.clock()
            ),
        )
        return reply.error

    async def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool, bump_epoch: bool = True
    ) -> tuple[int, int, int]:
        """EndTxn: (error, producer id, producer epoch for the next transaction). ``bump_epoch=False`` ends it at
        its own epoch, as before KIP-890."""
        error, tp = self._route(transactional_id)
        if tp is None:
            return error, -1, -1
        needed = bump_epoch and tp.core.needs_producer_id(transactional_id, ending=True)
        error, fresh = await self._fresh_producer_id(needed)
        if error != ErrorCode.NONE:
            return error, -1, -1
        error, tp = self._route(transactional_id)
        if tp is None:
            return error, -1, -1
        core = tp.core
        reply = await self._call(
            tp,
            lambda token: core.end_txn(
                token,
                transactional_id,
                producer_id,
                producer_epoch,
                committed,
                self.clock(),
                fresh,
                bump_epoch=bump_epoch,
            ),
        )
        return reply.error, reply.producer_id, reply.producer_epoch

    def describe(self, transactional_id: str) -> tuple[int, TxnMetadata | None]:
        """(error, metadata): TRANSACTIONAL_ID_NOT_FOUND for an id this coordinator does not know (or a Dead one).
        Only FindCoordinator creates the topic, as in Kafka: without it, this answers NOT_COORDINATOR."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        error, tp = self._owned(transactional_id)
        if tp is None:
            return error, None
        md = tp.core.txns.get(transactional_id)
        if md is None or md.state is TxnState.DEAD:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, md

    def list_transactions(
        self, states: Iterable[str] = (), producer_ids: Iterable[int] = (), min_duration_ms: int = NO_DURATION_FILTER
    ) -> tuple[int, list[str], list[TxnMetadata]]:
        """(error, unknown state names, transactions) over the loaded partitions: COORDINATOR_LOAD_IN_PROGRESS while
        one loads. ``min_duration_ms`` >= 0 keeps those whose start time is more than that ago, exactly as Kafka's
        TransactionStateManager.listTransactionStates: an id that never began one, or was re-initialised (start
        time -1), always passes, and a completed transaction is measured from its start. Dead ids are left out."""
        known = {s.value for s in TxnState}
        wanted = set(states)
        unknown = sorted(wanted - known)
        pids = set(producer_ids)
        now = self.clock()
        out: list[TxnMetadata] = []
        loading = False
        for tp in self.partitions.values():
            if not tp.current():
                continue
            if not tp.loaded:
                loading = True
                continue
            for md in tp.core.txns.values():
                if md.state is TxnState.DEAD:
                    continue
                if wanted and md.state.value not in wanted:
                    continue
                if pids and md.producer_id not in pids:
                    continue
                if min_duration_ms >= 0 and now - md.txn_start_ms <= min_duration_ms:
                    continue
                out.append(md)
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if loading else ErrorCode.NONE
        return error, unknown, sorted(out, key=lambda md: md.transactional_id)

    # -- the core's actions ----------------------------------------------------------------------------------------

    def _apply(self, tp: TxnStatePartition, out: Output) -> None:
        for event in out.events:
            logger.info("%s-%d: %s", TRANSACTION_STATE_TOPIC, tp.index, event)
        for committed in out.completed:
            if committed:
                self.committed += 1
            else:
                self.aborted += 1
        for action in out.actions:
            if isinstance(action, Reply):
                future = tp.waiters.pop(action.token, None)
                if future is not None and not future.done():
                    future.set_result(action)
            elif isinstance(action, Persist):
                self._persist(tp, action)
            elif isinstance(action, WriteMarkers):
                tp.spawn(self._write_markers(tp, action), f"markers-{action.transactional_id}")
        tp.wake.set()

    def _persist(self, tp: TxnStatePartition, action: Persist) -> None:
        """Append now (so records land in the order the core asked), wait for the ISR in a task."""
        try:
            if not tp.current():
                raise OdradekError("not the leader any more", code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
            data = encode_batch([(action.transactional_id, action.metadata)], self.clock())
            info = tp.partition.append_as_leader(data, acks=-1)
        except OdradekError as e:
            code = e.code
            tp.spawn(self._report(tp, action.persist_id, asyncio.sleep(0, code)), f"persist-{action.persist_id}")
            return
        tp.spawn(
            self._report(tp, action.persist_id, self._committed(tp, info.last_offset + 1)),
            f"persist-{action.persist_id}",
        )

    async def _committed(self, tp: TxnStatePartition, offset: int) -> int:
        future = tp.partition.wait_for_commit(offset)
        try:
            code: int = await asyncio.wait_for(future, self.config.append_timeout_ms / 1000)
        except TimeoutError:
            return ErrorCode.REQUEST_TIMED_OUT
        return code

    async def _report(self, tp: TxnStatePartition, persist_id: int, outcome: Awaitable[int]) -> None:
        code = await outcome
        if code == ErrorCode.NONE and not tp.current():
            code = ErrorCode.NOT_LEADER_OR_FOLLOWER  # unloaded meanwhile: its fate is the next coordinator's
        if tp.unloaded:
            return
        self._apply(tp, tp.core.on_persisted(persist_id, code, self.clock()))
        self._settled(tp)

    @staticmethod
    def _settled(tp: TxnStatePartition) -> None:
        tp.settled.set()
        tp.settled = asyncio.Event()

    async def _call_when_settled(self, tp: TxnStatePartition, request: Callable[[int], Output]) -> Reply:
        """``_call``, but a CONCURRENT_TRANSACTIONS answer (the id's previous transaction is still writing its
        markers and its completion) is held and the request tried again each time a write of the partition
        completes, for up to CONCURRENT_HOLD_S. The producer would otherwise retry after a backoff: with
        transactions following each other, that wait was most of a short transaction's cost."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CONCURRENT_HOLD_S
        while True:
            settled = tp.settled
            reply = await self._call(tp, request)
            remaining = deadline - loop.time()
            if reply.error != ErrorCode.CONCURRENT_TRANSACTIONS or remaining <= 0 or not tp.current():
                return reply
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(settled.wait(), remaining)

    async def _write_markers(self, tp: TxnStatePartition, action: WriteMarkers) -> None:
        written = await self.markers.write(action, tp.epoch)
        if not written:
            logger.warning(
                "%s-%d: markers of %r not written: fenced by a newer coordinator or producer epoch",
                TRANSACTION_STATE_TOPIC,
                tp.index,
                action.transactional_id,
            )
            return
        if tp.current():
            self._apply(
                tp,
                tp.core.on_markers_written(
                    action.transactional_id, action.producer_id, action.producer_epoch, self.clock()
                ),
            )
            self._settled(tp)

    async def _timers(self, tp: TxnStatePartition) -> None:
        """Abort timed-out transactions, retry failed Complete* writes, expire unused ids. The checks are spaced on
        the monotonic clock: the coordinator's clock follows wall-clock steps, and one back would hold them off."""
        next_abort = next_expire = 0.0  # monotonic seconds
        while tp.current():
            now, tick = self.clock(), time.monotonic()
            if tick >= next_abort:
                self._apply(tp, tp.core.abort_timed_out(now))
                next_abort = tick + self.config.abort_interval_ms / 1000
            if tick >= next_expire:
                self._apply(tp, tp.core.expire_ids(now))
                next_expire = tick + self.config.expiration_interval_ms / 1000
            if tp.core.completions_to_retry():
                self._apply(tp, tp.core.retry_completions(now))
            wait = min(next_abort, next_expire) - time.monotonic()
            if tp.core.completions_to_retry():
                wait = min(wait, RETRY_COMPLETE_S)
            tp.wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(tp.wake.wait(), max(0.0, wait))

    # -- metrics ---------------------------------------------------------------------------------------------------

    def metrics(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        """Transactions coordinated here, read at scrape time."""
        ongoing = GaugeMetricFamily("odradek_transactions_ongoing", "ongoing transactions coordinated here")
        states = GaugeMetricFamily(
            "odradek_transactional_ids", "transactional ids coordinated here, by state", labels=["state"]
        )
        counts = dict.fromkeys((s.value for s in TxnState), 0)
        for tp in self.partitions.values():
            if tp.loaded and tp.current():
                for md in tp.core.txns.values():
                    counts[md.state.value] += 1
        ongoing.add_metric([], counts[TxnState.ONGOING.value])
        for state, n in counts.items():
            states.add_metric([state], n)
        yield ongoing
        yield states
        committed = CounterMetricFamily(
            "odradek_transactions_committed", "transactions committed while coordinated here"
        )
        committed.add_metric([], self.committed)
        yield committed
        aborted = CounterMetricFamily("odradek_transactions_aborted", "transactions aborted while coordinated here")
        aborted.add_metric([], self.aborted)
        yield aborted
