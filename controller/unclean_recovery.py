"""Unclean recovery: electing the most complete log when no replica is known to hold everything committed.

A partition whose ISR and ELR are both empty (every replica that held everything committed stopped uncleanly, so
each may have lost an unflushed tail) cannot have a clean election. An unclean stop does not always lose data,
though (a killed process leaves its writes in the page cache), so the controller looks at the logs themselves, as
KIP-966's *balanced* strategy does: once every member of the last known ELR (the replicas that last held
everything committed) is an active broker again, it asks each for its log's last leader epoch and end offset and
elects the highest, epoch first. If any of them kept everything committed, that one wins. The ``manual`` strategy
leaves such partitions to the operator, whose ``leader elect --unclean`` makes the same choice among whichever
replicas are active. Every unclean recovery is reported as a possible loss of data: nobody can tell whether the
log chosen lost anything.

Sans-I/O: the controller's shell asks the brokers; these functions decide whom to ask and what to write.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from odradek.client.common.metadata_image import NO_LEADER, MetadataImage, PartitionRegistration
from odradek.controller.elections import partition_change
from odradek.proto import metadata_pb2 as md

BALANCED, MANUAL = "balanced", "manual"
STRATEGIES = (BALANCED, MANUAL)


@dataclass(frozen=True, slots=True)
class ReplicaLog:
    """What a broker answered about its replica's log."""

    broker_id: int
    broker_epoch: int
    last_leader_epoch: int  # -1: an empty log
    log_end_offset: int


@dataclass(frozen=True, slots=True)
class Inspection:
    """A partition whose replicas' logs are to be compared, as the image stood when it was decided."""

    topic: str
    topic_id: bytes
    partition: int
    partition_epoch: int
    replicas: tuple[int, ...]  # the brokers to ask, in replica order


@dataclass(frozen=True, slots=True)
class Recovery:
    """A decided recovery: the record electing ``chosen`` and every log compared, for the report."""

    inspection: Inspection
    chosen: ReplicaLog
    logs: tuple[ReplicaLog, ...]
    record: md.PartitionChangeRecord

    def describe(self) -> str:
        i, c = self.inspection, self.chosen
        others = ", ".join(f"{r.broker_id}: epoch {r.last_leader_epoch} end {r.log_end_offset}" for r in self.logs)
        return (
            f"unclean recovery of {i.topic}-{i.partition}: elected {c.broker_id} (last epoch {c.last_leader_epoch}, "
            f"end offset {c.log_end_offset}) of [{others}]; any record only the others held is lost"
        )


Answers = Mapping[tuple[bytes, int], Mapping[int, ReplicaLog]]


def _active_epochs(image: MetadataImage) -> dict[int, int]:
    return {b.broker_id: b.epoch for b in image.active_brokers()}


def needs_recovery(p: PartitionRegistration) -> bool:
    """No leader, and no replica known to hold everything committed."""
    return p.leader == NO_LEADER and not p.isr and not p.eligible_leader_replicas


def balanced_inspections(
    image: MetadataImage, strategy: Callable[[str], str], unclean_allowed: Callable[[str], bool]
) -> list[Inspection]:
    """The automatic recoveries due: partitions of balanced topics whose whole last known ELR is active again.

    A topic allowing unclean elections has its leader elected without looking (the controller does it at once).
    """
    active = _active_epochs(image)
    due = []
    for topic in image.sorted_topics():
        name = topic.name
        if strategy(name) != BALANCED or unclean_allowed(name):
            continue
        for index in sorted(topic.partitions):
            p = topic.partitions[index]
            if needs_recovery(p) and p.last_known_elr and all(r in active for r in p.last_known_elr):
                replicas = tuple(r for r in p.replicas if r in p.last_known_elr)
                due.append(Inspection(name, p.topic_id, index, p.partition_epoch, replicas))
    return due


def operator_inspection(image: MetadataImage, topic: str, p: PartitionRegistration) -> Inspection | None:
    """An operator's unclean election of ``p``: compare every active replica (None if it needs no inspection)."""
    if not needs_recovery(p):
        return None
    active = _active_epochs(image)
    replicas = tuple(r for r in p.replicas if r in active)
    return Inspection(topic, p.topic_id, p.partition, p.partition_epoch, replicas) if replicas else None


def most_complete(replicas: Iterable[int], logs: Mapping[int, ReplicaLog], every: bool = True) -> ReplicaLog | None:
    """The log with the highest last leader epoch, then end offset (ties: replica order). With ``every``, None
    unless every replica answered, since the one missing could be the only complete log."""
    best: ReplicaLog | None = None
    for r in replicas:
        log = logs.get(r)
        if log is None:
            if every:
                return None
            continue
        if best is None or (log.last_leader_epoch, log.log_end_offset) > (best.last_leader_epoch, best.log_end_offset):
            best = log
    return best


def recovery(
    image: MetadataImage, inspection: Inspection, answers: Answers, min_isr: int, every: bool = True
) -> Recovery | None:
    """The election the answers call for, if the partition is still as inspected and the chosen broker is still
    the incarnation that answered (one restarted since may have lost its log). ``every``: see most_complete."""
    topic = image.topics.get(inspection.topic_id)
    p = None if topic is None else topic.partitions.get(inspection.partition)
    return None if p is None else _decide(p, inspection, answers, _active_epochs(image), min_isr, every)


def _decide(
    p: PartitionRegistration,
    inspection: Inspection,
    answers: Answers,
    active: dict[int, int],
    min_isr: int,
    every: bool,
) -> Recovery | None:
    if p.partition_epoch != inspection.partition_epoch or not needs_recovery(p):
        return None
    logs = answers.get((inspection.topic_id, inspection.partition), {})
    chosen = most_complete(inspection.replicas, logs, every)
    if chosen is None or active.get(chosen.broker_id) != chosen.broker_epoch:
        return None
    record = partition_change(p, leader=chosen.broker_id, isr=(chosen.broker_id,), min_isr=min_isr, elr=())
    if record is None:
        return None
    compared = tuple(logs[r] for r in inspection.replicas if r in logs)
    return Recovery(inspection, chosen, compared, record)


def operator_choice(
    image: MetadataImage,
    inspections: Iterable[Inspection],
    answers: Answers,
    min_isr: Callable[[str], int],
    done: list[Recovery],
) -> Callable[[str, PartitionRegistration], md.PartitionChangeRecord | None]:
    """For an operator's unclean election: the most complete log among the replicas that answered (appended to
    ``done`` for the report); the election falls back to its other rules where none did."""
    by_partition = {(i.topic_id, i.partition): i for i in inspections}
    active = _active_epochs(image)

    def choose(topic: str, p: PartitionRegistration) -> md.PartitionChangeRecord | None:
        inspection = by_partition.get((p.topic_id, p.partition))
        if inspection is None:
            return None
        decided = _decide(p, inspection, answers, active, min_isr(topic), every=False)
        if decided is None:
            return None
        done.append(decided)
        return decided.record

    return choose


def recoveries(
    image: MetadataImage,
    inspections: Iterable[Inspection],
    answers: Answers,
    min_isr: Callable[[str], int],
    every: bool = True,
) -> list[Recovery]:
    return [r for i in inspections if (r := recovery(image, i, answers, min_isr(i.topic), every)) is not None]
