"""Control batches: the COMMIT/ABORT markers a transaction coordinator writes into each partition.

A control batch is transactional, has the control flag set, and holds one record whose key is (int16 version 0,
int16 type) and whose value is Kafka's EndTransactionMarker (int16 version 0, int32 coordinator epoch).
"""

from __future__ import annotations

import enum
import struct
from typing import NamedTuple

from odradek.client.errors import CorruptRecordError
from odradek.client.record.batch import Record
from odradek.client.record.builder import BatchBuilder
from odradek.client.record.header import NO_PARTITION_LEADER_EPOCH

_KEY = struct.Struct(">hh")  # version, type
_VALUE = struct.Struct(">hi")  # version, coordinator epoch
CONTROL_RECORD_VERSION = 0


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


class ControlMarker(NamedTuple):
    type: ControlType
    coordinator_epoch: int


def build_control_batch(
    marker: ControlType,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp_ms: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A control batch holding one COMMIT or ABORT marker for ``producer_id``'s transaction."""
    builder = BatchBuilder(
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        partition_leader_epoch=partition_leader_epoch,
        is_control=True,
    )
    builder.append(
        timestamp_ms,
        _KEY.pack(CONTROL_RECORD_VERSION, ControlType(marker)),
        _VALUE.pack(CONTROL_RECORD_VERSION, coordinator_epoch),
    )
    return builder.build()


def parse_control_record(record: Record) -> ControlMarker:
    """The marker in a control batch's record. Like Kafka, newer versions are read by their version-0 prefix."""
    key, value = record.key, record.value
    if key is None or len(key) < _KEY.size or value is None or len(value) < _VALUE.size:
        raise CorruptRecordError("control record too short")
    key_version, type_id = _KEY.unpack_from(key)
    value_version, coordinator_epoch = _VALUE.unpack_from(value)
    if key_version < 0 or value_version < 0:
        raise CorruptRecordError(f"invalid control record version {key_version}/{value_version}")
    try:
        marker = ControlType(type_id)
    except ValueError:
        raise CorruptRecordError(f"unknown control record type {type_id}") from None
    return ControlMarker(marker, coordinator_epoch)
