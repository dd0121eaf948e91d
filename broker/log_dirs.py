"""What each log dir holds (future replicas of moves included) and how full its disk is: the figures behind the
log-dir size metrics.

Read at scrape time from the log manager (replica sizes) and the file system (total and free bytes); an offline
dir reports no disk figures, since touching it is what failed.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily

from odradek.broker.log.manager import LogManager
from odradek.broker.metrics import gauge


@dataclass(frozen=True)
class ReplicaUsage:
    topic: str
    partition: int
    size_bytes: int
    is_future: bool = False  # the copy of a replica moving into this dir (AlterReplicaLogDirs)


@dataclass(frozen=True)
class LogDirUsage:
    path: str
    online: bool
    total_bytes: int = -1  # -1: unknown (the dir is offline)
    free_bytes: int = -1
    replicas: list[ReplicaUsage] = field(default_factory=list)

    @property
    def size_bytes(self) -> int:
        return sum(r.size_bytes for r in self.replicas)


def log_dir_usage(logs: LogManager) -> list[LogDirUsage]:
    offline = set(logs.offline_dirs())
    by_dir: dict[Path, list[ReplicaUsage]] = {d: [] for d in logs.log_dirs}
    for (topic, partition), log in logs.logs().items():
        directory = logs.dir_of(topic, partition)
        if directory in by_dir and directory not in offline:
            by_dir[directory].append(ReplicaUsage(topic, partition, log.size_in_bytes))
    for (topic, partition), log in logs.future_logs().items():
        directory = logs.future_dir_of(topic, partition)
        if directory in by_dir and directory not in offline:
            by_dir[directory].append(ReplicaUsage(topic, partition, log.size_in_bytes, is_future=True))
    out = []
    for directory, replicas in by_dir.items():
        if directory in offline:
            out.append(LogDirUsage(str(directory), online=False))
            continue
        try:
            disk = shutil.disk_usage(directory)
        except OSError:
            out.append(LogDirUsage(str(directory), online=False))
            continue
        replicas.sort(key=lambda r: (r.topic, r.partition, r.is_future))
        out.append(LogDirUsage(str(directory), True, disk.total, disk.free, replicas))
    return out


def log_dir_gauges(usage: list[LogDirUsage]) -> Iterator[GaugeMetricFamily]:
    """Per log dir: online (1/0), bytes its replicas use, its disk's total and free bytes; per replica: size."""
    online = gauge("odradek_log_dir_online", "1 while the log dir is online, 0 after an I/O error", ["dir"])
    size = gauge("odradek_log_dir_size_bytes", "bytes of the replicas in the log dir", ["dir"])
    total = gauge("odradek_log_dir_total_bytes", "size of the file system holding the log dir", ["dir"])
    free = gauge("odradek_log_dir_free_bytes", "free bytes on the file system holding the log dir", ["dir"])
    replica = gauge(
        "odradek_partition_size_bytes",
        "bytes of this broker's replica (or of its future replica, moving into the dir)",
        ["topic", "partition", "dir"],
    )
    for d in usage:
        online.add_metric([d.path], int(d.online))
        if not d.online:
            continue
        size.add_metric([d.path], d.size_bytes)
        total.add_metric([d.path], d.total_bytes)
        free.add_metric([d.path], d.free_bytes)
        for r in d.replicas:
            replica.add_metric([r.topic, str(r.partition), d.path], r.size_bytes)
    yield from (online, size, total, free, replica)
