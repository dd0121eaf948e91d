"""Topic creation and deletion: validation against the current image, and the metadata records they write."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from odradek.client.common.metadata_image import TOPIC_RESOURCE, MetadataImage, TopicImage
from odradek.client.common.topic_rules import INTERNAL_TOPICS, SHARE_STATE_TOPIC, validate_configs, validate_topic_name
from odradek.client.errors import ErrorCode
from odradek.controller.placement import BrokerSlot, PlacementError, assign_replicas
from odradek.proto import metadata_pb2 as md

DEFAULT_MAX_PARTITIONS_PER_BROKER = 4000


def replicas_per_broker(image: MetadataImage) -> dict[int, int]:
    """How many partition replicas each broker holds (adding replicas of a reassignment included)."""
    counts: dict[int, int] = {}
    for topic in image.topics.values():
        for p in topic.partitions.values():
            for b in set(p.replicas) | set(p.adding_replicas):
                counts[b] = counts.get(b, 0) + 1
    return counts


def _over_limit(counts: dict[int, int], assignment: list[list[int]], limit: int) -> tuple[int, int] | None:
    """(broker, its replica count) for the most loaded broker that ``assignment`` would take above ``limit``."""
    counts = dict(counts)
    for replicas in assignment:
        for b in replicas:
            counts[b] = counts.get(b, 0) + 1
    broker, count = max(counts.items(), key=lambda item: (item[1], -item[0]), default=(-1, 0))
    return (broker, count) if count > limit else None


@dataclass
class TopicRequest:
    """``assignments``: the replicas of each partition in partition order, given by the caller (Kafka's manual
    assignment) instead of placed by the controller; ``partitions`` and ``replication_factor`` then follow from it."""

    name: str
    partitions: int
    replication_factor: int
    configs: dict[str, str] = field(default_factory=dict)
    assignments: tuple[tuple[int, ...], ...] = ()


@dataclass
class TopicOutcome:
    name: str
    error: ErrorCode.ValueType = ErrorCode.NONE
    message: str = ""
    topic_id: bytes = b""
    records: list[md.MetadataRecord] = field(default_factory=list)


class Refusal(NamedTuple):
    error: ErrorCode.ValueType
    message: str


# The replicas of each new partition, and the in-sync replicas it starts with.
Placement = tuple[list[list[int]], list[list[int]]]


def _limit_message(request: TopicRequest, limit: int) -> str:
    return (
        f"{request.partitions} partitions with replication factor {request.replication_factor} would put more "
        f"than max.partitions.per.broker={limit} partition replicas on a broker"
    )


def _placed(image: MetadataImage, request: TopicRequest, limit: int) -> Placement | Refusal:
    """The controller's placement of a new topic's partitions on the active brokers, all replicas in sync."""
    if request.partitions < 1:
        return Refusal(ErrorCode.INVALID_PARTITIONS, "the number of partitions must be at least 1")
    if request.replication_factor < 1:
        return Refusal(ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor must be at least 1")
    slots = [BrokerSlot(b.broker_id, b.rack) for b in image.active_brokers()]
    if request.replication_factor > len(slots):
        return Refusal(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"replication factor {request.replication_factor} is larger than the {len(slots)} available brokers",
        )
    counts = replicas_per_broker(image)
    existing = sum(counts.get(slot.broker_id, 0) for slot in slots)
    if existing + request.partitions * request.replication_factor > limit * len(slots):
        return Refusal(ErrorCode.POLICY_VIOLATION, _limit_message(request, limit))
    try:
        assignment = assign_replicas(request.name, request.partitions, request.replication_factor, slots)
    except PlacementError as e:
        return Refusal(ErrorCode.INVALID_REPLICATION_FACTOR, str(e))
    return assignment, [list(replicas) for replicas in assignment]


def manual_assignment_problem(
    image: MetadataImage, replicas: Sequence[int], replication_factor: int | None
) -> str | None:
    """Why one partition's replicas in a caller's assignment are refused, or None: Kafka's checks (a replica list
    that is not empty, has no broker twice, names registered brokers only, and as many as the other partitions)."""
    if not replicas:
        return "The manual partition assignment includes an empty replica list."
    previous = None
    for b in sorted(replicas):
        if b not in image.brokers:
            return f"The manual partition assignment includes broker {b}, but no such broker is registered."
        if b == previous:
            return f"The manual partition assignment includes the broker {b} more than once."
        previous = b
    if replication_factor is not None and len(replicas) != replication_factor:
        return (
            f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but this is "
            f"not consistent with previous partitions, which have {replication_factor} replica(s)."
        )
    return None


def _manual_assignment(
    image: MetadataImage, assignments: Sequence[Sequence[int]], replication_factor: int | None, first_partition: int
) -> Placement | Refusal:
    """A caller's assignment, checked. A partition starts with its active replicas in sync (a fenced replica
    catches up when it is back), led by the first of them; one with none active is refused, with the code Kafka
    gives for a new topic's partitions or for added ones (``replication_factor`` given)."""
    replication_factor_given = replication_factor is not None
    isrs = []
    for partition, replicas in enumerate(assignments, start=first_partition):
        problem = manual_assignment_problem(image, replicas, replication_factor)
        if problem is not None:
            return Refusal(ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)
        replication_factor = len(replicas)
        isr = [b for b in replicas if image.brokers[b].active]
        if not isr and replication_factor_given:
            return Refusal(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {len(replicas)} time(s): All brokers are currently fenced or "
                "in controlled shutdown.",
            )
        if not isr:
            return Refusal(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"All brokers specified in the manual partition assignment for partition {partition} are fenced "
                "or in controlled shutdown.",
            )
        isrs.append(isr)
    return [list(replicas) for replicas in assignments], isrs


