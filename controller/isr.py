"""AlterPartition: ISR changes asked for by partition leaders, decided as Kafka's controller decides them.

A leader proposes a new ISR at the leader and partition epochs it holds; the controller accepts it only if
those epochs are still current, so a change based on stale state (a newer leader, or another change committed
in between) is refused rather than applied over it. The ISR must keep the leader (so it never becomes empty,
as the leader always is while it leads), stay within the replicas, and admit only active brokers:
a fenced or shutting-down broker must not become a member that could be elected. An ISR change that brings the
last adding replica of a reassignment into sync completes the reassignment in the same record.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from odradek.client.common.metadata_image import NO_LEADER, MetadataImage, PartitionRegistration
from odradek.client.errors import ErrorCode
from odradek.controller.elections import ChangeBatch, MinIsr, one_replica
from odradek.controller.reassignment import isr_change
from odradek.proto import controller_pb2 as cpb
from odradek.proto import metadata_pb2 as md


@dataclass(frozen=True, slots=True)
class IsrItem:
    """One partition of an AlterPartition request: the ISR its leader wants, at the epochs the leader holds."""

    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class IsrResult:
    """One partition's answer: on success (and NEW_LEADER_ELECTED) the state after the change commits; on other
    errors the current state when the partition is known, so the leader can see why."""

    topic: str
    partition: int
    error: ErrorCode.ValueType = ErrorCode.NONE
    message: str = ""
    leader: int = NO_LEADER
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


@dataclass
class AlterPartitionResults:
    """``error`` refuses the whole request (an unknown broker or stale broker epoch); otherwise per partition."""

    error: ErrorCode.ValueType = ErrorCode.NONE
    message: str = ""
    partitions: list[IsrResult] = field(default_factory=list)

    def response(self) -> cpb.AlterPartitionResponse:
        """The wire answer."""
        topics: dict[str, cpb.AlterPartitionTopicResponse] = {}
        for r in self.partitions:
            topics.setdefault(r.topic, cpb.AlterPartitionTopicResponse(name=r.topic)).partitions.append(
                cpb.AlterPartitionItemResponse(
                    partition=r.partition,
                    error=r.error,
                    leader=r.leader,
                    leader_epoch=r.leader_epoch,
                    isr=r.isr,
                    partition_epoch=r.partition_epoch,
                )
            )
        return cpb.AlterPartitionResponse(error=self.error, topics=list(topics.values()))


def isr_items(request: cpb.AlterPartitionRequest) -> list[IsrItem]:
    """The items of a wire request."""
    return [
        IsrItem(t.name, i.partition, i.leader_epoch, i.partition_epoch, tuple(i.new_isr))
        for t in request.topics
        for i in t.partitions
    ]


def _result(
    item: IsrItem, p: PartitionRegistration | None, error: ErrorCode.ValueType = ErrorCode.NONE, message: str = ""
) -> IsrResult:
    if p is None:
        return IsrResult(item.topic, item.partition, error, message)
    return IsrResult(item.topic, item.partition, error, message, p.leader, p.leader_epoch, p.isr, p.partition_epoch)


def _refusal(
    p: PartitionRegistration, broker_id: int, item: IsrItem, active: set[int]
) -> tuple[ErrorCode.ValueType, str] | None:
    """Why the change cannot apply, or None. The leader epoch goes first, as in Kafka: a deposed leader learns
    that its epoch is fenced, whatever else is wrong."""
    if item.leader_epoch != p.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH, f"leader epoch {item.leader_epoch} is not the current {p.leader_epoch}"
    if broker_id != p.leader:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {broker_id} does not lead (leader: {p.leader})"
    if item.partition_epoch != p.partition_epoch:
        return (
            ErrorCode.INVALID_UPDATE_VERSION,
            f"partition epoch {item.partition_epoch} is not the current {p.partition_epoch}",
        )
    isr = item.new_isr
    if len(set(isr)) != len(isr):
        return ErrorCode.INVALID_REQUEST, f"the new ISR {list(isr)} names a replica more than once"
    if not set(isr) <= set(p.replicas):
        return ErrorCode.INVALID_REQUEST, f"the new ISR {list(isr)} is not within the replicas {list(p.replicas)}"
    if p.leader not in isr:
        return ErrorCode.INVALID_REQUEST, f"the new ISR {list(isr)} leaves out the leader {p.leader}"
    ineligible = [r for r in isr if r not in p.isr and r not in active]
    if ineligible:
        return ErrorCode.INELIGIBLE_REPLICA, f"replicas {ineligible} are fenced, shutting down or not registered"
    return None


def alter_partition(
    image: MetadataImage,
    broker_id: int,
    broker_epoch: int,
    items: Iterable[IsrItem],
    min_isr: MinIsr = one_replica,
) -> tuple[list[md.MetadataRecord], AlterPartitionResults]:
    """Decide one AlterPartition request from ``broker_id``: the records (one batch) and the answer. Replicas a
    shrink removes while the ISR is below the topic's ``min_isr`` join the eligible leader replicas."""
    broker = image.brokers.get(broker_id)
    if broker is None or broker.epoch != broker_epoch:
        current = "not registered" if broker is None else f"at epoch {broker.epoch}"
        message = f"broker {broker_id} is {current}, the request carries epoch {broker_epoch}"
        return [], AlterPartitionResults(ErrorCode.STALE_BROKER_EPOCH, message)
    batch = ChangeBatch(image)
    active = {b.broker_id for b in image.active_brokers()}
    results = AlterPartitionResults()
    for item in items:
        p = batch.partition(item.topic, item.partition)
        if p is None:
            message = f"unknown partition {item.topic}-{item.partition}"
            results.partitions.append(_result(item, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message))
            continue
        refusal = _refusal(p, broker_id, item, active)
        if refusal is not None:
            results.partitions.append(_result(item, p, *refusal))
            continue
        change = isr_change(p, item.new_isr, active, min_isr(item.topic))
        after = p if change is None else batch.add(change)
        if after.leader != p.leader:  # a completed reassignment moved leadership off the requester
            results.partitions.append(_result(item, after, ErrorCode.NEW_LEADER_ELECTED, "the reassignment completed"))
        else:
            results.partitions.append(_result(item, after))
    return batch.records, results
