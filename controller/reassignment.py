"""Partition reassignment (Kafka's KIP-455), decided as metadata records.

A reassignment to target replicas T first *adds*: the replica list becomes T followed by the replicas R not in T,
``adding`` = T minus R, ``removing`` = R minus T (R: the replicas from before any reassignment). The new
replicas replicate from the leader like any follower, and the leader asks for them to join the ISR
(AlterPartition). Once every adding replica is in the ISR the reassignment *completes* in the same record as
that ISR change: replicas = T, ISR = ISR ∩ T, and a new leader from T if the old one is being removed. It never
completes into an empty ISR (the "last replica standing" of elections.py): it waits for a target replica to be
in sync. Cancelling reverts to R, in the order R's members have in the current list (as Kafka's revert does:
the original order is not recorded, so the preferred leader may differ from before the reassignment).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from odradek.client.common.metadata_image import MetadataImage, PartitionRegistration
from odradek.client.errors import ErrorCode
from odradek.controller.elections import (
    ChangeBatch,
    PartitionOutcome,
    choose_leader,
    partition_change,
    unknown_partition,
)
from odradek.proto import metadata_pb2 as md


@dataclass(frozen=True, slots=True)
class ReassignmentRequest:
    """Target replicas for one partition; ``replicas`` None cancels the partition's reassignment."""

    topic: str
    partition: int
    replicas: tuple[int, ...] | None


def in_progress(p: PartitionRegistration) -> bool:
    return bool(p.adding_replicas or p.removing_replicas)


Completed = tuple[tuple[int, ...], tuple[int, ...], int]


def completion(p: PartitionRegistration, isr: Sequence[int], active: set[int]) -> Completed | None:
    """(replicas, ISR, leader) that complete ``p``'s reassignment once ``isr`` holds every adding replica.

    None while it cannot complete: nothing in progress, an adding replica not in sync yet, or no target replica
    in sync (completing then would empty the ISR).
    """
    if not in_progress(p) or not set(p.adding_replicas) <= set(isr):
        return None
    target = tuple(r for r in p.replicas if r not in p.removing_replicas)
    new_isr = tuple(r for r in isr if r in target)
    if not new_isr:
        return None
    leader = p.leader
    if leader not in target:
        leader = choose_leader(dataclasses.replace(p, replicas=target), active, new_isr, unclean=False)
    return target, new_isr, leader


def isr_change(
    p: PartitionRegistration, isr: Sequence[int], active: set[int], min_isr: int
) -> md.PartitionChangeRecord | None:
    """The change setting ``p``'s ISR, completing its reassignment in the same record when the ISR finishes it."""
    done = completion(p, isr, active)
    if done is None:
        return partition_change(p, isr=isr, min_isr=min_isr)
    replicas, new_isr, leader = done
    return partition_change(p, leader=leader, isr=new_isr, replicas=replicas, min_isr=min_isr)


def _validate_target(image: MetadataImage, target: tuple[int, ...]) -> str | None:
    if not target:
        return "the target replica list is empty"
    seen: set[int] = set()
    for broker in target:
        if broker in seen:
            return f"the target replica list names broker {broker} more than once"
        if broker not in image.brokers:
            return f"the target replica list names broker {broker}, which is not registered"
        seen.add(broker)
    return None


Change = tuple[str | None, md.PartitionChangeRecord | None]


def _move(
    p: PartitionRegistration,
    replicas: tuple[int, ...],
    adding: tuple[int, ...],
    removing: tuple[int, ...],
    active: set[int],
    unclean: bool,
) -> Change:
    """Set the replica list (problem, change). Replicas dropped from it (adding ones no longer wanted) leave the
    ISR and leadership at once; if that empties the ISR it takes an unclean election, as in Kafka's revert."""
    isr = tuple(r for r in p.isr if r in replicas)
    if not isr:
        if not unclean:
            return "only replicas being dropped are in sync: that needs an unclean leader election", None
        settled = [r for r in replicas if r not in adding] or list(replicas)  # prefer replicas that held data
        isr = (next((r for r in settled if r in active), settled[0]),)
    leader = p.leader
    if leader not in isr:
        leader = choose_leader(dataclasses.replace(p, replicas=replicas), active, isr, unclean=False)
    moving = dataclasses.replace(
        p, replicas=replicas, isr=isr, leader=leader, adding_replicas=adding, removing_replicas=removing
    )
    done = completion(moving, isr, active)
    if done is not None:  # nothing (more) to add: complete at once
        (replicas, isr, leader), adding, removing = done, (), ()
    return None, partition_change(p, leader=leader, isr=isr, replicas=replicas, adding=adding, removing=removing)


def _before(p: PartitionRegistration) -> tuple[int, ...]:
    """The replicas from before any reassignment in progress."""
    return tuple(r for r in p.replicas if r not in p.adding_replicas)


def _reassign(p: PartitionRegistration, target: tuple[int, ...], active: set[int], unclean: bool) -> Change:
    """Relative to the replicas from before (KIP-455): a new target during a reassignment drops the replicas the
    old one was adding that it does not want, and keeps adding those it does until they are in sync."""
    before = _before(p)
    replicas = target + tuple(r for r in before if r not in target)
    adding = tuple(r for r in target if r not in before)
    removing = tuple(r for r in before if r not in target)
    return _move(p, replicas, adding, removing, active, unclean)


def alter_reassignments(
    image: MetadataImage, requests: Iterable[ReassignmentRequest], unclean_allowed: Callable[[str], bool]
) -> tuple[list[md.MetadataRecord], list[PartitionOutcome]]:
    """AlterPartitionReassignments as one batch: start, change or cancel reassignments, one outcome each."""
    batch = ChangeBatch(image)
    active = {b.broker_id for b in image.active_brokers()}
    outcomes = []
    for r in requests:
        p = batch.partition(r.topic, r.partition)
        if p is None:
            outcomes.append(unknown_partition(r.topic, r.partition))
            continue
        if r.replicas is None:
            if not in_progress(p):
                outcomes.append(
                    PartitionOutcome(
                        r.topic, r.partition, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "no reassignment in progress"
                    )
                )
                continue
            problem, change = _move(p, _before(p), (), (), active, unclean_allowed(r.topic))
        else:
            problem = _validate_target(image, r.replicas)
            if problem is None:
                problem, change = _reassign(p, r.replicas, active, unclean_allowed(r.topic))
        if problem:
            outcomes.append(PartitionOutcome(r.topic, r.partition, ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem))
            continue
        if change is not None:
            p = batch.add(change)
        outcomes.append(PartitionOutcome(r.topic, r.partition, leader=p.leader))
    return batch.records, outcomes
