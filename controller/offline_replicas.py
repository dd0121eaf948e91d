"""Replicas a broker reports offline (its log dir failed, or the log is corrupt): what the controller changes.

A live broker may still lose some replicas: Kafka's log dir failure. It keeps heartbeating and names the replicas
it cannot serve in every heartbeat while any are offline. For each, the controller moves leadership to another
in-sync replica on an active broker and drops the broker from the ISR, by the same election rules as for a lost
broker (elections.py), only for these partitions. The report is not stored in the metadata: every heartbeat
repeats it, so a new active controller acts on it at the broker's next heartbeat.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from odradek.controller.elections import choose_leader, partition_change
from odradek.controller.metadata.image import NO_LEADER, MetadataDelta, MetadataImage
from odradek.proto import metadata_pb2 as md

Replica = tuple[bytes, int]  # (topic id, partition)


def changes_for_offline_replicas(
    image: MetadataImage, broker_id: int, offline: Iterable[Replica], unclean_allowed: Callable[[str], bool]
) -> list[md.PartitionChangeRecord]:
    """One batch moving leadership and ISR membership of ``broker_id`` off its ``offline`` replicas.

    As for a lost broker, the ISR never becomes empty: an offline replica that is the last in sync stays its only
    member and the partition goes leaderless rather than electing a replica that may miss committed records.
    """
    active = {b.broker_id for b in image.active_brokers()} - {broker_id}
    records = []
    for topic_id, index in sorted(set(offline)):
        topic = image.topics.get(topic_id)
        p = None if topic is None else topic.partitions.get(index)
        if p is None or (p.leader != broker_id and broker_id not in p.isr):
            continue
        isr = tuple(r for r in p.isr if r != broker_id) or p.isr
        leader = p.leader
        if leader == broker_id:
            leader = choose_leader(p, active, isr, unclean_allowed(topic.name))
            if leader != NO_LEADER and leader not in isr:  # unclean: the new leader is the whole ISR
                isr = (leader,)
        record = partition_change(p, leader=leader, isr=isr)
        if record is not None:
            records.append(record)
    return records


def offline_replica_records(
    image: MetadataImage,
    pending: list[md.MetadataRecord],
    broker_id: int,
    offline: Iterable[Replica],
    unclean_allowed: Callable[[str], bool],
) -> list[md.MetadataRecord]:
    """The records to append after ``pending`` (the heartbeat's own, e.g. an unfence and the elections it
    allows), decided on the image as it will be once ``pending`` is applied."""
    after = image
    if pending:
        delta = MetadataDelta(image)
        delta.replay_all(pending)
        after = delta.image()
    changes = changes_for_offline_replicas(after, broker_id, offline, unclean_allowed)
    return [md.MetadataRecord(partition_change=c) for c in changes]
