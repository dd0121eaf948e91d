"""Configs: DescribeConfigs and IncrementalAlterConfigs of topics, of the cluster-wide dynamic broker defaults, and
of groups (Kafka's GROUP resource, KIP-848); and :func:`topic_config_entries`, what a topic's configs are under a
node's defaults, which the service answers DescribeConfigs with and the Kafka listener CreateTopics v5+."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

from odradek.client.common.topic_rules import TopicDefault, node_key
from odradek.client.errors import ErrorCode

NONE = int(ErrorCode.NONE)


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str


class ConfigSource(IntEnum):
    """Where a config's effective value comes from (Kafka's ConfigSource, the values odradek has; numbered as
    odradek's wire enum, not as Kafka's)."""

    UNKNOWN = 0
    DEFAULT_CONFIG = 1  # odradek's built-in default
    STATIC_BROKER_CONFIG = 2  # the answering node's config file sets the default
    TOPIC_CONFIG = 3  # set on the topic
    DYNAMIC_DEFAULT_BROKER_CONFIG = 4  # the cluster-wide dynamic default
    GROUP_CONFIG = 5  # set on the group


@dataclass(frozen=True, slots=True)
class DescribedConfig:
    name: str
    value: str  # the effective value
    source: int = ConfigSource.UNKNOWN  # a ConfigSource
    read_only: bool = False  # no request can change it
    sensitive: bool = False


@dataclass(frozen=True, slots=True)
class DescribeConfigs:
    topics: tuple[str, ...] = ()
    config_names: tuple[str, ...] = ()  # empty: every config (of each topic and group)
    cluster_defaults: bool = False  # also the dynamic broker configs (the cluster-wide defaults)
    groups: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicConfigs:
    topic: str
    error: int = NONE
    error_message: str = ""
    configs: tuple[DescribedConfig, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupConfigs:
    """A group's configs: each one's effective value, its own or the answering node's group.consumer.* setting."""

    group: str
    error: int = NONE
    error_message: str = ""
    configs: tuple[DescribedConfig, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribeConfigsAnswer:
    error: int = NONE  # the whole request (the cluster defaults asked alone and refused)
    node_id: int = 0  # the node whose config gave the STATIC_BROKER_CONFIG / DEFAULT_CONFIG values
    topics: tuple[TopicConfigs, ...] = ()
    cluster_defaults: tuple[DescribedConfig, ...] = ()
    # Why cluster_defaults is empty although asked (CLUSTER_AUTHORIZATION_FAILED); the topics are answered all the
    # same.
    cluster_defaults_error: int = NONE
    groups: tuple[GroupConfigs, ...] = ()


class AlterOp(IntEnum):
    """Kafka's IncrementalAlterConfigs operations, with Kafka's numbers."""

    SET = 0
    DELETE = 1  # remove the resource's own value: the default applies again
    APPEND = 2  # add values to a list config
    SUBTRACT = 3  # remove values from a list config


@dataclass(frozen=True, slots=True)
class AlterableConfig:
    name: str
    op: int = AlterOp.SET  # an AlterOp
    value: str = ""  # ignored by DELETE


@dataclass(frozen=True, slots=True)
class AlterTopicConfigs:
    topic: str
    configs: tuple[AlterableConfig, ...]


@dataclass(frozen=True, slots=True)
class AlterGroupConfigs:
    group: str
    configs: tuple[AlterableConfig, ...]


@dataclass(frozen=True, slots=True)
class IncrementalAlterConfigs:
    """Each resource's changes apply together or not at all, independently of the others'."""

    topics: tuple[AlterTopicConfigs, ...] = ()
    validate_only: bool = False
    # The cluster-wide dynamic broker defaults (node keys such as log.retention.ms); empty: left alone.
    cluster_defaults: tuple[AlterableConfig, ...] = ()
    groups: tuple[AlterGroupConfigs, ...] = ()


@dataclass(frozen=True, slots=True)
class AlterConfigsResult:
    """One resource's outcome (``name``: the topic or group; empty for the cluster defaults) and its own configs
    after the change (or as they would be: validate_only)."""

    name: str = ""
    error: int = NONE
    error_message: str = ""
    configs: tuple[ConfigEntry, ...] = ()


@dataclass(frozen=True, slots=True)
class IncrementalAlterConfigsAnswer:
    error: int = NONE  # the whole request (NOT_CONTROLLER...)
    results: tuple[AlterConfigsResult, ...] = ()  # one per topic, in request order
    cluster_defaults_result: AlterConfigsResult | None = None  # when cluster defaults were given
    group_results: tuple[AlterConfigsResult, ...] = ()  # one per group, in request order
    metadata_offset: int | None = None


def topic_config_entries(
    own: Mapping[str, str], dynamic: Mapping[str, str], defaults: Mapping[str, TopicDefault], names: Sequence[str] = ()
) -> tuple[DescribedConfig, ...]:
    """The configs of a topic whose own configs are ``own``, under the cluster-wide dynamic defaults ``dynamic`` and
    a node's topic defaults ``defaults``: each config's effective value and source, set on the topic, else the
    cluster-wide dynamic default, else the node's (from its config file, or odradek's built-in). ``names`` picks
    configs (empty: all), each once; a name the topic has no config of is left out, as Kafka leaves it. Every one
    can be altered; none is sensitive."""
    known = set(own) | set(defaults)
    entries = []
    for key in [n for n in dict.fromkeys(names) if n in known] if names else sorted(known):
        node = node_key(key)
        source: ConfigSource
        if key in own:
            value, source = own[key], ConfigSource.TOPIC_CONFIG
        elif node is not None and node in dynamic:
            value, source = dynamic[node], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        else:
            default = defaults[key]
            value = default.value
            source = ConfigSource.STATIC_BROKER_CONFIG if default.from_node_config else ConfigSource.DEFAULT_CONFIG
        entries.append(DescribedConfig(name=key, value=value, source=source, read_only=False))
    return tuple(entries)
