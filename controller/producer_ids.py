"""AllocateProducerIds: hands brokers disjoint blocks of producer ids (Kafka's KIP-730).

Brokers give idempotent producers ids from blocks they own, so InitProducerId needs no metadata write per
producer. The next free id lives in the metadata image (``next_producer_id``, folded from ProducerIdsRecords and
kept in snapshots); one record per block advances it, so a block handed out before a controller failover is
never handed out again. A fenced broker may allocate: a broker that is still starting up may need ids.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.client.common.metadata_image import MetadataImage
from odradek.client.errors import ErrorCode
from odradek.proto import metadata_pb2 as md

BLOCK_SIZE = 1000
INT64_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """The answer: ids ``[start, start + length)`` on success, ``start`` -1 and ``length`` 0 on an error."""

    error: ErrorCode.ValueType = ErrorCode.NONE
    message: str = ""
    start: int = -1
    length: int = 0


def allocate_producer_ids(
    image: MetadataImage, broker_id: int, broker_epoch: int, block_size: int = BLOCK_SIZE
) -> tuple[list[md.MetadataRecord], ProducerIdBlock]:
    """The next block for ``broker_id`` at ``broker_epoch`` and the record that reserves it.

    The broker epoch is checked so that a process whose registration was replaced (a zombie) cannot draw ids.
    """
    broker = image.brokers.get(broker_id)
    if broker is None:
        return [], ProducerIdBlock(ErrorCode.STALE_BROKER_EPOCH, f"broker {broker_id} is not registered")
    if broker.epoch != broker_epoch:
        return [], ProducerIdBlock(
            ErrorCode.STALE_BROKER_EPOCH, f"broker epoch {broker_epoch} is not the current {broker.epoch}"
        )
    start = image.next_producer_id
    # The record stores start + block_size, so that must still be an int64 (as Kafka checks).
    if start > INT64_MAX - block_size:
        return [], ProducerIdBlock(
            ErrorCode.UNKNOWN_SERVER_ERROR, f"producer ids are exhausted: {start} + {block_size} exceeds int64"
        )
    record = md.ProducerIdsRecord(broker_id=broker_id, broker_epoch=broker_epoch, next_producer_id=start + block_size)
    return [md.MetadataRecord(producer_ids=record)], ProducerIdBlock(start=start, length=block_size)
