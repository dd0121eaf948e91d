"""keyFormat/valueFormat without Spark: the schema -> column type mapping (Avro, JSON Schema, Protobuf), Protobuf's
framing and its older writers, the options' rules (the registry's connection options too, against an https registry
on loopback), and batches with a decoded column (the real registry and Spark are in test_spark_registry_source.py)."""

from __future__ import annotations

import base64
import datetime
import http.server
import json
import ssl
import struct
import threading
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from google.protobuf import descriptor_pool, message_factory, struct_pb2, timestamp_pb2, wrappers_pb2
from google.protobuf.descriptor_pb2 import FileDescriptorProto

from odradek.broker.schema_registry.protobuf import parse as parse_proto
from odradek.client.schema_registry import RegisteredSchema, SchemaReference, SchemaRegistryClient, SchemaRegistryError
from odradek.client.serialization import SerializationError
from odradek.client.structs import ConsumerRecord
from odradek.deploy.certs import make_ca, make_leaf
from odradek.spark_connector import protobuf
from odradek.spark_connector.decoding import DecodingError, Registry, avro_column, column_for, json_column
from odradek.spark_connector.options import DecodeOptions, OptionError, SourceOptions
from odradek.spark_connector.record_batches import ARROW_SCHEMA, BatchColumns, to_record_batch
from odradek.spark_connector.source import SCHEMA, resolve_decodings, source_schema

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
        {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
            {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}},
        {"name": "tags", "type": {"type": "map", "values": "double"}},
        {"name": "next", "type": ["null", "Line"], "default": None},
        {"name": "raw", "type": {"type": "fixed", "name": "Hash", "size": 4}},
    ],
}  # fmt: skip


def test_avro_types_map_to_spark_and_arrow_types() -> None:
    column = avro_column(ORDER)
    assert column.ddl == (
        "struct<`id`:bigint,`note`:string,`day`:date,`at`:timestamp,`price`:decimal(9,2),`status`:string,"
        "`lines`:array<struct<`sku`:string,`qty`:int>>,`tags`:map<string,double>,"
        "`next`:struct<`sku`:string,`qty`:int>,`raw`:binary>"
    )
    assert column.arrow.field("tags").type == pa.map_(pa.string(), pa.float64())
    assert column.arrow.field("at").type == pa.timestamp("us", tz="UTC")


def test_a_decoded_avro_value_becomes_an_arrow_struct() -> None:
    column = avro_column(ORDER)
    value = {
        "id": 7,
        "note": None,
        "day": datetime.date(2026, 11, 29),
        "at": datetime.datetime(2026, 11, 29, 12, 0, tzinfo=datetime.UTC),
        "price": Decimal("12.50"),
        "status": "PAID",
        "lines": [{"sku": "a", "qty": 2}],
        "tags": {"x": 1.5},
        "next": {"sku": "b", "qty": 1},
        "raw": b"\x00\x01\x02\x03",
    }
    array = pa.array([column.shape(value), None], column.arrow)
    assert array.to_pylist()[0]["tags"] == [("x", 1.5)]
    assert array.to_pylist()[0]["price"] == Decimal("12.50") and array.to_pylist()[1] is None


