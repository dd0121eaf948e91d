"""The Fetch codec against kafka-python, for every version served (v4-v16): requests kafka-python encodes decode to
the same values; responses we encode, with file slices read back, decode with kafka-python to the same values and
are byte-identical to kafka-python's encoding; the records objects given are the chunks themselves; malformed
requests raise only ProtocolError."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka_harness import mangle

from odradek.broker.fetch_session import PartitionRead
from odradek.broker.kafka.fetch_codec import (
    FETCH_MAX_VERSION,
    FETCH_MIN_VERSION,
    NO_TOPIC_ID,
    FetchPartitionResult,
    FetchRequestData,
    FetchTopic,
    FetchTopicResult,
    ForgottenTopic,
    decode_fetch_request,
    encode_fetch_response,
)
from odradek.broker.kafka.wire import ProtocolError
from odradek.client.common.file_slice import Chunk, FileSlice, close_chunks

VERSIONS = range(FETCH_MIN_VERSION, FETCH_MAX_VERSION + 1)

# The test machine is shared: an example's run time is no verdict.
untimed = settings(deadline=None, max_examples=40)

I8 = st.integers(-(2**7), 2**7 - 1)
I16 = st.integers(-(2**15), 2**15 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
NAMES = st.text(max_size=20)
IDS = st.binary(min_size=16, max_size=16)


@st.composite
def requests(draw: st.DrawFn, version: int) -> tuple[bytes, FetchRequestData]:
    """A request body as kafka-python encodes it, and the values we expect to decode from it."""
    by_id = version >= 13
    topics = draw(
        st.lists(st.tuples(NAMES, IDS, st.lists(st.tuples(I32, I32, I64, I32, I64, I32), max_size=3)), max_size=3)
    )
    forgotten = draw(st.lists(st.tuples(NAMES, IDS, st.lists(I32, max_size=3)), max_size=2)) if version >= 7 else []
    replica = draw(st.none() | st.tuples(I32, I64)) if version >= 15 else (draw(I32), -1)
    fixed = [draw(I32) for _ in range(3)] + [draw(I8), draw(I32), draw(I32)]
    rack_id = draw(NAMES) if version >= 11 else ""
    cluster_id = draw(st.none() | NAMES) if version >= 12 else None
    topic, partition = FetchRequest.FetchTopic, FetchRequest.FetchTopic.FetchPartition
    request = FetchRequest[version](
        replica_id=replica[0] if replica is not None else -1,
        replica_state=FetchRequest.ReplicaState(replica_id=replica[0], replica_epoch=replica[1])
        if version >= 15 and replica is not None
        else None,
        max_wait_ms=fixed[0],
        min_bytes=fixed[1],
        max_bytes=fixed[2],
        isolation_level=fixed[3],
        session_id=fixed[4],
        session_epoch=fixed[5],
        topics=[
            topic(
                topic=name,
                topic_id=uuid.UUID(bytes=topic_id),
                partitions=[
                    partition(
                        partition=p[0],
                        current_leader_epoch=p[1],
                        fetch_offset=p[2],
                        last_fetched_epoch=p[3],
                        log_start_offset=p[4],
                        partition_max_bytes=p[5],
                    )
                    for p in parts
                ],
            )
            for name, topic_id, parts in topics
        ],
        forgotten_topics_data=[
            FetchRequest.ForgottenTopic(topic=name, topic_id=uuid.UUID(bytes=topic_id), partitions=parts)
            for name, topic_id, parts in forgotten
        ],
        rack_id=rack_id,
        cluster_id=cluster_id,
    )
    expected = FetchRequestData(
        replica_id=-1 if replica is None else replica[0],
        replica_epoch=-1 if replica is None else replica[1],
        max_wait_ms=fixed[0],
        min_bytes=fixed[1],
        max_bytes=fixed[2],
        isolation_level=fixed[3],
        session_id=fixed[4] if version >= 7 else 0,
        session_epoch=fixed[5] if version >= 7 else -1,
        topics=[
            FetchTopic(
                "" if by_id else name,
                topic_id if by_id else NO_TOPIC_ID,
                [
                    PartitionRead(
                        partition=p[0],
                        current_leader_epoch=p[1] if version >= 9 else -1,
                        fetch_offset=p[2],
                        last_fetched_epoch=p[3] if version >= 12 else -1,
                        log_start_offset=p[4] if version >= 5 else -1,
                        partition_max_bytes=p[5],
                        durable_offset=-1,
                    )
                    for p in parts
                ],
            )
            for name, topic_id, parts in topics
        ],
        forgotten_topics=[
            ForgottenTopic("" if by_id else name, topic_id if by_id else NO_TOPIC_ID, parts)
            for name, topic_id, parts in forgotten
        ],
        rack_id=rack_id,
        cluster_id=cluster_id,
    )
    return bytes(request.encode()), expected


@pytest.mark.parametrize("version", VERSIONS)
@untimed
@given(data=st.data())
def test_requests_encoded_by_kafka_python_decode_to_the_same_values(version: int, data: st.DataObject) -> None:
    body, expected = data.draw(requests(version))
    assert decode_fetch_request(memoryview(body), version) == expected


def test_the_kraft_tags_of_v17_and_v18_are_read_past() -> None:
    """v17 and v18 add a replica's directory id and high watermark as partition tags (KRaft quorum fetches); a
    consumer's request carrying them decodes as the same request without them."""
    tp = FetchRequest[18].FetchTopic
    topic_id = uuid.uuid4()

    def body(**tags: Any) -> bytes:
        partition = tp.FetchPartition(
            partition=2,
            current_leader_epoch=5,
            fetch_offset=40,
            last_fetched_epoch=4,
            log_start_offset=0,
            partition_max_bytes=1024,
            **tags,
        )
        request = FetchRequest[18](
            replica_id=-1,
            max_wait_ms=100,
            min_bytes=1,
            max_bytes=4096,
            isolation_level=1,
            session_id=0,
            session_epoch=-1,
            topics=[tp(topic_id=topic_id, partitions=[partition])],
            forgotten_topics_data=[],
            rack_id="",
        )
        return bytes(request.encode())

    plain = decode_fetch_request(memoryview(body()), 18)
    tagged = decode_fetch_request(memoryview(body(replica_directory_id=uuid.uuid4(), high_watermark=39)), 18)
    assert tagged == plain and plain.topics[0].partitions[0].fetch_offset == 40


