"""Replicas a live broker reports offline (a failed log dir): leadership and ISR membership leave them."""

from __future__ import annotations

from controller_images import TOPIC_ID, apply, brokers, build, changes, epoch_of, partition, topic

from odradek.client.common.metadata_image import NO_LEADER
from odradek.controller.brokers import BrokerControl
from odradek.controller.offline_replicas import changes_for_offline_replicas
from odradek.proto import metadata_pb2 as md

CLEAN = lambda _topic: False  # noqa: E731


def test_leadership_moves_off_an_offline_replica_which_leaves_the_isr() -> None:
    image = build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3)), partition(1, (2, 1, 3)))
    (change,) = changes_for_offline_replicas(image, 1, [(TOPIC_ID, 0)], CLEAN)
    after = apply(image, [build_change(change)]).partition("t", 0)
    assert after.leader == 2
    assert after.isr == (2, 3)
    assert after.leader_epoch == 1  # a new leader epoch: the old leader's writes are fenced
    assert image.partition("t", 1) == apply(image, [build_change(change)]).partition("t", 1)  # not reported


def test_an_offline_follower_only_leaves_the_isr() -> None:
    image = build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3)))
    (change,) = changes_for_offline_replicas(image, 3, [(TOPIC_ID, 0)], CLEAN)
    after = apply(image, [build_change(change)]).partition("t", 0)
    assert (after.leader, after.isr, after.leader_epoch) == (1, (1, 2), 0)


def test_an_offline_last_in_sync_replica_leaves_isr_and_elr_and_the_partition_goes_leaderless() -> None:
    image = build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), isr=(1,)))
    (change,) = changes_for_offline_replicas(image, 1, [(TOPIC_ID, 0)], CLEAN)
    after = apply(image, [build_change(change)]).partition("t", 0)
    # No out-of-sync replica is elected (nothing committed lost), and the unreadable copy is not electable either.
    assert (after.leader, after.isr, after.eligible_leader_replicas) == (NO_LEADER, (), ())
    assert after.last_known_elr == (1,)


def test_nothing_to_do_once_applied_or_for_unknown_partitions() -> None:
    image = build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3), isr=(2, 3), leader=2))
    assert changes_for_offline_replicas(image, 1, [(TOPIC_ID, 0), (TOPIC_ID, 7), (b"x" * 16, 0)], CLEAN) == []


def test_the_heartbeat_reporting_offline_replicas_moves_them() -> None:
    image = build(brokers(1, 2, 3), topic(), partition(0, (1, 2, 3)), partition(1, (2, 1, 3)))
    life = BrokerControl("c", 9000, CLEAN)
    life.became_active(image, 0)
    beat = dict(broker_id=1, broker_epoch=epoch_of(1), metadata_offset=10_000, want_fence=False, want_shutdown=False)
    assert life.heartbeat(image, now_ms=1, **beat).records == []
    d = life.heartbeat(image, now_ms=2, offline_replicas=[(TOPIC_ID, 0), (TOPIC_ID, 1)], **beat)
    after = apply(image, d.records)
    assert [(p.partition, list(p.isr)) for p in changes(d.records)] == [(0, [2, 3]), (1, [2, 3])]
    assert after.partition("t", 0).leader == 2 and after.partition("t", 1).leader == 2
    assert life.heartbeat(after, now_ms=3, offline_replicas=[(TOPIC_ID, 0), (TOPIC_ID, 1)], **beat).records == []


def build_change(change: md.PartitionChangeRecord) -> md.MetadataRecord:
    return md.MetadataRecord(partition_change=change)