@pytest.mark.parametrize(
    "schema, message",
    [
        (["int", "string"], "union of"),
        ({"type": "int", "logicalType": "time-millis"}, "time-millis has no Spark column type"),
        ({"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 2}, "wider than Spark's 38"),
        ("Unknown", "unknown Avro type"),
    ],
)
def test_avro_types_without_a_spark_column_type_are_refused(schema: object, message: str) -> None:
    with pytest.raises(DecodingError, match=message):
        avro_column(schema)


def test_json_schema_types_map_and_untyped_parts_become_json_text() -> None:
    schema = {
        "type": "object",
        "properties": {
            "x": {"type": "integer"},
            "y": {"type": ["number", "null"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "any": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        },
    }
    column = json_column(schema)
    assert column.ddl == "struct<`x`:bigint,`y`:double,`tags`:array<string>,`any`:string>"
    assert column.shape({"x": 1, "y": 2, "extra": True, "any": {"b": 1, "a": 2}}) == {
        "x": 1,
        "y": 2.0,
        "tags": None,
        "any": '{"a":2,"b":1}',
    }
    with pytest.raises(DecodingError, match="expected integer"):
        column.shape({"x": "1"})


def test_the_schema_names_the_decoded_columns_types() -> None:
    assert source_schema((None, None)) == SCHEMA

    class Given:
        fmt, schema, field = (
            "avro",
            json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}),
            "value",
        )

    assert source_schema((None, Given())).startswith("key binary, value struct<`a`:int>, topic string")  # type: ignore[arg-type]


def test_a_batch_takes_its_decoded_columns_type() -> None:
    column = column_for("json", json.dumps({"type": "object", "properties": {"x": {"type": "integer"}}}), "value")
    schema = ARROW_SCHEMA.set(1, pa.field("value", column.arrow))
    decoded = BatchColumns(schema, value=lambda raw, offsets: pa.array([json.loads(r) for r in raw], column.arrow))
    records = [ConsumerRecord("t", 0, i, 0, 0, None, json.dumps({"x": i}).encode(), ()) for i in range(3)]
    batch = to_record_batch(records, False, decoded)
    assert batch.schema == schema
    assert batch.column(1).to_pylist() == [{"x": 0}, {"x": 1}, {"x": 2}]
    assert to_record_batch([], False, decoded).schema == schema


BASE = {"bootstrap.servers": "127.0.0.1:9092", "subscribe": "orders"}


@pytest.mark.parametrize(
    "options, option, message",
    [
        ({"valueFormat": "xml"}, "valueFormat", "must be one of binary, avro, json, protobuf"),
        ({"valueFormat": "avro"}, "valueFormat", "needs schema.registry.url"),
        ({"valueSchema": "{}"}, "valueSchema", "needs valueFormat avro, json or protobuf"),
        ({"schema.registry.url": "http://h:1"}, "schema.registry.url", "needs keyFormat or valueFormat"),
        (
            {"subscribe": "a,b", "valueFormat": "avro", "schema.registry.url": "http://h:1"},
            "valueFormat",
            "needs valueSchema unless the source reads one topic",
        ),
    ],
)
def test_format_options_that_cannot_take_effect_are_refused(options: dict[str, str], option: str, message: str) -> None:
    with pytest.raises(OptionError, match=message) as refused:
        SourceOptions.parse({**BASE, **options}, batch=True)
    assert refused.value.option == option


def test_format_options_are_parsed() -> None:
    parsed = SourceOptions.parse(
        {**BASE, "valueFormat": "AVRO", "keyFormat": "json", "keySchema": "{}", "schema.registry.url": "http://h:1"},
        batch=True,
    )
    decode = parsed.decode
    assert (decode.key_format, decode.value_format, decode.key_schema, decode.value_schema, decode.topic) == (
        "json",
        "avro",
        "{}",
        None,
        "orders",
    )


def test_format_options_parse_the_same_for_batch_and_streaming_queries() -> None:
    """Spark asks for the schema before it says which: a streaming-only option must not get in the way."""
    options = {**BASE, "valueFormat": "avro", "schema.registry.url": "http://h:1", "commitToGroup": "true"}
    assert DecodeOptions.parse(options).value_format == "avro"
    assert DecodeOptions.parse({"bootstrap.servers": "h:1", "subscribePattern": "o.*"}).topic is None


# -- Protobuf: registry-framed as Confluent's serializers write it, the descriptors as the registry serves them

MONEY_PROTO = """syntax = "proto3";
package shop.common;
message Money { string currency = 1; sint64 cents = 2; }
"""
ORDER_PROTO = """syntax = "proto3";
package shop;
import "shop/common.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/wrappers.proto";
message Order {
  enum Status { NEW = 0; PAID = 1; }
  message Line { string sku = 1; uint32 qty = 2; }
  int32 i32 = 1; sint32 s32 = 2; sfixed32 f32 = 3; int64 i64 = 4; uint32 u32 = 5; uint64 u64 = 6; fixed64 x64 = 7;
  bool flag = 8; float fl = 9; double db = 10; string name = 11; bytes raw = 12;
  Status status = 13;
  repeated Line lines = 14;
  map<string, int64> tags = 15;
  oneof payment { string card = 16; shop.common.Money cash = 17; }
  optional string note = 18;
  google.protobuf.Timestamp at = 19;
  google.protobuf.Struct extra = 20;
  google.protobuf.Int64Value count = 21;
}
message Other { string x = 1; }
"""
ORDER_V1_PROTO = """syntax = "proto3";
package shop;
message Order { int32 i32 = 1; string name = 11; int32 gone = 30; }
"""
BROKEN_PROTO = """syntax = "proto3";
package shop;
message Order { int32 i32 = 1; int32 name = 11; }
"""


def proto_file(text: str, name: str, references: tuple[tuple[str, str], ...] = ()) -> FileDescriptorProto:
    """A .proto text as the descriptor Confluent's Python serializer registers (parsed by the registry's parser)."""
    file = parse_proto(text, references).file
    file.name = name
    return file


MONEY_FILE = proto_file(MONEY_PROTO, "shop/common.proto")
ORDER_FILE = proto_file(ORDER_PROTO, "shop/order.proto", (("shop/common.proto", MONEY_PROTO),))


class ProtoRegistry(SchemaRegistryClient):
    """Answers ``format=serialized`` requests as odradek's registry does, from a dict, counting them."""

    def __init__(self) -> None:  # no HTTP
        self.versions: dict[str, list[RegisteredSchema]] = {}
        self.calls = 0

    def add(self, subject: str, file: FileDescriptorProto, references: tuple[SchemaReference, ...] = ()) -> int:
        schema_id = 1 + sum(len(v) for v in self.versions.values())
        versions = self.versions.setdefault(subject, [])
        text = base64.b64encode(file.SerializeToString()).decode()
        versions.append(RegisteredSchema(schema_id, "PROTOBUF", text, len(versions) + 1, references))
        return schema_id

    def version(self, subject: str, version: int | str, fmt: str = "") -> RegisteredSchema:
        assert fmt == "serialized"
        self.calls += 1
        if subject not in self.versions:
            raise SchemaRegistryError("Subject not found (40401)", 404, 40401)
        versions = self.versions[subject]
        return versions[-1] if version == "latest" else versions[int(version) - 1]

    def schema(self, schema_id: int, fmt: str = "") -> RegisteredSchema:
        assert fmt == "serialized"
        self.calls += 1
        return next(v for vs in self.versions.values() for v in vs if v.schema_id == schema_id)


def orders_registry() -> tuple[ProtoRegistry, int]:
    """The registry with shop/common.proto and the orders-value subject referencing it; and the order's schema id."""
    registry = ProtoRegistry()
    registry.add("shop/common.proto", MONEY_FILE)
    reference = SchemaReference("shop/common.proto", "shop/common.proto", 1)
    return registry, registry.add("orders-value", ORDER_FILE, (reference,))


def message_class(files: list[FileDescriptorProto], name: str) -> Any:
    """The writer's generated class, as protoc would make it (well-known imports from the runtime)."""
    pool = descriptor_pool.DescriptorPool()
    for module in (timestamp_pb2, struct_pb2, wrappers_pb2):
        well_known = FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(well_known)
        pool.Add(well_known)
    for file in files:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def confluent_framed(schema_id: int, message: Any, indexes: bytes = b"\x00") -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + indexes + message.SerializeToString()


def test_protobuf_types_map_to_spark_and_arrow_types() -> None:
    registry, _ = orders_registry()
    column = column_for("protobuf", protobuf.reader_schema(registry, "orders-value", "latest"), "value")
    assert column.ddl == (
        "struct<`i32`:int,`s32`:int,`f32`:int,`i64`:bigint,`u32`:bigint,`u64`:decimal(20,0),`x64`:decimal(20,0),"
        "`flag`:boolean,`fl`:float,`db`:double,`name`:string,`raw`:binary,`status`:string,"
        "`lines`:array<struct<`sku`:string,`qty`:bigint>>,`tags`:map<string,bigint>,`card`:string,"
        "`cash`:struct<`currency`:string,`cents`:bigint>,`note`:string,`at`:timestamp,`extra`:string,"
        "`count`:struct<`value`:bigint>>"
    )
    assert column.arrow.field("tags").type == pa.map_(pa.string(), pa.int64())
    assert column.arrow.field("at").type == pa.timestamp("us", tz="UTC")


def test_a_protobuf_record_decodes_with_nulls_only_where_fields_have_presence() -> None:
    """Every type set, then nothing set: proto3 scalars read as their defaults, while the oneof's members, the
    optional field and the message fields are null when unset. The writer's schema (and its reference) is fetched
    once, by id."""
    registry, schema_id = orders_registry()
    reader = protobuf.reader_schema(registry, "orders-value", "latest")
    column = column_for("protobuf", reader, "value")
    Order = message_class([MONEY_FILE, ORDER_FILE], "shop.Order")
    order = Order(i32=-1, s32=-2, f32=3, i64=2**40, u32=2**32 - 1, u64=2**64 - 1, x64=5, flag=True, fl=1.5, db=2.5)
    order.name, order.raw, order.status, order.card, order.note = "n", b"\x00", 1, "visa", ""
    order.lines.add(sku="a", qty=2)
    order.tags["k"] = 7
    order.at.FromDatetime(datetime.datetime(2026, 11, 29, 12, 0, 0, 123456))
    order.extra.update({"b": [1, "x"], "a": None})
    order.count.value = 9
    deserializer = protobuf.ProtobufDeserializer(registry, reader)
    registry.calls = 0
    records = [confluent_framed(schema_id, order), confluent_framed(schema_id, Order()), None]
    full, empty, tombstone = pa.array(
        [None if d is None else column.shape(deserializer.deserialize("t", d)) for d in records], column.arrow
    ).to_pylist()
    assert registry.calls == 2  # the writer's id and its reference, once
    assert full == {
        "i32": -1, "s32": -2, "f32": 3, "i64": 2**40, "u32": 2**32 - 1, "u64": Decimal(2**64 - 1), "x64": Decimal(5),
        "flag": True, "fl": 1.5, "db": 2.5, "name": "n", "raw": b"\x00", "status": "PAID",
        "lines": [{"sku": "a", "qty": 2}], "tags": [("k", 7)], "card": "visa", "cash": None, "note": "",
        "at": datetime.datetime(2026, 11, 29, 12, 0, 0, 123456, tzinfo=datetime.UTC),
        "extra": '{"a":null,"b":[1.0,"x"]}', "count": {"value": 9},
    }  # fmt: skip
    assert empty == {
        "i32": 0, "s32": 0, "f32": 0, "i64": 0, "u32": 0, "u64": Decimal(0), "x64": Decimal(0), "flag": False,
        "fl": 0.0, "db": 0.0, "name": "", "raw": b"", "status": "NEW", "lines": [], "tags": [], "card": None,
        "cash": None, "note": None, "at": None, "extra": None, "count": None,
    }  # fmt: skip
    assert tombstone is None


def test_an_enum_number_the_reader_does_not_name_is_its_number() -> None:
    registry, schema_id = orders_registry()
    reader = protobuf.reader_schema(registry, "orders-value", "latest")
    order = message_class([MONEY_FILE, ORDER_FILE], "shop.Order")(status=7)  # proto3 enums keep unknown numbers
    decoded = protobuf.ProtobufDeserializer(registry, reader).deserialize("t", confluent_framed(schema_id, order))
    assert column_for("protobuf", reader, "value").shape(decoded)["status"] == "7"


def test_older_writers_are_read_by_field_number_and_incompatible_ones_refused() -> None:
    """A record of an older version reads with the reader's message (fields it lacks are defaults, fields only it
    has are dropped); one whose field of the same number has another wire type, or another message, fails."""
    registry = ProtoRegistry()
    old = registry.add("orders-value", proto_file(ORDER_V1_PROTO, "shop/order.proto"))
    broken = registry.add("orders-value", proto_file(BROKEN_PROTO, "shop/order.proto"))
    registry.add("shop/common.proto", MONEY_FILE)
    reference = SchemaReference("shop/common.proto", "shop/common.proto", 1)
    current = registry.add("orders-value", ORDER_FILE, (reference,))
    reader = protobuf.reader_schema(registry, "orders-value", "latest")
    shape = column_for("protobuf", reader, "value").shape
    deserializer = protobuf.ProtobufDeserializer(registry, reader)
    v1 = message_class([proto_file(ORDER_V1_PROTO, "shop/order.proto")], "shop.Order")(i32=4, name="old", gone=1)
    decoded = shape(deserializer.deserialize("t", confluent_framed(old, v1)))
    assert (decoded["i32"], decoded["name"], decoded["u64"], decoded["at"]) == (4, "old", 0, None)
    assert "gone" not in decoded
    bad = message_class([proto_file(BROKEN_PROTO, "shop/order.proto")], "shop.Order")(name=5)
    with pytest.raises(DecodingError, match=r"shop\.Order\.name \(field 11\): int32 written, string read"):
        deserializer.deserialize("t", confluent_framed(broken, bad))
    Other = message_class([MONEY_FILE, ORDER_FILE], "shop.Other")
    with pytest.raises(DecodingError, match=r"written as message shop\.Other, read as shop\.Order"):
        deserializer.deserialize("t", confluent_framed(current, Other(x="x"), indexes=b"\x02\x02"))  # [1]
    Line = message_class([MONEY_FILE, ORDER_FILE], "shop.Order.Line")
    with pytest.raises(DecodingError, match=r"written as message shop\.Order\.Line"):
        deserializer.deserialize("t", confluent_framed(current, Line(sku="a"), indexes=b"\x04\x00\x00"))  # [0, 0]
    with pytest.raises(DecodingError, match=r"no message at indexes \[5\]"):
        deserializer.deserialize("t", confluent_framed(current, Other(), indexes=b"\x02\x0a"))


@pytest.mark.parametrize(
    "data, indexes",
    [(b"\x00", (0,)), (b"\x02\x02", (1,)), (b"\x04\x02\x00", (1, 0)), (b"\x06\x00\x04\x80\x01", (0, 2, 64))],
)
def test_message_indexes_are_zigzag_varints(data: bytes, indexes: tuple[int, ...]) -> None:
    assert protobuf.message_indexes(memoryview(data + b"rest")) == (indexes, len(data))


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "end before the message"),
        (b"\x02", "end before the message"),
        (b"\x01", "count of -1 is not a count"),
        (b"\x02\x01", r"negative message index \(-1\)"),
        (b"\x02" + b"\xff" * 10, "longer than a varint"),
    ],
)
def test_malformed_message_indexes_are_decoding_errors(data: bytes, message: str) -> None:
    with pytest.raises(DecodingError, match=message):
        protobuf.message_indexes(memoryview(data))


