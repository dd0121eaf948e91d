"""Consumer lag exported by the coordinator itself (``odradek_consumer_group_lag{group,topic,partition}`` and
``odradek_consumer_group_lag_sum{group}``), so that users need no separate lag exporter.

Lag is a partition's high watermark (ListOffsets latest, what a read_uncommitted consumer can reach, as Kafka's lag
exporters use) minus the group's committed offset, never below 0. The coordinator knows the commits; the high
watermarks of partitions led by other brokers are asked of their leaders by ``EndOffsetPoller`` every
``LAG_INTERVAL_S`` (one ListOffsets per leader, each bounded by a timeout), so a scrape reads a cache that is at most
that old. A partition whose end offset is not known yet is left out rather than shown with a made-up lag.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping

import grpc

from odradek.client.common.metadata_image import MetadataImage
from odradek.client.connection import ChannelPool
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition
from odradek.proto import broker_pb2 as bpb
from odradek.proto import broker_pb2_grpc

logger = logging.getLogger(__name__)

LAG_INTERVAL_S = 10.0
LATEST = -1


def lag_samples(
    committed: Mapping[str, Mapping[TopicPartition, int]], ends: Mapping[TopicPartition, int]
) -> tuple[list[tuple[str, TopicPartition, int]], dict[str, int]]:
    """(group, partition, lag) for every committed partition with a known end, and each group's sum."""
    rows: list[tuple[str, TopicPartition, int]] = []
    sums: dict[str, int] = {}
    for group in sorted(committed):
        for tp, offset in sorted(committed[group].items()):
            end = ends.get(tp)
            if end is None or end < 0 or offset < 0:
                continue
            lag = max(0, end - offset)
            rows.append((group, tp, lag))
            sums[group] = sums.get(group, 0) + lag
    return rows, sums


def by_leader(
    partitions: Iterable[TopicPartition], leader_of: Callable[[TopicPartition], int]
) -> dict[int, list[TopicPartition]]:
    """The partitions grouped by their current leader; leaderless ones (< 0) are skipped."""
    out: dict[int, list[TopicPartition]] = {}
    for tp in sorted(set(partitions)):
        leader = leader_of(tp)
        if leader >= 0:
            out.setdefault(leader, []).append(tp)
    return out


class EndOffsetPoller:
    """Keeps ``ends``: the high watermark of every partition some coordinated group has committed."""

    def __init__(
        self,
        partitions: Callable[[], set[TopicPartition]],
        image: Callable[[], MetadataImage],
        interval_s: float = LAG_INTERVAL_S,
    ) -> None:
        self._partitions = partitions
        self._image = image
        self._interval = interval_s
        self._pool = ChannelPool(inter_broker=True)
        self.ends: dict[TopicPartition, int] = {}

    def _leader_of(self, tp: TopicPartition) -> int:
        p = self._image().partition(tp.topic, tp.partition)
        return -1 if p is None else p.leader

    async def poll_once(self) -> None:
        wanted = self._partitions()
        found: dict[TopicPartition, int] = {}
        groups = by_leader(wanted, self._leader_of)
        results = await asyncio.gather(*(self._ask(leader, tps) for leader, tps in groups.items()))
        for result in results:
            found.update(result)
        # Keep a previous answer for a partition whose leader did not answer this time; forget unwanted ones.
        self.ends = {tp: found[tp] if tp in found else self.ends[tp] for tp in wanted if tp in found or tp in self.ends}

    async def _ask(self, leader: int, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        broker = self._image().brokers.get(leader)
        if broker is None:
            return {}
        topics: dict[str, list[int]] = {}
        for tp in partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        request = bpb.ListOffsetsRequest(
            topics=[
                bpb.ListOffsetsTopic(
                    name=t,
                    partitions=[
                        bpb.ListOffsetsPartition(partition=p, timestamp=LATEST, current_leader_epoch=-1) for p in ps
                    ],
                )
                for t, ps in topics.items()
            ]
        )
        stub = broker_pb2_grpc.BrokerStub(self._pool.get(f"{broker.host}:{broker.port}"))
        try:
            r = await stub.ListOffsets(request, timeout=max(1.0, self._interval / 2))
        except grpc.aio.AioRpcError as e:
            logger.debug("lag: ListOffsets to broker %d failed: %s", leader, e.code().name)
            return {}
        return {
            TopicPartition(t.name, a.partition): a.offset
            for t in r.topics
            for a in t.partitions
            if a.error == ErrorCode.NONE and a.offset >= 0
        }

    async def run(self) -> None:
        while True:
            try:
                await self.poll_once()
            except Exception:  # a metrics loop must outlive one bad round
                logger.exception("lag: end offset poll failed")
            await asyncio.sleep(self._interval)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._pool.close()
