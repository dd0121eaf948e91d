"""The Avro compatibility matrix: every evolution below, registered after its first schema at every level, is
accepted or refused as Avro's schema resolution and Confluent's levels say. Each case states whether the new schema
reads data written with the old one (``backward``) and the old one reads data written with the new (``forward``);
the expected outcome per level follows from those two, and a second table has chains of three versions where the
transitive levels and the latest-only ones differ."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pytest
from matrix import expected, matrix_core, register_input

from odradek.broker.schema_registry.avro import AvroSchemaError, can_read, normalized_text, parse
from odradek.broker.schema_registry.compatibility import LEVELS
from odradek.broker.schema_registry.core import RegistryCore, SchemaInput


def rec(fields: list[dict[str, Any]], name: str = "R", **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "namespace": "t", "fields": fields, **extra}


def f(name: str, type_: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


COLOR = {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}
COLOR_MORE = {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}
COLOR_MORE_DEFAULT = {**COLOR_MORE, "default": "RED"}
NODE = {"type": "record", "name": "Node", "fields": [f("v", "int"), f("next", ["null", "Node"])]}

# (name, old, new, new reads old, old reads new)
CASES: list[tuple[str, Any, Any, bool, bool]] = [
    ("add field with default", rec([f("a", "string")]), rec([f("a", "string"), f("b", "int", default=0)]), True, True),
    ("add field without default", rec([f("a", "string")]), rec([f("a", "string"), f("b", "int")]), False, True),
    ("drop field with default", rec([f("a", "string"), f("b", "int", default=0)]), rec([f("a", "string")]), True, True),
    ("drop field without default", rec([f("a", "string"), f("b", "int")]), rec([f("a", "string")]), True, False),
    ("int to long", rec([f("a", "int")]), rec([f("a", "long")]), True, False),
    ("long to int", rec([f("a", "long")]), rec([f("a", "int")]), False, True),
    ("int to double", rec([f("a", "int")]), rec([f("a", "double")]), True, False),
    ("float to double", rec([f("a", "float")]), rec([f("a", "double")]), True, False),
    ("string to bytes", rec([f("a", "string")]), rec([f("a", "bytes")]), True, True),
    ("string to int", rec([f("a", "string")]), rec([f("a", "int")]), False, False),
    ("boolean to null", rec([f("a", "boolean")]), rec([f("a", "null")]), False, False),
    ("enum adds a symbol", rec([f("c", COLOR)]), rec([f("c", COLOR_MORE)]), True, False),
    ("enum drops a symbol", rec([f("c", COLOR_MORE)]), rec([f("c", COLOR)]), False, True),
    ("enum drops a symbol, reader default", rec([f("c", COLOR_MORE_DEFAULT)]), rec([f("c", COLOR)]), False, True),
    (
        "enum adds a symbol, old default",
        rec([f("c", {**COLOR, "default": "RED"})]),
        rec([f("c", COLOR_MORE)]),
        True,
        True,
    ),
    ("int to nullable int", rec([f("a", "int")]), rec([f("a", ["null", "int"], default=None)]), True, False),
    ("union gains a branch", rec([f("a", ["null", "int"])]), rec([f("a", ["null", "int", "string"])]), True, False),
    ("union to its only branch", rec([f("a", ["int"])]), rec([f("a", "int")]), True, True),
    ("record renamed", rec([f("a", "int")]), rec([f("a", "int")], name="S"), False, False),
    ("record renamed with alias", rec([f("a", "int")]), rec([f("a", "int")], name="S", aliases=["R"]), True, False),
    ("field renamed", rec([f("a", "int")]), rec([f("b", "int")]), False, False),
    ("field renamed with alias", rec([f("a", "int")]), rec([f("b", "int", aliases=["a"])]), True, False),
    (
        "fixed size change",
        rec([f("x", {"type": "fixed", "name": "F", "size": 4})]),
        rec([f("x", {"type": "fixed", "name": "F", "size": 8})]),
        False,
        False,
    ),
    (
        "map values int to long",
        rec([f("m", {"type": "map", "values": "int"})]),
        rec([f("m", {"type": "map", "values": "long"})]),
        True,
        False,
    ),
    (
        "array items long to int",
        rec([f("l", {"type": "array", "items": "long"})]),
        rec([f("l", {"type": "array", "items": "int"})]),
        False,
        True,
    ),
    ("recursive record unchanged", rec([f("n", NODE)]), rec([f("n", NODE)]), True, True),
    ("array to map", {"type": "array", "items": "int"}, {"type": "map", "values": "int"}, False, False),
    (
        "nested record adds defaulted field",
        rec([f("n", rec([f("x", "int")], name="In"))]),
        rec([f("n", rec([f("x", "int"), f("y", "string", default="")], name="In"))]),
        True,
        True,
    ),
]


def register(core: RegistryCore, subject: str, schema: Any) -> bool:
    return register_input(core, subject, SchemaInput(json.dumps(schema)))


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "old", "new", "backward", "forward"), CASES, ids=[c[0] for c in CASES])
def test_matrix(level: str, name: str, old: Any, new: Any, backward: bool, forward: bool) -> None:
    core = matrix_core(level)
    assert register(core, "s", old)
    assert register(core, "s", new) is expected(level, backward, forward)


@pytest.mark.parametrize(("name", "old", "new", "backward", "forward"), CASES, ids=[c[0] for c in CASES])
def test_each_direction_alone(name: str, old: Any, new: Any, backward: bool, forward: bool) -> None:
    old_tree, new_tree = parse(json.dumps(old)).root, parse(json.dumps(new)).root
    assert (can_read(new_tree, old_tree) == []) is backward
    assert (can_read(old_tree, new_tree) == []) is forward


# Chains where only the first version conflicts with the third: latest-only levels accept the third, the
# transitive ones refuse it.
CHAINS: list[tuple[str, list[Any]]] = [
    (
        "BACKWARD",
        [
            rec([f("a", "string")]),
            rec([f("a", "string"), f("b", "int", default=0)]),
            rec([f("a", "string"), f("b", "int")]),
        ],
    ),
    (
        "FORWARD",
        [
            rec([f("a", "string"), f("b", "int")]),
            rec([f("a", "string"), f("b", "int", default=0)]),
            rec([f("a", "string")]),
        ],
    ),
    (
        "FULL",
        [
            rec([f("a", "string")]),
            rec([f("a", "string"), f("b", "int", default=0)]),
            rec([f("a", "string"), f("b", "int")]),
        ],
    ),
]


@pytest.mark.parametrize(("base", "chain"), CHAINS, ids=[c[0] for c in CHAINS])
@pytest.mark.parametrize("transitive", [False, True])
def test_transitive_levels_check_every_earlier_version(base: str, chain: list[Any], transitive: bool) -> None:
    level = f"{base}_TRANSITIVE" if transitive else base
    core = RegistryCore()
    core.apply(*core.set_config("s", level).records[0])
    first, second, third = chain
    assert register(core, "s", first)
    assert register(core, "s", second)
    assert register(core, "s", third) is (not transitive)


def test_soft_deleted_versions_are_not_checked() -> None:
    core = RegistryCore()
    core.apply(*core.set_config("s", "BACKWARD_TRANSITIVE").records[0])
    chain = CHAINS[0][1]
    assert register(core, "s", chain[0]) and register(core, "s", chain[1])
    for key, value in core.delete_version("s", 1).records:
        core.apply(key, value)
    assert register(core, "s", chain[2])


@pytest.mark.parametrize(("name", "old", "new", "backward", "forward"), CASES, ids=[c[0] for c in CASES])
def test_the_checker_agrees_with_fastavros_resolution_where_data_shows_it(
    name: str, old: Any, new: Any, backward: bool, forward: bool
) -> None:
    """An oracle for the 'compatible' verdicts: data written with the writer schema reads with the reader schema in
    fastavro (which implements the resolution at read time). Zero-valued data exercises every field."""
    for writer, reader, ok in ((old, new, backward), (new, old, forward)):
        if not ok:
            continue
        parsed_writer = fastavro.parse_schema(writer)
        buffer = io.BytesIO()
        fastavro.schemaless_writer(buffer, parsed_writer, sample(writer))
        buffer.seek(0)
        fastavro.schemaless_reader(buffer, parsed_writer, fastavro.parse_schema(reader))


def sample(schema: Any) -> Any:
    """A small valid datum of ``schema``."""
    if isinstance(schema, list):
        return sample(schema[0])
    if isinstance(schema, str):
        return (
            {"null": None, "boolean": False, "int": 0, "long": 0, "float": 0.0, "double": 0.0}.get(
                schema, b"" if schema == "bytes" else ""
            )
            if schema in ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
            else None
        )
    kind = schema["type"]
    if kind == "record":
        return {fld["name"]: sample(fld["type"]) for fld in schema["fields"]}
    if kind == "enum":
        return schema["symbols"][0]
    if kind == "fixed":
        return b"\0" * schema["size"]
    if kind == "array":
        return [sample(schema["items"])]
    if kind == "map":
        return {"k": sample(schema["values"])}
    return sample(kind)


def test_invalid_schemas_say_why() -> None:
    for text in ("{", '{"type": "record", "name": "R"}', '"nope"', json.dumps(rec([f("a", "int", default="x")]))):
        with pytest.raises(AvroSchemaError):
            parse(text)


def test_normalized_text_is_independent_of_spelling() -> None:
    a = parse(json.dumps(rec([f("a", {"type": "string"})])))
    b = parse(json.dumps({"name": "t.R", "fields": [{"type": "string", "name": "a"}], "type": "record"}))
    assert a.text != b.text and normalized_text(a) == normalized_text(b)
