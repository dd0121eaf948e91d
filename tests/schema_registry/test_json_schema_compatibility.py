"""The JSON Schema compatibility matrix: each evolution below, registered after its first schema at every level, is
accepted or refused as "every document the writer allows, the reader allows" says, which is Confluent's verdict on
these evolutions (an optional property added to an open content model breaks BACKWARD, to a closed one FORWARD;
a new required property breaks BACKWARD; a wider type breaks FORWARD...). A second check holds every "compatible"
verdict against jsonschema's own validation of sample documents."""

from __future__ import annotations

import json
from typing import Any

import pytest
from jsonschema import Draft7Validator
from matrix import expected, matrix_core, register_input

from odradek.broker.schema_registry.compatibility import LEVELS
from odradek.broker.schema_registry.core import RegistryCore, SchemaInput
from odradek.broker.schema_registry.errors import RegistryError
from odradek.broker.schema_registry.json_schema import JsonSchemaError, can_read, normalized_text, parse
from odradek.broker.schema_registry.records import Reference


def obj(props: dict[str, Any], closed: bool = False, required: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": props}
    if closed:
        out["additionalProperties"] = False
    if required:
        out["required"] = required
    return out


S = {"type": "string"}
A = {"a": S}
AB = {"a": S, "b": S}

# (name, old, new, new reads old (backward), old reads new (forward))
CASES: list[tuple[str, Any, Any, bool, bool]] = [
    ("open model gains an optional property", obj(A), obj(AB), False, True),
    ("closed model gains an optional property", obj(A, True), obj(AB, True), True, False),
    ("open model loses a property", obj(AB), obj(A), True, False),
    ("closed model loses a property", obj(AB, True), obj(A, True), False, True),
    ("a property becomes required", obj(A), obj(A, required=["a"]), False, True),
    ("a required property becomes optional", obj(A, required=["a"]), obj(A), True, False),
    ("string becomes nullable", obj({"a": S}), obj({"a": {"type": ["string", "null"]}}), True, False),
    ("integer becomes number", obj({"n": {"type": "integer"}}), obj({"n": {"type": "number"}}), True, False),
    ("number becomes integer", obj({"n": {"type": "number"}}), obj({"n": {"type": "integer"}}), False, True),
    ("string becomes integer", obj({"a": S}), obj({"a": {"type": "integer"}}), False, False),
    (
        "maxLength grows",
        obj({"a": {"type": "string", "maxLength": 10}}),
        obj({"a": {"type": "string", "maxLength": 20}}),
        True,
        False,
    ),
    (
        "minimum rises",
        obj({"n": {"type": "integer", "minimum": 0}}),
        obj({"n": {"type": "integer", "minimum": 10}}),
        False,
        True,
    ),
    ("enum gains a value", obj({"e": {"enum": ["x", "y"]}}), obj({"e": {"enum": ["x", "y", "z"]}}), True, False),
    (
        "array items widen",
        obj({"l": {"type": "array", "items": S}}),
        obj({"l": {"type": "array", "items": {"type": ["string", "integer"]}}}),
        True,
        False,
    ),
    ("content model opens", obj(A, True), obj(A), True, False),
    ("oneOf gains a branch", {"oneOf": [S]}, {"oneOf": [S, {"type": "integer"}]}, True, False),
    (
        "unchanged with definitions",
        {"definitions": {"p": obj(A)}, "$ref": "#/definitions/p"},
        {"definitions": {"p": obj(A)}, "$ref": "#/definitions/p"},
        True,
        True,
    ),
    (
        "a definition gains a required property",
        {"definitions": {"p": obj(AB)}, "type": "object", "properties": {"p": {"$ref": "#/definitions/p"}}},
        {
            "definitions": {"p": obj(AB, required=["b"])},
            "type": "object",
            "properties": {"p": {"$ref": "#/definitions/p"}},
        },
        False,
        True,
    ),
    (
        "recursive tree unchanged",
        {
            "definitions": {"t": obj({"kids": {"type": "array", "items": {"$ref": "#/definitions/t"}}})},
            "$ref": "#/definitions/t",
        },
        {
            "definitions": {"t": obj({"kids": {"type": "array", "items": {"$ref": "#/definitions/t"}}})},
            "$ref": "#/definitions/t",
        },
        True,
        True,
    ),
]


def register(core: RegistryCore, subject: str, schema: Any, refs: tuple[Reference, ...] = ()) -> bool:
    return register_input(core, subject, SchemaInput(json.dumps(schema), "JSON", refs))


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("name", "old", "new", "backward", "forward"), CASES, ids=[c[0] for c in CASES])
def test_matrix(level: str, name: str, old: Any, new: Any, backward: bool, forward: bool) -> None:
    core = matrix_core(level)
    assert register(core, "s", old)
    assert register(core, "s", new) is expected(level, backward, forward)


