"""Protobuf keys and values (``keyFormat``/``valueFormat`` ``protobuf``): Confluent's framing, the schema's files from
the registry, and the column of a message.

Confluent's Protobuf serializers write the zero byte and the schema id, then which message of the schema's file the
record holds (the message indexes: a zigzag varint count, then that many zigzag varints, each the message's position
among those declared at its level; the single byte 0 stands for [0], the file's first message), then the message.
The registry serves a schema as a base64 ``FileDescriptorProto`` (``?format=serialized``) with its references (the
files it imports, each a subject and version); they make one descriptor pool, dependencies first. ``google/protobuf/``
imports, which Confluent's serializers do not register, come from the protobuf runtime.

The column is the first message of the reader's schema (``valueSchema``: ``subject`` or ``subject:version``, else
the latest of ``<topic>-value``). Records written with other schema ids are parsed with the reader's message, by field
number as protobuf reads: fields only the writer has are dropped, fields only the reader has are unset. That holds
only where the two agree on the wire, so each writer's message is checked once per schema id by the registry's
Protobuf rules: the same full name, and every field number both declare of one wire encoding, repeated on both sides
or neither, nested messages and enums of the same full names; no field the reader requires missing from the writer.
A record whose writer fails the check cannot be decoded (the task fails, naming its offset, as for any record).

Types: int32, sint32, sfixed32 -> int; int64, sint64, sfixed64, uint32, fixed32 -> bigint; uint64 and fixed64 ->
decimal(20,0) (every value exact, including those above 2^63); bool, float, double, string; bytes -> binary; enum
-> string (the value's name, or its number as text if the reader's enum names none); message -> struct; repeated ->
array; map -> map; google.protobuf.Timestamp -> timestamp (microseconds, the nanoseconds below dropped);
google.protobuf.Struct, Value and ListValue -> string (their JSON text: they nest themselves); other well-known types
as the structs they are. A field with presence (a message, a oneof member, ``optional``, any proto2 singular field)
is null when unset; a proto3 scalar without it reads as protobuf reads it, its default (0, "", false, the enum's
first value) when unset. Other recursive messages have no Spark column type and are refused at planning.
"""

from __future__ import annotations

import base64
import binascii
import functools
import importlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message

from odradek.client.schema_registry import RegisteredSchema, SchemaRegistryClient, SchemaRegistryError
from odradek.client.serialization import unframed
from odradek.spark_connector.decoding import ColumnType, DecodingError, quoted

SCHEMA_TYPE = "PROTOBUF"
SERIALIZED = "serialized"  # the registry's ?format= for a base64 FileDescriptorProto
WELL_KNOWN = "google/protobuf/"
MAX_REFERENCE_DEPTH = 32

F = FieldDescriptor
_WIRE_GROUPS: tuple[frozenset[int], ...] = (
    frozenset({F.TYPE_INT32, F.TYPE_UINT32, F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_BOOL}),
    frozenset({F.TYPE_SINT32, F.TYPE_SINT64}),
    frozenset({F.TYPE_FIXED32, F.TYPE_SFIXED32}),
    frozenset({F.TYPE_FIXED64, F.TYPE_SFIXED64}),
    frozenset({F.TYPE_STRING, F.TYPE_BYTES}),
)
"""Field types that share a wire encoding: a value written as one reads as another (the registry's groups)."""
_NAMED = frozenset({F.TYPE_MESSAGE, F.TYPE_GROUP, F.TYPE_ENUM})  # the same wire only under the same full name


def _same(value: Any) -> Any:
    return value


_INT = ColumnType("int", pa.int32(), _same)
_BIGINT = ColumnType("bigint", pa.int64(), _same)
_SCALARS = {
    F.TYPE_INT32: _INT,
    F.TYPE_SINT32: _INT,
    F.TYPE_SFIXED32: _INT,
    F.TYPE_INT64: _BIGINT,
    F.TYPE_SINT64: _BIGINT,
    F.TYPE_SFIXED64: _BIGINT,
    F.TYPE_UINT32: _BIGINT,
    F.TYPE_FIXED32: _BIGINT,
    F.TYPE_UINT64: ColumnType("decimal(20,0)", pa.decimal128(20, 0), _same),
    F.TYPE_FIXED64: ColumnType("decimal(20,0)", pa.decimal128(20, 0), _same),
    F.TYPE_BOOL: ColumnType("boolean", pa.bool_(), _same),
    F.TYPE_FLOAT: ColumnType("float", pa.float32(), _same),
    F.TYPE_DOUBLE: ColumnType("double", pa.float64(), _same),
    F.TYPE_STRING: ColumnType("string", pa.string(), _same),
    F.TYPE_BYTES: ColumnType("binary", pa.binary(), _same),
}
_JSON_TEXT = frozenset({"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"})


