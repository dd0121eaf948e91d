"""ListOffsets: a partition's first offset, its end, or the first offset at a timestamp, asked of its leader.

The consumer uses it for ``auto.offset.reset`` and ``seek_to_beginning``/``seek_to_end``; the admin client and
CLI can use it for offsets and lag. Leader errors are retried after re-routing until the timeout. Given the
caller's ``NodeThrottles``, a request waits for its broker's throttle to end (KIP-219) and a response's
``throttle_time_ms`` holds the broker in turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping

import grpc

from odradek.client.errors import (
    ClientTimeoutError,
    ErrorCode,
    LeaderNotAvailableError,
    OdradekError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from odradek.client.metadata import Metadata, rpc_error
from odradek.client.structs import TopicPartition
from odradek.client.throttle import NodeThrottles
from odradek.proto import broker_pb2 as pb

EARLIEST = -2  # ListOffsets timestamp: the log start offset
LATEST = -1  # ListOffsets timestamp: the end (high watermark, or last stable offset for read_committed)
CONSUMER_REPLICA_ID = -1


async def list_offsets(
    metadata: Metadata,
    timestamps: Mapping[TopicPartition, int],
    *,
    timeout: float,
    backoff: float = 0.1,
    isolation_level: pb.IsolationLevel.ValueType = pb.READ_UNCOMMITTED,
    throttles: NodeThrottles | None = None,
) -> dict[TopicPartition, int]:
    """The offset for each partition's timestamp (EARLIEST, LATEST, or ms: the first offset at or after it, -1 if
    none). Raises UnknownTopicOrPartitionError for a missing topic or partition, the typed error of a non-retriable
    answer, or the last retriable one (ClientTimeoutError if none) once ``timeout`` seconds have passed."""
    found = await list_offsets_and_timestamps(
        metadata, timestamps, timeout=timeout, backoff=backoff, isolation_level=isolation_level, throttles=throttles
    )
    return {tp: offset for tp, (offset, _) in found.items()}


async def list_offsets_and_timestamps(
    metadata: Metadata,
    timestamps: Mapping[TopicPartition, int],
    *,
    timeout: float,
    backoff: float = 0.1,
    isolation_level: pb.IsolationLevel.ValueType = pb.READ_UNCOMMITTED,
    throttles: NodeThrottles | None = None,
) -> dict[TopicPartition, tuple[int, int]]:
    """As ``list_offsets``, with the timestamp the broker reports beside each offset (-1 for EARLIEST/LATEST)."""
    deadline = time.monotonic() + timeout
    for topic in {tp.topic for tp in timestamps}:
        count = await metadata.wait_for_topic(topic, max(0.0, deadline - time.monotonic()))
        for tp in timestamps:
            if tp.topic == topic and not 0 <= tp.partition < count:
                raise UnknownTopicOrPartitionError(f"{tp.topic} has no partition {tp.partition} ({count} partitions)")
    pending = dict(timestamps)
    offsets: dict[TopicPartition, tuple[int, int]] = {}
    while True:
        by_leader: dict[int, dict[TopicPartition, int]] = {}
        for tp, timestamp in pending.items():
            by_leader.setdefault(metadata.leader(tp.topic, tp.partition), {})[tp] = timestamp
        last_error: OdradekError | None = None
        if -1 in by_leader:
            last_error = LeaderNotAvailableError(f"no leader for {sorted(by_leader.pop(-1))}")
            metadata.request_refresh()
        answers = await asyncio.gather(
            *(_ask(metadata, node, asked, isolation_level, deadline, throttles) for node, asked in by_leader.items())
        )
        for answer in answers:
            for tp, result in answer.items():
                if isinstance(result, OdradekError):
                    if not result.retriable:
                        raise result
                    last_error = result
                else:
                    offsets[tp] = result
                    del pending[tp]
        if not pending:
            return offsets
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise last_error or ClientTimeoutError(f"ListOffsets did not complete within {timeout * 1000:.0f} ms")
        await asyncio.sleep(min(backoff, remaining))
        with contextlib.suppress(OdradekError):
            await metadata.refresh()


async def _ask(
    metadata: Metadata,
    node: int,
    timestamps: dict[TopicPartition, int],
    isolation_level: pb.IsolationLevel.ValueType,
    deadline: float,
    throttles: NodeThrottles | None = None,
) -> dict[TopicPartition, tuple[int, int] | OdradekError]:
    """One ListOffsets RPC: (offset, timestamp) or a typed error per partition (leader hints applied on the way)."""
    topics: dict[str, list[pb.ListOffsetsPartition]] = {}
    for tp, timestamp in timestamps.items():
        topics.setdefault(tp.topic, []).append(
            pb.ListOffsetsPartition(
                partition=tp.partition,
                current_leader_epoch=metadata.leader_epoch(tp.topic, tp.partition),
                timestamp=timestamp,
            )
        )
    request = pb.ListOffsetsRequest(
        replica_id=CONSUMER_REPLICA_ID,
        isolation_level=isolation_level,
        topics=[pb.ListOffsetsTopic(name=name, partitions=partitions) for name, partitions in topics.items()],
    )
    if throttles is not None and throttles.until(node) > time.monotonic():
        await asyncio.sleep(min(throttles.until(node), deadline) - time.monotonic())
        wait = throttles.until(node) - time.monotonic()
        if wait > 0:
            message = f"broker {node} throttles this client for {wait * 1000:.0f} ms more"
            return dict.fromkeys(timestamps, error_for_code(ErrorCode.THROTTLING_QUOTA_EXCEEDED, message))
    stub = metadata.stub(node)
    try:
        if stub is None:
            raise LeaderNotAvailableError(f"broker {node} is not in the metadata")
        response = await stub.ListOffsets(request, timeout=max(0.1, deadline - time.monotonic()))
    except grpc.aio.AioRpcError as e:
        metadata.request_refresh()
        error = rpc_error(metadata.brokers.get(node, str(node)), e)
        return dict.fromkeys(timestamps, error)
    except LeaderNotAvailableError as e:
        metadata.request_refresh()
        return dict.fromkeys(timestamps, e)
    if throttles is not None:
        throttles.hold(node, response.throttle_time_ms, time.monotonic())
    results: dict[TopicPartition, tuple[int, int] | OdradekError] = {}
    for t in response.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition)
            if tp not in timestamps:
                continue
            if p.error == ErrorCode.NONE:
                results[tp] = (p.offset, p.timestamp)
                continue
            if p.HasField("current_leader"):
                metadata.apply_leader_hint(t.name, p.partition, p.current_leader)
            else:
                metadata.request_refresh()
            results[tp] = error_for_code(p.error, f"ListOffsets for {t.name}-{p.partition}")
    for tp in timestamps.keys() - results.keys():
        results[tp] = LeaderNotAvailableError(f"broker {node} did not answer for {tp.topic}-{tp.partition}")
    return results
