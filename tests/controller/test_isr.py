"""AlterPartition decisions (controller/isr.py): every refusal, epochs, reassignment completion, ISR never empty."""

from __future__ import annotations

import random

import pytest
from controller_images import apply, brokers, build, changes, epoch_of, partition, topic

from odradek.client.common.metadata_image import MetadataImage
from odradek.client.errors import ErrorCode
from odradek.controller.isr import IsrItem, alter_partition


def base(**kw) -> MetadataImage:
    """Brokers 1-4 (unless told otherwise); topic t: partition 0 on 1,2,3 led by 1 with ISR 1,2."""
    return build(brokers(*kw.pop("ids", (1, 2, 3, 4)), **kw), topic(), partition(0, (1, 2, 3), (1, 2), leader_epoch=5))


def item(new_isr, leader_epoch=5, partition_epoch=0, topic_name="t", index=0) -> IsrItem:
    return IsrItem(topic_name, index, leader_epoch, partition_epoch, tuple(new_isr))


def ask(image: MetadataImage, *items: IsrItem, broker: int = 1, broker_epoch: int | None = None):
    epoch = epoch_of(broker) if broker_epoch is None else broker_epoch
    return alter_partition(image, broker, epoch, items)


def test_expand_writes_one_record_and_bumps_only_the_partition_epoch() -> None:
    image = base()
    records, out = ask(image, item((1, 2, 3)))
    assert out.error == ErrorCode.NONE
    [change] = changes(records)
    assert change.isr_changed and list(change.isr) == [1, 2, 3] and not change.HasField("leader")
    after = apply(image, records).partition("t", 0)
    assert (after.isr, after.leader, after.leader_epoch, after.partition_epoch) == ((1, 2, 3), 1, 5, 1)
    [r] = out.partitions
    assert (r.error, r.leader, r.leader_epoch, r.isr, r.partition_epoch) == (ErrorCode.NONE, 1, 5, (1, 2, 3), 1)


def test_shrink_to_the_leader_alone_is_accepted() -> None:
    records, out = ask(base(), item((1,)))
    assert out.partitions[0].error == ErrorCode.NONE and out.partitions[0].isr == (1,)
    assert apply(base(), records).partition("t", 0).isr == (1,)


def test_an_unchanged_isr_answers_the_current_state_without_a_record() -> None:
    records, out = ask(base(), item((1, 2)))
    assert records == []
    assert out.partitions[0].error == ErrorCode.NONE
    assert (out.partitions[0].isr, out.partitions[0].partition_epoch, out.partitions[0].leader_epoch) == ((1, 2), 0, 5)


@pytest.mark.parametrize(
    ("broker", "broker_epoch"),
    [(1, epoch_of(1) - 1), (1, epoch_of(1) + 1), (9, 90)],
    ids=["older-epoch", "newer-epoch", "unregistered"],
)
def test_an_unknown_broker_or_stale_broker_epoch_refuses_the_whole_request(broker: int, broker_epoch: int) -> None:
    records, out = ask(base(), item((1, 2, 3)), broker=broker, broker_epoch=broker_epoch)
    assert records == [] and out.error == ErrorCode.STALE_BROKER_EPOCH and out.partitions == []
    assert out.message


@pytest.mark.parametrize(("name", "index"), [("nope", 0), ("t", 7)])
def test_unknown_topic_or_partition(name: str, index: int) -> None:
    records, out = ask(base(), item((1, 2, 3), topic_name=name, index=index))
    assert records == [] and out.error == ErrorCode.NONE
    assert out.partitions[0].error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("leader_epoch", [4, 6])
def test_any_other_leader_epoch_is_fenced(leader_epoch: int) -> None:
    records, out = ask(base(), item((1, 2, 3), leader_epoch=leader_epoch))
    [r] = out.partitions
    assert records == [] and r.error == ErrorCode.FENCED_LEADER_EPOCH
    assert (r.leader, r.leader_epoch, r.partition_epoch) == (1, 5, 0)  # the current state, to see why


def test_a_follower_is_not_the_leader() -> None:
    records, out = ask(base(), item((1, 2, 3)), broker=2)
    assert records == [] and out.partitions[0].error == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_deposed_leader_with_its_old_epoch_is_fenced() -> None:
    moved = build(brokers(1, 2, 3, 4), topic(), partition(0, (1, 2, 3), (2,), leader=2, leader_epoch=6))
    assert ask(moved, item((1, 2)), broker=1)[1].partitions[0].error == ErrorCode.FENCED_LEADER_EPOCH


def test_a_stale_partition_epoch_is_an_invalid_update_version() -> None:
    records, out = ask(base(), item((1, 2, 3), partition_epoch=1))
    assert records == [] and out.partitions[0].error == ErrorCode.INVALID_UPDATE_VERSION


@pytest.mark.parametrize(
    "new_isr",
    [(1, 2, 2), (1, 2, 4), (2, 3), ()],
    ids=["duplicate", "not-a-replica", "without-leader", "empty"],
)
def test_malformed_isrs_are_invalid_requests(new_isr: tuple[int, ...]) -> None:
    records, out = ask(base(), item(new_isr))
    assert records == [] and out.partitions[0].error == ErrorCode.INVALID_REQUEST
    assert out.partitions[0].message