def subject_version(text: str) -> tuple[str, str]:
    """``subject`` or ``subject:version`` (a version number or ``latest``) -> (subject, version)."""
    subject, colon, version = text.strip().rpartition(":")
    if not colon or not (version == "latest" or version.isdigit()):
        subject, version = text.strip(), "latest"
    if not subject:
        raise ValueError(f"expected subject or subject:version, got {text!r}")
    if version != "latest" and int(version) < 1:
        raise ValueError(f"versions start at 1, got {text!r}")
    return subject, version


def _file(found: RegisteredSchema, what: str) -> descriptor_pb2.FileDescriptorProto:
    if found.schema_type != SCHEMA_TYPE:
        raise DecodingError(f"{what} is {found.schema_type}, not PROTOBUF")
    try:
        return descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(found.schema, validate=True))
    except (binascii.Error, ValueError, DecodeError):
        raise DecodingError(f"{what}: the registry did not answer a serialized descriptor") from None


def registered_files(registry: SchemaRegistryClient, root: RegisteredSchema, what: str) -> list[bytes]:
    """The serialized files of a schema fetched with ``format=serialized``: its references' (each named by the
    import path the importing file uses), what those reference in turn, then its own; dependencies first, each once."""
    files: dict[str, bytes] = {}

    def add(found: RegisteredSchema, name: str | None, where: str, depth: int) -> None:
        if depth > MAX_REFERENCE_DEPTH:
            raise DecodingError(f"{what}: references nest deeper than {MAX_REFERENCE_DEPTH} (a cycle?)")
        file = _file(found, where)
        for ref in found.references:
            if ref.name not in files:
                at = f"{where}'s reference {ref.name} ({ref.subject} version {ref.version})"
                try:
                    referenced = registry.version(ref.subject, ref.version, SERIALIZED)
                except SchemaRegistryError as e:
                    raise DecodingError(f"{at}: {e}") from None
                add(referenced, ref.name, at, depth + 1)
        if name is not None:
            file.name = name  # the import path the importing files name it by
        files[file.name] = file.SerializeToString()

    add(root, None, what, 0)
    return list(files.values())


Pool = tuple[descriptor_pool.DescriptorPool, descriptor_pb2.FileDescriptorProto]


def _pool(files: tuple[bytes, ...], what: str) -> Pool:
    """The pool of ``files`` (dependencies first) and the last one, the schema's own."""
    pool = descriptor_pool.DescriptorPool()
    parsed = [descriptor_pb2.FileDescriptorProto.FromString(f) for f in files]
    added: set[str] = set()
    for file in parsed:
        for dependency in file.dependency:
            _add_well_known(pool, dependency, what, added)
        try:
            pool.Add(file)
        except (TypeError, KeyError, ValueError) as e:
            raise DecodingError(f"{what}: {file.name} does not make a descriptor: {e}") from None
        added.add(file.name)
    return pool, parsed[-1]


def _add_well_known(pool: descriptor_pool.DescriptorPool, name: str, what: str, added: set[str]) -> None:
    """An import that no reference provided (``added`` holds what the pool has): a google/protobuf/ file, from the
    protobuf runtime, after its own imports."""
    if name in added:
        return
    module = name.removeprefix(WELL_KNOWN).removesuffix(".proto")
    if not name.startswith(WELL_KNOWN) or not module.isidentifier():
        raise DecodingError(f"{what}: the import {name!r} is neither among the schema's references nor well-known")
    try:
        importlib.import_module(f"google.protobuf.{module}_pb2")
        found = descriptor_pool.Default().FindFileByName(name)
    except (ImportError, KeyError):
        raise DecodingError(f"{what}: the protobuf runtime has no well-known {name!r}") from None
    out = descriptor_pb2.FileDescriptorProto()
    found.CopyToProto(out)
    for dependency in out.dependency:
        _add_well_known(pool, dependency, what, added)
    pool.Add(out)
    added.add(name)


def _message_name(file: descriptor_pb2.FileDescriptorProto, indexes: tuple[int, ...], what: str) -> str:
    """The full name of the message the indexes select (the first among the file's, then among its nested ones)."""
    name, level = file.package, file.message_type
    for index in indexes:
        if index >= len(level):
            raise DecodingError(f"{what}: no message at indexes {list(indexes)}")
        name = f"{name}.{level[index].name}" if name else level[index].name
        level = level[index].nested_type
    return name


