"""plan_ranges: Spark's rate limit and range splitting, checked on tables and on the invariants they promise."""

from __future__ import annotations

import itertools
import random

import pytest

from odradek.client.structs import TopicPartition as TP
from odradek.spark_connector.planning import DataLoss, OffsetRange, cap_offsets, data_loss, plan_ranges, split_ranges

A0, A1, A2, B0 = TP("a", 0), TP("a", 1), TP("a", 2), TP("b", 0)


def R(tp: TP, start: int, end: int) -> OffsetRange:
    return OffsetRange(tp.topic, tp.partition, start, end)


def assert_covers(ranges: list[OffsetRange], start: dict[TP, int], end: dict[TP, int]) -> None:
    """Each partition's ranges are non-empty, contiguous, and cover [start, end) exactly."""
    assert all(r.size > 0 for r in ranges)
    for tp in end:
        mine = [r for r in ranges if r.topic_partition == tp]
        if start[tp] >= end[tp]:
            assert mine == []
            continue
        assert mine[0].start == start[tp] and mine[-1].end == end[tp]
        assert all(x.end == y.start for x, y in itertools.pairwise(mine))


def test_no_limits_gives_one_range_per_partition_with_data() -> None:
    start = {A0: 0, A1: 5, A2: 7, B0: 3}
    end = {A0: 10, A1: 5, A2: 9, B0: 3}
    ranges, new_end = plan_ranges(start, end, None, None)
    assert ranges == [R(A0, 0, 10), R(A2, 7, 9)]  # the empty A1 and B0 are dropped
    assert new_end == end


@pytest.mark.parametrize(
    ("sizes", "limit", "expected"),
    [
        ([100, 100], 1000, [100, 100]),  # under the limit: everything
        ([100, 100], 200, [100, 100]),
        ([300, 100], 100, [75, 25]),  # exact proportions
        ([100, 100, 100], 100, [34, 33, 33]),  # Spark's floors give 99; the largest remainder takes the last one
        ([1000, 1], 10, [9, 1]),  # Spark: 9.99 -> 9, 0.0099 -> 1 (small partitions are not starved)
        ([1000, 1, 1, 1], 10, [7, 1, 1, 1]),  # Spark would read 12; the 1s are paid for by the large partition
        ([10, 10, 10, 10], 2, [1, 1, 1, 1]),  # fewer records than partitions: 1 each, as Spark
        ([0, 50, 0], 10, [0, 10, 0]),  # partitions without data take no share
    ],
)
def test_rate_limit_table(sizes: list[int], limit: int, expected: list[int]) -> None:
    tps = [TP("t", i) for i in range(len(sizes))]
    start = {tp: 100 * i for i, tp in enumerate(tps)}
    end = {tp: start[tp] + size for tp, size in zip(tps, sizes)}
    ranges, new_end = plan_ranges(start, end, None, limit)
    assert [new_end[tp] - start[tp] for tp in tps] == expected
    assert_covers(ranges, start, new_end)


def test_rate_limit_leaves_partitions_without_backlog_alone() -> None:
    start, end = {A0: 0, A1: 9}, {A0: 100, A1: 4}  # A1 went backwards: not ours to read, moved to its new end
    assert cap_offsets(start, end, 10) == {A0: 10, A1: 4}
    ranges, _ = plan_ranges(start, end, None, 10)
    assert ranges == [R(A0, 0, 10)]


@pytest.mark.parametrize("seed", range(200))
def test_rate_limit_sums_to_the_cap_proportionally(seed: int) -> None:
    rng = random.Random(seed)
    tps = [TP("t", i) for i in range(rng.randint(1, 12))]
    start = {tp: rng.randint(0, 10**6) for tp in tps}
    end = {tp: start[tp] + rng.choice([0, 1, rng.randint(0, 50), rng.randint(0, 10**5)]) for tp in tps}
    sizes = {tp: end[tp] - start[tp] for tp in tps}
    with_data = sum(1 for s in sizes.values() if s)
    total = sum(sizes.values())
    limit = rng.randint(max(with_data, 1), max(with_data, 1) + rng.choice([5, 500, 10**5]))
    new_end = cap_offsets(start, end, limit)
    taken = {tp: new_end[tp] - start[tp] for tp in tps}
    assert sum(taken.values()) == min(limit, total)
    raised = sum(1 for s in sizes.values() if 0 < limit * s / max(total, 1) < 1)  # shares Spark raises to 1
    for tp in tps:
        assert 0 <= taken[tp] <= sizes[tp]
        assert (taken[tp] >= 1) == (sizes[tp] >= 1)  # never starved, never reading what is not there
        if total > limit:
            # Proportional up to rounding, less what the raised shares cost the larger ones (at most 1 each).
            exact = limit * sizes[tp] / total
            assert exact - 1 - raised < taken[tp] < exact + 1 or taken[tp] == 1


