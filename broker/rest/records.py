"""Records through the HTTP API, without I/O: a produced record into the one-record batch the partition leader
appends (and the partition it goes to), and a partition's fetched batches into the records a bounded read answers
(control batches skipped, records before the asked offset dropped, at most so many records and about so many
bytes, at least one record when there is one, so that a reader always moves on)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from odradek.broker.rest.requests import ProduceRecord
from odradek.client.producer.partitioner import partition_for_key
from odradek.client.record.batch import Record, read_batches
from odradek.client.record.builder import BatchBuilder


def partition_of(record: ProduceRecord, partitions: int, pick: Callable[[int], int]) -> int:
    """The partition asked for; else the key's (Kafka's murmur2, as every Kafka producer's default partitioner);
    else ``pick(partitions)`` for a record without a key."""
    if record.partition is not None:
        return record.partition
    key = record.key.data if record.key is not None else None
    return partition_for_key(key, partitions) if key is not None else pick(partitions)


def encode(record: ProduceRecord, timestamp_ms: int) -> bytes:
    """The record alone in an uncompressed batch (the leader assigns its offset)."""
    builder = BatchBuilder()
    key = record.key.data if record.key is not None else None
    value = record.value.data if record.value is not None else None
    builder.append(timestamp_ms, key, value, list(record.headers))
    return builder.build()


def size_of(r: Record) -> int:
    """What a record counts against a read's byte bound: its key, value and headers."""
    headers = sum(len(name.encode()) + len(value or b"") for name, value in r.headers)
    return len(r.key or b"") + len(r.value or b"") + headers


@dataclass(frozen=True, slots=True)
class Read:
    records: Sequence[Record]
    next_offset: int  # where the next read starts: past every record and batch this one passed


def select(data: bytes, start: int, max_records: int, max_bytes: int) -> Read:
    """The records of ``data`` (whole batches, as a fetch answers) from offset ``start`` on, within the bounds."""
    out: list[Record] = []
    size, next_offset = 0, start
    for batch in read_batches(data):
        header = batch.header
        if not header.is_control:
            for r in batch.records():
                if r.offset < start:
                    continue
                grown = size + size_of(r)
                if out and (len(out) >= max_records or grown > max_bytes):
                    return Read(out, r.offset)
                out.append(r)
                size, next_offset = grown, r.offset + 1
        next_offset = max(next_offset, header.next_offset)
    return Read(out, next_offset)
