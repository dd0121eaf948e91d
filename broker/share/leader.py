"""The partition leaders' side of share groups: ShareFetch and ShareAcknowledge over the share-partitions this
broker leads (Kafka's SharePartitionManager), protocol-neutral: the Kafka listener translates into these calls.

For each (group, topic partition) a member fetches, the leader holds the share-partition core
(``partition.SharePartition``) while it leads the partition at the epoch it started at:

- **Starting**: the first request reads the durable state from the share coordinator (``SharePersister``), which
  records this leader's epoch so a previous leader's writes are fenced, and restores the core from it (nothing
  stored: at the high watermark, ``share.auto.offset.reset=latest``).
- **Serving**: one request at a time per share-partition (a lock held across the state write). A fetch reads the
  log with the consumers' read path (``Partition.read``, up to the high watermark) from the core's next fetch
  offset, lets the core acquire records from the batch headers, and answers the batches covering what was
  acquired with the AcquiredRecords ranges. Every change the core asks to
  store (acknowledgements, archived records, released locks, the start offset) is written to the share
  coordinator before the answer; if that write fails, the core is dropped and the next request starts again from
  the stored state, so nothing the group was told is lost (records acquired meanwhile are delivered again).
- **Timers**: each share-partition has a task that sleeps until the core's earliest acquisition lock deadline (or
  until a request moved it) and fires the expired locks, storing their records' new state.
- **Stopping**: when this broker stops leading the partition (or leads it at a new epoch), the core is dropped:
  the next leader restores it from the stored state, where acquired records are available again.

Share sessions (``sessions.py``) key the member's partitions on this broker; a session that closes, forgets a
partition or expires releases the member's records on it. A fetch that acquires nothing waits up to its MaxWaitMs
for new records in the log or records released, then tries once more.

Each acquisition takes the group's own ``share.record.lock.duration.ms`` and ``share.isolation.level`` (group
configs, client/common/group_configs.py; else the broker's lock duration and read_uncommitted), and a share-partition
that starts without a stored start offset takes its ``share.auto.offset.reset`` (``latest``, ``earliest``, or
``by_duration``: the first record at most that old, else the end). With read_committed the log is read up to the last
stable offset and the records of aborted transactions are archived.

A group with no share session left on this broker keeps no share-partition here (nor does one whose offsets an
administrator reset, ``forget_group``): the next fetch reads the stored state again, which AlterShareGroupOffsets or
DeleteShareGroupOffsets may have changed meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from odradek.broker.config import NodeConfig
from odradek.broker.coordinator.clock import Clock
from odradek.broker.coordinator.decisions import sleep_s
from odradek.broker.partition import Partition
from odradek.broker.replica_manager import ReplicaManager
from odradek.broker.share.partition import (
    EARLIEST,
    READ_COMMITTED,
    AcknowledgementBatch,
    AcquiredRecords,
    PartitionResult,
    SharePartition,
    SharePartitionConfig,
)
from odradek.broker.share.persister import SharePersister
from odradek.broker.share.sessions import ShareSessions, TopicIdPartition
from odradek.broker.share.state_records import SharePartitionKey
from odradek.client.common.group_configs import BY_DURATION, parse_duration_ms, share_overrides
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.errors import ErrorCode, OdradekError
from odradek.client.record.header import BatchHeader, parse_header
from odradek.client.record.layout import HEADER_SIZE

logger = logging.getLogger(__name__)

# Read errors a fetch answers as such (the client refreshes its metadata); others answer no records this time.
_PARTITION_ERRORS = frozenset(
    {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.KAFKA_STORAGE_ERROR}
)
SESSION_CHECK_S = 1.0


@dataclass(frozen=True, slots=True)
class ShareLeaderConfig:
    """The broker settings of share-partitions (Kafka's names and defaults)."""

    record_lock_duration_ms: int = 30_000  # group.share.record.lock.duration.ms
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    max_record_locks: int = 2_000  # group.share.partition.max.record.locks
    session_idle_ms: int = 45_000  # group.share.session.timeout.ms: an unused share session is dropped

    @classmethod
    def from_node(cls, c: NodeConfig) -> ShareLeaderConfig:
        return cls(
            record_lock_duration_ms=c["group.share.record.lock.duration.ms"],
            delivery_count_limit=c["group.share.delivery.count.limit"],
            max_record_locks=c["group.share.partition.max.record.locks"],
            session_idle_ms=c["group.share.session.timeout.ms"],
        )


@dataclass(frozen=True, slots=True)
class ShareFetchRequest:
    """ShareFetch: the session's epoch, the partitions to add to it (and fetch), the acknowledgements per
    partition, the partitions to forget."""

    group_id: str
    member_id: str
    session_epoch: int
    max_wait_ms: int = 0
    min_bytes: int = 1
    max_bytes: int = 2**31 - 1
    max_records: int = 500
    partitions: tuple[TopicIdPartition, ...] = ()
    acknowledgements: Mapping[TopicIdPartition, tuple[AcknowledgementBatch, ...]] = field(default_factory=dict)
    forgotten: tuple[TopicIdPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareAcknowledgeRequest:
    group_id: str
    member_id: str
    session_epoch: int
    acknowledgements: Mapping[TopicIdPartition, tuple[AcknowledgementBatch, ...]] = field(default_factory=dict)


@dataclass(slots=True)
class PartitionAnswer:
    """One partition of an answer: the fetch's error, the acknowledgement's, the current leader (for
    NOT_LEADER_OR_FOLLOWER: (id, epoch)), and the acquired records with the batches that hold them."""

    error: ErrorCode.ValueType = ErrorCode.NONE
    message: str | None = None
    ack_error: ErrorCode.ValueType = ErrorCode.NONE
    ack_message: str | None = None
    leader: tuple[int, int] | None = None
    records: bytes = b""
    acquired: tuple[AcquiredRecords, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareAnswer:
    """ShareFetch's or ShareAcknowledge's answer: a top-level error, or the partitions' answers."""

    error: ErrorCode.ValueType = ErrorCode.NONE
    message: str | None = None
    lock_duration_ms: int = 0
    partitions: Mapping[TopicIdPartition, PartitionAnswer] = field(default_factory=dict)


# The topics of the given ids (ShareFetch's and ShareAcknowledge's) that the caller may not read; None: no authorizer.
DeniedTopics = Callable[[Iterable[str]], set[str]]


class _Held:
    """A share-partition this broker leads: its core once started, and what serves it."""

    def __init__(self, key: SharePartitionKey, topic: str, partition: Partition) -> None:
        self.key = key
        self.topic = topic
        self.partition = partition
        self.leader_epoch = partition.leader_epoch
        self.core: SharePartition | None = None
        self.state_epoch = 0
        self.lock = asyncio.Lock()
        self.wake = asyncio.Event()  # the lock deadlines may have moved
        self.timer: asyncio.Task[None] | None = None
        self.dropped = False

    @property
    def name(self) -> str:
        return f"{self.key.group_id}/{self.topic}-{self.key.partition}"

    def current(self) -> bool:
        p = self.partition
        return not self.dropped and p.is_leader and p.leader_epoch == self.leader_epoch


class ShareLeader:
    def __init__(
        self,
        replicas: ReplicaManager,
        image: Callable[[], MetadataImage],
        persister: SharePersister,
        config: ShareLeaderConfig,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.replicas = replicas
        self._image = image
        self.persister = persister
        self.config = config
        self.clock = clock or Clock()
        self.sessions = ShareSessions(config.session_idle_ms)
        self.partition_config = SharePartitionConfig(
            config.record_lock_duration_ms, config.delivery_count_limit, config.max_record_locks
        )
        self._held: dict[SharePartitionKey, _Held] = {}
        self._waiting: list[asyncio.Future[None]] = []  # fetches waiting for records to be released
        self._session_task: asyncio.Task[None] | None = None
        self._releases: set[asyncio.Future[None]] = set()  # releases of removed members under way

    def start(self) -> None:
        self._session_task = asyncio.create_task(self._expire_sessions(), name="share-sessions")

    async def close(self) -> None:
        tasks: list[asyncio.Future[None]] = [h.timer for h in self._held.values() if h.timer is not None]
        tasks.extend(self._releases)
        if self._session_task is not None:
            tasks.append(self._session_task)
        for key in list(self._held):
            self._drop(key)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- leadership ------------------------------------------------------------------------------------------------

    def on_leadership(self, partitions: Mapping[tuple[str, int], Partition]) -> None:
        """Drop the share-partitions of partitions this broker no longer leads at the epoch they started at."""
        for key, held in list(self._held.items()):
            if not held.current() or partitions.get((held.topic, key.partition)) is not held.partition:
                logger.info("share-partition %s: no longer led here at epoch %d", held.name, held.leader_epoch)
                self._drop(key)

    def _drop(self, key: SharePartitionKey) -> None:
        held = self._held.pop(key, None)
        if held is None:
            return
        held.dropped = True
        held.core = None
        if held.timer is not None:
            held.timer.cancel()
        self._notify()

    def forget_group(self, group_id: str) -> None:
        """Drop the group's share-partitions here: their stored state was reset (the next request reads it)."""
        for key in [k for k in self._held if k.group_id == group_id]:
            logger.info("share-partition %s: its state was reset", self._held[key].name)
            self._drop(key)

    def _forget_if_idle(self, group_id: str) -> None:
        if not self.sessions.has_group(group_id):
            for key in [k for k in self._held if k.group_id == group_id]:
                self._drop(key)

    def group_config(self, group_id: str) -> SharePartitionConfig:
        """The broker's share-partition settings with the group's own lock duration and isolation level (group
        configs), and its offset reset (``by_duration`` is applied by ``_ready``: the core knows earliest and
        latest)."""
        own = share_overrides(self._image().group_configs(group_id))
        config = self.partition_config
        if own.record_lock_duration_ms is not None:
            config = replace(config, record_lock_duration_ms=own.record_lock_duration_ms)
        if own.isolation_level is not None:
            config = replace(config, isolation_level=own.isolation_level)
        if own.auto_offset_reset == EARLIEST:
            config = replace(config, auto_offset_reset=EARLIEST)
        return config

    def _held_for(self, group_id: str, tp: TopicIdPartition) -> _Held | PartitionAnswer:
        """The share-partition of ``tp`` for the group if this broker leads ``tp``, else the partition's error."""
        key = SharePartitionKey(group_id, *tp)
        held = self._held.get(key)
        if held is not None:
            if held.current():
                return held
            self._drop(key)
        image = self._image()
        topic = image.topics.get(tp[0])
        if topic is None:
            return PartitionAnswer(ErrorCode.UNKNOWN_TOPIC_ID, "Unknown topic id.")
        registration = topic.partitions.get(tp[1])
        if registration is None:
            return PartitionAnswer(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unknown partition {topic.name}-{tp[1]}.")
        try:
            partition = self.replicas.get(topic.name, tp[1])
        except OdradekError as e:
            return _not_served(e, registration.leader, registration.leader_epoch)
        if not partition.is_leader:
            return PartitionAnswer(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"This broker does not lead {topic.name}-{tp[1]}.",
                leader=(registration.leader, registration.leader_epoch),
            )
        held = self._held[key] = _Held(key, topic.name, partition)
        held.timer = asyncio.create_task(self._timer(held), name=f"share-locks-{held.name}")
        return held

    # -- the core's life -------------------------------------------------------------------------------------------

    async def _ready(self, held: _Held) -> PartitionAnswer | SharePartition:
        """The core, started from the stored state if need be (under the share-partition's lock); or the error to
        answer."""
        if not held.current():
            self._drop(held.key)
            return PartitionAnswer(ErrorCode.NOT_LEADER_OR_FOLLOWER, "The leadership moved.")
        if held.core is not None:
            return held.core
        answer = await self.persister.read(held.key, held.leader_epoch)
        if not held.current():
            self._drop(held.key)
            return PartitionAnswer(ErrorCode.NOT_LEADER_OR_FOLLOWER, "The leadership moved.")
        if answer.error != ErrorCode.NONE:
            logger.warning(
                "share-partition %s: its state could not be read: %s %s",
                held.name,
                ErrorCode.Name(answer.error),
                answer.message,
            )
            if answer.error == ErrorCode.FENCED_LEADER_EPOCH:
                self._drop(held.key)
                return PartitionAnswer(ErrorCode.NOT_LEADER_OR_FOLLOWER, "A newer leader serves this partition.")
            return PartitionAnswer()  # nothing this time: the next request tries again
        log = held.partition.log
        config = self.group_config(held.key.group_id)
        start, end = log.log_start_offset, log.high_watermark
        state = answer.state
        reset = share_overrides(self._image().group_configs(held.key.group_id)).auto_offset_reset or ""
        if (state is None or state.start_offset < 0) and reset.startswith(BY_DURATION):
            # by_duration: the first record at most that old (else the end), started like earliest from there
            age = parse_duration_ms(reset[len(BY_DURATION) :]) or 0
            found = log.offset_for_timestamp(self.clock() - age)
            start = min(max(found.offset, start), end) if found is not None else end
            config = replace(config, auto_offset_reset=EARLIEST)
        core = SharePartition.restore(config, state, start, end)
        held.core = core
        held.state_epoch = answer.state.state_epoch if answer.state is not None else 0
        logger.info(
            "share-partition %s: serving from offset %d (state epoch %d, leader epoch %d)",
            held.name,
            core.start_offset,
            held.state_epoch,
            held.leader_epoch,
        )
        return core

    async def _store(self, held: _Held, result: PartitionResult) -> ErrorCode.ValueType:
        """Log what the core did and store what it asks to; a failed write drops the core (see the module
        docstring)."""
        for event in result.events:
            logger.info("share-partition %s: %s", held.name, event)
        if result.write is None:
            return ErrorCode.NONE
        answer = await self.persister.write(held.key, held.state_epoch, held.leader_epoch, result.write)
        if answer.error != ErrorCode.NONE:
            logger.warning(
                "share-partition %s: its state could not be stored (%s %s): it starts again from the stored state",
                held.name,
                ErrorCode.Name(answer.error),
                answer.message,
            )
            held.core = None
        return answer.error

    async def _timer(self, held: _Held) -> None:
        """Fire the share-partition's expired acquisition locks, sleeping until the next deadline."""
        while not held.dropped:
            core = held.core
            wait = sleep_s(core.next_deadline_ms() if core is not None else None, self.clock())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(held.wake.wait(), wait)
            held.wake.clear()
            await self.fire(held)

    async def fire(self, held: _Held) -> None:
        """Expire the locks due now (the timer's step)."""
        async with held.lock:
            core = held.core
            deadline = core.next_deadline_ms() if core is not None else None
            if core is None or deadline is None or deadline > self.clock() or not held.current():
                return
            result = core.tick(self.clock())
            await self._store(held, result)
        self._notify()

    def _notify(self) -> None:
        """Records may have become available: waiting fetches look again."""
        waiting, self._waiting = self._waiting, []
        for future in waiting:
            if not future.done():
                future.set_result(None)

    # -- acquiring -------------------------------------------------------------------------------------------------

    async def _acquire(self, held: _Held, member_id: str, max_records: int, max_bytes: int) -> PartitionAnswer:
        async with held.lock:
            core = await self._ready(held)
            if isinstance(core, PartitionAnswer):
                return core
            core.config = self.group_config(held.key.group_id)  # the group's configs as they are now
            partition = held.partition
            now = self.clock()
            log_start = partition.log.log_start_offset
            moved = core.start_offset < log_start
            if moved and await self._store(held, core.log_start_moved(log_start, now)) != ErrorCode.NONE:
                return PartitionAnswer()
            if not core.can_acquire():
                return PartitionAnswer()
            offset = core.next_fetch_offset()
            aborted: list = []
            try:
                if core.config.isolation_level == READ_COMMITTED:
                    data, _, aborted = partition.read_committed(offset, max_bytes)
                else:
                    data = partition.read(offset, max_bytes)
            except OdradekError as e:
                if e.code in _PARTITION_ERRORS:
                    return PartitionAnswer(ErrorCode.ValueType(e.code), str(e))
                logger.debug("share-partition %s: no read at %d: %s", held.name, offset, e)
                return PartitionAnswer()
            records = bytes(data.records)
            if not records:
                return PartitionAnswer()
            headers = batch_headers(records)
            result = core.acquire(member_id, headers, max_records, now, aborted)
            if await self._store(held, result) != ErrorCode.NONE:
                return PartitionAnswer()
            held.wake.set()  # a new lock deadline
            if not result.acquired:
                return PartitionAnswer()
            return PartitionAnswer(records=covering(records, headers, result.acquired), acquired=result.acquired)

    # -- acknowledging and releasing -------------------------------------------------------------------------------

    async def _acknowledge(
        self, group_id: str, member_id: str, tp: TopicIdPartition, batches: Sequence[AcknowledgementBatch]
    ) -> PartitionAnswer:
        held = self._held_for(group_id, tp)
        if isinstance(held, PartitionAnswer):
            return held
        async with held.lock:
            core = await self._ready(held)
            if isinstance(core, PartitionAnswer):
                if core.error == ErrorCode.NONE:  # the state could not be read: the records are not held any more
                    return PartitionAnswer(ErrorCode.INVALID_RECORD_STATE, "The share-partition is starting over.")
                return core
            result = core.acknowledge(member_id, batches, self.clock())
            code = await self._store(held, result)
        self._notify()
        if result.error != ErrorCode.NONE:
            return PartitionAnswer(result.error, result.error_message)
        if code != ErrorCode.NONE:
            return PartitionAnswer(code, "The acknowledgement could not be stored.")
        return PartitionAnswer()

    async def release(self, group_id: str, member_id: str, partitions: Iterable[TopicIdPartition]) -> None:
        """The member's records on ``partitions`` go back to the group (its session closed or forgot them)."""
        for tp in partitions:
            held = self._held.get(SharePartitionKey(group_id, *tp))
            if held is None:
                continue
            async with held.lock:
                if held.core is not None and held.current():
                    await self._store(held, held.core.release_member(member_id, self.clock()))
        self._forget_if_idle(group_id)
        self._notify()

    def members_removed(self, group_id: str, member_ids: tuple[str, ...]) -> None:
        """Members left the group (the group coordinator on this broker says so): their share sessions here close
        and their records go back to the group."""
        for member_id in member_ids:
            session = self.sessions.drop(group_id, member_id)
            partitions = [(k.topic_id, k.partition) for k in self._held if k.group_id == group_id]
            if session is not None or partitions:
                task = asyncio.ensure_future(self.release(group_id, member_id, partitions))
                self._releases.add(task)
                task.add_done_callback(self._releases.discard)

    async def _expire_sessions(self) -> None:
        while True:
            await asyncio.sleep(SESSION_CHECK_S)
            for session in self.sessions.expire(self.clock()):
                logger.info("share session of %s in group %s expired", session.member_id, session.group_id)
                await self.release(session.group_id, session.member_id, session.partitions)

    # -- the requests ----------------------------------------------------------------------------------------------

    def _denied(self, tps: Iterable[TopicIdPartition], denied_topics: DeniedTopics | None) -> set[bytes]:
        """The topic ids among ``tps`` the caller may not read."""
        if denied_topics is None:
            return set()
        topics = self._image().topics
        names = {t.topic_id: t.name for tp in tps if (t := topics.get(tp[0])) is not None}
        refused = denied_topics(set(names.values()))
        return {topic_id for topic_id, name in names.items() if name in refused}

    async def _acknowledge_all(
        self,
        group_id: str,
        member_id: str,
        acknowledgements: Mapping[TopicIdPartition, tuple[AcknowledgementBatch, ...]],
        denied: set[bytes],
        out: dict[TopicIdPartition, PartitionAnswer],
    ) -> None:
        for tp, batches in acknowledgements.items():
            answer = out.setdefault(tp, PartitionAnswer())
            if tp[0] in denied:
                answer.ack_error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            result = await self._acknowledge(group_id, member_id, tp, batches)
            answer.ack_error, answer.ack_message, answer.leader = result.error, result.message, result.leader

    async def share_fetch(self, request: ShareFetchRequest, denied_topics: DeniedTopics | None = None) -> ShareAnswer:
        """ShareFetch (group Read is the caller's check; ``denied_topics``: topic Read)."""
        if not request.group_id:
            return ShareAnswer(ErrorCode.INVALID_GROUP_ID, "The group id is empty.")
        if not request.member_id:
            return ShareAnswer(ErrorCode.INVALID_REQUEST, "The member id is empty.")
        group, member = request.group_id, request.member_id
        step = self.sessions.fetch(
            group,
            member,
            request.session_epoch,
            request.partitions,
            request.forgotten,
            any(request.acknowledgements.values()),
            self.clock(),
        )
        if step.error != ErrorCode.NONE or step.session is None:
            return ShareAnswer(step.error, step.message)
        lock_ms = self.group_config(group).record_lock_duration_ms
        out: dict[TopicIdPartition, PartitionAnswer] = {}
        session_partitions = step.session.fetch_order()
        denied = self._denied([*request.acknowledgements, *session_partitions], denied_topics)
        await self._acknowledge_all(group, member, request.acknowledgements, denied, out)
        if step.released:
            await self.release(group, member, step.released)
        if step.closing or request.max_records <= 0:
            return ShareAnswer(lock_duration_ms=lock_ms, partitions=out)
        deadline = time.monotonic() + request.max_wait_ms / 1000
        while True:
            if await self._fetch_pass(request, session_partitions, denied, out):
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            await self._wait(session_partitions, group, remaining)
            session_partitions = step.session.fetch_order()
        return ShareAnswer(lock_duration_ms=lock_ms, partitions=out)

    async def _fetch_pass(
        self,
        request: ShareFetchRequest,
        partitions: Sequence[TopicIdPartition],
        denied: set[bytes],
        out: dict[TopicIdPartition, PartitionAnswer],
    ) -> bool:
        """Acquire from each partition in turn within the request's budgets; whether the answer should go now
        (records acquired, or an error to report)."""
        records_left = request.max_records
        bytes_left = request.max_bytes if request.max_bytes > 0 else 2**31 - 1
        done = False
        for tp in partitions:
            if records_left <= 0 or bytes_left <= 0:
                break
            answer = out.setdefault(tp, PartitionAnswer())
            if tp[0] in denied:
                answer.error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                done = True
                continue
            held = self._held_for(request.group_id, tp)
            if isinstance(held, PartitionAnswer):
                got = held
            else:
                got = await self._acquire(held, request.member_id, records_left, bytes_left)
            answer.error, answer.message, answer.leader = got.error, got.message, got.leader
            answer.records, answer.acquired = got.records, got.acquired
            if got.error != ErrorCode.NONE or got.acquired:
                done = True
            records_left -= sum(a.last_offset - a.first_offset + 1 for a in got.acquired)
            bytes_left -= len(got.records)
        for tp in [tp for tp, a in out.items() if _empty(a) and tp not in request.acknowledgements]:
            del out[tp]
        return done

    async def _wait(self, partitions: Sequence[TopicIdPartition], group_id: str, timeout_s: float) -> None:
        """Until a partition's high watermark moves or records are released (or ``timeout_s``)."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        watched = [
            h.partition for tp in partitions if (h := self._held.get(SharePartitionKey(group_id, *tp))) is not None
        ]
        for p in watched:
            p.add_waiter(future)
        self._waiting.append(future)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(future), timeout_s)
        finally:
            for p in watched:
                p.remove_waiter(future)
            if future in self._waiting:
                self._waiting.remove(future)

    async def share_acknowledge(
        self, request: ShareAcknowledgeRequest, denied_topics: DeniedTopics | None = None
    ) -> ShareAnswer:
        """ShareAcknowledge (group Read is the caller's check; ``denied_topics``: topic Read)."""
        if not request.group_id:
            return ShareAnswer(ErrorCode.INVALID_GROUP_ID, "The group id is empty.")
        if not request.member_id:
            return ShareAnswer(ErrorCode.INVALID_REQUEST, "The member id is empty.")
        group, member = request.group_id, request.member_id
        step = self.sessions.acknowledge(group, member, request.session_epoch, self.clock())
        if step.error != ErrorCode.NONE:
            return ShareAnswer(step.error, step.message)
        out: dict[TopicIdPartition, PartitionAnswer] = {}
        denied = self._denied(request.acknowledgements, denied_topics)
        await self._acknowledge_all(group, member, request.acknowledgements, denied, out)
        if step.released:
            await self.release(group, member, step.released)
        return ShareAnswer(partitions=out)

    # -- views -----------------------------------------------------------------------------------------------------

    def share_partitions(self) -> list[tuple[SharePartitionKey, int, int]]:
        """(key, start offset, in-flight records) of each started share-partition, for metrics and tests."""
        return [
            (key, h.core.start_offset, h.core.end - h.core.start_offset)
            for key, h in self._held.items()
            if h.core is not None
        ]


def _not_served(error: OdradekError, leader: int, epoch: int) -> PartitionAnswer:
    if error.code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
        return PartitionAnswer(ErrorCode.NOT_LEADER_OR_FOLLOWER, str(error), leader=(leader, epoch))
    return PartitionAnswer(ErrorCode.ValueType(error.code), str(error))


def _empty(a: PartitionAnswer) -> bool:
    return a.error == ErrorCode.NONE and a.ack_error == ErrorCode.NONE and not a.acquired and a.leader is None


def batch_headers(records: bytes) -> list[BatchHeader]:
    """The headers of the whole batches in ``records`` (a log read), without checking their CRCs."""
    out = []
    position = 0
    while position + HEADER_SIZE <= len(records):
        header = parse_header(records, position)
        out.append(header)
        position += header.size
    return out


def covering(records: bytes, headers: Sequence[BatchHeader], acquired: Sequence[AcquiredRecords]) -> bytes:
    """The batches of ``records`` that hold some acquired offset (the client keeps only the acquired records)."""
    first, last = acquired[0].first_offset, acquired[-1].last_offset
    kept = [h for h in headers if h.last_offset >= first and h.base_offset <= last]
    if not kept:
        return b""
    return records[kept[0].position : kept[-1].position + kept[-1].size]
