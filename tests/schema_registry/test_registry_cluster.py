"""The built-in schema registry in a real cluster (1 controller, 3 brokers, each serving the registry): Confluent's
own SchemaRegistryClient, AvroSerializer and AvroDeserializer, unmodified, round-trip records through the Kafka
listener; every broker answers from its copy of ``_schemas``, writes sent to a broker that is not the writer are
forwarded, ids stay unique across a failover of the writer, and a restarted broker rebuilds its copy from the
topic. Error codes are checked with a plain HTTP client."""

from __future__ import annotations

import json
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from odradek.client.admin import Admin
from odradek.deploy.local import DevCluster

from ..integration.conftest import FAST, start_created, wait_for

pytestmark = pytest.mark.integration

USER_V1 = {
    "type": "record",
    "name": "User",
    "namespace": "com.example",
    "fields": [{"name": "name", "type": "string"}, {"name": "favorite_number", "type": "long"}],
}
USER_V2 = {
    **USER_V1,
    "fields": [*USER_V1["fields"], {"name": "email", "type": ["null", "string"], "default": None}],
}
USER_BREAKING = {**USER_V1, "fields": [{"name": "name", "type": "int"}]}


def http(url: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/vnd.schemaregistry.v1+json")
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    directory: Path = tmp_path_factory.mktemp("registry")
    c = start_created(DevCluster.create(directory, 1, 3, overrides=dict(FAST), schema_registry=True))
    try:
        urls = c.schema_registry_urls.split(",")
        for url in urls:  # every broker's copy has read _schemas to its end
            wait_for(lambda url=url: http(f"{url}/subjects")[0] == 200, 60, 0.5, f"the registry at {url}")
        yield c
    finally:
        c.stop_all(timeout=10)


@pytest.fixture(scope="module")
def admin(cluster: DevCluster) -> Iterator[Admin]:
    a = Admin({"bootstrap.servers": cluster.bootstrap_servers, "request.timeout.ms": 10000})
    yield a
    a.close()


def writer_url(cluster: DevCluster, admin: Admin) -> str:
    leader = admin.describe_topic("_schemas").partitions[0].leader
    return f"http://127.0.0.1:{cluster.node(leader).schema_registry_port}"


def everywhere(cluster: DevCluster, path: str) -> None:
    """Wait until every broker's copy answers ``path``: a broker other than the writer and the one written through
    applies a write when its reader gets to it (moments later)."""
    for url in cluster.schema_registry_urls.split(","):
        wait_for(lambda url=url: http(url + path)[0] == 200, 30, 0.1, f"{path} at {url}")


def other_urls(cluster: DevCluster, admin: Admin) -> list[str]:
    writer = writer_url(cluster, admin)
    return [u for u in cluster.schema_registry_urls.split(",") if u != writer]


def consume(cluster: DevCluster, topic: str, count: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap_servers,
            "group.id": f"registry-test-{topic}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                got.append(message.value())
    finally:
        consumer.close()
    return got


def test_the_schemas_topic_is_compacted_with_the_default_replication_factor(admin: Admin) -> None:
    info = admin.describe_topic("_schemas")
    assert info.configs.get("cleanup.policy") == "compact"
    assert len(info.partitions) == 1 and len(info.partitions[0].replicas) == 3


def test_confluent_avro_serializers_round_trip_through_the_kafka_listener(cluster: DevCluster, admin: Admin) -> None:
    """The serializer registers through a broker that is not the writer (forwarded), the deserializer fetches the
    schema by id from a third broker's copy: both are Confluent's classes, configured only with the URL."""
    admin.create_topic("users", partitions=1, replication_factor=3)
    via, reader_url = other_urls(cluster, admin)
    serializer = AvroSerializer(SchemaRegistryClient({"url": via}), json.dumps(USER_V1))
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": reader_url}))
    users = [{"name": f"user-{i}", "favorite_number": i * 7} for i in range(5)]
    producer = Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "acks": "all"})
    for user in users:
        value = serializer(user, SerializationContext("users", MessageField.VALUE))
        assert value is not None and value[0] == 0  # Confluent's framing: magic byte, then the 4-byte schema id
        producer.produce("users", value=value)
    assert producer.flush(30) == 0
    everywhere(cluster, "/subjects/users-value/versions/1")
    context = SerializationContext("users", MessageField.VALUE)
    got = [deserializer(v, context) for v in consume(cluster, "users", len(users))]
    assert got == users
    # Every broker answers the same id with the same schema, from its own copy.
    ids = {http(f"{u}/subjects/users-value/versions/latest")[1]["id"] for u in cluster.schema_registry_urls.split(",")}
    assert len(ids) == 1


