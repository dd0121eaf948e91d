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

Both prefer, when racks are known, partitions with a replica in the member's rack (``RackInfo``): the rules of
Kafka's rack-aware assignors (KIP-881; the client-side range and sticky assignors, and the uniform assignor of
Kafka 3.7's coordinator). Kafka 4.0's built-in server assignors dropped rack awareness (it came back only as data
for custom assignors, KIP-1101), so this is odradek's choice of Kafka's earlier rules:

- racks are used only when some member has a rack (its ``RackId``), some partition has a replica in one of the
  members' racks, and not every partition has replicas in the same set of racks (then locality is the same
  everywhere); the racks of all replicas count, in the ISR or not;
- balance comes first: a member's number of partitions (its quota) is what it would be without racks, and racks
  only choose which partitions fill it;
- ``range``, per topic: each subscriber first takes partitions with a replica in its rack, in partition order, up
  to its quota; then the subscribers fill their quotas in order with what is left (the ranges are then no longer
  contiguous);
- ``uniform``: a member keeps a previous partition whose replicas are all elsewhere only if no subscriber of the
  topic is in one of the partition's racks; partitions to hand out go first to members below their quota in a
  matching rack (the partitions fewest members can take locally first), then to anyone below quota; balancing
  moves a partition away from a member whose rack it does not match first.
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
    rack: str | None = None  # the member's RackId


PartitionRacks = Mapping[TopicId, Sequence[frozenset[str]]]  # per topic, the racks of each partition's replicas


class RackInfo:
    """Where members and partitions are, when rack-aware assignment applies (see the module docstring): else
    ``active`` is False and every question answers as if racks were unknown."""

    def __init__(
        self,
        members: Sequence[AssignmentMember],
        partition_counts: Mapping[TopicId, int],
        partition_racks: PartitionRacks | None,
    ) -> None:
        self.member_racks = {m.member_id: m.rack for m in members if m.rack}
        racks: dict[tuple[TopicId, int], frozenset[str]] = {}
        if self.member_racks and partition_racks:
            for topic_id, count in partition_counts.items():
                per_partition = partition_racks.get(topic_id, ())
                for p in range(count):
                    racks[(topic_id, p)] = per_partition[p] if p < len(per_partition) else frozenset()
        every = frozenset().union(*racks.values()) if racks else frozenset()
        self.active = (
            bool(self.member_racks)
            and not every.isdisjoint(self.member_racks.values())
            and not all(r == every for r in racks.values())
        )
        self.partition_racks = racks if self.active else {}

    def matches(self, member_id: str, tp: tuple[TopicId, int]) -> bool:
        """Whether the member is in a rack of the partition's replicas."""
        rack = self.member_racks.get(member_id)
        return self.active and rack is not None and rack in self.partition_racks.get(tp, frozenset())

    def mismatches(self, member_id: str, tp: tuple[TopicId, int]) -> bool:
        """Whether both racks are known and differ (Kafka's racksMismatch)."""
        return self.active and member_id in self.member_racks and not self.matches(member_id, tp)


class ServerAssignor(Protocol):
    name: str

    def assign(
        self,
        members: Sequence[AssignmentMember],
        partition_counts: Mapping[TopicId, int],
        previous: Mapping[str, Partitions],
        partition_racks: PartitionRacks | None = None,
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
        partition_racks: PartitionRacks | None = None,
    ) -> dict[str, Partitions]:
        order = sorted(m.member_id for m in members)
        topics_of = {m.member_id: m.topics for m in members}
        racks = RackInfo(members, partition_counts, partition_racks)
        owned: dict[str, set[tuple[TopicId, int]]] = {m: set() for m in order}
        taken: set[tuple[TopicId, int]] = set()
        subscribers = {t: [m for m in order if t in topics_of[m]] for t in sorted(partition_counts)}
        for member_id in order:
            for tp in sorted(previous.get(member_id, ())):
                topic_id, partition = tp
                if (
                    topic_id in topics_of[member_id]
                    and partition < partition_counts.get(topic_id, 0)
                    and tp not in taken
                    and not (
                        racks.mismatches(member_id, tp)
                        and any(racks.matches(m, tp) for m in subscribers.get(topic_id, ()))
                    )
                ):
                    owned[member_id].add(tp)
                    taken.add(tp)
        if order and len({topics_of[m] for m in order}) == 1:
            return _uniform_homogeneous(order, topics_of[order[0]], partition_counts, owned, taken, racks)
        for topic_id, candidates in subscribers.items():
            for partition in range(partition_counts[topic_id]):
                tp = (topic_id, partition)
                if candidates and tp not in taken:
                    least = min(len(owned[m]) for m in candidates)
                    local = [m for m in candidates if len(owned[m]) == least and racks.matches(m, tp)]
                    chosen = local[0] if local else min(candidates, key=lambda m: (len(owned[m]), m))
                    owned[chosen].add(tp)
        while _balance_pass(order, subscribers, owned, racks):
            pass
        return {m: frozenset(owned[m]) for m in order}


