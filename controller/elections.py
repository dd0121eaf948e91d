"""Partition leader election and ISR changes decided by the controller, as metadata records.

Rules (Kafka's, DESIGN.md §4): a fenced or shutting-down broker leads nothing and leaves every ISR; a new leader
comes from the ISR among active brokers, in replica order (the first replica is the preferred leader); the ISR
never becomes empty: when the last in-sync replica goes away it stays as the ISR's only member, the partition
goes offline (leader -1), and it leads again when it returns. That "last replica standing" keeps every committed
record on a replica that may lead (the guarantee KIP-966's eligible leader replicas give). Only a topic with
``unclean.leader.election.enable=true`` may elect an out-of-sync replica, accepting data loss.

Operators move leadership with ElectLeaders (preferred: back to the first replica once it is in sync; unclean: a
leaderless partition takes any active replica), and the active controller periodically elects preferred leaders
where a broker leads too few of the partitions it prefers (``auto.leader.rebalance.enable``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from odradek.client.errors import ErrorCode
from odradek.controller.metadata.image import NO_LEADER, MetadataDelta, MetadataImage, PartitionState
from odradek.proto import metadata_pb2 as md


def partition_change(
    p: PartitionState,
    *,
    leader: int | None = None,
    isr: Iterable[int] | None = None,
    replicas: Iterable[int] | None = None,
    adding: Iterable[int] = (),
    removing: Iterable[int] = (),
) -> md.PartitionChangeRecord | None:
    """A PartitionChangeRecord for what differs, or None when nothing does.

    ``replicas`` sets the replica list together with ``adding``/``removing`` (a reassignment's state), since
    replaying a record with ``replicas_changed`` replaces all three.
    """
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
    if replicas is not None:
        target = (tuple(replicas), tuple(adding), tuple(removing))
        if target != (p.replicas, p.adding_replicas, p.removing_replicas):
            record.replicas.extend(target[0])
            record.adding_replicas.extend(target[1])
            record.removing_replicas.extend(target[2])
            record.replicas_changed = True
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
            record = partition_change(p, leader=leader, isr=isr)
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
            record = partition_change(p, leader=leader, isr=p.isr if leader in p.isr else (leader,))
            if record is not None:
                records.append(record)
    return records


def preferred_leader_change(image: MetadataImage, p: PartitionState) -> md.PartitionChangeRecord | None:
    """Move leadership to the preferred (first) replica if it is active and in sync; None if not possible."""
    return _preferred(p, _active(image))[2]


# -- ElectLeaders and the automatic preferred-leader rebalance ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionOutcome:
    """One partition's answer to ElectLeaders or AlterPartitionReassignments (its leader after the change)."""

    topic: str
    partition: int
    error: int = ErrorCode.NONE
    message: str = ""
    leader: int = NO_LEADER


class ChangeBatch:
    """The partition changes of one decision, replayed as they are added so later items see earlier ones."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.records: list[md.MetadataRecord] = []
        self._delta = MetadataDelta(image)

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        topic_id = self.image.topic_ids.get(topic)
        return None if topic_id is None else self._delta.current_partition(topic_id, partition)

    def add(self, change: md.PartitionChangeRecord) -> PartitionState:
        """Append ``change``; return the partition as it is after it."""
        self.records.append(md.MetadataRecord(partition_change=change))
        self._delta.replay(self.records[-1])
        return self._delta.current_partition(change.topic_id, change.partition)


def unknown_partition(topic: str, partition: int) -> PartitionOutcome:
    return PartitionOutcome(
        topic, partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown partition {topic}-{partition}"
    )


Verdict = tuple[int, str, md.PartitionChangeRecord | None]


def _active(image: MetadataImage) -> set[int]:
    return {b.broker_id for b in image.active_brokers()}


def _preferred(p: PartitionState, active: set[int]) -> Verdict:
    preferred = p.replicas[0]
    if p.leader == preferred:
        return ErrorCode.ELECTION_NOT_NEEDED, f"the preferred leader {preferred} already leads", None
    if preferred not in active:
        return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, f"the preferred leader {preferred} is not active", None
    if preferred not in p.isr:
        return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, f"the preferred leader {preferred} is not in the ISR", None
    return ErrorCode.NONE, "", partition_change(p, leader=preferred)


def _unclean(p: PartitionState, active: set[int]) -> Verdict:
    """Kafka's UNCLEAN election: only for a leaderless partition; an in-sync replica if one is active."""
    if p.leader != NO_LEADER:
        return ErrorCode.ELECTION_NOT_NEEDED, f"the partition has a leader ({p.leader})", None
    leader = choose_leader(p, active, p.isr, unclean=True)
    if leader == NO_LEADER:
        return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "no replica is an active broker", None
    return ErrorCode.NONE, "", partition_change(p, leader=leader, isr=p.isr if leader in p.isr else (leader,))


def _every_partition(image: MetadataImage) -> list[tuple[str, int]]:
    return [(name, index) for name in sorted(image.topic_ids) for index in sorted(image.topic(name).partitions)]


def elect_leaders(
    image: MetadataImage, partitions: Iterable[tuple[str, int]] | None, *, unclean: bool
) -> tuple[list[md.MetadataRecord], list[PartitionOutcome]]:
    """ElectLeaders (KIP-460) as one batch: preferred elections, or unclean ones for leaderless partitions.

    ``partitions`` None means every partition; as in Kafka, that answer leaves out the partitions whose election
    was not needed, so it lists only what changed or could not.
    """
    batch = ChangeBatch(image)
    active = _active(image)
    decide = _unclean if unclean else _preferred
    outcomes = []
    for topic, index in _every_partition(image) if partitions is None else partitions:
        p = batch.partition(topic, index)
        if p is None:
            outcomes.append(unknown_partition(topic, index))
            continue
        error, message, change = decide(p, active)
        if change is not None:
            p = batch.add(change)
        if partitions is None and error == ErrorCode.ELECTION_NOT_NEEDED:
            continue
        outcomes.append(PartitionOutcome(topic, index, error, message, p.leader))
    return batch.records, outcomes


def imbalanced_brokers(image: MetadataImage, percentage: int) -> dict[int, list[PartitionState]]:
    """Kafka's leader-imbalance rule: for each broker, the partitions it prefers (first replica) but does not
    lead, kept only where they exceed ``percentage`` percent of all the partitions it prefers."""
    preferred: dict[int, list[PartitionState]] = defaultdict(list)
    for name in sorted(image.topic_ids):
        topic = image.topic(name)
        for index in sorted(topic.partitions):
            p = topic.partitions[index]
            preferred[p.replicas[0]].append(p)
    imbalanced = {}
    for broker, parts in sorted(preferred.items()):
        not_led = [p for p in parts if p.leader != broker]
        if len(not_led) * 100 > percentage * len(parts):
            imbalanced[broker] = not_led
    return imbalanced


def rebalance_leaders(image: MetadataImage, percentage: int) -> list[md.MetadataRecord]:
    """The automatic rebalance's batch: preferred elections on imbalanced brokers' partitions where possible.

    A partition being reassigned is left alone: its preferred leader is the target's first replica, which may
    not have caught up yet, and the reassignment's completion picks its leader anyway.
    """
    active = _active(image)
    records = []
    for parts in imbalanced_brokers(image, percentage).values():
        for p in parts:
            if p.adding_replicas or p.removing_replicas:
                continue
            change = _preferred(p, active)[2]
            if change is not None:
                records.append(md.MetadataRecord(partition_change=change))
    return records