def test_confluent_json_schema_serializers_round_trip(cluster: DevCluster, admin: Admin) -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Order",
        "type": "object",
        "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
        "required": ["id"],
    }
    admin.create_topic("orders-json", partitions=1, replication_factor=3)
    via, reader_url = other_urls(cluster, admin)
    serializer = JSONSerializer(json.dumps(schema), SchemaRegistryClient({"url": via}))
    deserializer = JSONDeserializer(None, schema_registry_client=SchemaRegistryClient({"url": reader_url}))
    orders = [{"id": i, "item": f"thing-{i}"} for i in range(4)]
    producer = Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "acks": "all"})
    for order in orders:
        producer.produce(
            "orders-json", value=serializer(order, SerializationContext("orders-json", MessageField.VALUE))
        )
    assert producer.flush(30) == 0
    everywhere(cluster, "/subjects/orders-json-value/versions/1")
    values = consume(cluster, "orders-json", len(orders))
    context = SerializationContext("orders-json", MessageField.VALUE)
    assert [deserializer(v, context) for v in values] == orders
    status, latest = http(f"{reader_url}/subjects/orders-json-value/versions/latest")
    assert status == 200 and latest["schemaType"] == "JSON"


def test_confluent_protobuf_serializers_round_trip(cluster: DevCluster, admin: Admin) -> None:
    """The message class is built from a descriptor here (as protoc's generated code would be); the serializer
    registers the file's descriptor, the deserializer fetches it by id (``format=serialized``)."""
    fd = descriptor_pb2.FileDescriptorProto(name="payments.proto", package="shop", syntax="proto3")
    payment = fd.message_type.add(name="Payment")
    payment.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64)
    payment.field.add(name="currency", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    Payment = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Payment"))
    admin.create_topic("payments", partitions=1, replication_factor=3)
    via, reader_url = other_urls(cluster, admin)
    serializer = ProtobufSerializer(Payment, SchemaRegistryClient({"url": via}))
    deserializer = ProtobufDeserializer(Payment, {"use.deprecated.format": False})
    context = SerializationContext("payments", MessageField.VALUE)
    payments = [Payment(id=i, currency="EUR") for i in range(3)]
    producer = Producer({"bootstrap.servers": cluster.kafka_bootstrap_servers, "acks": "all"})
    for p in payments:
        producer.produce("payments", value=serializer(p, context))
    assert producer.flush(30) == 0
    assert [deserializer(v, context) for v in consume(cluster, "payments", len(payments))] == payments
    everywhere(cluster, "/subjects/payments-value/versions/1")
    status, latest = http(f"{reader_url}/subjects/payments-value/versions/latest")
    assert status == 200 and latest["schemaType"] == "PROTOBUF"
    # A deserializer with the registry resolves the writer's schema by id from another broker's copy.
    by_id = ProtobufDeserializer(Payment, {"use.deprecated.format": False}, SchemaRegistryClient({"url": reader_url}))
    assert [by_id(v, context) for v in consume(cluster, "payments", len(payments))] == payments


def test_evolution_follows_the_subjects_compatibility_level(cluster: DevCluster, admin: Admin) -> None:
    client = SchemaRegistryClient({"url": other_urls(cluster, admin)[0]})
    first = client.register_schema("evolving-value", Schema(json.dumps(USER_V1), "AVRO"))
    second = client.register_schema("evolving-value", Schema(json.dumps(USER_V2), "AVRO"))
    assert second > first
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema("evolving-value", Schema(json.dumps(USER_BREAKING), "AVRO"))
    assert (refused.value.http_status_code, refused.value.error_code) == (409, 409)
    assert client.test_compatibility("evolving-value", Schema(json.dumps(USER_V2), "AVRO")) is True
    client.set_compatibility("evolving-value", "NONE")
    assert client.get_compatibility("evolving-value") == "NONE"
    third = client.register_schema("evolving-value", Schema(json.dumps(USER_BREAKING), "AVRO"))
    assert client.get_versions("evolving-value") == [1, 2, 3]
    found = client.lookup_schema("evolving-value", Schema(json.dumps(USER_V2), "AVRO"))
    assert (found.schema_id, found.version) == (second, 2)
    assert client.delete_version("evolving-value", 3) == 3
    assert client.get_schema(third).schema_str is not None  # a soft-deleted version's id still answers


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("GET", "/subjects/no-such-subject/versions", None, 404, 40401),
        ("GET", "/subjects/users-value/versions/99", None, 404, 40402),
        ("GET", "/schemas/ids/999999", None, 404, 40403),
        ("POST", "/subjects/users-value/versions", {"schema": "{not avro"}, 422, 42201),
        ("GET", "/subjects/users-value/versions/zero", None, 422, 42202),
        ("PUT", "/config/users-value", {"compatibility": "MOSTLY"}, 422, 42203),
        ("GET", "/schemas/guids/x", None, 404, 404),
    ],
)
def test_error_codes(cluster: DevCluster, method: str, path: str, body: Any, status: int, code: int) -> None:
    url = cluster.schema_registry_urls.split(",")[0]
    got_status, got = http(url + path, method, body)
    assert (got_status, got["error_code"]) == (status, code) and got["message"]


