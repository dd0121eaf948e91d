"""odradek's producer and consumer with ``value.serializer=avro``/``json`` against the built-in registry of a real
cluster, checked against Confluent's own serializers both ways: what one writes the other reads."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer as KafkaConsumer
from confluent_kafka import Producer as KafkaProducer
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from odradek.client import Consumer, Producer
from odradek.client.admin import Admin
from odradek.client.serialization import RecordDeserializationError
from odradek.deploy.local import DevCluster

from ..integration.conftest import FAST, start_created, wait_for
from .test_registry_cluster import USER_V1, USER_V2, http

pytestmark = pytest.mark.integration

POINT = {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}, "required": ["x"]}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    directory: Path = tmp_path_factory.mktemp("serializers")
    c = start_created(DevCluster.create(directory, 1, 1, overrides=dict(FAST), schema_registry=True))
    try:
        url = c.schema_registry_urls
        wait_for(lambda: http(f"{url}/subjects")[0] == 200, 60, 0.5, "the registry")
        yield c
    finally:
        c.stop_all(timeout=10)


def make_topic(cluster: DevCluster, name: str) -> None:
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        admin.create_topic(name, partitions=1, replication_factor=1)


def kafka_values(cluster: DevCluster, topic: str, count: int) -> list[bytes]:
    consumer = KafkaConsumer(
        {"bootstrap.servers": cluster.kafka_bootstrap_servers, "group.id": f"g-{topic}", "enable.auto.commit": False}
    )
    try:
        consumer.assign([KafkaPartition(topic, 0, 0)])
        values: list[bytes] = []
        wait_for(
            lambda: (
                values.extend(m.value() for m in consumer.consume(count, 1.0) if not m.error()) or len(values) >= count
            ),
            30,
        )
        return values
    finally:
        consumer.close()


def odradek_values(cluster: DevCluster, topic: str, count: int, **config: str) -> list[object]:
    with Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "auto.offset.reset": "earliest", **config}
    ) as consumer:
        consumer.assign([(topic, 0)])
        values: list[object] = []
        wait_for(lambda: values.extend(r.value for r in consumer.poll(1000)) or len(values) >= count, 30)
        return values


def poll_failure(consumer: Consumer) -> RecordDeserializationError:
    """The error a poll raises within 30 s (no record may come before it)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            assert consumer.poll(1000) == []
        except RecordDeserializationError as e:
            return e
    pytest.fail("no RecordDeserializationError within 30 s")


def test_odradek_avro_records_read_by_confluents_deserializer(cluster: DevCluster) -> None:
    make_topic(cluster, "avro-out")
    config = {
        "bootstrap.servers": cluster.bootstrap_servers,
        "value.serializer": "avro",
        "value.schema": json.dumps(USER_V1),
        "key.serializer": "string",
        "schema.registry.url": cluster.schema_registry_urls,
    }
    users = [{"name": f"user{i}", "favorite_number": i} for i in range(5)]
    with Producer(config) as producer:
        for user in users:
            producer.send("avro-out", user, key=user["name"], partition=0).result(30)
    status, versions = http(f"{cluster.schema_registry_urls}/subjects/avro-out-value/versions")
    assert (status, versions) == (200, [1])
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": cluster.schema_registry_urls}))
    context = SerializationContext("avro-out", MessageField.VALUE)
    assert [deserializer(v, context) for v in kafka_values(cluster, "avro-out", 5)] == users


def test_confluent_avro_records_read_by_odradek_with_a_newer_reader_schema(cluster: DevCluster) -> None:
    make_topic(cluster, "avro-in")
    registry = SchemaRegistryClient({"url": cluster.schema_registry_urls})
    serializer = AvroSerializer(registry, json.dumps(USER_V1))
    producer = KafkaProducer({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    users = [{"name": f"user{i}", "favorite_number": i} for i in range(3)]
    for user in users:
        producer.produce("avro-in", serializer(user, SerializationContext("avro-in", MessageField.VALUE)), partition=0)
    assert producer.flush(30) == 0
    read = odradek_values(
        cluster,
        "avro-in",
        3,
        **{
            "value.deserializer": "avro",
            "value.schema": json.dumps(USER_V2),  # the field it adds has a default: Avro's resolution fills it in
            "schema.registry.url": cluster.schema_registry_urls,
        },
    )
    assert read == [{**u, "email": None} for u in users]


def test_json_schema_both_ways(cluster: DevCluster) -> None:
    make_topic(cluster, "points")
    config = {
        "bootstrap.servers": cluster.bootstrap_servers,
        "value.serializer": "json",
        "value.schema": json.dumps(POINT),
        "schema.registry.url": cluster.schema_registry_urls,
    }
    with Producer(config) as producer:
        producer.send("points", {"x": 1, "y": 2}, partition=0).result(30)
    registry = SchemaRegistryClient({"url": cluster.schema_registry_urls})
    producer = KafkaProducer({"bootstrap.servers": cluster.kafka_bootstrap_servers})
    data = JSONSerializer(json.dumps(POINT), registry)({"x": 3}, SerializationContext("points", MessageField.VALUE))
    producer.produce("points", data, partition=0)
    assert producer.flush(30) == 0
    deserializer = JSONDeserializer(json.dumps(POINT))
    context = SerializationContext("points", MessageField.VALUE)
    assert [deserializer(v, context) for v in kafka_values(cluster, "points", 2)] == [{"x": 1, "y": 2}, {"x": 3}]
    read = odradek_values(
        cluster, "points", 2, **{"value.deserializer": "json", "schema.registry.url": cluster.schema_registry_urls}
    )
    assert read == [{"x": 1, "y": 2}, {"x": 3}]


def test_a_record_that_cannot_be_deserialized_stops_the_consumer_at_it(cluster: DevCluster) -> None:
    make_topic(cluster, "mixed")
    avro = {"value.serializer": "avro", "value.schema": json.dumps(USER_V1)}
    registry = {"schema.registry.url": cluster.schema_registry_urls}
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, **avro, **registry}) as producer:
        producer.send("mixed", {"name": "a", "favorite_number": 1}, partition=0).result(30)
    with Producer({"bootstrap.servers": cluster.bootstrap_servers}) as raw:
        raw.send("mixed", b"not avro", partition=0).result(30)
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, **avro, **registry}) as producer:
        producer.send("mixed", {"name": "c", "favorite_number": 3}, partition=0).result(30)
    config = {
        "bootstrap.servers": cluster.bootstrap_servers,
        "auto.offset.reset": "earliest",
        "value.deserializer": "avro",
        **registry,
    }
    with Consumer(config) as consumer:
        consumer.assign([("mixed", 0)])
        first: list[object] = []
        wait_for(lambda: first.extend(r.value for r in consumer.poll(1000)) or first, 30)
        assert first == [{"name": "a", "favorite_number": 1}]  # the good record before the bad one comes first
        for _ in range(2):  # and the bad one stays where it is until the application moves on
            failure = poll_failure(consumer)
            assert (failure.topic, failure.partition, failure.offset, failure.is_key) == ("mixed", 0, 1, False)
        consumer.seek(("mixed", 0), 2)
        rest: list[object] = []
        wait_for(lambda: rest.extend(r.value for r in consumer.poll(1000)) or rest, 30)
        assert rest == [{"name": "c", "favorite_number": 3}]
