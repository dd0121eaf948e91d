"""Key and value columns decoded through the schema registry (``keyFormat``/``valueFormat`` ``avro``, ``json`` or
``protobuf``).

Spark's Kafka source returns keys and values as binary and leaves decoding to ``from_avro`` in the query; this
source can decode registry-framed records itself (Confluent's wire format: a zero byte, the schema id, then the
Avro binary, the JSON text, or the Protobuf message indexes and message), so that the column is a struct whose fields
a query selects directly. Protobuf has a module of its own (protobuf.py); Avro and JSON Schema are here.

The column's type comes from one schema, fixed when the query is planned: ``valueSchema`` (``keySchema``) if given
(for Avro and JSON the schema's text; for Protobuf a registered schema, whose references it needs), else the latest
version of the subject ``<topic>-value`` (``<topic>-key``) of the one topic read. Avro records
written with other versions are resolved to it by Avro's rules (a field the reader adds takes its default); JSON
values are validated against their own schema, then laid out as that schema says (missing fields are null, extra
ones dropped). A record that cannot be decoded fails the task, naming its offset (Spark's ``FAILFAST``); a null
value (a tombstone) is a null column.

The type mapping (Avro; JSON Schema) to Spark and Arrow types is pure and tested on its own: record/object ->
struct, array -> array, map (Avro) -> map<string, ...>, a union with null (``["null", T]``; ``type: [T, "null"]``)
-> a nullable T, int -> int, long and integer -> bigint, float -> float, double and number -> double,
boolean, string and enum -> string, bytes and fixed -> binary; Avro's logical types date -> date, timestamp-millis
and -micros -> timestamp, decimal -> decimal(p, s), uuid -> string. Avro unions of several non-null types and the
time-of-day types have no Spark column type and are refused at planning. A JSON Schema part with no single type
(``oneOf``, no ``type``, an object without ``properties``) becomes a string column holding its JSON text.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from odradek.client.schema_registry import SchemaRegistryClient
from odradek.client.serialization import AvroDeserializer, JsonSchemaDeserializer, SerializationError

if TYPE_CHECKING:
    from odradek.spark_connector.protobuf import ProtobufDeserializer

FORMATS = ("binary", "avro", "json", "protobuf")


class DecodingError(ValueError):
    """The schema cannot be a column type, or a record cannot be decoded."""


@dataclass(frozen=True)
class ColumnType:
    """One schema's column: its Spark DDL type, its Arrow type (what Spark's ``to_arrow_schema`` makes of the
    DDL), and how a decoded value is laid out for Arrow."""

    ddl: str
    arrow: pa.DataType
    shape: Callable[[Any], Any]


def _same(value: Any) -> Any:
    return value


def quoted(name: str) -> str:
    """A field name in Spark's DDL."""
    return "`" + name.replace("`", "``") + "`"


def _nullable_of(types: Sequence[Any], what: str) -> Any:
    """The one non-null type of a union that may hold null."""
    others = [t for t in types if t != "null"]
    if len(others) != 1:
        raise DecodingError(f"{what}: a union of {others} has no Spark column type (only [null, T] has)")
    return others[0]


_AVRO_PRIMITIVES = {
    "boolean": ColumnType("boolean", pa.bool_(), _same),
    "int": ColumnType("int", pa.int32(), _same),
    "long": ColumnType("bigint", pa.int64(), _same),
    "float": ColumnType("float", pa.float32(), _same),
    "double": ColumnType("double", pa.float64(), _same),
    "bytes": ColumnType("binary", pa.binary(), _same),
    "string": ColumnType("string", pa.string(), _same),
}
_TIMESTAMP = ColumnType("timestamp", pa.timestamp("us", tz="UTC"), _same)


