"""valueFormat/keyFormat in real Spark: registry-framed Avro and JSON records (written by odradek's serializers)
read as struct columns whose fields a query selects, older writers resolved to the subject's latest schema, and a
record that cannot be decoded failing the query with its offset."""

from __future__ import annotations

import json

import pytest

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