def test_protobuf_records_that_cannot_be_read_are_decoding_errors() -> None:
    registry, schema_id = orders_registry()
    avro_id = registry.add("other-value", MONEY_FILE)
    registry.versions["other-value"][0] = registry.versions["other-value"][0]._replace(schema_type="AVRO")
    deserializer = protobuf.ProtobufDeserializer(registry, protobuf.reader_schema(registry, "orders-value", "1"))
    with pytest.raises(SerializationError, match="unknown magic byte"):
        deserializer.deserialize("t", b"\x01\x00\x00\x00\x01\x00")
    with pytest.raises(DecodingError, match=f"schema id {avro_id} is AVRO, not PROTOBUF"):
        deserializer.deserialize("t", b"\x00" + struct.pack(">I", avro_id) + b"\x00")
    with pytest.raises(DecodingError, match=r"not a shop\.Order"):
        deserializer.deserialize("t", b"\x00" + struct.pack(">I", schema_id) + b"\x00\xff\xff")


def test_protobuf_schemas_without_a_spark_column_type_are_refused() -> None:
    registry = ProtoRegistry()
    tree = 'syntax = "proto3"; package t; message Node { string v = 1; repeated Node children = 2; }'
    registry.add("tree-value", proto_file(tree, "tree.proto"))
    with pytest.raises(DecodingError, match=r"value: children: message t\.Node contains itself"):
        column_for("protobuf", protobuf.reader_schema(registry, "tree-value", "latest"), "value")
    unknown = proto_file('syntax = "proto3"; message M { string v = 1; }', "m.proto")
    unknown.dependency.append("elsewhere/dep.proto")  # an import that is not among the references
    registry.add("m-value", unknown)
    with pytest.raises(DecodingError, match=r"import 'elsewhere/dep\.proto' is neither among the schema's references"):
        column_for("protobuf", protobuf.reader_schema(registry, "m-value", "latest"), "value")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("orders-value", ("orders-value", "latest")),
        ("orders-value:3", ("orders-value", "3")),
        ("orders-value:latest", ("orders-value", "latest")),
        (":.ctx:orders-value:2", (":.ctx:orders-value", "2")),
        ("a:b", ("a:b", "latest")),
    ],
)
def test_a_protobuf_reader_schema_is_a_subject_and_version(text: str, expected: tuple[str, str]) -> None:
    assert protobuf.subject_version(text) == expected
    options = {**BASE, "valueFormat": "protobuf", "valueSchema": text, "schema.registry.url": "http://h:1"}
    assert DecodeOptions.parse(options).value_schema == text


