"""Topic creation and deletion: validation against the current image, and the metadata records they write."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from odradek.client.errors import ErrorCode
from odradek.controller.metadata.image import TOPIC_RESOURCE, MetadataImage, TopicImage
from odradek.controller.placement import BrokerSlot, PlacementError, assign_replicas
from odradek.proto import metadata_pb2 as md

MAX_NAME_LENGTH = 249
# Topics the cluster itself creates and keeps: users may read them, but not create, delete or produce to them.
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})
_LEGAL_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")


def _int(lo: int) -> Callable[[str], bool]:
    def check(v: str) -> bool:
        try:
            return int(v) >= lo
        except ValueError:
            return False

    return check


def _bool(v: str) -> bool:
    return v in ("true", "false")


def _one_of(*allowed: str) -> Callable[[str], bool]:
    return lambda v: v in allowed


def _policy(v: str) -> bool:
    parts = [p.strip() for p in v.split(",")]
    return bool(parts) and all(p in ("compact", "delete") for p in parts)


def _ratio(v: str) -> bool:
    try:
        return 0 <= float(v) <= 1
    except ValueError:
        return False


# Kafka topic configs odradek knows but cannot honour yet: refused (INVALID_CONFIG) rather than stored and ignored.
UNSUPPORTED_TOPIC_CONFIGS: dict[str, str] = {
    "file.delete.delay.ms": "delayed deletion of segment files is not supported yet (they are deleted at once)",
}


# Topic-level configs (Kafka names) and their value checks.
TOPIC_CONFIGS: dict[str, Callable[[str], bool]] = {
    "cleanup.policy": _policy,
    "delete.retention.ms": _int(0),
    "max.compaction.lag.ms": _int(1),
    "min.cleanable.dirty.ratio": _ratio,
    "min.compaction.lag.ms": _int(0),
    "compression.type": _one_of("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
    "flush.messages": _int(1),
    "flush.ms": _int(0),
    "index.interval.bytes": _int(0),
    "max.message.bytes": _int(0),
    "message.timestamp.type": _one_of("CreateTime", "LogAppendTime"),
    "min.insync.replicas": _int(1),
    "retention.bytes": _int(-1),
    "retention.ms": _int(-1),
    "segment.bytes": _int(14),
    "segment.index.bytes": _int(8),
    "segment.ms": _int(1),
    "unclean.leader.election.enable": _bool,
    "unclean.recovery.strategy": _one_of("balanced", "manual"),
}


def validate_topic_name(name: str) -> str | None:
    """An error message for an illegal topic name, or None (Kafka's rules)."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be '{name}'"
    if len(name) > MAX_NAME_LENGTH:
        return f"topic name is longer than {MAX_NAME_LENGTH} characters"
    if not _LEGAL_NAME.match(name):
        return f"topic name '{name}' has characters other than ASCII letters, digits, '.', '_' and '-'"
    return None


def validate_configs(configs: dict[str, str]) -> str | None:
    """An error message for the first unknown, unsupported or malformed config, or None."""
    for name, value in configs.items():
        if name in UNSUPPORTED_TOPIC_CONFIGS:
            return f"topic config '{name}' is not supported yet: {UNSUPPORTED_TOPIC_CONFIGS[name]}"
        check = TOPIC_CONFIGS.get(name)
        if check is None:
            return f"unknown topic config '{name}'"
        if not check(value):
            return f"invalid value '{value}' for topic config '{name}'"
    return None


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
    name: str
    partitions: int
    replication_factor: int
    configs: dict[str, str] = field(default_factory=dict)


@dataclass
class TopicOutcome:
    name: str
    error: ErrorCode.ValueType = ErrorCode.NONE
    message: str = ""
    topic_id: bytes = b""
    records: list[md.MetadataRecord] = field(default_factory=list)


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
    if request.partitions < 1:
        out.error, out.message = ErrorCode.INVALID_PARTITIONS, "the number of partitions must be at least 1"
        return out
    if request.replication_factor < 1:
        out.error, out.message = ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor must be at least 1"
        return out
    problem = validate_configs(request.configs)
    if problem:
        out.error, out.message = ErrorCode.INVALID_CONFIG, problem
        return out
    slots = [BrokerSlot(b.broker_id, b.rack) for b in image.active_brokers()]
    if request.replication_factor > len(slots):
        out.error = ErrorCode.INVALID_REPLICATION_FACTOR
        out.message = (
            f"replication factor {request.replication_factor} is larger than the {len(slots)} available brokers"
        )
        return out
    limit_message = (
        f"{request.partitions} partitions with replication factor {request.replication_factor} would put more "
        f"than max.partitions.per.broker={max_partitions_per_broker} partition replicas on a broker"
    )
    counts = replicas_per_broker(image)
    existing = sum(counts.get(slot.broker_id, 0) for slot in slots)
    if existing + request.partitions * request.replication_factor > max_partitions_per_broker * len(slots):
        out.error, out.message = ErrorCode.POLICY_VIOLATION, limit_message
        return out
    try:
        assignment = assign_replicas(request.name, request.partitions, request.replication_factor, slots)
    except PlacementError as e:
        out.error, out.message = ErrorCode.INVALID_REPLICATION_FACTOR, str(e)
        return out
    over = _over_limit(counts, assignment, max_partitions_per_broker)
    if over is not None:
        out.error = ErrorCode.POLICY_VIOLATION
        out.message = f"{limit_message} (broker {over[0]} would hold {over[1]})"
        return out
    topic_id = (new_id or (lambda: uuid.uuid4().bytes))()
    out.topic_id = topic_id
    out.records.append(md.MetadataRecord(topic=md.TopicRecord(name=request.name, topic_id=topic_id)))
    for partition, replicas in enumerate(assignment):
        out.records.append(
            md.MetadataRecord(
                partition=md.PartitionRecord(
                    topic_id=topic_id,
                    partition=partition,
                    replicas=replicas,
                    isr=replicas,
                    leader=replicas[0],
                    leader_epoch=0,
                    partition_epoch=0,
                )
            )
        )
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
    touches the active segment, keeps the topic small."""
    rf = max(1, min(replication_factor, len(image.brokers)))
    min_isr = min(min_insync_replicas, rf) if min_insync_replicas > 0 else (2 if rf >= 3 else 1)
    configs = {"cleanup.policy": "compact", "min.insync.replicas": str(min_isr)}
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
) -> TopicOutcome:
    """Grow ``name`` to ``total_count`` partitions (Kafka's CreatePartitions): the new partitions get the topic's
    replication factor, placed as at creation (continuing its round-robin), and the existing ones are untouched.
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
    slots = [BrokerSlot(b.broker_id, b.rack) for b in image.active_brokers()]
    added = total_count - current
    try:
        assignment = assign_replicas(name, added, replication_factor, slots, first_partition=current)
    except PlacementError as e:
        out.error, out.message = ErrorCode.INVALID_REPLICATION_FACTOR, str(e)
        return out
    over = _over_limit(replicas_per_broker(image), assignment, max_partitions_per_broker)
    if over is not None:
        out.error = ErrorCode.POLICY_VIOLATION
        out.message = (
            f"{added} more partitions with replication factor {replication_factor} would put {over[1]} partition "
            f"replicas on broker {over[0]}, more than max.partitions.per.broker={max_partitions_per_broker}"
        )
        return out
    for partition, replicas in enumerate(assignment, start=current):
        out.records.append(
            md.MetadataRecord(
                partition=md.PartitionRecord(
                    topic_id=topic.topic_id,
                    partition=partition,
                    replicas=replicas,
                    isr=replicas,
                    leader=replicas[0],
                    leader_epoch=0,
                    partition_epoch=0,
                )
            )
        )
    return out
