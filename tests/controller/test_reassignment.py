"""Partition reassignment (controller/reassignment.py): add, complete, cancel, validation, ISR never empty."""

from __future__ import annotations

import random

import pytest
from controller_images import apply, brokers, build, changes, epoch_of, partition, topic

from odradek.client.common.metadata_image import NO_LEADER, MetadataImage, PartitionRegistration
from odradek.client.errors import ErrorCode
from odradek.controller.isr import IsrItem, alter_partition
from odradek.controller.reassignment import ReassignmentRequest, alter_reassignments


def base(isr=(1, 2, 3), ids=(1, 2, 3, 4, 5), **kw) -> MetadataImage:
    return build(brokers(*ids, **kw), topic(), partition(0, (1, 2, 3), isr, leader_epoch=3, partition_epoch=7))


def reassign(image: MetadataImage, *targets, unclean: bool = False):
    """Reassign partition t-0 to each target in turn (None cancels), in one request."""
    requests = [ReassignmentRequest("t", 0, None if t is None else tuple(t)) for t in targets]
    return alter_reassignments(image, requests, lambda _topic: unclean)


def step(image: MetadataImage, *targets, unclean: bool = False) -> tuple[MetadataImage, list]:
    records, outcomes = reassign(image, *targets, unclean=unclean)
    return apply(image, records), outcomes


def state(image: MetadataImage) -> PartitionRegistration:
    return image.partition("t", 0)


def join_isr(image: MetadataImage, new_isr) -> MetadataImage:
    """The leader asks for ``new_isr`` (AlterPartition), as it would once the new replicas caught up."""
    p = state(image)
    item = IsrItem("t", 0, p.leader_epoch, p.partition_epoch, tuple(new_isr))
    records, out = alter_partition(image, p.leader, epoch_of(p.leader), [item])
    assert out.partitions[0].error in (ErrorCode.NONE, ErrorCode.NEW_LEADER_ELECTED), out
    return apply(image, records)


def test_a_reassignment_first_adds_the_target_replicas() -> None:
    image = base()
    records, [outcome] = reassign(image, (2, 3, 4))
    [change] = changes(records)
    assert change.replicas_changed and not change.isr_changed and not change.HasField("leader")
    p = state(apply(image, records))
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((2, 3, 4, 1), (4,), (1,))
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((1, 2, 3), 1, 3, 8)
    assert (outcome.error, outcome.leader) == (ErrorCode.NONE, 1)


def test_add_then_complete_when_the_new_replica_joins_the_isr() -> None:
    image, _ = step(base(), (2, 3, 4))
    image = join_isr(image, (1, 2, 3, 4))
    p = state(image)
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas) == ((2, 3, 4), (2, 3, 4), (), ())
    assert (p.leader, p.leader_epoch, p.partition_epoch) == (2, 4, 9)  # broker 1 left: T's first in-sync replica leads


def test_moving_every_replica_elects_the_targets_first_in_sync_active_replica() -> None:
    image, _ = step(base(fenced=(4,)), (4, 5))
    p = state(image)
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((4, 5, 1, 2, 3), (4, 5), (1, 2, 3))
    image = join_isr(image, (1, 2, 3, 5))
    assert state(image).adding_replicas == (4, 5)  # 4 is not in sync yet (and fenced, so it cannot join)
    image = apply(image, brokers(4))  # 4 registers again, is unfenced and catches up
    p = state(join_isr(image, (1, 5, 4)))
    assert (p.replicas, p.isr, p.leader) == ((4, 5), (5, 4), 4)  # T's order decides among the in-sync replicas


def test_a_shrinking_target_completes_at_once() -> None:
    image, [outcome] = step(base(), (2, 3))
    p = state(image)
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas) == ((2, 3), (2, 3), (), ())
    assert (p.leader, p.leader_epoch, p.partition_epoch, outcome.leader) == (2, 4, 8, 2)


def test_a_shrink_waits_when_no_target_replica_is_in_sync() -> None:
    image, _ = step(base(isr=(1,)), (2, 3))
    p = state(image)
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas, p.leader) == ((2, 3, 1), (1,), (), (1,), 1)
    p = state(join_isr(image, (1, 3)))
    assert (p.replicas, p.isr, p.removing_replicas, p.leader) == ((2, 3), (3,), (), 3)


def test_a_target_equal_to_the_replicas_is_a_no_op() -> None:
    records, [outcome] = reassign(base(), (1, 2, 3))
    assert records == [] and (outcome.error, outcome.leader) == (ErrorCode.NONE, 1)


def test_reordering_the_replicas_completes_at_once_keeping_the_leader() -> None:
    image, _ = step(base(), (3, 1, 2))
    p = state(image)
    assert (p.replicas, p.isr, p.leader, p.leader_epoch) == ((3, 1, 2), (1, 2, 3), 1, 3)


def test_cancel_reverts_to_the_replicas_without_the_adding_ones() -> None:
    image, _ = step(base(), (2, 3, 4))
    image = join_isr(image, (1, 2, 3))  # nothing changes but the epoch: still waiting for 4
    records, [outcome] = reassign(image, None)
    p = state(apply(image, records))
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas) == ((2, 3, 1), (1, 2, 3), (), ())
    assert (p.leader, outcome.error) == (1, ErrorCode.NONE)


