"""The consumer coordinator's pure decisions (client/consumer/membership.py)."""

import re

import pytest

from odradek.client.consumer.assignors import get_assignor
from odradek.client.consumer.membership import (
    Action,
    JoinedMember,
    commit_refusal,
    error_action,
    heartbeat_due,
    leader_assignments,
    metadata_rejoin_needed,
    poll_expired,
    subscribed_topics,
    validate_pattern,
)
from odradek.client.consumer.protocol import Assignment, Subscription
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition


@pytest.mark.parametrize(
    ("code", "action"),
    [
        (ErrorCode.NONE, Action.OK),
        (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, Action.RETRY),
        (ErrorCode.NOT_COORDINATOR, Action.FIND_COORDINATOR),
        (ErrorCode.COORDINATOR_NOT_AVAILABLE, Action.FIND_COORDINATOR),
        (ErrorCode.REBALANCE_IN_PROGRESS, Action.REJOIN),
        (ErrorCode.ILLEGAL_GENERATION, Action.RESET_GENERATION),
        (ErrorCode.UNKNOWN_MEMBER_ID, Action.RESET_MEMBER),
        (ErrorCode.FENCED_INSTANCE_ID, Action.FATAL),
        (ErrorCode.INCONSISTENT_GROUP_PROTOCOL, Action.FATAL),
        (ErrorCode.GROUP_MAX_SIZE_REACHED, Action.FATAL),
    ],
)
def test_error_actions_follow_kafka(code: int, action: Action) -> None:
    assert error_action(code) is action


def test_the_leader_fills_instance_ids_from_the_member_list() -> None:
    """Range orders static members by instance id: "b-static" sorts before the dynamic "a", so it gets t-0."""
    members = [
        JoinedMember("a", None, Subscription(("t",)).encode()),
        JoinedMember("z", "b-static", Subscription(("t",)).encode()),
    ]
    out = leader_assignments(get_assignor("range"), {"t": 2, "unused": 5}, members)
    assert {m: Assignment.decode(b).partitions for m, b in out.items()} == {
        "z": (TopicPartition("t", 0),),
        "a": (TopicPartition("t", 1),),
    }


def test_pattern_subscriptions_match_whole_names_and_skip_internal_topics() -> None:
    known = ["orders", "orders-eu", "xorders", "__consumer_offsets"]
    assert subscribed_topics(re.compile("orders.*"), known) == {"orders", "orders-eu"}
    assert subscribed_topics(re.compile(".*"), known) == {"orders", "orders-eu", "xorders"}
    assert subscribed_topics(["later"], known) == {"later"}
    with pytest.raises(ValueError, match="bad topic pattern"):
        validate_pattern("(")


def test_a_leader_that_assigned_without_seeing_a_topic_rejoins_once_it_sees_it() -> None:
    """The leader assigned while its metadata (from a broker lagging behind the topics' creation) showed no
    partitions for "b": an assignment without b's partitions. When b's partitions appear it must rejoin; before
    it kept the empty assignment for good."""
    joined = frozenset({"a", "b"})
    assigned_from = {"a": 2, "b": None}
    assert not metadata_rejoin_needed(joined, joined, {"a": 2}, assigned_from)
    assert metadata_rejoin_needed(joined, joined, {"a": 2, "b": 2}, assigned_from)
    assert metadata_rejoin_needed(joined, joined, {"a": 2, "b": 2}, {"a": None, "b": None})
    assert metadata_rejoin_needed(joined, joined, {"a": 3, "b": 2}, {"a": 2, "b": 2})  # partitions added
    assert not metadata_rejoin_needed(joined, joined, {"a": 2, "b": 2}, {"a": 2, "b": 2})
    # Other members leave partition counts to the leader; every member follows its pattern's matches.
    assert not metadata_rejoin_needed(joined, joined, {"a": 3, "b": 2}, None)
    assert metadata_rejoin_needed(frozenset({"a", "b", "c"}), joined, {"a": 2, "b": 2, "c": 1}, None)


def test_commit_refusals() -> None:
    assert commit_refusal(group_managed=False, stable=False, rebalancing=False, left_reason=None) is None
    assert commit_refusal(group_managed=True, stable=True, rebalancing=False, left_reason=None) is None
    during = commit_refusal(group_managed=True, stable=False, rebalancing=True, left_reason=None)
    assert during is not None and during.code == ErrorCode.REBALANCE_IN_PROGRESS
    left = commit_refusal(group_managed=True, stable=False, rebalancing=False, left_reason="poll timeout")
    assert left is not None and left.code == ErrorCode.UNKNOWN_MEMBER_ID and "poll timeout" in str(left)


def test_clocks() -> None:
    assert heartbeat_due(10.0, 10.5, 3.0) == 2.5
    assert heartbeat_due(10.0, 14.0, 3.0) == 0.0
    assert not poll_expired(0.0, 300.0, 300.0) and poll_expired(0.0, 300.1, 300.0)
