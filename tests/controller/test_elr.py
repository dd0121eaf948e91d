"""Eligible leader replicas (KIP-966) and unclean-shutdown handling in the controller's decisions.

The scenario these guard: every in-sync replica but the leader falls behind, the ISR shrinks to the leader alone
(below min.insync.replicas, so the high watermark stops), the leader dies, and later returns with a wiped or
short log. It must never be elected over replicas that hold every committed record.
"""

from __future__ import annotations

from controller_images import apply, brokers, build, epoch_of, partition, topic

from odradek.client.common.metadata_image import NO_LEADER, MetadataImage, PartitionRegistration
from odradek.client.errors import ErrorCode
from odradek.controller.brokers import BrokerControl
from odradek.controller.elections import (
    changes_after_broker_loss,
    changes_after_unclean_shutdown,
    elect_leaders,
    eligible_leaders,
)
from odradek.controller.isr import IsrItem, alter_partition
from odradek.proto import metadata_pb2 as md

MIN_ISR_2 = {"t": 2}.get


def min_isr(name: str) -> int:
    return MIN_ISR_2(name, 1)


def records(changes: list[md.PartitionChangeRecord]) -> list[md.MetadataRecord]:
    return [md.MetadataRecord(partition_change=c) for c in changes]


def lifecycle(image: MetadataImage) -> BrokerControl:
    life = BrokerControl("c", session_timeout_ms=1000, unclean_allowed=lambda _t: False, min_isr=min_isr)
    life.became_active(image, 0)
    return life


def shrunk_to_leader() -> MetadataImage:
    """t-0 on 1, 2, 3 (min ISR 2), the leader 1 has shrunk the ISR to itself."""
    image = build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), leader=1))
    recs, out = alter_partition(image, 1, epoch_of(1), [IsrItem("t", 0, 0, 0, (1,))], min_isr)
    assert out.partitions[0].error == ErrorCode.NONE
    return apply(image, recs)


def register(life: BrokerControl, image: MetadataImage, broker: int, previous_epoch: int, at: int):
    return life.register(
        image,
        broker_id=broker,
        cluster_id="c",
        incarnation_id=bytes([broker + 100]) * 16,
        host="h",
        port=1,
        rack="",
        log_dirs=["/d"],
        next_offset=at,
        now_ms=5000,
        previous_broker_epoch=previous_epoch,
    )


def test_a_shrink_below_min_isr_puts_the_removed_replicas_in_the_elr() -> None:
    p = shrunk_to_leader().partition("t", 0)
    assert p.isr == (1,) and p.eligible_leader_replicas == (2, 3)


def test_a_shrink_that_keeps_min_isr_adds_nobody_and_an_isr_back_at_the_minimum_clears_the_elr() -> None:
    image = build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), leader=1))
    recs, _ = alter_partition(image, 1, epoch_of(1), [IsrItem("t", 0, 0, 0, (1, 2))], min_isr)
    p = apply(image, recs).partition("t", 0)
    assert p.isr == (1, 2) and p.eligible_leader_replicas == ()

    image = shrunk_to_leader()
    recs, _ = alter_partition(image, 1, epoch_of(1), [IsrItem("t", 0, 0, 1, (1, 3))], min_isr)
    p = apply(image, recs).partition("t", 0)
    assert p.isr == (1, 3) and p.eligible_leader_replicas == ()


def test_the_leader_lost_below_min_isr_is_replaced_by_an_elr_member_holding_everything_committed() -> None:
    image = shrunk_to_leader()
    image = apply(image, records(changes_after_broker_loss(image, {1}, lambda _t: False, min_isr)))
    p = image.partition("t", 0)
    assert p.leader == 2 and p.isr == (2,)
    assert p.eligible_leader_replicas == (1, 3)  # the old leader held everything committed too


def test_the_isr_may_become_empty_and_its_last_member_stays_electable() -> None:
    image = build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), (1,), leader=1))
    image = apply(image, records(changes_after_broker_loss(image, {1, 2, 3}, lambda _t: False, min_isr)))
    p = image.partition("t", 0)
    assert (p.leader, p.isr, p.eligible_leader_replicas) == (NO_LEADER, (), (1,))