def _partition_records(
    topic_id: bytes, first_partition: int, assignment: list[list[int]], isrs: list[list[int]]
) -> list[md.MetadataRecord]:
    return [
        md.MetadataRecord(
            partition=md.PartitionRecord(
                topic_id=topic_id,
                partition=partition,
                replicas=replicas,
                isr=isr,
                leader=isr[0],
                leader_epoch=0,
                partition_epoch=0,
            )
        )
        for partition, (replicas, isr) in enumerate(zip(assignment, isrs, strict=True), start=first_partition)
    ]


def create_topic(
    image: MetadataImage,
    request: TopicRequest,
    new_id: Callable[[], bytes] | None = None,
    max_partitions_per_broker: int = DEFAULT_MAX_PARTITIONS_PER_BROKER,
    internal: bool = False,
) -> TopicOutcome:
    """Validate one creation against ``image`` and build its records (topic, partitions, configs).

    A topic that would put more than ``max_partitions_per_broker`` partition replicas on some broker is refused
    (POLICY_VIOLATION): that many logs per broker is past what a node serves well, and a mistyped count (``-p
    1000000``) must fail at once rather than spend a minute placing replicas. Only the cluster itself creates an
    internal topic (``internal``)."""
    out = TopicOutcome(request.name)
    problem = validate_topic_name(request.name)
    if problem is None and (request.name in INTERNAL_TOPICS) != internal:
        problem = (
            f"'{request.name}' is an internal topic: the cluster creates it on first use"
            if internal is False
            else f"'{request.name}' is not an internal topic"
        )
    if problem:
        out.error, out.message = ErrorCode.INVALID_TOPIC_EXCEPTION, problem
        return out
    if image.topic(request.name) is not None:
        out.error, out.message = ErrorCode.TOPIC_ALREADY_EXISTS, f"topic '{request.name}' already exists"
        return out
    placed = (
        _manual_assignment(image, request.assignments, None, 0)
        if request.assignments
        else _placed(image, request, max_partitions_per_broker)
    )
    if isinstance(placed, Refusal):
        out.error, out.message = placed
        return out
    problem = validate_configs(request.configs)
    if problem:
        out.error, out.message = ErrorCode.INVALID_CONFIG, problem
        return out
    assignment, isrs = placed
    over = _over_limit(replicas_per_broker(image), assignment, max_partitions_per_broker)
    if over is not None:
        out.error = ErrorCode.POLICY_VIOLATION
        out.message = f"{_limit_message(request, max_partitions_per_broker)} (broker {over[0]} would hold {over[1]})"
        return out
    topic_id = (new_id or (lambda: uuid.uuid4().bytes))()
    out.topic_id = topic_id
    out.records.append(md.MetadataRecord(topic=md.TopicRecord(name=request.name, topic_id=topic_id)))
    out.records.extend(_partition_records(topic_id, 0, assignment, isrs))
    for name, value in sorted(request.configs.items()):
        out.records.append(
            md.MetadataRecord(
                config=md.ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=request.name, name=name, value=value)
            )
        )
    return out


