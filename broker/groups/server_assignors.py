"""The server-side assignors of KIP-848 consumer groups: ``uniform`` (Kafka's default) and ``range``.

In the consumer protocol the coordinator, not a member, computes each member's target assignment, from the
members' subscriptions (topic ids present in the metadata), the topics' partition counts, and the previous target
assignment. Both are deterministic: the same inputs give the same assignment on every coordinator.

- ``uniform`` spreads the partitions as evenly as the subscriptions allow and moves as few as it can: a member
  keeps the partitions of its previous target that are still subscribed and exist. With identical subscriptions
  (the usual case, in time linear in the partitions) every member holds floor or ceil of partitions/members, the
  ceil going to those that keep the most, and only a member's excess moves. With different subscriptions the
  partitions no one keeps go one by one to the least loaded member subscribed to their topic, then partitions move
  from the most to the least loaded member while two differ by more than one: a greedy balance, which each move
  improves (it lowers the sum of squared loads, so it ends).
- ``range`` gives each member contiguous partitions of each topic it subscribes to, so members subscribed to
  co-partitioned topics get the same partition numbers of each: per topic, the subscribers in order (instance id
  where set, so a restarted static member gets its range back, else member id) get ``n // k`` partitions each and
  the first ``n % k`` one more. It ignores the previous assignment, as the classic range assignor does.

Rack-aware placement (Kafka's use of ``rack.id``) is not implemented: racks are stored and shown, not used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from odradek.broker.groups.consumer_records import Partitions, TopicId

UNIFORM = "uniform"
RANGE = "range"


@dataclass(frozen=True, slots=True)
class AssignmentMember:
    member_id: str
    instance_id: str | None
    topics: frozenset[TopicId]  # the subscribed topics that exist


class ServerAssignor(Protocol):
    name: str

    def assign(
        self,
        members: Sequence[AssignmentMember],
        partition_counts: Mapping[TopicId, int],
        previous: Mapping[str, Partitions],
    ) -> dict[str, Partitions]:
        """Every member's target partitions (members without any map to an empty set)."""
        ...


class UniformAssignor:
    name = UNIFORM

    def assign(
        self,
        members: Sequence[AssignmentMember],
        partition_counts: Mapping[TopicId, int],
        previous: Mapping[str, Partitions],
    ) -> dict[str, Partitions]:
        order = sorted(m.member_id for m in members)
        topics_of = {m.member_id: m.topics for m in members}
        owned: dict[str, set[tuple[TopicId, int]]] = {m: set() for m in order}
        taken: set[tuple[TopicId, int]] = set()
        for member_id in order:
            for tp in sorted(previous.get(member_id, ())):
                topic_id, partition = tp
                if (
                    topic_id in topics_of[member_id]
                    and partition < partition_counts.get(topic_id, 0)
                    and tp not in taken
                ):
                    owned[member_id].add(tp)
                    taken.add(tp)
        if order and len({topics_of[m] for m in order}) == 1:
            return _uniform_homogeneous(order, topics_of[order[0]], partition_counts, owned, taken)
        subscribers = {t: [m for m in order if t in topics_of[m]] for t in sorted(partition_counts)}
        for topic_id, candidates in subscribers.items():
            for partition in range(partition_counts[topic_id]):
                if candidates and (topic_id, partition) not in taken:
                    least = min(candidates, key=lambda m: (len(owned[m]), m))
                    owned[least].add((topic_id, partition))
        while _balance_pass(order, subscribers, owned):
            pass
        return {m: frozenset(owned[m]) for m in order}


def _uniform_homogeneous(
    order: list[str],
    topics: frozenset[TopicId],
    partition_counts: Mapping[TopicId, int],
    owned: dict[str, set[tuple[TopicId, int]]],
    taken: set[tuple[TopicId, int]],
) -> dict[str, Partitions]:
    """Every member subscribes to the same topics: quotas of floor or ceil of partitions/members, the ceil ones
    going to the members that keep the most; each member keeps what it had up to its quota, and the rest (what a
    member gives up, and what no one had) fills the members below theirs. Linear in the partitions (and a sort),
    so large groups rebalance fast."""
    partitions = [(t, p) for t in sorted(topics) for p in range(partition_counts.get(t, 0))]
    base, extra = divmod(len(partitions), len(order))
    by_kept = sorted(order, key=lambda m: (-len(owned[m]), m))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_kept)}
    free = [tp for tp in partitions if tp not in taken]
    for member_id in order:
        excess = sorted(owned[member_id])[quota[member_id] :]
        owned[member_id].difference_update(excess)
        free.extend(excess)
    free.sort()
    for member_id in order:
        need = quota[member_id] - len(owned[member_id])
        if need > 0:
            owned[member_id].update(free[:need])
            del free[:need]
    return {m: frozenset(owned[m]) for m in order}


def _balance_pass(
    order: list[str], subscribers: Mapping[TopicId, list[str]], owned: dict[str, set[tuple[TopicId, int]]]
) -> bool:
    """Move partitions, most loaded members first, each to its least loaded subscriber where the two differ by two
    or more; whether anything moved."""
    moved = False
    for giver in sorted(order, key=lambda m: (-len(owned[m]), m)):
        for tp in sorted(owned[giver], reverse=True):
            taker = min(subscribers[tp[0]], key=lambda m: (len(owned[m]), m))
            if len(owned[giver]) - len(owned[taker]) >= 2:
                owned[giver].remove(tp)
                owned[taker].add(tp)
                moved = True
    return moved


class RangeAssignor:
    name = RANGE

    def assign(
        self,
        members: Sequence[AssignmentMember],
        partition_counts: Mapping[TopicId, int],
        previous: Mapping[str, Partitions],
    ) -> dict[str, Partitions]:
        ordered = sorted(members, key=lambda m: (m.instance_id is None, m.instance_id or m.member_id))
        out: dict[str, set[tuple[TopicId, int]]] = {m.member_id: set() for m in members}
        for topic_id in sorted(partition_counts):
            subscribers = [m.member_id for m in ordered if topic_id in m.topics]
            if not subscribers:
                continue
            count = partition_counts[topic_id]
            share, extra = divmod(count, len(subscribers))
            start = 0
            for index, member_id in enumerate(subscribers):
                size = share + (1 if index < extra else 0)
                out[member_id].update((topic_id, p) for p in range(start, start + size))
                start += size
        return {m: frozenset(ps) for m, ps in out.items()}


SERVER_ASSIGNORS: dict[str, type[UniformAssignor] | type[RangeAssignor]] = {
    UNIFORM: UniformAssignor,
    RANGE: RangeAssignor,
}  # what group.consumer.assignors may name
