"""valueFormat/keyFormat in real Spark: registry-framed Avro and JSON records (written by odradek's serializers) and
Protobuf records (written by confluent-kafka's ProtobufSerializer) read as struct columns whose fields a query
selects, older writers resolved to the subject's latest schema, and a record that cannot be decoded failing the query
with its offset."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

from odradek.broker.schema_registry.protobuf import parse as parse_proto
from odradek.client import Producer
from odradek.client.admin import Admin
from odradek.deploy.local import DevCluster

pytestmark = pytest.mark.integration

V1 = {
    "type": "record",
    "name": "Reading",
    "fields": [{"name": "sensor", "type": "string"}, {"name": "v", "type": "double"}],
}
V2 = {**V1, "fields": [*V1["fields"], {"name": "unit", "type": "string", "default": "C"}]}
POINT = {
    "type": "object",
    "properties": {"x": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["x"],
}


def produce(cluster: DevCluster, topic: str, values: list[object], **serde: str) -> None:
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        if topic not in admin.list_topics():
            admin.create_topic(topic, partitions=1, replication_factor=3)
    config = {"bootstrap.servers": cluster.bootstrap_servers, "schema.registry.url": cluster.schema_registry_urls}
    with Producer({**config, **serde}) as producer:
        for value in values:
            producer.send(topic, value, partition=0).result(30)


def read(spark, cluster: DevCluster, topic: str, **options: str):
    reader = spark.read.format("odradek").option("bootstrap.servers", cluster.bootstrap_servers)
    reader = reader.option("subscribe", topic).option("schema.registry.url", cluster.schema_registry_urls)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def test_avro_values_are_struct_columns_resolved_to_the_subjects_latest_schema(cluster: DevCluster, spark) -> None:
    produce(
        cluster, "readings", [{"sensor": "a", "v": 1.5}], **{"value.serializer": "avro", "value.schema": json.dumps(V1)}
    )
    produce(
        cluster,
        "readings",
        [{"sensor": "b", "v": 2.5, "unit": "F"}],
        **{"value.serializer": "avro", "value.schema": json.dumps(V2)},
    )
    frame = read(spark, cluster, "readings", valueFormat="avro")
    assert frame.schema["value"].dataType.simpleString() == "struct<sensor:string,v:double,unit:string>"
    rows = frame.select("offset", "value.sensor", "value.v", "value.unit").orderBy("offset").collect()
    assert [tuple(r) for r in rows] == [(0, "a", 1.5, "C"), (1, "b", 2.5, "F")]  # v1's record gets v2's default


def test_json_values_with_a_given_schema(cluster: DevCluster, spark) -> None:
    produce(
        cluster,
        "points",
        [{"x": 1, "tags": ["p"]}, {"x": 2}],
        **{"value.serializer": "json", "value.schema": json.dumps(POINT)},
    )
    frame = read(spark, cluster, "points", valueFormat="json", valueSchema=json.dumps(POINT))
    rows = frame.select("value.x", "value.tags").orderBy("offset").collect()
    assert [tuple(r) for r in rows] == [(1, ["p"]), (2, None)]


def test_a_record_that_cannot_be_decoded_fails_the_query_naming_its_offset(cluster: DevCluster, spark) -> None:
    produce(
        cluster,
        "mixed-readings",
        [{"sensor": "a", "v": 1.0}],
        **{"value.serializer": "avro", "value.schema": json.dumps(V1)},
    )
    with Producer({"bootstrap.servers": cluster.bootstrap_servers}) as raw:
        raw.send("mixed-readings", b"plain bytes", partition=0).result(30)
    with pytest.raises(Exception, match="value at offset 1 cannot be decoded as avro"):
        read(spark, cluster, "mixed-readings", valueFormat="avro").collect()


def test_a_subject_without_a_schema_is_an_option_error(cluster: DevCluster, spark) -> None:
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        admin.create_topic("no-schema", partitions=1, replication_factor=3)
    with pytest.raises(Exception, match="valueFormat: no schema for subject no-schema-value"):
        read(spark, cluster, "no-schema", valueFormat="avro").collect()


PLACE = """syntax = "proto3";
package geo;
message Place { string site = 1; double lat = 2; }
"""
READING_V1 = """syntax = "proto3";
package iot;
import "geo/place.proto";
import "google/protobuf/timestamp.proto";
message Reading {
  enum Unit { C = 0; F = 1; }
  string sensor = 1;
  double v = 2;
  Unit unit = 3;
  geo.Place place = 4;
  google.protobuf.Timestamp at = 5;
  map<string, int64> counts = 6;
  repeated string tags = 7;
  oneof source { string device = 8; uint64 gateway = 9; }
}
"""
READING_V2 = READING_V1.replace("uint64 gateway = 9; }", "uint64 gateway = 9; }\n  optional string note = 10;")
SENSOR = """syntax = "proto3";
package iot;
message SensorKey { string sensor = 1; }
"""


def protobuf_class(text: str, name: str, full_name: str) -> Any:
    """A message class as protoc generates it, from a pool of its own (two versions of one file cannot share one),
    where geo/place.proto is the file of that name: the serializer registers it as a reference."""
    timestamp = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(timestamp)
    place = parse_proto(PLACE).file
    place.name = "geo/place.proto"
    own = parse_proto(text, [("geo/place.proto", PLACE)]).file
    own.name = name
    pool = descriptor_pool.DescriptorPool()
    for file in (timestamp, place, own):
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))


def test_protobuf_keys_and_values_written_by_confluents_serializer(cluster: DevCluster, spark) -> None:
    """Records of two versions of the value's schema (the newer adds a field) and of the key's: the columns take
    the latest versions, the older record reads the added field as null (it has presence), and every type reaches
    Spark as its column type (the import of geo/place.proto is a registered reference)."""
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        admin.create_topic("proto-readings", partitions=1, replication_factor=3)
    registry = SchemaRegistryClient({"url": cluster.schema_registry_urls.split(",")[0]})
    v1 = protobuf_class(READING_V1, "iot/reading.proto", "iot.Reading")
    v2 = protobuf_class(READING_V2, "iot/reading.proto", "iot.Reading")
    key_class = protobuf_class(SENSOR, "iot/sensor.proto", "iot.SensorKey")
    value_context = SerializationContext("proto-readings", MessageField.VALUE)
    key_context = SerializationContext("proto-readings", MessageField.KEY)
    first = v1(sensor="a", v=1.5, unit=1, device="d-1", tags=["x", "y"])
    first.place.site, first.place.lat = "hall", 52.5
    first.at.FromDatetime(datetime.datetime(2026, 11, 29, 12, 0, 0, 250000))
    first.counts["ok"] = 3
    second = v2(sensor="b", v=2.5, gateway=2**64 - 1, note="new")
    records = [
        (ProtobufSerializer(key_class, registry)(key_class(sensor=m.sensor), key_context), serializer(m, value_context))
        for m, serializer in ((first, ProtobufSerializer(v1, registry)), (second, ProtobufSerializer(v2, registry)))
    ]
    with Producer({"bootstrap.servers": cluster.bootstrap_servers}) as producer:
        for key, value in records:
            producer.send("proto-readings", value, key=key, partition=0).result(30)
    frame = read(spark, cluster, "proto-readings", valueFormat="protobuf", keyFormat="protobuf")
    assert frame.schema["key"].dataType.simpleString() == "struct<sensor:string>"
    assert frame.schema["value"].dataType.simpleString() == (
        "struct<sensor:string,v:double,unit:string,place:struct<site:string,lat:double>,at:timestamp,"
        "counts:map<string,bigint>,tags:array<string>,device:string,gateway:decimal(20,0),note:string>"
    )
    columns = ["key.sensor", "value.v", "value.unit", "value.place.site", "value.counts", "value.tags"]
    rows = frame.orderBy("offset").select(*columns, "value.device", "value.gateway", "value.note").collect()
    assert [tuple(r) for r in rows] == [
        ("a", 1.5, "F", "hall", {"ok": 3}, ["x", "y"], "d-1", None, None),
        ("b", 2.5, "C", None, {}, [], None, 2**64 - 1, "new"),
    ]
    micros = frame.orderBy("offset").selectExpr("unix_micros(value.at)").collect()
    assert [tuple(r) for r in micros] == [(1_795_953_600_250_000,), (None,)]  # 2026-11-29T12:00:00.25Z