@contextlib.contextmanager
def file_slices() -> Iterator[list[FileSlice]]:
    """Make FileSlices of in-memory files; whatever the test leaves open is closed."""
    made: list[FileSlice] = []
    try:
        yield made
    finally:
        close_chunks(list(made))


def file_slice(content: bytes, before: bytes) -> FileSlice:
    fd = os.memfd_create("segment")
    os.write(fd, before + content + b"trailing")
    return FileSlice(fd, len(before), len(content))


@st.composite
def partition_results(draw: st.DrawFn, made: list[FileSlice]) -> FetchPartitionResult:
    content = draw(st.none() | st.binary(max_size=64))
    records: Chunk | None = content
    if content is not None:
        kind = draw(st.sampled_from(["bytes", "memoryview", "file"]))
        if kind == "memoryview":
            records = memoryview(b"xx" + content)[2:]
        elif kind == "file":
            records = file_slice(content, draw(st.binary(max_size=8)))
            made.append(records)
    return FetchPartitionResult(
        partition_index=draw(I32),
        error_code=draw(I16),
        high_watermark=draw(I64),
        last_stable_offset=draw(I64),
        log_start_offset=draw(I64),
        aborted_transactions=draw(st.none() | st.lists(st.tuples(I64, I64), max_size=2)),
        preferred_read_replica=draw(I32),
        records=records,
        diverging_epoch=draw(st.none() | st.tuples(I32, I64)),
        current_leader=draw(st.none() | st.tuples(I32, I32)),
    )


ENDPOINTS = st.lists(st.tuples(I32, NAMES, I32, st.none() | NAMES), max_size=3)


def materialise(chunks: list[Chunk]) -> bytes:
    return b"".join(c.read() if isinstance(c, FileSlice) else bytes(c) for c in chunks)


def records_bytes(records: Chunk | None) -> bytes:
    """What a client reads: no records go out as an empty set (never a null one)."""
    if records is None:
        return b""
    return records.read() if isinstance(records, FileSlice) else bytes(records)


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_a_partition_without_records_is_an_empty_set_not_a_null_one(version: int) -> None:
    """Kafka answers an errored partition with an empty record set; librdkafka 2.0 (Fetch v11) fails to parse the
    whole answer on a null one (size -1), so an OFFSET_OUT_OF_RANGE never reached its consumer."""
    errored = FetchPartitionResult(0, 1, -1, -1, -1)  # OFFSET_OUT_OF_RANGE
    topics = [FetchTopicResult("t", bytes(16), [errored])]
    body = materialise(encode_fetch_response(version, topics, 0, 0, 0, []))
    [t] = FetchResponse.decode(body, version=version).responses
    assert t.partitions[0].records == b""


