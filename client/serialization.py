"""Serializers and deserializers for keys and values, with schema registry framing as Confluent's clients write it.

A producer configured with ``value.serializer`` (``key.serializer``) turns what ``send`` is given into bytes, a
consumer configured with ``value.deserializer`` turns the bytes back: by name (``bytes``, the default and a no-op;
``string``, UTF-8; ``avro`` and ``json``, through the schema registry at ``schema.registry.url``), or an object of
one's own with a ``serialize(topic, value)`` / ``deserialize(topic, data)`` method.

The registry formats write Confluent's wire format, so that Confluent's deserializers read what these write and the
reverse: a zero magic byte, the schema id as 4 big-endian bytes, then the Avro binary encoding (no container
header) or the UTF-8 JSON text. The subject is Confluent's default TopicNameStrategy, ``<topic>-key`` or
``<topic>-value``. A None value (a tombstone) stays None both ways. Protobuf's framing (message indexes, and a
schema generated from a compiled descriptor) is not provided here: confluent-kafka's Protobuf serializers work
against odradek's registry and Kafka listener as they are.
"""

from __future__ import annotations

import io
import json
import struct
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from odradek.client.errors import ConfigError, OdradekError
from odradek.client.schema_registry import SchemaRegistryClient, SchemaRegistryError

if TYPE_CHECKING:
    from odradek.client.config import ConsumerConfig, ProducerConfig
    from odradek.client.structs import ConsumerRecord

MAGIC = 0
_HEADER = struct.Struct(">bI")  # magic byte, schema id


class SerializationError(OdradekError, ValueError):
    """A key or value could not be serialized (a record that does not match its schema, a registry that refused
    the schema): nothing was sent."""


class RecordDeserializationError(SerializationError):
    """A consumed record's key or value could not be deserialized (Kafka's RecordDeserializationException): the
    consumer's position stays at that record, so the next poll raises again unless the application seeks past it."""

    def __init__(self, message: str, topic: str, partition: int, offset: int, is_key: bool) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.is_key = is_key


@runtime_checkable
class Serializer(Protocol):
    def serialize(self, topic: str, value: Any) -> bytes | None: ...


@runtime_checkable
class Deserializer(Protocol):
    def deserialize(self, topic: str, data: bytes | None) -> Any: ...


class BytesSerializer:
    """bytes, str (UTF-8) and None as the producer takes them anyway: the default."""

    def serialize(self, topic: str, value: Any) -> bytes | None:
        return value  # type: ignore[no-any-return]  # the producer checks the type


class BytesDeserializer:
    def deserialize(self, topic: str, data: bytes | None) -> Any:
        return data


class StringSerializer:
    def serialize(self, topic: str, value: Any) -> bytes | None:
        if value is None:
            return None
        if not isinstance(value, str):
            raise SerializationError(f"the string serializer takes str, not {type(value).__name__}")
        return value.encode()


class StringDeserializer:
    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return data.decode()
        except UnicodeDecodeError as e:
            raise SerializationError(f"not UTF-8: {e}") from None


def framed(schema_id: int, payload: bytes) -> bytes:
    return _HEADER.pack(MAGIC, schema_id) + payload


def unframed(data: bytes) -> tuple[int, memoryview]:
    """The schema id and the payload of a registry-framed record."""
    if len(data) < _HEADER.size:
        raise SerializationError(f"{len(data)} bytes: too short for the schema registry's framing")
    magic, schema_id = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise SerializationError(f"unknown magic byte {magic}: not written by a schema registry serializer")
    return schema_id, memoryview(data)[_HEADER.size :]


