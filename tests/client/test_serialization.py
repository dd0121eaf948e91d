"""Key and value (de)serializers: the config keys that choose them, Confluent's framing, and the consumer's rule for
a record that cannot be deserialized. The registry is a stand-in here (one module under test); the real registry
and Confluent's own serializers are in tests/schema_registry/test_odradek_serializers.py."""

from __future__ import annotations

import base64
import http.server
import json
import socket
import struct
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from odradek.client.config import ConsumerConfig, ProducerConfig
from odradek.client.errors import ConfigError
from odradek.client.schema_registry import RegisteredSchema, SchemaRegistryClient, SchemaRegistryError
from odradek.client.serialization import (
    AvroDeserializer,
    AvroSerializer,
    JsonSchemaDeserializer,
    JsonSchemaSerializer,
    RecordDeserializationError,
    SerializationError,
    StringDeserializer,
    deserialized,
    deserializers,
    serializers,
    unframed,
)
from odradek.client.structs import ConsumerRecord

USER = json.dumps(
    {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}, {"name": "n", "type": "long"}]}
)
USER_WITH_EMAIL = json.dumps(
    {
        "type": "record",
        "name": "User",
        "fields": [
            {"name": "name", "type": "string"},
            {"name": "n", "type": "long"},
            {"name": "email", "type": ["null", "string"], "default": None},
        ],
    }
)
POINT = json.dumps({"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]})
BASE = {"bootstrap.servers": "127.0.0.1:9092"}


class FakeRegistry(SchemaRegistryClient):
    """Answers from a dict, counting the calls that would go over HTTP."""

    def __init__(self) -> None:
        self.schemas: dict[int, RegisteredSchema] = {}
        self.subjects: dict[str, list[int]] = {}
        self.calls = 0

    def register(self, subject: str, schema: str, schema_type: str = "AVRO", normalize: bool = False) -> int:
        self.calls += 1
        same = [i for i, known in self.schemas.items() if (known.schema_type, known.schema) == (schema_type, schema)]
        schema_id = same[0] if same else len(self.schemas) + 1
        self.schemas.setdefault(schema_id, RegisteredSchema(schema_id, schema_type, schema))
        if schema_id not in self.subjects.setdefault(subject, []):
            self.subjects[subject].append(schema_id)
        return schema_id

    def lookup(self, subject: str, schema: str, schema_type: str = "AVRO") -> RegisteredSchema:
        self.calls += 1
        for schema_id in self.subjects.get(subject, []):
            if self.schemas[schema_id].schema == schema:
                return self.schemas[schema_id]
        raise SchemaRegistryError("Schema not found (40403)", 404, 40403)

    def latest(self, subject: str) -> RegisteredSchema:
        self.calls += 1
        if subject not in self.subjects:
            raise SchemaRegistryError("Subject not found (40401)", 404, 40401)
        return self.schemas[self.subjects[subject][-1]]

    def schema(self, schema_id: int) -> RegisteredSchema:
        self.calls += 1
        if schema_id not in self.schemas:
            raise SchemaRegistryError("Schema not found (40403)", 404, 40403)
        return self.schemas[schema_id]


def test_avro_is_confluents_framing_and_round_trips_with_one_registry_call_each_way() -> None:
    registry = FakeRegistry()
    serializer = AvroSerializer(registry, USER)
    data = [serializer.serialize("users", {"name": f"u{i}", "n": i}) for i in range(3)]
    assert registry.calls == 1  # registered once, then cached per subject
    assert registry.subjects == {"users-value": [1]}
    first = data[0]
    assert first is not None and first[0] == 0 and struct.unpack(">I", first[1:5]) == (1,)
    deserializer = AvroDeserializer(registry)
    assert [deserializer.deserialize("users", d) for d in data] == [{"name": f"u{i}", "n": i} for i in range(3)]
    assert registry.calls == 2  # the id's schema asked once
    assert serializer.serialize("users", None) is None and deserializer.deserialize("users", None) is None


def test_a_key_serializer_uses_the_key_subject() -> None:
    registry = FakeRegistry()
    AvroSerializer(registry, USER, is_key=True).serialize("users", {"name": "a", "n": 1})
    assert list(registry.subjects) == ["users-key"]


def test_avro_reader_schema_resolves_an_older_writer() -> None:
    registry = FakeRegistry()
    data = AvroSerializer(registry, USER).serialize("users", {"name": "a", "n": 1})
    assert AvroDeserializer(registry, USER_WITH_EMAIL).deserialize("users", data) == {
        "name": "a",
        "n": 1,
        "email": None,
    }


def test_a_value_that_does_not_match_its_schema_is_a_serialization_error() -> None:
    serializer = AvroSerializer(FakeRegistry(), USER)
    with pytest.raises(SerializationError, match="does not match its Avro schema"):
        serializer.serialize("users", {"name": "a"})
    json_serializer = JsonSchemaSerializer(FakeRegistry(), POINT)
    with pytest.raises(SerializationError, match="does not match its JSON Schema"):
        json_serializer.serialize("points", {"x": "one"})


def test_an_invalid_schema_is_refused_when_first_used() -> None:
    with pytest.raises(SerializationError, match="not a valid Avro schema"):
        AvroSerializer(FakeRegistry(), '{"type": "recrd"}').serialize("t", {})


def test_auto_register_off_looks_the_schema_up_and_fails_if_it_is_not_registered() -> None:
    registry = FakeRegistry()
    with pytest.raises(SerializationError, match="40403"):
        AvroSerializer(registry, USER, auto_register=False).serialize("users", {"name": "a", "n": 1})
    registry.register("users-value", USER)
    data = AvroSerializer(registry, USER, auto_register=False).serialize("users", {"name": "a", "n": 1})
    assert data is not None and unframed(data)[0] == 1


def test_use_latest_version_writes_with_the_subjects_latest_schema() -> None:
    registry = FakeRegistry()
    registry.register("users-value", USER)
    registry.register("users-value", USER_WITH_EMAIL)
    data = AvroSerializer(registry, None, use_latest_version=True).serialize("users", {"name": "a", "n": 1})
    assert data is not None and unframed(data)[0] == 2


def test_json_schema_round_trip_validates_both_ways() -> None:
    registry = FakeRegistry()
    data = JsonSchemaSerializer(registry, POINT).serialize("points", {"x": 3})
    assert data is not None and bytes(unframed(data)[1]) == b'{"x":3}'
    assert JsonSchemaDeserializer(registry).deserialize("points", data) == {"x": 3}
    forged = data[:5] + b'{"x":"3"}'  # framed with the id, but not valid against it
    with pytest.raises(SerializationError, match="does not match"):
        JsonSchemaDeserializer(registry).deserialize("points", forged)


def test_deserializers_refuse_unframed_data_and_another_formats_id() -> None:
    registry = FakeRegistry()
    with pytest.raises(SerializationError, match="magic byte 1"):
        AvroDeserializer(registry).deserialize("t", b"\x01\x00\x00\x00\x01x")
    with pytest.raises(SerializationError, match="too short"):
        AvroDeserializer(registry).deserialize("t", b"\x00\x00")
    data = JsonSchemaSerializer(registry, POINT).serialize("points", {"x": 1})
    with pytest.raises(SerializationError, match="is JSON, not AVRO"):
        AvroDeserializer(registry).deserialize("points", data)
    with pytest.raises(SerializationError, match="40403"):
        AvroDeserializer(registry).deserialize("t", b"\x00\x00\x00\x00\x63")


def test_string_deserializer_refuses_bytes_that_are_not_utf8() -> None:
    with pytest.raises(SerializationError, match="not UTF-8"):
        StringDeserializer().deserialize("t", b"\xff")


def _record(offset: int, value: bytes, partition: int = 0) -> ConsumerRecord:
    return ConsumerRecord("t", partition, offset, 0, 0, None, value, ())


def test_deserialized_stops_at_the_first_failure_and_names_the_record() -> None:
    serde = (StringDeserializer(), StringDeserializer())
    records = [_record(0, b"a"), _record(1, b"\xff"), _record(2, b"c")]
    out, failure = deserialized(records, serde)
    assert [r.value for r in out] == ["a"]
    assert isinstance(failure, RecordDeserializationError)
    assert (failure.topic, failure.partition, failure.offset, failure.is_key) == ("t", 0, 1, False)


# -- configuration: every key takes effect or is refused --------------------------------------------------------


def test_the_default_is_no_serializer_at_all() -> None:
    assert serializers(ProducerConfig.from_mapping(BASE)) is None
    assert deserializers(ConsumerConfig.from_mapping(BASE)) is None


def test_names_and_objects_build_serializers() -> None:
    class Upper:
        def serialize(self, topic: str, value: Any) -> bytes:
            return str(value).upper().encode()

    upper = Upper()
    config = ProducerConfig.from_mapping({**BASE, "key.serializer": "string", "value.serializer": upper})
    built = serializers(config)
    assert built is not None
    assert built[0].serialize("t", "k") == b"k" and built[1] is upper
    avro = ProducerConfig.from_mapping(
        {**BASE, "value.serializer": "AVRO", "value.schema": USER, "schema.registry.url": "http://127.0.0.1:1"}
    )
    built = serializers(avro)
    assert built is not None and isinstance(built[1], AvroSerializer)


@pytest.mark.parametrize(
    "config, message",
    [
        ({"value.serializer": "avro", "value.schema": USER}, "needs schema.registry.url"),
        ({"value.serializer": "avro", "schema.registry.url": "http://h:1"}, "needs value.schema"),
        ({"value.serializer": "string", "value.schema": USER}, "value.schema needs value.serializer avro or json"),
        ({"schema.registry.url": "http://h:1"}, "schema.registry.url needs key.serializer or value.serializer"),
        ({"auto.register.schemas": "false"}, "auto.register.schemas needs"),
        ({"value.serializer": "protobuf"}, "must be one of bytes, string, avro, json"),
        ({"value.serializer": 42}, "must be one of"),
        (
            {"value.serializer": "avro", "schema.registry.url": "http://h:1", "use.latest.version": "true"},
            "needs auto.register.schemas=false",
        ),
        (
            {
                "value.serializer": "avro",
                "schema.registry.url": "http://h:1",
                "use.latest.version": "true",
                "auto.register.schemas": "false",
                "value.schema": USER,
            },
            "value.schema is not used with use.latest.version",
        ),
    ],
)
def test_producer_serializer_settings_that_cannot_take_effect_are_refused(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ProducerConfig.from_mapping({**BASE, **config})


@pytest.mark.parametrize(
    "config, message",
    [
        ({"value.deserializer": "json"}, "needs schema.registry.url"),
        (
            {"value.deserializer": "json", "schema.registry.url": "http://h:1", "value.schema": POINT},
            "needs value.deserializer=avro",
        ),
        ({"schema.registry.basic.auth.user.info": "u:p"}, "needs key.deserializer or value.deserializer"),
        ({"value.deserializer": "avro", "schema.registry.url": "ftp://h"}, "must be http"),
        (
            {
                "value.deserializer": "avro",
                "schema.registry.url": "http://h:1",
                "schema.registry.basic.auth.user.info": "u",
            },
            "must be user:password",
        ),
    ],
)
def test_consumer_deserializer_settings_that_cannot_take_effect_are_refused(
    config: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        ConsumerConfig.from_mapping({**BASE, **config})


def test_the_registry_password_stays_out_of_the_configs_repr() -> None:
    config = ConsumerConfig.from_mapping(
        {
            **BASE,
            "value.deserializer": "avro",
            "schema.registry.url": "http://h:1",
            "schema.registry.basic.auth.user.info": "alice:s3cret",
        }
    )
    assert "s3cret" not in repr(config)


# -- the registry client over HTTP (a stand-in server on loopback) ------------------------------------------------


class _Registry(http.server.BaseHTTPRequestHandler):
    seen: list[tuple[str, str, str | None]] = []

    def _answer(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.seen.append(("GET", self.path, self.headers.get("Authorization")))
        if self.path == "/schemas/ids/7":
            self._answer(200, {"schema": USER})
        else:
            self._answer(404, {"error_code": 40403, "message": "Schema not found"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append(("POST", self.path, self.headers.get("Authorization")))
        self._answer(200, {"id": 7} if body["schema"] == USER else {"id": 8})

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def registry_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Registry.seen = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_the_registry_client_sends_basic_credentials(registry_url: str) -> None:
    client = SchemaRegistryClient(registry_url, basic_auth="alice:s3cret")
    assert client.register("users-value", USER) == 7
    assert client.register("users-value", USER) == 7  # cached: one request
    assert client.schema(7).schema == USER  # registered here: known without asking
    expected = "Basic " + base64.b64encode(b"alice:s3cret").decode()
    assert _Registry.seen == [("POST", "/subjects/users-value/versions", expected)]
    assert SchemaRegistryClient(registry_url).schema(7).schema_type == "AVRO"
    assert _Registry.seen[-1] == ("GET", "/schemas/ids/7", None)


def test_the_registry_clients_errors_carry_the_registrys_code(registry_url: str) -> None:
    with pytest.raises(SchemaRegistryError) as refused:
        SchemaRegistryClient(registry_url).schema(99)
    assert (refused.value.status, refused.value.error_code) == (404, 40403)


def test_an_unanswering_registry_url_is_skipped_for_the_next(registry_url: str) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{closed.getsockname()[1]}"  # bound, not listening: refused
    assert SchemaRegistryClient(f"{dead},{registry_url}").schema(7).schema == USER
    with pytest.raises(SchemaRegistryError, match="did not answer"):
        SchemaRegistryClient(dead).schema(7)
