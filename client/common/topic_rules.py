"""Topic names and topic configs: Kafka's naming rules, the internal topics, and the configs a topic accepts with each
value's check. Shared: the controller validates creations and config changes with them, brokers check names (auto
creation, produce) and describe configs."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

MAX_NAME_LENGTH = 249
# Topics the cluster itself creates and keeps: users may read them, but not create, delete or produce to them.
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_STATE_TOPIC = "__share_group_state"  # KIP-932: share-partitions' durable state
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_STATE_TOPIC})
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
    """A list of compact and delete, or empty (as Kafka accepts it: neither, so every record is kept)."""
    return not v.strip() or all(p.strip() in ("compact", "delete") for p in v.split(","))


def _ratio(v: str) -> bool:
    try:
        return 0 <= float(v) <= 1
    except ValueError:
        return False


# Kafka 3.9's metadata versions: each release and the last of its IV steps (None: a release without IV steps).
_RELEASE_IVS: dict[str, int | None] = {
    **dict.fromkeys(("0.8.0", "0.8.1", "0.8.2", "0.9.0")),
    **{"0.10.0": 1, "0.10.1": 2, "0.10.2": 0, "0.11.0": 2, "1.0": 0, "1.1": 0, "2.0": 1, "2.1": 2, "2.2": 1},
    **{"2.3": 1, "2.4": 1, "2.5": 0, "2.6": 0, "2.7": 2, "2.8": 1, "3.0": 1, "3.1": 0, "3.2": 0, "3.3": 3},
    **{"3.4": 0, "3.5": 2, "3.6": 2, "3.7": 4, "3.8": 0, "3.9": 0},
}


def _metadata_version(v: str) -> bool:
    """A version Kafka 3.9 parses (MetadataVersion.fromVersionString): ``3.9``, ``3.9-IV0``, ``0.10.0``, or longer
    forms cut to the release's segments (``0.10.0.0``, ``3.9.1``)."""
    segments = v.split(".")
    wanted = 3 if v.startswith("0.") else 2
    key = v if wanted >= len(segments) else ".".join(segments[:wanted])
    release, _, step = key.partition("-IV")
    if release not in _RELEASE_IVS:
        return False
    if not step and "-" not in key:
        return True
    last = _RELEASE_IVS[release]
    return last is not None and step.isdigit() and int(step) <= last


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
    # Accepted and without effect, as in Kafka 3.x at any inter-broker protocol of 3.0 or later: every batch is v2.
    "message.format.version": _metadata_version,
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


# The node properties that default topic configs: the log settings (node key -> topic key), then the others.
BROKER_LOG_DEFAULTS = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "message.max.bytes": "max.message.bytes",
    "producer.id.expiration.ms": "producer.id.expiration.ms",
}


# Topic configs whose node default is not a log setting (or that Kafka names differently on brokers). Kafka's node keys
# compression.type and log.message.timestamp.type are not among them: odradek's nodes do not take those keys.
_OTHER_NODE_KEYS = {
    "cleanup.policy": "log.cleanup.policy",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "unclean.recovery.strategy": "unclean.recovery.strategy",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
}


@dataclass(frozen=True)
class TopicDefault:
    value: str
    from_node_config: bool  # the node's config file sets it; False: odradek's built-in default


_NODE_KEY_OF = {topic: node for node, topic in BROKER_LOG_DEFAULTS.items()} | {
    topic: node for topic, node in _OTHER_NODE_KEYS.items()
}


def node_key(topic_key: str) -> str | None:
    """The node property that sets ``topic_key``'s default, or None when no node property does."""
    return _NODE_KEY_OF.get(topic_key)


def dynamic_broker_keys() -> dict[str, str]:
    """The node properties that can be set cluster-wide at runtime: those that default a topic config (node key ->
    topic key), as Kafka's cluster-wide dynamic log configs."""
    return {key: topic for topic in TOPIC_CONFIGS if (key := node_key(topic)) is not None}
