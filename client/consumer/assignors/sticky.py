"""Kafka's CooperativeStickyAssignor ("cooperative-sticky", KIP-341 and KIP-429), without rack awareness.

Three goals, in this order:

1. **Balanced.** The partition counts are as even as the subscriptions allow: no member could take a partition,
   directly or through a chain of members handing one on, from a member holding two or more partitions more than
   it. With identical subscriptions that means counts within one of each other.
2. **Sticky.** A member keeps the partitions it validly owned. A claim is valid when the member still subscribes
   to the topic, the partition still exists, and no other member claims it from a newer generation; two claims
   from the same newest generation cancel each other (neither is trusted). Members report their generation in the
   subscription (v2+), or, from older clients, in this assignor's user data.
3. **Cooperative.** A partition moving from A to B is left out of B's assignment in this rebalance: A sees it
   missing from its own assignment, revokes it, and rejoins; the next rebalance, where nobody claims it, gives it
   to B. So no partition is ever owned by two members at once, and only partitions that move are revoked.

The balancing works in two phases so that the rebalance after the revocations completes the assignment without
moving anything again: unowned partitions first go to the least loaded eligible member and are evened out among
themselves; only if that cannot balance the group are owned partitions moved. Each move follows a path from a
member with the most partitions to one with at least two fewer (an assignment with no such path is optimal for
every measure of evenness), preferring to move a partition back to a member that owned it, then a partition that
is new to its holder.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Mapping

from odradek.client.consumer.assignors.base import (
    MemberId,
    RebalanceProtocol,
    checked_counts,
    member_order,
    to_assignments,
)
from odradek.client.consumer.protocol import NO_GENERATION, Assignment, Subscription
from odradek.client.structs import TopicPartition

_GENERATION = struct.Struct(">i")  # the user data Kafka's assignor writes: its last generation, an int32


def member_generation(subscription: Subscription) -> int:
    """The generation of a member's owned partitions: the v2+ field, else the user data of older clients; user
    data that does not parse counts as no generation, as in Kafka."""
    if subscription.generation_id >= 0:
        return subscription.generation_id
    data = subscription.user_data
    if data is None or len(data) < _GENERATION.size:
        return NO_GENERATION
    generation: int = _GENERATION.unpack_from(data)[0]
    return generation


class CooperativeStickyAssignor:
    name = "cooperative-sticky"
    rebalance_protocol: RebalanceProtocol = "cooperative"
    supported_protocols: tuple[RebalanceProtocol, ...] = ("eager", "cooperative")

    def subscription_user_data(self, generation_id: int) -> bytes | None:
        """The generation, for leaders running clients that read it from user data (subscription v0/v1)."""
        return _GENERATION.pack(generation_id)

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[MemberId, Subscription]
    ) -> dict[MemberId, Assignment]:
        counts = checked_counts(partitions_per_topic)
        members = sorted(subscriptions, key=lambda member: member_order(member, subscriptions[member]))
        owned, contested = _valid_claims(counts, subscriptions)
        plan = _Plan(counts, members, subscriptions, owned)
        plan.fill()
        plan.balance(owned_movable=False)
        plan.balance(owned_movable=True)
        return to_assignments(members, _withhold_transfers(plan.holdings(), subscriptions, contested))


def _valid_claims(
    counts: Mapping[str, int], subscriptions: Mapping[MemberId, Subscription]
) -> tuple[dict[MemberId, set[TopicPartition]], set[TopicPartition]]:
    """Each member's trusted owned partitions, and the partitions claimed by several members of the newest
    claiming generation. Unlike Kafka's, the outcome does not depend on the order members are looked at."""
    claims: dict[TopicPartition, list[tuple[int, MemberId]]] = {}
    for member, sub in subscriptions.items():
        generation = member_generation(sub)
        for tp in sub.owned_partitions:
            if tp.partition < counts.get(tp.topic, 0) and tp.topic in sub.topics:
                claims.setdefault(tp, []).append((generation, member))
    owned: dict[MemberId, set[TopicPartition]] = {member: set() for member in subscriptions}
    contested: set[TopicPartition] = set()
    for tp, claimants in claims.items():
        newest = max(generation for generation, _ in claimants)
        holders = [member for generation, member in claimants if generation == newest]
        if len(holders) == 1:
            owned[holders[0]].add(tp)
        else:
            contested.add(tp)
    return owned, contested


