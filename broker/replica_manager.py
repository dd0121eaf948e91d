"""The broker's partitions: which replicas it hosts and leads, kept in step with the metadata image.

On every new metadata image the broker creates logs for partitions assigned to it, applies leader, epoch and ISR
changes (a partition it now follows goes to the fetcher of its leader), and deletes logs of topics removed or
partitions moved elsewhere (as Kafka's ReplicaManager applies metadata deltas).

A replica whose log is offline (its log dir failed, or its data is corrupt) is not applied: it leaves its fetcher,
gives up its role, answers KAFKA_STORAGE_ERROR, and is reported to the controller (``offline_replicas``), which
moves leadership away and drops it from the ISR. Every other partition keeps following the metadata, so one
failed disk never stops the broker's view of the rest.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from odradek.broker.config import NodeConfig
from odradek.broker.fetcher import ReplicaFetcherManager
from odradek.broker.log.config import LogConfig
from odradek.broker.log.manager import LogManager
from odradek.broker.metrics import NodeMetrics
from odradek.broker.partition import Partition
from odradek.broker.replication import IsrChange
from odradek.client.common.metadata_image import (
    BROKER_RESOURCE,
    CLUSTER_DEFAULT,
    MetadataDelta,
    MetadataImage,
    PartitionRegistration,
)
from odradek.client.common.topic_rules import BROKER_LOG_DEFAULTS
from odradek.client.errors import (
    NotLeaderOrFollowerError,
    OdradekError,
    StorageError,
    UnknownTopicOrPartitionError,
)

logger = logging.getLogger(__name__)

# Broker properties that set the default of a topic-level log config.
_LOG_CONFIG_NAMES = set(LogConfig._NAMES)


def broker_log_config(config: NodeConfig) -> LogConfig:
    return LogConfig.from_properties({topic: config[broker] for broker, topic in BROKER_LOG_DEFAULTS.items()})


def cleanup_policies(value: str) -> frozenset[str]:
    """``compact,delete`` -> {compact, delete}; an empty list is neither."""
    return frozenset(p.strip() for p in value.split(",") if p.strip())


def topic_log_config(base: LogConfig, overrides: Mapping[str, str], default_policy: str = "delete") -> LogConfig:
    """The broker defaults with a topic's own log settings on top (other topic configs are not the log's).

    As in Kafka, time and size retention apply only to a topic whose ``cleanup.policy`` (its own, else
    ``default_policy``) includes ``delete``: a compact-only topic (the internal offsets topic) keeps every segment
    until compaction removes old records."""
    own = {k: v for k, v in overrides.items() if k in _LOG_CONFIG_NAMES}
    if "delete" not in cleanup_policies(overrides.get("cleanup.policy", default_policy)):
        own["retention.ms"] = own["retention.bytes"] = "-1"
    return LogConfig.from_properties(own, base)


# Told, after every metadata change applied and every replica taken offline, the hosted partitions: a component
# that acts on leadership (the group coordinator) reads which partitions this broker leads, and at which epoch.
LeadershipListener = Callable[[Mapping[tuple[str, int], Partition]], None]
# Told each partition this broker starts hosting (the log-dir mover resumes a move a restart interrupted).
HostingListener = Callable[[Partition], None]


class ReplicaManager:
    """Hosted partitions and their roles; hands followed partitions to the fetchers and ISR changes to the
    controller sender."""

    def __init__(
        self,
        broker_id: int,
        logs: LogManager,
        base_config: LogConfig,
        min_isr_default: int = 1,
        fetchers: ReplicaFetcherManager | None = None,
        isr_changes: Callable[[Partition, IsrChange], None] = lambda p, c: None,
        metrics: NodeMetrics | None = None,
        unsafe_bug: str = "",
        registered_epoch: Callable[[], int] | None = None,
        cleanup_policy: str = "delete",
    ) -> None:
        self.broker_id = broker_id
        self.unsafe_bug = unsafe_bug
        # The broker epoch of this process's registration (-1 until registered); None applies metadata at once.
        self._registered_epoch = registered_epoch or (lambda: -1)
        self._published = registered_epoch is None
        self.logs = logs
        self.base_config = base_config
        self.min_isr_default = min_isr_default
        # The node file's defaults, and the cluster-wide dynamic defaults that override them (altered live).
        self._static_base, self._static_min_isr = base_config, min_isr_default
        self._static_policy = self.cleanup_policy_default = cleanup_policy
        self._dynamic: dict[str, str] = {}
        self.fetchers = fetchers
        self.isr_changes = isr_changes
        self.metrics = metrics
        self.image = MetadataImage()
        self.partitions: dict[tuple[str, int], Partition] = {}
        # Replicas that cannot serve: their log failed, or no log could be created for them (every dir offline).
        self.offline: dict[tuple[str, int], str] = {}
        self._last_lag_check_ms: int | None = None
        self._leadership_listeners: list[LeadershipListener] = []
        self._hosting_listeners: list[HostingListener] = []

    def add_hosting_listener(self, listener: HostingListener) -> None:
        self._hosting_listeners.append(listener)

    def add_leadership_listener(self, listener: LeadershipListener) -> None:
        self._leadership_listeners.append(listener)

    def _notify_leadership(self) -> None:
        for listener in self._leadership_listeners:
            try:
                listener(self.partitions)
            except Exception:
                logger.exception("a leadership listener failed")

    def registered_epoch(self) -> int:
        """The broker epoch of this process's registration; -1 until registered."""
        return self._registered_epoch()

    def get(self, topic: str, partition: int) -> Partition:
        key = (topic, partition)
        reason = self.offline.get(key)
        if reason is not None:
            raise StorageError(f"{topic}-{partition} is offline on broker {self.broker_id}: {reason}")
        p = self.partitions.get(key)
        if p is None:
            if self.image.partition(topic, partition) is not None:
                raise NotLeaderOrFollowerError(f"broker {self.broker_id} hosts no replica of {topic}-{partition}")
            raise UnknownTopicOrPartitionError(f"unknown topic or partition {topic}-{partition}")
        return p

    def leader_count(self) -> int:
        return sum(1 for p in self.partitions.values() if p.is_leader)

    def min_isr(self, configs: Mapping[str, str]) -> int:
        value = configs.get("min.insync.replicas")
        return int(value) if value is not None else self.min_isr_default

    def publish(self, image: MetadataImage, delta: MetadataDelta | None = None) -> None:
        """The metadata listener (every committed change, and once when this broker has registered).

        Nothing is applied to the partitions until the image holds this broker's own registration: the metadata
        before it is the previous incarnation's, and a restarted broker (perhaps with lost writes or a wiped disk)
        must never take up its old leaderships, which other replicas would follow and truncate to. The registration
        batch moves them away if the old incarnation still held them, so from there on the image is this
        incarnation's, applied whole the first time.
        """
        self.image = image
        if not self._published:
            epoch = self._registered_epoch()
            if epoch < 0 or image.offset < epoch:
                return
            self._published = True
            delta = MetadataDelta(image)
            delta.mark_whole(image.topics)
        if delta is not None:
            self.apply(image, delta)

    def apply(self, image: MetadataImage, delta: MetadataDelta) -> None:
        """Bring hosted partitions in line with ``image`` (called for every committed metadata change)."""
        self.image = image
        now = monotonic_ms()
        for deleted in delta.deleted_topics.values():
            for pid in deleted.partitions:
                self._remove(deleted.name, pid)
        try:
            self._apply_topics(image, delta, now)
        finally:
            self.logs.sync_new_logs()  # the logs this change created, durable before anything else runs
        self.check_offline()

    def _apply_topics(self, image: MetadataImage, delta: MetadataDelta, now: int) -> None:
        every = self._apply_dynamic_defaults(image)  # every topic's effective configs may have moved
        for topic_id in image.topics if every else delta.changed_topics:
            topic = image.topics.get(topic_id)
            if topic is None:
                continue
            configs = image.topic_configs(topic.name)
            config = topic_log_config(self.base_config, configs, self.cleanup_policy_default)
            min_isr = self.min_isr(configs)
            # Only the partitions that changed: an ISR change in a topic of thousands costs one partition's work.
            for state in topic.partitions.values() if every else delta.changed_in(topic):
                key = (topic.name, state.partition)
                if self.broker_id not in state.replicas:
                    self._remove(*key)
                    continue
                try:
                    self._apply_partition(key, state, config, min_isr, now)
                except OdradekError as e:
                    p = self.partitions.get(key)
                    offline = p.log.offline if p is not None else isinstance(e, StorageError)
                    if not offline:
                        raise
                    self._take_offline(key, str(e if p is None else p.log.failure))

    def _apply_dynamic_defaults(self, image: MetadataImage) -> bool:
        """Take up the cluster-wide dynamic defaults (``odradek cluster alter-config``); True when they changed."""
        dynamic = dict(image.configs.get((BROKER_RESOURCE, CLUSTER_DEFAULT), {}))
        if dynamic == self._dynamic:
            return False
        self._dynamic = dynamic
        own = {BROKER_LOG_DEFAULTS[k]: v for k, v in dynamic.items() if BROKER_LOG_DEFAULTS.get(k) in _LOG_CONFIG_NAMES}
        self.base_config = LogConfig.from_properties(own, self._static_base)
        value = dynamic.get("min.insync.replicas")
        self.min_isr_default = int(value) if value is not None else self._static_min_isr
        self.cleanup_policy_default = dynamic.get("log.cleanup.policy", self._static_policy)
        return True

    def cleanup_policy(self, topic: str) -> frozenset[str]:
        """The topic's effective ``cleanup.policy``: its own, else the cluster's dynamic default, else the node's."""
        return cleanup_policies(self.image.topic_configs(topic).get("cleanup.policy", self.cleanup_policy_default))

    def _apply_partition(
        self, key: tuple[str, int], state: PartitionRegistration, config: LogConfig, min_isr: int, now: int
    ) -> None:
        p = self.partitions.get(key)
        if p is None:
            if key in self.offline:
                return  # no log could be created for it: stays offline until the broker restarts
            log_ = self.logs.get_or_create_log(*key, config, sync=False)  # synced at the end of ``apply``
            p = Partition(key[0], key[1], log_, self.broker_id, self.isr_changes)
            p.ack_before_replication = self.unsafe_bug == "ack-before-replication"
            self.partitions[key] = p
            for listener in self._hosting_listeners:
                listener(p)
        else:
            p.log.update_config(config)
        if p.log.offline:
            self._take_offline(key, str(p.log.failure))
            return
        before = p.isr if p.is_leader else None
        p.update(state, min_isr, now)
        self._count_isr_change(before, p)
        self._follow(key, p)

    # -- offline replicas ----------------------------------------------------------------------------------------

    def check_offline(self) -> None:
        """Take offline every hosted replica whose log failed (called when a log dir goes offline, and after
        each metadata change)."""
        for key, p in list(self.partitions.items()):
            if p.log.offline and key not in self.offline:
                self._take_offline(key, str(p.log.failure))
        self._notify_leadership()

    def _take_offline(self, key: tuple[str, int], reason: str) -> None:
        if key in self.offline:
            return
        self.offline[key] = reason
        logger.error("replica %s-%d is offline: %s", key[0], key[1], reason)
        if self.fetchers is not None:
            self.fetchers.remove(key)
        p = self.partitions.get(key)
        if p is not None:
            p.close()  # no longer leads or follows here: parked produces and fetches are answered now

    def offline_replicas(self) -> dict[bytes, list[int]]:
        """Offline replicas by topic id, for the heartbeat (topics no longer in the metadata are left out)."""
        out: dict[bytes, list[int]] = {}
        for name, index in sorted(self.offline):
            topic_id = self.image.topic_ids.get(name)
            if topic_id is not None:
                out.setdefault(topic_id, []).append(index)
        return out

    def _count_isr_change(self, before: tuple[int, ...] | None, p: Partition) -> None:
        if self.metrics is None or before is None or not p.is_leader or before == p.isr:
            return
        if set(p.isr) - set(before):
            self.metrics.isr_expands.inc()
        if set(before) - set(p.isr):
            self.metrics.isr_shrinks.inc()

    def _follow(self, key: tuple[str, int], p: Partition) -> None:
        if self.fetchers is None:
            return
        if p.is_follower:
            self.fetchers.assign(p)
        else:
            self.fetchers.remove(key)

    def check_lagging(self, lag_max_ms: int, now_ms: int | None = None) -> None:
        """Periodic: leaders ask to drop followers that stopped keeping up. A check a whole lag window after the
        previous one means this broker itself stalled (a pause, a frozen event loop): its leaders then give their
        followers a new window instead of dropping them for a silence nobody was listening to."""
        now = monotonic_ms() if now_ms is None else now_ms
        gap = now - (now if self._last_lag_check_ms is None else self._last_lag_check_ms)
        self._last_lag_check_ms = now
        stalled = gap > lag_max_ms
        if stalled:
            logger.warning(
                "broker %d ran no lag check for %d ms: its followers get a new lag window", self.broker_id, gap
            )
        for p in self.partitions.values():
            if p.is_leader and not p.log.offline:
                if stalled:
                    p.on_leader_stall(now)
                p.check_lagging(now, lag_max_ms)

    def _remove(self, topic: str, partition: int) -> None:
        self.offline.pop((topic, partition), None)
        p = self.partitions.pop((topic, partition), None)
        if p is not None:
            p.close()
            if self.fetchers is not None:
                self.fetchers.remove((topic, partition))
        if p is not None or self.logs.get_log(topic, partition):
            self.logs.delete_log(topic, partition)
            logger.info("removed replica %s-%d", topic, partition)


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000
