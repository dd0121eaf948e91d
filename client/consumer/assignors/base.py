"""What every assignor shares: the interface the consumer's coordinator calls, and Kafka's member order.

The group leader runs the assignor named by the group's chosen protocol over every member's subscription and
sends each member its Assignment in SyncGroup; the coordinator itself never looks inside. Assignors are pure: the
same partition counts and subscriptions give the same assignment, whatever the order of the mappings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal, Protocol

from odradek.client.consumer.protocol import Assignment, Subscription
from odradek.client.structs import TopicPartition

MemberId = str
RebalanceProtocol = Literal["eager", "cooperative"]


class Assignor(Protocol):
    """``name`` is the `partition.assignment.strategy` value and the JoinGroup protocol name.
    ``rebalance_protocol`` is the one the assignor prefers; ``supported_protocols`` every one it can run under
    (the consumer picks the most advanced one that all its configured assignors support, as Kafka does)."""

    @property
    def name(self) -> str: ...

    @property
    def rebalance_protocol(self) -> RebalanceProtocol: ...

    @property
    def supported_protocols(self) -> tuple[RebalanceProtocol, ...]: ...

    def subscription_user_data(self, generation_id: int) -> bytes | None:
        """The user data this member puts in its Subscription, given the generation of its last assignment."""
        ...

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[MemberId, Subscription]
    ) -> dict[MemberId, Assignment]:
        """Every member of ``subscriptions`` gets an entry, possibly empty. Topics missing from
        ``partitions_per_topic`` (unknown to metadata) are skipped, as Kafka does."""
        ...


class EagerAssignor:
    """What the eager assignors share: they revoke everything before a rebalance and carry no user data."""

    rebalance_protocol: RebalanceProtocol = "eager"
    supported_protocols: tuple[RebalanceProtocol, ...] = ("eager",)

    def subscription_user_data(self, generation_id: int) -> bytes | None:
        return None


def member_order(member_id: MemberId, subscription: Subscription) -> tuple[int, str]:
    """Kafka's member order (KIP-345): static members first, by group.instance.id, then dynamic members by member
    id. Member ids are new at every restart, instance ids are not, so static members keep their place and with it
    their range or round-robin partitions across rolling restarts."""
    if subscription.group_instance_id is not None:
        return (0, subscription.group_instance_id)
    return (1, member_id)


def sorted_members(subscriptions: Mapping[MemberId, Subscription]) -> list[MemberId]:
    return sorted(subscriptions, key=lambda member: member_order(member, subscriptions[member]))


def checked_counts(partitions_per_topic: Mapping[str, int]) -> dict[str, int]:
    """The topics that have partitions; a negative count is a caller's bug, not a topic to skip."""
    for topic, count in partitions_per_topic.items():
        if count < 0:
            raise ValueError(f"topic {topic!r} has a negative partition count {count}")
    return {topic: count for topic, count in partitions_per_topic.items() if count > 0}


def to_assignments(
    members: Iterable[MemberId], partitions: Mapping[MemberId, Iterable[TopicPartition]]
) -> dict[MemberId, Assignment]:
    """One Assignment per member, its partitions sorted by topic and number."""
    return {member: Assignment(tuple(sorted(partitions.get(member, ())))) for member in members}