def avro_column(schema: Any, named: dict[str, ColumnType] | None = None, where: str = "value") -> ColumnType:
    """The column type of an Avro schema (parsed JSON)."""
    named = {} if named is None else named
    if isinstance(schema, list):
        return avro_column(_nullable_of(schema, where), named, where)
    if isinstance(schema, str):
        if schema in _AVRO_PRIMITIVES:
            return _AVRO_PRIMITIVES[schema]
        if schema in named:
            return named[schema]
        raise DecodingError(f"{where}: unknown Avro type {schema!r}")
    if not isinstance(schema, dict) or "type" not in schema:
        raise DecodingError(f"{where}: not an Avro schema: {schema!r}")
    kind, logical = schema["type"], schema.get("logicalType")
    if logical == "date" and kind == "int":
        return ColumnType("date", pa.date32(), _same)
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return _TIMESTAMP
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision, scale = int(schema["precision"]), int(schema.get("scale", 0))
        if precision > 38:
            raise DecodingError(f"{where}: decimal({precision}, {scale}) is wider than Spark's 38 digits")
        column = ColumnType(f"decimal({precision},{scale})", pa.decimal128(precision, scale), _same)
        if kind == "fixed":
            named[_full_name(schema)] = column
        return column
    if logical in ("time-millis", "time-micros"):
        raise DecodingError(f"{where}: Avro's {logical} has no Spark column type")
    if kind == "record":
        fields = [(f["name"], avro_column(f["type"], named, f"{where}.{f['name']}")) for f in schema["fields"]]
        column = _struct(fields)
        named[_full_name(schema)] = column
        return column
    if kind == "enum":
        named[_full_name(schema)] = _AVRO_PRIMITIVES["string"]
        return _AVRO_PRIMITIVES["string"]
    if kind == "fixed":
        named[_full_name(schema)] = _AVRO_PRIMITIVES["bytes"]
        return _AVRO_PRIMITIVES["bytes"]
    if kind == "array":
        item = avro_column(schema["items"], named, f"{where}[]")
        return ColumnType(f"array<{item.ddl}>", pa.list_(item.arrow), _list_of(item.shape))
    if kind == "map":
        value = avro_column(schema["values"], named, f"{where}{{}}")
        return ColumnType(f"map<string,{value.ddl}>", pa.map_(pa.string(), value.arrow), _map_of(value.shape))
    return avro_column(kind, named, where)  # {"type": "long"} and the like


def _full_name(schema: dict[str, Any]) -> str:
    name = str(schema["name"])
    namespace = schema.get("namespace")
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _struct(fields: list[tuple[str, ColumnType]]) -> ColumnType:
    ddl = "struct<" + ",".join(f"{quoted(n)}:{c.ddl}" for n, c in fields) + ">"
    arrow = pa.struct([pa.field(n, c.arrow) for n, c in fields])

    def shape(value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, dict):
            raise DecodingError(f"expected an object, got {type(value).__name__}")
        return {n: (None if value.get(n) is None else c.shape(value[n])) for n, c in fields}

    return ColumnType(ddl, arrow, shape)


