"""The partition leaders' side of transactions: WriteTxnMarkers and DescribeProducers.

A transaction coordinator (or an operator aborting a hanging transaction) asks each partition's leader to append
a COMMIT or ABORT marker. The leader appends it like an acks=all write and answers once the marker is replicated
to the ISR, so a coordinator that has every answer knows no leader change can lose a marker. A marker written to
a ``__consumer_offsets`` partition also tells the group coordinator, which then makes the producer's
transactional offset commits visible (COMMIT) or drops them (ABORT): only after replication, so a commit that
could still be truncated away is never shown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from odradek.broker.groups.records import OFFSETS_TOPIC
from odradek.broker.replica_manager import ReplicaManager
from odradek.broker.transactions.requests import (
    DescribeProducers,
    DescribeProducersAnswer,
    MarkerResult,
    PartitionProducers,
    PartitionResult,
    ProducersTopic,
    TopicResults,
    TxnMarker,
    WriteTxnMarkers,
    WriteTxnMarkersAnswer,
)
from odradek.client.errors import ErrorCode, OdradekError

DEFAULT_MARKER_TIMEOUT_MS = 30_000


@dataclass(slots=True)
class _Result:
    """One partition's marker result while it is being written."""

    partition: int
    error: int = int(ErrorCode.NONE)
    error_message: str = ""


class PartitionTransactions:
    """``on_offsets_marker(offsets_partition, producer_id, committed)`` is the group coordinator's hook."""

    def __init__(
        self, replicas: ReplicaManager, on_offsets_marker: Callable[[int, int, bool], None] = lambda p, i, c: None
    ) -> None:
        self.replicas = replicas
        self.on_offsets_marker = on_offsets_marker

    async def write_txn_markers(self, request: WriteTxnMarkers) -> WriteTxnMarkersAnswer:
        # Each marker's partitions by topic, in the request's order: their results are filled in as the markers are
        # appended, then as they are replicated.
        results: list[tuple[int, list[tuple[str, list[_Result]]]]] = []
        waits: list[tuple[_Result, asyncio.Future[int], str, TxnMarker]] = []
        for marker in request.markers:
            topics: list[tuple[str, list[_Result]]] = []
            results.append((marker.producer_id, topics))
            for t in marker.topics:
                partitions: list[_Result] = []
                topics.append((t.name, partitions))
                for index in t.partitions:
                    r = _Result(index)
                    partitions.append(r)
                    try:
                        partition = self.replicas.get(t.name, index)
                        info = partition.append_marker(
                            marker.committed, marker.producer_id, marker.producer_epoch, marker.coordinator_epoch
                        )
                    except OdradekError as e:
                        r.error, r.error_message = int(e.code), str(e)
                        continue
                    waits.append((r, partition.wait_for_commit(info.last_offset + 1), t.name, marker))
        if waits:
            timeout_ms = request.timeout_ms if request.timeout_ms > 0 else DEFAULT_MARKER_TIMEOUT_MS
            await asyncio.wait([f for _, f, _, _ in waits], timeout=timeout_ms / 1000)
            for r, future, topic, marker in waits:
                if not future.done():
                    future.cancel()
                    r.error, r.error_message = int(ErrorCode.REQUEST_TIMED_OUT), "the marker was not replicated in time"
                elif (code := future.result()) != ErrorCode.NONE:
                    r.error = int(code)
                elif topic == OFFSETS_TOPIC:
                    self.on_offsets_marker(r.partition, marker.producer_id, marker.committed)
        return WriteTxnMarkersAnswer(
            tuple(
                MarkerResult(
                    producer_id,
                    tuple(
                        TopicResults(name, tuple(PartitionResult(r.partition, r.error, r.error_message) for r in ps))
                        for name, ps in topics
                    ),
                )
                for producer_id, topics in results
            )
        )

    def describe_producers(self, request: DescribeProducers) -> DescribeProducersAnswer:
        """The producers each partition's leader holds state for (kafka-transactions describe-producers): an open
        transaction shows its first offset, which is how an operator finds a hanging one."""
        return DescribeProducersAnswer(
            tuple(
                ProducersTopic(t.name, tuple(self._producers(t.name, p) for p in t.partitions)) for t in request.topics
            )
        )

    def _producers(self, topic: str, index: int) -> PartitionProducers:
        try:
            partition = self.replicas.get(topic, index)
            partition.check_leader()
            producers = partition.log.active_producers()
        except OdradekError as e:
            return PartitionProducers(index, int(e.code), str(e))
        return PartitionProducers(index, active_producers=tuple(producers))
