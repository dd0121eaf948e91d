"""ElectLeaders and the automatic preferred-leader rebalance (controller/elections.py)."""

from __future__ import annotations

import pytest
from controller_images import apply, brokers, build, changes, partition, topic

from odradek.client.common.metadata_image import NO_LEADER, MetadataImage
from odradek.client.errors import ErrorCode
from odradek.controller.elections import (
    elect_leaders,
    imbalanced_brokers,
    preferred_leader_change,
    rebalance_leaders,
)


def preferred(image: MetadataImage, *parts: int, name: str = "t"):
    return elect_leaders(image, [(name, p) for p in parts], unclean=False)


def unclean(image: MetadataImage, *parts: int):
    return elect_leaders(image, [("t", p) for p in parts], unclean=True)


def moved_away(**kw) -> MetadataImage:
    """Partition 0 prefers 1 but 2 leads (as after 1 was fenced and came back in sync)."""
    return build(brokers(1, 2, 3, **kw), topic(), partition(0, (1, 2, 3), (2, 3, 1), leader_epoch=4, partition_epoch=9))


def test_preferred_election_moves_leadership_back_and_bumps_both_epochs() -> None:
    image = moved_away()
    records, [outcome] = preferred(image, 0)
    assert (outcome.error, outcome.leader) == (ErrorCode.NONE, 1)
    [change] = changes(records)
    assert change.leader == 1 and not change.isr_changed
    p = apply(image, records).partition("t", 0)
    assert (p.leader, p.leader_epoch, p.partition_epoch, p.isr) == (1, 5, 10, (2, 3, 1))


def test_preferred_election_not_needed_when_the_preferred_replica_leads() -> None:
    image = build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3)))
    records, [outcome] = preferred(image, 0)
    assert records == [] and (outcome.error, outcome.leader) == (ErrorCode.ELECTION_NOT_NEEDED, 1)


@pytest.mark.parametrize(
    ("image", "why"),
    [
        (moved_away(fenced=(1,)), "not active"),
        (moved_away(shutting_down=(1,)), "not active"),
        (build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), (2, 3))), "not in the ISR"),
    ],
    ids=["fenced", "shutting-down", "out-of-sync"],
)
def test_preferred_leader_not_available(image: MetadataImage, why: str) -> None:
    records, [outcome] = preferred(image, 0)
    assert records == [] and outcome.error == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE and why in outcome.message
    assert outcome.leader == image.partition("t", 0).leader
    assert preferred_leader_change(image, image.partition("t", 0)) is None


def test_unknown_partitions() -> None:
    image = moved_away()
    records, outcomes = elect_leaders(image, [("nope", 0), ("t", 5)], unclean=False)
    assert records == [] and [o.error for o in outcomes] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 2


def test_every_partition_in_one_batch_leaving_out_those_not_needed() -> None:
    image = build(
        brokers(1, 2, 3),
        topic(),
        partition(0, (1, 2, 3), (2, 3, 1)),  # electable
        partition(1, (2, 3, 1)),  # preferred leads: not needed
        partition(2, (3, 1, 2), (1, 2)),  # 3 out of sync
        partition(3, (2, 1, 3), (1, 3, 2)),  # electable
        topic("u", b"u" * 16),
        partition(0, (3, 1), (1, 3), topic_id=b"u" * 16),  # electable
    )
    records, outcomes = elect_leaders(image, None, unclean=False)
    assert [(o.topic, o.partition, o.error, o.leader) for o in outcomes] == [
        ("t", 0, ErrorCode.NONE, 1),
        ("t", 2, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, 1),
        ("t", 3, ErrorCode.NONE, 2),
        ("u", 0, ErrorCode.NONE, 3),
    ]
    assert len(records) == 3
    after = apply(image, records)
    assert [after.partition("t", i).leader for i in range(4)] == [1, 2, 1, 2] and after.partition("u", 0).leader == 3


