"""The DescribeLogDirs answer (``odradek broker log-dirs``, like kafka-log-dirs): per log dir its state and disk
figures, per replica in it its size, log start and end offsets, how far it is behind the partition's leader, and
whether the log cleaner gave up on it.

The figures are the ones the log-dir metrics export (``broker/log_dirs.py``); the replica positions come from the
replica manager: a leader is 0 behind, a follower as far as its last fetch found it, any other replica unknown. A
replica moving between this broker's dirs shows twice, as in Kafka: in its destination dir as a future replica,
behind the current one by the offsets it has still to copy.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from odradek.broker.log_dirs import LogDirUsage, log_dir_usage
from odradek.broker.replica_manager import ReplicaManager
from odradek.client.errors import ErrorCode

UNKNOWN = -1


@dataclass(frozen=True, slots=True)
class LogDirReplica:
    topic: str
    partition: int
    size_bytes: int
    offset_lag: int  # offsets behind the partition's leader: 0 on the leader, UNKNOWN when not known
    log_end_offset: int
    is_leader: bool
    log_start_offset: int
    uncleanable: str  # why the log cleaner gave up on this replica ("": it did not)
    # The copy of a replica moving into this dir: its lag is behind the replica it will replace.
    is_future: bool


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    path: str
    error: int = ErrorCode.NONE  # KAFKA_STORAGE_ERROR: the dir is offline (no figures)
    total_bytes: int = UNKNOWN  # of the file system holding the dir
    free_bytes: int = UNKNOWN
    used_bytes: int = UNKNOWN  # bytes of every replica in the dir (whatever the topic filter)
    replicas: tuple[LogDirReplica, ...] = ()


@dataclass(frozen=True, slots=True)
class LogDirsAnswer:
    broker_id: int
    dirs: tuple[LogDirDescription, ...] = ()
    error: int = ErrorCode.NONE  # CLUSTER_AUTHORIZATION_FAILED: the caller may not describe them


@dataclass(frozen=True)
class ReplicaPosition:
    log_end_offset: int
    is_leader: bool
    offset_lag: int  # offsets behind the leader; UNKNOWN when no fetch has told yet
    log_start_offset: int = UNKNOWN


def describe_log_dirs(
    broker_id: int,
    usage: list[LogDirUsage],
    positions: Mapping[tuple[str, int], ReplicaPosition],
    topics: Collection[str] = (),
    uncleanable: Mapping[tuple[str, int], str] | None = None,
    futures: Mapping[tuple[str, int], ReplicaPosition] | None = None,
) -> LogDirsAnswer:
    """The answer for ``usage`` (every dir, the replicas of ``topics`` in each; all replicas when empty);
    ``uncleanable``: the replicas the log cleaner gave up on, and why; ``futures``: the future replicas'
    positions."""
    uncleanable = uncleanable or {}
    futures = futures or {}
    wanted = set(topics)
    dirs = []
    for d in usage:
        if not d.online:
            dirs.append(LogDirDescription(d.path, ErrorCode.KAFKA_STORAGE_ERROR))
            continue
        replicas = []
        for r in d.replicas:
            if wanted and r.topic not in wanted:
                continue
            known = futures if r.is_future else positions
            at = known.get((r.topic, r.partition), ReplicaPosition(UNKNOWN, False, UNKNOWN, UNKNOWN))
            replicas.append(
                LogDirReplica(
                    topic=r.topic,
                    partition=r.partition,
                    size_bytes=r.size_bytes,
                    offset_lag=at.offset_lag,
                    log_end_offset=at.log_end_offset,
                    is_leader=at.is_leader,
                    log_start_offset=at.log_start_offset,
                    uncleanable="" if r.is_future else uncleanable.get((r.topic, r.partition), ""),
                    is_future=r.is_future,
                )
            )
        dirs.append(
            LogDirDescription(d.path, ErrorCode.NONE, d.total_bytes, d.free_bytes, d.size_bytes, tuple(replicas))
        )
    return LogDirsAnswer(broker_id, tuple(dirs))


def replica_positions(replicas: ReplicaManager) -> dict[tuple[str, int], ReplicaPosition]:
    """Each hosted replica's log end offset, role and lag behind its leader (0 when it leads)."""
    lag = replicas.fetchers.lag if replicas.fetchers is not None else {}
    out = {}
    for key, p in replicas.partitions.items():
        if p.log.offline:
            continue
        behind = 0 if p.is_leader else lag.get(key, UNKNOWN)
        out[key] = ReplicaPosition(p.log.log_end_offset, p.is_leader, behind, p.log.log_start_offset)
    return out


def future_positions(replicas: ReplicaManager) -> dict[tuple[str, int], ReplicaPosition]:
    """Each future replica's log end offset and how far it is behind the replica it will replace."""
    out = {}
    for key, future in replicas.logs.future_logs().items():
        p = replicas.partitions.get(key)
        if future.offline or p is None or p.log.offline:
            continue
        behind = max(0, p.log.log_end_offset - future.log_end_offset)
        out[key] = ReplicaPosition(future.log_end_offset, False, behind, future.log_start_offset)
    return out


async def answer(
    broker_id: int,
    replicas: ReplicaManager,
    topics: Collection[str],
    uncleanable: Mapping[tuple[str, int], str] | None = None,
) -> LogDirsAnswer:
    """Positions are read on the event loop (which changes them); disk figures in a thread, as a stuck disk's
    ``statvfs`` must not stall the broker."""
    positions, futures = replica_positions(replicas), future_positions(replicas)
    usage = await asyncio.to_thread(log_dir_usage, replicas.logs)
    return describe_log_dirs(broker_id, usage, positions, topics, uncleanable, futures)
