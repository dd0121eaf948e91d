"""Avro schemas: parsing (fastavro checks the specification: names, types, defaults against their field types),
the normalized text, and Confluent's Avro compatibility rule, which is Avro's schema resolution.

fastavro validates; the resolution rules are written here, on a small tree of our own with every name resolved
to its full name, because fastavro's parsed form keeps no record of aliases or enum defaults per position and
answers no "can this reader read that writer" question. ``can_read(reader, writer)`` follows the specification's
"Schema Resolution" section, as Avro's own SchemaCompatibility does:

- primitives match, or the writer's promotes (int to long, float, double; long to float, double; float to
  double; string and bytes both ways);
- records match by full name (or a reader alias); each reader field reads the writer field of its name (or one of
  its aliases), and a reader field the writer lacks needs a default; writer fields the reader lacks are skipped;
- enums match by name; every writer symbol is a reader symbol, unless the reader has a default;
- fixed types match by name and size; arrays by items; maps by values;
- a writer union is readable when each of its branches is; a reader union reads a writer when one branch does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fastavro.schema import parse_schema

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
# writer type -> the reader types that read it (besides itself)
PROMOTIONS: Mapping[str, frozenset[str]] = {
    "int": frozenset({"long", "float", "double"}),
    "long": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}


class AvroSchemaError(ValueError):
    """The text is not a valid Avro schema (the message says why)."""


@dataclass(eq=False)
class Node:
    """One position of a resolved schema. ``kind`` is a primitive name or record, enum, fixed, array, map, union;
    named kinds carry ``name`` (the full name) and ``aliases`` (full names)."""

    kind: str
    name: str = ""
    aliases: frozenset[str] = frozenset()
    fields: list[FieldNode] = field(default_factory=list)
    symbols: tuple[str, ...] = ()
    enum_default: str | None = None
    size: int = 0
    items: Node | None = None  # array items, map values
    branches: list[Node] = field(default_factory=list)


@dataclass(eq=False)
class FieldNode:
    name: str
    type: Node
    has_default: bool
    aliases: frozenset[str] = frozenset()


def _full(name: str, namespace: str) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


class _Builder:
    """Builds the resolved tree of a schema's JSON, named types of references included."""

    def __init__(self) -> None:
        self.named: dict[str, Node] = {}

    def build(self, schema: Any, namespace: str) -> Node:
        if isinstance(schema, str):
            if schema in PRIMITIVES:
                return Node(schema)
            full = _full(schema, namespace)
            found = self.named.get(full) or self.named.get(schema)
            if found is None:
                raise AvroSchemaError(f"unknown type {schema!r}")
            return found
        if isinstance(schema, list):
            return Node("union", branches=[self.build(b, namespace) for b in schema])
        if not isinstance(schema, dict):
            raise AvroSchemaError(f"not a schema: {schema!r}")
        kind = schema.get("type")
        if kind in ("record", "error", "enum", "fixed"):
            own_namespace = schema.get("namespace", namespace) or ""
            name = str(schema["name"])
            full = _full(name, own_namespace)
            space = full.rpartition(".")[0]
            aliases = frozenset(_full(str(a), space) for a in schema.get("aliases", ()))
            if kind == "enum":
                node = Node("enum", full, aliases, symbols=tuple(schema["symbols"]), enum_default=schema.get("default"))
            elif kind == "fixed":
                node = Node("fixed", full, aliases, size=int(schema["size"]))
            else:
                node = Node("record", full, aliases)
            self.named[full] = node
            if kind in ("record", "error"):
                node.fields = [
                    FieldNode(
                        str(f["name"]),
                        self.build(f["type"], space),
                        "default" in f,
                        frozenset(str(a) for a in f.get("aliases", ())),
                    )
                    for f in schema["fields"]
                ]
            return node
        if kind == "array":
            return Node("array", items=self.build(schema["items"], namespace))
        if kind == "map":
            return Node("map", items=self.build(schema["values"], namespace))
        if isinstance(kind, (str, list, dict)):
            return self.build(kind, namespace)  # {"type": "string", "logicalType": ...} and nested forms
        raise AvroSchemaError(f"not a schema: {schema!r}")


@dataclass(frozen=True, eq=False)
class AvroSchema:
    """A parsed Avro schema: ``text`` is its compact JSON (what the registry stores and answers), ``root`` the
    resolved tree for compatibility."""

    text: str
    root: Node
    json: Any


