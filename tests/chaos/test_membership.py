"""The membership faults' choices, without a cluster: new replica sets keep their size and bring a new broker, a
decommission plan moves every replica off its broker and spreads them, the way back returns the victim's own
places, and the coordinators' partitions are the ones the brokers compute for the workload's ids."""

from __future__ import annotations

import random

from odradek.broker.groups.partitioner import offsets_partition_for
from odradek.chaos.membership import (
    OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    brokers_needed,
    coordinator_partitions,
    describe_moves,
    evacuation,
    new_replicas,
    pick_partition,
    return_plan,
)


def test_a_new_replica_set_keeps_its_size_and_brings_at_least_one_new_broker() -> None:
    for seed in range(200):
        rng = random.Random(seed)
        current = rng.sample([4, 5, 6, 7, 8], 3)
        target = new_replicas(current, [4, 5, 6, 7, 8], rng)
        assert target is not None
        assert len(target) == len(set(target)) == 3, (seed, target)
        assert set(target) <= {4, 5, 6, 7, 8}
        assert set(target) - set(current), (seed, current, target)


def test_new_replica_sets_are_a_function_of_the_seed_and_vary_with_it() -> None:
    drawn = [new_replicas([4, 5, 6], [4, 5, 6, 7], random.Random(seed)) for seed in range(50)]
    assert drawn == [new_replicas([4, 5, 6], [4, 5, 6, 7], random.Random(seed)) for seed in range(50)]
    assert len({tuple(t or ()) for t in drawn}) > 3  # which broker leaves, and the order, vary


def test_no_new_replica_set_without_a_broker_outside_the_current_one() -> None:
    assert new_replicas([4, 5, 6], [4, 5, 6], random.Random(1)) is None


def test_membership_faults_need_one_broker_more_than_the_replication_factor() -> None:
    assert brokers_needed(["kill", "reassign"], 3) == 4
    assert brokers_needed(["decommission"], 5) == 5
    assert brokers_needed(["kill", "partition"], 3) == 3


def test_an_evacuation_moves_every_replica_off_the_victim_in_its_place_and_spreads_them() -> None:
    replicas = {("chaos", p): [4 + (p + i) % 4 for i in range(3)] for p in range(8)}
    plan = evacuation(replicas, victim=5, others=[4, 6, 7], rng=random.Random(3))
    on_victim = {tp for tp, rs in replicas.items() if 5 in rs}
    assert set(plan) == on_victim
    for tp, new in plan.items():
        old = replicas[tp]
        assert 5 not in new and len(set(new)) == 3
        assert [b for b in new if b in old] == [b for b in old if b != 5]  # the others keep their places
        assert new[old.index(5)] not in old  # the taker stands where the victim stood
    after = [b for tp, rs in replicas.items() for b in plan.get(tp, rs)]
    counts = [after.count(b) for b in (4, 6, 7)]
    assert max(counts) - min(counts) <= 1  # the least loaded broker takes each replica


def test_an_evacuation_counts_the_load_of_partitions_elsewhere() -> None:
    replicas = {("chaos", 0): [5, 4, 6], ("other", 0): [7, 4, 6], ("other", 1): [7, 6, 4]}
    for seed in range(20):
        assert evacuation(replicas, victim=5, others=[4, 6, 7, 8], rng=random.Random(seed)) == {("chaos", 0): [8, 4, 6]}


def test_an_evacuation_leaves_out_partitions_with_nowhere_to_go() -> None:
    plan = evacuation({("chaos", 0): [4, 5, 6], ("chaos", 1): [5]}, victim=5, others=[4, 6], rng=random.Random(1))
    assert plan == {("chaos", 1): [4]}


def test_the_way_back_returns_about_half_of_the_moved_partitions_to_the_victims_places() -> None:
    moved = {("chaos", p): ([5, 4, 6], [7, 4, 6]) for p in range(6)}
    current = {tp: new for tp, (_, new) in moved.items()}
    current[("chaos", 5)] = [7, 4, 6, 5]  # a reassignment under way: skipped by the caller, never chosen here
    del current[("chaos", 4)]  # deleted meanwhile
    current[("chaos", 3)] = [5, 4, 6]  # already on it
    plan = return_plan(moved, current, victim=5, rng=random.Random(2))
    assert 1 <= len(plan) <= 2
    assert set(plan) <= {("chaos", 0), ("chaos", 1), ("chaos", 2)}
    assert all(rs == [5, 4, 6] for rs in plan.values())
    assert plan == return_plan(moved, current, victim=5, rng=random.Random(2))


def test_the_way_back_is_empty_when_nothing_was_moved() -> None:
    assert return_plan({}, {("chaos", 0): [4, 6, 7]}, victim=5, rng=random.Random(1)) == {}


def test_the_coordinators_partitions_are_those_the_brokers_compute_for_the_ids() -> None:
    counts = {OFFSETS_TOPIC: 3, TRANSACTION_STATE_TOPIC: 3, "chaos": 6}
    found = coordinator_partitions("chaos-group", ["chaos-txn-0", "chaos-txn-1"], counts)
    expected = [
        (OFFSETS_TOPIC, offsets_partition_for("chaos-group", 3)),
        *dict.fromkeys((TRANSACTION_STATE_TOPIC, offsets_partition_for(t, 3)) for t in ("chaos-txn-0", "chaos-txn-1")),
    ]
    assert found == expected
    assert coordinator_partitions(None, ["chaos-txn-0"], {"chaos": 6}) == []  # not created yet


def test_a_coordinators_partition_is_drawn_about_half_the_time() -> None:
    workload = [("chaos", p) for p in range(6)]
    coordinators = [(OFFSETS_TOPIC, 1)]
    picks = [pick_partition(workload, coordinators, random.Random(seed)) for seed in range(400)]
    assert 120 < picks.count((OFFSETS_TOPIC, 1)) < 280
    assert {tp for tp in picks if tp[0] == "chaos"} == set(workload)
    assert pick_partition(workload, [], random.Random(1)) in workload


def test_moves_are_described_with_both_replica_sets() -> None:
    moves = {("chaos", 3): ([4, 5, 6], [7, 5, 6]), (OFFSETS_TOPIC, 0): ([5, 6, 7], [5, 6, 4])}
    assert describe_moves(moves) == "__consumer_offsets-0 [5, 6, 7] -> [5, 6, 4]; chaos-3 [4, 5, 6] -> [7, 5, 6]"
    assert describe_moves({}) == "none"
