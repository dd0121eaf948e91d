"""The ``simple`` assignor of share groups (KIP-932, Kafka's SimpleAssignor): which members fetch from which
partitions.

In a share group a partition may be assigned to several members (they share its records), so there is no
revocation and no exclusive ownership: the assignor only spreads the work. Its rules, as Kafka's:

- **balance first**: with members M and partitions P, each partition is shared by ``sharing = ceil(M / P)``
  members (1 while there are at least as many partitions as members), and the ``sharing * P`` assignments are
  spread over the members so that two members' counts differ by at most one;
- **stickiness next**: a member keeps what it had (still subscribed and existing) up to its count and as long as
  the partition is not shared by more members than ``sharing``; the assignments still missing go, partition by
  partition, to the least loaded members below their count that do not hold that partition yet (rarely a member
  below its count can take none of the partitions left: the assignment is then a little less balanced, as
  Kafka accepts).

Members with different subscriptions: the rule applies to each set of members with the same subscribed topics,
over those topics' partitions. It implements the consumer groups' ``ServerAssignor`` protocol (racks are ignored:
Kafka's simple assignor is not rack-aware), so the shell can treat both alike.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Mapping, Sequence

from odradek.broker.groups.consumer_records import Partitions, TopicId
from odradek.broker.groups.server_assignors import AssignmentMember, PartitionRacks

SIMPLE = "simple"

TopicPartition = tuple[TopicId, int]


class SimpleAssignor:
    name = SIMPLE

    def assign(
        self,
        members: Sequence[AssignmentMember],
        partition_counts: Mapping[TopicId, int],
        previous: Mapping[str, Partitions],
        partition_racks: PartitionRacks | None = None,
    ) -> dict[str, Partitions]:
        by_topics: dict[frozenset[TopicId], list[str]] = defaultdict(list)
        for m in members:
            by_topics[frozenset(t for t in m.topics if partition_counts.get(t, 0) > 0)].append(m.member_id)
        out: dict[str, Partitions] = {m.member_id: frozenset() for m in members}
        for topics, member_ids in by_topics.items():
            partitions = [(t, p) for t in sorted(topics) for p in range(partition_counts[t])]
            out.update(_share(sorted(member_ids), partitions, previous))
        return out


def _share(
    members: list[str], partitions: list[TopicPartition], previous: Mapping[str, Partitions]
) -> dict[str, Partitions]:
    """``partitions`` (sorted) over ``members`` (sorted): see the module docstring."""
    if not partitions:
        return {m: frozenset() for m in members}
    sharing = -(-len(members) // len(partitions))
    known = set(partitions)
    kept = {m: sorted(tp for tp in previous.get(m, ()) if tp in known) for m in members}
    base, extra = divmod(sharing * len(partitions), len(members))
    by_kept = sorted(members, key=lambda m: (-len(kept[m]), m))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_kept)}
    owned: dict[str, set[TopicPartition]] = {m: set() for m in members}
    holders: dict[TopicPartition, int] = dict.fromkeys(partitions, 0)
    for m in members:
        for tp in kept[m]:
            if len(owned[m]) < quota[m] and holders[tp] < sharing:
                owned[m].add(tp)
                holders[tp] += 1
    # The least loaded member below its count takes each missing assignment; one level of sharing at a time, so
    # every partition gets a first member before any gets a second.
    takers = [(len(owned[m]), m) for m in members if len(owned[m]) < quota[m]]
    heapq.heapify(takers)
    for level in range(sharing):
        for tp in partitions:
            if holders[tp] > level:
                continue
            skipped = []
            while takers and tp in owned[takers[0][1]]:
                skipped.append(heapq.heappop(takers))
            if takers:
                load, m = heapq.heappop(takers)
                owned[m].add(tp)
                holders[tp] += 1
                if load + 1 < quota[m]:
                    heapq.heappush(takers, (load + 1, m))
            for entry in skipped:
                heapq.heappush(takers, entry)
    return {m: frozenset(owned[m]) for m in members}
