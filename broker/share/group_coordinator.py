"""The share group coordinator: share groups' membership (``group.ShareGroup``) served on the group coordinator's
partitions of ``__consumer_offsets`` (KIP-932 puts share groups beside classic and consumer groups: a client finds a
share group's coordinator with FindCoordinator like any group's).

A share group lives on the partition its id hashes to, with the classic and consumer groups of that partition, and
is served where the group coordinator serves it (``CoordinatorRuntime.owner``: NOT_COORDINATOR elsewhere,
COORDINATOR_LOAD_IN_PROGRESS while loading). One group id is one kind of group: a share group heartbeat for a classic
or consumer group is GROUP_ID_NOT_FOUND, and the group coordinator refuses a share group's id to the other protocols
(``GroupCoordinator.share_groups``), lists share groups in ListGroups (type ``share``) and lets DeleteGroups delete
an empty one.

**Stored as Kafka stores it**: each heartbeat or timer that changes a group appends the records the core asks for
(Kafka's ShareGroup* records, ``broker/groups/share_records.py``) to the group's partition through the coordinator
runtime, acks=all, before the heartbeat is answered, with the group's lock held from the core's step to the append's
outcome. The stored records (the last value of each key) are kept beside the partition's other groups
(``GroupShard.share_records``, filled by the load's replay); a coordinator that takes the partition over restores
its share groups from them (``replayed``) with their epochs, members and assignments, each member's session
starting then. A failed append rebuilds the group from its stored records: the step never happened. The topics whose
share-partitions have state for the group (what a deletion resets) are stored too (ShareGroupStatePartitionMetadata).
What a group has consumed is not here: that is the share-partitions' durable state (``__share_group_state``).

A member that leaves or whose session expires is reported once its removal is stored (``on_removed``): the
partition leader on this broker closes its share sessions here, releasing its records (elsewhere they are released
when their locks expire).

A group's own ``share.session.timeout.ms`` and ``share.heartbeat.interval.ms`` (group configs, in the metadata
image) apply from each member's next heartbeat: the session deadline it starts and the interval it answers.

Timers: each partition with share groups has a task that sleeps until the earliest session deadline of its groups
(or until a heartbeat may have moved it) and removes the members whose session expired.

Deleting a group resets the durable state of each share-partition of the topics it has state for (Kafka deletes it):
InitializeShareGroupState at a newer state epoch, so a group of the same id starts over where
``share.auto.offset.reset`` says, and the leaders still holding the old state are fenced at their next write; then
tombstones remove its records.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from odradek.broker.coordinator.clock import Clock
from odradek.broker.coordinator.decisions import earliest, sleep_s
from odradek.broker.groups.coordinator import GroupCoordinator, OffsetsPartition, commit_append_error, topic_infos
from odradek.broker.groups.group import append_error_to_response_error
from odradek.broker.groups.loader import encode_records
from odradek.broker.groups.messages import GroupListing
from odradek.broker.groups.records import OFFSETS_TOPIC
from odradek.broker.groups.share_records import (
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareRecord,
    ShareRecordKey,
    ShareRecordValue,
    StateTopic,
)
from odradek.broker.share.group import (
    ShareGroup,
    ShareGroupConfig,
    ShareGroupDescription,
    ShareGroupResult,
    ShareHeartbeatRequest,
    ShareHeartbeatResponse,
)
from odradek.broker.share.persister import SharePersister
from odradek.broker.share.state_records import SharePartitionKey
from odradek.client.common.group_configs import share_overrides
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.errors import ErrorCode

logger = logging.getLogger(__name__)

SHARE = "share"  # the protocol type and group type of share groups (ListGroups)


Consumed = dict[bytes, tuple[str, int]]  # topic id -> (name, partitions)


@dataclass(slots=True)
class _Shard:
    """The share groups of one offsets partition."""

    groups: dict[str, ShareGroup] = field(default_factory=dict)
    # Each group's topics with state since it was made: what a deletion resets.
    consumed: dict[str, Consumed] = field(default_factory=dict)
    # One heartbeat, timer or deletion of a group at a time, from the core's step to its append's outcome.
    locks: dict[str, asyncio.Lock] = field(default_factory=dict)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    timers: bool = False

    def lock(self, group_id: str) -> asyncio.Lock:
        lock = self.locks.get(group_id)
        if lock is None:
            lock = self.locks[group_id] = asyncio.Lock()
        return lock


def state_metadata(consumed: Consumed) -> ShareGroupStatePartitionMetadataValue:
    """The stored form of a group's topics with state: every partition of each initialized."""
    return ShareGroupStatePartitionMetadataValue(
        tuple(StateTopic(t, name, tuple(range(count))) for t, (name, count) in sorted(consumed.items()))
    )


