from collections import Counter

import pytest

from odradek.controller.placement import BrokerSlot, PlacementError, assign_replicas


def brokers(n: int, racks: int = 0) -> list[BrokerSlot]:
    return [BrokerSlot(i, f"r{i % racks}" if racks else "") for i in range(1, n + 1)]


@pytest.mark.parametrize(("n", "rf", "parts"), [(3, 3, 12), (5, 3, 50), (6, 2, 7), (1, 1, 4)])
def test_replicas_are_distinct_and_leaders_spread(n: int, rf: int, parts: int) -> None:
    assignment = assign_replicas("events", parts, rf, brokers(n))
    assert all(len(set(r)) == rf == len(r) for r in assignment)
    leaders = Counter(r[0] for r in assignment)
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in range(1, n + 1)) <= 1


def test_replica_load_is_balanced() -> None:
    assignment = assign_replicas("t", 60, 3, brokers(6))
    load = Counter(b for r in assignment for b in r)
    assert max(load.values()) - min(load.values()) <= 2


def test_rack_aware_spreads_over_racks() -> None:
    assignment = assign_replicas("t", 30, 3, brokers(6, racks=3))
    rack = {b.broker_id: b.rack for b in brokers(6, racks=3)}
    assert all(len({rack[b] for b in r}) == 3 for r in assignment)


def test_rack_aware_with_fewer_racks_than_replicas_still_places() -> None:
    assignment = assign_replicas("t", 10, 3, brokers(4, racks=2))
    rack = {b.broker_id: b.rack for b in brokers(4, racks=2)}
    assert all(len(set(r)) == 3 and len({rack[b] for b in r}) == 2 for r in assignment)


def test_different_topics_start_on_different_brokers() -> None:
    starts = {assign_replicas(f"topic-{i}", 1, 1, brokers(3))[0][0] for i in range(20)}
    assert starts == {1, 2, 3}


def test_first_partition_continues_the_round_robin() -> None:
    whole = assign_replicas("t", 6, 2, brokers(3))
    assert assign_replicas("t", 3, 2, brokers(3), first_partition=3) == whole[3:]


@pytest.mark.parametrize(("parts", "rf", "n"), [(1, 4, 3), (0, 1, 3), (1, 0, 3), (1, 1, 0)])
def test_impossible_requests_are_rejected(parts: int, rf: int, n: int) -> None:
    with pytest.raises(PlacementError):
        assign_replicas("t", parts, rf, brokers(n))
