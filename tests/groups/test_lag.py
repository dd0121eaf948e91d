"""The pure part of the coordinator's consumer-lag gauges."""

from __future__ import annotations

from odradek.broker.groups.lag import by_leader, lag_samples
from odradek.client.structs import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def test_lag_is_end_minus_commit_never_negative_and_unknown_ends_are_left_out() -> None:
    rows, sums = lag_samples({"g": {A0: 5, A1: 9, B0: 3}, "h": {A0: 10}}, {A0: 10, A1: 7})
    assert rows == [("g", A0, 5), ("g", A1, 0), ("h", A0, 0)]
    assert sums == {"g": 5, "h": 0}


def test_partitions_grouped_by_leader_skip_leaderless() -> None:
    leaders = {A0: 1, A1: 2, B0: -1}
    assert by_leader([A1, A0, B0, A0], leaders.__getitem__) == {1: [A0], 2: [A1]}
