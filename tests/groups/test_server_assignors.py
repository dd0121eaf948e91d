"""The server assignors of KIP-848 groups: every subscribed partition goes to exactly one subscriber; ``uniform``
balances and moves only what balance requires; ``range`` gives contiguous, co-partitioned ranges."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.broker.groups.consumer_records import Partitions
from odradek.broker.groups.server_assignors import AssignmentMember, RangeAssignor, UniformAssignor

TOPICS = [bytes([i]) * 16 for i in range(4)]

members_st = st.lists(st.frozensets(st.sampled_from(TOPICS), min_size=1), min_size=1, max_size=6)
counts_st = st.fixed_dictionaries({t: st.integers(0, 9) for t in TOPICS})


def make(subscriptions: list[frozenset[bytes]]) -> list[AssignmentMember]:
    return [AssignmentMember(f"m{i}", None, topics) for i, topics in enumerate(subscriptions)]


def check_complete(members: list[AssignmentMember], counts: dict[bytes, int], out: dict[str, Partitions]) -> None:
    owners = Counter(tp for ps in out.values() for tp in ps)
    wanted = {(t, p) for t, n in counts.items() for p in range(n) if any(t in m.topics for m in members)}
    assert set(owners) == wanted and all(n == 1 for n in owners.values())
    for m in members:
        assert all(t in m.topics for t, _ in out[m.member_id])


@settings(max_examples=200, deadline=None)
@given(members_st, counts_st, st.data())
def test_uniform_assigns_everything_once_from_any_previous_assignment(
    subscriptions: list[frozenset[bytes]], counts: dict[bytes, int], data: st.DataObject
) -> None:
    members = make(subscriptions)
    previous = {
        m.member_id: frozenset(data.draw(st.sets(st.tuples(st.sampled_from(TOPICS), st.integers(0, 11)), max_size=8)))
        for m in members
    }
    out = UniformAssignor().assign(members, counts, previous)
    check_complete(members, counts, out)
    assert out == UniformAssignor().assign(list(reversed(members)), counts, previous)  # deterministic


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 8), st.integers(0, 40))
def test_uniform_with_one_subscription_is_balanced_and_a_joiner_takes_only_the_excess(members: int, count: int) -> None:
    subscriptions = [frozenset(TOPICS[:1])] * members
    counts = {TOPICS[0]: count}
    before = UniformAssignor().assign(make(subscriptions), counts, {})
    loads = sorted(len(ps) for ps in before.values())
    assert loads[-1] - loads[0] <= 1
    after = UniformAssignor().assign(make([*subscriptions, frozenset(TOPICS[:1])]), counts, before)
    loads = sorted(len(ps) for ps in after.values())
    assert loads[-1] - loads[0] <= 1
    moved = sum(len(before[m] - after[m]) for m in before)
    assert moved == len(after[f"m{members}"])  # only what the joiner takes moves


@settings(max_examples=200, deadline=None)
@given(members_st, counts_st)
def test_range_gives_each_subscriber_a_contiguous_share(
    subscriptions: list[frozenset[bytes]], counts: dict[bytes, int]
) -> None:
    members = make(subscriptions)
    out = RangeAssignor().assign(members, counts, {})
    check_complete(members, counts, out)
    for t, n in counts.items():
        subscribers = [m.member_id for m in members if t in m.topics]
        if not subscribers:
            continue
        shares = [sorted(p for topic, p in out[m] if topic == t) for m in subscribers]
        assert [p for share in shares for p in share] == list(range(n))  # in member order, contiguous
        assert max(map(len, shares), default=0) - min(map(len, shares), default=0) <= 1


def test_range_orders_static_members_by_instance_id() -> None:
    t = TOPICS[0]
    members = [AssignmentMember("z", "a-instance", frozenset({t})), AssignmentMember("a", "b-instance", frozenset({t}))]
    out = RangeAssignor().assign(members, {t: 2}, {})
    assert out == {"z": frozenset({(t, 0)}), "a": frozenset({(t, 1)})}