def test_each_broker_exports_its_registry_metrics(cluster: DevCluster, admin: Admin) -> None:
    writer = admin.describe_topic("_schemas").partitions[0].leader
    everywhere(cluster, "/subjects/evolving-value/versions/2")
    for node in cluster.nodes:
        if not node.schema_registry_port:
            continue
        with urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/metrics", timeout=10) as response:
            lines = response.read().decode().splitlines()
        samples = {line.split(" ")[0]: float(line.split(" ")[1]) for line in lines if line.startswith("odradek_schema")}
        assert samples["odradek_schema_registry_ready"] == 1
        assert samples["odradek_schema_registry_subjects"] >= 3
        assert (samples["odradek_schema_registry_writes_total"] > 0) is (node.node_id == writer)
        register = 'odradek_schema_registry_requests_total{request="Register",status="200"}'
        assert any(name == register for name in samples) or node.node_id != writer


def test_ids_stay_unique_across_a_writer_failover_and_a_restarted_broker_rebuilds(
    cluster: DevCluster, admin: Admin
) -> None:
    """Kill the writer: the new leader of _schemas-0 reads everything before writing, so the next id is above every
    id given out; the killed broker, started again, rebuilds its copy from the topic."""
    urls = cluster.schema_registry_urls.split(",")
    old_writer = admin.describe_topic("_schemas").partitions[0].leader
    authority = writer_url(cluster, admin)  # its copy holds every write it answered
    subjects = http(f"{authority}/subjects?deleted=true")[1]
    highest = max(
        http(f"{authority}/subjects/{s}/versions/{v}?deleted=true")[1]["id"]
        for s in subjects
        for v in http(f"{authority}/subjects/{s}/versions?deleted=true")[1]
    )
    wait_for(
        lambda: all(http(f"{u}/subjects?deleted=true")[1] == subjects for u in urls), 30, 0.2, "every copy in step"
    )
    cluster.signal(old_writer, signal.SIGKILL)
    wait_for(
        lambda: admin.describe_topic("_schemas").partitions[0].leader not in (old_writer, -1),
        30,
        0.5,
        "a new _schemas leader",
    )
    survivor = next(u for u in urls if u != f"http://127.0.0.1:{cluster.node(old_writer).schema_registry_port}")
    schema = {"type": "record", "name": "AfterFailover", "fields": [{"name": "x", "type": "int"}]}

    def register() -> Any:
        status, body = http(
            f"{survivor}/subjects/after-failover-value/versions", "POST", {"schema": json.dumps(schema)}
        )
        return body["id"] if status == 200 else None

    new_id = wait_for(register, 30, 0.5, "a registration after the failover")
    assert new_id > highest
    cluster.start(old_writer)
    restarted = f"http://127.0.0.1:{cluster.node(old_writer).schema_registry_port}"
    wait_for(
        lambda: http(f"{restarted}/subjects?deleted=true")[1] == sorted([*subjects, "after-failover-value"]),
        60,
        0.5,
        "the restarted broker's copy",
    )
    assert http(f"{restarted}/schemas/ids/{new_id}")[1]["schema"] == json.dumps(schema, separators=(",", ":"))