def _list_of(item: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def shape(value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, list):
            raise DecodingError(f"expected an array, got {type(value).__name__}")
        return [None if v is None else item(v) for v in value]

    return shape


def _map_of(item: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def shape(value: Any) -> Any:
        return None if value is None else [(k, None if v is None else item(v)) for k, v in value.items()]

    return shape


def _json_text(value: Any) -> Any:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _json_scalar(kind: str) -> ColumnType:
    checks: dict[str, tuple[str, pa.DataType, tuple[type, ...]]] = {
        "integer": ("bigint", pa.int64(), (int,)),
        "number": ("double", pa.float64(), (int, float)),
        "string": ("string", pa.string(), (str,)),
        "boolean": ("boolean", pa.bool_(), (bool,)),
    }
    ddl, arrow, accepted = checks[kind]

    def shape(value: Any) -> Any:
        if not isinstance(value, accepted) or (isinstance(value, bool) and kind != "boolean"):
            raise DecodingError(f"expected {kind}, got {type(value).__name__}")
        return float(value) if kind == "number" else value  # type: ignore[arg-type]  # an int or float, checked

    return ColumnType(ddl, arrow, shape)


_JSON_TEXT = ColumnType("string", pa.string(), _json_text)


def json_column(schema: Any, where: str = "value") -> ColumnType:
    """The column type of a JSON Schema (parsed): by its ``type``; a part without one is its JSON text."""
    if not isinstance(schema, dict):
        return _JSON_TEXT
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = _nullable_of(kind, where)
    if kind == "object" and isinstance(schema.get("properties"), dict):
        props = schema["properties"]
        return _struct([(name, json_column(sub, f"{where}.{name}")) for name, sub in props.items()])
    if kind == "array" and isinstance(schema.get("items"), dict):
        item = json_column(schema["items"], f"{where}[]")
        return ColumnType(f"array<{item.ddl}>", pa.list_(item.arrow), _list_of(item.shape))
    if kind in ("integer", "number", "string", "boolean"):
        return _json_scalar(kind)
    return _JSON_TEXT


def column_for(fmt: str, schema_text: str, where: str) -> ColumnType:
    """The column of a key or value in ``fmt`` (avro, json or protobuf) whose reader schema is ``schema_text``."""
    if fmt == "protobuf":
        from odradek.spark_connector import protobuf  # which imports this module

        return protobuf.column(schema_text, where)
    try:
        parsed = json.loads(schema_text)
    except ValueError as e:
        raise DecodingError(f"{where}: the schema is not JSON: {e}") from None
    return avro_column(parsed, where=where) if fmt == "avro" else json_column(parsed, where)


@dataclass(frozen=True)
class Registry:
    """How to reach the schema registry: ``schema.registry.url``, ``.basic.auth.user.info`` (``user:password``, ""
    for none; left out of the repr), ``.ssl.ca.location`` (the PEM CA an https registry is checked against, "" for
    the system's) and ``.ssl.certificate.location``/``.ssl.key.location`` (a client certificate and its key, for a
    registry that requires one; ``.ssl.key.password`` decrypts the key, left out of the repr). The paths must hold
    on every executor too."""

    url: str
    basic_auth: str = dataclasses.field(default="", repr=False)
    ca_location: str = ""
    certificate_location: str = ""
    key_location: str = ""
    key_password: str = dataclasses.field(default="", repr=False)

    def client(self) -> SchemaRegistryClient:
        return SchemaRegistryClient(
            self.url,
            self.basic_auth,
            ca_location=self.ca_location,
            certificate_location=self.certificate_location,
            key_location=self.key_location,
            key_password=self.key_password,
        )


@dataclass(frozen=True)
class Decoding:
    """How an executor decodes one column (picklable: Spark ships it inside the input partition)."""

    fmt: str  # avro, json or protobuf
    schema: str  # the reader schema's text (protobuf: its files, as protobuf.reader_schema writes them)
    registry: Registry
    field: str  # key or value

    def decoder(self) -> Callable[[Sequence[bytes | None], Sequence[int]], pa.Array]:
        """A function from a batch's raw column (and its offsets, for errors) to the decoded Arrow column."""
        column = column_for(self.fmt, self.schema, self.field)
        registry = self.registry.client()
        deserializer: AvroDeserializer | JsonSchemaDeserializer | ProtobufDeserializer
        if self.fmt == "avro":
            deserializer = AvroDeserializer(registry, self.schema)
        elif self.fmt == "json":
            deserializer = JsonSchemaDeserializer(registry)
        else:
            from odradek.spark_connector.protobuf import ProtobufDeserializer

            deserializer = ProtobufDeserializer(registry, self.schema)
        shape = column.shape

        def decode(raw: Sequence[bytes | None], offsets: Sequence[int]) -> pa.Array:
            out: list[Any] = []
            for data, offset in zip(raw, offsets, strict=True):
                try:
                    value = deserializer.deserialize("", data)
                    out.append(None if value is None else shape(value))
                except (SerializationError, DecodingError) as e:
                    raise DecodingError(
                        f"the {self.field} at offset {offset} cannot be decoded as {self.fmt}: {e}"
                    ) from None
            return pa.array(out, column.arrow)

        return decode