def internal_topic_request(
    image: MetadataImage,
    name: str,
    partitions: int,
    replication_factor: int,
    segment_bytes: int = 0,
    min_insync_replicas: int = 0,
) -> TopicRequest:
    """The creation of an internal topic as the cluster makes it: the replication factor capped at the registered
    brokers, ``min.insync.replicas`` as asked but at most the replication factor (0: 2 where it is at least 3,
    else 1), compacted, with segments of ``segment_bytes`` (0: the broker default) so that the cleaner, which never
    touches the active segment, keeps the topic small. The share state topic is not compacted but kept whole, as
    Kafka's: a share-partition's snapshot and the updates after it are all needed to read its state."""
    rf = max(1, min(replication_factor, len(image.brokers)))
    min_isr = min(min_insync_replicas, rf) if min_insync_replicas > 0 else (2 if rf >= 3 else 1)
    configs = {"cleanup.policy": "compact", "min.insync.replicas": str(min_isr)}
    if name == SHARE_STATE_TOPIC:
        configs.update({"cleanup.policy": "delete", "retention.ms": "-1"})
    if segment_bytes > 0:
        configs["segment.bytes"] = str(segment_bytes)
    return TopicRequest(name=name, partitions=partitions, replication_factor=rf, configs=configs)


def _user_topic(image: MetadataImage, name: str, out: TopicOutcome, internal_reason: str) -> TopicImage | None:
    """The existing user topic ``name`` (its id set in ``out``), or None with ``out``'s error set: an internal
    topic (INVALID_TOPIC_EXCEPTION, ``internal_reason``) or an unknown one."""
    if name in INTERNAL_TOPICS:
        out.error = ErrorCode.INVALID_TOPIC_EXCEPTION
        out.message = f"'{name}' is an internal topic: {internal_reason}"
        return None
    topic = image.topic(name)
    if topic is None:
        out.error, out.message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic '{name}'"
        return None
    out.topic_id = topic.topic_id
    return topic


def delete_topic(image: MetadataImage, name: str) -> TopicOutcome:
    out = TopicOutcome(name)
    topic = _user_topic(image, name, out, "the cluster keeps it")
    if topic is None:
        return out
    out.records.append(md.MetadataRecord(remove_topic=md.RemoveTopicRecord(topic_id=topic.topic_id)))
    return out


def create_partitions(
    image: MetadataImage,
    name: str,
    total_count: int,
    max_partitions_per_broker: int = DEFAULT_MAX_PARTITIONS_PER_BROKER,
    assignments: Sequence[Sequence[int]] = (),
) -> TopicOutcome:
    """Grow ``name`` to ``total_count`` partitions (Kafka's CreatePartitions): the new partitions get the topic's
    replication factor, placed as at creation (continuing its round-robin) or on the replicas the caller gives in
    ``assignments`` (one list per new partition), and the existing ones are untouched.
    Never fewer partitions: records are routed by ``hash(key) % count``, so shrinking would strand data.
    Internal topics keep the count the cluster gave them (their keys map to coordinators by it)."""
    out = TopicOutcome(name)
    topic = _user_topic(image, name, out, "its partition count is fixed")
    if topic is None:
        return out
    current = len(topic.partitions)
    if total_count <= current:
        out.error = ErrorCode.INVALID_PARTITIONS
        out.message = (
            f"topic '{name}' has {current} partitions: the new count must be larger, not {total_count} "
            "(partitions are never removed)"
        )
        return out
    # The topic's replication factor is its first partition's, as Kafka reads it (a replica being moved away by a
    # reassignment does not count).
    first = topic.partitions[min(topic.partitions)]
    replication_factor = len(first.replicas) - len(first.removing_replicas)
    added = total_count - current
    if assignments and len(assignments) != added:
        out.error = ErrorCode.INVALID_REPLICA_ASSIGNMENT
        out.message = (
            f"Attempted to add {added} additional partition(s), but only {len(assignments)} assignment(s) were "
            "specified."
        )
        return out
    placed = (
        _manual_assignment(image, assignments, replication_factor, current)
        if assignments
        else _placed_more(image, name, current, added, replication_factor)
    )
    if isinstance(placed, Refusal):
        out.error, out.message = placed
        return out
    assignment, isrs = placed
    over = _over_limit(replicas_per_broker(image), assignment, max_partitions_per_broker)
    if over is not None:
        out.error = ErrorCode.POLICY_VIOLATION
        out.message = (
            f"{added} more partitions with replication factor {replication_factor} would put {over[1]} partition "
            f"replicas on broker {over[0]}, more than max.partitions.per.broker={max_partitions_per_broker}"
        )
        return out
    out.records.extend(_partition_records(topic.topic_id, current, assignment, isrs))
    return out


def _placed_more(
    image: MetadataImage, name: str, current: int, added: int, replication_factor: int
) -> Placement | Refusal:
    """The controller's placement of ``added`` partitions after the ``current`` ones, all replicas in sync."""
    slots = [BrokerSlot(b.broker_id, b.rack) for b in image.active_brokers()]
    try:
        assignment = assign_replicas(name, added, replication_factor, slots, first_partition=current)
    except PlacementError as e:
        return Refusal(ErrorCode.INVALID_REPLICATION_FACTOR, str(e))
    return assignment, [list(replicas) for replicas in assignment]
