"""Live topic (and group) configuration: Kafka's IncrementalAlterConfigs decided against the current image.

Each operation changes one config and leaves the others alone: SET gives a value, DELETE removes the topic's own
value (the node default applies again), APPEND and SUBTRACT add or remove items of a list config
(``cleanup.policy``). A topic's operations are validated together and become one batch of ConfigRecords, so they
apply all or none; the brokers hosting the topic's partitions re-read its configs when they replay the batch.

``min.insync.replicas`` is more than a setting: the eligible leader replicas (KIP-966) are the replicas that left
the ISR while it was below the minimum, so that they hold everything committed. Under another minimum that no
longer holds (a lower one lets the high watermark advance without them), so a change of the effective minimum
clears every ELR of the topic in the same batch as the config record: no leader is ever elected from an ELR that
a different minimum built.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from odradek.client.common.group_configs import GroupConfigSettings, validate_group_configs
from odradek.client.common.metadata_image import (
    BROKER_RESOURCE,
    CLUSTER_DEFAULT,
    GROUP_RESOURCE,
    TOPIC_RESOURCE,
    MetadataImage,
)
from odradek.client.common.topic_rules import INTERNAL_TOPICS, validate_configs
from odradek.client.errors import ErrorCode
from odradek.controller.elections import partition_change
from odradek.proto import metadata_pb2 as md

Op = Literal["set", "delete", "append", "subtract"]
LIST_CONFIGS = frozenset({"cleanup.policy"})


@dataclass(frozen=True)
class ConfigOp:
    name: str
    op: Op
    value: str = ""


@dataclass
class AlterOutcome:
    topic: str
    error: ErrorCode.ValueType = ErrorCode.NONE
    message: str = ""
    records: list[md.MetadataRecord] = field(default_factory=list)
    configs: dict[str, str] = field(default_factory=dict)  # the topic's own configs after the change


def alter_topic_configs(
    image: MetadataImage, topic: str, ops: Sequence[ConfigOp], default_of: Callable[[str], str | None]
) -> AlterOutcome:
    """The records of one topic's changes, or why they are refused (nothing changes then).

    ``default_of(name)`` is the value a config takes where the topic sets none (the node default): APPEND and
    SUBTRACT start from it, and a change of ``min.insync.replicas`` is judged on effective values."""
    out = AlterOutcome(topic)
    t = image.topic(topic)
    if t is None:
        out.error, out.message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic '{topic}'"
        return out
    seen: set[str] = set()
    for op in ops:
        if op.name in seen:
            out.error, out.message = ErrorCode.INVALID_REQUEST, f"topic config '{op.name}' is altered twice"
            return out
        seen.add(op.name)
    current = dict(image.topic_configs(topic))
    wanted = dict(current)
    for op in ops:
        problem = _apply_op(wanted, op, op.name in LIST_CONFIGS, default_of)
        if problem is not None:
            out.error, out.message = ErrorCode.INVALID_CONFIG, f"topic {problem}"
            return out
    internal = topic in INTERNAL_TOPICS
    changed = {name: value for name, value in wanted.items() if current.get(name) != value}
    problem = validate_configs(changed)
    if problem is None and internal and "compact" not in wanted.get("cleanup.policy", ""):
        problem = f"'{topic}' is an internal topic: its cleanup.policy must include compact"
    if problem is not None:
        out.error, out.message = ErrorCode.INVALID_CONFIG, problem
        return out
    out.records = config_records(TOPIC_RESOURCE, topic, current, wanted)
    out.configs = dict(sorted(wanted.items()))
    old_min, new_min = (_min_isr(c, default_of) for c in (current, wanted))
    if old_min != new_min:
        out.records += clear_elr(image, topic, new_min)
    return out


def alter_cluster_defaults(
    image: MetadataImage,
    ops: Sequence[ConfigOp],
    dynamic_keys: Mapping[str, str],
    static_default_of: Callable[[str], str | None],
) -> AlterOutcome:
    """The records of a change of the cluster-wide dynamic broker defaults (Kafka's ``kafka-configs
    --entity-type brokers --entity-default``): node properties that default a topic config (``dynamic_keys``: node
    key -> topic key), which every node then applies over its config file. ``static_default_of(node key)`` is the
    config file's value, for APPEND/SUBTRACT and the min.insync.replicas rule. A change of the effective
    ``min.insync.replicas`` clears the ELR of every topic that does not set its own."""
    out = AlterOutcome("")
    current = dict(image.cluster_defaults())
    wanted = dict(current)
    seen: set[str] = set()
    for op in ops:
        topic_key = dynamic_keys.get(op.name)
        if topic_key is None:
            out.error = ErrorCode.INVALID_CONFIG
            out.message = f"'{op.name}' is not a dynamic broker config: one of {', '.join(sorted(dynamic_keys))}"
            return out
        if op.name in seen:
            out.error, out.message = ErrorCode.INVALID_REQUEST, f"broker config '{op.name}' is altered twice"
            return out
        seen.add(op.name)
        problem = _apply_op(wanted, op, topic_key in LIST_CONFIGS, static_default_of)
        if problem is not None:
            out.error, out.message = ErrorCode.INVALID_CONFIG, problem
            return out
    for name, value in wanted.items():
        if current.get(name) != value:
            problem = validate_configs({dynamic_keys[name]: value})
            if problem is not None:
                out.error, out.message = ErrorCode.INVALID_CONFIG, f"broker config '{name}': {problem}"
                return out
    out.records = config_records(BROKER_RESOURCE, CLUSTER_DEFAULT, current, wanted)
    out.configs = dict(sorted(wanted.items()))
    old_min, new_min = (_min_isr(c, static_default_of) for c in (current, wanted))
    if old_min != new_min:
        for t in sorted(image.topics.values(), key=lambda t: t.name):
            if "min.insync.replicas" not in image.topic_configs(t.name):
                out.records += clear_elr(image, t.name, new_min)
    return out


def alter_group_configs(
    image: MetadataImage, group: str, ops: Sequence[ConfigOp], settings: GroupConfigSettings
) -> AlterOutcome:
    """The ConfigRecords (resource type GROUP) of one group's changes, or why they are refused (see
    client/common/group_configs.py): SET and DELETE only (no group config is a list), validated as a whole against
    ``settings``, the active controller's group.consumer.* bounds."""
    out = AlterOutcome(group)
    if not group:
        out.error, out.message = ErrorCode.INVALID_REQUEST, "Default group resources are not allowed."
        return out
    seen: set[str] = set()
    current = dict(image.group_configs(group))
    wanted = dict(current)
    for op in ops:
        if op.name in seen:
            out.error, out.message = ErrorCode.INVALID_REQUEST, f"group config '{op.name}' is altered twice"
            return out
        seen.add(op.name)
        if op.op in ("append", "subtract"):
            out.error = ErrorCode.INVALID_CONFIG
            out.message = f"Can't {op.op.upper()} to key {op.name} because its type is not LIST."
            return out
        _apply_op(wanted, op, False, lambda _: None)
    problem = validate_group_configs(wanted, settings)
    if problem is not None:
        out.error, out.message = ErrorCode.INVALID_CONFIG, problem
        return out
    out.records = config_records(GROUP_RESOURCE, group, current, wanted)
    out.configs = dict(sorted(wanted.items()))
    return out


