"""The broker's partitions: which replicas it hosts and leads, kept in step with the metadata image.

On every new metadata image the broker creates logs for partitions assigned to it, applies leader and epoch
changes, and deletes logs of topics removed or partitions moved elsewhere (as Kafka's ReplicaManager applies
metadata deltas).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from odradek.broker.config import NodeConfig
from odradek.broker.log.config import LogConfig
from odradek.broker.log.manager import LogManager
from odradek.broker.partition import Partition
from odradek.client.errors import NotLeaderOrFollowerError, UnknownTopicOrPartitionError
from odradek.controller.metadata.image import MetadataDelta, MetadataImage

log = logging.getLogger(__name__)

# Broker properties that set the default of a topic-level log config.
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
}
_LOG_CONFIG_NAMES = set(LogConfig._NAMES)


def broker_log_config(config: NodeConfig) -> LogConfig:
    return LogConfig.from_properties({topic: config[broker] for broker, topic in BROKER_LOG_DEFAULTS.items()})


def topic_log_config(base: LogConfig, overrides: Mapping[str, str]) -> LogConfig:
    """The broker defaults with a topic's own log settings on top (other topic configs are not the log's)."""
    return LogConfig.from_properties({k: v for k, v in overrides.items() if k in _LOG_CONFIG_NAMES}, base)


class ReplicaManager:
    def __init__(self, broker_id: int, logs: LogManager, base_config: LogConfig) -> None:
        self.broker_id = broker_id
        self.logs = logs
        self.base_config = base_config
        self.image = MetadataImage()
        self.partitions: dict[tuple[str, int], Partition] = {}

    def get(self, topic: str, partition: int) -> Partition:
        p = self.partitions.get((topic, partition))
        if p is None:
            if self.image.partition(topic, partition) is not None:
                raise NotLeaderOrFollowerError(f"broker {self.broker_id} hosts no replica of {topic}-{partition}")
            raise UnknownTopicOrPartitionError(f"unknown topic or partition {topic}-{partition}")
        return p

    def leader_count(self) -> int:
        return sum(1 for p in self.partitions.values() if p.is_leader)

    def apply(self, image: MetadataImage, delta: MetadataDelta) -> None:
        """Bring hosted partitions in line with ``image`` (called for every committed metadata change)."""
        self.image = image
        for topic in delta.deleted_topics.values():
            for pid in topic.partitions:
                self._remove(topic.name, pid)
        for topic_id in delta.changed_topics:
            topic = image.topics.get(topic_id)
            if topic is None:
                continue
            config = topic_log_config(self.base_config, image.topic_configs(topic.name))
            for state in topic.partitions.values():
                key = (topic.name, state.partition)
                if self.broker_id not in state.replicas:
                    self._remove(*key)
                    continue
                p = self.partitions.get(key)
                if p is None:
                    p = Partition(
                        topic.name, state.partition, self.logs.get_or_create_log(*key, config), self.broker_id
                    )
                    self.partitions[key] = p
                else:
                    p.log.update_config(config)
                p.update(state.leader, state.leader_epoch, state.partition_epoch, state.replicas, state.isr)

    def _remove(self, topic: str, partition: int) -> None:
        if self.partitions.pop((topic, partition), None) is not None or self.logs.get_log(topic, partition):
            self.logs.delete_log(topic, partition)
            log.info("removed replica %s-%d", topic, partition)
