"""The consumer coordinator's decisions, as pure functions the asyncio shell (coordinator.py) calls.

- ``error_action``: what a group response's error code means for the member (retry, find the coordinator again,
  rejoin keeping its partitions, rejoin after losing them, or stop with a fatal error), following Kafka's
  ConsumerCoordinator.
- ``leader_assignments``: the leader's part of SyncGroup: decode every member's subscription, run the assignor
  the broker chose, encode the assignments.
- ``subscribed_topics``: the topics a list or pattern subscription names among the topics metadata knows.
- ``metadata_rejoin_needed``: whether a metadata change makes a stable member rejoin.
- ``commit_refusal``: why a commit cannot be sent in the member's current state (Kafka's CommitFailedException
  and RebalanceInProgressException cases), if it cannot.
- ``heartbeat_due`` / ``poll_expired``: the heartbeat task's two clocks.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from odradek.client.consumer.assignors.base import Assignor
from odradek.client.consumer.protocol import Subscription
from odradek.client.errors import CommitFailedError, ErrorCode

INTERNAL_TOPIC_PREFIX = "__"  # internal topics (__consumer_offsets) never match a pattern subscription


class Action(enum.Enum):
    OK = "ok"
    RETRY = "retry"  # the same request again after retry.backoff.ms
    FIND_COORDINATOR = "find_coordinator"  # the coordinator moved or is unreachable: find it again, then retry
    REJOIN = "rejoin"  # a rebalance started: rejoin, keeping the generation (cooperative members keep partitions)
    RESET_GENERATION = "reset_generation"  # the generation is gone: partitions are lost, rejoin
    RESET_MEMBER = "reset_member"  # the member id is gone too: partitions are lost, rejoin as a new member
    FATAL = "fatal"  # raised from poll() (e.g. FENCED_INSTANCE_ID: another process took this instance id)


_ACTIONS: dict[int, Action] = {
    ErrorCode.NONE: Action.OK,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: Action.RETRY,
    ErrorCode.UNSTABLE_OFFSET_COMMIT: Action.RETRY,
    ErrorCode.REQUEST_TIMED_OUT: Action.RETRY,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: Action.FIND_COORDINATOR,
    ErrorCode.NOT_COORDINATOR: Action.FIND_COORDINATOR,
    ErrorCode.NETWORK_EXCEPTION: Action.FIND_COORDINATOR,
    ErrorCode.REBALANCE_IN_PROGRESS: Action.REJOIN,
    ErrorCode.ILLEGAL_GENERATION: Action.RESET_GENERATION,
    ErrorCode.UNKNOWN_MEMBER_ID: Action.RESET_MEMBER,
}


def error_action(code: int) -> Action:
    """Every code not listed (FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL, GROUP_MAX_SIZE_REACHED,
    INVALID_SESSION_TIMEOUT, INVALID_GROUP_ID, ...) is fatal: retrying cannot change the answer."""
    return _ACTIONS.get(code, Action.FATAL)


@dataclass(frozen=True)
class JoinedMember:
    """One entry of the JoinGroup member list the leader receives."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


def leader_assignments(
    assignor: Assignor, partition_counts: Mapping[str, int], members: Sequence[JoinedMember]
) -> dict[str, bytes]:
    """Every member's encoded Assignment. ``group_instance_id`` comes from the member list, not the subscription
    bytes (it is not part of them), as Kafka's leader does. A subscription that does not decode is a bug in some
    member's client: ConsumerProtocolError propagates and the leader does not send a wrong assignment."""
    subscriptions: dict[str, Subscription] = {}
    for member in members:
        decoded = Subscription.decode(member.metadata)
        subscriptions[member.member_id] = Subscription(
            decoded.topics,
            decoded.user_data,
            decoded.owned_partitions,
            decoded.generation_id,
            decoded.rack_id,
            group_instance_id=member.group_instance_id,
        )
    topics = {topic for s in subscriptions.values() for topic in s.topics}
    counts = {topic: partition_counts[topic] for topic in topics if topic in partition_counts}
    return {member: a.encode() for member, a in assignor.assign(counts, subscriptions).items()}


def subscribed_topics(subscription: Iterable[str] | re.Pattern[str], known_topics: Iterable[str]) -> frozenset[str]:
    """A list subscription is taken as is (topics not yet in metadata stay subscribed, as in Kafka); a pattern
    matches whole names among the known topics, never internal ones."""
    if isinstance(subscription, re.Pattern):
        return frozenset(
            t for t in known_topics if not t.startswith(INTERNAL_TOPIC_PREFIX) and subscription.fullmatch(t)
        )
    return frozenset(subscription)


def metadata_rejoin_needed(
    current_topics: frozenset[str],
    joined_topics: frozenset[str],
    counts: Mapping[str, int],
    assigned_from: Mapping[str, int | None] | None,
) -> bool:
    """Whether a stable member must rejoin after a metadata change, as Kafka's consumer decides: its pattern now
    matches other topics, or, for the leader (``assigned_from`` is the partition count of every subscribed topic it
    assigned from, None for a topic its metadata did not show then), a count differs now. A topic the leader could
    not see when it assigned (a broker whose metadata lagged behind a topic's creation) thus gets assigned once
    it is seen, rather than never."""
    if current_topics != joined_topics:
        return True
    return assigned_from is not None and any(counts.get(t) != n for t, n in assigned_from.items())


def commit_refusal(
    group_managed: bool, stable: bool, rebalancing: bool, left_reason: str | None
) -> CommitFailedError | None:
    """A member of a group commits only in a stable generation. During a rebalance the commit is refused as
    retriable-after-rejoin (REBALANCE_IN_PROGRESS); after the member left or lost its generation (poll timeout,
    expired session) it is refused with CommitFailedError: its partitions may already be someone else's.
    A consumer using ``assign`` commits outside any generation and is never refused here."""
    if not group_managed or stable:
        return None
    if rebalancing:
        return CommitFailedError(
            "commit refused: the consumer is in a rebalance; poll() to complete it, then commit again",
            code=ErrorCode.REBALANCE_IN_PROGRESS,
        )
    why = left_reason or "it is not a member of an active generation"
    return CommitFailedError(
        f"commit refused: the consumer left the group ({why}); its partitions may have moved. poll() rejoins.",
        code=ErrorCode.UNKNOWN_MEMBER_ID,
    )


def heartbeat_due(last_sent: float, now: float, interval: float) -> float:
    """Seconds until the next heartbeat (0: send now)."""
    return max(0.0, last_sent + interval - now)


def poll_expired(last_poll: float, now: float, max_poll_interval: float) -> bool:
    """The application did not call poll() within max.poll.interval.ms: the member must leave the group."""
    return now - last_poll > max_poll_interval


def validate_pattern(pattern: str | re.Pattern[str]) -> re.Pattern[str]:
    if isinstance(pattern, re.Pattern):
        return pattern
    try:
        return re.compile(pattern)
    except re.error as e:
        raise ValueError(f"subscribe: bad topic pattern {pattern!r}: {e}") from None
