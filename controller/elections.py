"""Partition leader election and ISR changes decided by the controller, as metadata records.

Rules (Kafka's with KIP-966's eligible leader replicas): a fenced or shutting-down broker leads nothing and leaves
every ISR, which may shrink below ``min.insync.replicas`` and even become empty. While the ISR is below that
minimum the leader's high watermark stands still, so every replica removed from the ISR meanwhile (the last leader
included) still holds everything committed: it joins the eligible leader replicas (ELR) and stays electable. An ISR
back at the minimum clears the ELR (the high watermark moves again without them). A new leader comes from the ISR
among active brokers, in replica order (the first replica is the preferred leader), else from the ELR; a leader
elected from the ELR becomes the whole ISR. A broker whose last stop was unclean (it may have lost unflushed
records, or its disk was replaced) leaves the ISR and the ELR when it registers, before it could lead. A
partition with neither stays offline: only a topic with ``unclean.leader.election.enable=true``, or an operator's
unclean election, then elects an out-of-sync replica, accepting data loss (preferring the last known ELR, whose
logs held everything committed before their unclean stop).

Operators move leadership with ElectLeaders (preferred: back to the first replica once it is in sync; unclean: a
leaderless partition takes any active replica), and the active controller periodically elects preferred leaders
where a broker leads too few of the partitions it prefers (``auto.leader.rebalance.enable``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from odradek.client.common.metadata_image import NO_LEADER, MetadataDelta, MetadataImage, PartitionRegistration
from odradek.client.errors import ErrorCode
from odradek.proto import metadata_pb2 as md


def partition_change(
    p: PartitionRegistration,
    *,
    leader: int | None = None,
    isr: Iterable[int] | None = None,
    replicas: Iterable[int] | None = None,
    adding: Iterable[int] = (),
    removing: Iterable[int] = (),
    min_isr: int = 1,
    elr: Iterable[int] | None = None,
) -> md.PartitionChangeRecord | None:
    """A PartitionChangeRecord for what differs, or None when nothing does.

    ``replicas`` sets the replica list together with ``adding``/``removing`` (a reassignment's state), since
    replaying a record with ``replicas_changed`` replaces all three. The ELR follows the new ISR by the topic's
    ``min_isr`` (``eligible_leaders``) unless ``elr`` sets it.
    """
    record = md.PartitionChangeRecord(topic_id=p.topic_id, partition=p.partition)
    changed = False
    if leader is not None and leader != p.leader:
        record.leader = leader
        changed = True
    new_isr = p.isr if isr is None else tuple(isr)
    if new_isr != p.isr:
        record.isr.extend(new_isr)
        record.isr_changed = True
        changed = True
    new_replicas = p.replicas
    if replicas is not None:
        target = (tuple(replicas), tuple(adding), tuple(removing))
        new_replicas = target[0]
        if target != (p.replicas, p.adding_replicas, p.removing_replicas):
            record.replicas.extend(target[0])
            record.adding_replicas.extend(target[1])
            record.removing_replicas.extend(target[2])
            record.replicas_changed = True
            changed = True
    if elr is not None:
        new_elr = tuple(elr)
    elif isr is None and replicas is None:
        new_elr = p.eligible_leader_replicas
    else:
        new_elr = eligible_leaders(p, new_isr, new_replicas, min_isr)
    last_known = _last_known_elr(p, new_isr, new_elr, new_replicas, min_isr)
    if (new_elr, last_known) != (p.eligible_leader_replicas, p.last_known_elr):
        record.eligible_leader_replicas.extend(new_elr)  # replaying elr_changed sets both lists
        record.last_known_elr.extend(last_known)
        record.elr_changed = True
        changed = True
    return record if changed else None


def eligible_leaders(
    p: PartitionRegistration, new_isr: tuple[int, ...], replicas: tuple[int, ...], min_isr: int
) -> tuple[int, ...]:
    """KIP-966: the ELR after the ISR becomes ``new_isr``. While the ISR is below ``min_isr`` (capped at the replica
    count, as the leader caps it for its high watermark) the high watermark stands still, so replicas leaving the
    ISR keep everything committed and join the ELR; an ISR at the minimum clears it. Members rejoining the ISR, or
    no longer replicas, leave it."""
    if len(new_isr) >= min(min_isr, len(replicas)):
        return ()
    keep = set(p.eligible_leader_replicas) | (set(p.isr) - set(new_isr))
    return tuple(r for r in replicas if r in keep and r not in new_isr)


def _last_known_elr(
    p: PartitionRegistration,
    new_isr: tuple[int, ...],
    new_elr: tuple[int, ...],
    replicas: tuple[int, ...],
    min_isr: int,
) -> tuple[int, ...]:
    """KIP-966's last known ELR: replicas that held everything committed until an unclean stop took them out of the
    ISR or ELR while the ISR was below the minimum. They may have kept it all (a killed process loses nothing it
    wrote), so unclean recovery compares their logs. Cleared once the ISR is back at the minimum."""
    if len(new_isr) >= min(min_isr, len(replicas)):
        return ()
    held = set(new_isr) | set(new_elr)
    keep = set(p.last_known_elr) | set(p.isr) | set(p.eligible_leader_replicas)
    return tuple(r for r in replicas if r in keep and r not in held)


def choose_leader(
    p: PartitionRegistration, active: set[int], isr: tuple[int, ...], unclean: bool, elr: tuple[int, ...] | None = None
) -> int:
    """First replica (in replica order) that is active and in the ISR, else in the ELR (``p``'s unless given);
    any other active replica only when unclean is allowed, the last known ELR first."""
    eligible = p.eligible_leader_replicas if elr is None else elr
    for members in (isr, eligible, *((p.last_known_elr, p.replicas) if unclean else ())):
        for replica in p.replicas:
            if replica in active and replica in members:
                return replica
    return NO_LEADER


def elect(
    p: PartitionRegistration, active: set[int], isr: tuple[int, ...], unclean: bool, min_isr: int, elr: tuple[int, ...]
) -> md.PartitionChangeRecord | None:
    """The change giving ``p`` the ISR ``isr`` (and the ELR ``elr`` that goes with it) and, if its leader is gone,
    a new leader: an ELR member elected becomes the whole ISR; an unclean choice too, and it clears the ELR."""
    leader = p.leader
    if leader == NO_LEADER or leader not in active or leader not in isr:
        leader = choose_leader(p, active, isr, unclean, elr)
        if leader != NO_LEADER and leader not in isr:
            isr = (leader,)
            elr = eligible_leaders(p, isr, p.replicas, min_isr) if leader in elr else ()
    return partition_change(p, leader=leader, isr=isr, min_isr=min_isr, elr=elr)


MinIsr = Callable[[str], int]


def one_replica(_topic: str) -> int:
    """The default ``min.insync.replicas`` of these decisions (the topic config's default)."""
    return 1


def changes_after_broker_loss(
    image: MetadataImage, gone: set[int], unclean_allowed: Callable[[str], bool], min_isr: MinIsr = one_replica
) -> list[md.PartitionChangeRecord]:
    """One batch of changes moving leadership and ISR membership off the brokers in ``gone`` (which stay in, or
    join, the ELR where the ISR is below the minimum: they stopped holding everything committed)."""
    active = {b.broker_id for b in image.active_brokers()} - gone
    records = []
    for topic in image.topics.values():
        unclean, floor = unclean_allowed(topic.name), min_isr(topic.name)
        for p in topic.partitions.values():
            if p.leader not in gone and not gone.intersection(p.isr):
                continue
            isr = tuple(r for r in p.isr if r not in gone)
            record = elect(p, active, isr, unclean, floor, eligible_leaders(p, isr, p.replicas, floor))
            if record is not None:
                records.append(record)
    return records


def changes_after_unclean_shutdown(
    image: MetadataImage, broker_id: int, min_isr: MinIsr = one_replica
) -> list[md.PartitionChangeRecord]:
    """A broker whose last stop was unclean (or whose log dir is new) may miss records it acknowledged: it leaves
    every ISR and ELR before it can lead (it rejoins the ISR by catching up from a leader)."""
    records = []
    for topic in image.topics.values():
        floor = min_isr(topic.name)
        for p in topic.partitions.values():
            if broker_id not in p.isr and broker_id not in p.eligible_leader_replicas:
                continue
            isr = tuple(r for r in p.isr if r != broker_id)
            elr = tuple(r for r in eligible_leaders(p, isr, p.replicas, floor) if r != broker_id)
            leader = NO_LEADER if p.leader == broker_id else p.leader
            record = partition_change(p, leader=leader, isr=isr, min_isr=floor, elr=elr)
            if record is not None:
                records.append(record)
    return records


def changes_for_offline_partitions(
    image: MetadataImage, unclean_allowed: Callable[[str], bool], min_isr: MinIsr = one_replica
) -> list[md.PartitionChangeRecord]:
    """Elect leaders for leaderless partitions whose ISR or ELR (or, if allowed, any replica) has an active broker."""
    active = {b.broker_id for b in image.active_brokers()}
    records = []
    for topic in image.topics.values():
        unclean, floor = unclean_allowed(topic.name), min_isr(topic.name)
        for p in topic.partitions.values():
            if p.leader != NO_LEADER or choose_leader(p, active, p.isr, unclean) == NO_LEADER:
                continue
            record = elect(p, active, p.isr, unclean, floor, p.eligible_leader_replicas)
            if record is not None:
                records.append(record)
    return records


def preferred_leader_change(image: MetadataImage, p: PartitionRegistration) -> md.PartitionChangeRecord | None:
    """Move leadership to the preferred (first) replica if it is active and in sync; None if not possible."""
    return _preferred(p, _active(image))[2]


# -- ElectLeaders and the automatic preferred-leader rebalance ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionOutcome:
    """One partition's answer to ElectLeaders or AlterPartitionReassignments (its leader after the change)."""

    topic: str
    partition: int
    error: ErrorCode.ValueType = ErrorCode.NONE
    message: str = ""
    leader: int = NO_LEADER


class ChangeBatch:
    """The partition changes of one decision, replayed as they are added so later items see earlier ones."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.records: list[md.MetadataRecord] = []
        self._delta = MetadataDelta(image)

    def partition(self, topic: str, partition: int) -> PartitionRegistration | None:
        topic_id = self.image.topic_ids.get(topic)
        return None if topic_id is None else self._delta.current_partition(topic_id, partition)

    def add(self, change: md.PartitionChangeRecord) -> PartitionRegistration:
        """Append ``change``; return the partition as it is after it."""
        self.records.append(md.MetadataRecord(partition_change=change))
        self._delta.replay(self.records[-1])
        p = self._delta.current_partition(change.topic_id, change.partition)
        assert p is not None  # replay refuses a change to an unknown partition
        return p


def unknown_partition(topic: str, partition: int) -> PartitionOutcome:
    return PartitionOutcome(
        topic, partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown partition {topic}-{partition}"
    )


Verdict = tuple[ErrorCode.ValueType, str, md.PartitionChangeRecord | None]


def _active(image: MetadataImage) -> set[int]:
    return {b.broker_id for b in image.active_brokers()}


def _preferred(p: PartitionRegistration, active: set[int]) -> Verdict:
    preferred = p.replicas[0]
    if p.leader == preferred:
        return ErrorCode.ELECTION_NOT_NEEDED, f"the preferred leader {preferred} already leads", None
    if preferred not in active:
        return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, f"the preferred leader {preferred} is not active", None
    if preferred not in p.isr:
        return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, f"the preferred leader {preferred} is not in the ISR", None
    return ErrorCode.NONE, "", partition_change(p, leader=preferred)


UncleanChoice = Callable[[str, PartitionRegistration], md.PartitionChangeRecord | None]


def no_log_inspection(_topic: str, _p: PartitionRegistration) -> md.PartitionChangeRecord | None:
    return None


def _unclean(topic: str, p: PartitionRegistration, active: set[int], min_isr: int, inspected: UncleanChoice) -> Verdict:
    """Kafka's UNCLEAN election: only for a leaderless partition; an in-sync or eligible replica if one is active,
    else the most complete log the controller found (``inspected``), else the last known ELR (their logs held
    everything committed before their unclean stop), else any."""
    if p.leader != NO_LEADER:
        return ErrorCode.ELECTION_NOT_NEEDED, f"the partition has a leader ({p.leader})", None
    if choose_leader(p, active, p.isr, unclean=False) == NO_LEADER:
        change = inspected(topic, p)
        if change is not None:
            return ErrorCode.NONE, "", change
    if choose_leader(p, active, p.isr, unclean=True) == NO_LEADER:
        return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "no replica is an active broker", None
    return ErrorCode.NONE, "", elect(p, active, p.isr, True, min_isr, p.eligible_leader_replicas)


def every_partition(image: MetadataImage) -> list[tuple[str, int]]:
    return [(topic.name, index) for topic in image.sorted_topics() for index in sorted(topic.partitions)]


def elect_leaders(
    image: MetadataImage,
    partitions: Iterable[tuple[str, int]] | None,
    *,
    unclean: bool,
    min_isr: MinIsr = one_replica,
    inspected: UncleanChoice = no_log_inspection,
) -> tuple[list[md.MetadataRecord], list[PartitionOutcome]]:
    """ElectLeaders (KIP-460) as one batch: preferred elections, or unclean ones for leaderless partitions.

    ``partitions`` None means every partition; as in Kafka, that answer leaves out the partitions whose election
    was not needed, so it lists only what changed or could not.
    """
    batch = ChangeBatch(image)
    active = _active(image)
    outcomes = []
    for topic, index in every_partition(image) if partitions is None else partitions:
        p = batch.partition(topic, index)
        if p is None:
            outcomes.append(unknown_partition(topic, index))
            continue
        if unclean:
            error, message, change = _unclean(topic, p, active, min_isr(topic), inspected)
        else:
            error, message, change = _preferred(p, active)
        if change is not None:
            p = batch.add(change)
        if partitions is None and error == ErrorCode.ELECTION_NOT_NEEDED:
            continue
        outcomes.append(PartitionOutcome(topic, index, error, message, p.leader))
    return batch.records, outcomes


def imbalanced_brokers(image: MetadataImage, percentage: int) -> dict[int, list[PartitionRegistration]]:
    """Kafka's leader-imbalance rule: for each broker, the partitions it prefers (first replica) but does not
    lead, kept only where they exceed ``percentage`` percent of all the partitions it prefers."""
    preferred: dict[int, list[PartitionRegistration]] = defaultdict(list)
    for topic in image.sorted_topics():
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