def parse(text: str, references: Sequence[str] = ()) -> AvroSchema:
    """Parse ``text``; ``references`` are the texts of the schemas it refers to (dependencies first), whose named
    types it may use. Raises AvroSchemaError with the specification's complaint."""
    try:
        documents = [json.loads(t) for t in references]
        schema = json.loads(text)
    except json.JSONDecodeError as e:
        raise AvroSchemaError(f"not JSON: {e}") from None
    named: dict[str, Any] = {}
    builder = _Builder()
    try:
        for document in documents:
            parse_schema(document, named_schemas=named)
            builder.build(document, "")
        parse_schema(schema, named_schemas=named)
        root = builder.build(schema, "")
    except AvroSchemaError:
        raise
    except Exception as e:  # fastavro raises SchemaParseException, UnknownType, KeyError, TypeError, ...
        raise AvroSchemaError(str(e) or type(e).__name__) from None
    return AvroSchema(json.dumps(schema, separators=(",", ":")), root, schema)


def normalize(schema: Any, namespace: str = "") -> Any:
    """Confluent's ``normalize``: names written in full, and every JSON object's keys in one order, so that schemas
    differing only in how they are written compare equal. Defaults, docs and other properties stay."""
    if isinstance(schema, str):
        return schema if schema in PRIMITIVES else _full(schema, namespace)
    if isinstance(schema, list):
        return [normalize(b, namespace) for b in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    kind = schema.get("type")
    if kind in ("record", "error", "enum", "fixed"):
        full = _full(str(schema["name"]), schema.get("namespace", namespace) or "")
        space = full.rpartition(".")[0]
        for key, value in schema.items():
            if key == "name":
                out[key] = full
            elif key == "namespace":
                continue
            elif key == "aliases":
                out[key] = sorted(_full(str(a), space) for a in value)
            elif key == "fields":
                out[key] = [
                    {k: (normalize(v, space) if k == "type" else v) for k, v in sorted(f.items())} for f in value
                ]
            else:
                out[key] = value
        return dict(sorted(out.items()))
    for key, value in schema.items():
        out[key] = normalize(value, namespace) if key in ("type", "items", "values") else value
    if set(out) == {"type"} and isinstance(out["type"], str) and out["type"] in PRIMITIVES:
        return out["type"]
    return dict(sorted(out.items()))


def normalized_text(schema: AvroSchema) -> str:
    return json.dumps(normalize(schema.json), separators=(",", ":"))


def can_read(reader: Node, writer: Node) -> list[str]:
    """Why data written with ``writer`` cannot be read with ``reader``; empty when it can."""
    return _Resolver().check(reader, writer, "/")


class _Resolver:
    def __init__(self) -> None:
        self.assumed: set[tuple[int, int]] = set()  # (reader, writer) named pairs being checked: recursion

    def check(self, reader: Node, writer: Node, path: str) -> list[str]:
        if writer.kind == "union":
            out: list[str] = []
            for i, branch in enumerate(writer.branches):
                out += self.check(reader, branch, f"{path}{i}/")
            return out
        if reader.kind == "union":
            for branch in reader.branches:
                if not self.check(branch, writer, path):
                    return []
            return [f"{path}: reader union lacks a branch for the writer's {_describe(writer)}"]
        if reader.kind in PRIMITIVES or writer.kind in PRIMITIVES:
            if reader.kind == writer.kind or reader.kind in PROMOTIONS.get(writer.kind, frozenset()):
                return []
            return [f"{path}: reader type {_describe(reader)} cannot read writer type {_describe(writer)}"]
        if reader.kind != writer.kind:
            return [f"{path}: reader type {_describe(reader)} cannot read writer type {_describe(writer)}"]
        if reader.kind in ("array", "map"):
            assert reader.items is not None and writer.items is not None
            return self.check(reader.items, writer.items, f"{path}{'items' if reader.kind == 'array' else 'values'}/")
        if writer.name != reader.name and writer.name not in reader.aliases:
            return [f"{path}: reader name {reader.name} does not match writer name {writer.name}"]
        key = (id(reader), id(writer))
        if key in self.assumed:
            return []
        self.assumed.add(key)
        if reader.kind == "fixed":
            if reader.size != writer.size:
                return [f"{path}: fixed {reader.name} size {reader.size} is not the writer's {writer.size}"]
            return []
        if reader.kind == "enum":
            missing = [s for s in writer.symbols if s not in reader.symbols]
            if missing and reader.enum_default is None:
                return [f"{path}: reader enum {reader.name} lacks symbols {', '.join(missing)}"]
            return []
        return self._record(reader, writer, path)

    def _record(self, reader: Node, writer: Node, path: str) -> list[str]:
        by_name = {f.name: f for f in writer.fields}
        out: list[str] = []
        for f in reader.fields:
            source = by_name.get(f.name) or next((by_name[a] for a in sorted(f.aliases) if a in by_name), None)
            if source is None:
                if not f.has_default:
                    out.append(f"{path}fields/{f.name}: reader field {f.name} has no default and the writer lacks it")
                continue
            out += self.check(f.type, source.type, f"{path}fields/{f.name}/")
        return out


def _describe(node: Node) -> str:
    return node.name or node.kind