@pytest.mark.parametrize(
    "kw",
    [{"fenced": (3,)}, {"shutting_down": (3,)}, {"ids": (1, 2, 4)}],
    ids=["fenced", "shutting-down", "unregistered"],
)
def test_only_active_brokers_may_join_the_isr(kw: dict) -> None:
    records, out = ask(base(**kw), item((1, 2, 3)))
    assert records == [] and out.partitions[0].error == ErrorCode.INELIGIBLE_REPLICA


def test_a_member_that_is_no_longer_active_may_stay_while_the_isr_shrinks() -> None:
    image = build(brokers(1, 2, 3, fenced=(3,)), topic(), partition(0, (1, 2, 3), (1, 2, 3), leader_epoch=5))
    records, out = ask(image, item((1, 3)))
    assert out.partitions[0].error == ErrorCode.NONE and apply(image, records).partition("t", 0).isr == (1, 3)


def test_items_of_one_request_form_one_batch_and_see_each_other() -> None:
    image = build(
        brokers(1, 2, 3),
        topic(),
        partition(0, (1, 2, 3), (1, 2), leader_epoch=5),
        partition(1, (1, 2, 3), (1,), leader_epoch=5),
        partition(2, (2, 3, 1), (2, 3), leader_epoch=5),
    )
    records, out = ask(
        image,
        item((1, 2, 3), index=0),
        item((1, 2), index=1),
        item((2, 3, 1), index=2),  # broker 1 does not lead partition 2
        item((1,), index=0),  # the same partition again, at the epoch it had before this request
    )
    assert [r.error for r in out.partitions] == [
        ErrorCode.NONE,
        ErrorCode.NONE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.INVALID_UPDATE_VERSION,
    ]
    assert len(records) == 2
    after = apply(image, records)
    assert after.partition("t", 0).isr == (1, 2, 3) and after.partition("t", 1).isr == (1, 2)


def test_the_isr_change_that_completes_a_reassignment_completes_it_in_the_same_record() -> None:
    # Reassigning 1,2,3 -> 2,3,4: replicas 2,3,4,1, adding 4, removing 1; broker 1 leads.
    image = build(
        brokers(1, 2, 3, 4), topic(), partition(0, (2, 3, 4, 1), (1, 2, 3), leader=1, adding=(4,), removing=(1,))
    )
    records, out = ask(image, item((1, 2, 3, 4), leader_epoch=0))
    [change] = changes(records)
    assert change.replicas_changed and change.isr_changed and change.HasField("leader")
    p = apply(image, records).partition("t", 0)
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas) == ((2, 3, 4), (2, 3, 4), (), ())
    assert (p.leader, p.leader_epoch, p.partition_epoch) == (2, 1, 1)
    [r] = out.partitions
    assert r.error == ErrorCode.NEW_LEADER_ELECTED  # the requester no longer leads
    assert (r.leader, r.leader_epoch, r.isr, r.partition_epoch) == (2, 1, (2, 3, 4), 1)


def test_a_reassignment_keeping_its_leader_completes_without_a_new_leader() -> None:
    image = build(brokers(1, 2, 3, 4), topic(), partition(0, (1, 4, 2, 3), (1, 2, 3), adding=(4,), removing=(2, 3)))
    records, out = ask(image, item((1, 2, 3, 4), leader_epoch=0))
    p = apply(image, records).partition("t", 0)
    assert (p.replicas, p.isr, p.leader, p.leader_epoch) == ((1, 4), (1, 4), 1, 0)
    assert out.partitions[0].error == ErrorCode.NONE and out.partitions[0].isr == (1, 4)


def test_a_reassignment_waits_for_every_adding_replica() -> None:
    image = build(brokers(1, 2, 3, 4, 5), topic(), partition(0, (4, 5, 1, 2), (1, 2), adding=(4, 5), removing=(1, 2)))
    records, out = ask(image, item((1, 2, 4), leader_epoch=0))
    assert out.partitions[0].error == ErrorCode.NONE
    p = apply(image, records).partition("t", 0)
    assert (p.replicas, p.adding_replicas, p.isr, p.leader) == ((4, 5, 1, 2), (4, 5), (1, 2, 4), 1)


def test_random_requests_never_empty_the_isr_and_keep_the_leader_in_it() -> None:
    rng = random.Random(7)
    for _ in range(300):
        ids = (1, 2, 3, 4)
        image = build(
            brokers(*ids, fenced=rng.sample(ids, rng.randint(0, 2))),
            topic(),
            partition(0, (1, 2, 3), rng.choice([(1,), (1, 2), (1, 2, 3), (1, 3)]), leader=1),
        )
        new_isr = tuple(rng.sample(ids, rng.randint(0, 4)))
        records, out = ask(image, item(new_isr, leader_epoch=0))
        p = apply(image, records).partition("t", 0)
        assert p.isr and p.leader in p.isr
        assert (records != []) == (out.partitions[0].error == ErrorCode.NONE and new_isr != image.partition("t", 0).isr)
