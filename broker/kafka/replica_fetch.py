"""A follower's Fetch on a leader's Kafka listener, sans-I/O: the request frame out, the answer's partitions in.

The request is Fetch v16 with the follower's ReplicaState (replica id and broker epoch, tagged field 1) and, per
partition, the same position the gRPC request carries, with the follower's durable offset (its recovery point) in a
partition-level tagged field of odradek's own (``DURABLE_OFFSET_TAG``). The answer has Kafka's own fields (high
watermark, log start offset, diverging epoch as tagged field 0) plus two values only odradek's followers use, as
partition-level tagged fields: the leader's log end offset (``LOG_END_OFFSET_TAG``) and the offset every replica
holds durably (``ALL_REPLICAS_OFFSET_TAG``), each an int64. odradek's tags are numbered far above Kafka's own so no
Kafka version will reuse them; a leader writes its two only in answers to replica fetches, and Kafka clients skip
unknown tags. Topics are named by id (v13+): the caller's metadata image maps names to ids and back. A malformed
answer raises ProtocolError only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from odradek.broker.fetch_response import FetchedPartition, ReplicaFetchRequest
from odradek.broker.kafka.fetch_codec import (
    ALL_REPLICAS_OFFSET_TAG,
    DURABLE_OFFSET_TAG,
    FETCH_KEY,
    LOG_END_OFFSET_TAG,
    int64_tag,
)
from odradek.broker.kafka.primitives import Reader, Writer
from odradek.broker.kafka.wire import ProtocolError
from odradek.broker.partition import Divergence
from odradek.client.errors import ErrorCode

REPLICA_FETCH_VERSION = 16
REPLICA_FETCH_MIN_VERSION = 15  # the first with ReplicaState, which carries the broker epoch
DIVERGING_EPOCH_TAG = 0
REPLICA_STATE_TAG = 1
UNKNOWN_TOPIC_ID = 100  # Kafka's error for a topic id the leader does not know

Key = tuple[str, int]


class ReplicaFetchAnswer(NamedTuple):
    """The answer: its top-level error (STALE_BROKER_EPOCH for a fenced follower) and each partition's values."""

    error_code: int
    partitions: dict[Key, FetchedPartition]


def encode_replica_fetch(
    request: ReplicaFetchRequest, correlation_id: int, client_id: str, topic_id: Callable[[str], bytes | None]
) -> bytes:
    """The whole frame: size prefix, request header v2, Fetch v16 body. A topic ``topic_id`` does not know (deleted
    meanwhile) is left out: its partitions get no answer, as a partition the leader does not answer."""
    w = Writer()
    w.int16(FETCH_KEY)
    w.int16(REPLICA_FETCH_VERSION)
    w.int32(correlation_id)
    w.nullable_string(client_id)
    w.no_tagged_fields()
    w.int32(request.max_wait_ms)
    w.int32(request.min_bytes)
    w.int32(request.max_bytes)
    w.int8(0)  # isolation level: a follower reads everything up to the log end offset
    w.int32(0)  # no fetch session: every fetch is full
    w.int32(-1)
    topics = [(found, parts) for name, parts in request.topics if (found := topic_id(name)) is not None]
    w.compact_array_length(len(topics))
    for found, parts in topics:
        w.uuid(found)
        w.compact_array_length(len(parts))
        for p in parts:
            w.int32(p.partition)
            w.int32(p.current_leader_epoch)
            w.int64(p.fetch_offset)
            w.int32(p.last_fetched_epoch)
            w.int64(p.log_start_offset)
            w.int32(p.partition_max_bytes)
            durable = Writer()
            durable.int64(p.durable_offset)
            w.tagged_fields([(DURABLE_OFFSET_TAG, durable.buf)])
        w.no_tagged_fields()
    w.compact_array_length(0)  # no forgotten topics
    w.compact_string("")  # rack id
    state = Writer()
    state.int32(request.replica_id)
    state.int64(request.replica_epoch)
    state.no_tagged_fields()
    w.tagged_fields([(REPLICA_STATE_TAG, state.buf)])
    frame = Writer()
    frame.int32(len(w.buf))
    frame.raw(w.buf)
    return bytes(frame.buf)


def decode_replica_fetch_response(
    frame: memoryview | bytes, correlation_id: int, topic_name: Callable[[bytes], str | None]
) -> ReplicaFetchAnswer:
    """The answer frame (without its size prefix): response header v1, then the Fetch v16 body. Partitions of a
    topic id ``topic_name`` does not know are dropped; a partition answered twice keeps its first answer. Raises
    ProtocolError if the frame is malformed, answers another request, or lacks odradek's follower values."""
    r = Reader(frame)
    got = r.int32()
    if got != correlation_id:
        raise ProtocolError(f"an answer to request {got}, not {correlation_id}")
    r.skip_tagged_fields()
    r.int32()  # throttle time: followers are not throttled
    error_code = r.int16()
    r.int32()  # session id
    partitions: dict[Key, FetchedPartition] = {}
    for _ in range(r.compact_array_length()):
        name = topic_name(r.uuid())
        for _ in range(r.compact_array_length()):
            key, answer = _partition(r, name or "")
            if name is not None:
                partitions.setdefault(key, answer)
        r.skip_tagged_fields()
    r.skip_tagged_fields()
    if r.remaining():
        raise ProtocolError(f"{r.remaining()} bytes after the answer")
    return ReplicaFetchAnswer(error_code, partitions)


def _partition(r: Reader, name: str) -> tuple[Key, FetchedPartition]:
    index = r.int32()
    error = r.int16()
    high_watermark = r.int64()
    r.int64()  # last stable offset: followers read up to the log end offset
    log_start_offset = r.int64()
    aborted = r.compact_nullable_array_length()
    for _ in range(aborted or 0):
        r.int64()
        r.int64()
        r.skip_tagged_fields()
    r.int32()  # preferred read replica
    records = r.compact_nullable_bytes()
    diverging = None
    log_end_offset = all_replicas_offset = None
    for tag, payload in r.tagged_fields():
        if tag == DIVERGING_EPOCH_TAG:
            d = Reader(payload)
            diverging = Divergence(d.int32(), d.int64())
            d.skip_tagged_fields()
        elif tag == LOG_END_OFFSET_TAG:
            log_end_offset = int64_tag(payload, "log end offset")
        elif tag == ALL_REPLICAS_OFFSET_TAG:
            all_replicas_offset = int64_tag(payload, "all replicas offset")
    if log_end_offset is None or all_replicas_offset is None:
        raise ProtocolError(f"the answer for {name}-{index} lacks the leader's log end or all-replicas offset")
    if error == UNKNOWN_TOPIC_ID:  # the leader knows the topic by another id: metadata settles it, as gRPC's error
        error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return (name, index), FetchedPartition(
        error,
        b"" if records is None else bytes(records),
        high_watermark,
        log_start_offset,
        log_end_offset,
        diverging,
        all_replicas_offset,
    )
