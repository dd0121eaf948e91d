"""KIP-848 group configs: Kafka's GROUP config resource (type 32), one set of configs per group id.

A group may have its own ``consumer.session.timeout.ms`` and ``consumer.heartbeat.interval.ms``, overriding the
brokers' ``group.consumer.session.timeout.ms`` and ``group.consumer.heartbeat.interval.ms`` for that group. They are
set with IncrementalAlterConfigs (or AlterConfigs) on the GROUP resource and stored in the metadata log as
ConfigRecords of resource type 32, as Kafka stores them, so every broker's image has them and the coordinator of
the group applies them at each member's next heartbeat (the session timeout it starts, the heartbeat interval it
answers). The group need not exist.

Kafka's rules (GroupConfig.validate), checked by the active controller against its own settings:

- a name other than the group configs is INVALID_CONFIG ``Unknown group config name: <name>``; Kafka's share group
  configs (``share.*``, KIP-932) are refused too: odradek's share groups take the brokers' ``group.share.*``
  settings, the same for every group;
- a value must be an int of at least 1;
- the session timeout must lie within ``group.consumer.min.session.timeout.ms`` and
  ``group.consumer.max.session.timeout.ms``, the heartbeat interval within ``group.consumer.min.heartbeat.interval.ms``
  and ``group.consumer.max.heartbeat.interval.ms``, and the session timeout must exceed the heartbeat interval
  (each taken as the group sets it, else as the node's setting);
- the empty group name (a default for every group) is INVALID_REQUEST, as Kafka refuses default group resources.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from odradek.client.common.metadata_image import GROUP_RESOURCE, MetadataImage
from odradek.client.errors import ErrorCode
from odradek.proto import admin_pb2 as apb

SESSION_TIMEOUT = "consumer.session.timeout.ms"
HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"
GROUP_CONFIGS = (SESSION_TIMEOUT, HEARTBEAT_INTERVAL)
# Kafka 4's share group configs (KIP-932): valid names there, refused here (share groups take the brokers' settings).
SHARE_GROUP_CONFIGS = frozenset(
    {
        "share.session.timeout.ms",
        "share.heartbeat.interval.ms",
        "share.record.lock.duration.ms",
        "share.auto.offset.reset",
        "share.isolation.level",
    }
)
# Each group config's node setting: its default, and the bounds a group's own value must keep to.
NODE_KEYS = {
    SESSION_TIMEOUT: "group.consumer.session.timeout.ms",
    HEARTBEAT_INTERVAL: "group.consumer.heartbeat.interval.ms",
}


class NodeSettings(Protocol):
    """What ``GroupConfigSettings.from_node`` reads of a node's config (the broker's ``NodeConfig``)."""

    def __getitem__(self, name: str, /) -> Any: ...

    def is_set(self, name: str, /) -> bool: ...


@dataclass(frozen=True, slots=True)
class GroupConfigSettings:
    """A node's group.consumer.* settings that group configs default to and are bounded by (Kafka's defaults)."""

    session_timeout_ms: int = 45_000
    min_session_timeout_ms: int = 45_000
    max_session_timeout_ms: int = 60_000
    heartbeat_interval_ms: int = 5_000
    min_heartbeat_interval_ms: int = 5_000
    max_heartbeat_interval_ms: int = 15_000
    from_node_config: frozenset[str] = frozenset()  # the node keys its config file sets

    @classmethod
    def from_node(cls, c: NodeSettings) -> GroupConfigSettings:
        keys = [
            "group.consumer.session.timeout.ms",
            "group.consumer.min.session.timeout.ms",
            "group.consumer.max.session.timeout.ms",
            "group.consumer.heartbeat.interval.ms",
            "group.consumer.min.heartbeat.interval.ms",
            "group.consumer.max.heartbeat.interval.ms",
        ]
        session, min_session, max_session, interval, min_interval, max_interval = (c[k] for k in keys)
        return cls(
            session_timeout_ms=session,
            min_session_timeout_ms=min_session,
            max_session_timeout_ms=max_session,
            heartbeat_interval_ms=interval,
            min_heartbeat_interval_ms=min_interval,
            max_heartbeat_interval_ms=max_interval,
            from_node_config=frozenset(k for k in NODE_KEYS.values() if c.is_set(k)),
        )

    def default_of(self, name: str) -> int:
        return self.session_timeout_ms if name == SESSION_TIMEOUT else self.heartbeat_interval_ms


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


def validate_group_configs(configs: Mapping[str, str], settings: GroupConfigSettings) -> str | None:
    """Why a group's configs (all of them, after a change) are refused, or None (Kafka's messages)."""
    for name in configs:
        if name in SHARE_GROUP_CONFIGS:
            return f"Group config {name} is not supported: share groups take the brokers' group.share.* settings"
        if name not in GROUP_CONFIGS:
            return f"Unknown group config name: {name}"
    effective: dict[str, int] = {}
    for name in GROUP_CONFIGS:
        if name in configs:
            number, problem = _int_value(name, configs[name])
            if problem is not None:
                return problem
            assert number is not None
            effective[name] = number
        else:
            effective[name] = settings.default_of(name)
    heartbeat, session = effective[HEARTBEAT_INTERVAL], effective[SESSION_TIMEOUT]
    if heartbeat < settings.min_heartbeat_interval_ms:
        return f"{HEARTBEAT_INTERVAL} must be greater than or equal to group.consumer.min.heartbeat.interval.ms"
    if heartbeat > settings.max_heartbeat_interval_ms:
        return f"{HEARTBEAT_INTERVAL} must be less than or equal to group.consumer.max.heartbeat.interval.ms"
    if session < settings.min_session_timeout_ms:
        return f"{SESSION_TIMEOUT} must be greater than or equal to group.consumer.min.session.timeout.ms"
    if session > settings.max_session_timeout_ms:
        return f"{SESSION_TIMEOUT} must be less than or equal to group.consumer.max.session.timeout.ms"
    if session <= heartbeat:
        return f"{SESSION_TIMEOUT} must be greater than {HEARTBEAT_INTERVAL}"
    return None


def group_overrides(configs: Mapping[str, str]) -> tuple[int | None, int | None]:
    """A group's own (session timeout, heartbeat interval) as stored, None where it sets none (or, should a value
    stored by another version not parse, where it cannot be read)."""

    def read(name: str) -> int | None:
        value = configs.get(name)
        if value is None:
            return None
        number, problem = _int_value(name, value)
        return number if problem is None else None

    return read(SESSION_TIMEOUT), read(HEARTBEAT_INTERVAL)


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
            source = apb.STATIC_BROKER_CONFIG if NODE_KEYS[name] in settings.from_node_config else apb.DEFAULT_CONFIG
        entries.append(apb.DescribedConfig(name=name, value=value, source=source))
    return apb.GroupConfigs(group=group, configs=entries)


__all__ = [
    "GROUP_CONFIGS",
    "GROUP_RESOURCE",
    "GroupConfigSettings",
    "describe_group_configs",
    "group_overrides",
    "validate_group_configs",
]
