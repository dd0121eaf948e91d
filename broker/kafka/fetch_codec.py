"""Fetch requests and responses, v4-v18, by hand: the hot path of reads.

A response is a list of chunks, not one buffer: the fixed parts are bytes and each partition's records are the very
object the log gave (bytes, a memoryview or a ``FileSlice`` of a segment), placed right after their length prefix,
so the listener can ``sendfile`` them and Python never reads them. v12 made the messages flexible, v13 named topics
by id, v15 moved the replica id into a tagged field, v16 added the leaders' endpoints; v17 and v18 only add tagged
partition fields for KRaft quorum fetches (a replica's directory id, its high watermark), ignored here as every
unknown tag is, with the same answer as v16. Replica fetches (followers, see
replica_fetch.py) carry a partition-level tag of odradek's own, and their answers two more.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from odradek.broker.fetch_session import PartitionRead
from odradek.broker.kafka.primitives import NodeEndpoint, Reader, Writer, node_endpoints_field, uvarint_bytes
from odradek.broker.kafka.wire import ProtocolError
from odradek.client.common.file_slice import Chunk, FileSlice

FETCH_KEY = 1
FETCH_MIN_VERSION = 4
FETCH_MAX_VERSION = 18
FETCH_FLEXIBLE_FROM = 12

NO_TOPIC_ID = bytes(16)
CONSUMER_REPLICA_ID = -1
# odradek's partition-level tags in replica fetches and their answers, far above Kafka's own (0-2) so that no Kafka
# version reuses them; Kafka clients skip tags they do not know.
LOG_END_OFFSET_TAG = 10000
ALL_REPLICAS_OFFSET_TAG = 10001
DURABLE_OFFSET_TAG = 10002  # in the request: the follower's recovery point
_I64 = struct.Struct(">q")
# A v12+ request partition's fields: partition, current leader epoch, fetch offset, last fetched epoch, log start
# offset, partition max bytes; then, from an odradek follower, exactly one tag: its durable offset.
_PARTITION_V12 = struct.Struct(">iiqiqi")
_DURABLE_TAG_HEAD = b"\x01" + uvarint_bytes(DURABLE_OFFSET_TAG) + b"\x08"  # one tag, its number, 8 bytes
_DURABLE_TAG = struct.Struct(f">{len(_DURABLE_TAG_HEAD)}sq")


def _durable_tag(values: tuple[bytes, int]) -> bool:
    return values[0] == _DURABLE_TAG_HEAD


@dataclass(frozen=True, slots=True)
class FetchTopic:
    topic: str  # v4-v12; "" from v13
    topic_id: bytes  # v13+ (16 bytes); NO_TOPIC_ID before
    partitions: list[PartitionRead]


@dataclass(frozen=True, slots=True)
class ForgottenTopic:
    topic: str  # v7-v12; "" from v13
    topic_id: bytes  # v13+; NO_TOPIC_ID before
    partitions: list[int]


@dataclass(frozen=True, slots=True)
class FetchRequestData:
    replica_id: int  # -1 for a consumer; from v15 in the ReplicaState tagged field
    replica_epoch: int  # v15+ ReplicaState, else -1
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    session_id: int  # v7+, else 0
    session_epoch: int  # v7+, else -1 (no session: a full fetch)
    topics: list[FetchTopic]
    forgotten_topics: list[ForgottenTopic]  # v7+
    rack_id: str  # v11+, else ""
    cluster_id: str | None  # v12+ tagged


@dataclass(slots=True)  # not frozen: one per partition of each request or answer, built 4x faster
class FetchPartitionResult:
    """One partition's answer; each field goes out only in the versions that have it."""

    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int = -1
    log_start_offset: int = -1  # v5+
    aborted_transactions: Sequence[tuple[int, int]] | None = None  # (producer id, first offset); None = null
    preferred_read_replica: int = -1  # v11+
    records: Chunk | None = None  # sent as given: never copied, never read; None: an empty set
    diverging_epoch: tuple[int, int] | None = None  # v12+ tagged 0: (epoch, end offset)
    current_leader: tuple[int, int] | None = None  # v12+ tagged 1: (leader id, leader epoch)
    # odradek's own, in answers to replica fetches only (v12+ tagged, int64 each; see replica_fetch.py): the leader's
    # log end offset and the offset every replica holds durably. None (consumers): not written.
    log_end_offset: int | None = None
    all_replicas_offset: int | None = None