def config_records(
    resource_type: int, resource: str, current: Mapping[str, str], wanted: Mapping[str, str]
) -> list[md.MetadataRecord]:
    """A ConfigRecord for each config whose value differs (one without a value where it is removed)."""
    records = []
    for name in sorted(set(current) | set(wanted)):
        if current.get(name) != wanted.get(name):
            record = md.ConfigRecord(resource_type=resource_type, resource_name=resource, name=name)
            if name in wanted:
                record.value = wanted[name]
            records.append(md.MetadataRecord(config=record))
    return records


def _apply_op(
    configs: dict[str, str], op: ConfigOp, is_list: bool, default_of: Callable[[str], str | None]
) -> str | None:
    """Apply one operation to ``configs`` in place; the reason it cannot be, or None."""
    if op.op == "set":
        configs[op.name] = op.value
        return None
    if op.op == "delete":
        configs.pop(op.name, None)
        return None
    if not is_list:
        return f"config '{op.name}' is not a list: only {', '.join(sorted(LIST_CONFIGS))} is"
    items = [i.strip() for i in configs.get(op.name, default_of(op.name) or "").split(",") if i.strip()]
    given = [i.strip() for i in op.value.split(",") if i.strip()]
    items = items + [i for i in given if i not in items] if op.op == "append" else [i for i in items if i not in given]
    configs[op.name] = ",".join(items)  # may be empty, as Kafka allows: no cleanup policy keeps every segment
    return None


def clear_elr(image: MetadataImage, topic: str, min_isr: int) -> list[md.MetadataRecord]:
    """PartitionChangeRecords emptying the ELR of every partition of ``topic`` that has one."""
    t = image.topic(topic)
    records = []
    for _, p in sorted(t.partitions.items()) if t is not None else ():
        change = partition_change(p, min_isr=min_isr, elr=()) if p.eligible_leader_replicas else None
        if change is not None:
            records.append(md.MetadataRecord(partition_change=change))
    return records


def _min_isr(configs: Mapping[str, str], default_of: Callable[[str], str | None]) -> int:
    value = configs.get("min.insync.replicas", default_of("min.insync.replicas") or "1")
    return int(value)