@pytest.mark.parametrize(("name", "old", "new", "backward", "forward"), CASES, ids=[c[0] for c in CASES])
def test_each_direction_alone(name: str, old: Any, new: Any, backward: bool, forward: bool) -> None:
    o, n = parse(json.dumps(old)), parse(json.dumps(new))
    assert (can_read(n, o) == []) is backward
    assert (can_read(o, n) == []) is forward


SAMPLES: list[Any] = [
    None,
    True,
    0,
    5,
    12,
    -3,
    2.5,
    "",
    "x",
    "a" * 15,
    [],
    ["x", 1],
    {},
    {"a": "x"},
    {"a": "a" * 15},
    {"a": 1},
    {"b": "y"},
    {"a": "x", "b": "y"},
    {"a": "x", "b": 2},
    {"a": None},
    {"n": 5},
    {"n": 2.5},
    {"n": 12},
    {"e": "z"},
    {"e": "x"},
    {"l": ["x"]},
    {"l": [1]},
    {"p": {"a": "x"}},
    {"p": {"a": "x", "b": "y"}},
    {"kids": [{"kids": []}]},
    {"kids": [{"kids": 1}]},
]


@pytest.mark.parametrize(("name", "old", "new", "backward", "forward"), CASES, ids=[c[0] for c in CASES])
def test_compatible_verdicts_hold_on_sample_documents(
    name: str, old: Any, new: Any, backward: bool, forward: bool
) -> None:
    """Where the checker says compatible, no sample the writer accepts is refused by the reader; where it says
    incompatible, some sample shows it (so the table above is not vacuous)."""
    for writer, reader, ok in ((old, new, backward), (new, old, forward)):
        w, r = Draft7Validator(writer), Draft7Validator(reader)
        counterexamples = [s for s in SAMPLES if w.is_valid(s) and not r.is_valid(s)]
        assert (counterexamples == []) is ok, counterexamples


def test_invalid_schemas_and_unresolved_references_say_why() -> None:
    for text in ("{", "[1]", json.dumps({"type": 5}), json.dumps({"$ref": "other.json"})):
        with pytest.raises(JsonSchemaError):
            parse(text)


def test_references_name_other_subjects_schemas() -> None:
    core = RegistryCore()
    assert register(core, "address", obj({"city": S}))
    person = obj({"home": {"$ref": "address.json"}})
    with pytest.raises(RegistryError) as missing:
        core.register("person", SchemaInput(json.dumps(person), "JSON"))
    assert missing.value.code == 42201
    assert register(core, "person", person, (Reference("address.json", "address", 1),))
    assert core.version("person", 1).schema_type == "JSON"


def test_normalized_text_ignores_key_order() -> None:
    a = parse(json.dumps({"type": "object", "properties": {"a": S}}))
    b = parse(json.dumps({"properties": {"a": S}, "type": "object"}))
    assert a.text != b.text and normalized_text(a) == normalized_text(b)