@dataclass(frozen=True, slots=True)
class FetchTopicResult:
    topic: str  # sent up to v12
    topic_id: bytes  # sent from v13
    partitions: Sequence[FetchPartitionResult]


def _check_version(version: int) -> None:
    if not FETCH_MIN_VERSION <= version <= FETCH_MAX_VERSION:
        raise ProtocolError(f"Fetch v{version} is not served")


def _partition_v12(r: Reader) -> PartitionRead:
    partition, leader_epoch, fetch_offset, last_epoch, log_start, max_bytes = r.fixed(_PARTITION_V12, "a partition")
    durable_offset = -1
    usual = r.fixed_if(_DURABLE_TAG, _durable_tag)  # an odradek follower's one tag
    if usual is not None:
        durable_offset = usual[1]
    else:
        for tag, payload in r.tagged_fields():
            if tag == DURABLE_OFFSET_TAG:
                durable_offset = int64_tag(payload, "durable offset")
    return PartitionRead(partition, fetch_offset, max_bytes, leader_epoch, last_epoch, log_start, durable_offset)


def _partition(r: Reader, version: int) -> PartitionRead:
    """A partition of a request below v12 (not flexible: no tags)."""
    partition = r.int32()
    current_leader_epoch = r.int32() if version >= 9 else -1
    fetch_offset = r.int64()
    log_start_offset = r.int64() if version >= 5 else -1
    partition_max_bytes = r.int32()
    return PartitionRead(partition, fetch_offset, partition_max_bytes, current_leader_epoch, -1, log_start_offset, -1)


def decode_fetch_request(body: memoryview, version: int) -> FetchRequestData:
    """The request body (after the header). Raises ProtocolError if it is malformed."""
    _check_version(version)
    r = Reader(body)
    flexible = version >= FETCH_FLEXIBLE_FROM
    array = r.compact_array_length if flexible else r.array_length
    string = r.compact_string if flexible else r.string
    replica_id = r.int32() if version <= 14 else CONSUMER_REPLICA_ID
    replica_epoch = -1
    max_wait_ms = r.int32()
    min_bytes = r.int32()
    max_bytes = r.int32()
    isolation_level = r.int8()
    session_id, session_epoch = (r.int32(), r.int32()) if version >= 7 else (0, -1)
    topics = []
    for _ in range(array()):
        if version >= 13:
            topic, topic_id = "", r.uuid()
        else:
            topic, topic_id = string(), NO_TOPIC_ID
        partitions = [_partition_v12(r) if flexible else _partition(r, version) for _ in range(array())]
        if flexible:
            r.skip_tagged_fields()
        topics.append(FetchTopic(topic, topic_id, partitions))
    forgotten = []
    if version >= 7:
        for _ in range(array()):
            if version >= 13:
                topic, topic_id = "", r.uuid()
            else:
                topic, topic_id = string(), NO_TOPIC_ID
            forgotten.append(ForgottenTopic(topic, topic_id, [r.int32() for _ in range(array())]))
            if flexible:
                r.skip_tagged_fields()
    rack_id = string() if version >= 11 else ""
    cluster_id = None
    if flexible:
        for tag, payload in r.tagged_fields():
            if tag == 0:
                cluster_id = Reader(payload).compact_nullable_string()
            elif tag == 1 and version >= 15:
                state = Reader(payload)
                replica_id = state.int32()
                replica_epoch = state.int64()
    return FetchRequestData(
        replica_id,
        replica_epoch,
        max_wait_ms,
        min_bytes,
        max_bytes,
        isolation_level,
        session_id,
        session_epoch,
        topics,
        forgotten,
        rack_id,
        cluster_id,
    )


