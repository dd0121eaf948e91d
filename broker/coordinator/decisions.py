"""The coordinator runtime's decisions, free of I/O so that they are tested without an event loop: which partitions
to load and unload on a leadership change, how a request for a partition is answered, where a key's coordinator
is, and when a partition's timers wake next."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from odradek.broker.groups.partitioner import offsets_partition_for
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.errors import ErrorCode


def plan_leadership(loaded: Mapping[int, int], leading: Mapping[int, int]) -> tuple[list[int], list[tuple[int, int]]]:
    """Given the partitions the coordinator holds (index -> leader epoch it loaded at) and those this broker leads
    now, which to unload (no longer led, or led at another epoch) and which to load, with their epochs."""
    unload = sorted(i for i, epoch in loaded.items() if leading.get(i) != epoch)
    load = sorted((i, epoch) for i, epoch in leading.items() if loaded.get(i) != epoch)
    return unload, load


def routing_error(current: bool, loaded: bool) -> ErrorCode.ValueType:
    """The answer to a request for a partition: NOT_COORDINATOR unless this broker hosts it and still leads it at the
    epoch it loaded (what it holds may be stale otherwise), COORDINATOR_LOAD_IN_PROGRESS until it has loaded, NONE
    once it serves."""
    if not current:
        return ErrorCode.NOT_COORDINATOR
    if not loaded:
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    return ErrorCode.NONE


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


def earliest(deadlines: Iterable[int | None]) -> int | None:
    """The earliest of the deadlines that are set (None: none is)."""
    return min((d for d in deadlines if d is not None), default=None)


def sleep_s(deadline_ms: int | None, now_ms: int) -> float | None:
    """How long a timer task sleeps (in seconds) before its next deadline: None, until woken, when there is none;
    0 when it is already due."""
    return None if deadline_ms is None else max(0.0, (deadline_ms - now_ms) / 1000)


@dataclass(slots=True)
class Interval:
    """A check that runs every ``period_s`` seconds of a monotonic clock, the first time at once. Spaced on the
    monotonic clock, a wall-clock step back cannot hold it off."""

    period_s: float
    next_s: float = 0.0

    def due(self, tick_s: float) -> bool:
        """Whether the check runs at ``tick_s``; if it does, the next one is a period later."""
        if tick_s < self.next_s:
            return False
        self.next_s = tick_s + self.period_s
        return True
