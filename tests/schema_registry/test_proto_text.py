"""Protobuf schemas in .proto text: the parser's descriptors are protoc's own (grpc_tools' protoc compiles the same
files here, the oracle), the rendered text parses back to the same descriptor, what is refused says why, and text
schemas register, reference each other and answer in both forms through the registry."""

from __future__ import annotations

import base64
import contextlib
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.broker.schema_registry.core import RegistryCore, SchemaInput
from odradek.broker.schema_registry.errors import RegistryError
from odradek.broker.schema_registry.proto_text import render
from odradek.broker.schema_registry.protobuf import ProtobufSchemaError, can_read, parse
from odradek.broker.schema_registry.records import Reference

SHOP = """
syntax = "proto3";
package shop.v1;

import "google/protobuf/timestamp.proto";

/* An order, with a bit of everything. */
message Order {
  int64 id = 1;
  string customer = 2 [json_name = "customerName"];
  repeated Line lines = 3;
  map<string, int32> tags = 4;
  optional double discount = 5;
  oneof payment {
    Card card = 6;
    string voucher = 7;
  }
  google.protobuf.Timestamp placed = 8;
  Status status = 9;
  reserved 10, 12 to 15;
  reserved "old";
  option deprecated = false;

  message Line {
    string sku = 1;
    repeated uint32 quantity = 2 [packed = true];
    Order.Status line_status = 3;
  }
  enum Status {
    option allow_alias = true;
    STATUS_UNKNOWN = 0;
    STATUS_PAID = 1;
    STATUS_SETTLED = 1;
    reserved 5 to 7;
  }
}

message Card { string number = 1; bytes token = 2; }

service Orders {
  rpc Place(Order) returns (Order);
  rpc Watch(stream Order) returns (stream Order) { option deprecated = true; }
}
"""

LEGACY = """
syntax = "proto2";
package legacy;
option java_package = "com.example.legacy";

message Account {
  required string name = 1;
  optional int32 level = 2 [default = -3];
  optional string motto = 3 [default = "say \\"hi\\""];
  optional Kind kind = 4 [default = GOLD];
  repeated sint64 deltas = 5;
  optional fixed32 pin = 0x6;
  extensions 100 to max;
  enum Kind { SILVER = 1; GOLD = 2; }
}
"""


def protoc(tmp_path: Path, name: str, text: str) -> descriptor_pb2.FileDescriptorProto:
    """What protoc makes of ``text`` (the well-known imports from grpc_tools' own include dir)."""
    pytest.importorskip("grpc_tools")
    (tmp_path / name).write_text(text)
    out = tmp_path / "out.pb"
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp_path}", f"--descriptor_set_out={out}", name],
        check=True,
        cwd=tmp_path,
    )
    return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[-1]


def comparable(file: descriptor_pb2.FileDescriptorProto) -> descriptor_pb2.FileDescriptorProto:
    """Without what protoc adds that does not describe the schema: the file name, source positions, json names
    derived from field names."""
    out = descriptor_pb2.FileDescriptorProto.FromString(file.SerializeToString())
    out.name = "x"
    out.ClearField("source_code_info")
    out.ClearField("options")  # file, message, enum and method options are read and dropped (not field ones)
    for service in out.service:
        for method in service.method:
            method.ClearField("options")

    def walk(messages: list[descriptor_pb2.DescriptorProto]) -> None:
        for m in messages:
            if not m.options.map_entry:
                m.ClearField("options")
            for f in m.field:
                if f.json_name == _camel(f.name):
                    f.ClearField("json_name")
            walk(list(m.nested_type))
            for e in m.enum_type:
                keep_allow_alias(e)

    walk(list(out.message_type))
    for e in out.enum_type:
        keep_allow_alias(e)
    return out


def keep_allow_alias(enum: descriptor_pb2.EnumDescriptorProto) -> None:
    alias = enum.options.allow_alias
    enum.ClearField("options")
    if alias:
        enum.options.allow_alias = True


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


@pytest.mark.parametrize(("name", "text"), [("shop.proto", SHOP), ("legacy.proto", LEGACY)])
def test_descriptors_are_protocs_and_rendering_parses_back(tmp_path: Path, name: str, text: str) -> None:
    mine = parse(text)
    assert not mine.serialized and mine.text == text
    assert comparable(mine.file) == comparable(protoc(tmp_path, name, text))
    rendered = render(mine.file)
    assert comparable(parse(rendered).file) == comparable(mine.file)
    assert can_read(mine, parse(rendered)) == [] and can_read(parse(rendered), mine) == []


