"""Kafka's RangeAssignor ("range"), without rack awareness.

Per topic, the topic's partitions in numeric order are cut into consecutive ranges over the members subscribed to
it, in member order (static members by group.instance.id first, see ``member_order``): each member gets
partitions // members, and the first partitions % members members one more. Co-partitioned topics (same partition
count, same subscribers) therefore give partition N of each to the same member, which joins rely on.
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


class RangeAssignor(EagerAssignor):
    name = "range"

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[MemberId, Subscription]
    ) -> dict[MemberId, Assignment]:
        counts = checked_counts(partitions_per_topic)
        members = sorted_members(subscriptions)
        out: dict[MemberId, list[TopicPartition]] = {member: [] for member in members}
        for topic, count in counts.items():
            subscribers = [member for member in members if topic in subscriptions[member].topics]
            if not subscribers:
                continue
            each, extra = divmod(count, len(subscribers))
            start = 0
            for index, member in enumerate(subscribers):
                size = each + (1 if index < extra else 0)
                out[member].extend(TopicPartition(topic, p) for p in range(start, start + size))
                start += size
        return to_assignments(members, out)
