"""The transaction coordinator: the ``TxnCore`` of each ``__transaction_state`` partition this broker leads,
plugged into the coordinator runtime.

A transactional id lives in partition ``abs(hash(id)) % partitions`` of ``__transaction_state`` (the hash of the
group coordinator, as Kafka); the partition's leader is its coordinator. The runtime (broker/coordinator/runtime.py)
loads each such partition when this broker becomes its leader (its log replayed into a new core, served once the
high watermark reached the loaded end, so nothing it acts on can be truncated away), answers NOT_COORDINATOR where
this broker does not lead the id's partition at the epoch it loaded and COORDINATOR_LOAD_IN_PROGRESS while it
loads, appends with acks=all, runs the partition's timer task and unloads it when this broker stops leading it:
its waiting requests answer NOT_COORDINATOR, its marker writes stop (the next coordinator resends them). The
coordinator epoch, which markers carry, is the partition's leader epoch. This coordinator

- resends, once a partition is loaded, the markers of every transaction left in Prepare* (a coordinator failover
  never loses a commit or abort);
- steps the core with each request, has the runtime persist the records it asks for and reports their outcome
  back, sends the markers it asks for through the ``MarkerChannel``, and answers requests with the core's replies;
- fires the timers: transactions past their timeout are aborted every
  ``transaction.abort.timed.out.transaction.cleanup.interval.ms``, unused ids expire every
  ``transaction.remove.expired.transaction.cleanup.interval.ms``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from odradek.broker.config import NodeConfig
from odradek.broker.coordinator.clock import Clock
from odradek.broker.coordinator.decisions import Interval
from odradek.broker.coordinator.runtime import CoordinatorPartition, CoordinatorRuntime
from odradek.broker.partition import Partition
from odradek.broker.transactions.core import Output, Persist, Reply, TxnCore, TxnCoreConfig, WriteMarkers
from odradek.broker.transactions.markers import MarkerChannel
from odradek.broker.transactions.metadata import TxnMetadata, TxnState
from odradek.broker.transactions.records import TRANSACTION_STATE_TOPIC, ReplayStats, encode_batch, read_records
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.errors import ErrorCode, OdradekError
from odradek.client.record.batch import Bytes
from odradek.client.structs import TopicPartition

logger = logging.getLogger(__name__)

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


class TxnShard:
    """The transactions of one ``__transaction_state`` partition this broker leads, from loading to unloading."""

    def __init__(self, config: TxnCoordinatorConfig) -> None:
        self.core = TxnCore(config.core)
        self.stats = ReplayStats()
        # Set (and replaced) whenever a write of this partition's log or a transaction's markers completes: requests
        # held on CONCURRENT_TRANSACTIONS try again then (TransactionCoordinator._call_when_settled).
        self.settled = asyncio.Event()
        # The timers' checks, spaced on the monotonic clock: the coordinator's clock follows wall-clock steps, and a
        # step back would hold them off.
        self.abort_check = Interval(config.abort_interval_ms / 1000)
        self.expire_check = Interval(config.expiration_interval_ms / 1000)

    def settle(self) -> None:
        self.settled.set()
        self.settled = asyncio.Event()


TxnPartition = CoordinatorPartition[TxnShard, Reply]


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
        self.producer_ids = producer_ids
        self.markers = markers
        self._offsets_partitions = offsets_partitions
        self.clock = clock or Clock(follow_skew=True)
        self.runtime: CoordinatorRuntime[TxnShard, Reply] = CoordinatorRuntime(
            self,
            TRANSACTION_STATE_TOPIC,
            image,
            config.num_partitions,
            config.replication_factor,
            create_topic,
            config.append_timeout_ms,
        )
        self.committed = 0
        self.aborted = 0

    @property
    def partitions(self) -> dict[int, TxnPartition]:
        """The ``__transaction_state`` partitions this broker leads, by index."""
        return self.runtime.partitions

    def on_leadership(self, partitions: Mapping[tuple[str, int], Partition]) -> None:
        """Load the partitions this broker now leads, unload those it stopped leading or leads at a new epoch."""
        self.runtime.on_leadership(partitions)

    async def close(self) -> None:
        await self.runtime.close()

    # -- what the runtime calls ------------------------------------------------------------------------------------

    def new_shard(self, index: int) -> TxnShard:
        return TxnShard(self.config)

    def replay(self, tp: TxnPartition, records: Bytes) -> None:
        for txn_id, md in read_records(records, tp.shard.stats):
            tp.shard.core.replay(txn_id, md)

    def on_replayed(self, tp: TxnPartition) -> None:
        """Nothing to do: the core acts only once the partition serves (``on_loaded``)."""

    def on_loaded(self, tp: TxnPartition) -> None:
        """Write the markers of every transaction the previous coordinator left in Prepare*."""
        self._apply(tp, tp.shard.core.resume())

    def on_unloaded(self, tp: TxnPartition) -> None:
        """Nothing to release: the runtime cancels the marker writes and answers the waiting requests."""

    def fire_timers(self, tp: TxnPartition) -> float:
        """Abort timed-out transactions, retry failed Complete* writes, expire unused ids; the seconds until the
        next check."""
        shard = tp.shard
        now, tick = self.clock(), time.monotonic()
        if shard.abort_check.due(tick):
            self._apply(tp, shard.core.abort_timed_out(now))
        if shard.expire_check.due(tick):
            self._apply(tp, shard.core.expire_ids(now))
        if shard.core.completions_to_retry():
            self._apply(tp, shard.core.retry_completions(now))
        wait = min(shard.abort_check.next_s, shard.expire_check.next_s) - time.monotonic()
        if shard.core.completions_to_retry():
            wait = min(wait, RETRY_COMPLETE_S)
        return max(0.0, wait)

    def summary(self, shard: TxnShard) -> str:
        stats = shard.stats
        return f"{len(shard.core.txns)} transactional ids ({stats.records} records, {stats.skipped} skipped)"

    # -- routing ---------------------------------------------------------------------------------------------------

    def partition_count(self) -> int:
        return self.runtime.partition_count()

    def partition_of(self, transactional_id: str) -> int:
        return self.runtime.partition_of(transactional_id)

    def find_coordinator(self, transactional_id: str) -> tuple[int, int, str, int]:
        """(error, node id, host, port) of the leader of the id's partition; creates the topic on first use
        (COORDINATOR_NOT_AVAILABLE until it exists and the partition has a live leader)."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, -1, "", -1
        return self.runtime.find_coordinator(transactional_id)

    def _route(self, transactional_id: str) -> tuple[int, TxnPartition | None]:
        """(error, partition): INVALID_REQUEST for an empty id, COORDINATOR_NOT_AVAILABLE before the topic
        exists (its creation started), else the runtime's ``owner`` (Kafka's
        TransactionStateManager.getTransactionState)."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        if self._image().topic(TRANSACTION_STATE_TOPIC) is None:
            self.runtime.ensure_topic()
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        return self.runtime.owner(transactional_id)

    async def _call(self, tp: TxnPartition, request: Callable[[int], Output]) -> Reply:
        reply = await self.runtime.park(tp, lambda token: self._apply(tp, request(token)))
        return reply if reply is not None else Reply(0, ErrorCode.NOT_COORDINATOR)

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
        error, fresh = await self._fresh_producer_id(tp.shard.core.needs_producer_id(transactional_id))
        if error != ErrorCode.NONE:
            return error, -1, -1
        error, tp = self._route(transactional_id)  # it may have moved meanwhile
        if tp is None:
            return error, -1, -1
        core = tp.shard.core
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
        core = tp.shard.core
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
        return ErrorCode.NONE, tp.shard.core.verify(transactional_id, producer_id, producer_epoch, partitions)

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> int:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the transaction."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        error, tp = self._route(transactional_id)
        if tp is None:
            return error
        count = self._offsets_partitions()
        core = tp.shard.core
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
        needed = bump_epoch and tp.shard.core.needs_producer_id(transactional_id, ending=True)
        error, fresh = await self._fresh_producer_id(needed)
        if error != ErrorCode.NONE:
            return error, -1, -1
        error, tp = self._route(transactional_id)
        if tp is None:
            return error, -1, -1
        core = tp.shard.core
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
        error, tp = self.runtime.owner(transactional_id)
        if tp is None:
            return error, None
        md = tp.shard.core.txns.get(transactional_id)
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
        for tp in self.runtime.serving():
            for md in tp.shard.core.txns.values():
                if md.state is TxnState.DEAD:
                    continue
                if wanted and md.state.value not in wanted:
                    continue
                if pids and md.producer_id not in pids:
                    continue
                if min_duration_ms >= 0 and now - md.txn_start_ms <= min_duration_ms:
                    continue
                out.append(md)
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.runtime.loading() else ErrorCode.NONE
        return error, unknown, sorted(out, key=lambda md: md.transactional_id)

    # -- the core's actions ----------------------------------------------------------------------------------------

    def _apply(self, tp: TxnPartition, out: Output) -> None:
        for event in out.events:
            logger.info("%s-%d: %s", TRANSACTION_STATE_TOPIC, tp.index, event)
        for committed in out.completed:
            if committed:
                self.committed += 1
            else:
                self.aborted += 1
        for action in out.actions:
            if isinstance(action, Reply):
                tp.answer(action.token, action)
            elif isinstance(action, Persist):
                self._persist(tp, action)
            elif isinstance(action, WriteMarkers):
                tp.spawn(self._write_markers(tp, action), f"markers-{action.transactional_id}")
        tp.wake.set()

    def _persist(self, tp: TxnPartition, action: Persist) -> None:
        def report(code: int) -> None:
            self._apply(tp, tp.shard.core.on_persisted(action.persist_id, code, self.clock()))
            tp.shard.settle()

        batch = encode_batch([(action.transactional_id, action.metadata)], self.clock())
        self.runtime.persist(tp, batch, report, f"persist-{action.persist_id}")

    async def _call_when_settled(self, tp: TxnPartition, request: Callable[[int], Output]) -> Reply:
        """``_call``, but a CONCURRENT_TRANSACTIONS answer (the id's previous transaction is still writing its
        markers and its completion) is held and the request tried again each time a write of the partition
        completes, for up to CONCURRENT_HOLD_S. The producer would otherwise retry after a backoff: with
        transactions following each other, that wait was most of a short transaction's cost."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CONCURRENT_HOLD_S
        while True:
            settled = tp.shard.settled
            reply = await self._call(tp, request)
            remaining = deadline - loop.time()
            if reply.error != ErrorCode.CONCURRENT_TRANSACTIONS or remaining <= 0 or not tp.current():
                return reply
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(settled.wait(), remaining)

    async def _write_markers(self, tp: TxnPartition, action: WriteMarkers) -> None:
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
                tp.shard.core.on_markers_written(
                    action.transactional_id, action.producer_id, action.producer_epoch, self.clock()
                ),
            )
            tp.shard.settle()

    # -- metrics ---------------------------------------------------------------------------------------------------

    def metrics(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        """Transactions coordinated here, read at scrape time."""
        ongoing = GaugeMetricFamily("odradek_transactions_ongoing", "ongoing transactions coordinated here")
        states = GaugeMetricFamily(
            "odradek_transactional_ids", "transactional ids coordinated here, by state", labels=["state"]
        )
        counts = dict.fromkeys((s.value for s in TxnState), 0)
        for tp in self.runtime.serving():
            for md in tp.shard.core.txns.values():
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
