"""Keys and values framed by Confluent's serializers, decoded for the console's "schema registry" view without a
registry (broker/rest/decoding.py): the frame (magic byte and schema id), Avro, JSON Schema and Protobuf payloads
(the message the frame's indexes name), and a typed error for what does not decode."""

from __future__ import annotations

import base64
import io
import json

import pytest
from fastavro import parse_schema, schemaless_writer
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from odradek.broker.rest import decoding

AVRO = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "qty", "type": "int"},
        {"name": "blob", "type": "bytes"},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    ],
}


def frame(schema_id: int, payload: bytes) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + payload


def test_the_frame() -> None:
    assert decoding.framed(frame(7, b"xyz")) == (7, b"xyz")
    assert decoding.framed(None) is None
    assert decoding.framed(b"\x00\x00\x00") is None  # too short
    assert decoding.framed(b'{"a": 1}') is None  # plain JSON starts with "{"


def test_avro_and_json_payloads() -> None:
    out = io.BytesIO()
    schemaless_writer(out, parse_schema(AVRO), {"id": "A-17", "qty": 2, "blob": b"\x00\x01", "day": 19000})
    schema = decoding.schema_of({"schema": json.dumps(AVRO)})  # AVRO unless the registry says otherwise
    assert decoding.decode(schema, out.getvalue()) == {"id": "A-17", "qty": 2, "blob": "AAE=", "day": "2022-01-08"}
    as_json = decoding.schema_of({"schema": '{"type": "object"}', "schemaType": "JSON"})
    assert decoding.decode(as_json, b'{"id": "A-17"}') == {"id": "A-17"}
    with pytest.raises(decoding.DecodingError):
        decoding.decode(schema, b"\x02")  # truncated
    with pytest.raises(decoding.DecodingError):
        decoding.decode(as_json, b"not json")
    with pytest.raises(decoding.DecodingError):
        decoding.decode(decoding.Schema("AVRO", json.dumps(AVRO), has_references=True), out.getvalue())
    with pytest.raises(decoding.DecodingError):
        decoding.schema_of({"error_code": 40403})


def _protobuf_schema() -> tuple[str, type]:
    file = descriptor_pb2.FileDescriptorProto(name="shop.proto", package="shop", syntax="proto3")
    first = file.message_type.add(name="Ignored")
    first.field.add(name="x", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT32)
    order = file.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING)
    line = order.nested_type.add(name="Line")
    line.field.add(name="qty", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order.Line"))
    return base64.b64encode(file.SerializeToString()).decode(), cls


def test_protobuf_payloads_name_their_message_by_indexes() -> None:
    serialized, line = _protobuf_schema()
    schema = decoding.schema_of({"schema": serialized, "schemaType": "PROTOBUF"})
    message = line(qty=3).SerializeToString()
    # Indexes [1, 0] (Order, then its nested Line): a zig-zag count of 2, then 1 and 0, zig-zag encoded.
    assert decoding.decode(schema, b"\x04\x02\x00" + message) == {"qty": "3"}
    assert decoding.message_indexes(b"\x00rest") == ([0], b"rest")  # the first message, in one byte
    with pytest.raises(decoding.DecodingError):
        decoding.decode(schema, b"\x02\x0a" + message)  # index 5: no such message
    with pytest.raises(decoding.DecodingError):
        decoding.decode(schema, b"\x04\x02")  # indexes cut short
