"""The group coordinator: the asyncio shell around the group state machines and the offset stores.

A broker coordinates the groups whose ``__consumer_offsets`` partition it leads. For each such partition it keeps a
``CoordinatorPartition``: the partition's ``ClassicGroup``s and its ``OffsetStore``, loaded from the log when the
broker becomes leader and dropped when it stops leading (or the leader epoch changes). The decisions are the
cores'; this shell

- routes each request to its group's partition, answering NOT_COORDINATOR where this broker does not lead it at
  the epoch it loaded, and COORDINATOR_LOAD_IN_PROGRESS while it is still loading;
- loads: replays the log from its start up to its end offset, then serves once the high watermark reached that
  end, so nothing it serves can be truncated away;
- appends what the cores ask to persist as a leader append and waits for the high watermark (acks=all) up to
  ``offsets.commit.timeout.ms``, then reports the outcome back to the core;
- runs each partition's timers (one task, sleeping until the earliest ``next_deadline_ms`` of its groups and
  woken whenever a request may have moved it) and its offset retention;
- drops the offsets of deleted topics: after each metadata change (``on_leadership``) it compares the image's
  topics with those it saw last, and each partition writes tombstones for the deleted topics' offsets;
- appends a TxnOffsetCommit as one transactional batch of the producer and, told by ``on_txn_marker`` that the
  producer's marker reached the partition, commits or drops those offsets (see offsets.py).

Clock: the cores see one clock in milliseconds that never goes backwards within the process but reads as wall
time (the wall clock at start plus the monotonic time since), so timers are immune to clock steps and the
timestamps it persists (commit times, the time a group became empty) still mean something to the next coordinator.
Its start is read from the node's wall clock (broker/clock.py), so a node started while a chaos run skews its clock
keeps that skew. The transaction coordinator's clock (``follow_skew``) also follows the skew as it changes, as its
timeouts follow the wall clock in Kafka.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from odradek.broker.clock import offset_ns
from odradek.broker.config import NodeConfig
from odradek.broker.groups.consumer_group import ConsumerGroup, ConsumerGroupConfig
from odradek.broker.groups.consumer_messages import (
    ConsumerGroupDescription,
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResponse,
    TopicInfo,
)
from odradek.broker.groups.consumer_records import ConsumerRecordKey, ConsumerRecordValue
from odradek.broker.groups.group import ClassicGroup, GroupConfig, GroupState, append_error_to_response_error
from odradek.broker.groups.loader import encode_records, group_record, plan_leadership, replay_batches, snapshot_of
from odradek.broker.groups.messages import (
    GroupDescription,
    GroupListing,
    GroupResult,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeftMember,
    PersistGroup,
    Respond,
    SyncGroupRequest,
    SyncGroupResponse,
)
from odradek.broker.groups.offsets import USE_COMMIT_TIMESTAMP, Append, OffsetAndMetadata, OffsetStore
from odradek.broker.groups.partitioner import offsets_partition_for
from odradek.broker.groups.records import (
    OFFSETS_TOPIC,
    GroupMetadataValue,
    OffsetCommitValue,
    RecordKey,
    RecordValue,
    group_tombstone,
)
from odradek.broker.log.log import AppendInfo, AppendOrigin
from odradek.broker.partition import Partition
from odradek.client.consumer.protocol import Subscription
from odradek.client.errors import ErrorCode, OdradekError
from odradek.client.structs import TopicPartition
from odradek.controller.metadata.image import MetadataImage, TopicImage

logger = logging.getLogger(__name__)

LOAD_READ_BYTES = 1 << 20
CONSUMER_PROTOCOL = "consumer"  # the protocol type of consumer groups, whose member metadata is a Subscription
RESPONSE_HW_POLL_S = 1.0  # a loading partition re-checks its high watermark at least this often


class CoordinatorError(OdradekError):
    """The request cannot be served here: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, INVALID_GROUP_ID, ..."""


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    """The node settings of the coordinator (Kafka's names and defaults)."""

    num_partitions: int = 50  # offsets.topic.num.partitions
    replication_factor: int = 3  # offsets.topic.replication.factor
    retention_ms: int = 10080 * 60_000  # offsets.retention.minutes
    retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    commit_timeout_ms: int = 5000  # offsets.commit.timeout.ms
    group: GroupConfig = field(default_factory=GroupConfig)
    consumer_group: ConsumerGroupConfig = field(default_factory=ConsumerGroupConfig)  # Kafka's group.consumer.*

    @classmethod
    def from_node(cls, c: NodeConfig) -> CoordinatorConfig:
        return cls(
            num_partitions=c["offsets.topic.num.partitions"],
            replication_factor=c["offsets.topic.replication.factor"],
            retention_ms=c["offsets.retention.minutes"] * 60_000,
            retention_check_interval_ms=c["offsets.retention.check.interval.ms"],
            offset_metadata_max_bytes=c["offset.metadata.max.bytes"],
            commit_timeout_ms=c["offsets.commit.timeout.ms"],
            group=GroupConfig(
                initial_rebalance_delay_ms=c["group.initial.rebalance.delay.ms"],
                min_session_timeout_ms=c["group.min.session.timeout.ms"],
                max_session_timeout_ms=c["group.max.session.timeout.ms"],
                max_size=c["group.max.size"],
            ),
            consumer_group=ConsumerGroupConfig(
                session_timeout_ms=c["group.consumer.session.timeout.ms"],
                heartbeat_interval_ms=c["group.consumer.heartbeat.interval.ms"],
                max_size=c["group.consumer.max.size"],
                assignors=c["group.consumer.assignors"],
            ),
        )


def commit_append_error(error: int) -> ErrorCode.ValueType:
    """What an OffsetCommit partition is told when its append failed with ``error`` (Kafka's mapping; a timeout
    stays REQUEST_TIMED_OUT)."""
    if error in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return ErrorCode.ValueType(error)


def subscribed_topics(group: ClassicGroup) -> set[str] | None:
    """The topics a consumer group's members subscribe to; None when they cannot be known (another protocol type,
    or metadata that does not decode): a consumer group then counts as subscribed to every topic (Kafka's
    ClassicGroup.isSubscribedToTopic)."""
    if group.protocol_type != CONSUMER_PROTOCOL:
        return None
    topics: set[str] = set()
    for member in group.members.values():
        metadata = member.metadata(group.protocol_name) if group.protocol_name else b""
        if not metadata and member.protocols:
            metadata = member.protocols[0][1]
        try:
            topics.update(Subscription.decode(metadata).topics)
        except Exception:
            return None
    return topics


def deleted_partitions(before: Mapping[bytes, TopicImage], after: Mapping[bytes, TopicImage]) -> list[TopicPartition]:
    """The partitions of the topics in ``before`` (an image's topics by id) that ``after`` no longer has: by id, so
    a topic deleted and created again under its name between the two counts as deleted."""
    return [TopicPartition(t.name, i) for tid, t in before.items() if tid not in after for i in sorted(t.partitions)]


def coordinator_address(
    image: MetadataImage, topic_name: str, key: str
) -> tuple[ErrorCode.ValueType, int, str, int] | None:
    """(error, node id, host, port) of the leader of ``key``'s partition of the internal topic ``topic_name`` (Kafka's
    hash of the key), the coordinator of a group or a transactional id; COORDINATOR_NOT_AVAILABLE while that
    partition has no live leader; None while the topic does not exist (the caller has it created)."""
    topic = image.topic(topic_name)
    if topic is None or not topic.partitions:
        return None
    state = topic.partitions.get(offsets_partition_for(key, len(topic.partitions)))
    broker = image.brokers.get(state.leader) if state is not None else None
    if broker is None or broker.fenced:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    return ErrorCode.NONE, broker.broker_id, broker.host, broker.port


class Clock:
    """Milliseconds that never go backwards in the process and read as wall time (see the module docstring);
    ``follow_skew``: except that they follow the changes of the node's wall-clock offset, steps back included."""

    def __init__(self, follow_skew: bool = False) -> None:
        self._offset0 = offset_ns()
        self._wall0 = (time.time_ns() + self._offset0) // 1_000_000
        self._mono0 = time.monotonic_ns() // 1_000_000
        self._follow_skew = follow_skew

    def __call__(self) -> int:
        now = self._wall0 + time.monotonic_ns() // 1_000_000 - self._mono0
        if self._follow_skew:
            now += (offset_ns() - self._offset0) // 1_000_000
        return now


def uuid_member_ids(prefix: str) -> str:
    """Kafka's member ids: the client id (or group instance id) and a random UUID; just the UUID for a client that
    sent no client id (rather than an id starting with '-')."""
    return f"{prefix}-{uuid.uuid4()}" if prefix else str(uuid.uuid4())


class CoordinatorPartition:
    """One offsets partition this broker leads: its groups and offsets, from loading to unloading."""

    def __init__(self, index: int, epoch: int, partition: Partition, config: CoordinatorConfig) -> None:
        self.index = index
        self.epoch = epoch
        self.partition = partition
        self.store = OffsetStore(config.offset_metadata_max_bytes)
        self.groups: dict[str, ClassicGroup] = {}
        # KIP-848 groups; each one's stored records (the last value of each key) rebuild it when an append fails,
        # and its lock keeps one heartbeat or timer at a time between the core's step and the append it waits for.
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.consumer_records: dict[str, dict[ConsumerRecordKey, ConsumerRecordValue]] = {}
        self.consumer_locks: dict[str, asyncio.Lock] = {}
        self.loaded = False
        self.unloaded = False
        self.waiters: dict[int, asyncio.Future[JoinGroupResponse | SyncGroupResponse]] = {}
        self.wake = asyncio.Event()
        self.tasks: set[asyncio.Task[None]] = set()
        self.generations: dict[str, int] = {}
        self.replayed = False  # the load has read the log up to the end it started at
        self.deferred_markers: list[tuple[int, bool]] = []  # markers reported while the load was still reading
        self.deferred_deletions: list[TopicPartition] = []  # partitions of topics deleted while it was loading

    def consumer_lock(self, group_id: str) -> asyncio.Lock:
        lock = self.consumer_locks.get(group_id)
        if lock is None:
            lock = self.consumer_locks[group_id] = asyncio.Lock()
        return lock

    def current(self) -> bool:
        """Still the leader at the epoch it loaded (else nothing it holds may be acted on)."""
        p = self.partition
        return not self.unloaded and p.is_leader and p.leader_epoch == self.epoch

    def spawn(self, coro: Awaitable[None], name: str) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        task.set_name(name)
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("offsets partition %d: %s failed", self.index, task.get_name(), exc_info=task.exception())


def append_coordinator_batch(partition: Partition, batch: bytes) -> AppendInfo:
    """The coordinator's own leader append (acks=all). A transactional offsets batch carries no sequence, so the
    log must take it as the coordinator's append, not a producer's."""
    return partition.append_as_leader(batch, acks=-1, origin=AppendOrigin.COORDINATOR)


class GroupCoordinator:
    """Every group this broker coordinates. ``on_leadership`` is the replica manager's leadership listener;
    ``create_offsets_topic(partitions, replication_factor)`` asks the active controller for the offsets topic."""

    def __init__(
        self,
        broker_id: int,
        image: Callable[[], MetadataImage],
        config: CoordinatorConfig,
        create_offsets_topic: Callable[[int, int], Coroutine[Any, Any, None]],
        clock: Callable[[], int] | None = None,
        member_ids: Callable[[str], str] = uuid_member_ids,
    ) -> None:
        self.broker_id = broker_id
        self._image = image
        self.config = config
        self._create_offsets_topic = create_offsets_topic
        self.clock = clock or Clock()
        self._member_ids = member_ids
        self.partitions: dict[int, CoordinatorPartition] = {}
        self._create_task: asyncio.Task[None] | None = None
        self._tokens = itertools.count(1)
        self.rebalances: dict[str, int] = {}
        self.commits: dict[str, int] = {}
        self._topics: Mapping[bytes, TopicImage] = image().topics  # as the last leadership call saw them
        self._topic_infos_of: MetadataImage | None = None
        self._topic_infos_cache: dict[str, TopicInfo] = {}

    # -- leadership ------------------------------------------------------------------------------------------------

    def on_leadership(self, partitions: Mapping[tuple[str, int], Partition]) -> None:
        """Load the offsets partitions this broker now leads, unload those it stopped leading (or leads at a new
        epoch: a load in progress for an old epoch is abandoned). The replica manager calls this after every
        metadata change, so it is also where the offsets of deleted topics are dropped."""
        leading = {i: p.leader_epoch for (t, i), p in partitions.items() if t == OFFSETS_TOPIC and p.is_leader}
        unload, load = plan_leadership({i: cp.epoch for i, cp in self.partitions.items()}, leading)
        for index in unload:
            self._unload(self.partitions.pop(index))
        for index, epoch in load:
            cp = CoordinatorPartition(index, epoch, partitions[(OFFSETS_TOPIC, index)], self.config)
            self.partitions[index] = cp
            logger.info("loading offsets partition %d at leader epoch %d", index, epoch)
            cp.spawn(self._load(cp), f"load-offsets-{index}")
        self._drop_deleted_topics()

    def _drop_deleted_topics(self) -> None:
        """Each hosted offsets partition writes tombstones for the offsets of the topics deleted since the last
        call (Kafka's onPartitionsDeleted); one still loading does once it has loaded."""
        topics = self._image().topics
        deleted = deleted_partitions(self._topics, topics)
        self._topics = topics
        if not deleted:
            return
        for cp in self.partitions.values():
            if cp.loaded:
                cp.spawn(self._drop_offsets(cp, deleted), f"drop-deleted-offsets-{cp.index}")
            else:
                cp.deferred_deletions.extend(deleted)

    async def _drop_offsets(self, cp: CoordinatorPartition, partitions: Sequence[TopicPartition]) -> None:
        append = cp.store.on_partitions_deleted(partitions)
        if append is None:
            return
        code = await self._write(cp, append)
        if code == ErrorCode.NONE:
            logger.info("offsets partition %d: %d offsets of deleted topics removed", cp.index, len(append.records))
        else:  # not retried, as Kafka logs the failure and moves on
            logger.warning(
                "offsets partition %d: the offsets of deleted topics were not removed: %s",
                cp.index,
                ErrorCode.Name(ErrorCode.ValueType(code)),
            )

    async def _load(self, cp: CoordinatorPartition) -> None:
        # The partition's log is read afresh after each await: a move to another log dir replaces it.
        end = cp.partition.log.log_end_offset
        offset = cp.partition.log.log_start_offset
        groups: dict[str, GroupMetadataValue] = {}
        consumer_groups: dict[str, dict[ConsumerRecordKey, ConsumerRecordValue]] = {}
        started = time.monotonic()
        while offset < end:
            if not cp.current():
                return
            data = cp.partition.log.read(offset, LOAD_READ_BYTES, max_offset=end)
            if not len(data.records):
                break
            replay_batches(data.records, cp.store, groups, consumer_groups=consumer_groups)
            offset = data.next_offset
            await asyncio.sleep(0)
        # a marker reported during the read may lie past the end it started at; one it read is a no-op again
        cp.replayed = True
        for producer_id, committed in cp.deferred_markers:
            cp.store.on_txn_marker(producer_id, committed)
        cp.deferred_markers.clear()
        now = self.clock()
        for group_id, value in groups.items():
            cp.groups[group_id] = ClassicGroup.restore(
                snapshot_of(group_id, value), now, self.config.group, self._member_ids
            )
            cp.generations[group_id] = value.generation
        for group_id, records in consumer_groups.items():
            groups.pop(group_id, None)
            cp.groups.pop(group_id, None)
            cp.consumer_groups[group_id] = self._restore_consumer_group(group_id, records, now)
        cp.consumer_records = consumer_groups
        for group_id in cp.store.groups() - set(groups) - set(consumer_groups):
            cp.groups[group_id] = ClassicGroup(group_id, self.config.group, self._member_ids, now)
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
            "offsets partition %d loaded at epoch %d: %d groups, offsets up to %d, in %.2f s",
            cp.index,
            cp.epoch,
            len(cp.groups),
            end,
            time.monotonic() - started,
        )
        cp.spawn(self._timers(cp), f"group-timers-{cp.index}")
        cp.spawn(self._retention(cp), f"offsets-retention-{cp.index}")
        if cp.deferred_deletions:
            cp.spawn(self._drop_offsets(cp, cp.deferred_deletions), f"drop-deleted-offsets-{cp.index}")

    def _unload(self, cp: CoordinatorPartition) -> None:
        cp.unloaded = True
        for task in list(cp.tasks):
            task.cancel()
        now = self.clock()
        for group in cp.groups.values():
            self._apply(cp, group, group.unload(now))
        cp.store.abort_pending()
        for future in cp.waiters.values():
            if not future.done():
                future.set_exception(CoordinatorError("the coordinator moved", code=ErrorCode.NOT_COORDINATOR))
        cp.waiters.clear()
        logger.info("unloaded offsets partition %d (epoch %d)", cp.index, cp.epoch)

    async def close(self) -> None:
        for cp in list(self.partitions.values()):
            self._unload(cp)
            await asyncio.gather(*cp.tasks, return_exceptions=True)
        self.partitions.clear()
        if self._create_task is not None:
            self._create_task.cancel()

    # -- routing ---------------------------------------------------------------------------------------------------

    def offsets_partition_count(self) -> int:
        topic = self._image().topic(OFFSETS_TOPIC)
        return len(topic.partitions) if topic is not None and topic.partitions else self.config.num_partitions

    def offsets_partitions_for_transactions(self) -> int:
        """The partition count AddOffsetsToTxn maps a group with. A transaction may add a group's offsets before any
        consumer of the group found its coordinator: the topic does not exist yet, so its creation starts now and
        the configured count, which it will be created with, is the answer (as Kafka's coordinator does)."""
        if self._image().topic(OFFSETS_TOPIC) is None:
            self._ensure_offsets_topic()
        return self.offsets_partition_count()

    def partition_of(self, group_id: str) -> int:
        return offsets_partition_for(group_id, self.offsets_partition_count())

    def find_coordinator(self, group_id: str) -> tuple[ErrorCode.ValueType, int, str, int]:
        """(error, node id, host, port) of the leader of the group's offsets partition; creates the offsets topic on
        first use (COORDINATOR_NOT_AVAILABLE until it exists and the partition has a live leader)."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, -1, "", -1
        found = coordinator_address(self._image(), OFFSETS_TOPIC, group_id)
        if found is None:
            self._ensure_offsets_topic()
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        return found

    def _ensure_offsets_topic(self) -> None:
        if self._create_task is not None and not self._create_task.done():
            return
        self._create_task = asyncio.create_task(
            self._create_offsets_topic(self.config.num_partitions, self.config.replication_factor),
            name="create-offsets-topic",
        )

    def _route(self, group_id: str) -> CoordinatorPartition:
        if not group_id:
            raise CoordinatorError("the group id is empty", code=ErrorCode.INVALID_GROUP_ID)
        if self._image().topic(OFFSETS_TOPIC) is None:
            raise CoordinatorError("the offsets topic does not exist yet", code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        index = self.partition_of(group_id)
        cp = self.partitions.get(index)
        if cp is None or not cp.current():
            raise CoordinatorError(
                f"broker {self.broker_id} does not lead {OFFSETS_TOPIC}-{index}", code=ErrorCode.NOT_COORDINATOR
            )
        if not cp.loaded:
            raise CoordinatorError(
                f"{OFFSETS_TOPIC}-{index} is still loading", code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            )
        return cp

    def _new_group(self, cp: CoordinatorPartition, group_id: str) -> ClassicGroup:
        group = ClassicGroup(group_id, self.config.group, self._member_ids, self.clock())
        cp.groups[group_id] = group
        return group

    def _drop_if_unused(self, cp: CoordinatorPartition, group_id: str) -> None:
        """A group made for a request that then changed nothing (refused) leaves no trace."""
        group = cp.groups.get(group_id)
        if (
            group is not None
            and group.state is GroupState.EMPTY
            and not group.members
            and not group.pending_members
            and group.generation_id == 0
            and group.protocol_type is None
            and not cp.store.has_offsets(group_id)
            and not cp.store.has_pending(group_id)
        ):
            del cp.groups[group_id]

    # -- the cores' actions ----------------------------------------------------------------------------------------

    def _apply(self, cp: CoordinatorPartition, group: ClassicGroup, result: GroupResult) -> None:
        for event in result.events:
            logger.info("%s", event)
        for action in result.actions:
            if isinstance(action, Respond):
                future = cp.waiters.pop(int(action.token), None)  # type: ignore[call-overload]
                if future is not None and not future.done():
                    future.set_result(action.response)
            elif isinstance(action, PersistGroup):
                cp.spawn(self._persist(cp, group, action), f"persist-{group.group_id}")
        before = cp.generations.get(group.group_id, 0)
        if group.generation_id > before:
            self.rebalances[group.group_id] = self.rebalances.get(group.group_id, 0) + group.generation_id - before
        cp.generations[group.group_id] = group.generation_id
        cp.wake.set()

    async def _persist(self, cp: CoordinatorPartition, group: ClassicGroup, action: PersistGroup) -> None:
        error = await self._append(cp, [group_record(action.group)])
        if cp.current() and cp.groups.get(group.group_id) is group:
            self._apply(cp, group, group.on_persisted(action.persist_id, self.clock(), ErrorCode.ValueType(error)))

    async def _append(
        self,
        cp: CoordinatorPartition,
        records: Sequence[tuple[RecordKey, RecordValue | None]],
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> int:
        """A leader append of ``records`` at the loaded epoch (with a producer id: one transactional batch of that
        producer), waiting for the high watermark (acks=all) up to offsets.commit.timeout.ms; the error code of
        the outcome."""
        if not cp.current():
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        try:
            info = append_coordinator_batch(
                cp.partition, encode_records(records, self.clock(), producer_id, producer_epoch)
            )
        except OdradekError as e:
            return e.code
        future = cp.partition.wait_for_commit(info.last_offset + 1)
        try:
            code: int = await asyncio.wait_for(future, self.config.commit_timeout_ms / 1000)
        except TimeoutError:
            return ErrorCode.REQUEST_TIMED_OUT
        return code

    async def _write(self, cp: CoordinatorPartition, append: Append) -> int:
        """``_append`` of the offset store's records, whose outcome goes back to the store (unless the partition was
        unloaded meanwhile: the store dropped them then)."""
        code = await self._append(cp, append.records)
        if cp.current():
            (cp.store.on_appended if code == ErrorCode.NONE else cp.store.on_append_failed)(append.append_id)
        return code

    async def _timers(self, cp: CoordinatorPartition) -> None:
        """Fire each group's due timers; sleep until the earliest deadline or until a request may have moved it."""
        while cp.current():
            cp.wake.clear()
            now = self.clock()
            earliest: int | None = None
            for group in list(cp.groups.values()):
                deadline = group.next_deadline_ms()
                if deadline is not None and deadline <= now:
                    self._apply(cp, group, group.tick(now))
                    deadline = group.next_deadline_ms()
                if deadline is not None and (earliest is None or deadline < earliest):
                    earliest = deadline
            for group_id, consumer_group in list(cp.consumer_groups.items()):
                deadline = consumer_group.next_deadline_ms()
                if deadline is None:
                    continue
                if deadline <= now:
                    # The tick appends; it (or the heartbeat holding the group) wakes this loop once done.
                    if not cp.consumer_lock(group_id).locked():
                        cp.spawn(self._consumer_tick(cp, group_id), f"consumer-group-timers-{group_id}")
                    continue
                if earliest is None or deadline < earliest:
                    earliest = deadline
            cp.wake.clear()  # ticking set it: the deadlines were just read
            timeout = None if earliest is None else max(0.0, (earliest - self.clock()) / 1000)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(cp.wake.wait(), timeout)

    async def _retention(self, cp: CoordinatorPartition) -> None:
        while cp.current():
            await asyncio.sleep(self.config.retention_check_interval_ms / 1000)
            await self.expire_offsets(cp)

    async def expire_offsets(self, cp: CoordinatorPartition) -> None:
        """Tombstones for offsets past offsets.retention.minutes; an Empty group left without offsets goes Dead
        and gets its own tombstone (Kafka's offset expiration)."""
        now = self.clock()

        def empty_since(group_id: str) -> int | None:
            consumer_group = cp.consumer_groups.get(group_id)
            if consumer_group is not None:  # kept while it has members, else from each offset's commit
                return None if consumer_group.members else USE_COMMIT_TIMESTAMP
            group = cp.groups.get(group_id)
            if group is None or group.protocol_type is None:
                return USE_COMMIT_TIMESTAMP
            if group.state is not GroupState.EMPTY:
                return None
            return USE_COMMIT_TIMESTAMP if group.state_timestamp_ms is None else group.state_timestamp_ms

        append = cp.store.expired(now, self.config.retention_ms, empty_since)
        if append is not None:
            error = await self._write(cp, append)
            if not cp.current() or error != ErrorCode.NONE:
                return
            logger.info("offsets partition %d: %d offsets expired", cp.index, len(append.records))
        dead = [
            g
            for gid, g in cp.groups.items()
            if g.state is GroupState.EMPTY
            and not g.pending_members
            and not cp.store.has_offsets(gid)
            and not cp.store.has_pending(gid)
        ]
        for group in dead:
            group.delete(now)
            del cp.groups[group.group_id]
        if dead:
            await self._append(cp, [group_tombstone(g.group_id) for g in dead])
        for group_id in [gid for gid, g in cp.consumer_groups.items() if not g.members]:
            async with cp.consumer_lock(group_id):  # an empty consumer group left without offsets is deleted
                group_now = cp.consumer_groups.get(group_id)
                if group_now is None or group_now.members or not cp.current():
                    continue
                if not cp.store.has_offsets(group_id) and not cp.store.has_pending(group_id):
                    await self._remove_consumer_group(cp, group_id, [])

    # -- KIP-848 consumer groups ---------------------------------------------------------------------------------

    def _restore_consumer_group(
        self, group_id: str, records: Mapping[ConsumerRecordKey, ConsumerRecordValue], now: int
    ) -> ConsumerGroup:
        return ConsumerGroup.restore(group_id, records, now, self.config.consumer_group, uuid_member_ids)

    def _topic_infos(self) -> Mapping[str, TopicInfo]:
        """The cluster's topics as consumer groups see them, rebuilt only when the metadata image changed."""
        image = self._image()
        if self._topic_infos_of is not image:
            self._topic_infos_of = image
            self._topic_infos_cache = {
                t.name: TopicInfo(t.topic_id, t.name, len(t.partitions)) for t in image.topics.values()
            }
        return self._topic_infos_cache

    async def _store_consumer_records(
        self, cp: CoordinatorPartition, group: ConsumerGroup, records: Sequence[tuple[RecordKey, RecordValue | None]]
    ) -> int:
        """Append a step's records; on success they join the group's stored records, on failure the group is
        rebuilt from those (the step never happened, as for Kafka's coordinator). The append's error code."""
        group_id = group.group_id
        code = await self._append(cp, records)
        if not cp.current():
            return ErrorCode.NOT_LEADER_OR_FOLLOWER if code == ErrorCode.NONE else code
        if code == ErrorCode.NONE:
            stored = cp.consumer_records.setdefault(group_id, {})
            for key, value in records:
                if isinstance(key, ConsumerRecordKey):
                    stored.pop(key, None)
                    if isinstance(value, ConsumerRecordValue):
                        stored[key] = value
            cp.consumer_groups[group_id] = group
        elif group_id in cp.consumer_records:
            logger.warning("consumer group %s: append failed (%s), rebuilt from its stored records", group_id, code)
            cp.consumer_groups[group_id] = self._restore_consumer_group(
                group_id, cp.consumer_records[group_id], self.clock()
            )
        else:
            cp.consumer_groups.pop(group_id, None)
        return code

    async def _consumer_tick(self, cp: CoordinatorPartition, group_id: str) -> None:
        async with cp.consumer_lock(group_id):
            group = cp.consumer_groups.get(group_id)
            if group is None or not cp.current():
                return
            result = group.tick(self.clock())
            for event in result.events:
                logger.info("consumer group %s: %s", group_id, event)
            if result.records:
                await self._store_consumer_records(cp, group, result.records)
        cp.wake.set()

    async def consumer_heartbeat(self, group_id: str, request: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResponse:
        """ConsumerGroupHeartbeat, answered once the records it caused are stored (acks=all). An empty classic
        group (offsets only, or no members left) becomes a consumer group on its first heartbeat, keeping its
        offsets; a classic group with members is not a consumer group (GROUP_ID_NOT_FOUND)."""
        cp = self._route(group_id)
        async with cp.consumer_lock(group_id):
            cp = self._route(group_id)  # it may have moved while this call waited
            group = cp.consumer_groups.get(group_id)
            upgraded: ClassicGroup | None = None
            if group is None:
                upgraded = cp.groups.get(group_id)
                if upgraded is not None and (upgraded.members or upgraded.pending_members):
                    return ConsumerHeartbeatResponse(
                        ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group."
                    )
                group = ConsumerGroup(group_id, self.config.consumer_group, uuid_member_ids)
            result = group.heartbeat(request, self.clock(), self._topic_infos())
            for event in result.events:
                logger.info("consumer group %s: %s", group_id, event)
            assert result.response is not None
            if not result.records:
                return result.response
            records: list[tuple[RecordKey, RecordValue | None]] = list(result.records)
            if upgraded is not None:
                records.insert(0, group_tombstone(group_id))
            code = await self._store_consumer_records(cp, group, records)
            if code != ErrorCode.NONE:
                error = append_error_to_response_error(ErrorCode.ValueType(code))
                return ConsumerHeartbeatResponse(error, f"the group's records could not be stored: {code}")
            if upgraded is not None and cp.groups.get(group_id) is upgraded:
                del cp.groups[group_id]
                logger.info("group %s upgraded from the classic protocol to the consumer protocol", group_id)
        cp.wake.set()
        return result.response

    def describe_consumer_group(
        self, group_id: str
    ) -> tuple[ErrorCode.ValueType, str | None, ConsumerGroupDescription | None]:
        """ConsumerGroupDescribe of one group: GROUP_ID_NOT_FOUND for an unknown group or one of another type."""
        cp = self._route(group_id)
        group = cp.consumer_groups.get(group_id)
        if group is None:
            if group_id in cp.groups:
                return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.", None
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
        return ErrorCode.NONE, None, group.describe()

    async def _delete_consumer_group(self, cp: CoordinatorPartition, group_id: str) -> ErrorCode.ValueType:
        """DeleteGroups of a consumer group: only without members; tombstones for its offsets and its records."""
        async with cp.consumer_lock(group_id):
            group = cp.consumer_groups.get(group_id)
            if group is None:
                return ErrorCode.GROUP_ID_NOT_FOUND
            if group.members:
                return ErrorCode.NON_EMPTY_GROUP
            offsets = cp.store.delete_group(group_id)
            code = await self._remove_consumer_group(cp, group_id, [*(offsets.records if offsets else ())])
            if offsets is not None and cp.current():
                (cp.store.on_appended if code == ErrorCode.NONE else cp.store.on_append_failed)(offsets.append_id)
            return ErrorCode.NONE if code == ErrorCode.NONE else commit_append_error(code)

    async def _drop_empty_consumer_group(self, cp: CoordinatorPartition, group_id: str) -> int:
        """Before a classic JoinGroup: a consumer group with members is INCONSISTENT_GROUP_PROTOCOL; an empty one is
        removed (tombstones for its records; its offsets stay), so the group goes on as a classic group."""
        async with cp.consumer_lock(group_id):
            group = cp.consumer_groups.get(group_id)
            if group is None:
                return ErrorCode.NONE
            if group.members:
                return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
            code = await self._remove_consumer_group(cp, group_id, [])
            if code == ErrorCode.NONE:
                logger.info("group %s converted from the consumer protocol to the classic protocol", group_id)
                return code
            return append_error_to_response_error(ErrorCode.ValueType(code))

    async def _remove_consumer_group(
        self, cp: CoordinatorPartition, group_id: str, records: list[tuple[RecordKey, RecordValue | None]]
    ) -> int:
        """Append ``records`` and tombstones for every stored record of the group; once stored, the group is gone."""
        records = [*records, *((key, None) for key in cp.consumer_records.get(group_id, {}))]
        code = await self._append(cp, records)
        if code == ErrorCode.NONE and cp.current():
            cp.consumer_groups.pop(group_id, None)
            cp.consumer_records.pop(group_id, None)
        return code

    def topic_names(self) -> dict[bytes, str]:
        """Topic id -> name, for answers that name the topics of an assignment."""
        return {t.topic_id: t.name for t in self._topic_infos().values()}

    # -- requests --------------------------------------------------------------------------------------------------

    async def _parked(
        self, cp: CoordinatorPartition, group: ClassicGroup, call: Callable[[int], GroupResult]
    ) -> JoinGroupResponse | SyncGroupResponse:
        token = next(self._tokens)
        future: asyncio.Future[JoinGroupResponse | SyncGroupResponse] = asyncio.get_running_loop().create_future()
        cp.waiters[token] = future
        self._apply(cp, group, call(token))
        try:
            return await future
        finally:
            cp.waiters.pop(token, None)

    async def join(self, group_id: str, request: JoinGroupRequest) -> JoinGroupResponse:
        """JoinGroup; ``request.token`` is ignored (the shell makes its own)."""
        cp = self._route(group_id)
        if group_id in cp.consumer_groups or group_id in cp.consumer_locks:
            # A KIP-848 group (or one a heartbeat may be making): with members, theirs is the consumer protocol;
            # without, it becomes a classic group.
            code = await self._drop_empty_consumer_group(cp, group_id)
            if code != ErrorCode.NONE:
                return JoinGroupResponse(ErrorCode.ValueType(code), request.member_id)
            cp = self._route(group_id)
        group = cp.groups.get(group_id)
        if group is None:
            if request.member_id:
                return JoinGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID, request.member_id)
            group = self._new_group(cp, group_id)

        def call(token: int) -> GroupResult:
            return group.join(
                JoinGroupRequest(
                    token=token,
                    member_id=request.member_id,
                    group_instance_id=request.group_instance_id,
                    client_id=request.client_id,
                    client_host=request.client_host,
                    session_timeout_ms=request.session_timeout_ms,
                    rebalance_timeout_ms=request.rebalance_timeout_ms,
                    protocol_type=request.protocol_type,
                    protocols=request.protocols,
                    reason=request.reason,
                ),
                self.clock(),
            )

        try:
            response = await self._parked(cp, group, call)
        finally:
            self._drop_if_unused(cp, group_id)
        assert isinstance(response, JoinGroupResponse)
        return response

    async def sync(self, group_id: str, request: SyncGroupRequest) -> SyncGroupResponse:
        cp = self._route(group_id)
        group = cp.groups.get(group_id)
        if group is None:
            return SyncGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID)

        def call(token: int) -> GroupResult:
            return group.sync(
                SyncGroupRequest(
                    token=token,
                    member_id=request.member_id,
                    group_instance_id=request.group_instance_id,
                    generation_id=request.generation_id,
                    protocol_type=request.protocol_type,
                    protocol_name=request.protocol_name,
                    assignments=request.assignments,
                ),
                self.clock(),
            )

        response = await self._parked(cp, group, call)
        assert isinstance(response, SyncGroupResponse)
        return response

    def heartbeat(self, group_id: str, request: HeartbeatRequest) -> HeartbeatResponse:
        cp = self._route(group_id)
        group = cp.groups.get(group_id)
        if group is None:
            return HeartbeatResponse(ErrorCode.UNKNOWN_MEMBER_ID)
        response = group.heartbeat(request, self.clock())
        cp.wake.set()
        return response

    def leave(self, group_id: str, request: LeaveGroupRequest) -> LeaveGroupResponse:
        cp = self._route(group_id)
        group = cp.groups.get(group_id)
        if group is None:
            return LeaveGroupResponse(
                ErrorCode.NONE,
                tuple(
                    LeftMember(m.member_id, m.group_instance_id, ErrorCode.UNKNOWN_MEMBER_ID) for m in request.members
                ),
            )
        response, result = group.leave(request, self.clock())
        self._apply(cp, group, result)
        return response

    async def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, ErrorCode.ValueType]:
        """OffsetCommit: the error of each partition. A commit with generation -1 and no member is a simple
        commit (a consumer using ``assign``), accepted while the group has no members."""
        cp = self._route(group_id)
        consumer_group = cp.consumer_groups.get(group_id)
        group = cp.groups.get(group_id)
        if group is None and consumer_group is None:
            if generation_id >= 0 or member_id:
                return dict.fromkeys(offsets, ErrorCode.ILLEGAL_GENERATION)
            group = self._new_group(cp, group_id)
        try:
            if consumer_group is not None:  # the generation field carries the member epoch (OffsetCommit v9+)
                error = consumer_group.validate_offset_commit(member_id, generation_id)
            else:
                assert group is not None
                error = group.validate_offset_commit(member_id, group_instance_id, generation_id)
            if error != ErrorCode.NONE:
                return dict.fromkeys(offsets, ErrorCode.ValueType(error))
            image = self._image()
            errors: dict[TopicPartition, ErrorCode.ValueType] = {}
            valid: dict[TopicPartition, OffsetAndMetadata] = {}
            for tp, commit in offsets.items():
                if image.partition(tp.topic, tp.partition) is None:
                    errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    valid[tp] = commit
            result = cp.store.prepare_commit(group_id, valid, self.clock())
            errors.update({tp: ErrorCode.ValueType(code) for tp, code in result.errors.items()})
            if result.append is not None:
                code = await self._append(cp, result.append.records)
                if cp.current():
                    if code == ErrorCode.NONE:
                        cp.store.on_appended(result.append.append_id)
                    else:
                        cp.store.on_append_failed(result.append.append_id)
                elif code == ErrorCode.NONE:
                    code = ErrorCode.NOT_LEADER_OR_FOLLOWER  # unloaded meanwhile: its fate is the next coordinator's
                accepted = [tp for tp, c in result.errors.items() if c == ErrorCode.NONE]
                for tp in accepted:
                    errors[tp] = commit_append_error(code)
                if code == ErrorCode.NONE:
                    self.commits[group_id] = self.commits.get(group_id, 0) + len(accepted)
            return errors
        finally:
            self._drop_if_unused(cp, group_id)

    async def txn_commit_offsets(
        self,
        group_id: str,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, int]:
        """TxnOffsetCommit: the error of each partition. The KIP-447 checks run against the live group (a group
        that does not exist yet is checked as a new, empty one: generation -1 and no member pass); the accepted
        offsets are appended as one transactional batch of the producer and stay pending until its marker."""
        cp = self._route(group_id)
        if producer_id < 0 or not 0 <= producer_epoch < 2**15:
            return dict.fromkeys(offsets, int(ErrorCode.INVALID_REQUEST))
        consumer_group = cp.consumer_groups.get(group_id)
        group = cp.groups.get(group_id)
        if group is None and consumer_group is None:
            group = self._new_group(cp, group_id)
        try:
            if consumer_group is not None:
                error = consumer_group.validate_offset_commit(
                    member_id, generation_id, group_instance_id, transactional=True
                )
            else:
                assert group is not None
                error = group.validate_txn_offset_commit(member_id, group_instance_id, generation_id)
            if error != ErrorCode.NONE:
                return dict.fromkeys(offsets, int(error))
            image = self._image()
            errors: dict[TopicPartition, int] = {}
            valid: dict[TopicPartition, OffsetAndMetadata] = {}
            for tp, commit in offsets.items():
                if image.partition(tp.topic, tp.partition) is None:
                    errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    valid[tp] = commit
            result = cp.store.prepare_txn_commit(group_id, producer_id, producer_epoch, valid, self.clock())
            errors.update(result.errors)
            if result.append is not None:
                code = await self._append(cp, result.append.records, producer_id, producer_epoch)
                if cp.current():
                    if code == ErrorCode.NONE:
                        cp.store.on_appended(result.append.append_id)
                    else:
                        cp.store.on_append_failed(result.append.append_id)
                elif code == ErrorCode.NONE:
                    code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                if code != ErrorCode.NONE:
                    logger.info(
                        "TxnOffsetCommit of %s (producer %d, epoch %d) for group %s failed: %s",
                        transactional_id or "-",
                        producer_id,
                        producer_epoch,
                        group_id,
                        ErrorCode.Name(ErrorCode.ValueType(code)),
                    )
                for tp, c in result.errors.items():
                    if c == ErrorCode.NONE:
                        errors[tp] = commit_append_error(code)
            return errors
        finally:
            self._drop_if_unused(cp, group_id)

    def on_txn_marker(self, offsets_partition: int, producer_id: int, committed: bool) -> None:
        """A COMMIT or ABORT marker of ``producer_id`` was replicated in ``__consumer_offsets-offsets_partition``:
        commit or drop the producer's pending offsets there. A partition not coordinated here is left to whoever
        loads it (it replays the marker); one still loading applies it once it has read its log."""
        cp = self.partitions.get(offsets_partition)
        if cp is None or not cp.current():
            return
        if not cp.replayed:
            cp.deferred_markers.append((producer_id, committed))
            return
        applied = cp.store.on_txn_marker(producer_id, committed)
        now = self.clock()
        for key in applied:
            self.commits[key.group] = self.commits.get(key.group, 0) + 1
            if key.group not in cp.groups:
                cp.groups[key.group] = ClassicGroup(key.group, self.config.group, self._member_ids, now)
        logger.debug(
            "offsets partition %d: %s of producer %d (%d offsets committed)",
            offsets_partition,
            "COMMIT" if committed else "ABORT",
            producer_id,
            len(applied),
        )

    def unstable_partitions(self, group_id: str, partitions: Iterable[TopicPartition] | None) -> set[TopicPartition]:
        """Of ``partitions`` (None: all the group's), those with transactional offsets waiting for their marker
        (OffsetFetch with require_stable answers them UNSTABLE_OFFSET_COMMIT)."""
        cp = self._route(group_id)
        pending = cp.store.pending_txn_partitions(group_id)
        return pending if partitions is None else pending.intersection(partitions)

    def fetch_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[ErrorCode.ValueType, dict[TopicPartition, OffsetCommitValue]]:
        """OffsetFetch: the committed offsets of ``partitions`` (offset -1 where none), or all of the group's. A
        member of a consumer group fetching with its member id (OffsetFetch v9+) must give its current epoch."""
        cp = self._route(group_id)
        consumer_group = cp.consumer_groups.get(group_id)
        if consumer_group is not None:
            error = consumer_group.validate_offset_fetch(member_id, member_epoch)
            if error != ErrorCode.NONE:
                return error, {}
        group = cp.groups.get(group_id)
        if group is not None:
            error = group.validate_offset_fetch()
            if error != ErrorCode.NONE:
                return ErrorCode.ValueType(error), {}
        return ErrorCode.NONE, cp.store.fetch(group_id, None if partitions is None else list(partitions))

    async def delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> tuple[ErrorCode.ValueType, dict[TopicPartition, ErrorCode.ValueType]]:
        """OffsetDelete: tombstones for the partitions of topics no member subscribes to. Only a consumer group
        may have members (NON_EMPTY_GROUP otherwise), and one whose subscriptions do not decode counts as
        subscribed to every topic. A partition the metadata lacks is UNKNOWN_TOPIC_OR_PARTITION, as Kafka's broker
        answers it without asking its coordinator: its offsets, if any, went with its topic (``on_leadership``)."""
        cp = self._route(group_id)
        consumer_group = cp.consumer_groups.get(group_id)
        group = cp.groups.get(group_id)
        subscribed: set[str] | None = set()  # None: every topic
        if consumer_group is not None:  # named by a member, or matched by one's regular expression
            subscribed = {n for m in consumer_group.members.values() for n in m.metadata.subscribed_topic_names}
            subscribed.update(t.name for t in consumer_group.subscribed_topics)
        elif group is None or group.state is GroupState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        elif group.state is not GroupState.EMPTY:
            if group.protocol_type != CONSUMER_PROTOCOL:
                return ErrorCode.NON_EMPTY_GROUP, {}
            subscribed = subscribed_topics(group)
        image = self._image()
        errors: dict[TopicPartition, ErrorCode.ValueType] = {}
        deletable = []
        for tp in partitions:
            if image.partition(tp.topic, tp.partition) is None:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif subscribed is None or tp.topic in subscribed:
                errors[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                errors[tp] = ErrorCode.NONE
                deletable.append(tp)
        append = cp.store.delete_partitions(group_id, deletable)
        if append is not None:
            code = await self._write(cp, append)
            if code != ErrorCode.NONE:
                return commit_append_error(code), {}
        return ErrorCode.NONE, errors

    def list_groups(
        self, states: Iterable[str] = (), types: Iterable[str] = ()
    ) -> tuple[ErrorCode.ValueType, list[GroupListing]]:
        """ListGroups over the partitions this broker coordinates (COORDINATOR_LOAD_IN_PROGRESS while one loads),
        of the given states and group types (any case; none given: all)."""
        wanted = {s.lower() for s in states}
        kinds = {t.lower() for t in types}
        out: list[GroupListing] = []
        loading = False
        for cp in self.partitions.values():
            if not cp.current():
                continue
            if not cp.loaded:
                loading = True
                continue
            out.extend(
                g.listing()
                for g in cp.groups.values()
                if g.state is not GroupState.DEAD and (not wanted or g.state.value.lower() in wanted)
            )
            out.extend(
                g.listing() for g in cp.consumer_groups.values() if not wanted or g.state.value.lower() in wanted
            )
        if kinds:
            out = [g for g in out if g.group_type in kinds]
        return (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if loading else ErrorCode.NONE), sorted(
            out, key=lambda g: g.group_id
        )

    def describe(self, group_id: str) -> GroupDescription:
        """DescribeGroups of one group: an unknown group is described as Dead, as Kafka does."""
        cp = self._route(group_id)
        consumer_group = cp.consumer_groups.get(group_id)
        if consumer_group is not None:
            return consumer_group.classic_description()
        group = cp.groups.get(group_id)
        if group is None:
            return GroupDescription(group_id, GroupState.DEAD.value, "", "", -1, "", ())
        return group.describe()

    async def delete_group(self, group_id: str) -> ErrorCode.ValueType:
        """DeleteGroups of one group: only an Empty group; tombstones for its offsets and its metadata."""
        cp = self._route(group_id)
        if group_id in cp.consumer_groups:
            return await self._delete_consumer_group(cp, group_id)
        group = cp.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        error, result = group.delete(self.clock())
        self._apply(cp, group, result)
        if error != ErrorCode.NONE:
            return ErrorCode.ValueType(error)
        del cp.groups[group_id]
        offsets = cp.store.delete_group(group_id)
        records: list[tuple[RecordKey, RecordValue | None]] = [*(offsets.records if offsets else ())]
        records.append(group_tombstone(group_id))
        code = await self._append(cp, records)
        if offsets is not None and cp.current():
            (cp.store.on_appended if code == ErrorCode.NONE else cp.store.on_append_failed)(offsets.append_id)
        return ErrorCode.NONE if code == ErrorCode.NONE else commit_append_error(code)

    # -- metrics ---------------------------------------------------------------------------------------------------

    def committed_offsets(self) -> dict[str, dict[TopicPartition, int]]:
        """Every committed offset of the groups coordinated here (loaded partitions this broker still leads)."""
        out: dict[str, dict[TopicPartition, int]] = {}
        for cp in self.partitions.values():
            if not cp.loaded or not cp.current():
                continue
            for group_id in cp.store.groups():
                offsets = {tp: v.offset for tp, v in cp.store.fetch(group_id).items() if v.offset >= 0}
                if offsets:
                    out[group_id] = offsets
        return out

    def metrics(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        """The coordinated groups' gauges and counters, read at scrape time."""
        members = GaugeMetricFamily("odradek_group_members", "members of each coordinated group", labels=["group"])
        state = GaugeMetricFamily(
            "odradek_group_state", "1 for the state each coordinated group is in", labels=["group", "state"]
        )
        generation = GaugeMetricFamily("odradek_group_generation", "generation id of each group", labels=["group"])
        committed = GaugeMetricFamily(
            "odradek_group_committed_offset",
            "committed offset of each group and partition",
            labels=["group", "topic", "partition"],
        )
        for cp in self.partitions.values():
            if not cp.loaded or not cp.current():
                continue
            for group_id, group in cp.groups.items():
                members.add_metric([group_id], len(group.members))
                state.add_metric([group_id, group.state.value], 1)
                generation.add_metric([group_id], group.generation_id)
            for group_id, consumer_group in cp.consumer_groups.items():  # a consumer group's generation: its epoch
                members.add_metric([group_id], len(consumer_group.members))
                state.add_metric([group_id, consumer_group.state.value], 1)
                generation.add_metric([group_id], consumer_group.group_epoch)
            for group_id in sorted(cp.groups.keys() | cp.consumer_groups.keys()):
                for tp, value in sorted(cp.store.fetch(group_id).items()):
                    committed.add_metric([group_id, tp.topic, str(tp.partition)], value.offset)
        yield members
        yield state
        yield generation
        yield committed
        rebalances = CounterMetricFamily(
            "odradek_group_rebalances", "generations completed while coordinated here", labels=["group"]
        )
        for group_id, n in sorted(self.rebalances.items()):
            rebalances.add_metric([group_id], n)
        yield rebalances
        commits = CounterMetricFamily(
            "odradek_offset_commits", "partition offsets committed while coordinated here", labels=["group"]
        )
        for group_id, n in sorted(self.commits.items()):
            commits.add_metric([group_id], n)
        yield commits


__all__ = [
    "ClassicGroup",
    "CoordinatorConfig",
    "CoordinatorError",
    "GroupCoordinator",
    "append_error_to_response_error",
    "commit_append_error",
    "subscribed_topics",
]