def reader_schema(registry: SchemaRegistryClient, subject: str, version: str) -> str:
    """The reader's schema as ``Decoding`` carries it to the executors: its files, serialized, as JSON text."""
    found = registry.version(subject, version, SERIALIZED)
    files = registered_files(registry, found, f"the subject {subject}")
    return json.dumps([base64.b64encode(f).decode("ascii") for f in files])


@functools.lru_cache(maxsize=16)
def _reader(text: str) -> tuple[Descriptor, ColumnType, type[Message]]:
    """The reader's message (the first of its schema's), its column and its class; parsed once per process."""
    try:
        files = tuple(base64.b64decode(f, validate=True) for f in json.loads(text))
    except (ValueError, TypeError, binascii.Error):
        raise DecodingError("not a protobuf reader schema") from None
    pool, root = _pool(files, "the reader's schema")
    if not root.message_type:
        raise DecodingError(f"the reader's schema ({root.name}) declares no message")
    message = pool.FindMessageTypeByName(_message_name(root, (0,), root.name))
    return message, message_column(message), message_factory.GetMessageClass(message)


def column(text: str, where: str) -> ColumnType:
    """The column of a reader schema as ``reader_schema`` writes it."""
    try:
        return _reader(text)[1]
    except DecodingError as e:
        raise DecodingError(f"{where}: {e}") from None


def message_column(message: Descriptor, where: str = "", path: tuple[str, ...] = ()) -> ColumnType:
    """The column of a message (a struct of its fields, by name), the well-known types as the module says."""
    name = message.full_name
    if name == "google.protobuf.Timestamp":
        return ColumnType("timestamp", pa.timestamp("us", tz="UTC"), _timestamp)
    if name in _JSON_TEXT:
        return ColumnType("string", pa.string(), _json_text)
    if name in path:
        raise DecodingError(
            f"{where or name}: message {name} contains itself; a recursive message has no Spark column type"
        )
    fields = [
        (f.name, _field_getter(f, f"{where}.{f.name}" if where else f.name, (*path, name))) for f in message.fields
    ]
    ddl = "struct<" + ",".join(f"{quoted(n)}:{c.ddl}" for n, (c, _) in fields) + ">"
    arrow = pa.struct([pa.field(n, c.arrow) for n, (c, _) in fields])
    getters = [(n, get) for n, (_, get) in fields]

    def shape(value: Message) -> dict[str, Any]:
        return {n: get(value) for n, get in getters}

    return ColumnType(ddl, arrow, shape)


def _field_getter(
    field: FieldDescriptor, where: str, path: tuple[str, ...]
) -> tuple[ColumnType, Callable[[Message], Any]]:
    """The field's column type, and how its value is read off a message."""
    name = field.name
    entry = _message_of(field) if field.type == F.TYPE_MESSAGE else None
    if field.is_repeated and entry is not None and entry.GetOptions().map_entry:
        key = _value_column(entry.fields_by_name["key"], where, path)
        value = _value_column(entry.fields_by_name["value"], where, path)
        ddl = f"map<{key.ddl},{value.ddl}>"
        k, v = key.shape, value.shape

        def get_map(m: Message) -> Any:
            return [(k(a), v(b)) for a, b in getattr(m, name).items()]

        return ColumnType(ddl, pa.map_(key.arrow, value.arrow), _same), get_map
    item = _value_column(field, where, path)
    shape = item.shape
    if field.is_repeated:

        def get_list(m: Message) -> Any:
            return [shape(v) for v in getattr(m, name)]

        return ColumnType(f"array<{item.ddl}>", pa.list_(item.arrow), _same), get_list
    if field.has_presence:

        def get_present(m: Message) -> Any:
            return shape(getattr(m, name)) if m.HasField(name) else None

        return item, get_present

    def get(m: Message) -> Any:
        return shape(getattr(m, name))

    return item, get


def _value_column(field: FieldDescriptor, where: str, path: tuple[str, ...]) -> ColumnType:
    """The column of one value of the field (an element, for a repeated one)."""
    if field.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
        return message_column(_message_of(field), where, path)
    if field.type == F.TYPE_ENUM:
        names = {v.number: v.name for v in _enum_of(field).values}

        def enum_name(number: int) -> str:
            return names.get(number, str(number))

        return ColumnType("string", pa.string(), enum_name)
    return _SCALARS[field.type]


def _timestamp(value: Message) -> int:
    return value.seconds * 1_000_000 + value.nanos // 1000  # type: ignore[attr-defined]  # a Timestamp


def _json_text(value: Message) -> str:
    return json.dumps(json_format.MessageToDict(value), separators=(",", ":"), sort_keys=True)


