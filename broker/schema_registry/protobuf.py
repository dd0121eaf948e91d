"""Protobuf schemas, in either form Confluent's clients send: ``.proto`` source text (Java's serializers; parsed by
proto_text.py), or the "serialized" form, a base64 ``FileDescriptorProto`` (confluent-kafka's Python
``ProtobufSerializer``). Either is answered in either form: as registered by default (text for a schema registered as
a descriptor, rendered from it), and as a descriptor with ``?format=serialized``, which Python's deserializer asks for.

Compatibility follows the wire format, message by message (full name), field by field (number), as Confluent's
rules do: a reader reads a writer's message when every field number both declare has a wire-compatible type
(the same type, or one of the groups that share an encoding: int32, uint32, int64, uint64 and bool; sint32 and
sint64; fixed32 and sfixed32; fixed64 and sfixed64; string and bytes; messages and enums of the same full name) and
the same cardinality (repeated or not); fields only the writer declares are skipped as unknown fields; a field only
the reader declares may not be ``required`` (proto2); and no field moves into a oneof that already existed, nor two
fields into a new one. A message type the writer declares must still be declared by the reader.
"""

from __future__ import annotations

import base64
import binascii
import importlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message import DecodeError

from odradek.broker.schema_registry import proto_text

F = descriptor_pb2.FieldDescriptorProto
# Field types that share a wire encoding: a value written as one reads as another.
WIRE_GROUPS: tuple[frozenset[int], ...] = (
    frozenset({F.TYPE_INT32, F.TYPE_UINT32, F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_BOOL}),
    frozenset({F.TYPE_SINT32, F.TYPE_SINT64}),
    frozenset({F.TYPE_FIXED32, F.TYPE_SFIXED32}),
    frozenset({F.TYPE_FIXED64, F.TYPE_SFIXED64}),
    frozenset({F.TYPE_STRING, F.TYPE_BYTES}),
)
NAMED = frozenset({F.TYPE_MESSAGE, F.TYPE_ENUM, F.TYPE_GROUP})
# Imports every Confluent client resolves by itself (and does not register): well-known types and Confluent's own.
BUILTIN_PREFIXES = ("google/protobuf/", "google/type/", "confluent/")


class ProtobufSchemaError(ValueError):
    """Not a schema the registry takes (the message says why)."""


@dataclass(frozen=True, eq=False)
class ProtobufSchema:
    text: str  # as registered: .proto text, or the base64 descriptor (whitespace removed)
    file: descriptor_pb2.FileDescriptorProto
    messages: dict[str, descriptor_pb2.DescriptorProto]  # by full name, nested messages included
    serialized: bool  # registered as a descriptor

    def formatted(self, fmt: str) -> str:
        """The schema as ``?format=`` asks: ``serialized`` the base64 descriptor, anything else the text."""
        if fmt == "serialized":
            return self.text if self.serialized else _base64(self.file)
        return proto_text.render(self.file) if self.serialized else self.text


def _base64(file: descriptor_pb2.FileDescriptorProto) -> str:
    return base64.standard_b64encode(file.SerializeToString(deterministic=True)).decode("ascii")


def _descriptor(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """The descriptor of a base64 text, None for anything else (.proto text holds characters base64 has not)."""
    try:
        return descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode("".join(text.split()), validate=True))
    except (binascii.Error, ValueError, DecodeError):
        return None


def _well_known(name: str) -> descriptor_pb2.FileDescriptorProto | None:
    """A google/protobuf/ file from the protobuf runtime, which ships them all."""
    module = name.removeprefix("google/protobuf/").removesuffix(".proto")
    if not module.isidentifier():
        return None
    try:
        importlib.import_module(f"google.protobuf.{module}_pb2")
        found = descriptor_pool.Default().FindFileByName(name)
    except (ImportError, KeyError):
        return None
    out = descriptor_pb2.FileDescriptorProto()
    found.CopyToProto(out)
    return out


