"""Keys and values written with Confluent's serializers, decoded for the console, without I/O: such bytes are framed
as a zero magic byte, the schema's id in the registry (4 bytes, big-endian) and the payload; the schema comes from
the schema registry (service.py asks it as the caller), and the payload is read with it: Avro (fastavro), JSON
(the payload is the JSON text) or Protobuf (the message the frame's indexes name in the schema's descriptor).
Schemas with references to other schemas are not decoded."""

from __future__ import annotations

import base64
import datetime
import decimal
import io
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fastavro import schemaless_reader
from fastavro.schema import parse_schema
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import DecodeError

MAGIC = 0
FRAME = 5  # the magic byte and the schema id


class DecodingError(ValueError):
    """Why framed bytes could not be decoded; shown next to the record."""


@dataclass(frozen=True, slots=True)
class Schema:
    """A registered schema as ``GET /schemas/ids/{id}?format=serialized`` answers it (Protobuf: a base64
    ``FileDescriptorProto``)."""

    type: str  # AVRO, JSON or PROTOBUF
    text: str
    has_references: bool = False


def framed(data: bytes | None) -> tuple[int, bytes] | None:
    """The schema id and payload of framed bytes; None for bytes not framed so."""
    if data is None or len(data) < FRAME or data[0] != MAGIC:
        return None
    return int.from_bytes(data[1:FRAME], "big"), data[FRAME:]


def schema_of(answer: Mapping[str, Any]) -> Schema:
    """The registry's answer for a schema id."""
    text = answer.get("schema")
    if not isinstance(text, str):
        raise DecodingError("the schema registry answered no schema")
    return Schema(str(answer.get("schemaType") or "AVRO").upper(), text, bool(answer.get("references")))


def decode(schema: Schema, payload: bytes) -> object:
    """The payload read with ``schema``, as JSON values."""
    if schema.has_references:
        raise DecodingError("schemas with references are not decoded by the console")
    try:
        if schema.type == "AVRO":
            parsed = parse_schema(json.loads(schema.text))
            return jsonable(schemaless_reader(io.BytesIO(payload), parsed, None))
        if schema.type == "JSON":
            return json.loads(payload)
        if schema.type == "PROTOBUF":
            return _protobuf(schema.text, payload)
    except DecodingError:
        raise
    except (ValueError, TypeError, EOFError, KeyError, IndexError, DecodeError) as e:
        raise DecodingError(f"{schema.type} payload does not decode with its schema: {e}") from None
    raise DecodingError(f"unknown schema type {schema.type}")


def _varint(data: bytes, position: int) -> tuple[int, int]:
    """A zig-zag varint (Confluent's message indexes) at ``position``, and the position after it."""
    shift = result = 0
    while True:
        if position >= len(data) or shift > 63:
            raise DecodingError("the Protobuf message indexes are truncated")
        byte = data[position]
        result |= (byte & 0x7F) << shift
        position += 1
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), position
        shift += 7


def message_indexes(payload: bytes) -> tuple[list[int], bytes]:
    """The indexes of the message type in the schema's file (``[0]``: its first message) and the message's bytes."""
    count, position = _varint(payload, 0)
    if count == 0:
        return [0], payload[position:]
    if count < 0 or count > 64:
        raise DecodingError(f"implausible Protobuf message index count {count}")
    indexes = []
    for _ in range(count):
        index, position = _varint(payload, position)
        indexes.append(index)
    return indexes, payload[position:]


def _protobuf(serialized: str, payload: bytes) -> object:
    file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized, validate=True))
    pool = descriptor_pool.DescriptorPool()
    for dependency in file.dependency:
        try:
            known = descriptor_pool.Default().FindFileByName(dependency)
        except KeyError:
            raise DecodingError(f"the schema imports {dependency}, which the console does not know") from None
        proto = descriptor_pb2.FileDescriptorProto()
        known.CopyToProto(proto)
        pool.Add(proto)
    pool.Add(file)
    indexes, data = message_indexes(payload)
    types = file.message_type
    names: list[str] = []
    for index in indexes:
        if not 0 <= index < len(types):
            raise DecodingError(f"the schema has no message at index {index}")
        names.append(types[index].name)
        types = types[index].nested_type
    full_name = ".".join([file.package, *names] if file.package else names)
    message = message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name)).FromString(data)
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def jsonable(value: object) -> object:
    """Avro's Python values as JSON values: bytes in base64, times and decimals as text."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    return value