def test_a_wiped_last_isr_member_is_not_elected_and_the_elr_keeps_the_committed_data() -> None:
    """Defect scenario: the ISR shrank to the leader, the leader lost power, returned with an empty log."""
    image = shrunk_to_leader()
    life = lifecycle(image)
    for b in (2, 3):
        life.heartbeat(
            image, broker_id=b, broker_epoch=epoch_of(b), metadata_offset=10**6, want_fence=False,
            want_shutdown=False, now_ms=1500,
        )  # fmt: skip
    image = apply(image, life.expire_sessions(image, 2000, next_offset=100))
    p = image.partition("t", 0)
    assert p.leader == 2 and 1 in p.eligible_leader_replicas  # an ELR member took over at once

    d = register(life, image, 1, previous_epoch=-1, at=200)  # unclean: no clean-shutdown epoch on disk
    image = apply(image, d.records)
    p = image.partition("t", 0)
    assert p.leader == 2 and 1 not in p.isr and 1 not in p.eligible_leader_replicas
    d = life.heartbeat(
        image, broker_id=1, broker_epoch=200, metadata_offset=200, want_fence=False, want_shutdown=False,
        now_ms=2100,
    )  # fmt: skip
    image = apply(image, d.records)
    assert image.partition("t", 0).leader == 2


def test_an_offline_partition_waits_for_its_elr_and_never_elects_an_unclean_returner() -> None:
    image = build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), (1,), leader=1))
    image = apply(image, records(changes_after_broker_loss(image, {1, 2, 3}, lambda _t: False, min_isr)))
    image = apply(image, [md.MetadataRecord(fence_broker=md.FenceBrokerRecord(broker_id=b, broker_epoch=epoch_of(b)))
                          for b in (1, 2, 3)])  # fmt: skip
    life = lifecycle(image)

    d = register(life, image, 1, previous_epoch=-1, at=300)  # the ELR's only member restarts uncleanly
    image = apply(image, d.records)
    p = image.partition("t", 0)
    assert (p.isr, p.eligible_leader_replicas, p.last_known_elr) == ((), (), (1,))
    for b, at in ((1, 300), (2, 310), (3, 320)):
        if b != 1:
            image = apply(image, register(life, image, b, previous_epoch=epoch_of(b), at=at).records)
        d = life.heartbeat(
            image, broker_id=b, broker_epoch=at, metadata_offset=10**6, want_fence=False, want_shutdown=False,
            now_ms=5000,
        )  # fmt: skip
        image = apply(image, d.records)
    assert image.partition("t", 0).leader == NO_LEADER  # offline: nobody is known to hold the committed data

    recs, [outcome] = elect_leaders(image, [("t", 0)], unclean=True, min_isr=min_isr)
    assert outcome.error == ErrorCode.NONE and outcome.leader == 1  # the operator's choice: last known ELR first
    p = apply(image, recs).partition("t", 0)
    assert (p.leader, p.isr, p.eligible_leader_replicas, p.last_known_elr) == (1, (1,), (), ())


def test_a_clean_restart_keeps_the_broker_eligible() -> None:
    image = build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), (1,), leader=1))
    image = apply(image, records(changes_after_broker_loss(image, {1}, lambda _t: False, min_isr)))
    image = apply(image, [md.MetadataRecord(fence_broker=md.FenceBrokerRecord(broker_id=1, broker_epoch=10))])
    life = lifecycle(image)
    image = apply(image, register(life, image, 1, previous_epoch=epoch_of(1), at=400).records)
    assert image.partition("t", 0).eligible_leader_replicas == (1,)
    d = life.heartbeat(
        image, broker_id=1, broker_epoch=400, metadata_offset=400, want_fence=False, want_shutdown=False,
        now_ms=5000,
    )  # fmt: skip
    p = apply(image, d.records).partition("t", 0)
    assert (p.leader, p.isr, p.eligible_leader_replicas) == (1, (1,), ())


def test_unclean_shutdown_removes_a_leader_and_member_of_the_isr() -> None:
    image = build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), leader=1))
    image = apply(image, records(changes_after_unclean_shutdown(image, 1, min_isr)))
    p = image.partition("t", 0)
    assert p.leader == NO_LEADER and p.isr == (2, 3) and p.eligible_leader_replicas == ()


def test_eligible_leaders_stay_within_the_replicas() -> None:
    p = PartitionRegistration(b"t" * 16, 0, (1, 2, 3), (1, 2), 1, 0, 0, eligible_leader_replicas=(3,))
    assert eligible_leaders(p, (1,), (1, 2), 3) == (2,)  # 3 is no longer a replica
    assert eligible_leaders(p, (1,), (1, 2, 3), 3) == (2, 3)
    assert eligible_leaders(p, (1, 3), (1, 2, 3), 2) == ()


def test_unclean_leader_election_enable_elects_an_out_of_sync_replica_when_the_isr_is_gone() -> None:
    """The topic's (or the broker default's) unclean.leader.election.enable: with it an active out-of-sync replica
    takes over at once when the whole ISR is lost; without it the partition stays offline."""
    image = build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), (1,), leader=1))  # min ISR 1: no ELR kept
    for allowed, leader in ((False, NO_LEADER), (True, 2)):
        after = apply(image, records(changes_after_broker_loss(image, {1}, lambda _t, a=allowed: a)))
        assert after.partition("t", 0).leader == leader, allowed