@pytest.mark.parametrize(
    ("ranges", "min_partitions", "expected"),
    [
        # The cases of Spark's KafkaOffsetRangeCalculatorSuite.
        ([R(A0, 1, 2), R(A1, 1, 2), R(A2, 1, 2)], 3, [R(A0, 1, 2), R(A1, 1, 2), R(A2, 1, 2)]),
        ([R(A0, 1, 5)], 4, [R(A0, 1, 2), R(A0, 2, 3), R(A0, 3, 4), R(A0, 4, 5)]),
        ([R(A0, 1, 5)], 3, [R(A0, 1, 2), R(A0, 2, 3), R(A0, 3, 5)]),
        ([R(A0, 1, 11)], 3, [R(A0, 1, 4), R(A0, 4, 7), R(A0, 7, 11)]),
        ([R(A0, 1, 5), R(A1, 1, 21)], 3, [R(A0, 1, 5), R(A1, 1, 11), R(A1, 11, 21)]),
        ([R(A0, 1, 5), R(A1, 1, 21), R(A2, 1, 1)], 3, [R(A0, 1, 5), R(A1, 1, 11), R(A1, 11, 21)]),
        # Enough ranges already, or no minimum: unchanged.
        ([R(A0, 0, 100), R(A1, 0, 1)], 2, [R(A0, 0, 100), R(A1, 0, 1)]),
        ([R(A0, 0, 100)], None, [R(A0, 0, 100)]),
        # Spark's rounding gives 3 here; the minimum is kept by splitting the largest parts.
        ([R(A0, 0, 5), R(A1, 0, 5), R(A2, 0, 5)], 4, [R(A0, 0, 2), R(A0, 2, 5), R(A1, 0, 5), R(A2, 0, 5)]),
        # Fewer records than the minimum: one range per record.
        ([R(A0, 0, 2), R(B0, 7, 8)], 10, [R(A0, 0, 1), R(A0, 1, 2), R(B0, 7, 8)]),
    ],
)
def test_split_table(ranges: list[OffsetRange], min_partitions: int | None, expected: list[OffsetRange]) -> None:
    assert split_ranges(ranges, min_partitions) == expected


@pytest.mark.parametrize("seed", range(200))
def test_split_covers_exactly_with_at_least_min_partitions(seed: int) -> None:
    rng = random.Random(seed)
    tps = [TP(rng.choice("xyz"), i) for i in range(rng.randint(1, 10))]
    start = {tp: rng.randint(0, 1000) for tp in tps}
    end = {tp: start[tp] + rng.choice([0, 1, 3, rng.randint(0, 10**4)]) for tp in tps}
    min_partitions = rng.randint(1, 64)
    max_offsets = rng.choice([None, rng.randint(len(tps), 10**4)])
    ranges, new_end = plan_ranges(start, end, min_partitions, max_offsets)
    assert_covers(ranges, start, new_end)
    records = sum(new_end[tp] - start[tp] for tp in tps)
    assert len(ranges) >= min(min_partitions, records)
    parts: dict[TP, list[int]] = {}
    for r in ranges:
        parts.setdefault(r.topic_partition, []).append(r.size)
    assert all(max(sizes) - min(sizes) <= 1 for sizes in parts.values())  # near-equal parts


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        ({A0: 0}, {A0: 5, A1: 5}, "no start offset"),
        ({A0: -2}, {A0: 5}, "start offsets must be resolved"),
        ({A0: 0}, {A0: -1}, "end offsets must be resolved"),
    ],
)
def test_plan_rejects_unresolved_offsets(start: dict[TP, int], end: dict[TP, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        plan_ranges(start, end, None, None)


def test_data_loss() -> None:
    start = {A0: 5, A1: 10, A2: 3, B0: -2, TP("gone", 0): 7}
    earliest = {A0: 5, A1: 12, A2: 0, B0: 40}
    lost = data_loss(start, earliest)
    assert lost == [DataLoss("a", 1, 10, 12), DataLoss("gone", 0, 7, None)]
    assert "a-1" in lost[0].message and "12" in lost[0].message and "failOnDataLoss" in lost[0].message
    assert "gone-0 no longer exists" in lost[1].message
    assert data_loss({A0: 5}, {A0: 5}) == []