def expected_partition(version: int, p: FetchPartitionResult) -> list[Any]:
    out: list[Any] = [p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset]
    if version >= 5:
        out.append(p.log_start_offset)
    out.append(None if p.aborted_transactions is None else list(p.aborted_transactions))
    if version >= 11:
        out.append(p.preferred_read_replica)
    if version >= 12:
        out += [p.diverging_epoch, p.current_leader]
    out.append(records_bytes(p.records))
    return out


def decoded_partition(version: int, p: Any) -> list[Any]:
    out: list[Any] = [p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset]
    if version >= 5:
        out.append(p.log_start_offset)
    aborted = p.aborted_transactions
    out.append(None if aborted is None else [(a.producer_id, a.first_offset) for a in aborted])
    if version >= 11:
        out.append(p.preferred_read_replica)
    if version >= 12:
        diverging, leader = p.diverging_epoch, p.current_leader
        out.append(None if diverging is None else (diverging.epoch, diverging.end_offset))
        out.append(None if leader is None else (leader.leader_id, leader.leader_epoch))
    out.append(None if p.records is None else bytes(p.records))
    return out


def fields_of(p: FetchPartitionResult) -> dict[str, Any]:
    return {f.name: getattr(p, f.name) for f in dataclasses.fields(p)}


def topic_key(decoded: Any, by_id: bool) -> str | bytes:
    if not by_id:
        return str(decoded.topic)
    return NO_TOPIC_ID if decoded.topic_id is None else bytes(decoded.topic_id.bytes)  # kafka-python: zero id -> None


def kafka_python_response(
    version: int,
    topics: list[FetchTopicResult],
    throttle_ms: int,
    error_code: int,
    session_id: int,
    endpoints: list[tuple[int, str, int, str | None]],
) -> bytes:
    topic = FetchResponse.FetchableTopicResponse
    partition = topic.PartitionData

    def one(p: FetchPartitionResult) -> Any:
        fields = fields_of(p)
        fields["records"] = records_bytes(p.records)
        if p.aborted_transactions is not None:
            fields["aborted_transactions"] = [
                partition.AbortedTransaction(producer_id=i, first_offset=o) for i, o in p.aborted_transactions
            ]
        diverging, leader = fields.pop("diverging_epoch"), fields.pop("current_leader")
        for replica_only in ("log_end_offset", "all_replicas_offset"):  # odradek's tags, None in consumer answers
            assert fields.pop(replica_only) is None
        if diverging is not None:
            fields["diverging_epoch"] = partition.EpochEndOffset(epoch=diverging[0], end_offset=diverging[1])
        if leader is not None:
            fields["current_leader"] = partition.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1])
        return partition(**fields)

    response = FetchResponse[version](
        throttle_time_ms=throttle_ms,
        error_code=error_code,
        session_id=session_id,
        responses=[
            topic(topic=t.topic, topic_id=uuid.UUID(bytes=t.topic_id), partitions=[one(p) for p in t.partitions])
            for t in topics
        ],
        node_endpoints=[FetchResponse.NodeEndpoint(node_id=n, host=h, port=p, rack=r) for n, h, p, r in endpoints],
    )
    return bytes(response.encode())


@pytest.mark.parametrize("version", VERSIONS)
@untimed
@given(
    data=st.data(),
    throttle_ms=st.integers(0, 2**31 - 1),
    error_code=I16,
    session_id=I32,
    endpoints=ENDPOINTS,
)
def test_responses_decode_with_kafka_python_to_the_same_values(
    version: int,
    data: st.DataObject,
    throttle_ms: int,
    error_code: int,
    session_id: int,
    endpoints: list[tuple[int, str, int, str | None]],
) -> None:
    with file_slices() as made:
        topics = data.draw(
            st.lists(st.builds(FetchTopicResult, NAMES, IDS, st.lists(partition_results(made), max_size=3)), max_size=3)
        )
        chunks = encode_fetch_response(version, topics, throttle_ms, error_code, session_id, endpoints)
        body = materialise(chunks)
        decoded = FetchResponse.decode(body, version=version)
        by_id = version >= 13
        assert [
            (topic_key(t, by_id), [decoded_partition(version, p) for p in t.partitions]) for t in decoded.responses
        ] == [
            (t.topic_id if by_id else t.topic, [expected_partition(version, p) for p in t.partitions]) for t in topics
        ]
        assert decoded.throttle_time_ms == throttle_ms
        if version >= 7:
            assert (decoded.error_code, decoded.session_id) == (error_code, session_id)
        if version >= 16:
            assert [(e.node_id, e.host, e.port, e.rack) for e in decoded.node_endpoints or []] == endpoints
        assert body == kafka_python_response(version, topics, throttle_ms, error_code, session_id, endpoints)
        assert_records_are_the_given_objects(chunks, topics)


