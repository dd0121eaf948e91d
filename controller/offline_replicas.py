"""Replicas a broker reports offline (its log dir failed, or the log is corrupt): what the controller changes.

A live broker may still lose some replicas: Kafka's log dir failure. It keeps heartbeating and names the replicas
it cannot serve in every heartbeat while any are offline. For each, the controller moves leadership to another
in-sync (or eligible) replica on an active broker and drops the broker from the ISR and the ELR (its copy cannot be
read, so it no longer holds the committed records), by the election rules of elections.py, only for these
partitions. The report is not stored in the metadata: every heartbeat
repeats it, so a new active controller acts on it at the broker's next heartbeat.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from odradek.client.common.metadata_image import MetadataDelta, MetadataImage
from odradek.controller.elections import MinIsr, elect, eligible_leaders, one_replica
from odradek.proto import metadata_pb2 as md

Replica = tuple[bytes, int]  # (topic id, partition)


def changes_for_offline_replicas(
    image: MetadataImage,
    broker_id: int,
    offline: Iterable[Replica],
    unclean_allowed: Callable[[str], bool],
    min_isr: MinIsr = one_replica,
) -> list[md.PartitionChangeRecord]:
    """One batch moving leadership, ISR and ELR membership of ``broker_id`` off its ``offline`` replicas; a
    partition whose only in-sync replica went offline waits for its ELR (or an unclean election) like any other."""
    active = {b.broker_id for b in image.active_brokers()} - {broker_id}
    records = []
    for topic_id, index in sorted(set(offline)):
        topic = image.topics.get(topic_id)
        if topic is None:
            continue
        p = topic.partitions.get(index)
        if p is None or broker_id not in (p.leader, *p.isr, *p.eligible_leader_replicas):
            continue
        floor = min_isr(topic.name)
        isr = tuple(r for r in p.isr if r != broker_id)
        elr = tuple(r for r in eligible_leaders(p, isr, p.replicas, floor) if r != broker_id)
        record = elect(p, active, isr, unclean_allowed(topic.name), floor, elr)
        if record is not None:
            records.append(record)
    return records


def offline_replica_records(
    image: MetadataImage,
    pending: list[md.MetadataRecord],
    broker_id: int,
    offline: Iterable[Replica],
    unclean_allowed: Callable[[str], bool],
    min_isr: MinIsr = one_replica,
) -> list[md.MetadataRecord]:
    """The records to append after ``pending`` (the heartbeat's own, e.g. an unfence and the elections it
    allows), decided on the image as it will be once ``pending`` is applied."""
    after = image
    if pending:
        delta = MetadataDelta(image)
        delta.replay_all(pending)
        after = delta.image()
    changes = changes_for_offline_replicas(after, broker_id, offline, unclean_allowed, min_isr)
    return [md.MetadataRecord(partition_change=c) for c in changes]
