"""The server assignors of KIP-848 groups: every subscribed partition goes to exactly one subscriber; ``uniform``
balances and moves only what balance requires; ``range`` gives contiguous, co-partitioned ranges."""

from __future__ import annotations

from collections import Counter

import pytest
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


RACKS = ["r1", "r2", "r3"]
racks_st = st.fixed_dictionaries(
    {t: st.lists(st.frozensets(st.sampled_from(RACKS), max_size=2), min_size=10, max_size=10) for t in TOPICS}
)


@settings(max_examples=200, deadline=None)
@given(members_st, counts_st, racks_st, st.data())
def test_racks_keep_every_assignor_complete_deterministic_and_balanced(
    subscriptions: list[frozenset[bytes]], counts: dict[bytes, int], racks: dict[bytes, list[frozenset[str]]], data
) -> None:
    """Rack-aware placement only chooses which partitions fill each member's quota: the sizes are those without
    racks (range per topic; uniform with one subscription), and the outcome is still complete and deterministic."""
    members = [
        AssignmentMember(f"m{i}", None, topics, data.draw(st.sampled_from([None, *RACKS])))
        for i, topics in enumerate(subscriptions)
    ]
    plain = [AssignmentMember(m.member_id, None, m.topics) for m in members]
    for assignor in (UniformAssignor(), RangeAssignor()):
        out = assignor.assign(members, counts, {}, racks)
        check_complete(members, counts, out)
        assert out == assignor.assign(list(reversed(members)), counts, {}, racks)
        if isinstance(assignor, RangeAssignor):
            without = assignor.assign(plain, counts, {})
            for t in counts:
                sizes = {m: sum(1 for topic, _ in out[m] if topic == t) for m in out}
                assert sizes == {m: sum(1 for topic, _ in without[m] if topic == t) for m in without}
        elif len(set(subscriptions)) == 1:
            loads = sorted(len(ps) for ps in out.values())
            assert loads[-1] - loads[0] <= 1


@pytest.mark.parametrize("assignor", [UniformAssignor(), RangeAssignor()], ids=["uniform", "range"])
def test_each_member_gets_the_partitions_of_its_rack_when_balance_allows(assignor: object) -> None:
    t = TOPICS[0]
    racks = {t: [frozenset({"r1"}), frozenset({"r2"})] * 3}  # even partitions in r1, odd in r2
    members = [AssignmentMember("a", None, frozenset({t}), "r2"), AssignmentMember("b", None, frozenset({t}), "r1")]
    out = assignor.assign(members, {t: 6}, {}, racks)  # type: ignore[attr-defined]
    assert out == {"a": frozenset((t, p) for p in (1, 3, 5)), "b": frozenset((t, p) for p in (0, 2, 4))}
    # Everywhere in every rack: racks do not matter, the assignment is the plain one.
    everywhere = {t: [frozenset({"r1", "r2"})] * 6}
    plain = [AssignmentMember(m.member_id, None, m.topics) for m in members]
    assert assignor.assign(members, {t: 6}, {}, everywhere) == assignor.assign(plain, {t: 6}, {})  # type: ignore[attr-defined]


def test_uniform_keeps_a_partition_of_another_rack_only_when_no_subscriber_is_in_its_rack() -> None:
    t = TOPICS[0]
    racks = {t: [frozenset({"r1"}), frozenset({"r3"})]}
    members = [AssignmentMember("a", None, frozenset({t}), "r2"), AssignmentMember("b", None, frozenset({t}), "r1")]
    previous = {"a": frozenset({(t, 0), (t, 1)})}
    out = UniformAssignor().assign(members, {t: 2}, previous, racks)
    # t-0 goes to b (in its rack); a keeps t-1, whose rack no member is in.
    assert out == {"a": frozenset({(t, 1)}), "b": frozenset({(t, 0)})}
