"""The broker's log cleaner: ``log.cleaner.threads`` cleaner threads over the compacted partitions this broker
hosts (those whose effective ``cleanup.policy`` includes ``compact``), each log's first dirty offset kept in its
log dir's ``cleaner-offset-checkpoint``, and the figures for metrics and DescribeLogDirs.

Every replica cleans its own log, as in Kafka, with one difference: a tombstone is removed only below the offset
every replica of the partition holds durably (``Partition.tombstone_horizon``), so a replica that was away longer
than ``delete.retention.ms``, or lost unflushed records to a power loss, still meets every delete when it catches
up instead of keeping the deleted values.
That offset is read when a pass starts and again before each of its swaps (a replica added meanwhile lowers it).
A replica's durable offset advances when it fsyncs, which an idle log otherwise does only at its next segment roll
(never, for a follower whose active segment holds the last records when writes stop): so each round, a compacted
log that has had no append for ``IDLE_FLUSH_MS`` is flushed, and its deletes complete.

A partition whose replica is moving to another log dir of this broker is not cleaned from the start of the move to
its swap, cancel or failure (``LogManager.cleaning_paused``: while it has a future log, also when a restart resumes
the move), and a pass under way when the move starts stops before its next swap, as Kafka aborts and pauses
cleaning around a move; the partition keeps its first dirty offset meanwhile.

The threads read the partitions and the metadata image, which the event loop replaces rather than mutates, and
each ``Log`` under its own lock; nothing here runs on the event loop but ``gauges`` and ``uncleanable``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Hashable, Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from odradek.broker.config import NodeConfig
from odradek.broker.log.cleaner.cleaner import Cleaner
from odradek.broker.log.cleaner.manager import CleanerManager
from odradek.broker.log.cleaner.policy import CompactionConfig
from odradek.broker.log.cleaner.runner import CleanerThread, CompactedLog, read_checkpoint, write_checkpoint
from odradek.broker.log.cleaner.throttle import Throttler
from odradek.broker.log.log import Log, wall_clock_ms
from odradek.broker.log.manager import LogManager
from odradek.broker.replica_manager import ReplicaManager
from odradek.client.errors import OdradekError

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

IDLE_FLUSH_MS = 1000
"""A compacted log without appends for this long is fsynced, so that the tombstone horizon can pass its end."""

# Topic config -> the node property that defaults it (also a cluster-wide dynamic default).
COMPACTION_KEYS = {
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
}


def compaction_config(
    topic_configs: Mapping[str, str], dynamic: Mapping[str, str], node: NodeConfig
) -> CompactionConfig:
    """A topic's compaction settings: its own, else the cluster's dynamic default, else the node's."""

    def value(topic_key: str) -> str:
        node_key = COMPACTION_KEYS[topic_key]
        own = topic_configs.get(topic_key, dynamic.get(node_key))
        return str(node[node_key]) if own is None else own

    return CompactionConfig(
        min_cleanable_dirty_ratio=float(value("min.cleanable.dirty.ratio")),
        min_compaction_lag_ms=int(value("min.compaction.lag.ms")),
        max_compaction_lag_ms=int(value("max.compaction.lag.ms")),
        delete_retention_ms=int(value("delete.retention.ms")),
    )


