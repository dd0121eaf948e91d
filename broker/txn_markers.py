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

from odradek.broker.groups.records import OFFSETS_TOPIC
from odradek.broker.replica_manager import ReplicaManager
from odradek.client.errors import ErrorCode, OdradekError
from odradek.proto import transaction_pb2 as tpb

DEFAULT_MARKER_TIMEOUT_MS = 30_000


class PartitionTransactions:
    """``on_offsets_marker(offsets_partition, producer_id, committed)`` is the group coordinator's hook."""

    def __init__(
        self, replicas: ReplicaManager, on_offsets_marker: Callable[[int, int, bool], None] = lambda p, i, c: None
    ) -> None:
        self.replicas = replicas
        self.on_offsets_marker = on_offsets_marker

    async def write_txn_markers(self, request: tpb.WriteTxnMarkersRequest) -> tpb.WriteTxnMarkersResponse:
        response = tpb.WriteTxnMarkersResponse()
        waits: list[tuple[tpb.TxnPartitionResult, asyncio.Future[int], str, int, tpb.TxnMarker]] = []
        for marker in request.markers:
            result = response.markers.add(producer_id=marker.producer_id)
            for t in marker.topics:
                add = result.topics.add(name=t.name).partitions.add
                for index in t.partitions:
                    r = add(partition=index)
                    try:
                        partition = self.replicas.get(t.name, index)
                        info = partition.append_marker(
                            marker.committed, marker.producer_id, marker.producer_epoch, marker.coordinator_epoch
                        )
                    except OdradekError as e:
                        r.error, r.error_message = ErrorCode.ValueType(e.code), str(e)
                        continue
                    waits.append((r, partition.wait_for_commit(info.last_offset + 1), t.name, index, marker))
        if not waits:
            return response
        timeout_ms = request.timeout_ms if request.timeout_ms > 0 else DEFAULT_MARKER_TIMEOUT_MS
        await asyncio.wait([f for _, f, _, _, _ in waits], timeout=timeout_ms / 1000)
        for r, future, topic, index, marker in waits:
            if not future.done():
                future.cancel()
                r.error, r.error_message = ErrorCode.REQUEST_TIMED_OUT, "the marker was not replicated in time"
            elif (code := future.result()) != ErrorCode.NONE:
                r.error = ErrorCode.ValueType(code)
            elif topic == OFFSETS_TOPIC:
                self.on_offsets_marker(index, marker.producer_id, marker.committed)
        return response

    def describe_producers(self, request: tpb.DescribeProducersRequest) -> tpb.DescribeProducersResponse:
        """The producers each partition's leader holds state for (kafka-transactions describe-producers): an open
        transaction shows its first offset, which is how an operator finds a hanging one."""
        response = tpb.DescribeProducersResponse()
        for t in request.topics:
            add = response.topics.add(name=t.name).partitions.add
            for index in t.partitions:
                r = add(partition=index)
                try:
                    partition = self.replicas.get(t.name, index)
                    partition.check_leader()
                    producers = partition.log.active_producers()
                except OdradekError as e:
                    r.error, r.error_message = ErrorCode.ValueType(e.code), str(e)
                    continue
                for p in producers:
                    r.active_producers.add(
                        producer_id=p.producer_id,
                        producer_epoch=p.producer_epoch,
                        last_sequence=p.last_sequence,
                        last_timestamp=p.last_timestamp,
                        coordinator_epoch=p.coordinator_epoch,
                        current_txn_start_offset=p.current_txn_start_offset,
                    )
        return response