REGISTRY = {**BASE, "valueFormat": "protobuf", "schema.registry.url": "https://h:1"}


@pytest.mark.parametrize(
    "options, option, message",
    [
        ({"valueSchema": ":3"}, "valueSchema", "names a registered schema: expected subject or subject:version"),
        ({"valueSchema": "orders-value:0"}, "valueSchema", "versions start at 1"),
        ({"schema.registry.url": "h:1"}, "schema.registry.url", "must be http"),
        ({"schema.registry.basic.auth.user.info": "alice"}, "schema.registry.basic.auth.user.info", "user:password"),
        ({"schema.registry.ssl.ca.location": "/nonexistent/ca.crt"}, "schema.registry.ssl.ca.location", "No such"),
        ({"schema.registry.ssl.ca.location": " "}, "schema.registry.ssl.ca.location", "is empty"),
        (
            {"schema.registry.url": "http://h:1", "schema.registry.ssl.ca.location": "/ca.crt"},
            "schema.registry.ssl.ca.location",
            "needs an https:// schema.registry.url",
        ),
        (
            {"schema.registry.ssl.keystore.location": "/c.p12"},
            "schema.registry.ssl.keystore.location",
            "is not an option of the odradek source",
        ),
        (
            {"valueFormat": None, "schema.registry.url": None, "schema.registry.basic.auth.user.info": "a:b"},
            "schema.registry.basic.auth.user.info",
            "needs schema.registry.url",
        ),
    ],
)
def test_registry_options_that_cannot_take_effect_are_refused(
    options: dict[str, str | None], option: str, message: str
) -> None:
    given = {k: v for k, v in {**REGISTRY, **options}.items() if v is not None}
    with pytest.raises(OptionError, match=message) as refused:
        SourceOptions.parse(given, batch=True)
    assert refused.value.option == option
    assert "alice" not in str(refused.value)


