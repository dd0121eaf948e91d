"""The partition assignors: Kafka's documented examples, then properties over seeded random groups.

The random part runs SEEDS seeds from BASE (a few seconds); more on demand, and a failure names its seed:

    ASSIGNOR_SEEDS=5000 pytest tests/client/test_assignors.py
    ASSIGNOR_SEED_BASE=1234 ASSIGNOR_SEEDS=1 pytest tests/client/test_assignors.py    # replay one seed
"""

from __future__ import annotations

import os
import random
from collections import deque
from collections.abc import Mapping

import pytest

from odradek.client.consumer.assignors import (
    ASSIGNORS,
    CooperativeStickyAssignor,
    get_assignor,
    get_assignors,
)
from odradek.client.consumer.assignors.sticky import member_generation
from odradek.client.consumer.protocol import Assignment, Subscription
from odradek.client.consumer.rebalance import choose_protocol, complete_join, prepare_join, prepare_leave
from odradek.client.errors import ConfigError
from odradek.client.structs import TopicPartition as TP

SEEDS = int(os.environ.get("ASSIGNOR_SEEDS", "200"))
BASE = int(os.environ.get("ASSIGNOR_SEED_BASE", "0"))
STICKY = CooperativeStickyAssignor()


def names(result: Mapping[str, Assignment]) -> dict[str, list[str]]:
    return {member: [f"{tp.topic}p{tp.partition}" for tp in a.partitions] for member, a in result.items()}


# --- Kafka's documented examples -------------------------------------------------------------------------------


def test_range_kafka_example() -> None:
    subs = {"C0": Subscription(("t0", "t1")), "C1": Subscription(("t0", "t1"))}
    assert names(get_assignor("range").assign({"t0": 3, "t1": 3}, subs)) == {
        "C0": ["t0p0", "t0p1", "t1p0", "t1p1"],
        "C1": ["t0p2", "t1p2"],
    }


def test_range_orders_static_members_by_instance_id() -> None:
    """Kafka's RangeAssignor example after a rolling bounce: new member ids C3 (was C0, instance I0) and C2 (was
    C1, instance I1) would swap the ranges if ordered by member id; the instance ids keep them in place."""
    subs = {
        "C3": Subscription(("t0", "t1"), group_instance_id="I0"),
        "C2": Subscription(("t0", "t1"), group_instance_id="I1"),
    }
    assert names(get_assignor("range").assign({"t0": 3, "t1": 3}, subs)) == {
        "C3": ["t0p0", "t0p1", "t1p0", "t1p1"],
        "C2": ["t0p2", "t1p2"],
    }
    # Static members come before dynamic ones, whatever their ids.
    mixed = {"a": Subscription(("t0",)), "z": Subscription(("t0",), group_instance_id="I9")}
    assert names(get_assignor("range").assign({"t0": 3}, mixed)) == {"z": ["t0p0", "t0p1"], "a": ["t0p2"]}


def test_roundrobin_kafka_examples() -> None:
    same = {"C0": Subscription(("t0", "t1")), "C1": Subscription(("t0", "t1"))}
    assert names(get_assignor("roundrobin").assign({"t0": 3, "t1": 3}, same)) == {
        "C0": ["t0p0", "t0p2", "t1p1"],
        "C1": ["t0p1", "t1p0", "t1p2"],
    }
    differ = {"C0": Subscription(("t0",)), "C1": Subscription(("t0", "t1")), "C2": Subscription(("t0", "t1", "t2"))}
    assert names(get_assignor("roundrobin").assign({"t0": 1, "t1": 2, "t2": 3}, differ)) == {
        "C0": ["t0p0"],
        "C1": ["t1p0"],
        "C2": ["t1p1", "t2p0", "t2p1", "t2p2"],
    }


