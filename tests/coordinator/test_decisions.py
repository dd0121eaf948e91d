"""The coordinator runtime's pure decisions: which partitions to load and unload, how a request is routed, where a
key's coordinator is, and when the timers wake."""

from __future__ import annotations

from controller_images import brokers, partition, topic

from odradek.broker.coordinator.decisions import (
    Interval,
    coordinator_address,
    earliest,
    plan_leadership,
    routing_error,
    sleep_s,
)
from odradek.broker.groups.partitioner import offsets_partition_for
from odradek.client.common.metadata_image import image_from_records
from odradek.client.errors import ErrorCode

STATE_ID = b"\x0b" * 16


def test_leadership_changes_plan_loads_and_unloads() -> None:
    assert plan_leadership({}, {0: 3, 2: 1}) == ([], [(0, 3), (2, 1)])
    assert plan_leadership({0: 3, 2: 1}, {0: 3, 2: 1}) == ([], [])
    assert plan_leadership({0: 3, 2: 1}, {2: 1}) == ([0], [])  # no longer led
    assert plan_leadership({0: 3}, {0: 4}) == ([0], [(0, 4)])  # a new epoch: reload
    assert plan_leadership({2: 1, 0: 3}, {}) == ([0, 2], [])


def test_a_request_is_served_only_by_a_current_loaded_partition() -> None:
    assert routing_error(current=False, loaded=False) == ErrorCode.NOT_COORDINATOR
    assert routing_error(current=False, loaded=True) == ErrorCode.NOT_COORDINATOR  # led at another epoch now
    assert routing_error(current=True, loaded=False) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert routing_error(current=True, loaded=True) == ErrorCode.NONE


def test_a_keys_coordinator_is_the_live_leader_of_its_partition() -> None:
    """Two partitions: one led by broker 2, one by broker 3, which is fenced."""
    key = next(k for k in ("a", "b", "c", "d") if offsets_partition_for(k, 2) == 0)
    other = next(k for k in ("a", "b", "c", "d") if offsets_partition_for(k, 2) == 1)
    image = image_from_records(
        [
            *brokers(2, 3, fenced=[3]),
            topic("__state", STATE_ID),
            partition(0, [2], topic_id=STATE_ID),
            partition(1, [3], topic_id=STATE_ID),
        ]
    )
    assert coordinator_address(image, "__state", key) == (ErrorCode.NONE, 2, "127.0.0.1", 9002)
    assert coordinator_address(image, "__state", other) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1)
    assert coordinator_address(image, "__missing", key) is None  # the caller has the topic created


def test_the_timers_sleep_until_the_earliest_deadline() -> None:
    assert earliest([None, 30, 10, None]) == 10
    assert earliest([None]) is None and earliest([]) is None
    assert sleep_s(1_500, 1_000) == 0.5
    assert sleep_s(900, 1_000) == 0.0  # already due
    assert sleep_s(None, 1_000) is None  # nothing to fire: until woken


def test_an_interval_runs_at_once_then_every_period() -> None:
    check = Interval(10.0)
    assert check.due(100.0)  # the first time at once
    assert not check.due(105.0)
    assert check.next_s == 110.0
    assert check.due(112.0)
    assert check.next_s == 122.0  # a period after it ran, not after it was due
    assert not check.due(50.0)  # a monotonic clock never steps back; an earlier tick is simply not due