def parse(text: str, references: Sequence[tuple[str, str]] = ()) -> ProtobufSchema:
    """Parse ``text`` (.proto text or a base64 descriptor); ``references`` are (import path, text) of the schemas
    it imports and what those import, dependencies first. An import must be a reference, or one of the files clients
    resolve themselves (``google/protobuf/``, ``google/type/``, ``confluent/``); a .proto text can name the types of
    the ``google/protobuf/`` ones, which the protobuf runtime provides."""
    file = _descriptor(text)
    serialized = file is not None
    names = {name for name, _ in references}
    if file is None:
        known: dict[str, descriptor_pb2.FileDescriptorProto] = {}

        def lookup(path: str) -> descriptor_pb2.FileDescriptorProto | None:
            return known.get(path) or (_well_known(path) if path.startswith("google/protobuf/") else None)

        try:
            for name, ref_text in references:
                found = _descriptor(ref_text) or proto_text.parse(ref_text, lookup)
                found.name = name  # the path the importing files name it by
                known[name] = found
            file = proto_text.parse(text, lookup)
        except proto_text.ProtoTextError as e:
            raise ProtobufSchemaError(str(e)) from None
    if not file.message_type and not file.enum_type:
        raise ProtobufSchemaError("the schema declares no message or enum")
    for dependency in file.dependency:
        if dependency not in names and not dependency.startswith(BUILTIN_PREFIXES):
            raise ProtobufSchemaError(f"import {dependency!r} is not among the schema's references")
    prefix = f".{file.package}" if file.package else ""
    stored = "".join(text.split()) if serialized else text
    return ProtobufSchema(stored, file, dict(_messages(file.message_type, prefix)), serialized)


def _messages(
    messages: Sequence[descriptor_pb2.DescriptorProto], prefix: str
) -> Iterator[tuple[str, descriptor_pb2.DescriptorProto]]:
    for message in messages:
        full = f"{prefix}.{message.name}"
        yield full, message
        yield from _messages(message.nested_type, full)


def normalized_text(schema: ProtobufSchema) -> str:
    """The schema as text rendered from its descriptor: the same schema, however written or sent, renders alike."""
    return proto_text.render(schema.file)


def can_read(reader: ProtobufSchema, writer: ProtobufSchema) -> list[str]:
    """Why data written with ``writer`` may not read with ``reader``; empty when it reads."""
    out: list[str] = []
    for name, written in writer.messages.items():
        read = reader.messages.get(name)
        if read is None:
            out.append(f"message {name.lstrip('.')} is missing from the reader")
        else:
            out += _message(read, written, name.lstrip("."))
    return out


def _oneof(message: descriptor_pb2.DescriptorProto, field: descriptor_pb2.FieldDescriptorProto) -> str | None:
    """The real oneof a field is in (not proto3's synthetic oneof of an ``optional`` field)."""
    if not field.HasField("oneof_index") or field.proto3_optional:
        return None
    return message.oneof_decl[field.oneof_index].name


def _message(read: descriptor_pb2.DescriptorProto, written: descriptor_pb2.DescriptorProto, name: str) -> list[str]:
    out: list[str] = []
    reader_fields = {f.number: f for f in read.field}
    writer_fields = {f.number: f for f in written.field}
    writer_oneofs = {_oneof(written, f) for f in written.field} - {None}
    moved: dict[str, int] = {}
    for number, w in sorted(writer_fields.items()):
        r = reader_fields.get(number)
        if r is None:
            continue
        where = f"{name}.{r.name} (field {number})"
        if not _same_wire(r, w):
            out.append(f"{where}: type {_type(w)} written, {_type(r)} read")
        if (r.label == F.LABEL_REPEATED) != (w.label == F.LABEL_REPEATED):
            out.append(f"{where}: repeated on one side only")
        into = _oneof(read, r)
        if into is not None and _oneof(written, w) is None:
            if into in writer_oneofs:
                out.append(f"{where}: moved into the existing oneof {into}")
            moved[into] = moved.get(into, 0) + 1
    out += [f"{name}: several fields moved into the new oneof {o}" for o, n in sorted(moved.items()) if n > 1]
    for number, r in sorted(reader_fields.items()):
        if number not in writer_fields and r.label == F.LABEL_REQUIRED:
            out.append(f"{name}.{r.name} (field {number}): required by the reader, not written")
    return out


def _same_wire(r: descriptor_pb2.FieldDescriptorProto, w: descriptor_pb2.FieldDescriptorProto) -> bool:
    if r.type == w.type:
        return r.type not in NAMED or r.type_name == w.type_name
    return any(r.type in group and w.type in group for group in WIRE_GROUPS)


def _type(field: descriptor_pb2.FieldDescriptorProto) -> str:
    kind = F.Type.Name(field.type).removeprefix("TYPE_").lower()
    return f"{kind} {field.type_name.lstrip('.')}" if field.type in NAMED else kind
