"""A share group's offsets as an administrator sees them (Kafka 4.1's DescribeShareGroupOffsets,
AlterShareGroupOffsets and DeleteShareGroupOffsets), served by the group's share group coordinator.

- **Describe** reads each share-partition's start offset (SPSO) and the leader epoch that last read it from its
  share coordinator (a summary read: no leader is fenced by it). Without topics it covers the share-partitions the
  group has state for (what it consumed, or had altered, while coordinated here); a share-partition with nothing
  stored has start offset -1.
- **Alter** sets the start offsets of share-partitions of an *empty* group (else NON_EMPTY_GROUP): each is
  initialized at that offset at a newer state epoch (InitializeShareGroupState), which forgets its in-flight state
  and fences any leader still holding the old state at its next write.
- **Delete** removes the state of the given topics' share-partitions of an empty group: they are initialized with
  no start offset at a newer state epoch (the fence a tombstone would lose), so a later consumer starts where
  ``share.auto.offset.reset`` says, and the topics leave the group's described share-partitions.

The leader on this broker forgets its cached share-partitions of the group at once (``on_reset``); the others do
when the group's last share session there closes, or at their next write, which the new state epoch fences.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from odradek.broker.share.group_coordinator import ShareGroupCoordinator
from odradek.broker.share.persister import SharePersister
from odradek.broker.share.state_records import SharePartitionKey
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.errors import ErrorCode

NO_TOPIC_ID = bytes(16)
_UNKNOWN = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED


@dataclass(frozen=True, slots=True)
class PartitionOffset:
    partition: int
    start_offset: int = -1
    leader_epoch: int = -1
    error: ErrorCode.ValueType = ErrorCode.NONE
    message: str | None = None


@dataclass(frozen=True, slots=True)
class TopicOffsets:
    """One topic's answer: its partitions' (describe, alter), or its own error (delete)."""

    name: str
    topic_id: bytes
    partitions: tuple[PartitionOffset, ...] = ()
    error: ErrorCode.ValueType = ErrorCode.NONE
    message: str | None = None


@dataclass(frozen=True, slots=True)
class OffsetsAnswer:
    error: ErrorCode.ValueType = ErrorCode.NONE
    message: str | None = None
    topics: tuple[TopicOffsets, ...] = ()


class ShareGroupOffsets:
    """``on_reset(group)``: share-partitions of the group were reset (the local leader drops what it caches)."""

    def __init__(
        self,
        groups: ShareGroupCoordinator,
        persister: SharePersister,
        image: Callable[[], MetadataImage],
        on_reset: Callable[[str], None] = lambda group: None,
    ) -> None:
        self.groups = groups
        self.persister = persister
        self._image = image
        self.on_reset = on_reset

    def _partition_count(self, name: str) -> tuple[bytes, int] | None:
        topic = self._image().topic(name)
        return None if topic is None else (topic.topic_id, len(topic.partitions))

    # -- describe --------------------------------------------------------------------------------------------------

    async def describe(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[int]]] | None, denied: Iterable[str] = ()
    ) -> OffsetsAnswer:
        """``topics``: (name, partitions) to describe; None: every share-partition the group has state for."""
        error, message, group = self.groups.lookup(group_id)
        if group is None:
            return OffsetsAnswer(error, message)
        if topics is None:
            names = {t.topic_id: t.name for t in self._image().topics.values()}
            consumed = self.groups.consumed(group_id)
            topics = [(names[t], range(count)) for t, (_, count) in sorted(consumed.items()) if t in names]
            topics.sort()
        refused = set(denied)
        out = []
        for name, partitions in _merged(topics):
            found = self._partition_count(name)
            if found is None or name in refused:
                code = _DENIED if name in refused else _UNKNOWN
                out.append(TopicOffsets(name, NO_TOPIC_ID, tuple(PartitionOffset(p, error=code) for p in partitions)))
                continue
            topic_id, count = found
            answers = []
            for p in partitions:
                if not 0 <= p < count:
                    answers.append(PartitionOffset(p, error=_UNKNOWN, message=f"{name} has no partition {p}."))
                    continue
                a = await self.persister.summary(SharePartitionKey(group_id, topic_id, p))
                if a.error != ErrorCode.NONE:
                    answers.append(PartitionOffset(p, error=a.error, message=a.message or None))
                else:
                    start = a.state.start_offset if a.state is not None else -1
                    answers.append(PartitionOffset(p, start, a.leader_epoch))
            out.append(TopicOffsets(name, topic_id, tuple(answers)))
        return OffsetsAnswer(topics=tuple(out))

    # -- alter, delete ---------------------------------------------------------------------------------------------

    def _empty_group(self, group_id: str) -> OffsetsAnswer | None:
        """The refusal of an unknown or non-empty group, or None."""
        error, message, group = self.groups.lookup(group_id)
        if group is None:
            return OffsetsAnswer(error, message)
        if group.members:
            return OffsetsAnswer(ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")
        return None

    async def alter(
        self, group_id: str, topics: Sequence[tuple[str, Sequence[tuple[int, int]]]], denied: Iterable[str] = ()
    ) -> OffsetsAnswer:
        """``topics``: (name, [(partition, start offset)]) to set."""
        refused = self._empty_group(group_id)
        if refused is not None:
            return refused
        denied_names = set(denied)
        consumed = self.groups.consumed(group_id)
        out = []
        for name, partitions in topics:
            found = self._partition_count(name)
            if found is None or name in denied_names:
                code = _DENIED if name in denied_names else _UNKNOWN
                out.append(
                    TopicOffsets(name, NO_TOPIC_ID, tuple(PartitionOffset(p, error=code) for p, _ in partitions))
                )
                continue
            topic_id, count = found
            answers = []
            for p, offset in partitions:
                if not 0 <= p < count:
                    answers.append(PartitionOffset(p, error=_UNKNOWN, message=f"{name} has no partition {p}."))
                elif offset < 0:
                    answers.append(PartitionOffset(p, error=ErrorCode.INVALID_REQUEST, message="Negative offset."))
                else:
                    a = await self.persister.initialize(SharePartitionKey(group_id, topic_id, p), offset)
                    answers.append(PartitionOffset(p, offset, error=a.error, message=a.message or None))
            if any(a.error == ErrorCode.NONE for a in answers):
                consumed[topic_id] = (name, max(count, consumed.get(topic_id, ("", 0))[1]))
            out.append(TopicOffsets(name, topic_id, tuple(answers)))
        self.on_reset(group_id)
        return OffsetsAnswer(topics=tuple(out))

    async def delete(self, group_id: str, topics: Sequence[str], denied: Iterable[str] = ()) -> OffsetsAnswer:
        refused = self._empty_group(group_id)
        if refused is not None:
            return refused
        denied_names = set(denied)
        consumed = self.groups.consumed(group_id)
        out = []
        for name in dict.fromkeys(topics):
            found = self._partition_count(name)
            if found is None or name in denied_names:
                code = _DENIED if name in denied_names else _UNKNOWN
                out.append(TopicOffsets(name, NO_TOPIC_ID, error=code))
                continue
            topic_id, count = found
            count = max(count, consumed.get(topic_id, ("", 0))[1])
            error, message = ErrorCode.NONE, None
            for p in range(count):
                a = await self.persister.initialize(SharePartitionKey(group_id, topic_id, p), -1)
                if a.error != ErrorCode.NONE:
                    error, message = a.error, a.message or None
                    break
            if error == ErrorCode.NONE:
                consumed.pop(topic_id, None)
            out.append(TopicOffsets(name, topic_id, error=error, message=message))
        self.on_reset(group_id)
        return OffsetsAnswer(topics=tuple(out))


def _merged(topics: Iterable[tuple[str, Iterable[int]]]) -> list[tuple[str, list[int]]]:
    """Entries naming one topic twice merged, each partition once, in the order given."""
    out: dict[str, dict[int, None]] = {}
    for name, partitions in topics:
        out.setdefault(name, {}).update(dict.fromkeys(partitions))
    return [(name, list(ps)) for name, ps in out.items()]
