"""Live topic configuration: Kafka's IncrementalAlterConfigs decided against the current image.

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

from odradek.client.errors import ErrorCode
from odradek.controller.elections import partition_change
from odradek.controller.metadata.image import TOPIC_RESOURCE, MetadataImage
from odradek.controller.topics import INTERNAL_TOPICS, validate_configs
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
        if op.op in ("append", "subtract") and op.name not in LIST_CONFIGS:
            out.error = ErrorCode.INVALID_CONFIG
            out.message = f"topic config '{op.name}' is not a list: only {', '.join(sorted(LIST_CONFIGS))} is"
            return out
        if op.op == "set":
            wanted[op.name] = op.value
        elif op.op == "delete":
            wanted.pop(op.name, None)
        else:
            base = wanted.get(op.name, default_of(op.name) or "")
            items = [i.strip() for i in base.split(",") if i.strip()]
            given = [i.strip() for i in op.value.split(",") if i.strip()]
            if op.op == "append":
                items += [i for i in given if i not in items]
            else:
                items = [i for i in items if i not in given]
            if not items:
                out.error, out.message = ErrorCode.INVALID_CONFIG, f"topic config '{op.name}' would be empty"
                return out
            wanted[op.name] = ",".join(items)
    internal = topic in INTERNAL_TOPICS
    changed = {name: value for name, value in wanted.items() if current.get(name) != value}
    problem = validate_configs(changed, allow_compact=internal)
    if problem is None and internal and "compact" not in wanted.get("cleanup.policy", ""):
        problem = f"'{topic}' is an internal topic: its cleanup.policy must include compact"
    if problem is not None:
        out.error, out.message = ErrorCode.INVALID_CONFIG, problem
        return out
    for name in sorted(set(current) | set(wanted)):
        if current.get(name) == wanted.get(name):
            continue
        record = md.ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=topic, name=name)
        if name in wanted:
            record.value = wanted[name]
        out.records.append(md.MetadataRecord(config=record))
    out.configs = dict(sorted(wanted.items()))
    old_min, new_min = (_min_isr(c, default_of) for c in (current, wanted))
    if old_min != new_min:
        out.records += clear_elr(image, topic, new_min)
    return out


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
