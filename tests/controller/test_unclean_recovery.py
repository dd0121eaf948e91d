"""Unclean recovery: when no replica is known to hold everything committed, elect the most complete log.

The scenario is KIP-966's balanced-recovery example: replicas 1, 2, 3 of t-0 (min ISR 2) stop one after another,
each uncleanly, so the ISR and the ELR empty out; the last known ELR keeps 2 and 3, whose logs held everything
committed before their stop. Once both are back the controller asks both and elects the longer log.
"""

from __future__ import annotations

from controller_images import TOPIC_ID, apply, brokers, build, epoch_of, partition, topic

from odradek.client.common.metadata_image import NO_LEADER, MetadataImage
from odradek.client.errors import ErrorCode
from odradek.controller.elections import changes_after_broker_loss, changes_after_unclean_shutdown, elect_leaders
from odradek.controller.unclean_recovery import (
    BALANCED,
    MANUAL,
    Inspection,
    ReplicaLog,
    balanced_inspections,
    most_complete,
    operator_choice,
    operator_inspection,
    recovery,
)
from odradek.proto import metadata_pb2 as md


def min_isr(_topic: str) -> int:
    return 2


def never(_topic: str) -> bool:
    return False


def balanced(_topic: str) -> str:
    return BALANCED


def fence(image: MetadataImage, broker: int) -> MetadataImage:
    """The controller fences ``broker`` (its session expired) and moves what it led, as expire_sessions does."""
    epoch = image.brokers[broker].epoch
    fenced = [md.MetadataRecord(fence_broker=md.FenceBrokerRecord(broker_id=broker, broker_epoch=epoch))]
    moved = changes_after_broker_loss(image, {broker}, never, min_isr)
    return apply(image, fenced + [md.MetadataRecord(partition_change=c) for c in moved])


def restart_unclean(image: MetadataImage, broker: int, epoch: int, unfence: bool = True) -> MetadataImage:
    """``broker`` registers again after an unclean stop (new epoch), leaving every ISR and ELR, then is unfenced."""
    register = md.RegisterBrokerRecord(
        broker_id=broker,
        incarnation_id=bytes([broker + 50]) * 16,
        broker_epoch=epoch,
        endpoint=md.BrokerEndpoint(host="127.0.0.1", port=9000 + broker),
        fenced=True,
    )
    image = apply(image, [md.MetadataRecord(register_broker=register)])
    cleared = changes_after_unclean_shutdown(image, broker, min_isr)
    records = [md.MetadataRecord(partition_change=c) for c in cleared]
    if unfence:
        records.append(md.MetadataRecord(unfence_broker=md.UnfenceBrokerRecord(broker_id=broker, broker_epoch=epoch)))
    return apply(image, records)


def power_outage() -> MetadataImage:
    """All three stopped uncleanly and came back: nothing is known to hold everything committed."""
    image = build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), leader=1))
    for b in (1, 2, 3):
        image = fence(image, b)
    p = image.partition("t", 0)
    assert (p.leader, p.isr, p.eligible_leader_replicas) == (NO_LEADER, (), (2, 3))
    for b, epoch in ((1, 101), (2, 102), (3, 103)):
        image = restart_unclean(image, b, epoch)
    return image


def test_unclean_stops_of_elr_members_leave_them_in_the_last_known_elr() -> None:
    p = power_outage().partition("t", 0)
    assert (p.leader, p.isr, p.eligible_leader_replicas, p.last_known_elr) == (NO_LEADER, (), (), (2, 3))


def test_a_quick_restart_of_the_last_isr_member_keeps_it_a_recovery_candidate() -> None:
    """Restarted before its session expired, the last ISR member leaves the ISR without passing through the ELR."""
    image = build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), leader=1))
    image = fence(fence(image, 1), 2)  # ISR [3], ELR [2]
    image = restart_unclean(image, 3, 103)
    p = image.partition("t", 0)
    assert (p.isr, p.eligible_leader_replicas, p.last_known_elr) == ((), (2,), (3,))
    image = restart_unclean(image, 2, 102)
    assert image.partition("t", 0).last_known_elr == (2, 3)


def test_recovery_waits_until_every_last_known_elr_member_is_active() -> None:
    image = build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), leader=1))
    for b in (1, 2, 3):
        image = fence(image, b)
    image = restart_unclean(image, 2, 102)
    image = restart_unclean(image, 3, 103, unfence=False)
    assert balanced_inspections(image, balanced, never) == []  # 3 may hold the only complete log
    image = apply(image, [md.MetadataRecord(unfence_broker=md.UnfenceBrokerRecord(broker_id=3, broker_epoch=103))])
    p = image.partition("t", 0)
    assert balanced_inspections(image, balanced, never) == [Inspection("t", TOPIC_ID, 0, p.partition_epoch, (2, 3))]


