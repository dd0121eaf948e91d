"""The share group coordinator: share groups' membership (``group.ShareGroup``) served on the group coordinator's
partitions of ``__consumer_offsets`` (KIP-932 puts share groups beside classic and consumer groups: a client finds a
share group's coordinator with FindCoordinator like any group's).

A share group lives on the partition its id hashes to, with the classic and consumer groups of that partition, and
is served where the group coordinator serves it (``CoordinatorRuntime.owner``: NOT_COORDINATOR elsewhere,
COORDINATOR_LOAD_IN_PROGRESS while loading). One group id is one kind of group: a share group heartbeat for a classic
or consumer group is GROUP_ID_NOT_FOUND, and the group coordinator refuses a share group's id to the other protocols
(``GroupCoordinator.share_groups``), lists share groups in ListGroups (type ``share``) and lets DeleteGroups delete
an empty one.

**Membership lives in memory**, unlike Kafka, which stores share groups' records in ``__consumer_offsets``: a
coordinator that takes a partition over (a leader move, a restart) starts with no share group there, and members
rejoin after UNKNOWN_MEMBER_ID. What a group has consumed does not depend on it: that is the share-partitions'
durable state (``__share_group_state``). The groups of a partition go when the runtime unloads it.

A member that leaves or whose session expires is reported (``on_removed``): the partition leader on this broker
closes its share sessions here, releasing its records (elsewhere they are released when their locks expire).

A group's own ``share.session.timeout.ms`` and ``share.heartbeat.interval.ms`` (group configs, in the metadata
image) apply from each member's next heartbeat: the session deadline it starts and the interval it answers.

Timers: each partition with share groups has a task that sleeps until the earliest session deadline of its groups
(or until a heartbeat may have moved it) and removes the members whose session expired.

Deleting a group resets the durable state of each share-partition of the topics it subscribed to while coordinated
here (Kafka deletes it): InitializeShareGroupState at a newer state epoch, so a group of the same id starts over where
``share.auto.offset.reset`` says, and the leaders still holding the old state are fenced at their next write.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from odradek.broker.coordinator.clock import Clock
from odradek.broker.coordinator.decisions import earliest, sleep_s
from odradek.broker.groups.coordinator import GroupCoordinator, OffsetsPartition, topic_infos
from odradek.broker.groups.messages import GroupListing
from odradek.broker.groups.records import OFFSETS_TOPIC
from odradek.broker.share.group import (
    ShareGroup,
    ShareGroupConfig,
    ShareGroupDescription,
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


@dataclass(slots=True)
class _Shard:
    """The share groups of one offsets partition."""

    groups: dict[str, ShareGroup] = field(default_factory=dict)
    # Each group's topics since it was made: topic id -> (name, partitions), what a deletion resets.
    consumed: dict[str, dict[bytes, tuple[str, int]]] = field(default_factory=dict)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    timers: bool = False


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

    def owns(self, cp: OffsetsPartition, group_id: str) -> bool:
        shard = self._shards.get(cp)
        return shard is not None and group_id in shard.groups

    def listings(self, cp: OffsetsPartition) -> list[GroupListing]:
        shard = self._shards.get(cp)
        if shard is None:
            return []
        return [GroupListing(g.group_id, SHARE, g.state.value, SHARE) for g in shard.groups.values()]

    async def delete(self, cp: OffsetsPartition, group_id: str) -> ErrorCode.ValueType:
        """DeleteGroups of a share group: only an empty one; its share-partitions' state is reset first."""
        shard = self._shards.get(cp)
        group = shard.groups.get(group_id) if shard is not None else None
        if shard is None or group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        if self.persister is not None:
            for topic_id, (name, count) in shard.consumed.get(group_id, {}).items():
                for index in range(count):
                    answer = await self.persister.initialize(SharePartitionKey(group_id, topic_id, index), -1)
                    if answer.error != ErrorCode.NONE:
                        logger.warning("share group %s: %s-%d not reset: %s", group_id, name, index, answer)
                        return answer.error
        if shard.groups.get(group_id) is not group or group.members:
            return ErrorCode.NON_EMPTY_GROUP  # a member joined meanwhile
        group.delete()
        del shard.groups[group_id]
        shard.consumed.pop(group_id, None)
        logger.info("share group %s deleted", group_id)
        return ErrorCode.NONE

    # -- requests --------------------------------------------------------------------------------------------------

    def heartbeat(self, group_id: str, request: ShareHeartbeatRequest) -> ShareHeartbeatResponse:
        """ShareGroupHeartbeat."""
        error, message, cp = self._route(group_id)
        if cp is None:
            return ShareHeartbeatResponse(error, message)
        if group_id in cp.shard.groups or group_id in cp.shard.consumer_groups:
            return ShareHeartbeatResponse(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        shard = self._shard(cp)
        group = shard.groups.get(group_id)
        if group is None:
            group = ShareGroup(group_id, self.config)
        group.config = self.config_of(group_id)
        result = group.heartbeat(request, self.clock(), topic_infos(self._image()))
        for event in result.events:
            logger.info("share group %s: %s", group_id, event)
        if result.removed:
            self.on_removed(group_id, result.removed)
        if group.members or group_id in shard.groups:
            shard.groups[group_id] = group  # a refused first heartbeat leaves no group
            consumed = shard.consumed.setdefault(group_id, {})
            for t in group.subscribed_topics:
                consumed[t.topic_id] = (t.name, max(t.num_partitions, consumed.get(t.topic_id, ("", 0))[1]))
        shard.wake.set()
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

    def fire(self, cp: OffsetsPartition, shard: _Shard) -> int | None:
        """Remove the members whose session expired; the earliest session deadline left."""
        now = self.clock()
        deadlines = []
        for group in list(shard.groups.values()):
            deadline = group.next_deadline_ms()
            if deadline is not None and deadline <= now:
                result = group.tick(now)
                for event in result.events:
                    logger.info("share group %s: %s", group.group_id, event)
                if result.removed:
                    self.on_removed(group.group_id, result.removed)
                deadline = group.next_deadline_ms()
            deadlines.append(deadline)
        return earliest(deadlines)

    async def _timers(self, cp: OffsetsPartition, shard: _Shard) -> None:
        while cp.current():
            shard.wake.clear()
            wait = sleep_s(self.fire(cp, shard), self.clock())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(shard.wake.wait(), wait)