class BrokerLogCleaner:
    def __init__(
        self,
        config: NodeConfig,
        logs: LogManager,
        replicas: ReplicaManager,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.config = config
        self.logs = logs
        self.replicas = replicas
        first_dirty: dict[Hashable, int] = {}
        for log_dir in logs.online_dirs():
            try:
                first_dirty.update(read_checkpoint(log_dir))
            except OdradekError as e:  # a damaged checkpoint: those logs are cleaned from their start again
                logger.warning("ignoring the cleaner checkpoint of %s: %s", log_dir, e)
        self.manager = CleanerManager(clock(), first_dirty)
        self._seen: dict[TopicPartition, Log] = {}
        self._lock = threading.Lock()  # _seen and the checkpoint files, shared by the threads
        threads = config["log.cleaner.threads"] if config["log.cleaner.enable"] else 0
        throttler = Throttler(config["log.cleaner.io.max.bytes.per.second"], clock())
        self.threads = [
            CleanerThread(
                f"log-cleaner-{i}",
                self.manager,
                Cleaner(
                    config["log.cleaner.dedupe.buffer.size"] // max(threads, 1),
                    load_factor=config["log.cleaner.io.buffer.load.factor"],
                    clock=clock,
                    throttler=throttler,
                ),
                self.compacted_logs,
                backoff_ms=config["log.cleaner.backoff.ms"],
                on_pass=self._checkpoint,
                clock=clock,
            )
            for i in range(threads)
        ]
        self._clock = clock

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def stop(self) -> None:
        """Waits for the passes under way (each swap is crash-safe, but a clean stop should not need recovery)."""
        for t in self.threads:
            t.stop()

    def compacted_logs(self) -> dict[Hashable, CompactedLog]:
        """The compacted logs hosted now (a cleaner thread's ``source``). Logs that went away or were replaced
        (a topic deleted and created again) are forgotten, truncations lower their first dirty offset."""
        image = self.replicas.image
        dynamic = image.cluster_defaults()
        offline = self.replicas.offline
        out: dict[Hashable, CompactedLog] = {}
        hosted = dict(self.replicas.partitions)
        for key, p in hosted.items():
            if key in offline or p.log.offline or "compact" not in self.replicas.cleanup_policy(key[0]):
                continue
            with contextlib.suppress(OdradekError):  # a failing log goes offline; the next round skips it
                p.log.flush_if_idle(IDLE_FLUSH_MS)
            config = compaction_config(image.topic_configs(key[0]), dynamic, self.config)
            paused = functools.partial(self.logs.cleaning_paused, *key)
            out[key] = CompactedLog(p.log, config, p.tombstone_horizon(), p.tombstone_horizon, paused)
        with self._lock:
            for seen in list(self._seen):
                if seen not in out or out[seen].log is not self._seen[seen]:
                    del self._seen[seen]
                    self.manager.forget(seen)
            for key in hosted:
                entry = out.get(key)
                if entry is None:
                    continue
                if key not in self._seen:
                    self._seen[key] = entry.log
                    self._bound(key, entry.log)
                truncated = entry.log.take_truncation()
                if truncated is not None:
                    self.manager.truncated(key, truncated)
        return out

    def _bound(self, key: TopicPartition, log: Log) -> None:
        """A checkpointed first dirty offset beyond a log's end belongs to an older log of that name."""
        state = self.manager.log_state(key)
        if state is not None and state.first_dirty > log.log_end_offset:
            self.manager.truncated(key, log.log_start_offset)

    def _checkpoint(self, key: Hashable) -> None:
        """After a pass: write the first dirty offsets of the logs in ``key``'s log dir."""
        assert isinstance(key, tuple)
        log_dir = self.logs.dir_of(*key)
        if log_dir is None:
            return
        offsets = {
            k: v
            for k, v in self.manager.first_dirty_offsets().items()
            if isinstance(k, tuple) and self.logs.dir_of(*k) == log_dir
        }
        with self._lock:
            try:
                write_checkpoint(log_dir, offsets)
            except OSError as e:
                self.logs.fail_dir(log_dir, e)

    def uncleanable(self) -> dict[TopicPartition, str]:
        """Partitions whose cleaning failed (a corrupt batch...), with why; the others keep being cleaned."""
        return {k: why for k, why in self.manager.uncleanable().items() if isinstance(k, tuple)}

    def gauges(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        """Kafka's LogCleaner and LogCleanerManager metrics, read at scrape time."""
        m = self.manager.metrics(self._clock())
        uncleanable = self.uncleanable()
        sizes = {k: log.size_in_bytes for k, log in self.logs.logs().items() if k in uncleanable and not log.offline}
        last = m.last_pass
        gauges = (
            ("max_dirty_ratio", "largest dirty ratio of the compacted logs (percent)", 100 * m.max_dirty_ratio),
            ("time_since_last_run_ms", "since a cleaner thread last looked for work", m.time_since_last_run_ms),
            ("uncleanable_partitions", "logs the cleaner gave up on", len(uncleanable)),
            ("uncleanable_bytes", "bytes of the logs the cleaner gave up on", sum(sizes.values())),
            ("last_pass_bytes_read", "bytes the last pass read", last.bytes_read if last else 0),
            ("last_pass_bytes_written", "bytes the last pass wrote", last.bytes_written if last else 0),
            ("last_pass_bytes_removed", "bytes the last pass removed", last.bytes_removed if last else 0),
            ("last_pass_duration_ms", "how long the last pass took", last.duration_ms if last else 0),
        )
        for name, doc, value in gauges:
            yield GaugeMetricFamily(f"odradek_log_cleaner_{name}", doc, value=value)
        counters = (
            ("passes", "cleaning passes run", m.passes),
            ("aborted_passes", "passes redone because the log changed under them", m.aborted_passes),
            ("bytes_read", "bytes read by the cleaner", m.bytes_read),
            ("bytes_written", "bytes written by the cleaner", m.bytes_written),
        )
        for name, doc, value in counters:
            yield CounterMetricFamily(f"odradek_log_cleaner_{name}", doc, value=value)
        flagged = GaugeMetricFamily(
            "odradek_log_cleaner_uncleanable", "1 per partition the cleaner gave up on", labels=["topic", "partition"]
        )
        for topic, index in sorted(uncleanable):
            flagged.add_metric([topic, str(index)], 1)
        yield flagged