def _uniform_homogeneous(
    order: list[str],
    topics: frozenset[TopicId],
    partition_counts: Mapping[TopicId, int],
    owned: dict[str, set[tuple[TopicId, int]]],
    taken: set[tuple[TopicId, int]],
    racks: RackInfo,
) -> dict[str, Partitions]:
    """Every member subscribes to the same topics: quotas of floor or ceil of partitions/members, the ceil ones
    going to the members that keep the most; each member keeps what it had up to its quota (those in its rack
    first), and the rest (what a member gives up, and what no one had) fills the members below theirs, partitions
    in their rack first. Linear in the partitions (and a sort) without racks, so large groups rebalance fast."""
    partitions = [(t, p) for t in sorted(topics) for p in range(partition_counts.get(t, 0))]
    base, extra = divmod(len(partitions), len(order))
    by_kept = sorted(order, key=lambda m: (-len(owned[m]), m))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_kept)}
    free = [tp for tp in partitions if tp not in taken]
    for member_id in order:
        kept = sorted(owned[member_id], key=lambda tp: (not racks.matches(member_id, tp), tp))
        excess = kept[quota[member_id] :]
        owned[member_id].difference_update(excess)
        free.extend(excess)
    free.sort()
    if racks.active:
        # The partitions fewest members can take locally go first, each to the first member below its quota in
        # one of its racks.
        local = {tp: sum(1 for m in order if racks.matches(m, tp)) for tp in free}
        left = []
        for tp in sorted(free, key=lambda tp: (local[tp], tp)):
            takers = (m for m in order if local[tp] and len(owned[m]) < quota[m] and racks.matches(m, tp))
            taker = next(takers, None)
            if taker is None:
                left.append(tp)
            else:
                owned[taker].add(tp)
        free = sorted(left)
    for member_id in order:
        need = quota[member_id] - len(owned[member_id])
        if need > 0:
            owned[member_id].update(free[:need])
            del free[:need]
    return {m: frozenset(owned[m]) for m in order}


def _balance_pass(
    order: list[str],
    subscribers: Mapping[TopicId, list[str]],
    owned: dict[str, set[tuple[TopicId, int]]],
    racks: RackInfo,
) -> bool:
    """Move partitions, most loaded members first, each to its least loaded subscriber where the two differ by two
    or more (a partition not in the giver's rack first); whether anything moved."""
    moved = False
    for giver in sorted(order, key=lambda m: (-len(owned[m]), m)):
        for tp in sorted(owned[giver], key=lambda tp: (racks.matches(giver, tp), tp), reverse=True):
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
        partition_racks: PartitionRacks | None = None,
    ) -> dict[str, Partitions]:
        ordered = sorted(members, key=lambda m: (m.instance_id is None, m.instance_id or m.member_id))
        racks = RackInfo(members, partition_counts, partition_racks)
        out: dict[str, set[tuple[TopicId, int]]] = {m.member_id: set() for m in members}
        for topic_id in sorted(partition_counts):
            subscribers = [m.member_id for m in ordered if topic_id in m.topics]
            if not subscribers:
                continue
            count = partition_counts[topic_id]
            share, extra = divmod(count, len(subscribers))
            quota = {m: share + (1 if i < extra else 0) for i, m in enumerate(subscribers)}
            if not racks.active:
                start = 0
                for member_id in subscribers:
                    out[member_id].update((topic_id, p) for p in range(start, start + quota[member_id]))
                    start += quota[member_id]
                continue
            free = list(range(count))
            for member_id in subscribers:  # first the partitions in each member's rack, up to its quota
                local = [p for p in free if racks.matches(member_id, (topic_id, p))][: quota[member_id]]
                out[member_id].update((topic_id, p) for p in local)
                free = [p for p in free if p not in local]
            for member_id in subscribers:  # then what is left, in order
                need = quota[member_id] - sum(1 for t, _ in out[member_id] if t == topic_id)
                out[member_id].update((topic_id, p) for p in free[:need])
                del free[:need]
        return {m: frozenset(ps) for m, ps in out.items()}


SERVER_ASSIGNORS: dict[str, type[UniformAssignor] | type[RangeAssignor]] = {
    UNIFORM: UniformAssignor,
    RANGE: RangeAssignor,
}  # what group.consumer.assignors may name