def test_roundrobin_orders_static_members_by_instance_id() -> None:
    subs = {"m-b": Subscription(("t",), group_instance_id="I0"), "m-a": Subscription(("t",), group_instance_id="I1")}
    assert names(get_assignor("roundrobin").assign({"t": 3}, subs)) == {"m-b": ["tp0", "tp2"], "m-a": ["tp1"]}


@pytest.mark.parametrize("name", sorted(ASSIGNORS))
def test_unknown_topics_and_idle_members(name: str) -> None:
    subs = {"a": Subscription(("t", "missing")), "b": Subscription(()), "c": Subscription(("empty",))}
    result = get_assignor(name).assign({"t": 2, "empty": 0}, subs)
    assert names(result) == {"a": ["tp0", "tp1"], "b": [], "c": []}
    with pytest.raises(ValueError):
        get_assignor(name).assign({"t": -1}, subs)


def test_registry_and_protocol_choice() -> None:
    assert sorted(ASSIGNORS) == ["cooperative-sticky", "range", "roundrobin"]
    with pytest.raises(ConfigError):
        get_assignor("sticky")  # Kafka's eager sticky assignor is not offered
    with pytest.raises(ConfigError):
        get_assignors([])
    with pytest.raises(ConfigError):
        get_assignors(["range", "range"])
    assert choose_protocol(get_assignors(["cooperative-sticky"])) == "cooperative"
    assert choose_protocol(get_assignors(["range", "cooperative-sticky"])) == "eager"
    assert choose_protocol(get_assignors(["roundrobin"])) == "eager"


def test_cooperative_sticky_generation_from_old_clients_user_data() -> None:
    assert STICKY.subscription_user_data(5) == b"\x00\x00\x00\x05"
    assert member_generation(Subscription(("t",), user_data=STICKY.subscription_user_data(5))) == 5
    assert member_generation(Subscription(("t",), user_data=b"\x00", generation_id=-1)) == -1
    assert member_generation(Subscription(("t",), user_data=b"\x00\x00\x00\x05", generation_id=8)) == 8


def test_cooperative_sticky_holds_back_a_moving_partition() -> None:
    """A owns all 4; B joins. A keeps 2 and must revoke 2, which B only gets in the next rebalance."""
    owned = tuple(TP("t", p) for p in range(4))
    first = STICKY.assign(
        {"t": 4}, {"A": Subscription(("t",), owned_partitions=owned, generation_id=1), "B": Subscription(("t",))}
    )
    assert len(first["A"].partitions) == 2 and first["B"].partitions == ()
    kept = first["A"].partitions
    second = STICKY.assign(
        {"t": 4}, {"A": Subscription(("t",), owned_partitions=kept, generation_id=2), "B": Subscription(("t",))}
    )
    assert second["A"].partitions == kept
    assert set(second["B"].partitions) == set(owned) - set(kept)


def test_cooperative_sticky_stale_and_contested_claims() -> None:
    subs = {
        "old": Subscription(("t",), owned_partitions=(TP("t", 0), TP("t", 1)), generation_id=3),
        "new": Subscription(("t",), owned_partitions=(TP("t", 0),), generation_id=4),
        "x": Subscription(("t",), owned_partitions=(TP("t", 2),), generation_id=4),
        "y": Subscription(("t",), owned_partitions=(TP("t", 2),), generation_id=4),
    }
    result = STICKY.assign({"t": 4}, subs)
    assert TP("t", 0) in result["new"].partitions  # the newer generation's claim wins
    assert all(TP("t", 2) not in a.partitions for a in result.values())  # two same-generation claims: held back
    assert TP("t", 0) not in result["old"].partitions


# --- properties over random groups --------------------------------------------------------------------------------