class _RegistrySerializer(ABC):
    """What the registry formats share: the subject, and its schema id asked once per subject."""

    SCHEMA_TYPE = ""

    def __init__(
        self,
        registry: SchemaRegistryClient,
        schema: str | None,
        *,
        is_key: bool = False,
        auto_register: bool = True,
        use_latest_version: bool = False,
    ) -> None:
        if schema is None and not use_latest_version:
            raise ConfigError(f"a {self.SCHEMA_TYPE} serializer needs a schema, or use.latest.version=true")
        self._registry = registry
        self._schema = schema
        self._suffix = "-key" if is_key else "-value"
        self._auto_register = auto_register
        self._use_latest = use_latest_version
        self._lock = threading.Lock()
        self._subjects: dict[str, tuple[int, Any]] = {}  # subject -> (id, the parsed schema)

    @abstractmethod
    def _parse(self, schema: str) -> Any:
        """The format's own step."""

    @abstractmethod
    def _encode(self, parsed: Any, value: Any) -> bytes:
        """The format's own step."""

    def _schema_for(self, topic: str) -> tuple[int, Any]:
        subject = topic + self._suffix
        with self._lock:
            known = self._subjects.get(subject)
        if known is not None:
            return known
        try:
            if self._use_latest:
                latest = self._registry.latest(subject)
                if latest.schema_type != self.SCHEMA_TYPE:
                    raise SerializationError(f"the latest schema of {subject} is {latest.schema_type}")
                schema_id, text = latest.schema_id, latest.schema
            else:
                assert self._schema is not None
                text = self._schema
                if self._auto_register:
                    schema_id = self._registry.register(subject, text, self.SCHEMA_TYPE)
                else:
                    schema_id = self._registry.lookup(subject, text, self.SCHEMA_TYPE).schema_id
        except SchemaRegistryError as e:
            raise SerializationError(f"{subject}: {e}") from None
        known = (schema_id, self._parse(text))
        with self._lock:
            self._subjects[subject] = known
        return known

    def serialize(self, topic: str, value: Any) -> bytes | None:
        if value is None:
            return None
        schema_id, parsed = self._schema_for(topic)
        return framed(schema_id, self._encode(parsed, value))


