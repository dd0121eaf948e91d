"""The Protobuf compatibility matrix: descriptors built here (no .proto files), each evolution registered after its
first schema at every level, accepted or refused as the wire format says; and what the registry takes and refuses
as a Protobuf schema."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from matrix import expected, matrix_core, register_input

from odradek.broker.schema_registry.compatibility import LEVELS
from odradek.broker.schema_registry.core import RegistryCore, SchemaInput
from odradek.broker.schema_registry.errors import RegistryError
from odradek.broker.schema_registry.protobuf import ProtobufSchemaError, can_read, parse
from odradek.broker.schema_registry.records import Reference

F = descriptor_pb2.FieldDescriptorProto


def field(name: str, number: int, kind: int, **extra: Any) -> dict[str, Any]:
    return {"name": name, "number": number, "type": kind, "label": extra.pop("label", F.LABEL_OPTIONAL), **extra}


def descriptor(
    *messages: tuple[str, list[dict[str, Any]], list[str]], package: str = "t", syntax: str = "proto3"
) -> descriptor_pb2.FileDescriptorProto:
    """A file of messages, each (name, fields, oneof names); a field's ``oneof`` names one of its message's."""
    fd = descriptor_pb2.FileDescriptorProto(name="t.proto", package=package, syntax=syntax)
    for name, fields, oneofs in messages:
        m = fd.message_type.add(name=name)
        for o in oneofs:
            m.oneof_decl.add(name=o)
        for f in fields:
            spec = dict(f)
            oneof = spec.pop("oneof", None)
            added = m.field.add(**spec)
            if oneof is not None:
                added.oneof_index = oneofs.index(oneof)
    return fd


def b64(fd: descriptor_pb2.FileDescriptorProto) -> str:
    return base64.standard_b64encode(fd.SerializeToString()).decode()


def msg(*fields: dict[str, Any], oneofs: list[str] | None = None, name: str = "M") -> tuple[str, list[Any], list[str]]:
    return (name, list(fields), oneofs or [])


ID = field("id", 1, F.TYPE_INT32)
NAME = field("name", 2, F.TYPE_STRING)
OTHER = msg(field("x", 1, F.TYPE_INT32), name="Other")

# (name, old, new, new reads old (backward), old reads new (forward))
CASES: list[tuple[str, Any, Any, bool, bool]] = [
    ("field added", descriptor(msg(ID)), descriptor(msg(ID, NAME)), True, True),
    ("field removed", descriptor(msg(ID, NAME)), descriptor(msg(ID)), True, True),
    ("field renamed", descriptor(msg(ID)), descriptor(msg(field("key", 1, F.TYPE_INT32))), True, True),
    ("int32 to int64", descriptor(msg(ID)), descriptor(msg(field("id", 1, F.TYPE_INT64))), True, True),
    ("int32 to string", descriptor(msg(ID)), descriptor(msg(field("id", 1, F.TYPE_STRING))), False, False),
    ("string to bytes", descriptor(msg(NAME)), descriptor(msg(field("name", 2, F.TYPE_BYTES))), True, True),
    ("sint32 to int32", descriptor(msg(field("n", 1, F.TYPE_SINT32))), descriptor(msg(ID)), False, False),
    (
        "singular to repeated",
        descriptor(msg(ID)),
        descriptor(msg(field("id", 1, F.TYPE_INT32, label=F.LABEL_REPEATED))),
        False,
        False,
    ),
    ("message type removed", descriptor(msg(ID), OTHER), descriptor(msg(ID)), False, True),
    ("package changed", descriptor(msg(ID)), descriptor(msg(ID), package="u"), False, False),
    (
        "field moved into an existing oneof",
        descriptor(msg(ID, field("a", 3, F.TYPE_STRING, oneof="choice"), NAME, oneofs=["choice"])),
        descriptor(
            msg(ID, field("a", 3, F.TYPE_STRING, oneof="choice"), {**NAME, "oneof": "choice"}, oneofs=["choice"])
        ),
        False,
        True,
    ),
    (
        "two fields moved into a new oneof",
        descriptor(msg(ID, NAME)),
        descriptor(msg({**ID, "oneof": "choice"}, {**NAME, "oneof": "choice"}, oneofs=["choice"])),
        False,
        True,
    ),
    (
        "one field moved into a new oneof",
        descriptor(msg(ID, NAME)),
        descriptor(msg(ID, {**NAME, "oneof": "choice"}, oneofs=["choice"])),
        True,
        True,
    ),
    (
        "required field added (proto2)",
        descriptor(msg(ID), syntax="proto2"),
        descriptor(msg(ID, field("name", 2, F.TYPE_STRING, label=F.LABEL_REQUIRED)), syntax="proto2"),
        False,
        True,
    ),
    (
        "message field changes its type",
        descriptor(msg(field("o", 1, F.TYPE_MESSAGE, type_name=".t.Other")), OTHER, msg(ID, name="Third")),
        descriptor(msg(field("o", 1, F.TYPE_MESSAGE, type_name=".t.Third")), OTHER, msg(ID, name="Third")),
        False,
        False,
    ),
]


def register(core: RegistryCore, subject: str, fd: descriptor_pb2.FileDescriptorProto) -> bool:
    return register_input(core, subject, SchemaInput(b64(fd), "PROTOBUF"))


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "old", "new", "backward", "forward"), CASES, ids=[c[0] for c in CASES])
def test_matrix(level: str, name: str, old: Any, new: Any, backward: bool, forward: bool) -> None:
    core = matrix_core(level)
    assert register(core, "s", old)
    assert register(core, "s", new) is expected(level, backward, forward)


@pytest.mark.parametrize(("name", "old", "new", "backward", "forward"), CASES, ids=[c[0] for c in CASES])
def test_compatible_verdicts_read_the_bytes(name: str, old: Any, new: Any, backward: bool, forward: bool) -> None:
    """Where the checker says compatible, protobuf's runtime parses a message written with the writer's
    descriptor (every field of the first message set) with the reader's, and the fields both declare keep their
    values."""
    o, n = parse(b64(old)), parse(b64(new))
    assert (can_read(n, o) == []) is backward and (can_read(o, n) == []) is forward
    for writer, reader, ok in ((old, new, backward), (new, old, forward)):
        if not ok:
            continue
        written = sample(writer)
        read = message_class(reader)()
        read.ParseFromString(written.SerializeToString())
        for f in reader.message_type[0].field:
            same = next((w for w in writer.message_type[0].field if w.number == f.number), None)
            if same is not None and f.type not in (F.TYPE_MESSAGE,):
                value = getattr(read, f.name)
                expected_value = getattr(written, same.name)
                as_bytes = [v.encode() if isinstance(v, str) else v for v in (value, expected_value)]
                assert as_bytes[0] == as_bytes[1]  # string and bytes read each other's bytes


def message_class(fd: descriptor_pb2.FileDescriptorProto) -> Any:
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{fd.package}.{fd.message_type[0].name}"))


def sample(fd: descriptor_pb2.FileDescriptorProto) -> Any:
    m = message_class(fd)()
    for f in fd.message_type[0].field:
        if f.type == F.TYPE_MESSAGE:
            continue
        value: Any = {F.TYPE_STRING: "text", F.TYPE_BYTES: b"text", F.TYPE_BOOL: True}.get(f.type, 7)
        if f.label == F.LABEL_REPEATED:
            getattr(m, f.name).append(value)
        elif f.HasField("oneof_index") and any(
            o.HasField("oneof_index") and o.oneof_index == f.oneof_index and getattr(m, o.name)
            for o in fd.message_type[0].field
            if o is not f and o.type != F.TYPE_MESSAGE
        ):
            continue  # one member of a oneof at a time
        else:
            setattr(m, f.name, value)
    return m


def test_garbage_is_refused_and_imports_need_references() -> None:
    for text in ("!!!", base64.b64encode(b"\xff\xff").decode(), "syntax = 'proto3';"):
        with pytest.raises(ProtobufSchemaError):
            parse(text)
    fd = descriptor(msg(ID))
    fd.dependency.append("common/address.proto")
    with pytest.raises(ProtobufSchemaError, match="not among the schema's references"):
        parse(b64(fd))
    fd.dependency[0] = "google/protobuf/timestamp.proto"  # well-known types need no reference
    assert parse(b64(fd)).file.dependency == ["google/protobuf/timestamp.proto"]


def test_references_resolve_imports_through_the_core() -> None:
    core = RegistryCore()
    common = descriptor(msg(ID, name="Address"), package="common")
    common.name = "common/address.proto"
    assert register(core, "common/address.proto", common)
    fd = descriptor(msg(field("home", 1, F.TYPE_MESSAGE, type_name=".common.Address")))
    fd.dependency.append("common/address.proto")
    with pytest.raises(RegistryError) as missing:
        core.register("person", SchemaInput(b64(fd), "PROTOBUF"))
    assert missing.value.code == 42201
    ref = (Reference("common/address.proto", "common/address.proto", 1),)
    write = core.register("person", SchemaInput(b64(fd), "PROTOBUF", ref))
    assert write.result.id == 2 and write.result.references == ref