def test_cancel_drops_adding_replicas_that_joined_the_isr() -> None:
    image, _ = step(base(), (4, 5, 1))
    image = join_isr(image, (1, 2, 3, 4))
    assert state(image).adding_replicas == (4, 5)
    p = state(step(image, None)[0])
    assert (p.replicas, p.isr, p.leader) == ((1, 2, 3), (1, 2, 3), 1)


def test_cancel_without_a_reassignment() -> None:
    records, [outcome] = reassign(base(), None)
    assert records == [] and outcome.error == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


def test_cancel_that_needs_an_unclean_election_is_refused_unless_the_topic_allows_it() -> None:
    # Only the adding replica 4 is in sync (and leads): reverting to 1 means electing an out-of-sync replica.
    image = build(brokers(1, 2, 3, 4), topic(), partition(0, (4, 1), (4,), adding=(4,), removing=(1,)))
    records, [outcome] = reassign(image, None)
    assert records == [] and outcome.error == ErrorCode.INVALID_REPLICA_ASSIGNMENT and "unclean" in outcome.message
    p = state(step(image, None, unclean=True)[0])
    assert (p.replicas, p.isr, p.leader, p.adding_replicas) == ((1,), (1,), 1, ())


@pytest.mark.parametrize(
    ("target", "fragment"),
    [((), "empty"), ((2, 2, 3), "more than once"), ((2, 9), "not registered")],
)
def test_invalid_targets(target: tuple[int, ...], fragment: str) -> None:
    records, [outcome] = reassign(base(), target)
    assert records == [] and outcome.error == ErrorCode.INVALID_REPLICA_ASSIGNMENT and fragment in outcome.message


def test_a_fenced_but_registered_broker_may_be_a_target() -> None:
    image, [outcome] = step(base(fenced=(4,)), (1, 2, 4))
    assert outcome.error == ErrorCode.NONE and state(image).adding_replicas == (4,)


def test_unknown_partitions() -> None:
    requests = [ReassignmentRequest("nope", 0, (1,)), ReassignmentRequest("t", 3, None)]
    records, outcomes = alter_reassignments(base(), requests, lambda _t: False)
    assert records == [] and [o.error for o in outcomes] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 2


def test_a_new_target_during_a_reassignment_is_relative_to_the_replicas_before_it() -> None:
    image, _ = step(base(), (2, 3, 4))
    image, _ = step(image, (2, 3, 5))  # 4 is no longer wanted: dropped at once
    p = state(image)
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((2, 3, 5, 1), (5,), (1,))
    image, _ = step(image, (4, 2, 3, 5))  # 5 is still being added, though it is in the replicas already
    p = state(image)
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((4, 2, 3, 5, 1), (4, 5), (1,))


def test_a_new_target_dropping_the_only_in_sync_replicas_needs_an_unclean_election() -> None:
    # Broker 4 was added, caught up and leads after 1 failed; 1 is out of sync. Retargeting to 5,1 drops 4.
    image = build(brokers(1, 2, 3, 4, 5), topic(), partition(0, (4, 1), (4,), adding=(4,), removing=(1,)))
    records, [outcome] = reassign(image, (5, 1))
    assert records == [] and outcome.error == ErrorCode.INVALID_REPLICA_ASSIGNMENT and "unclean" in outcome.message
    p = state(step(image, (5, 1), unclean=True)[0])
    assert (p.replicas, p.isr, p.leader, p.adding_replicas) == ((5, 1), (1,), 1, (5,))  # 1 held data; 5 is new


def test_requests_in_one_call_are_one_batch_applied_in_order() -> None:
    records, outcomes = reassign(base(), (2, 3, 4), None)
    assert [o.error for o in outcomes] == [ErrorCode.NONE, ErrorCode.NONE] and len(records) == 2
    p = state(apply(base(), records))
    assert (set(p.replicas), p.adding_replicas, p.removing_replicas) == ({1, 2, 3}, (), ())


def check_invariants(p: PartitionRegistration) -> None:
    assert p.isr, p
    assert set(p.isr) <= set(p.replicas), p
    assert p.leader == NO_LEADER or p.leader in p.isr, p
    assert set(p.adding_replicas) <= set(p.replicas) and set(p.removing_replicas) <= set(p.replicas), p
    assert not set(p.adding_replicas) & set(p.removing_replicas), p


def test_random_reassignments_cancels_and_isr_changes_never_empty_the_isr() -> None:
    rng = random.Random(11)
    ids = (1, 2, 3, 4, 5)
    for _ in range(200):
        image = build(brokers(*ids, fenced=rng.sample(ids, rng.randint(0, 2))), topic(), partition(0, (1, 2, 3)))
        for _ in range(12):
            p = state(image)
            op = rng.random()
            if op < 0.4:
                image = step(image, tuple(rng.sample(ids, rng.randint(1, 4))), unclean=rng.random() < 0.5)[0]
            elif op < 0.55:
                image = step(image, None, unclean=rng.random() < 0.5)[0]
            elif p.leader != NO_LEADER:
                others = [r for r in p.replicas if r != p.leader]
                new_isr = (p.leader, *rng.sample(others, rng.randint(0, len(others))))
                item = IsrItem("t", 0, p.leader_epoch, p.partition_epoch, new_isr)
                image = apply(image, alter_partition(image, p.leader, epoch_of(p.leader), [item])[0])
            check_invariants(state(image))
