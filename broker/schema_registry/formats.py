"""The schema formats the registry takes, behind one interface: parse a text (with the texts of the schemas it
references), give the text to store (as written, or normalized), and say whether a reader schema reads data written
with a writer schema. Each format has its own compatibility rule: Avro's schema resolution, JSON Schema's "every
document the writer allows", Protobuf's wire format."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from odradek.broker.schema_registry import avro, json_schema, protobuf
from odradek.broker.schema_registry.errors import RegistryError, invalid_schema

AVRO = "AVRO"
JSON = "JSON"
PROTOBUF = "PROTOBUF"
FORMATS = (AVRO, JSON, PROTOBUF)


class ParsedSchema(Protocol):
    """A schema the registry accepted: its text as stored, and what compatibility checks need."""

    @property
    def schema_type(self) -> str: ...

    @property
    def text(self) -> str: ...

    def normalized(self) -> str: ...

    def formatted(self, fmt: str) -> str:
        """The schema in the form ``?format=`` names (the stored text where the format has one form)."""
        ...

    def can_read(self, writer: ParsedSchema) -> list[str]:
        """Why data written with ``writer`` cannot be read with this schema; empty when it can."""
        ...


@dataclass(frozen=True)
class AvroParsed:
    parsed: avro.AvroSchema
    schema_type: str = AVRO

    @property
    def text(self) -> str:
        return self.parsed.text

    def normalized(self) -> str:
        return avro.normalized_text(self.parsed)

    def formatted(self, fmt: str) -> str:
        return self.text

    def can_read(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, AvroParsed):
            return [f"a {AVRO} schema cannot read {writer.schema_type} data"]
        return avro.can_read(self.parsed.root, writer.parsed.root)


@dataclass(frozen=True)
class JsonParsed:
    parsed: json_schema.JsonSchema
    schema_type: str = JSON

    @property
    def text(self) -> str:
        return self.parsed.text

    def normalized(self) -> str:
        return json_schema.normalized_text(self.parsed)

    def formatted(self, fmt: str) -> str:
        return self.text

    def can_read(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, JsonParsed):
            return [f"a {JSON} schema cannot read {writer.schema_type} data"]
        return json_schema.can_read(self.parsed, writer.parsed)


@dataclass(frozen=True)
class ProtobufParsed:
    parsed: protobuf.ProtobufSchema
    schema_type: str = PROTOBUF

    @property
    def text(self) -> str:
        return self.parsed.text

    def normalized(self) -> str:
        return protobuf.normalized_text(self.parsed)

    def formatted(self, fmt: str) -> str:
        return self.parsed.formatted(fmt)

    def can_read(self, writer: ParsedSchema) -> list[str]:
        if not isinstance(writer, ProtobufParsed):
            return [f"a {PROTOBUF} schema cannot read {writer.schema_type} data"]
        return protobuf.can_read(self.parsed, writer.parsed)


def schema_types() -> list[str]:
    """What GET /schemas/types answers: the formats served."""
    return list(FORMATS)


def check_type(schema_type: str) -> str:
    """The format name of a request (Confluent's default is AVRO); a format not served is refused with 42201."""
    name = schema_type.upper() if schema_type else AVRO
    if name in FORMATS:
        return name
    raise invalid_schema(f"unknown schemaType {schema_type!r}")


def parse(schema_type: str, text: Any, references: Sequence[tuple[str, str]] = ()) -> ParsedSchema:
    """Parse ``text`` of ``schema_type``; ``references`` are the referenced schemas' (name, text), dependencies
    first. Raises RegistryError 42201 for an invalid schema."""
    name = check_type(schema_type)
    if not isinstance(text, str):
        raise invalid_schema("the schema must be a string")
    try:
        if name == AVRO:
            return AvroParsed(avro.parse(text, [t for _, t in references]))
        if name == JSON:
            return JsonParsed(json_schema.parse(text, references))
        if name == PROTOBUF:
            return ProtobufParsed(protobuf.parse(text, references))
    except (avro.AvroSchemaError, json_schema.JsonSchemaError, protobuf.ProtobufSchemaError) as e:
        raise invalid_schema(str(e)) from None
    except RecursionError:  # JSON or .proto nested beyond what the parsers' recursion takes
        raise invalid_schema("the schema is nested too deeply") from None
    raise RegistryError(500, 50001, f"no parser for {name}")  # check_type admits only the formats above
