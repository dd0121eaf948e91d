"""The marker channel: COMMIT/ABORT markers from the transaction coordinator to the leaders of a transaction's
partitions (WriteTxnMarkers), retried until each partition's current leader has written and replicated its marker.

A transaction's partitions are grouped by their leader in the metadata image, one request per leader broker;
partitions whose request failed (not the leader any more, a timeout, an unreachable broker, too few replicas) are
looked up again and resent after a backoff, for as long as it takes: a transaction stays in Prepare* until every
marker is written. A partition whose topic was deleted needs no marker and is dropped. A partition that answers
TRANSACTION_COORDINATOR_FENCED or INVALID_PRODUCER_EPOCH has seen a newer coordinator or producer epoch: this
coordinator is stale, gives up, and leaves the transaction to the newer one.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable

import grpc

from odradek.broker.transactions.core import WriteMarkers
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.connection import ChannelPool
from odradek.client.errors import ErrorCode
from odradek.client.structs import TopicPartition
from odradek.proto import transaction_pb2 as tpb
from odradek.proto import transaction_pb2_grpc

logger = logging.getLogger(__name__)

# broker id, request -> response; raises on a transport failure (then the request is retried).
SendMarkers = Callable[[int, tpb.WriteTxnMarkersRequest], Awaitable[tpb.WriteTxnMarkersResponse]]

GIVE_UP = frozenset({ErrorCode.TRANSACTION_COORDINATOR_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})


def marker_request(
    markers: WriteMarkers, partitions: list[TopicPartition], coordinator_epoch: int, timeout_ms: int
) -> tpb.WriteTxnMarkersRequest:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in partitions:
        by_topic[tp.topic].append(tp.partition)
    return tpb.WriteTxnMarkersRequest(
        markers=[
            tpb.TxnMarker(
                producer_id=markers.producer_id,
                producer_epoch=markers.producer_epoch,
                committed=markers.committed,
                topics=[tpb.TxnTopic(name=t, partitions=sorted(ps)) for t, ps in sorted(by_topic.items())],
                coordinator_epoch=coordinator_epoch,
            )
        ],
        timeout_ms=timeout_ms,
    )


def grpc_sender(image: Callable[[], MetadataImage], pool: ChannelPool, timeout_s: float) -> SendMarkers:
    """Sends through the broker listener of the broker, as the metadata image advertises it."""

    async def send(broker_id: int, request: tpb.WriteTxnMarkersRequest) -> tpb.WriteTxnMarkersResponse:
        broker = image().brokers.get(broker_id)
        if broker is None:
            raise ConnectionError(f"broker {broker_id} is not registered")
        stub = transaction_pb2_grpc.TransactionsStub(pool.get(f"{broker.host}:{broker.port}"))
        response: tpb.WriteTxnMarkersResponse = await stub.WriteTxnMarkers(request, timeout=timeout_s)
        return response

    return send


class MarkerChannel:
    """Writes the markers of one transaction at a time per call; calls for different transactions run
    concurrently."""

    def __init__(
        self,
        image: Callable[[], MetadataImage],
        send: SendMarkers,
        *,
        timeout_ms: int = 30_000,
        backoff_ms: int = 100,
    ) -> None:
        self._image = image
        self._send = send
        self.timeout_ms = timeout_ms
        self.backoff_ms = backoff_ms

    async def write(self, markers: WriteMarkers, coordinator_epoch: int) -> bool:
        """True once every partition has its marker (or no longer exists); False when a partition fenced this
        coordinator. Runs until then: cancel it when the coordinator unloads."""
        remaining = set(markers.partitions)
        while remaining:
            image = self._image()
            by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
            for tp in sorted(remaining):
                if image.topic(tp.topic) is None or image.partition(tp.topic, tp.partition) is None:
                    logger.info("marker for %s-%d dropped: the partition no longer exists", tp.topic, tp.partition)
                    remaining.discard(tp)
                    continue
                state = image.partition(tp.topic, tp.partition)
                broker = image.brokers.get(state.leader) if state is not None else None
                if broker is not None and not broker.fenced:
                    by_leader[broker.broker_id].append(tp)
            results = await asyncio.gather(
                *(self._send_to(leader, tps, markers, coordinator_epoch) for leader, tps in by_leader.items())
            )
            for written, fenced in results:
                remaining -= written
                if fenced:
                    return False
            if remaining:
                await asyncio.sleep(self.backoff_ms / 1000)
        return True

    async def _send_to(
        self, leader: int, partitions: list[TopicPartition], markers: WriteMarkers, coordinator_epoch: int
    ) -> tuple[set[TopicPartition], bool]:
        """(partitions written, fenced) of one request to one leader."""
        request = marker_request(markers, partitions, coordinator_epoch, self.timeout_ms)
        try:
            response = await self._send(leader, request)
        except (grpc.RpcError, OSError, TimeoutError) as e:
            logger.debug("WriteTxnMarkers to broker %d failed: %r", leader, e)
            return set(), False
        written: set[TopicPartition] = set()
        fenced = False
        for result in response.markers:
            if result.producer_id != markers.producer_id:
                continue
            for topic in result.topics:
                for p in topic.partitions:
                    tp = TopicPartition(topic.name, p.partition)
                    if p.error == ErrorCode.NONE:
                        written.add(tp)
                    elif p.error in GIVE_UP:
                        logger.warning(
                            "marker of producer %d for %s-%d refused: %s (a newer coordinator or producer epoch)",
                            markers.producer_id,
                            tp.topic,
                            tp.partition,
                            ErrorCode.Name(p.error),
                        )
                        fenced = True
                    else:
                        logger.debug("marker for %s-%d: %s, retrying", tp.topic, tp.partition, ErrorCode.Name(p.error))
        return written & set(partitions), fenced