class _RegistryDeserializer(ABC):
    """What the registry formats share: each id's writer schema, asked once and parsed once."""

    SCHEMA_TYPE = ""

    def __init__(self, registry: SchemaRegistryClient) -> None:
        self._registry = registry
        self._lock = threading.Lock()
        self._parsed: dict[int, Any] = {}

    @abstractmethod
    def _parse(self, schema: str) -> Any:
        """The format's own step."""

    @abstractmethod
    def _decode(self, parsed: Any, payload: memoryview) -> Any:
        """The format's own step."""

    def deserialize(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        schema_id, payload = unframed(data)
        with self._lock:
            parsed = self._parsed.get(schema_id)
        if parsed is None:
            try:
                found = self._registry.schema(schema_id)
            except SchemaRegistryError as e:
                raise SerializationError(f"schema id {schema_id}: {e}") from None
            if found.schema_type != self.SCHEMA_TYPE:
                raise SerializationError(f"schema id {schema_id} is {found.schema_type}, not {self.SCHEMA_TYPE}")
            parsed = self._parse(found.schema)
            with self._lock:
                self._parsed[schema_id] = parsed
        return self._decode(parsed, payload)


def _avro_schema(text: str) -> Any:
    import fastavro

    try:
        return fastavro.parse_schema(json.loads(text))
    except (ValueError, TypeError, fastavro.schema.SchemaParseException) as e:
        raise SerializationError(f"not a valid Avro schema: {e}") from None


class AvroSerializer(_RegistrySerializer):
    """Avro's binary encoding (fastavro) of a value matching the schema (a dict for a record)."""

    SCHEMA_TYPE = "AVRO"

    def _parse(self, schema: str) -> Any:
        return _avro_schema(schema)

    def _encode(self, parsed: Any, value: Any) -> bytes:
        import fastavro

        out = io.BytesIO()
        try:
            fastavro.schemaless_writer(out, parsed, value)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as e:
            raise SerializationError(f"the value does not match its Avro schema: {e}") from None
        return out.getvalue()


class AvroDeserializer(_RegistryDeserializer):
    """Decodes with the writer's schema (from the registry by the record's id), resolved to ``reader_schema`` when
    one is given, by Avro's schema resolution rules."""

    SCHEMA_TYPE = "AVRO"

    def __init__(self, registry: SchemaRegistryClient, reader_schema: str | None = None) -> None:
        super().__init__(registry)
        self._reader = None if reader_schema is None else _avro_schema(reader_schema)

    def _parse(self, schema: str) -> Any:
        return _avro_schema(schema)

    def _decode(self, parsed: Any, payload: memoryview) -> Any:
        import fastavro

        try:
            return fastavro.schemaless_reader(io.BytesIO(payload), parsed, self._reader)
        except (ValueError, TypeError, EOFError, IndexError, KeyError, UnicodeDecodeError) as e:
            raise SerializationError(f"not a value of its Avro schema: {e}") from None
        except fastavro.read.SchemaResolutionError as e:
            raise SerializationError(f"the writer's schema does not resolve to the reader's: {e}") from None


def _json_validator(text: str) -> Any:
    import jsonschema

    try:
        schema = json.loads(text)
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
        cls.check_schema(schema)
    except (ValueError, jsonschema.SchemaError) as e:
        raise SerializationError(f"not a valid JSON Schema: {e}") from None
    return cls(schema)


def _check(validator: Any, value: Any) -> None:
    import jsonschema

    try:
        validator.validate(value)
    except jsonschema.ValidationError as e:
        raise SerializationError(f"the value does not match its JSON Schema: {e.message}") from None


class JsonSchemaSerializer(_RegistrySerializer):
    """The value as compact UTF-8 JSON, validated against the schema first (as Confluent's serializer does)."""

    SCHEMA_TYPE = "JSON"

    def _parse(self, schema: str) -> Any:
        return _json_validator(schema)

    def _encode(self, parsed: Any, value: Any) -> bytes:
        _check(parsed, value)
        try:
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
        except (TypeError, ValueError) as e:
            raise SerializationError(f"not JSON: {e}") from None


class JsonSchemaDeserializer(_RegistryDeserializer):
    """The JSON value, validated against the writer's schema."""

    SCHEMA_TYPE = "JSON"

    def _parse(self, schema: str) -> Any:
        return _json_validator(schema)

    def _decode(self, parsed: Any, payload: memoryview) -> Any:
        try:
            value = json.loads(bytes(payload))
        except ValueError as e:
            raise SerializationError(f"not JSON: {e}") from None
        _check(parsed, value)
        return value


SERIALIZER_NAMES = ("bytes", "string", "avro", "json")
REGISTRY_FORMATS = frozenset({"avro", "json"})


def _registry_of(config: ProducerConfig | ConsumerConfig) -> Callable[[], SchemaRegistryClient]:
    """One registry client for the key and the value side, made on first use."""
    made: list[SchemaRegistryClient] = []

    def registry() -> SchemaRegistryClient:
        if not made:
            made.append(
                SchemaRegistryClient(
                    config.schema_registry_url,
                    config.schema_registry_basic_auth_user_info,
                    ca_location=config.schema_registry_ssl_ca_location,
                    certificate_location=config.schema_registry_ssl_certificate_location,
                    key_location=config.schema_registry_ssl_key_location,
                    key_password=config.schema_registry_ssl_key_password,
                )
            )
        return made[0]

    return registry


def serializers(config: ProducerConfig) -> tuple[Serializer, Serializer] | None:
    """A producer config's key and value serializers; None when both are the default (bytes), so that ``send``
    keeps its direct path."""
    if config.key_serializer == "bytes" and config.value_serializer == "bytes":
        return None
    registry = _registry_of(config)

    def build(spec: Any, schema: str | None, is_key: bool) -> Serializer:
        if not isinstance(spec, str):
            return spec  # type: ignore[no-any-return]  # the config checked it has serialize()
        if spec == "string":
            return StringSerializer()
        kind = {"avro": AvroSerializer, "json": JsonSchemaSerializer}.get(spec)
        if kind is None:
            return BytesSerializer()
        return kind(
            registry(),
            schema,
            is_key=is_key,
            auto_register=config.auto_register_schemas,
            use_latest_version=config.use_latest_version,
        )

    return build(config.key_serializer, config.key_schema, True), build(
        config.value_serializer, config.value_schema, False
    )


def deserialized(
    records: list[ConsumerRecord], serde: tuple[Deserializer, Deserializer]
) -> tuple[list[ConsumerRecord], RecordDeserializationError | None]:
    """The records with keys and values deserialized, up to the first that fails, and that failure."""
    key_d, value_d = serde
    out: list[ConsumerRecord] = []
    for r in records:
        is_key = True
        try:
            key = key_d.deserialize(r.topic, r.key)
            is_key = False
            out.append(r._replace(key=key, value=value_d.deserialize(r.topic, r.value)))
        except Exception as e:  # an application's deserializer may raise anything
            side = "key" if is_key else "value"
            where = f"{r.topic}-{r.partition} offset {r.offset}"
            return out, RecordDeserializationError(
                f"{where}: the {side} cannot be deserialized: {e}", r.topic, r.partition, r.offset, is_key
            )
    return out, None


def deserializers(config: ConsumerConfig) -> tuple[Deserializer, Deserializer] | None:
    """A consumer config's key and value deserializers; None when both are the default (bytes)."""
    if config.key_deserializer == "bytes" and config.value_deserializer == "bytes":
        return None
    registry = _registry_of(config)

    def build(spec: Any, reader_schema: str | None) -> Deserializer:
        if not isinstance(spec, str):
            return spec  # type: ignore[no-any-return]  # the config checked it has deserialize()
        if spec == "string":
            return StringDeserializer()
        if spec == "avro":
            return AvroDeserializer(registry(), reader_schema)
        if spec == "json":
            return JsonSchemaDeserializer(registry())
        return BytesDeserializer()

    return build(config.key_deserializer, config.key_schema), build(config.value_deserializer, config.value_schema)