def random_group(rng: random.Random, identical: bool) -> tuple[dict[str, int], dict[str, set[str]]]:
    topics = {f"t{i}": rng.randint(1, 20) for i in range(rng.randint(1, 5))}
    members = [f"m{i:02d}" for i in rng.sample(range(40), rng.randint(1, 10))]
    if identical:
        subs = {m: set(topics) for m in members}
    else:
        subs = {m: set(rng.sample(sorted(topics), rng.randint(1, len(topics)))) for m in members}
    if rng.random() < 0.2:  # a subscribed topic that metadata does not know
        subs[members[0]].add("gone")
    return topics, subs


def all_partitions(counts: Mapping[str, int], subs: Mapping[str, set[str]]) -> set[TP]:
    wanted = {t for topics in subs.values() for t in topics}
    return {TP(t, p) for t, n in counts.items() if t in wanted for p in range(n)}


def check_valid(
    counts: Mapping[str, int], subs: Mapping[str, set[str]], result: Mapping[str, Assignment], complete: bool
) -> None:
    assert set(result) == set(subs)
    seen: list[TP] = [tp for a in result.values() for tp in a.partitions]
    assert len(seen) == len(set(seen)), "a partition is assigned twice"
    for member, a in result.items():
        assert {tp.topic for tp in a.partitions} <= subs[member], f"{member} got a topic it did not subscribe to"
        assert all(tp.partition < counts[tp.topic] for tp in a.partitions)
    if complete:
        assert set(seen) == all_partitions(counts, subs)


def loads(result: Mapping[str, Assignment]) -> dict[str, int]:
    return {member: len(a.partitions) for member, a in result.items()}


def within_one(result: Mapping[str, Assignment]) -> bool:
    counts = loads(result).values()
    return max(counts) - min(counts) <= 1


def has_cost_reducing_path(subs: Mapping[str, set[str]], result: Mapping[str, Assignment]) -> bool:
    """Whether some member could pass a partition, directly or along a chain, to one holding two fewer: if not,
    the assignment is as even as the subscriptions allow."""
    held_topics = {m: {tp.topic for tp in a.partitions} for m, a in result.items()}
    load = loads(result)
    for source in result:
        seen, queue = {source}, deque([source])
        while queue:
            giver = queue.popleft()
            for taker in result:
                if taker not in seen and held_topics[giver] & subs[taker]:
                    if load[taker] <= load[source] - 2:
                        return True
                    seen.add(taker)
                    queue.append(taker)
    return False


@pytest.mark.parametrize("name", ["range", "roundrobin"])
def test_eager_assignors_on_random_groups(name: str) -> None:
    assignor = get_assignor(name)
    for seed in range(BASE, BASE + SEEDS):
        rng = random.Random(seed)
        identical = rng.random() < 0.5
        counts, subs = random_group(rng, identical)
        statics = {m: f"i{rng.randint(0, 99):02d}-{m}" for m in subs if rng.random() < 0.3}
        subscriptions = {m: Subscription(tuple(t), group_instance_id=statics.get(m)) for m, t in subs.items()}
        result = assignor.assign(counts, subscriptions)
        try:
            check_valid(counts, subs, result, complete=True)
            if identical and name == "roundrobin":
                assert within_one(result)
            if identical and name == "range":
                for topic in counts:
                    per_topic = [sum(tp.topic == topic for tp in a.partitions) for a in result.values()]
                    assert max(per_topic) - min(per_topic) <= 1
            # The same input in another order gives the same answer.
            shuffled = dict(rng.sample(sorted(subscriptions.items()), len(subscriptions)))
            assert assignor.assign(dict(reversed(list(counts.items()))), shuffled) == result
        except AssertionError as e:
            raise AssertionError(f"seed {seed}: {e}") from e