def test_both_forms_of_one_schema_are_one_schema_to_the_checker_and_the_formats() -> None:
    text = parse(SHOP)
    serialized = parse(text.formatted("serialized"))
    assert serialized.serialized and comparable(serialized.file) == comparable(text.file)
    assert text.formatted("") == SHOP and serialized.formatted("") == render(text.file)
    assert can_read(text, serialized) == [] and can_read(serialized, text) == []


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('edition = "2023"; message M {}', "editions are not supported yet"),
        ('syntax = "proto3"; message M { Nope n = 1; }', "unknown type 'Nope'"),
        ('syntax = "proto3"; import "other.proto"; message M {}', "not among the schema's references"),
        ('syntax = "proto3"; message M { required int32 a = 1; }', "proto3 has no required fields"),
        ('syntax = "proto2"; message M { int32 a = 1; }', "needs a label"),
        ('syntax = "proto2"; message M { optional group G = 1 { } }', "groups are not supported yet"),
        ('syntax = "proto3"; message M {} extend M { int32 x = 5; }', "extend blocks are not supported yet"),
        ('syntax = "proto3"; message M { int32 a = 0; }', "field number 0 is not allowed"),
        ('syntax = "proto3"; message M { int32 a = 1; string b = 1; }', "duplicate field number"),
        ('syntax = "proto3"; message M { int32 a = 1 }', "expected ';'"),
        ('syntax = "proto3"; message M { map<double, int32> m = 1; }', "cannot be a map key"),
        ('syntax = "proto3"; enum E {}', "has no values"),
        ('syntax = "proto3"; enum E { A = 1; }', "first value of a proto3 enum must be zero"),
        ('syntax = "proto3"; enum E { A = 0; B = 0; }', "share a number"),
        ('syntax = "proto3"; enum E { A = 0; B = 2; reserved 2; }', "is reserved"),
        ('syntax = "proto3"; message M { int32 a = 3; reserved 2 to 4; }', "is reserved"),
        ('syntax = "proto3"; message M { int32 a = 1; reserved "a"; }', "is reserved"),
    ],
)
def test_what_is_refused_says_why(text: str, why: str) -> None:
    with pytest.raises(ProtobufSchemaError, match=why):
        parse(text)


def test_text_schemas_register_reference_each_other_and_answer_in_both_forms() -> None:
    core = RegistryCore()
    address = 'syntax = "proto3"; package common; message Address { string city = 1; }'
    person = 'syntax = "proto3"; package people; import "common/address.proto"; message P { common.Address a = 1; }'
    for subject, text, refs in (
        ("common/address.proto", address, ()),
        ("people-value", person, (Reference("common/address.proto", "common/address.proto", 1),)),
    ):
        write = core.register(subject, SchemaInput(text, "PROTOBUF", refs))
        for key, value in write.records:
            core.apply(key, value)
    stored = core.version("people-value", 1)
    assert stored.schema == person and core.formatted(stored) == person
    descriptor = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(core.formatted(stored, "serialized")))
    assert descriptor.message_type[0].field[0].type_name == ".common.Address"
    with pytest.raises(RegistryError) as missing:
        core.register("other", SchemaInput(person, "PROTOBUF"))
    assert missing.value.code == 42201 and "not among the schema's references" in missing.value.message
    # An incompatible change of the text is refused like any other.
    changed = person.replace("common.Address a = 1", "string a = 1")
    with pytest.raises(RegistryError) as refused:
        core.register(
            "people-value",
            SchemaInput(changed, "PROTOBUF", (Reference("common/address.proto", "common/address.proto", 1),)),
        )
    assert refused.value.code == 409


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_damage_to_a_schema_is_an_answer_or_a_schema_error(data: st.DataObject) -> None:
    """Cut, duplicated or replaced characters of a valid schema, or arbitrary text: parsing answers a descriptor or
    ProtobufSchemaError (42201), never another exception."""
    text = data.draw(st.sampled_from([SHOP, LEGACY]))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(text) - 1))
        action = data.draw(st.sampled_from(["cut", "repeat", "replace"]))
        if action == "cut":
            text = text[:at] + text[at + data.draw(st.integers(1, 20)) :]
        elif action == "repeat":
            text = text[:at] + text[at : at + 10] + text[at:]
        else:
            text = text[:at] + data.draw(st.sampled_from(list("{}[]()<>;=,.-\"'/ \n0aZ_"))) + text[at + 1 :]
    for candidate in (text, data.draw(st.text(max_size=200))):
        with contextlib.suppress(ProtobufSchemaError):
            parse(candidate)


def test_deep_nesting_is_an_invalid_schema_not_a_crash() -> None:
    core = RegistryCore()
    deep = 'syntax = "proto3";' + "message M { " * 2000 + "}" * 2000
    with pytest.raises(RegistryError) as refused:
        core.register("s", SchemaInput(deep, "PROTOBUF"))
    assert refused.value.code == 42201
    with pytest.raises(RegistryError) as refused_json:
        core.register("s", SchemaInput("[" * 100000 + "]" * 100000, "JSON"))
    assert refused_json.value.code == 42201
