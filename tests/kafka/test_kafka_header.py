"""Request and response headers against kafka-python's: header v1 and v2 requests decode to the same fields with the
body starting where kafka-python's ends, response headers v0 and v1 are byte-identical, and malformed headers raise
only ProtocolError."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.api_header import ResponseHeader
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest

from odradek.broker.kafka.header import encode_response_header, read_request_header
from odradek.broker.kafka.primitives import Writer
from odradek.broker.kafka.wire import ProtocolError

# The test machine is shared: an example's run time is no verdict.
untimed = settings(deadline=None)

I32 = st.integers(-(2**31), 2**31 - 1)
CLIENT_IDS = st.none() | st.text(max_size=30)


def produce_flexible(api_key: int, api_version: int) -> bool:
    assert api_key == ProduceRequest.API_KEY
    return api_version >= 9


@untimed
@given(st.integers(3, 11), I32, CLIENT_IDS)
def test_request_header_v1_and_v2_match_kafka_python(version: int, correlation_id: int, client_id: str | None) -> None:
    request = ProduceRequest[version](transactional_id=None, acks=1, timeout_ms=5, topic_data=[])
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    frame = bytes(request.encode(header=True))
    header = read_request_header(memoryview(frame), produce_flexible)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        0,
        version,
        correlation_id,
        client_id,
    )
    assert frame[header.size :] == bytes(request.encode())


@untimed
@given(st.integers(0, 12), I32)
def test_another_api_header(version: int, correlation_id: int) -> None:
    request = MetadataRequest[version](topics=None)
    request.with_header(correlation_id=correlation_id, client_id="c")
    frame = bytes(request.encode(header=True))
    header = read_request_header(memoryview(frame), lambda key, v: MetadataRequest.flexible_version_q(v))
    assert (header.api_key, header.api_version, header.correlation_id) == (3, version, correlation_id)
    assert frame[header.size :] == bytes(request.encode())


def test_header_v2_tagged_fields_are_skipped() -> None:
    w = Writer()
    w.int16(1)
    w.int16(12)
    w.int32(42)
    w.nullable_string("me")
    w.tagged_fields([(0, b"abc"), (5, b"")])
    w.raw(b"BODY")
    frame = bytes(w.buf)
    header = read_request_header(memoryview(frame), lambda key, version: True)
    assert (header.correlation_id, header.client_id, frame[header.size :]) == (42, "me", b"BODY")
    # the same frame read as header v1: the tags are left to the body
    assert frame[read_request_header(memoryview(frame), lambda key, version: False).size :].endswith(b"BODY")


@given(I32)
def test_response_headers_match_kafka_python(correlation_id: int) -> None:
    expected = ResponseHeader(correlation_id=correlation_id)
    assert encode_response_header(correlation_id, 0) == expected.encode(flexible=False)
    assert encode_response_header(correlation_id, 1) == expected.encode(flexible=True)
    assert ResponseHeader.decode(
        io.BytesIO(encode_response_header(correlation_id, 1)), flexible=True
    ).correlation_id == (correlation_id)


def test_response_header_version_2_does_not_exist() -> None:
    with pytest.raises(ValueError):
        encode_response_header(1, 2)


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b"\x00\x01\x00\x0c\x00\x00",  # cut in the correlation id
        b"\x00\x01\x00\x0c\x00\x00\x00\x01",  # no client id
        b"\x00\x01\x00\x0c\x00\x00\x00\x01\x00\x09abc",  # client id past the end
        b"\x00\x01\x00\x0c\x00\x00\x00\x01\xff\xfe",  # client id length -2
        b"\x00\x01\x00\x0c\x00\x00\x00\x01\x00\x01\xff",  # invalid UTF-8
        b"\x00\x01\x00\x0c\x00\x00\x00\x01\xff\xff",  # flexible, but no tagged fields
        b"\x00\x01\x00\x0c\x00\x00\x00\x01\xff\xff" + b"\xff" * 9 + b"\x01",  # a 10-byte tag count
    ],
)
def test_malformed_headers_raise_protocol_error(frame: bytes) -> None:
    with pytest.raises(ProtocolError):
        read_request_header(memoryview(frame), lambda key, version: True)


@settings(untimed, max_examples=300)
@given(st.binary(max_size=40), st.booleans())
def test_random_headers_raise_only_protocol_error(frame: bytes, flexible: bool) -> None:
    try:
        header = read_request_header(memoryview(frame), lambda key, version: flexible)
    except ProtocolError:
        return
    assert 8 <= header.size <= len(frame)