def random_claims(
    rng: random.Random, counts: Mapping[str, int], subs: Mapping[str, set[str]], generation: int
) -> dict[str, Subscription]:
    """Previous ownership as members would report it: mostly disjoint current claims, some from a stale
    generation, some doubled, some for partitions or topics that are gone."""
    members = sorted(subs)
    owned: dict[str, set[TP]] = {m: set() for m in members}
    for tp in [*sorted(all_partitions(counts, subs)), TP("gone", 0), TP("t0", 99)]:
        if rng.random() < 0.7:
            owned[rng.choice(members)].add(tp)
            if rng.random() < 0.1:
                owned[rng.choice(members)].add(tp)
    generations = {m: generation if rng.random() < 0.8 else rng.choice([-1, generation - 1]) for m in members}
    return {m: Subscription(tuple(subs[m]), None, tuple(owned[m]), generations[m]) for m in members}


def test_cooperative_sticky_on_random_groups() -> None:
    for seed in range(BASE, BASE + SEEDS):
        rng = random.Random(seed)
        identical = rng.random() < 0.5
        counts, subs = random_group(rng, identical)
        first_subs = random_claims(rng, counts, subs, generation=5)
        try:
            first = STICKY.assign(counts, first_subs)
            check_valid(counts, subs, first, complete=False)
            # Cooperative: nobody is given a partition another member still claims.
            for member, a in first.items():
                for tp in a.partitions:
                    others = [m for m, s in first_subs.items() if m != member and tp in s.owned_partitions]
                    assert tp in first_subs[member].owned_partitions or not others, f"{tp} to {member}: {others}"
            # The follow-up rebalance: each member now owns exactly what it was given.
            second_subs = {
                m: Subscription(tuple(subs[m]), None, a.partitions, generation_id=6) for m, a in first.items()
            }
            second = STICKY.assign(counts, second_subs)
            check_valid(counts, subs, second, complete=True)
            assert all(set(first[m].partitions) <= set(second[m].partitions) for m in subs), "moved twice"
            if identical:
                assert within_one(second)
            assert not has_cost_reducing_path(subs, second)
        except AssertionError as e:
            raise AssertionError(f"seed {seed}: {e}") from e


def test_cooperative_sticky_keeps_a_fair_share_of_what_members_owned() -> None:
    for seed in range(BASE, BASE + SEEDS):
        rng = random.Random(seed)
        counts, subs = random_group(rng, identical=True)
        partitions = sorted(all_partitions(counts, subs))
        # Valid, disjoint ownership from the current generation, some of it by members that have since left.
        members = [*sorted(subs), "gone-1", "gone-2"]
        owned: dict[str, list[TP]] = {m: [] for m in members}
        for tp in partitions:
            owned[rng.choice(members)].append(tp)
        subscriptions = {m: Subscription(tuple(subs[m]), None, tuple(owned[m]), 3) for m in subs}
        result = STICKY.assign(counts, subscriptions)
        fair = len(partitions) // len(subs)
        for member in subs:
            kept = set(owned[member]) & set(result[member].partitions)
            assert len(kept) >= min(len(owned[member]), fair), f"seed {seed}: {member} kept {len(kept)}"


# --- the cooperative protocol, round by round ---------------------------------------------------------------------