def test_a_partition_named_twice_sees_the_first_election() -> None:
    records, outcomes = preferred(moved_away(), 0, 0)
    assert [o.error for o in outcomes] == [ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED] and len(records) == 1


def test_unclean_election_not_needed_while_the_partition_has_a_leader() -> None:
    records, [outcome] = unclean(moved_away(), 0)
    assert records == [] and (outcome.error, outcome.leader) == (ErrorCode.ELECTION_NOT_NEEDED, 2)


def test_unclean_election_prefers_an_in_sync_replica() -> None:
    # Offline with ISR 3 (fenced when it was the last in sync, now back): a clean choice exists.
    image = build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), (3,), leader=NO_LEADER))
    records, [outcome] = unclean(image, 0)
    p = apply(image, records).partition("t", 0)
    assert (outcome.error, p.leader, p.isr, p.leader_epoch) == (ErrorCode.NONE, 3, (3,), 1)


def test_unclean_election_takes_any_active_replica_as_the_whole_isr() -> None:
    image = build(brokers(1, 2, 3, fenced=(1, 3)), topic(), partition(0, (1, 2, 3), (3,), leader=NO_LEADER))
    records, [outcome] = unclean(image, 0)
    p = apply(image, records).partition("t", 0)
    assert (outcome.error, outcome.leader, p.leader, p.isr, p.leader_epoch) == (ErrorCode.NONE, 2, 2, (2,), 1)


def test_unclean_election_without_an_active_replica() -> None:
    image = build(brokers(1, 2, 3, fenced=(1, 2, 3)), topic(), partition(0, (1, 2), (1,), leader=NO_LEADER))
    records, [outcome] = unclean(image, 0)
    assert records == [] and outcome.error == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert image.partition("t", 0).isr == (1,)  # the last replica standing stays


def prefers_1(led_by_others: int, total: int = 10, **kw) -> MetadataImage:
    """``total`` partitions preferring broker 1, of which the first ``led_by_others`` are led by 2."""
    parts = [
        partition(i, (1, 2, 3), (2, 3, 1) if i < led_by_others else (1, 2, 3), leader_epoch=1) for i in range(total)
    ]
    return build(brokers(1, 2, 3, **kw), topic(), parts)


def test_rebalance_leaves_a_broker_within_the_imbalance_percentage() -> None:
    image = prefers_1(1)  # 10% not led: not more than 10%
    assert imbalanced_brokers(image, 10) == {} and rebalance_leaders(image, 10) == []


def test_rebalance_elects_preferred_leaders_of_a_broker_over_the_percentage() -> None:
    image = prefers_1(2)  # 20% not led
    assert [p.partition for p in imbalanced_brokers(image, 10)[1]] == [0, 1]
    records = rebalance_leaders(image, 10)
    after = apply(image, records)
    assert [after.partition("t", i).leader for i in range(10)] == [1] * 10
    assert [after.partition("t", i).leader_epoch for i in range(3)] == [2, 2, 1]
    assert rebalance_leaders(after, 10) == []
    assert rebalance_leaders(image, 20) == [] and len(rebalance_leaders(image, 0)) == 2


def test_rebalance_skips_partitions_it_cannot_or_should_not_move() -> None:
    image = build(
        brokers(1, 2, 3),
        topic(),
        partition(0, (1, 2, 3), (2, 3, 1)),
        partition(1, (1, 2, 3), (2, 3)),  # 1 out of sync: cannot lead
        partition(2, (1, 2, 3, 4), (2, 3, 1), adding=(1,), removing=(4,)),  # reassignment in progress
        partition(3, (1, 2, 3)),
    )
    assert len(imbalanced_brokers(image, 10)[1]) == 3
    [change] = changes(rebalance_leaders(image, 10))
    assert (change.partition, change.leader) == (0, 1)


def test_rebalance_does_nothing_for_a_fenced_preferred_broker() -> None:
    image = prefers_1(5, fenced=(1,))
    assert 1 in imbalanced_brokers(image, 10) and rebalance_leaders(image, 10) == []
