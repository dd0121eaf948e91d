"""Kafka's RoundRobinAssignor ("roundrobin").

All partitions of all subscribed topics, sorted by topic then number, are dealt one at a time to the members in
member order (static members by group.instance.id first), going round in a circle; a member not subscribed to a
partition's topic is skipped for that partition. With identical subscriptions the counts differ by at most one.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.client.consumer.assignors.base import (
    EagerAssignor,
    MemberId,
    checked_counts,
    sorted_members,
    to_assignments,
)
from odradek.client.consumer.protocol import Assignment, Subscription
from odradek.client.structs import TopicPartition


class RoundRobinAssignor(EagerAssignor):
    name = "roundrobin"

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[MemberId, Subscription]
    ) -> dict[MemberId, Assignment]:
        counts = checked_counts(partitions_per_topic)
        members = sorted_members(subscriptions)
        out: dict[MemberId, list[TopicPartition]] = {member: [] for member in members}
        subscribed = sorted({topic for sub in subscriptions.values() for topic in sub.topics if topic in counts})
        position = 0  # the circle's cursor: the member after the one that took the last partition
        for topic in subscribed:
            for partition in range(counts[topic]):
                # Bounded: some member subscribes to every topic in ``subscribed``.
                while topic not in subscriptions[members[position]].topics:
                    position = (position + 1) % len(members)
                out[members[position]].append(TopicPartition(topic, partition))
                position = (position + 1) % len(members)
        return to_assignments(members, out)
