"""The Produce codec against kafka-python, for every version served (v0-v11): requests kafka-python encodes decode to
the same values, responses we encode decode with kafka-python to the same values, record sets are views of the
request frame, and malformed requests raise only ProtocolError."""

from __future__ import annotations

import contextlib
import dataclasses
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka_harness import mangle

from odradek.broker.kafka.produce_codec import (
    PRODUCE_MAX_VERSION,
    PRODUCE_MIN_VERSION,
    ProducePartitionResult,
    ProduceRequestData,
    decode_produce_request,
    encode_produce_response,
)
from odradek.broker.kafka.wire import ProtocolError

VERSIONS = range(PRODUCE_MIN_VERSION, PRODUCE_MAX_VERSION + 1)

# The test machine is shared: an example's run time is no verdict.
untimed = settings(deadline=None, max_examples=40)

I16 = st.integers(-(2**15), 2**15 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
NAMES = st.text(max_size=20)
RECORDS = st.none() | st.binary(max_size=100)

Plain = tuple[str | None, int, int, list[tuple[str, list[tuple[int, bytes | None]]]]]


@st.composite
def requests(draw: st.DrawFn, version: int) -> tuple[bytes, Plain]:
    """A request body as kafka-python encodes it, and the values it holds."""
    plain: Plain = (
        draw(st.none() | NAMES) if version >= 3 else None,
        draw(st.sampled_from([-1, 0, 1]) | I16),
        draw(I32),
        draw(st.lists(st.tuples(NAMES, st.lists(st.tuples(I32, RECORDS), max_size=3)), max_size=3)),
    )
    return encode_request(version, plain), plain


def encode_request(version: int, plain: Plain) -> bytes:
    topic, partition = ProduceRequest.TopicProduceData, ProduceRequest.TopicProduceData.PartitionProduceData
    request = ProduceRequest[version](
        transactional_id=plain[0],
        acks=plain[1],
        timeout_ms=plain[2],
        topic_data=[
            topic(name=name, partition_data=[partition(index=i, records=r) for i, r in parts])
            for name, parts in plain[3]
        ],
    )
    return bytes(request.encode())


def plain_of(data: ProduceRequestData) -> Plain:
    return (
        data.transactional_id,
        data.acks,
        data.timeout_ms,
        [
            (t.name, [(p.index, None if p.records is None else bytes(p.records)) for p in t.partitions])
            for t in data.topics
        ],
    )


@pytest.mark.parametrize("version", VERSIONS)
@untimed
@given(data=st.data())
def test_requests_encoded_by_kafka_python_decode_to_the_same_values(version: int, data: st.DataObject) -> None:
    body, plain = data.draw(requests(version))
    assert plain_of(decode_produce_request(memoryview(body), version)) == plain


def test_a_hand_built_v0_request_with_a_legacy_message_set() -> None:
    message_set = struct.pack(">qi", 0, 14) + struct.pack(">ibbii", 0x12345678, 0, 0, -1, 0)
    body = (
        struct.pack(">hi", 1, 1500)
        + struct.pack(">i", 1)
        + struct.pack(">h", 5)
        + b"topic"
        + struct.pack(">i", 2)
        + struct.pack(">ii", 0, len(message_set))
        + message_set
        + struct.pack(">ii", 1, -1)
    )
    for version in (0, 1, 2):  # the same body up to v2
        data = decode_produce_request(memoryview(body), version)
        assert plain_of(data) == (None, 1, 1500, [("topic", [(0, message_set), (1, None)])])


def test_record_sets_are_views_of_the_request_frame() -> None:
    header = b"HEADER"
    body = encode_request(9, ("tx", -1, 30000, [("t", [(0, b"batch-zero"), (1, b"batch-one")])]))
    frame = bytearray(header + body)
    data = decode_produce_request(memoryview(frame)[len(header) :], 9)
    zero, one = (p.records for p in data.topics[0].partitions)
    assert zero is not None and one is not None
    assert zero.obj is frame and one.obj is frame
    frame[frame.index(b"batch-zero")] = ord("B")
    assert bytes(zero) == b"Batch-zero"


@st.composite
def results(draw: st.DrawFn) -> ProducePartitionResult:
    return ProducePartitionResult(
        index=draw(I32),
        error_code=draw(I16),
        base_offset=draw(I64),
        log_append_time_ms=draw(I64),
        log_start_offset=draw(I64),
        record_errors=draw(st.lists(st.tuples(I32, st.none() | NAMES), max_size=2)),
        error_message=draw(st.none() | NAMES),
        current_leader=draw(st.none() | st.tuples(I32, I32)),
    )


ENDPOINTS = st.lists(st.tuples(I32, NAMES, I32, st.none() | NAMES), max_size=3)


def expected_partition(version: int, p: ProducePartitionResult) -> list[Any]:
    out: list[Any] = [p.index, p.error_code, p.base_offset]
    if version >= 2:
        out.append(p.log_append_time_ms)
    if version >= 5:
        out.append(p.log_start_offset)
    if version >= 8:
        out += [list(p.record_errors), p.error_message]
    if version >= 10:
        out.append(p.current_leader)
    return out


def decoded_partition(version: int, p: Any) -> list[Any]:
    out: list[Any] = [p.index, p.error_code, p.base_offset]
    if version >= 2:
        out.append(p.log_append_time_ms)
    if version >= 5:
        out.append(p.log_start_offset)
    if version >= 8:
        out += [[(e.batch_index, e.batch_index_error_message) for e in p.record_errors], p.error_message]
    if version >= 10:
        leader = p.current_leader
        out.append(None if leader is None else (leader.leader_id, leader.leader_epoch))
    return out


@pytest.mark.parametrize("version", VERSIONS)
@untimed
@given(
    topics=st.lists(st.tuples(NAMES, st.lists(results(), max_size=3)), max_size=3),
    throttle_ms=st.integers(0, 2**31 - 1),
    endpoints=ENDPOINTS,
)
def test_responses_decode_with_kafka_python_to_the_same_values(
    version: int,
    topics: list[tuple[str, list[ProducePartitionResult]]],
    throttle_ms: int,
    endpoints: list[tuple[int, str, int, str | None]],
) -> None:
    body = encode_produce_response(version, topics, throttle_ms, endpoints)
    decoded = ProduceResponse.decode(body, version=version)
    assert [(t.name, [decoded_partition(version, p) for p in t.partition_responses]) for t in decoded.responses] == [
        (name, [expected_partition(version, p) for p in parts]) for name, parts in topics
    ]
    if version >= 1:
        assert decoded.throttle_time_ms == throttle_ms
    if version >= 10:
        assert [(e.node_id, e.host, e.port, e.rack) for e in decoded.node_endpoints or []] == endpoints
    # kafka-python's own encoding of the same response is byte-identical
    assert body == kafka_python_response(version, topics, throttle_ms, endpoints)


def kafka_python_response(
    version: int,
    topics: list[tuple[str, list[ProducePartitionResult]]],
    throttle_ms: int,
    endpoints: list[tuple[int, str, int, str | None]],
) -> bytes:
    topic = ProduceResponse.TopicProduceResponse
    partition = topic.PartitionProduceResponse

    def one(p: ProducePartitionResult) -> Any:
        fields: dict[str, Any] = {f.name: getattr(p, f.name) for f in dataclasses.fields(p)}
        fields["record_errors"] = [
            partition.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m) for i, m in p.record_errors
        ]
        leader = fields.pop("current_leader")
        if leader is not None:
            fields["current_leader"] = partition.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1])
        return partition(**fields)

    response = ProduceResponse[version](
        responses=[topic(name=name, partition_responses=[one(p) for p in parts]) for name, parts in topics],
        throttle_time_ms=throttle_ms,
        node_endpoints=[ProduceResponse.NodeEndpoint(node_id=n, host=h, port=p, rack=r) for n, h, p, r in endpoints],
    )
    return bytes(response.encode())


@pytest.mark.parametrize("version", [-1, 12, 13])
def test_versions_not_served_are_refused(version: int) -> None:
    with pytest.raises(ProtocolError):
        decode_produce_request(memoryview(b""), version)
    with pytest.raises(ProtocolError):
        encode_produce_response(version, [])


def only_protocol_error(body: bytes, version: int) -> None:
    with contextlib.suppress(ProtocolError):
        decode_produce_request(memoryview(body), version)


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
    body = encode_request(version, ("tx", 1, 100, [("topic", [(0, b"records"), (1, None)]), ("u", [])]))
    decode_produce_request(memoryview(body), version)
    for cut in range(len(body)):
        with pytest.raises(ProtocolError):
            decode_produce_request(memoryview(body[:cut]), version)