def test_the_most_complete_log_is_elected_and_becomes_the_isr() -> None:
    image = power_outage()
    [inspection] = balanced_inspections(image, balanced, never)
    answers = {(TOPIC_ID, 0): {2: ReplicaLog(2, 102, 0, 12), 3: ReplicaLog(3, 103, 0, 10)}}
    decided = recovery(image, inspection, answers, 2)
    assert decided is not None and decided.chosen.broker_id == 2
    after = apply(image, [md.MetadataRecord(partition_change=decided.record)])
    p = after.partition("t", 0)
    assert (p.leader, p.isr, p.eligible_leader_replicas) == (2, (2,), ())
    assert p.leader_epoch > image.partition("t", 0).leader_epoch
    assert "elected 2" in decided.describe()
    assert balanced_inspections(after, balanced, never) == []


def test_the_last_leader_epoch_counts_before_the_end_offset_and_ties_go_by_replica_order() -> None:
    logs = {2: ReplicaLog(2, 1, 3, 50), 3: ReplicaLog(3, 1, 4, 20)}
    assert most_complete((2, 3), logs) == logs[3]
    tied = {2: ReplicaLog(2, 1, 4, 20), 3: ReplicaLog(3, 1, 4, 20)}
    assert most_complete((3, 2), tied) == tied[3]
    assert most_complete((2, 3), {2: logs[2]}) is None  # 3 did not answer: it may be the complete one
    assert most_complete((2, 3), {2: logs[2]}, every=False) == logs[2]


def test_no_election_on_stale_answers() -> None:
    image = power_outage()
    [inspection] = balanced_inspections(image, balanced, never)
    # 2 answered, then restarted (uncleanly, epoch 202): what it reported may be gone.
    answers = {(TOPIC_ID, 0): {2: ReplicaLog(2, 102, 0, 12), 3: ReplicaLog(3, 103, 0, 10)}}
    restarted = restart_unclean(image, 2, 202)
    assert recovery(restarted, inspection, answers, 2) is None
    # Or the partition changed since it was inspected (an operator elected someone).
    moved = elect_leaders(image, [("t", 0)], unclean=True, min_isr=min_isr)[0]
    assert recovery(apply(image, moved), inspection, answers, 2) is None
    # Or an answer is missing.
    assert recovery(image, inspection, {(TOPIC_ID, 0): {2: ReplicaLog(2, 102, 0, 12)}}, 2) is None


def test_manual_topics_and_topics_allowing_unclean_elections_are_not_recovered_automatically() -> None:
    image = power_outage()
    assert balanced_inspections(image, lambda _t: MANUAL, never) == []
    assert balanced_inspections(image, balanced, lambda _t: True) == []


def test_an_operators_unclean_election_takes_the_longest_log_of_any_active_replica() -> None:
    image = power_outage()
    p = image.partition("t", 0)
    inspection = operator_inspection(image, "t", p)
    assert inspection is not None and inspection.replicas == (1, 2, 3)
    # 1 is not in the last known ELR but has the longest log; 3 did not answer.
    answers = {(TOPIC_ID, 0): {1: ReplicaLog(1, 101, 0, 30), 2: ReplicaLog(2, 102, 0, 12)}}
    done: list = []
    choice = operator_choice(image, [inspection], answers, min_isr, done)
    records, outcomes = elect_leaders(image, [("t", 0)], unclean=True, min_isr=min_isr, inspected=choice)
    assert [(o.error, o.leader) for o in outcomes] == [(ErrorCode.NONE, 1)]
    assert [r.chosen.broker_id for r in done] == [1]
    assert apply(image, records).partition("t", 0).isr == (1,)


def test_an_operators_unclean_election_without_answers_falls_back_to_the_last_known_elr() -> None:
    image = power_outage()
    inspection = operator_inspection(image, "t", image.partition("t", 0))
    assert inspection is not None
    choice = operator_choice(image, [inspection], {}, min_isr, [])
    _, outcomes = elect_leaders(image, [("t", 0)], unclean=True, min_isr=min_isr, inspected=choice)
    assert [(o.error, o.leader) for o in outcomes] == [(ErrorCode.NONE, 2)]


def test_a_partition_with_an_active_eligible_replica_needs_no_inspection() -> None:
    image = build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), leader=1))
    image = fence(fence(image, 1), 2)
    assert operator_inspection(image, "t", image.partition("t", 0)) is None
    assert epoch_of(3) == image.brokers[3].epoch