def int64_tag(payload: memoryview, what: str) -> int:
    """The int64 one of odradek's tags holds."""
    if len(payload) != _I64.size:
        raise ProtocolError(f"{what} tag of {len(payload)} bytes, not 8")
    return int(_I64.unpack(payload)[0])


def _pair_tag(tag: int, a: int, b: int, b_is_long: bool) -> tuple[int, bytes]:
    w = Writer()
    w.int32(a)
    if b_is_long:
        w.int64(b)
    else:
        w.int32(b)
    w.no_tagged_fields()
    return tag, bytes(w.buf)


def _records_size(records: Chunk) -> int:
    return records.nbytes if isinstance(records, memoryview) else len(records)


def encode_fetch_response(
    version: int,
    topics: Sequence[FetchTopicResult],
    throttle_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
    node_endpoints: Sequence[NodeEndpoint] = (),
) -> list[Chunk]:
    """The response body (without the response header) as chunks: bytes for the fixed parts, each partition's
    ``records`` object itself after its length prefix (null records as a null length, empty ones as length 0 and no
    chunk). Adjacent fixed parts are merged, so there are about two chunks per partition with records. Raises
    ProtocolError for a version not served."""
    _check_version(version)
    flexible = version >= FETCH_FLEXIBLE_FROM
    chunks: list[Chunk] = []
    w = Writer()
    w.int32(throttle_ms)
    if version >= 7:
        w.int16(error_code)
        w.int32(session_id)
    array = w.compact_array_length if flexible else w.array_length
    array(len(topics))
    for t in topics:
        if version >= 13:
            w.uuid(t.topic_id)
        elif flexible:
            w.compact_string(t.topic)
        else:
            w.string(t.topic)
        array(len(t.partitions))
        for p in t.partitions:
            w.int32(p.partition_index)
            w.int16(p.error_code)
            w.int64(p.high_watermark)
            w.int64(p.last_stable_offset)
            if version >= 5:
                w.int64(p.log_start_offset)
            aborted = p.aborted_transactions
            array(None if aborted is None else len(aborted))
            if aborted is not None:
                for producer_id, first_offset in aborted:
                    w.int64(producer_id)
                    w.int64(first_offset)
                    if flexible:
                        w.no_tagged_fields()
            if version >= 11:
                w.int32(p.preferred_read_replica)
            records = p.records
            if records is None:
                # No records (an errored partition): an empty set, as Kafka sends, not a null one, which
                # librdkafka before 2.x's flexible Fetch refuses as a parse failure of the whole answer.
                w.buf += b"\x01" if flexible else b"\x00\x00\x00\x00"
            else:
                size = _records_size(records)
                if flexible:
                    w.uvarint(size + 1)
                else:
                    w.int32(size)
                # An empty FileSlice still goes in the list: whoever ends up with the chunks closes it.
                if size or isinstance(records, FileSlice):
                    chunks.append(w.buf)
                    chunks.append(records)
                    w.buf = bytearray()
            if flexible:
                tags = []
                if p.diverging_epoch is not None:
                    tags.append(_pair_tag(0, p.diverging_epoch[0], p.diverging_epoch[1], True))
                if p.current_leader is not None:
                    tags.append(_pair_tag(1, p.current_leader[0], p.current_leader[1], False))
                if p.log_end_offset is not None:
                    tags.append((LOG_END_OFFSET_TAG, _I64.pack(p.log_end_offset)))
                if p.all_replicas_offset is not None:
                    tags.append((ALL_REPLICAS_OFFSET_TAG, _I64.pack(p.all_replicas_offset)))
                w.tagged_fields(tags)
        if flexible:
            w.no_tagged_fields()
    if flexible:
        if version >= 16 and node_endpoints:
            w.tagged_fields([(0, node_endpoints_field(node_endpoints))])
        else:
            w.no_tagged_fields()
    if w.buf:  # nothing follows the last records of a v4-v11 answer
        chunks.append(w.buf)
    return chunks
