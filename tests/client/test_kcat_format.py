"""kcat-style offset specs, format strings and record display for ``odradek consume``."""

from __future__ import annotations

import json

import pytest

from odradek.client.cli.common import CommandError
from odradek.client.cli.kcat_format import (
    OffsetSpec,
    as_dict,
    as_text,
    compile_format,
    parse_offset,
    parse_offsets,
    unescape,
)
from odradek.client.structs import ConsumerRecord


def record(key: bytes | None, value: bytes | None, headers=()) -> ConsumerRecord:
    return ConsumerRecord("t", 1, 7, 1234, 0, key, value, tuple(headers))


@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("beginning", OffsetSpec("beginning")),
        ("earliest", OffsetSpec("beginning")),
        ("end", OffsetSpec("end")),
        ("42", OffsetSpec("absolute", 42)),
        ("-3", OffsetSpec("from_end", 3)),
        ("@1700000000000", OffsetSpec("time", 1700000000000)),
        ("@2026-11-23T10:00:00", OffsetSpec("time", 1795428000000)),
        ("@2026-11-23T11:00:00+01:00", OffsetSpec("time", 1795428000000)),
    ],
)
def test_offset_specs(text: str, spec: OffsetSpec) -> None:
    assert parse_offset(text) == spec


@pytest.mark.parametrize("text", ["soon", "+3", "@yesterday", "1.5", ""])
def test_bad_offset_specs_are_command_errors(text: str) -> None:
    with pytest.raises(CommandError):
        parse_offset(text)


def test_per_partition_offsets() -> None:
    default, per = parse_offsets(["end", "0:5", "2:@2026-11-23T10:00:00"])
    assert default == OffsetSpec("end")
    assert per == {0: OffsetSpec("absolute", 5), 2: OffsetSpec("time", 1795428000000)}
    assert parse_offsets([]) == (OffsetSpec("beginning"), {})


def test_format_tokens_escapes_and_nulls() -> None:
    render = compile_format("%t|%p|%o|%k|%s|%h|%T|%K|%S|%%\\n", None)
    r = record(None, b"\xff\x00", [("a", b"1"), ("b", None)])
    assert render(r) == b"t|1|7||\xff\x00|a=1,b=|1234|-1|2|%\n"
    assert compile_format("%k:%s", "hex")(record(b"k", b"\xff")) == b"6b:ff"
    assert compile_format("%s", "base64")(record(None, b"hi")) == b"aGk="
    with pytest.raises(CommandError, match="unknown format token %q"):
        compile_format("%q", None)
    with pytest.raises(CommandError, match="lone %"):
        compile_format("abc%", None)
    assert unescape("a\\tb\\x41\\\\") == "a\tbA\\"


def test_text_output_tells_null_text_and_binary_apart() -> None:
    assert as_text(record(None, None), "base64").endswith("value=null\n")
    assert as_text(record(None, b"None"), "base64").endswith('value="None"\n')
    assert as_text(record(b"k", b"\x80\x81", [("h", b"v")]), "hex") == (
        'partition=1 offset=7 timestamp=1234 key="k" headers="h":"v" value=hex:8081\n'
    )


def test_json_marks_binary_fields_only() -> None:
    text = as_dict(record(b"k", b"v", [("h", b"v")]), "base64")
    assert set(text) == {"topic", "partition", "offset", "timestamp", "key", "value", "headers"}
    binary = as_dict(record(b"\xff", b"\x00\xff", [("h", b"\xfe")]), "base64")
    assert binary["value"] == "base64:AP8=" and binary["value_encoding"] == "base64"
    assert binary["key_encoding"] == "base64" and binary["headers"] == [["h", "base64:/g==", "base64"]]
    json.dumps(binary)