def test_registry_options_are_parsed_and_the_password_kept_out_of_reprs(tmp_path: Path) -> None:
    ca = make_ca().write(tmp_path, "ca")[0]
    options = {
        **REGISTRY,
        "Schema.Registry.Basic.Auth.User.Info": "alice:s3cret",  # option names are case-insensitive, as Spark's
        "schema.registry.ssl.ca.location": str(ca),
    }
    registry = DecodeOptions.parse(options).registry
    assert registry == Registry("https://h:1", "alice:s3cret", str(ca))
    assert "s3cret" not in repr(SourceOptions.parse(options, batch=True))


class _HttpsRegistry(http.server.BaseHTTPRequestHandler):
    """odradek's registry answers to the requests a Protobuf column makes, with the requests' credentials noted."""

    answers: dict[str, Any] = {}
    seen: list[tuple[str, str | None]] = []

    def do_GET(self) -> None:
        self.seen.append((self.path, self.headers.get("Authorization")))
        found = self.answers.get(self.path)
        data = json.dumps(found or {"error_code": 40401, "message": "Subject not found"}).encode()
        self.send_response(200 if found else 404)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def https_registry(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An https registry on loopback with a certificate of its own CA; yields its URL and the CA file."""
    ca = make_ca("registry test CA")
    cert, key = make_leaf(ca, "registry", ["127.0.0.1"]).write(tmp_path, "registry")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _HttpsRegistry)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _HttpsRegistry.seen = []
    yield f"https://127.0.0.1:{server.server_address[1]}", ca.write(tmp_path, "ca")[0]
    server.shutdown()
    server.server_close()


def test_a_protobuf_column_through_an_https_registry_with_credentials(https_registry: tuple[str, Path]) -> None:
    """The driver resolves the column and the executor's decoder fetches the writer's schema, both over TLS checked
    against schema.registry.ssl.ca.location and with the basic credentials; without the CA the query is refused."""
    url, ca = https_registry
    file = proto_file('syntax = "proto3"; package t; message Reading { string sensor = 1; double v = 2; }', "r.proto")
    serialized = base64.b64encode(file.SerializeToString()).decode()
    _HttpsRegistry.answers = {
        "/subjects/readings-value/versions/latest?format=serialized": {
            "subject": "readings-value", "version": 1, "id": 1, "schemaType": "PROTOBUF", "schema": serialized
        },
        "/schemas/ids/1?format=serialized": {"schemaType": "PROTOBUF", "schema": serialized},
    }  # fmt: skip
    options = {
        "bootstrap.servers": "127.0.0.1:9092",
        "subscribe": "readings",
        "valueFormat": "protobuf",
        "schema.registry.url": url,
        "schema.registry.basic.auth.user.info": "alice:s3cret",
    }
    with pytest.raises(OptionError, match="certificate verify failed"):
        resolve_decodings(DecodeOptions.parse(options))
    key, value = resolve_decodings(DecodeOptions.parse({**options, "schema.registry.ssl.ca.location": str(ca)}))
    assert key is None and value is not None
    Reading = message_class([file], "t.Reading")
    decoded = value.decoder()([confluent_framed(1, Reading(sensor="a", v=1.5))], [0])
    assert decoded.to_pylist() == [{"sensor": "a", "v": 1.5}]
    credentials = "Basic " + base64.b64encode(b"alice:s3cret").decode()
    assert _HttpsRegistry.seen == [
        ("/subjects/readings-value/versions/latest?format=serialized", credentials),
        ("/schemas/ids/1?format=serialized", credentials),
    ]