class Group:
    """Members that own partitions, rebalance through the assignor and apply the result with rebalance.py one
    member at a time, in a random order, checking ownership after every single step."""

    def __init__(self, rng: random.Random, counts: dict[str, int], identical: bool) -> None:
        self.rng = rng
        self.counts = counts
        self.identical = identical
        self.topics: dict[str, set[str]] = {}
        self.owned: dict[str, set[TP]] = {}
        self.generation = 0
        self.next_id = 0

    def check(self) -> None:
        seen = [tp for parts in self.owned.values() for tp in parts]
        assert len(seen) == len(set(seen)), "a partition is owned by two members at once"

    def add(self) -> None:
        member = f"m{self.next_id:03d}"
        self.next_id += 1
        self.owned[member] = set()
        topics = sorted(self.counts)
        self.topics[member] = set(
            topics if self.identical else self.rng.sample(topics, self.rng.randint(1, len(topics)))
        )

    def remove(self) -> None:
        member = self.rng.choice(sorted(self.owned))
        step = prepare_leave(self.owned[member])
        assert step.revoked == tuple(sorted(self.owned.pop(member)))
        del self.topics[member]

    def rebalance(self) -> bool:
        """One rebalance; whether some member must rejoin. Revocations are collected in ``revoked`` for the
        caller to check against the state before and after."""
        for member, parts in self.owned.items():
            step = prepare_join("cooperative", parts, self.topics[member])
            assert step.revoked == () and step.owned == parts
        subs = {
            m: Subscription(tuple(self.topics[m]), None, tuple(parts), self.generation)
            for m, parts in self.owned.items()
        }
        result = STICKY.assign(self.counts, subs)
        self.generation += 1
        rejoin = False
        for member in self.rng.sample(sorted(self.owned), len(self.owned)):
            step = complete_join("cooperative", self.owned[member], result[member], self.topics[member])
            self.owned[member] -= set(step.revoked)
            self.revoked.setdefault(member, set()).update(step.revoked)
            self.check()
            self.owned[member] |= set(step.assigned)
            self.check()
            assert self.owned[member] == set(step.owned)
            rejoin |= step.needs_rejoin
        return rejoin

    revoked: dict[str, set[TP]]


def test_cooperative_rebalances_never_share_a_partition() -> None:
    for seed in range(BASE, BASE + SEEDS // 2):
        rng = random.Random(seed)
        counts = {f"t{i}": rng.randint(1, 20) for i in range(rng.randint(1, 5))}
        group = Group(rng, counts, identical=rng.random() < 0.6)
        try:
            for _change in range(6):
                if group.owned and (len(group.owned) >= 10 or rng.random() < 0.4):
                    for _ in range(rng.randint(1, max(1, len(group.owned) - 1))):
                        if len(group.owned) > 1:
                            group.remove()
                else:
                    for _ in range(rng.randint(1, 3)):
                        group.add()
                before = {m: set(parts) for m, parts in group.owned.items()}
                group.revoked = {}
                rounds = 1
                while group.rebalance():
                    rounds += 1
                    assert rounds <= 2, "not converged within two rebalances"
                final = {m: Assignment(tuple(parts)) for m, parts in group.owned.items()}
                check_valid(counts, group.topics, final, complete=True)
                assert not has_cost_reducing_path(group.topics, final)
                total = len(all_partitions(counts, group.topics))
                if group.identical:
                    assert within_one(final)
                for member, revoked in group.revoked.items():
                    assert revoked <= before[member]
                    if group.identical:
                        # With different subscriptions the follow-up rebalance may place a revoked partition
                        # back where it was (an equally even result); with identical ones it never does.
                        assert not revoked & group.owned[member], f"{member} revoked a partition it got back"
                        fair = total // len(group.owned)
                        assert len(before[member] & group.owned[member]) >= min(len(before[member]), fair)
        except AssertionError as e:
            raise AssertionError(f"seed {seed}: {e}") from e


def test_eager_rebalance_gives_everything_up_first() -> None:
    rng = random.Random(7)
    counts = {"a": 7, "b": 3}
    owned: dict[str, set[TP]] = {"m1": set(), "m2": set()}
    for members in (["m1", "m2"], ["m1", "m2", "m3"], ["m2", "m3"]):
        owned = {m: owned.get(m, set()) for m in members}
        for member in members:  # every member revokes everything before the join
            step = prepare_join("eager", owned[member], counts)
            assert step.revoked == tuple(sorted(owned[member])) and step.callbacks()[0][0] == "on_partitions_revoked"
            owned[member] = set(step.owned)
        result = get_assignor("range").assign(counts, {m: Subscription(tuple(counts)) for m in members})
        for member in rng.sample(members, len(members)):
            step = complete_join("eager", owned[member], result[member], counts)
            assert step.revoked == () and not step.needs_rejoin
            owned[member] = set(step.owned)
        assert sum(len(p) for p in owned.values()) == 10
