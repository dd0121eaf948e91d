"""Group configs (KIP-848, KIP-932): Kafka's GROUP config resource (type 32), one set of configs per group id.

A consumer group may have its own ``consumer.session.timeout.ms`` and ``consumer.heartbeat.interval.ms``, a share
group its own ``share.session.timeout.ms``, ``share.heartbeat.interval.ms``, ``share.record.lock.duration.ms``,
``share.auto.offset.reset`` and ``share.isolation.level``, overriding the brokers' settings for that group. They are
set with IncrementalAlterConfigs (or AlterConfigs) on the GROUP resource and stored in the metadata log as
ConfigRecords of resource type 32, as Kafka stores them, so every broker's image has them. The group coordinator
applies the session timeout and heartbeat interval at each member's next heartbeat; the share-partition leader
applies the lock duration, the isolation level and the offset reset at its next acquisition (the reset only where
a share-partition has no start offset yet). The group need not exist.

Kafka's rules (GroupConfig.validate), checked by the active controller against its own settings:

- a name other than the group configs is INVALID_CONFIG ``Unknown group config name: <name>``;
- a timeout or interval must be an int of at least 1, and lie within the node's bounds:
  ``group.consumer.{min,max}.session.timeout.ms`` and ``group.consumer.{min,max}.heartbeat.interval.ms`` for the
  consumer configs, ``group.share.{min,max}.session.timeout.ms``, ``group.share.{min,max}.heartbeat.interval.ms``
  and ``group.share.{min,max}.record.lock.duration.ms`` for the share ones; a session timeout must exceed its
  heartbeat interval (each taken as the group sets it, else as the node's setting);
- ``share.auto.offset.reset`` is ``earliest``, ``latest`` or ``by_duration:<ISO-8601 duration>`` (the first record
  at most that old), ``share.isolation.level`` ``read_uncommitted`` or ``read_committed``;
- the empty group name (a default for every group) is INVALID_REQUEST, as Kafka refuses default group resources.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from odradek.client.common.metadata_image import GROUP_RESOURCE, MetadataImage
from odradek.client.errors import ErrorCode
from odradek.proto import admin_pb2 as apb

SESSION_TIMEOUT = "consumer.session.timeout.ms"
HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"
SHARE_SESSION_TIMEOUT = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL = "share.heartbeat.interval.ms"
SHARE_RECORD_LOCK_DURATION = "share.record.lock.duration.ms"
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_ISOLATION_LEVEL = "share.isolation.level"
SHARE_GROUP_CONFIGS = (
    SHARE_SESSION_TIMEOUT,
    SHARE_HEARTBEAT_INTERVAL,
    SHARE_RECORD_LOCK_DURATION,
    SHARE_AUTO_OFFSET_RESET,
    SHARE_ISOLATION_LEVEL,
)
GROUP_CONFIGS = (SESSION_TIMEOUT, HEARTBEAT_INTERVAL, *SHARE_GROUP_CONFIGS)
INT_CONFIGS = (SESSION_TIMEOUT, HEARTBEAT_INTERVAL, SHARE_SESSION_TIMEOUT, SHARE_HEARTBEAT_INTERVAL,
               SHARE_RECORD_LOCK_DURATION)  # fmt: skip
ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
# Each group config's node setting: its default (the share offset reset and isolation level have none: Kafka's
# defaults are latest and read_uncommitted).
NODE_KEYS = {
    SESSION_TIMEOUT: "group.consumer.session.timeout.ms",
    HEARTBEAT_INTERVAL: "group.consumer.heartbeat.interval.ms",
    SHARE_SESSION_TIMEOUT: "group.share.session.timeout.ms",
    SHARE_HEARTBEAT_INTERVAL: "group.share.heartbeat.interval.ms",
    SHARE_RECORD_LOCK_DURATION: "group.share.record.lock.duration.ms",
}
# The node settings bounding each int config (min, max).
BOUNDS = {
    SESSION_TIMEOUT: ("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    HEARTBEAT_INTERVAL: ("group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"),
    SHARE_SESSION_TIMEOUT: ("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    SHARE_HEARTBEAT_INTERVAL: ("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    SHARE_RECORD_LOCK_DURATION: (
        "group.share.min.record.lock.duration.ms",
        "group.share.max.record.lock.duration.ms",
    ),
}
# Kafka's defaults of the node settings group configs read.
NODE_DEFAULTS = {
    "group.consumer.session.timeout.ms": 45_000,
    "group.consumer.min.session.timeout.ms": 45_000,
    "group.consumer.max.session.timeout.ms": 60_000,
    "group.consumer.heartbeat.interval.ms": 5_000,
    "group.consumer.min.heartbeat.interval.ms": 5_000,
    "group.consumer.max.heartbeat.interval.ms": 15_000,
    "group.share.session.timeout.ms": 45_000,
    "group.share.min.session.timeout.ms": 15_000,
    "group.share.max.session.timeout.ms": 60_000,
    "group.share.heartbeat.interval.ms": 5_000,
    "group.share.min.heartbeat.interval.ms": 5_000,
    "group.share.max.heartbeat.interval.ms": 15_000,
    "group.share.record.lock.duration.ms": 30_000,
    "group.share.min.record.lock.duration.ms": 15_000,
    "group.share.max.record.lock.duration.ms": 60_000,
}
_DURATION = re.compile(
    r"P(?:(?P<d>\d+)D)?(?:T(?=\d)(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+)(?:[.,](?P<f>\d{1,9}))?S)?)?",
    re.IGNORECASE,
)
BY_DURATION = "by_duration:"


class NodeSettings(Protocol):
    """What ``GroupConfigSettings.from_node`` reads of a node's config (the broker's ``NodeConfig``)."""

    def __getitem__(self, name: str, /) -> Any: ...

    def is_set(self, name: str, /) -> bool: ...


@dataclass(frozen=True, slots=True)
class GroupConfigSettings:
    """A node's group.consumer.* and group.share.* settings that group configs default to and are bounded by
    (``values``: node key -> value, Kafka's defaults where missing)."""

    values: Mapping[str, int] | None = None
    from_node_config: frozenset[str] = frozenset()  # the node keys its config file sets

    @classmethod
    def from_node(cls, c: NodeSettings) -> GroupConfigSettings:
        return cls(
            values={k: c[k] for k in NODE_DEFAULTS},
            from_node_config=frozenset(k for k in NODE_KEYS.values() if c.is_set(k)),
        )

    def node(self, key: str) -> int:
        values = self.values or {}
        return values[key] if key in values else NODE_DEFAULTS[key]

    def default_of(self, name: str) -> int | str:
        if name == SHARE_AUTO_OFFSET_RESET:
            return "latest"
        if name == SHARE_ISOLATION_LEVEL:
            return "read_uncommitted"
        return self.node(NODE_KEYS[name])


def _int_value(name: str, value: str) -> tuple[int | None, str | None]:
    try:
        number = int(value.strip())
    except ValueError:
        return None, f"Invalid value {value} for configuration {name}: Not a number of type INT"
    if not -(2**31) <= number < 2**31:
        return None, f"Invalid value {value} for configuration {name}: Not a number of type INT"
    if number < 1:
        return None, f"Invalid value {value} for configuration {name}: Value must be at least 1"
    return number, None


def parse_duration_ms(text: str) -> int | None:
    """An ISO-8601 duration as Java's Duration.parse reads it (``PnDTnHnMn.nS``, not negative), in ms; None if it
    is not one."""
    m = _DURATION.fullmatch(text.strip())
    if m is None or not any(m.group(g) for g in "dhms"):
        return None
    days, hours, minutes, seconds = (int(m.group(g) or 0) for g in "dhms")
    fraction = (m.group("f") or "").ljust(9, "0")
    return ((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000 + int(fraction) // 1_000_000


def offset_reset_problem(value: str) -> str | None:
    """Why a ``share.auto.offset.reset`` value is refused, or None (Kafka's ShareGroupAutoOffsetResetStrategy)."""
    v = value.strip().lower()
    if v in ("earliest", "latest"):
        return None
    if v.startswith(BY_DURATION):
        if parse_duration_ms(v[len(BY_DURATION) :]) is None:
            return f"Invalid value {value} for configuration {SHARE_AUTO_OFFSET_RESET}: Unable to parse duration"
        return None
    return (
        f"Invalid value {value} for configuration {SHARE_AUTO_OFFSET_RESET}: "
        "the value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS.>'."
    )


def validate_group_configs(configs: Mapping[str, str], settings: GroupConfigSettings) -> str | None:
    """Why a group's configs (all of them, after a change) are refused, or None (Kafka's messages)."""
    for name in configs:
        if name not in GROUP_CONFIGS:
            return f"Unknown group config name: {name}"
    effective: dict[str, int] = {}
    for name in INT_CONFIGS:
        if name in configs:
            number, problem = _int_value(name, configs[name])
            if problem is not None:
                return problem
            assert number is not None
            effective[name] = number
        else:
            effective[name] = settings.node(NODE_KEYS[name])
    for name in [n for n in INT_CONFIGS if n in configs]:  # a node's own setting is not bound by them
        low, high = BOUNDS[name]
        if effective[name] < settings.node(low):
            return f"{name} must be greater than or equal to {low}"
        if effective[name] > settings.node(high):
            return f"{name} must be less than or equal to {high}"
    for session, heartbeat in (
        (SESSION_TIMEOUT, HEARTBEAT_INTERVAL),
        (SHARE_SESSION_TIMEOUT, SHARE_HEARTBEAT_INTERVAL),
    ):
        if (session in configs or heartbeat in configs) and effective[session] <= effective[heartbeat]:
            return f"{session} must be greater than {heartbeat}"
    if SHARE_AUTO_OFFSET_RESET in configs:
        problem = offset_reset_problem(configs[SHARE_AUTO_OFFSET_RESET])
        if problem is not None:
            return problem
    level = configs.get(SHARE_ISOLATION_LEVEL)
    if level is not None and level.strip() not in ISOLATION_LEVELS:
        return f"Invalid value {level} for configuration {SHARE_ISOLATION_LEVEL}: String must be one of: " + ", ".join(
            ISOLATION_LEVELS
        )
    return None


def _read_int(configs: Mapping[str, str], name: str) -> int | None:
    """A group's own int config as stored, None where it sets none (or, should a value stored by another version
    not parse, where it cannot be read)."""
    value = configs.get(name)
    if value is None:
        return None
    number, problem = _int_value(name, value)
    return number if problem is None else None


def group_overrides(configs: Mapping[str, str]) -> tuple[int | None, int | None]:
    """A consumer group's own (session timeout, heartbeat interval), None where it sets none."""
    return _read_int(configs, SESSION_TIMEOUT), _read_int(configs, HEARTBEAT_INTERVAL)


@dataclass(frozen=True, slots=True)
class ShareOverrides:
    """A share group's own configs, None where it sets none (or a stored value cannot be read)."""

    session_timeout_ms: int | None = None
    heartbeat_interval_ms: int | None = None
    record_lock_duration_ms: int | None = None
    auto_offset_reset: str | None = None  # earliest, latest or by_duration:<duration>
    isolation_level: str | None = None


def share_overrides(configs: Mapping[str, str]) -> ShareOverrides:
    reset = configs.get(SHARE_AUTO_OFFSET_RESET)
    level = configs.get(SHARE_ISOLATION_LEVEL)
    return ShareOverrides(
        _read_int(configs, SHARE_SESSION_TIMEOUT),
        _read_int(configs, SHARE_HEARTBEAT_INTERVAL),
        _read_int(configs, SHARE_RECORD_LOCK_DURATION),
        reset.strip().lower() if reset is not None and offset_reset_problem(reset) is None else None,
        level.strip() if level is not None and level.strip() in ISOLATION_LEVELS else None,
    )


def describe_group_configs(
    image: MetadataImage, group: str, settings: GroupConfigSettings, names: Sequence[str] = ()
) -> apb.GroupConfigs:
    """Each group config's effective value: the group's own (GROUP_CONFIG), else the node's setting (from its config
    file, STATIC_BROKER_CONFIG, or Kafka's default, DEFAULT_CONFIG), as Kafka's brokers describe a GROUP resource.
    ``names`` picks configs (empty: all); a name that is no group config is left out."""
    if not group:
        return apb.GroupConfigs(
            group=group, error=ErrorCode.INVALID_REQUEST, error_message="Group name must not be empty"
        )
    own = image.group_configs(group)
    entries = []
    for name in [n for n in dict.fromkeys(names) if n in GROUP_CONFIGS] if names else GROUP_CONFIGS:
        if name in own:
            value, source = own[name], apb.GROUP_CONFIG
        else:
            value = str(settings.default_of(name))
            from_file = NODE_KEYS.get(name) in settings.from_node_config
            source = apb.STATIC_BROKER_CONFIG if from_file else apb.DEFAULT_CONFIG
        entries.append(apb.DescribedConfig(name=name, value=value, source=source))
    return apb.GroupConfigs(group=group, configs=entries)


__all__ = [
    "GROUP_CONFIGS",
    "GROUP_RESOURCE",
    "GroupConfigSettings",
    "describe_group_configs",
    "group_overrides",
    "share_overrides",
    "validate_group_configs",
]
