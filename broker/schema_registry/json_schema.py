"""JSON Schema: parsing (the jsonschema package checks a schema against its draft's metaschema, draft-07 where it
names none, as Confluent's default), the normalized text, and compatibility.

A reader schema reads data written with a writer schema when every document valid under the writer is valid under
the reader. ``can_read`` shows that structurally, keyword by keyword, and answers "incompatible" wherever it cannot
show it, never the reverse: ignoring a constraint of the writer only widens the set of documents it is checked for,
so the checker may drop writer keywords it does not know (``not``, ``if``, dependencies...), but a reader keyword it
does not know must be the writer's too. This gives Confluent's verdicts on the usual evolutions: adding an optional
property is compatible only where the writer's content model was closed to it (``additionalProperties: false``),
removing one only where the reader's stays open, a narrower type or a new required property is incompatible, and so
on (tests/schema_registry/test_json_schema_compatibility.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from jsonschema import Draft7Validator
from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for

TYPES = frozenset({"null", "boolean", "object", "array", "number", "string", "integer"})
# Keywords that never constrain a document (annotations and containers of subschemas reached through $ref).
ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "id",
        "$comment",
        "title",
        "description",
        "default",
        "examples",
        "readOnly",
        "writeOnly",
        "deprecated",
        "definitions",
        "$defs",
        "contentMediaType",
        "contentEncoding",
    }
)
HANDLED = frozenset(
    {
        "type",
        "enum",
        "const",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "minProperties",
        "maxProperties",
        "items",
        "additionalItems",
        "prefixItems",
        "minItems",
        "maxItems",
        "uniqueItems",
        "allOf",
        "anyOf",
        "oneOf",
    }
)
MAX_DEPTH = 64


class JsonSchemaError(ValueError):
    """The text is not a valid JSON Schema (the message says why)."""


@dataclass(frozen=True, eq=False)
class JsonSchema:
    text: str
    document: Any
    references: Mapping[str, Any]  # reference name -> its document


def parse(text: str, references: Sequence[tuple[str, str]] = ()) -> JsonSchema:
    """Parse and check ``text``; ``references`` are (name, text) of the schemas its ``$ref``s may name."""
    documents: dict[str, Any] = {}
    for name, ref_text in references:
        documents[name] = _load(ref_text, f"reference {name}")
    document = _load(text, "the schema")
    for where in (document, *documents.values()):
        for ref in _refs(where):
            _resolve_ref(ref, where, documents)
    return JsonSchema(json.dumps(document, separators=(",", ":")), document, documents)


def _load(text: str, what: str) -> Any:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as e:
        raise JsonSchemaError(f"{what} is not JSON: {e}") from None
    if not isinstance(document, (dict, bool)):
        raise JsonSchemaError(f"{what} is not a JSON Schema (an object or a boolean)")
    cls = validator_for(document, default=Draft7Validator) if isinstance(document, dict) else Draft7Validator
    try:
        cls.check_schema(document)
    except SchemaError as e:
        raise JsonSchemaError(f"{what}: {e.message}") from None
    return document


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            elif key not in ("enum", "const", "default", "examples"):
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _resolve_ref(ref: str, root: Any, documents: Mapping[str, Any]) -> tuple[Any, Any]:
    """(the schema ``ref`` names, the document it is in); JsonSchemaError when it names nothing known."""
    name, _, pointer = ref.partition("#")
    target_root = root if not name else documents.get(name)
    if target_root is None:
        raise JsonSchemaError(f"$ref {ref!r}: no reference named {name!r}")
    node = target_root
    for part in [p for p in pointer.split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise JsonSchemaError(f"$ref {ref!r} does not resolve")
    return node, target_root


def normalized_text(schema: JsonSchema) -> str:
    """Keys in one order: schemas that differ only in how their objects are ordered compare equal."""
    return json.dumps(schema.document, separators=(",", ":"), sort_keys=True)


def can_read(reader: JsonSchema, writer: JsonSchema) -> list[str]:
    """Why a document valid under ``writer`` may be invalid under ``reader``; empty when it cannot be."""
    return _Checker(writer.references, reader.references).subset(
        writer.document, writer.document, reader.document, reader.document, "#", 0
    )


def _types(schema: Mapping[str, Any]) -> frozenset[str]:
    t = schema.get("type")
    if t is None:
        return TYPES
    return frozenset([t] if isinstance(t, str) else t)


def _value_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _covers(reader_types: frozenset[str], t: str) -> bool:
    return t in reader_types or (t == "integer" and "number" in reader_types)


class _Checker:
    def __init__(self, writer_refs: Mapping[str, Any], reader_refs: Mapping[str, Any]) -> None:
        self.writer_refs = writer_refs
        self.reader_refs = reader_refs
        # (writer, reader) pairs being compared further up: met again (a recursive schema), they hold. Kept only
        # while on the stack, as the ids of the merged dicts made on the way are reused once those are gone.
        self.in_progress: set[tuple[int, int]] = set()

    def _deref(self, schema: Any, root: Any, refs: Mapping[str, Any]) -> tuple[Any, Any]:
        for _ in range(MAX_DEPTH):
            if not (isinstance(schema, dict) and isinstance(schema.get("$ref"), str)):
                return schema, root
            schema, root = _resolve_ref(schema["$ref"], root, refs)
        raise JsonSchemaError("$ref chain too long")

    def subset(self, w: Any, wroot: Any, r: Any, rroot: Any, path: str, depth: int) -> list[str]:
        if depth > MAX_DEPTH:
            return [f"{path}: nested too deep to compare"]
        w, wroot = self._deref(w, wroot, self.writer_refs)
        r, rroot = self._deref(r, rroot, self.reader_refs)
        key = (id(w), id(r))
        if key in self.in_progress:
            return []
        self.in_progress.add(key)
        try:
            return self._subset(w, wroot, r, rroot, path, depth)
        finally:
            self.in_progress.discard(key)

    def _subset(self, w: Any, wroot: Any, r: Any, rroot: Any, path: str, depth: int) -> list[str]:
        if w is False or r is True or r == {}:
            return []
        if r is False:
            return [f"{path}: the reader accepts nothing here"]
        w = {} if w is True else w
        if w == r and not any(True for _ in _refs(w)):
            return []
        w = self._merge_writer(w)
        out: list[str] = []
        for combinator in ("anyOf", "oneOf"):
            if combinator in w:
                siblings = {k: v for k, v in w.items() if k != combinator}
                for i, branch in enumerate(w[combinator]):
                    branch, broot = self._deref(branch, wroot, self.writer_refs)
                    merged = {**siblings, **branch} if isinstance(branch, dict) else branch
                    out += self.subset(merged, broot, r, rroot, f"{path}/{combinator}/{i}", depth + 1)
                return out
        for i, branch in enumerate(r.get("allOf", ())):
            out += self.subset(w, wroot, branch, rroot, f"{path}/allOf/{i}", depth + 1)
        if "anyOf" in r:
            branches = r["anyOf"]
            if not any(not self._quiet(w, wroot, b, rroot, depth) for b in branches):
                out.append(f"{path}: no branch of the reader's anyOf accepts every writer document")
        if "oneOf" in r and w.get("oneOf") != r["oneOf"]:
            out += self._one_of(w, wroot, r["oneOf"], rroot, path, depth)
        for keyword, value in r.items():
            if keyword not in HANDLED and keyword not in ANNOTATIONS and w.get(keyword) != value:
                out.append(f"{path}: the reader's {keyword} is not the writer's (cannot be shown compatible)")
        out += self._enum(w, r, path)
        wtypes, rtypes = self._writer_types(w), _types(r)
        missing = sorted(t for t in wtypes if not _covers(rtypes, t))
        if missing:
            out.append(f"{path}: the reader does not accept type {', '.join(missing)}")
        if wtypes & {"number", "integer"}:
            out += self._numbers(w, r, path)
        if "string" in wtypes:
            out += self._bounds(w, r, "minLength", "maxLength", path)
            for keyword in ("pattern", "format"):
                if keyword in r and w.get(keyword) != r[keyword]:
                    out.append(f"{path}: the reader's {keyword} {r[keyword]!r} is not the writer's")
        if "object" in wtypes:
            out += self._objects(w, wroot, r, rroot, path, depth)
        if "array" in wtypes:
            out += self._arrays(w, wroot, r, rroot, path, depth)
        return out

    def _quiet(self, w: Any, wroot: Any, r: Any, rroot: Any, depth: int) -> list[str]:
        """A trial of one reader branch."""
        return self.subset(w, wroot, r, rroot, "", depth + 1)

    def _merge_writer(self, w: dict[str, Any]) -> dict[str, Any]:
        """The writer's allOf folded into it: later keys override earlier ones, which only drops constraints, so
        the result admits at least the writer's documents."""
        if "allOf" not in w:
            return w
        merged = {k: v for k, v in w.items() if k != "allOf"}
        for branch in w["allOf"]:
            if isinstance(branch, dict) and "$ref" not in branch:
                merged.update(branch)
        return merged

    def _one_of(self, w: Any, wroot: Any, branches: list[Any], rroot: Any, path: str, depth: int) -> list[str]:
        """A writer within exactly one branch whose siblings cannot hold a writer document (their types differ)."""
        wtypes = self._writer_types(w)
        for i, branch in enumerate(branches):
            if self._quiet(w, wroot, branch, rroot, depth):
                continue
            others = [b for j, b in enumerate(branches) if j != i]
            resolved = [self._deref(b, rroot, self.reader_refs)[0] for b in others]
            if all(isinstance(b, dict) and not (wtypes & _types(b)) for b in resolved):
                return []
        return [f"{path}: no single branch of the reader's oneOf is shown to accept every writer document"]

    def _writer_types(self, w: Mapping[str, Any]) -> frozenset[str]:
        if "const" in w:
            return frozenset({_value_type(w["const"])})
        if "enum" in w:
            return frozenset(_value_type(v) for v in w["enum"])
        return _types(w)

    def _enum(self, w: Mapping[str, Any], r: Mapping[str, Any], path: str) -> list[str]:
        allowed = [r["const"]] if "const" in r else r.get("enum")
        if allowed is None:
            return []
        given = [w["const"]] if "const" in w else w.get("enum")
        if given is None:
            return [f"{path}: the reader allows only {allowed!r}, the writer any value"]
        extra = [v for v in given if v not in allowed]
        return [f"{path}: the reader does not allow {extra!r}"] if extra else []

    def _bounds(self, w: Mapping[str, Any], r: Mapping[str, Any], low: str, high: str, path: str) -> list[str]:
        out = []
        if low in r and w.get(low, 0) < r[low]:
            out.append(f"{path}: the reader's {low} {r[low]} is above the writer's {w.get(low, 0)}")
        if high in r and (high not in w or w[high] > r[high]):
            out.append(f"{path}: the reader's {high} {r[high]} is below the writer's {w.get(high, 'none')}")
        return out

    def _numbers(self, w: Mapping[str, Any], r: Mapping[str, Any], path: str) -> list[str]:
        out = []
        for inclusive, exclusive, sign in (("minimum", "exclusiveMinimum", 1), ("maximum", "exclusiveMaximum", -1)):
            reader = _bound(r, inclusive, exclusive, sign)
            if reader is None:
                continue
            writer = _bound(w, inclusive, exclusive, sign)
            # Bounds as (value, strict) scaled by sign, so "tighter" is "greater" for both ends.
            if writer is None or (writer[0] * sign, writer[1]) < (reader[0] * sign, reader[1]):
                out.append(f"{path}: the reader's {inclusive} bound is tighter than the writer's")
        if "multipleOf" in r:
            step = w.get("multipleOf")
            if step is None or (Fraction(str(step)) / Fraction(str(r["multipleOf"]))).denominator != 1:
                out.append(f"{path}: the reader's multipleOf {r['multipleOf']} does not divide the writer's")
        return out

    def _objects(
        self, w: dict[str, Any], wroot: Any, r: dict[str, Any], rroot: Any, path: str, depth: int
    ) -> list[str]:
        out = []
        missing = sorted(set(r.get("required", ())) - set(w.get("required", ())))
        if missing:
            out.append(f"{path}: the reader requires {', '.join(missing)}, which the writer does not")
        out += self._bounds(w, r, "minProperties", "maxProperties", path)
        if "patternProperties" in r and w.get("patternProperties") != r["patternProperties"]:
            out.append(f"{path}: the reader's patternProperties are not the writer's")
        w_props, r_props = w.get("properties", {}), r.get("properties", {})
        w_extra, r_extra = w.get("additionalProperties", True), r.get("additionalProperties", True)
        patterns = r.get("patternProperties", {})
        for name in sorted(set(w_props) | set(r_props)):
            if name not in r_props and _matches_any(name, patterns):
                continue  # the same pattern constrains it on both sides
            writer = w_props.get(name, w_extra)
            reader = r_props.get(name, r_extra)
            out += self.subset(writer, wroot, reader, rroot, f"{path}/properties/{name}", depth + 1)
        if not patterns or w.get("patternProperties") == patterns:
            out += self.subset(w_extra, wroot, r_extra, rroot, f"{path}/additionalProperties", depth + 1)
        return out

    def _arrays(self, w: dict[str, Any], wroot: Any, r: dict[str, Any], rroot: Any, path: str, depth: int) -> list[str]:
        out = self._bounds(w, r, "minItems", "maxItems", path)
        if r.get("uniqueItems") and not w.get("uniqueItems"):
            out.append(f"{path}: the reader requires unique items, the writer does not")
        tuples = (
            isinstance(w.get("items"), list)
            or isinstance(r.get("items"), list)
            or "prefixItems" in w
            or "prefixItems" in r
        )
        if tuples:
            for keyword in ("items", "additionalItems", "prefixItems"):
                if w.get(keyword) != r.get(keyword):
                    out.append(f"{path}: the reader's tuple {keyword} are not the writer's")
            return out
        return out + self.subset(w.get("items", True), wroot, r.get("items", True), rroot, f"{path}/items", depth + 1)


def _bound(schema: Mapping[str, Any], inclusive: str, exclusive: str, sign: int) -> tuple[float, bool] | None:
    """The tightest (value, strict) bound of one end; draft-04 boolean exclusives are read too."""
    found: list[tuple[float, bool]] = []
    if isinstance(schema.get(inclusive), (int, float)):
        found.append((schema[inclusive], schema.get(exclusive) is True))
    if isinstance(schema.get(exclusive), (int, float)) and not isinstance(schema.get(exclusive), bool):
        found.append((schema[exclusive], True))
    if not found:
        return None
    return max(found, key=lambda b: (b[0] * sign, b[1]))


def _matches_any(name: str, patterns: Mapping[str, Any]) -> bool:
    return any(re.search(p, name) for p in patterns)
