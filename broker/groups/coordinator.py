"""The group coordinator: the group state machines and the offset stores, plugged into the coordinator runtime.

A broker coordinates the groups whose ``__consumer_offsets`` partition it leads. The runtime
(broker/coordinator/runtime.py) loads each such partition, routes requests to it (NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS), appends and waits for the high watermark (acks=all) up to
``offsets.commit.timeout.ms``, and runs its timer task. Each partition's shard is a ``GroupShard``: its
``ClassicGroup``s, KIP-848 ``ConsumerGroup``s and its ``OffsetStore``, replayed from the log when the broker becomes
leader and dropped when it stops leading (or the leader epoch changes). The decisions are the cores'; this
coordinator

- steps the cores with each request and reports each append's outcome back to them;
- fires its groups' timers when the runtime's timer task asks (it sleeps until the earliest ``next_deadline_ms`` of
  the partition's groups, woken whenever a request may have moved it) and runs the offset retention;
- drops the offsets of deleted topics: after each metadata change (``on_leadership``) it compares the image's
  topics with those it saw last, and each partition writes tombstones for the deleted topics' offsets;
- appends a TxnOffsetCommit as one transactional batch of the producer and, told by ``on_txn_marker`` that the
  producer's marker reached the partition, commits or drops those offsets (see offsets.py).

Clock: the cores see the coordinators' clock (broker/coordinator/clock.py): milliseconds that never go backwards
within the process but read as wall time, so timers are immune to clock steps and the timestamps it persists
(commit times, the time a group became empty) still mean something to the next coordinator.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from odradek.broker.config import NodeConfig
from odradek.broker.coordinator.clock import Clock
from odradek.broker.coordinator.decisions import earliest, sleep_s
from odradek.broker.coordinator.runtime import CoordinatorPartition, CoordinatorRuntime
from odradek.broker.groups.consumer_group import (
    Authorized,
    ConsumerGroup,
    ConsumerGroupConfig,
    GroupOverrides,
    MigrationRefused,
)
from odradek.broker.groups.consumer_messages import (
    ClassicDowngrade,
    ConsumerGroupDescription,
    ConsumerGroupResult,
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResponse,
    TopicInfo,
)
from odradek.broker.groups.consumer_records import ConsumerRecordKey, ConsumerRecordValue
from odradek.broker.groups.group import ClassicGroup, GroupConfig, GroupState, append_error_to_response_error
from odradek.broker.groups.loader import encode_records, group_record, replay_batches, snapshot_of
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
from odradek.broker.groups.records import (
    OFFSETS_TOPIC,
    GroupMetadataValue,
    OffsetCommitValue,
    RecordKey,
    RecordValue,
    group_tombstone,
)
from odradek.broker.groups.share_records import ShareRecordKey, ShareRecordValue
from odradek.broker.partition import Partition
from odradek.client.common.group_configs import group_overrides
from odradek.client.common.metadata_image import MetadataImage, TopicImage
from odradek.client.consumer.protocol import Subscription
from odradek.client.errors import ErrorCode, OdradekError
from odradek.client.record.batch import Bytes
from odradek.client.structs import TopicPartition

logger = logging.getLogger(__name__)

CONSUMER_PROTOCOL = "consumer"  # the protocol type of consumer groups, whose member metadata is a Subscription


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
                migration_policy=c["group.consumer.migration.policy"],
                classic_max_size=c["group.max.size"],
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


def topic_infos(image: MetadataImage) -> dict[str, TopicInfo]:
    """The cluster's topics as consumer groups see them: with the racks of each partition's replicas (every replica,
    in the ISR or not, as Kafka's rack-aware assignors count them) when some broker has a rack (``broker.rack``)."""
    racks_of = {b.broker_id: b.rack for b in image.brokers.values() if b.rack}
    out = {}
    for t in image.topics.values():
        count = len(t.partitions)
        racks: tuple[frozenset[str], ...] = ()
        if racks_of:
            racks = tuple(
                frozenset(racks_of[r] for r in p.replicas if r in racks_of)
                if (p := t.partitions.get(i)) is not None
                else frozenset()
                for i in range(count)
            )
        out[t.name] = TopicInfo(t.topic_id, t.name, count, racks)
    return out


def uuid_member_ids(prefix: str) -> str:
    """Kafka's member ids: the client id (or group instance id) and a random UUID; just the UUID for a client that
    sent no client id (rather than an id starting with '-')."""
    return f"{prefix}-{uuid.uuid4()}" if prefix else str(uuid.uuid4())


class GroupShard:
    """The groups and offsets of one offsets partition this broker leads, from loading to unloading."""

    def __init__(self, offset_metadata_max_bytes: int) -> None:
        self.store = OffsetStore(offset_metadata_max_bytes)
        self.groups: dict[str, ClassicGroup] = {}
        # KIP-848 groups; each one's stored records (the last value of each key) rebuild it when an append fails,
        # and its lock keeps one heartbeat or timer at a time between the core's step and the append it waits for.
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.consumer_records: dict[str, dict[ConsumerRecordKey, ConsumerRecordValue]] = {}
        self.consumer_locks: dict[str, asyncio.Lock] = {}
        # KIP-932 share groups' stored records (the last value of each key), which the share group coordinator
        # restores its groups from once the partition is replayed and keeps up to date as it appends.
        self.share_records: dict[str, dict[ShareRecordKey, ShareRecordValue]] = {}
        self.generations: dict[str, int] = {}
        self.replayed_groups: dict[str, GroupMetadataValue] = {}  # the last metadata record of each, while loading
        self.deferred_markers: list[tuple[int, bool]] = []  # markers reported while the load was still reading
        self.deferred_deletions: list[TopicPartition] = []  # partitions of topics deleted while it was loading

    def consumer_lock(self, group_id: str) -> asyncio.Lock:
        lock = self.consumer_locks.get(group_id)
        if lock is None:
            lock = self.consumer_locks[group_id] = asyncio.Lock()
        return lock


ParkedResponse = JoinGroupResponse | SyncGroupResponse
OffsetsPartition = CoordinatorPartition[GroupShard, ParkedResponse]


class ShareGroups(Protocol):
    """The share groups (KIP-932) kept on the same partitions (broker/share/group_coordinator.py): one group id is
    one kind of group, and ListGroups and DeleteGroups cover them too."""

    def owns(self, cp: OffsetsPartition, group_id: str) -> bool: ...

    def replayed(self, cp: OffsetsPartition) -> None:
        """The partition's log is replayed: restore its share groups from ``cp.shard.share_records``."""
        ...

    def loaded(self, cp: OffsetsPartition) -> None:
        """The partition serves: start its share groups' timers."""
        ...

    def listings(self, cp: OffsetsPartition) -> list[GroupListing]: ...

    async def delete(self, cp: OffsetsPartition, group_id: str) -> ErrorCode.ValueType: ...


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
        self.clock = clock or Clock()
        self._member_ids = member_ids
        self.runtime: CoordinatorRuntime[GroupShard, ParkedResponse] = CoordinatorRuntime(
            self,
            OFFSETS_TOPIC,
            image,
            config.num_partitions,
            config.replication_factor,
            create_offsets_topic,
            config.commit_timeout_ms,
        )
        self.rebalances: dict[str, int] = {}
        self.commits: dict[str, int] = {}
        self._topics: Mapping[bytes, TopicImage] = image().topics  # as the last leadership call saw them
        self._topic_infos_of: MetadataImage | None = None
        self._topic_infos_cache: dict[str, TopicInfo] = {}
        self._regex_inputs: tuple[object, object] = (None, None)  # the topic names and ACLs last seen
        self._regex_version_at = 0
        self.share_groups: ShareGroups | None = None  # set once the share group coordinator exists

    @property
    def partitions(self) -> dict[int, OffsetsPartition]:
        """The offsets partitions this broker leads, by index."""
        return self.runtime.partitions

    # -- leadership ------------------------------------------------------------------------------------------------

    def on_leadership(self, partitions: Mapping[tuple[str, int], Partition]) -> None:
        """Load the offsets partitions this broker now leads, unload those it stopped leading (or leads at a new
        epoch: a load in progress for an old epoch is abandoned). The replica manager calls this after every
        metadata change, so it is also where the offsets of deleted topics are dropped."""
        self.runtime.on_leadership(partitions)
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
                cp.shard.deferred_deletions.extend(deleted)

    async def _drop_offsets(self, cp: OffsetsPartition, partitions: Sequence[TopicPartition]) -> None:
        append = cp.shard.store.on_partitions_deleted(partitions)
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

    # -- what the runtime calls ------------------------------------------------------------------------------------

    def new_shard(self, index: int) -> GroupShard:
        return GroupShard(self.config.offset_metadata_max_bytes)

    def replay(self, cp: OffsetsPartition, records: Bytes) -> None:
        shard = cp.shard
        replay_batches(
            records,
            shard.store,
            shard.replayed_groups,
            consumer_groups=shard.consumer_records,
            share_groups=shard.share_records,
        )

    def on_replayed(self, cp: OffsetsPartition) -> None:
        """Apply the markers reported while the load read the log (one past the end it started at may be there;
        one it read is a no-op again), then restore the groups from their records."""
        shard = cp.shard
        for producer_id, committed in shard.deferred_markers:
            shard.store.on_txn_marker(producer_id, committed)
        shard.deferred_markers.clear()
        groups, shard.replayed_groups = shard.replayed_groups, {}
        now = self.clock()
        for group_id, value in groups.items():
            shard.groups[group_id] = ClassicGroup.restore(
                snapshot_of(group_id, value), now, self.config.group, self._member_ids
            )
            shard.generations[group_id] = value.generation
        for group_id, records in shard.consumer_records.items():
            groups.pop(group_id, None)
            shard.groups.pop(group_id, None)
            shard.consumer_groups[group_id] = self._restore_consumer_group(group_id, records, now)
        for group_id in shard.store.groups() - set(groups) - set(shard.consumer_records):
            shard.groups[group_id] = ClassicGroup(group_id, self.config.group, self._member_ids, now)
        if self.share_groups is not None:
            self.share_groups.replayed(cp)

    def on_loaded(self, cp: OffsetsPartition) -> None:
        cp.spawn(self._retention(cp), f"offsets-retention-{cp.index}")
        if self.share_groups is not None:
            self.share_groups.loaded(cp)
        if cp.shard.deferred_deletions:
            cp.spawn(self._drop_offsets(cp, cp.shard.deferred_deletions), f"drop-deleted-offsets-{cp.index}")

    def on_unloaded(self, cp: OffsetsPartition) -> None:
        """Its groups go Dead (their parked calls answer NOT_COORDINATOR) and its pending appends count as failed."""
        now = self.clock()
        for group in cp.shard.groups.values():
            self._apply(cp, group, group.unload(now))
        cp.shard.store.abort_pending()

    def fire_timers(self, cp: OffsetsPartition) -> float | None:
        """Fire each group's due timers; the seconds until the earliest deadline left. A consumer group's tick
        appends, so it runs in a task, which (or the heartbeat holding the group) wakes the timers once done."""
        shard = cp.shard
        now = self.clock()
        deadlines: list[int | None] = []
        for group in list(shard.groups.values()):
            deadline = group.next_deadline_ms()
            if deadline is not None and deadline <= now:
                self._apply(cp, group, group.tick(now))
                deadline = group.next_deadline_ms()
            deadlines.append(deadline)
        for group_id, consumer_group in list(shard.consumer_groups.items()):
            deadline = consumer_group.next_deadline_ms()
            if deadline is not None and deadline <= now:
                if not shard.consumer_lock(group_id).locked():
                    cp.spawn(self._consumer_tick(cp, group_id), f"consumer-group-timers-{group_id}")
                continue
            deadlines.append(deadline)
        return sleep_s(earliest(deadlines), self.clock())

    def summary(self, shard: GroupShard) -> str:
        return (
            f"{len(shard.groups)} groups, {len(shard.consumer_groups)} consumer groups, "
            f"{len(shard.share_records)} share groups"
        )

    async def close(self) -> None:
        await self.runtime.close()

    # -- routing ---------------------------------------------------------------------------------------------------

    def offsets_partition_count(self) -> int:
        return self.runtime.partition_count()

    def offsets_partitions_for_transactions(self) -> int:
        """The partition count AddOffsetsToTxn maps a group with. A transaction may add a group's offsets before any
        consumer of the group found its coordinator: the topic does not exist yet, so its creation starts now and
        the configured count, which it will be created with, is the answer (as Kafka's coordinator does)."""
        if self._image().topic(OFFSETS_TOPIC) is None:
            self.runtime.ensure_topic()
        return self.offsets_partition_count()

    def partition_of(self, group_id: str) -> int:
        return self.runtime.partition_of(group_id)

    def find_coordinator(self, group_id: str) -> tuple[ErrorCode.ValueType, int, str, int]:
        """(error, node id, host, port) of the leader of the group's offsets partition; creates the offsets topic on
        first use (COORDINATOR_NOT_AVAILABLE until it exists and the partition has a live leader)."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, -1, "", -1
        return self.runtime.find_coordinator(group_id)

    def _route(self, group_id: str) -> OffsetsPartition:
        if not group_id:
            raise CoordinatorError("the group id is empty", code=ErrorCode.INVALID_GROUP_ID)
        if self._image().topic(OFFSETS_TOPIC) is None:
            raise CoordinatorError("the offsets topic does not exist yet", code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        error, cp = self.runtime.owner(group_id)
        if cp is None:
            raise CoordinatorError(
                f"broker {self.broker_id} cannot serve {OFFSETS_TOPIC}-{self.partition_of(group_id)}", code=error
            )
        return cp

    def _new_group(self, cp: OffsetsPartition, group_id: str) -> ClassicGroup:
        group = ClassicGroup(group_id, self.config.group, self._member_ids, self.clock())
        cp.shard.groups[group_id] = group
        return group

    def _drop_if_unused(self, cp: OffsetsPartition, group_id: str) -> None:
        """A group made for a request that then changed nothing (refused) leaves no trace."""
        store = cp.shard.store
        group = cp.shard.groups.get(group_id)
        if (
            group is not None
            and group.state is GroupState.EMPTY
            and not group.members
            and not group.pending_members
            and group.generation_id == 0
            and group.protocol_type is None
            and not store.has_offsets(group_id)
            and not store.has_pending(group_id)
        ):
            del cp.shard.groups[group_id]

    # -- the cores' actions ----------------------------------------------------------------------------------------

    def _apply(self, cp: OffsetsPartition, group: ClassicGroup, result: GroupResult) -> None:
        for event in result.events:
            logger.info("%s", event)
        for action in result.actions:
            if isinstance(action, Respond):
                cp.answer(int(action.token), action.response)  # type: ignore[call-overload]
            elif isinstance(action, PersistGroup):
                self._persist(cp, group, action)
        generations = cp.shard.generations
        before = generations.get(group.group_id, 0)
        if group.generation_id > before:
            self.rebalances[group.group_id] = self.rebalances.get(group.group_id, 0) + group.generation_id - before
        generations[group.group_id] = group.generation_id
        cp.wake.set()

    def _persist(self, cp: OffsetsPartition, group: ClassicGroup, action: PersistGroup) -> None:
        def report(error: int) -> None:
            if cp.current() and cp.shard.groups.get(group.group_id) is group:
                self._apply(cp, group, group.on_persisted(action.persist_id, self.clock(), ErrorCode.ValueType(error)))

        batch = encode_records([group_record(action.group)], self.clock())
        self.runtime.persist(cp, batch, report, f"persist-{group.group_id}")

    async def _append(self, cp: OffsetsPartition, records: Sequence[tuple[RecordKey, RecordValue | None]]) -> int:
        """The runtime's append of ``records`` (acks=all, up to offsets.commit.timeout.ms); the outcome's code."""
        return await self.runtime.append(cp, encode_records(records, self.clock()))

    async def _write(self, cp: OffsetsPartition, append: Append) -> int:
        """The append of the offset store's records (with a producer id: one transactional batch of that producer),
        whose outcome goes back to the store (unless the partition stopped being current meanwhile: the store
        drops them as it unloads)."""
        batch = encode_records(append.records, self.clock(), append.producer_id, append.producer_epoch)
        code = await self.runtime.append(cp, batch)
        self._settle(cp, append, code)
        return code

    @staticmethod
    def _settle(cp: OffsetsPartition, append: Append | None, code: int) -> None:
        """Report an append's outcome to the offset store, unless the partition stopped being current meanwhile (the
        store drops its pending appends as it unloads)."""
        if append is not None and cp.current():
            store = cp.shard.store
            (store.on_appended if code == ErrorCode.NONE else store.on_append_failed)(append.append_id)

    async def _retention(self, cp: OffsetsPartition) -> None:
        while cp.current():
            await asyncio.sleep(self.config.retention_check_interval_ms / 1000)
            await self.expire_offsets(cp)

    async def expire_offsets(self, cp: OffsetsPartition) -> None:
        """Tombstones for offsets past offsets.retention.minutes; an Empty group left without offsets goes Dead
        and gets its own tombstone (Kafka's offset expiration)."""
        now = self.clock()

        def empty_since(group_id: str) -> int | None:
            consumer_group = cp.shard.consumer_groups.get(group_id)
            if consumer_group is not None:  # kept while it has members, else from each offset's commit
                return None if consumer_group.members else USE_COMMIT_TIMESTAMP
            group = cp.shard.groups.get(group_id)
            if group is None or group.protocol_type is None:
                return USE_COMMIT_TIMESTAMP
            if group.state is not GroupState.EMPTY:
                return None
            return USE_COMMIT_TIMESTAMP if group.state_timestamp_ms is None else group.state_timestamp_ms

        append = cp.shard.store.expired(now, self.config.retention_ms, empty_since)
        if append is not None:
            error = await self._write(cp, append)
            if not cp.current() or error != ErrorCode.NONE:
                return
            logger.info("offsets partition %d: %d offsets expired", cp.index, len(append.records))
        dead = [
            g
            for gid, g in cp.shard.groups.items()
            if g.state is GroupState.EMPTY
            and not g.pending_members
            and not cp.shard.store.has_offsets(gid)
            and not cp.shard.store.has_pending(gid)
        ]
        for group in dead:
            group.delete(now)
            del cp.shard.groups[group.group_id]
        if dead:
            await self._append(cp, [group_tombstone(g.group_id) for g in dead])
        for group_id in [gid for gid, g in cp.shard.consumer_groups.items() if not g.members]:
            async with cp.shard.consumer_lock(group_id):  # an empty consumer group left without offsets is deleted
                group_now = cp.shard.consumer_groups.get(group_id)
                if group_now is None or group_now.members or not cp.current():
                    continue
                if not cp.shard.store.has_offsets(group_id) and not cp.shard.store.has_pending(group_id):
                    await self._remove_consumer_group(cp, group_id, [])

    # -- KIP-848 consumer groups ---------------------------------------------------------------------------------

    def _restore_consumer_group(
        self, group_id: str, records: Mapping[ConsumerRecordKey, ConsumerRecordValue], now: int
    ) -> ConsumerGroup:
        group = ConsumerGroup.restore(group_id, records, now, self.config.consumer_group, uuid_member_ids)
        if self._configured(group) != GroupOverrides():
            group.start_sessions(now)  # with the group's own session timeout
        return group

    def _configured(self, group: ConsumerGroup) -> GroupOverrides:
        """Give the group its own configs (KIP-848 group configs, as the metadata image has them); they apply from
        each member's next heartbeat."""
        session, interval = group_overrides(self._image().group_configs(group.group_id))
        group.overrides = GroupOverrides(session, interval)
        return group.overrides

    def _topic_infos(self) -> Mapping[str, TopicInfo]:
        """The cluster's topics as consumer groups see them, rebuilt only when the metadata image changed."""
        image = self._image()
        if self._topic_infos_of is not image:
            self._topic_infos_of = image
            self._topic_infos_cache = topic_infos(image)
        return self._topic_infos_cache

    async def _store_consumer_records(
        self, cp: OffsetsPartition, group: ConsumerGroup, records: Sequence[tuple[RecordKey, RecordValue | None]]
    ) -> int:
        """Append a step's records; on success they join the group's stored records, on failure the group is
        rebuilt from those (the step never happened, as for Kafka's coordinator). The append's error code."""
        group_id = group.group_id
        code = await self._append(cp, records)
        if not cp.current():
            return cp.acknowledged(code)
        if code == ErrorCode.NONE:
            stored = cp.shard.consumer_records.setdefault(group_id, {})
            for key, value in records:
                if isinstance(key, ConsumerRecordKey):
                    stored.pop(key, None)
                    if isinstance(value, ConsumerRecordValue):
                        stored[key] = value
            cp.shard.consumer_groups[group_id] = group
        elif group_id in cp.shard.consumer_records:
            logger.warning("consumer group %s: append failed (%s), rebuilt from its stored records", group_id, code)
            cp.shard.consumer_groups[group_id] = self._restore_consumer_group(
                group_id, cp.shard.consumer_records[group_id], self.clock()
            )
        else:
            cp.shard.consumer_groups.pop(group_id, None)
        return code

    async def _consumer_tick(self, cp: OffsetsPartition, group_id: str) -> None:
        async with cp.shard.consumer_lock(group_id):
            group = cp.shard.consumer_groups.get(group_id)
            if group is None or not cp.current():
                return
            self._configured(group)
            result = group.tick(self.clock())
            for event in result.events:
                logger.info("consumer group %s: %s", group_id, event)
            await self._consumer_step(cp, group, result)
        cp.wake.set()

    async def _consumer_step(
        self,
        cp: OffsetsPartition,
        group: ConsumerGroup,
        result: ConsumerGroupResult,
        before: Sequence[tuple[RecordKey, RecordValue | None]] = (),
    ) -> int:
        """Store a step's records (after ``before``: an upgrade's), as one batch with, for a downgrade, the classic
        group's metadata record; once stored, a downgraded group is replaced by its classic group. The append's
        error code (NONE when there was nothing to store)."""
        records: list[tuple[RecordKey, RecordValue | None]] = [*before, *result.records]
        if result.downgrade is not None:
            records.append(group_record(result.downgrade.snapshot))
        if not records:
            return ErrorCode.NONE
        code = await self._store_consumer_records(cp, group, records)
        if code == ErrorCode.NONE and result.downgrade is not None and cp.current():
            self._install_downgrade(cp, result.downgrade)
        return code

    def _install_downgrade(self, cp: OffsetsPartition, downgrade: ClassicDowngrade) -> None:
        """The classic group a downgrade stored takes the consumer group's place; it rebalances at once unless a
        classic member just took a static member's place."""
        group_id = downgrade.snapshot.group_id
        cp.shard.consumer_groups.pop(group_id, None)
        cp.shard.consumer_records.pop(group_id, None)
        now = self.clock()
        group = ClassicGroup.restore(downgrade.snapshot, now, self.config.group, self._member_ids)
        cp.shard.groups[group_id] = group
        cp.shard.generations[group_id] = group.generation_id
        logger.info("group %s downgraded from the consumer protocol to the classic protocol", group_id)
        if downgrade.rebalance:
            self._apply(cp, group, group.rebalance(now, "downgraded from the consumer protocol"))

    def _is_share_group(self, cp: OffsetsPartition, group_id: str) -> bool:
        return self.share_groups is not None and self.share_groups.owns(cp, group_id)

    def _maybe_consumer_group(self, cp: OffsetsPartition, group_id: str) -> bool:
        """Whether the group is (or a heartbeat may be making it) a consumer group: its requests then wait for the
        group's lock."""
        return group_id in cp.shard.consumer_groups or group_id in cp.shard.consumer_locks

    def _regex_version(self) -> int:
        """The metadata version regular expression resolutions are made at: the image offset where the topic names
        or the ACLs last changed (what a resolution depends on), so a group resolves again only after those."""
        image = self._image()
        if image.topic_ids is not self._regex_inputs[0] or image.acls is not self._regex_inputs[1]:
            self._regex_inputs = (image.topic_ids, image.acls)
            self._regex_version_at = image.offset
        return self._regex_version_at

    async def consumer_heartbeat(
        self, group_id: str, request: ConsumerHeartbeatRequest, authorized: Authorized | None = None
    ) -> ConsumerHeartbeatResponse:
        """ConsumerGroupHeartbeat, answered once the records it caused are stored (acks=all). A classic group
        becomes a consumer group on its first heartbeat, keeping its offsets: an empty one is replaced, one with
        members is upgraded online (``ConsumerGroup.from_classic``; GROUP_ID_NOT_FOUND where
        group.consumer.migration.policy or the group forbid it), its parked JoinGroup and SyncGroup calls told to
        rejoin. The swap happens before the append, so classic requests arriving meanwhile wait for it and find
        the consumer group; a failed append puts the classic group back. ``authorized`` (with an authorizer): the
        topics among those given that the caller may describe, which its regular expression resolves to."""
        cp = self._route(group_id)
        if self._is_share_group(cp, group_id):
            return ConsumerHeartbeatResponse(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        async with cp.shard.consumer_lock(group_id):
            cp = self._route(group_id)  # it may have moved while this call waited
            group = cp.shard.consumer_groups.get(group_id)
            upgraded: ClassicGroup | None = None
            conversion: tuple[tuple[RecordKey, RecordValue | None], ...] = ()
            now = self.clock()
            if group is None:
                upgraded = cp.shard.groups.get(group_id)
                if upgraded is not None and upgraded.members:
                    try:
                        group, conversion = ConsumerGroup.from_classic(
                            upgraded, self._topic_infos(), now, self.config.consumer_group, uuid_member_ids
                        )
                    except MigrationRefused as e:
                        return ConsumerHeartbeatResponse(ErrorCode.GROUP_ID_NOT_FOUND, str(e))
                else:
                    group = ConsumerGroup(group_id, self.config.consumer_group, uuid_member_ids)
            self._configured(group)
            result = group.heartbeat(request, now, self._topic_infos(), authorized, self._regex_version())
            for event in result.events:
                logger.info("consumer group %s: %s", group_id, event)
            assert isinstance(result.response, ConsumerHeartbeatResponse)
            if not result.records:
                return result.response
            before: list[tuple[RecordKey, RecordValue | None]] = []
            if upgraded is not None:
                before = [group_tombstone(group_id), *conversion]
                self._apply(cp, upgraded, upgraded.hand_over(now))
                cp.shard.groups.pop(group_id, None)
                cp.shard.consumer_groups[group_id] = group
            code = await self._consumer_step(cp, group, result, before)
            if code != ErrorCode.NONE:
                if upgraded is not None and cp.current() and group_id not in cp.shard.consumer_groups:
                    cp.shard.groups[group_id] = upgraded
                error = append_error_to_response_error(ErrorCode.ValueType(code))
                return ConsumerHeartbeatResponse(error, f"the group's records could not be stored: {code}")
            if upgraded is not None:
                how = "with its members" if conversion else "empty"
                logger.info("group %s upgraded from the classic protocol to the consumer protocol (%s)", group_id, how)
        cp.wake.set()
        return result.response

    def describe_consumer_group(
        self, group_id: str
    ) -> tuple[ErrorCode.ValueType, str | None, ConsumerGroupDescription | None]:
        """ConsumerGroupDescribe of one group: GROUP_ID_NOT_FOUND for an unknown group or one of another type."""
        cp = self._route(group_id)
        group = cp.shard.consumer_groups.get(group_id)
        if group is None:
            if group_id in cp.shard.groups:
                return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.", None
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
        return ErrorCode.NONE, None, group.describe()

    async def _delete_consumer_group(self, cp: OffsetsPartition, group_id: str) -> ErrorCode.ValueType:
        """DeleteGroups of a consumer group: only without members; tombstones for its offsets and its records."""
        async with cp.shard.consumer_lock(group_id):
            group = cp.shard.consumer_groups.get(group_id)
            if group is None:
                return ErrorCode.GROUP_ID_NOT_FOUND
            if group.members:
                return ErrorCode.NON_EMPTY_GROUP
            offsets = cp.shard.store.delete_group(group_id)
            code = await self._remove_consumer_group(cp, group_id, [*(offsets.records if offsets else ())])
            self._settle(cp, offsets, code)
            return ErrorCode.NONE if code == ErrorCode.NONE else commit_append_error(code)

    async def _drop_empty_consumer_group(self, cp: OffsetsPartition, group_id: str) -> int:
        """Before a classic JoinGroup, under the group's lock: an empty consumer group is removed (tombstones for
        its records; its offsets stay), so the group goes on as a classic group."""
        code = await self._remove_consumer_group(cp, group_id, [])
        if code == ErrorCode.NONE:
            logger.info("group %s converted from the consumer protocol to the classic protocol", group_id)
            return code
        return append_error_to_response_error(ErrorCode.ValueType(code))

    async def _remove_consumer_group(
        self, cp: OffsetsPartition, group_id: str, records: list[tuple[RecordKey, RecordValue | None]]
    ) -> int:
        """Append ``records`` and tombstones for every stored record of the group; once stored, the group is gone."""
        records = [*records, *((key, None) for key in cp.shard.consumer_records.get(group_id, {}))]
        code = await self._append(cp, records)
        if code == ErrorCode.NONE and cp.current():
            cp.shard.consumer_groups.pop(group_id, None)
            cp.shard.consumer_records.pop(group_id, None)
        return code

    def topic_names(self) -> dict[bytes, str]:
        """Topic id -> name, for answers that name the topics of an assignment."""
        return {t.topic_id: t.name for t in self._topic_infos().values()}

    # -- requests --------------------------------------------------------------------------------------------------

    async def _parked(
        self, cp: OffsetsPartition, group: ClassicGroup, call: Callable[[int], GroupResult]
    ) -> ParkedResponse:
        response = await self.runtime.park(cp, lambda token: self._apply(cp, group, call(token)))
        if response is None:
            raise CoordinatorError("the coordinator moved", code=ErrorCode.NOT_COORDINATOR)
        return response

    async def join(self, group_id: str, request: JoinGroupRequest) -> JoinGroupResponse:
        """JoinGroup; ``request.token`` is ignored (the shell makes its own)."""
        cp = self._route(group_id)
        if self._is_share_group(cp, group_id):
            return JoinGroupResponse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id)
        if self._maybe_consumer_group(cp, group_id):
            # A KIP-848 group (or one a heartbeat may be making): with members, the joiner becomes a classic
            # member of it; without, it becomes a classic group.
            async with cp.shard.consumer_lock(group_id):
                cp = self._route(group_id)
                consumer_group = cp.shard.consumer_groups.get(group_id)
                if consumer_group is not None and consumer_group.members:
                    self._configured(consumer_group)
                    result = consumer_group.classic_join(request, self.clock(), self._topic_infos())
                    for event in result.events:
                        logger.info("consumer group %s: %s", group_id, event)
                    code = await self._consumer_step(cp, consumer_group, result)
                    cp.wake.set()
                    if code != ErrorCode.NONE:
                        error = append_error_to_response_error(ErrorCode.ValueType(code))
                        return JoinGroupResponse(error, request.member_id)
                    assert isinstance(result.response, JoinGroupResponse)
                    return result.response
                if consumer_group is not None:
                    code = await self._drop_empty_consumer_group(cp, group_id)
                    if code != ErrorCode.NONE:
                        return JoinGroupResponse(ErrorCode.ValueType(code), request.member_id)
            cp = self._route(group_id)
        group = cp.shard.groups.get(group_id)
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
        if self._maybe_consumer_group(cp, group_id):
            async with cp.shard.consumer_lock(group_id):  # after any append of the group under way
                cp = self._route(group_id)
                consumer_group = cp.shard.consumer_groups.get(group_id)
                if consumer_group is not None:
                    result = consumer_group.classic_sync(request, self.clock(), self._topic_infos())
                    cp.wake.set()
                    assert isinstance(result.response, SyncGroupResponse)
                    return result.response
        group = cp.shard.groups.get(group_id)
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

    async def heartbeat(self, group_id: str, request: HeartbeatRequest) -> HeartbeatResponse:
        cp = self._route(group_id)
        if self._maybe_consumer_group(cp, group_id):
            async with cp.shard.consumer_lock(group_id):
                cp = self._route(group_id)
                consumer_group = cp.shard.consumer_groups.get(group_id)
                if consumer_group is not None:
                    self._configured(consumer_group)
                    result = consumer_group.classic_heartbeat(request, self.clock())
                    cp.wake.set()
                    assert isinstance(result.response, HeartbeatResponse)
                    return result.response
        group = cp.shard.groups.get(group_id)
        if group is None:
            return HeartbeatResponse(ErrorCode.UNKNOWN_MEMBER_ID)
        response = group.heartbeat(request, self.clock())
        cp.wake.set()
        return response

    async def leave(self, group_id: str, request: LeaveGroupRequest) -> LeaveGroupResponse:
        cp = self._route(group_id)
        if self._maybe_consumer_group(cp, group_id):
            async with cp.shard.consumer_lock(group_id):
                cp = self._route(group_id)
                consumer_group = cp.shard.consumer_groups.get(group_id)
                if consumer_group is not None:
                    left = consumer_group.classic_leave(request, self._topic_infos())
                    for event in left.events:
                        logger.info("consumer group %s: %s", group_id, event)
                    code = await self._consumer_step(cp, consumer_group, left)
                    cp.wake.set()
                    if code != ErrorCode.NONE:
                        return LeaveGroupResponse(append_error_to_response_error(ErrorCode.ValueType(code)))
                    assert isinstance(left.response, LeaveGroupResponse)
                    return left.response
        group = cp.shard.groups.get(group_id)
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
        api_version: int | None = None,
    ) -> dict[TopicPartition, ErrorCode.ValueType]:
        """OffsetCommit: the error of each partition. A commit with generation -1 and no member is a simple
        commit (a consumer using ``assign``), accepted while the group has no members. ``api_version``: the Kafka
        OffsetCommit version (None: odradek's own API), which a consumer group member must send at 9 or above."""
        cp = self._route(group_id)
        consumer_group = cp.shard.consumer_groups.get(group_id)
        group = cp.shard.groups.get(group_id)
        if group is None and consumer_group is None:
            if generation_id >= 0 or member_id:
                return dict.fromkeys(offsets, ErrorCode.ILLEGAL_GENERATION)
            group = self._new_group(cp, group_id)
        try:
            if consumer_group is not None:  # the generation field carries the member epoch (OffsetCommit v9+)
                error = consumer_group.validate_offset_commit(member_id, generation_id, api_version=api_version)
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
            result = cp.shard.store.prepare_commit(group_id, valid, self.clock())
            errors.update({tp: ErrorCode.ValueType(code) for tp, code in result.errors.items()})
            if result.append is not None:
                code = cp.acknowledged(await self._write(cp, result.append))
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
        consumer_group = cp.shard.consumer_groups.get(group_id)
        group = cp.shard.groups.get(group_id)
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
            result = cp.shard.store.prepare_txn_commit(group_id, producer_id, producer_epoch, valid, self.clock())
            errors.update(result.errors)
            if result.append is not None:
                code = cp.acknowledged(await self._write(cp, result.append))
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
            cp.shard.deferred_markers.append((producer_id, committed))
            return
        applied = cp.shard.store.on_txn_marker(producer_id, committed)
        now = self.clock()
        for key in applied:
            self.commits[key.group] = self.commits.get(key.group, 0) + 1
            if key.group not in cp.shard.groups:
                cp.shard.groups[key.group] = ClassicGroup(key.group, self.config.group, self._member_ids, now)
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
        pending = cp.shard.store.pending_txn_partitions(group_id)
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
        consumer_group = cp.shard.consumer_groups.get(group_id)
        if consumer_group is not None:
            error = consumer_group.validate_offset_fetch(member_id, member_epoch)
            if error != ErrorCode.NONE:
                return error, {}
        group = cp.shard.groups.get(group_id)
        if group is not None:
            error = group.validate_offset_fetch()
            if error != ErrorCode.NONE:
                return ErrorCode.ValueType(error), {}
        return ErrorCode.NONE, cp.shard.store.fetch(group_id, None if partitions is None else list(partitions))

    async def delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> tuple[ErrorCode.ValueType, dict[TopicPartition, ErrorCode.ValueType]]:
        """OffsetDelete: tombstones for the partitions of topics no member subscribes to. Only a consumer group
        may have members (NON_EMPTY_GROUP otherwise), and one whose subscriptions do not decode counts as
        subscribed to every topic. A partition the metadata lacks is UNKNOWN_TOPIC_OR_PARTITION, as Kafka's broker
        answers it without asking its coordinator: its offsets, if any, went with its topic (``on_leadership``)."""
        cp = self._route(group_id)
        consumer_group = cp.shard.consumer_groups.get(group_id)
        group = cp.shard.groups.get(group_id)
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
        append = cp.shard.store.delete_partitions(group_id, deletable)
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
        for cp in self.runtime.serving():
            out.extend(
                g.listing()
                for g in cp.shard.groups.values()
                if g.state is not GroupState.DEAD and (not wanted or g.state.value.lower() in wanted)
            )
            out.extend(
                g.listing() for g in cp.shard.consumer_groups.values() if not wanted or g.state.value.lower() in wanted
            )
            if self.share_groups is not None:
                out.extend(g for g in self.share_groups.listings(cp) if not wanted or g.state.lower() in wanted)
        if kinds:
            out = [g for g in out if g.group_type in kinds]
        return (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.runtime.loading() else ErrorCode.NONE), sorted(
            out, key=lambda g: g.group_id
        )

    def describe(self, group_id: str) -> GroupDescription:
        """DescribeGroups of one group: an unknown group is described as Dead, as Kafka does."""
        cp = self._route(group_id)
        consumer_group = cp.shard.consumer_groups.get(group_id)
        if consumer_group is not None:
            return consumer_group.classic_description()
        group = cp.shard.groups.get(group_id)
        if group is None:
            return GroupDescription(group_id, GroupState.DEAD.value, "", "", -1, "", ())
        return group.describe()

    async def delete_group(self, group_id: str) -> ErrorCode.ValueType:
        """DeleteGroups of one group: only an Empty group; tombstones for its offsets and its metadata."""
        cp = self._route(group_id)
        if group_id in cp.shard.consumer_groups:
            return await self._delete_consumer_group(cp, group_id)
        if self.share_groups is not None and self.share_groups.owns(cp, group_id):
            return await self.share_groups.delete(cp, group_id)
        group = cp.shard.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        error, result = group.delete(self.clock())
        self._apply(cp, group, result)
        if error != ErrorCode.NONE:
            return ErrorCode.ValueType(error)
        del cp.shard.groups[group_id]
        offsets = cp.shard.store.delete_group(group_id)
        records: list[tuple[RecordKey, RecordValue | None]] = [*(offsets.records if offsets else ())]
        records.append(group_tombstone(group_id))
        code = await self._append(cp, records)
        self._settle(cp, offsets, code)
        return ErrorCode.NONE if code == ErrorCode.NONE else commit_append_error(code)

    # -- metrics ---------------------------------------------------------------------------------------------------

    def committed_offsets(self) -> dict[str, dict[TopicPartition, int]]:
        """Every committed offset of the groups coordinated here (loaded partitions this broker still leads)."""
        out: dict[str, dict[TopicPartition, int]] = {}
        for cp in self.runtime.serving():
            for group_id in cp.shard.store.groups():
                offsets = {tp: v.offset for tp, v in cp.shard.store.fetch(group_id).items() if v.offset >= 0}
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
        for cp in self.runtime.serving():
            for group_id, group in cp.shard.groups.items():
                members.add_metric([group_id], len(group.members))
                state.add_metric([group_id, group.state.value], 1)
                generation.add_metric([group_id], group.generation_id)
            for (
                group_id,
                consumer_group,
            ) in cp.shard.consumer_groups.items():  # a consumer group's generation: its epoch
                members.add_metric([group_id], len(consumer_group.members))
                state.add_metric([group_id, consumer_group.state.value], 1)
                generation.add_metric([group_id], consumer_group.group_epoch)
            for group_id in sorted(cp.shard.groups.keys() | cp.shard.consumer_groups.keys()):
                for tp, value in sorted(cp.shard.store.fetch(group_id).items()):
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