def assert_records_are_the_given_objects(chunks: list[Chunk], topics: list[FetchTopicResult]) -> None:
    """Each non-empty records object (and every FileSlice) is a chunk by itself, in order, with one merged fixed
    part between two of them."""
    given_records = [
        p.records
        for t in topics
        for p in t.partitions
        if p.records is not None and (len(p.records) or isinstance(p.records, FileSlice))
    ]
    assert chunks[1::2] == given_records and all(c is r for c, r in zip(chunks[1::2], given_records))
    fixed = chunks[0::2]
    assert all(isinstance(c, bytes | bytearray) and len(c) for c in fixed)
    assert len(chunks) in (2 * len(given_records), 2 * len(given_records) + 1)


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_a_file_slice_is_placed_after_its_length_prefix_never_read(version: int) -> None:
    def answer(records: FileSlice) -> list[Chunk]:
        partition = FetchPartitionResult(0, 0, 10, records=records)
        return encode_fetch_response(version, [FetchTopicResult("t", bytes(range(16)), [partition])])

    # a descriptor that is not open: reading it would fail, so the encoder cannot have read it
    unreadable = FileSlice(fd=1 << 20, position=0, length=14)
    chunks = answer(unreadable)
    assert chunks[1] is unreadable
    prefix = chunks[0]
    assert isinstance(prefix, bytearray) and prefix.endswith(bytes([15]) if version >= 12 else (14).to_bytes(4, "big"))
    with file_slices() as made:
        segment = file_slice(b"RECORD-BATCHES", b"earlier batches")
        made.append(segment)
        decoded = FetchResponse.decode(materialise(answer(segment)), version=version)
        assert decoded.responses[0].partitions[0].records == b"RECORD-BATCHES"


def test_an_empty_file_slice_stays_in_the_chunks_to_be_closed() -> None:
    with file_slices() as made:
        empty = file_slice(b"", b"x")
        made.append(empty)
        chunks = encode_fetch_response(
            12, [FetchTopicResult("t", NO_TOPIC_ID, [FetchPartitionResult(0, 0, 0, records=empty)])]
        )
        assert any(c is empty for c in chunks)
        close_chunks(chunks)
        assert empty.fd == -1


@pytest.mark.parametrize("version", [3, FETCH_MAX_VERSION + 1, -1])
def test_versions_not_served_are_refused(version: int) -> None:
    with pytest.raises(ProtocolError):
        decode_fetch_request(memoryview(b""), version)
    with pytest.raises(ProtocolError):
        encode_fetch_response(version, [])


def only_protocol_error(body: bytes, version: int) -> None:
    with contextlib.suppress(ProtocolError):
        decode_fetch_request(memoryview(body), version)


@pytest.mark.parametrize("version", VERSIONS)
@settings(deadline=None, max_examples=60)
@given(data=st.data())
def test_mangled_requests_raise_only_protocol_error(version: int, data: st.DataObject) -> None:
    body, _ = data.draw(requests(version))
    only_protocol_error(mangle(body, data), version)


@pytest.mark.parametrize("version", VERSIONS)
@settings(deadline=None, max_examples=60)
@given(body=st.binary(max_size=80))
def test_random_bytes_raise_only_protocol_error(version: int, body: bytes) -> None:
    only_protocol_error(body, version)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_truncation_is_malformed(version: int) -> None:
    topic = FetchRequest.FetchTopic
    request = FetchRequest[version](
        replica_id=-1,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=1,
        session_id=0,
        session_epoch=-1,
        topics=[
            topic(
                topic="topic",
                topic_id=uuid.UUID(int=7),
                partitions=[topic.FetchPartition(partition=0, fetch_offset=5, partition_max_bytes=1 << 20)],
            )
        ],
        forgotten_topics_data=[],
        rack_id="rack",
    )
    body = bytes(request.encode())
    decode_fetch_request(memoryview(body), version)
    for cut in range(len(body)):
        with pytest.raises(ProtocolError):
            decode_fetch_request(memoryview(body[:cut]), version)
