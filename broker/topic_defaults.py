"""What each topic config defaults to on this node, and whether the node's config file or odradek sets it.

A topic config not set on the topic takes the node's default: the node property of Kafka's name for it
(``retention.ms`` <- ``log.retention.ms``) when the config file gives one, else odradek's built-in value. This is
the ``broker`` / ``default`` source of ``odradek topic describe --all`` (Kafka's STATIC_BROKER_CONFIG and
DEFAULT_CONFIG).
"""

from __future__ import annotations

from typing import Any

from odradek.broker.config import SCHEMA, NodeConfig
from odradek.broker.log.config import LogConfig
from odradek.client.common.topic_rules import TOPIC_CONFIGS, TopicDefault, node_key

# Topic configs without a node property or a log setting: Kafka's default (message.format.version has no effect).
_FIXED_DEFAULTS = {"message.format.version": "3.0-IV1"}


def config_text(value: Any) -> str:
    """A value as a topic config spells it (``true``/``false`` for booleans)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _built_in(topic_key: str) -> str:
    if topic_key in _FIXED_DEFAULTS:
        return _FIXED_DEFAULTS[topic_key]
    attr = LogConfig._NAMES.get(topic_key)
    if attr is None:
        raise KeyError(f"no node key and no built-in default for topic config '{topic_key}'")
    return config_text(getattr(LogConfig(), attr))


def _schema_default(key: str) -> Any:
    parse, default = SCHEMA[key]
    return parse(default)


def topic_defaults(config: NodeConfig | None = None) -> dict[str, TopicDefault]:
    """Every topic config's default on a node with ``config`` (None: a node whose file sets nothing)."""
    out = {}
    for name in TOPIC_CONFIGS:
        key = node_key(name)
        if key is None:
            out[name] = TopicDefault(_built_in(name), False)
        elif config is None:
            out[name] = TopicDefault(config_text(_schema_default(key)), False)
        else:
            out[name] = TopicDefault(config_text(config[key]), config.is_set(key))
    return out