def message_indexes(payload: memoryview) -> tuple[tuple[int, ...], int]:
    """The message indexes at the start of a framed payload, and where the message starts."""
    count, at = _zigzag(payload, 0)
    if count == 0:
        return (0,), at
    if count < 0 or count > len(payload):
        raise DecodingError(f"a message index count of {count} is not a count")
    indexes = []
    for _ in range(count):
        index, at = _zigzag(payload, at)
        if index < 0:
            raise DecodingError(f"a negative message index ({index})")
        indexes.append(index)
    return tuple(indexes), at


def _zigzag(data: memoryview, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise DecodingError("the message indexes end before the message")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), at
        shift += 7
        if shift > 63:
            raise DecodingError("a message index is longer than a varint")


def wire_problems(reader: Descriptor, writer: Descriptor) -> list[str]:
    """Why the reader's message does not read what the writer's wrote; empty when it does."""
    if reader.full_name != writer.full_name:
        return [f"written as message {writer.full_name}, read as {reader.full_name}"]
    return list(_problems(reader, writer, reader.full_name, set()))


def _problems(reader: Descriptor, writer: Descriptor, where: str, seen: set[str]) -> Iterator[str]:
    if reader.full_name in seen:
        return
    seen.add(reader.full_name)
    for w in writer.fields:
        r = reader.fields_by_number.get(w.number)
        if r is None:
            continue
        at = f"{where}.{r.name} (field {w.number})"
        if r.is_repeated != w.is_repeated:
            yield f"{at}: repeated on one side only"
        elif not _same_wire(r, w):
            yield f"{at}: {_type(w)} written, {_type(r)} read"
        elif r.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
            yield from _problems(_message_of(r), _message_of(w), at, seen)
    for r in reader.fields:
        if r.is_required and r.number not in writer.fields_by_number:
            yield f"{where}.{r.name} (field {r.number}): required by the reader, not written"


def _same_wire(r: FieldDescriptor, w: FieldDescriptor) -> bool:
    if r.type in _NAMED or w.type in _NAMED:
        return r.type == w.type and _named(r) == _named(w)
    return r.type == w.type or any(r.type in g and w.type in g for g in _WIRE_GROUPS)


def _message_of(field: FieldDescriptor) -> Descriptor:
    """A message (or group) field's message type."""
    assert field.message_type is not None
    return field.message_type


def _enum_of(field: FieldDescriptor) -> EnumDescriptor:
    assert field.enum_type is not None
    return field.enum_type


def _named(field: FieldDescriptor) -> str:
    return _enum_of(field).full_name if field.type == F.TYPE_ENUM else _message_of(field).full_name


def _type(field: FieldDescriptor) -> str:
    kind = descriptor_pb2.FieldDescriptorProto.Type.Name(field.type).removeprefix("TYPE_").lower()  # type: ignore[arg-type]
    return f"{kind} {_named(field)}" if field.type in _NAMED else kind


class ProtobufDeserializer:
    """Registry-framed Protobuf records as the reader's messages. Each writer's schema (by id) and message (by
    indexes) is fetched and checked against the reader's once; a record of a writer that fails the check, or that
    does not parse, raises DecodingError."""

    def __init__(self, registry: SchemaRegistryClient, reader: str) -> None:
        self._registry = registry
        self._message, _, self._class = _reader(reader)
        self._writers: dict[int, Pool] = {}
        self._verdicts: dict[tuple[int, tuple[int, ...]], str] = {}  # "" where the reader reads the writer

    def deserialize(self, topic: str, data: bytes | None) -> Message | None:
        if data is None:
            return None
        schema_id, payload = unframed(data)
        indexes, start = message_indexes(payload)
        problem = self._verdicts.get((schema_id, indexes))
        if problem is None:
            problem = self._verdicts[(schema_id, indexes)] = self._check(schema_id, indexes)
        if problem:
            raise DecodingError(problem)
        try:
            return self._class.FromString(bytes(payload[start:]))
        except DecodeError as e:
            raise DecodingError(f"not a {self._message.full_name}: {e}") from None

    def _check(self, schema_id: int, indexes: tuple[int, ...]) -> str:
        what = f"schema id {schema_id}"
        writer = self._writers.get(schema_id)
        if writer is None:
            try:
                found = self._registry.schema(schema_id, SERIALIZED)
            except SchemaRegistryError as e:
                raise DecodingError(f"{what}: {e}") from None
            writer = self._writers[schema_id] = _pool(tuple(registered_files(self._registry, found, what)), what)
        pool, file = writer
        written = pool.FindMessageTypeByName(_message_name(file, indexes, what))
        problems = wire_problems(self._message, written)
        return f"{what} does not read as the column's message: {'; '.join(problems)}" if problems else ""
