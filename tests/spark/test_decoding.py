"""keyFormat/valueFormat without Spark: the schema -> column type mapping, the options' rules, and batches with a
decoded column (the real registry and Spark are in test_spark_registry_source.py)."""

from __future__ import annotations

import datetime
import json
from decimal import Decimal

import pyarrow as pa
import pytest

from odradek.client.structs import ConsumerRecord
from odradek.spark_connector.decoding import DecodingError, avro_column, column_for, json_column
from odradek.spark_connector.options import DecodeOptions, OptionError, SourceOptions
from odradek.spark_connector.record_batches import ARROW_SCHEMA, BatchColumns, to_record_batch
from odradek.spark_connector.source import SCHEMA, source_schema

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
        ({"valueFormat": "protobuf"}, "valueFormat", "must be one of binary, avro, json"),
        ({"valueFormat": "avro"}, "valueFormat", "needs schema.registry.url"),
        ({"valueSchema": "{}"}, "valueSchema", "needs valueFormat avro or json"),
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