def _withhold_transfers(
    holdings: Mapping[MemberId, set[TopicPartition]],
    subscriptions: Mapping[MemberId, Subscription],
    contested: set[TopicPartition],
) -> dict[MemberId, set[TopicPartition]]:
    """Leave out of each member's assignment the partitions that another member still claims (in any generation)
    and this one does not, and the contested ones: their owners must revoke them first."""
    claimed_by: dict[TopicPartition, set[MemberId]] = {}
    for member, sub in subscriptions.items():
        for tp in sub.owned_partitions:
            claimed_by.setdefault(tp, set()).add(member)
    out: dict[MemberId, set[TopicPartition]] = {}
    for member, held in holdings.items():
        out[member] = set()
        for tp in held:
            claimants = claimed_by.get(tp, set())
            if tp not in contested and (member in claimants or not claimants):
                out[member].add(tp)
    return out


class _Plan:
    """The assignment under construction: who holds what, and who owned what before this rebalance."""

    def __init__(
        self,
        counts: Mapping[str, int],
        members: list[MemberId],
        subscriptions: Mapping[MemberId, Subscription],
        owned: Mapping[MemberId, set[TopicPartition]],
    ) -> None:
        self.counts = counts
        self.members = members
        self.rank = {member: index for index, member in enumerate(members)}
        self.topics = {member: frozenset(t for t in subscriptions[member].topics if t in counts) for member in members}
        self.owned = owned
        self.held: dict[MemberId, set[TopicPartition]] = {member: set(owned[member]) for member in members}

    def holdings(self) -> dict[MemberId, set[TopicPartition]]:
        return self.held

    def load(self, member: MemberId) -> int:
        return len(self.held[member])

    def fill(self) -> None:
        """Give every unheld partition to the least loaded member subscribed to it, the most constrained
        partitions (fewest eligible members) first."""
        taken = {tp for held in self.held.values() for tp in held}
        eligible = {topic: [m for m in self.members if topic in self.topics[m]] for topic in self.counts}
        free = [
            TopicPartition(topic, p)
            for topic, count in self.counts.items()
            if eligible[topic]
            for p in range(count)
            if TopicPartition(topic, p) not in taken
        ]
        free.sort(key=lambda tp: (len(eligible[tp.topic]), tp.topic, tp.partition))
        for tp in free:
            target = min(eligible[tp.topic], key=lambda m: (self.load(m), self.rank[m]))
            self.held[target].add(tp)

    def _pick(self, giver: MemberId, taker: MemberId, owned_movable: bool) -> TopicPartition | None:
        """The partition ``giver`` would hand to ``taker``: one ``taker`` owned, else one new to ``giver``, else
        (when allowed) one ``giver`` owned; the lowest of its kind, so the result is deterministic."""
        best: tuple[int, TopicPartition] | None = None
        for tp in self.held[giver]:
            if tp.topic not in self.topics[taker]:
                continue
            if tp in self.owned[taker]:
                kind = 0
            elif tp not in self.owned[giver]:
                kind = 1
            elif owned_movable:
                kind = 2
            else:
                continue
            if best is None or (kind, tp) < best:
                best = (kind, tp)
        return None if best is None else best[1]

    def _path_from(self, source: MemberId, owned_movable: bool) -> list[tuple[MemberId, MemberId]] | None:
        """A breadth-first path of hand-overs from ``source`` to a member with at least two partitions fewer."""
        parent: dict[MemberId, MemberId] = {}
        seen = {source}
        queue = deque([source])
        found: MemberId | None = None
        limit = self.load(source) - 2
        while queue:
            giver = queue.popleft()
            movable = {tp.topic for tp in self.held[giver] if owned_movable or tp not in self.owned[giver]}
            for taker in self.members:
                if taker in seen or movable.isdisjoint(self.topics[taker]):
                    continue
                seen.add(taker)
                parent[taker] = giver
                if self.load(taker) <= limit and (
                    found is None or (self.load(taker), self.rank[taker]) < (self.load(found), self.rank[found])
                ):
                    found = taker
                queue.append(taker)
        if found is None:
            return None
        path: list[tuple[MemberId, MemberId]] = []
        node = found
        while node != source:
            path.append((parent[node], node))
            node = parent[node]
        path.reverse()
        return path

    def balance(self, owned_movable: bool) -> None:
        """Apply paths until none is left; each strictly lowers the sum of squared loads, so this ends."""
        while True:
            sources = sorted(self.members, key=lambda m: (-self.load(m), self.rank[m]))
            for source in sources:
                path = self._path_from(source, owned_movable)
                if path is not None:
                    break
            else:
                return
            for giver, taker in path:
                tp = self._pick(giver, taker, owned_movable)
                assert tp is not None  # the path was found through this very hand-over
                self.held[giver].remove(tp)
                self.held[taker].add(tp)