def consumed_of(value: ShareRecordValue | None) -> Consumed:
    if not isinstance(value, ShareGroupStatePartitionMetadataValue):
        return {}
    return {t.topic_id: (t.name, max(t.partitions, default=-1) + 1) for t in value.initialized}


class ShareGroupCoordinator:
    """``groups``: the group coordinator, whose partitions (and routing) share groups use; ``persister``: to reset a
    deleted group's share-partitions."""

    def __init__(
        self,
        groups: GroupCoordinator,
        image: Callable[[], MetadataImage],
        config: ShareGroupConfig,
        persister: SharePersister | None = None,
        clock: Callable[[], int] | None = None,
        on_removed: Callable[[str, tuple[str, ...]], None] = lambda group, members: None,
    ) -> None:
        self.groups = groups
        self._image = image
        self.config = config
        self.persister = persister
        self.on_removed = on_removed
        self.clock = clock or Clock()
        self._shards: weakref.WeakKeyDictionary[OffsetsPartition, _Shard] = weakref.WeakKeyDictionary()
        groups.share_groups = self
        for cp in list(groups.partitions.values()):  # replayed before this coordinator existed
            if cp.replayed and cp.current():
                self.replayed(cp)
                if cp.loaded:
                    self.loaded(cp)

    # -- routing ---------------------------------------------------------------------------------------------------

    def _route(self, group_id: str) -> tuple[ErrorCode.ValueType, str, OffsetsPartition | None]:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, "The group id is empty.", None
        if self._image().topic(OFFSETS_TOPIC) is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The offsets topic does not exist yet.", None
        error, cp = self.groups.runtime.owner(group_id)
        if cp is None:
            return error, f"This broker does not coordinate group {group_id}.", None
        return ErrorCode.NONE, "", cp

    def _shard(self, cp: OffsetsPartition) -> _Shard:
        shard = self._shards.get(cp)
        if shard is None:
            shard = self._shards[cp] = _Shard()
        if not shard.timers:
            shard.timers = True
            cp.spawn(self._timers(cp, shard), f"share-group-timers-{cp.index}")
        return shard

    # -- what the group coordinator asks (GroupCoordinator.share_groups) -------------------------------------------

    def replayed(self, cp: OffsetsPartition) -> None:
        """The partition's log is replayed: its share groups as stored, each member's session starting now."""
        shard = self._shards[cp] = _Shard()
        now = self.clock()
        for group_id, records in cp.shard.share_records.items():
            shard.groups[group_id] = ShareGroup.restore(group_id, records, now, self.config_of(group_id))
            shard.consumed[group_id] = consumed_of(records.get(ShareGroupStatePartitionMetadataKey(group_id)))
        if shard.groups:
            logger.info("offsets partition %d: %d share groups restored", cp.index, len(shard.groups))

    def loaded(self, cp: OffsetsPartition) -> None:
        shard = self._shards.get(cp)
        if shard is not None and shard.groups:
            self._shard(cp)  # its session timers

    def owns(self, cp: OffsetsPartition, group_id: str) -> bool:
        shard = self._shards.get(cp)
        return shard is not None and group_id in shard.groups

    def listings(self, cp: OffsetsPartition) -> list[GroupListing]:
        shard = self._shards.get(cp)
        if shard is None:
            return []
        return [GroupListing(g.group_id, SHARE, g.state.value, SHARE) for g in shard.groups.values()]

    async def delete(self, cp: OffsetsPartition, group_id: str) -> ErrorCode.ValueType:
        """DeleteGroups of a share group: only an empty one; its share-partitions' state is reset, then its records
        are tombstoned."""
        shard = self._shards.get(cp)
        if shard is None or group_id not in shard.groups:
            return ErrorCode.GROUP_ID_NOT_FOUND
        async with shard.lock(group_id):
            group = shard.groups.get(group_id)
            if group is None or not cp.current():
                return ErrorCode.GROUP_ID_NOT_FOUND if group is None else ErrorCode.NOT_COORDINATOR
            if group.members:
                return ErrorCode.NON_EMPTY_GROUP
            if self.persister is not None:
                for topic_id, (name, count) in shard.consumed.get(group_id, {}).items():
                    for index in range(count):
                        answer = await self.persister.initialize(SharePartitionKey(group_id, topic_id, index), -1)
                        if answer.error != ErrorCode.NONE:
                            logger.warning("share group %s: %s-%d not reset: %s", group_id, name, index, answer)
                            return answer.error
            stored = cp.shard.share_records.get(group_id, {})
            code = await self._store(cp, shard, group_id, [(key, None) for key in reversed(stored)])
            if code != ErrorCode.NONE:
                return commit_append_error(code)
            group.delete()
            shard.groups.pop(group_id, None)
            shard.consumed.pop(group_id, None)
        logger.info("share group %s deleted", group_id)
        return ErrorCode.NONE

    # -- storing ---------------------------------------------------------------------------------------------------

    async def _store(self, cp: OffsetsPartition, shard: _Shard, group_id: str, records: Sequence[ShareRecord]) -> int:
        """Append a step's records (acks=all, through the runtime). Once stored they join the group's stored
        records; if the append fails, the group is rebuilt from those (or dropped: never stored). The append's
        error code (NONE when there was nothing to store)."""
        if not records:
            return ErrorCode.NONE
        code = cp.acknowledged(await self.groups.runtime.append(cp, encode_records(records, self.clock())))
        if not cp.current():
            return code
        stored = cp.shard.share_records
        if code == ErrorCode.NONE:
            live: dict[ShareRecordKey, ShareRecordValue] = stored.setdefault(group_id, {})
            for key, value in records:
                live.pop(key, None)
                if value is not None:
                    live[key] = value
            if not live:
                del stored[group_id]
            return code
        logger.warning("share group %s: append failed (%s), rebuilt from its stored records", group_id, code)
        if group_id in stored:
            shard.groups[group_id] = ShareGroup.restore(
                group_id, stored[group_id], self.clock(), self.config_of(group_id)
            )
        else:
            shard.groups.pop(group_id, None)
        return code

    async def _step(self, cp: OffsetsPartition, shard: _Shard, group: ShareGroup, result: ShareGroupResult) -> int:
        """Store a step's records, with the group's topics with state when they grew (the subscribed topics are
        what its members fetch); then report the members it removed. The append's error code."""
        group_id = group.group_id
        for event in result.events:
            logger.info("share group %s: %s", group_id, event)
        records: list[ShareRecord] = list(result.records)
        consumed = shard.consumed.get(group_id, {})
        grown = dict(consumed)
        for t in group.subscribed_topics:
            grown[t.topic_id] = (t.name, max(t.num_partitions, grown.get(t.topic_id, ("", 0))[1]))
        if records and grown != consumed:
            records.append((ShareGroupStatePartitionMetadataKey(group_id), state_metadata(grown)))
        if records:
            shard.groups.setdefault(group_id, group)  # before the append: one group id is one kind of group
        code = await self._store(cp, shard, group_id, records)
        if code == ErrorCode.NONE and cp.current():
            shard.consumed.setdefault(group_id, {}).update(grown)  # in place: the offset admin APIs hold it
            if result.removed:
                self.on_removed(group_id, result.removed)
        shard.wake.set()
        return code

    def store_consumed(self, group_id: str) -> None:
        """The offset admin APIs changed the group's topics with state (``consumed``): store them, in a task."""
        _, _, cp = self._route(group_id)
        if cp is not None and group_id in self._shard(cp).groups:
            cp.spawn(self._store_consumed(cp, group_id), f"share-group-state-topics-{group_id}")

    async def _store_consumed(self, cp: OffsetsPartition, group_id: str) -> None:
        shard = self._shard(cp)
        async with shard.lock(group_id):
            if group_id not in shard.groups or not cp.current():
                return
            key = ShareGroupStatePartitionMetadataKey(group_id)
            value = state_metadata(shard.consumed.get(group_id, {}))
            if cp.shard.share_records.get(group_id, {}).get(key) != value:
                code = await self._store(cp, shard, group_id, [(key, value)])
                if code != ErrorCode.NONE:
                    logger.warning("share group %s: its topics with state were not stored: %s", group_id, code)

    # -- requests --------------------------------------------------------------------------------------------------

    async def heartbeat(self, group_id: str, request: ShareHeartbeatRequest) -> ShareHeartbeatResponse:
        """ShareGroupHeartbeat, answered once the records it caused are stored."""
        error, message, cp = self._route(group_id)
        if cp is None:
            return ShareHeartbeatResponse(error, message)
        if group_id in cp.shard.groups or group_id in cp.shard.consumer_groups:
            return ShareHeartbeatResponse(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        shard = self._shard(cp)
        async with shard.lock(group_id):
            if not cp.current():
                return ShareHeartbeatResponse(ErrorCode.NOT_COORDINATOR, "The coordinator moved.")
            group = shard.groups.get(group_id)
            if group is None:
                group = ShareGroup(group_id, self.config)
            group.config = self.config_of(group_id)
            result = group.heartbeat(request, self.clock(), topic_infos(self._image()))
            code = await self._step(cp, shard, group, result)
        if code != ErrorCode.NONE:
            error = append_error_to_response_error(ErrorCode.ValueType(code))
            return ShareHeartbeatResponse(error, f"The group's records could not be stored: {ErrorCode.Name(error)}.")
        assert result.response is not None
        return result.response

    def config_of(self, group_id: str) -> ShareGroupConfig:
        """The broker's settings with the group's own share.session.timeout.ms and share.heartbeat.interval.ms
        (group configs), as they are now: each heartbeat takes them."""
        own = share_overrides(self._image().group_configs(group_id))
        session = own.session_timeout_ms or self.config.session_timeout_ms
        interval = own.heartbeat_interval_ms or self.config.heartbeat_interval_ms
        if (own.session_timeout_ms is None and own.heartbeat_interval_ms is None) or interval >= session:
            return self.config  # none set, or (set before the node's settings changed) no valid pair
        return replace(self.config, session_timeout_ms=session, heartbeat_interval_ms=interval)

    def describe(self, group_id: str) -> tuple[ErrorCode.ValueType, str | None, ShareGroupDescription | None]:
        """ShareGroupDescribe of one group: GROUP_ID_NOT_FOUND for an unknown group or one of another type."""
        error, message, cp = self._route(group_id)
        if cp is None:
            return error, message, None
        shard = self._shards.get(cp)
        group = shard.groups.get(group_id) if shard is not None else None
        if group is None:
            if group_id in cp.shard.groups or group_id in cp.shard.consumer_groups:
                return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.", None
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", None
        return ErrorCode.NONE, None, group.describe()

    def lookup(self, group_id: str) -> tuple[ErrorCode.ValueType, str | None, ShareGroup | None]:
        """The share group, coordinated here (the offset admin APIs'): GROUP_ID_NOT_FOUND for an unknown group or
        one of another type."""
        error, message, description = self.describe(group_id)
        if description is None:
            return error, message, None
        _, _, cp = self._route(group_id)
        assert cp is not None
        return ErrorCode.NONE, None, self._shard(cp).groups[group_id]

    def consumed(self, group_id: str) -> dict[bytes, tuple[str, int]]:
        """The group's share-partitions with state here: topic id -> (name, partitions), changed in place by the
        offset admin APIs (an alter adds topics, a delete removes them)."""
        _, _, cp = self._route(group_id)
        if cp is None:
            return {}
        return self._shard(cp).consumed.setdefault(group_id, {})

    def topic_names(self) -> dict[bytes, str]:
        return {t.topic_id: t.name for t in self._image().topics.values()}

    # -- timers ----------------------------------------------------------------------------------------------------

    async def fire(self, cp: OffsetsPartition, shard: _Shard) -> int | None:
        """Remove the members whose session expired (each group's removal stored under its lock); the earliest
        session deadline left."""
        deadlines = []
        for group_id in list(shard.groups):
            group = shard.groups.get(group_id)
            deadline = group.next_deadline_ms() if group is not None else None
            if group is not None and deadline is not None and deadline <= self.clock():
                async with shard.lock(group_id):
                    group = shard.groups.get(group_id)
                    if group is not None and cp.current():
                        await self._step(cp, shard, group, group.tick(self.clock()))
                group = shard.groups.get(group_id)
                deadline = group.next_deadline_ms() if group is not None else None
            deadlines.append(deadline)
        return earliest(deadlines)

    async def _timers(self, cp: OffsetsPartition, shard: _Shard) -> None:
        while cp.current():
            shard.wake.clear()
            wait = sleep_s(await self.fire(cp, shard), self.clock())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(shard.wake.wait(), wait)
