"""Partition leader election and ISR changes decided by the controller, as metadata records.

Rules (Kafka's, DESIGN.md §4): a fenced or shutting-down broker leads nothing and leaves every ISR; a new leader
comes from the ISR among active brokers, in replica order (the first replica is the preferred leader); the ISR
never becomes empty: when the last in-sync replica goes away it stays as the ISR's only member, the partition
goes offline (leader -1), and it leads again when it returns. That "last replica standing" keeps every committed
record on a replica that may lead (the guarantee KIP-966's eligible leader replicas give). Only a topic with
``unclean.leader.election.enable=true`` may elect an out-of-sync replica, accepting data loss.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from odradek.controller.metadata.image import NO_LEADER, MetadataImage, PartitionState
from odradek.proto import metadata_pb2 as md


def _change(
    p: PartitionState, leader: int | None = None, isr: Iterable[int] | None = None
) -> md.PartitionChangeRecord | None:
    """A PartitionChangeRecord for what differs, or None when nothing does."""
    record = md.PartitionChangeRecord(topic_id=p.topic_id, partition=p.partition)
    changed = False
    if leader is not None and leader != p.leader:
        record.leader = leader
        changed = True
    if isr is not None:
        new_isr = tuple(isr)
        if new_isr != p.isr:
            record.isr.extend(new_isr)
            record.isr_changed = True
            changed = True
    return record if changed else None


def choose_leader(p: PartitionState, active: set[int], isr: tuple[int, ...], unclean: bool) -> int:
    """First replica (in replica order) that is active and in the ISR; out of ISR only when unclean is allowed."""
    for replica in p.replicas:
        if replica in active and replica in isr:
            return replica
    if unclean:
        for replica in p.replicas:
            if replica in active:
                return replica
    return NO_LEADER


def changes_after_broker_loss(
    image: MetadataImage, gone: set[int], unclean_allowed: Callable[[str], bool]
) -> list[md.PartitionChangeRecord]:
    """One batch of changes moving leadership and ISR membership off the brokers in ``gone``."""
    active = {b.broker_id for b in image.active_brokers()} - gone
    records = []
    for topic in image.topics.values():
        unclean = unclean_allowed(topic.name)
        for p in topic.partitions.values():
            if p.leader not in gone and not gone.intersection(p.isr):
                continue
            isr = tuple(r for r in p.isr if r not in gone) or p.isr
            leader = p.leader
            if leader in gone or leader == NO_LEADER:
                leader = choose_leader(p, active, isr, unclean)
                if leader != NO_LEADER and leader not in isr:  # unclean: the new leader is the whole ISR
                    isr = (leader,)
            record = _change(p, leader=leader, isr=isr)
            if record is not None:
                records.append(record)
    return records


def changes_for_offline_partitions(
    image: MetadataImage, unclean_allowed: Callable[[str], bool]
) -> list[md.PartitionChangeRecord]:
    """Elect leaders for leaderless partitions whose ISR (or, if allowed, any replica) has an active broker."""
    active = {b.broker_id for b in image.active_brokers()}
    records = []
    for topic in image.topics.values():
        unclean = unclean_allowed(topic.name)
        for p in topic.partitions.values():
            if p.leader != NO_LEADER:
                continue
            leader = choose_leader(p, active, p.isr, unclean)
            if leader == NO_LEADER:
                continue
            record = _change(p, leader=leader, isr=p.isr if leader in p.isr else (leader,))
            if record is not None:
                records.append(record)
    return records


def preferred_leader_change(image: MetadataImage, p: PartitionState) -> md.PartitionChangeRecord | None:
    """Move leadership to the preferred (first) replica if it is active and in sync; None if not possible."""
    preferred = p.replicas[0]
    active = {b.broker_id for b in image.active_brokers()}
    if preferred == p.leader or preferred not in active or preferred not in p.isr:
        return None
    return _change(p, leader=preferred)
